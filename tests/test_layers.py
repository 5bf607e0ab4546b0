"""The package's modules import each other in layers: no cycle, even through
an import made inside a function (only ``if TYPE_CHECKING:`` blocks, which never
run, may point back)."""

from __future__ import annotations

import ast
from pathlib import Path

import kcpstream

PACKAGE = Path(kcpstream.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ["kcpstream", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _imports(tree: ast.AST):
    """Every import statement, at any depth, outside ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if _is_type_checking(node):
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node)


def _targets(module: str, is_package: bool, node, modules) -> set[str]:
    """The package's modules an import statement of ``module`` loads: a module
    named after ``from . import`` counts, not the package it is taken from."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in modules}
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        name = ".".join(base + ([node.module] if node.module else []))
    else:
        name = node.module or ""
    subs = {f"{name}.{a.name}" for a in node.names if f"{name}.{a.name}" in modules}
    if name in modules and len(subs) < len(node.names):
        subs.add(name)
    return subs


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        is_package = path.name == "__init__.py"
        found = set()
        for node in _imports(tree):
            found |= _targets(module, is_package, node, modules)
        # importing a module runs its parent packages first: that is no edge back
        graph[module] = {t for t in found if t != module and not module.startswith(t + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import(tmp_path):
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    tree = ast.parse("def f():\n    from .b import x\nif TYPE_CHECKING:\n    from .c import y\n")
    modules = {"p.a": None, "p.b": None, "p.c": None}
    found = set().union(*(_targets("p.a", False, n, modules) for n in _imports(tree)))
    assert found == {"p.b"}  # the function's import counts; the type checker's does not


def test_no_import_cycle_inside_the_package():
    graph = import_graph()
    assert len(graph) > 30 and "kcpstream.passes.data" in graph["kcpstream.engine.run"]
    assert cycles(graph) == []


#: dask's modules that are not its public API
DASK_INTERNALS = ("dask._task_spec", "dask.array.core", "dask.highlevelgraph")


def test_dask_internals_are_used_in_one_module_at_the_declared_floor():
    users = set()
    for module, path in _modules().items():
        for node in _imports(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            if any(n and n.startswith(DASK_INTERNALS) for n in names):
                users.add(module)
    assert users == {"kcpstream.tasks.internals"}
    import tomllib

    from kcpstream.tasks.internals import MIN_DASK

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    assert f"dask[array]>={MIN_DASK}" in project["dependencies"]


#: Most lines of a function's code (its docstring aside), compiled kernels excepted.
MAX_FUNCTION_LINES = 80


def _compiled(node: ast.AST) -> bool:
    """Decorated with numba's ``njit`` / ``jit`` (a kernel: one loop, kept whole)."""
    for dec in getattr(node, "decorator_list", []):
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("njit", "jit"):
            return True
    return False


def test_no_function_is_longer_than_eighty_lines_but_compiled_kernels():
    long = []
    for path in _modules().values():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or _compiled(node):
                continue
            lines = node.end_lineno - node.lineno + 1
            doc = node.body[0]
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                lines -= doc.end_lineno - doc.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                long.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_the_entry_point_module_stays_short():
    assert len((PACKAGE / "api.py").read_text().splitlines()) <= 200
