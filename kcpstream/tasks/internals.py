"""Every use of dask's internals by kcpstream, in one place.

kcpstream builds its task graphs as dask's own (``Task``, ``TaskRef``,
``List``, high-level graph layers) and recognises ``da.from_array`` by the
layers it makes, to read a zarr array directly.  These are not dask's public
API: they are imported here only, and an installed dask without them is one
clear error naming the version kcpstream needs (the floor in
``pyproject.toml``, which ``tests/test_layers.py`` checks against
:data:`MIN_DASK`).
"""

from __future__ import annotations

from typing import Any

import dask

#: The oldest dask whose internals kcpstream uses as it does (pyproject's floor).
MIN_DASK = "2026.8"

try:
    from dask._task_spec import List, Task, TaskRef
    from dask.array.core import getter
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
except ImportError as exc:  # pragma: no cover - an older or newer dask
    raise ImportError(
        f"kcpstream needs dask >= {MIN_DASK} (dask {dask.__version__} is installed, and "
        f"lacks {exc.name or exc}); install a newer dask: pip install 'dask[array]>={MIN_DASK}'"
    ) from exc

__all__ = [
    "MIN_DASK",
    "HighLevelGraph",
    "List",
    "MaterializedLayer",
    "Task",
    "TaskRef",
    "array_source",
    "getter",
]


def array_source(x: Any) -> Any:
    """The array-like that ``x`` slices, when ``x`` is exactly ``da.from_array(obj)``
    (no lock, chunks converted to numpy by dask's ``getter``): ``x[a:b]`` is then
    ``getter(obj, a:b)``, one read for a run of chunks.  ``None`` otherwise (any
    other operation on top, a lock, an object embedded in every task)."""
    layers = getattr(getattr(x, "dask", None), "layers", None)
    original = f"original-{x.name}"
    if layers is None or set(layers) != {x.name, original}:
        return None
    source, slicing = layers[original], layers[x.name]
    task = getattr(slicing, "task", None)
    if not isinstance(source, MaterializedLayer) or set(source) != {original}:
        return None
    if getattr(task, "func", None) is not getter or getattr(task, "kwargs", None):
        return None
    obj = source[original]
    obj = getattr(obj, "value", obj)  # a DataNode holds it
    return obj if tuple(getattr(obj, "shape", ())) == tuple(x.shape) else None
