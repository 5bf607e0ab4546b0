"""The package's modules import each other in layers: no cycle, even through
an import made inside a function or an ``if TYPE_CHECKING:`` block; each
stage imports only its own modules and the stages below it; the search and
the selection import no I/O library; no record or signature grows past what
a reader can hold."""

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


def _imports(tree: ast.AST, typing: bool = False):
    """Every import statement, at any depth, outside ``if TYPE_CHECKING:``
    (inside it too with ``typing``)."""
    for node in ast.iter_child_nodes(tree):
        if _is_type_checking(node) and not typing:
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node, typing)


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


def import_graph(typing: bool = False) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``typing``: also those
    imported for the type checker only)."""
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        is_package = path.name == "__init__.py"
        found = set()
        for node in _imports(tree, typing):
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
    graph = import_graph(typing=True)
    assert len(graph) > 30 and "kcpstream.passes.data" in graph["kcpstream.engine.run"]
    assert cycles(graph) == []


#: The stages, lowest first: a module imports modules of its own stage and of
#: the stages before it only (docs/how-it-works.md, "The code", draws them).
STAGES = (
    ("foundation", ("kcpstream.errors", "kcpstream._version", "kcpstream.progress",
                    "kcpstream.metrics", "kcpstream.datasets")),
    ("kernels", ("kcpstream._kernels", "kcpstream.tasks")),
    ("features", ("kcpstream.features",)),
    ("search", ("kcpstream.search",)),
    ("selection", ("kcpstream.selection",)),
    ("inputs", ("kcpstream.inputs",)),
    ("persist", ("kcpstream.persist",)),
    ("passes", ("kcpstream.passes",)),
    ("results", ("kcpstream.result", "kcpstream.plot", "kcpstream.plotdata")),
    ("engine", ("kcpstream.engine",)),
    ("faces", ("kcpstream.api", "kcpstream.segmenter", "kcpstream.accessor",
               "kcpstream.warmup")),
    ("jobs", ("kcpstream.jobs",)),
)  # fmt: skip


def stage_of(module: str) -> int:
    """The rank of the stage a module belongs to."""
    if module == "kcpstream":  # the package's own module: what `import kcpstream` gives
        return [name for name, _ in STAGES].index("faces")
    for rank, (_, prefixes) in enumerate(STAGES):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    raise AssertionError(f"{module} belongs to no stage: add it to STAGES")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a module of a later stage, as ``a (stage) -> b (stage)``."""
    return sorted(
        f"{m} ({STAGES[stage_of(m)][0]}) -> {t} ({STAGES[stage_of(t)][0]})"
        for m, targets in graph.items()
        for t in targets
        if stage_of(t) > stage_of(m)
    )


def test_the_stage_check_sees_an_import_upward():
    assert upward_imports({"kcpstream.search.binseg": {"kcpstream.passes.scan"}}) == [
        "kcpstream.search.binseg (search) -> kcpstream.passes.scan (passes)"
    ]
    assert upward_imports({"kcpstream.passes.scan": {"kcpstream.search.binseg"}}) == []
    tree = ast.parse("if TYPE_CHECKING:\n    from .c import y\n")
    found = set().union(*(_targets("p.a", False, n, {"p.c": None}) for n in _imports(tree, True)))
    assert found == {"p.c"}  # the type checker's imports count for direction and cycles


def test_every_stage_imports_only_itself_and_the_stages_below():
    assert upward_imports(import_graph(typing=True)) == []


#: Libraries that read or schedule data: the search and the selection work on
#: block statistics alone.
IO_LIBRARIES = ("dask", "distributed", "zarr", "xarray", "fsspec", "s3fs", "pandas")


def test_search_and_selection_import_no_io_library_even_indirectly():
    graph = import_graph(typing=True)
    modules = _modules()
    pure = [m for m in graph if STAGES[stage_of(m)][0] in ("search", "selection")]
    assert "kcpstream.search.binseg" in pure and "kcpstream.selection.choose" in pure
    seen, todo = set(), list(pure)
    while todo:  # everything they import, transitively
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph[m])
    found = []
    for m in sorted(seen):
        for node in _imports(ast.parse(modules[m].read_text()), typing=True):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            found += [f"{m}: {n}" for n in names if n and n.split(".")[0] in IO_LIBRARIES]
    assert found == []


def test_the_top_level_holds_the_public_faces_only():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 14, top


def test_modules_moved_to_a_stage_import_under_their_old_name_with_a_warning():
    import importlib
    import sys
    import warnings

    from kcpstream.selection import significance

    sys.modules.pop("kcpstream.significance", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module("kcpstream.significance")
    assert old is significance
    assert any(
        issubclass(w.category, DeprecationWarning) and "kcpstream.selection.significance" in
        str(w.message) for w in caught
    )  # fmt: skip


#: Most fields of a record, and most positional parameters of a function
#: (compiled kernels and click commands aside).
MAX_FIELDS = 15
MAX_POSITIONAL = 8


def _decorators(node) -> list[str]:
    return [ast.unparse(d) for d in getattr(node, "decorator_list", [])]


def wide_records() -> list[str]:
    wide = []
    for path in _modules().values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any("dataclass" in d for d in _decorators(node)):
                fields = sum(isinstance(b, ast.AnnAssign) for b in node.body)
                if fields > MAX_FIELDS:
                    wide.append(f"{path.name} {node.name} ({fields} fields)")
    return sorted(wide)


def test_no_record_is_wider_than_fifteen_fields():
    assert wide_records() == []


#: FeatureMap's hook that hands a tile to a compiled kernel: the kernel's
#: arguments, in its order (kcpstream.features.base documents it).
KERNEL_HOOKS = ("accumulate_tile_stats",)


def test_no_function_takes_more_than_eight_positional_parameters():
    many = []
    for path in _modules().values():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef) or _compiled(node):
                continue
            if node.name in KERNEL_HOOKS:
                continue
            if any(d.startswith("click.") for d in _decorators(node)):
                continue
            args = [a.arg for a in node.args.posonlyargs + node.args.args]
            args = [a for a in args if a not in ("self", "cls")]
            if len(args) > MAX_POSITIONAL:
                many.append(f"{path.name}:{node.lineno} {node.name} ({len(args)})")
    assert many == []


def test_few_formatter_exemptions():
    skips = sum(p.read_text().count("# fmt: skip") for p in _modules().values())
    assert skips <= 10, skips


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
