"""Many calls computed as one dask graph, at a cost linear in their number.

``dask.compute`` of a list of ``Delayed`` objects treats each as a collection:
their graphs are merged and each is culled, which costs more than linear
time in their number (about 6 s for 10^4 calls, 0.6 s for 2000).  A data pass
over a long archive has one call per chunk, so :class:`TaskBatch` builds the
calls as one raw graph instead and hands it to the active scheduler's ``get``
(threads, processes, or a distributed client's): about 70 us per call under
threads.  Nothing here creates a client.
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from collections.abc import Callable
from typing import Any

import dask
import dask.base
import dask.threaded
from dask._task_spec import Task
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

__all__ = ["TaskBatch", "active_client"]


def active_client():
    """The distributed client that is the active scheduler, if one is."""
    client = getattr(dask.base.get_scheduler(), "__self__", None)
    return client if client is not None and hasattr(client, "gather") else None


class TaskBatch:
    """Calls ``func(*args)`` to compute together, results in the order added.

    A call made with ``home`` (a distributed worker's address) prefers that
    worker (allowed elsewhere if it is gone); calls whose arguments hold dask
    collections (the chunks of an array a cluster holds) make the batch fall
    back to ``dask.compute`` of ``Delayed`` objects, which resolves them.
    """

    def __init__(self, name: str) -> None:
        self._prefix = f"kcpstream-{name}-{uuid.uuid4().hex}"
        self._calls: list[tuple[Callable, tuple, str | None]] = []
        self._collections = False

    def __len__(self) -> int:
        return len(self._calls)

    def add(self, func: Callable, *args: Any, home: str | None = None) -> None:
        self._calls.append((func, args, home))

    def add_with_collections(self, func: Callable, *args: Any, home: str | None = None) -> None:
        """A call some of whose arguments are dask collections (computed first)."""
        self._collections = True
        self.add(func, *args, home=home)

    def compute(self, progress: bool = False) -> list:
        """Run every call with the active scheduler; a progress bar on stderr if asked."""
        if not self._calls:
            return []
        if self._collections:
            return self._compute_delayed(progress)
        keys = [(self._prefix, i) for i in range(len(self._calls))]
        layers: dict[str | None, dict] = {}
        for key, (func, args, home) in zip(keys, self._calls, strict=True):
            layers.setdefault(home, {})[key] = Task(key, func, *args)
        client = active_client()
        if client is not None:
            graph = HighLevelGraph(
                {
                    f"{self._prefix}-{i}": MaterializedLayer(
                        dsk,
                        annotations=None
                        if home is None
                        else {"workers": [home], "allow_other_workers": True},
                    )
                    for i, (home, dsk) in enumerate(layers.items())
                },
                {f"{self._prefix}-{i}": set() for i in range(len(layers))},
            )
            if not progress:
                return list(client.get(graph, keys, sync=True))
            from distributed import progress as progress_bar

            futures = client.get(graph, keys, sync=False)
            with contextlib.redirect_stdout(sys.stderr):
                progress_bar(futures, notebook=False)
            return list(client.gather(futures))
        dsk = {k: v for layer in layers.values() for k, v in layer.items()}
        get = dask.base.get_scheduler() or dask.threaded.get
        if not progress:
            return list(get(dsk, keys))
        from dask.diagnostics import ProgressBar

        with ProgressBar(out=sys.stderr):
            return list(get(dsk, keys))

    def _compute_delayed(self, progress: bool) -> list:
        tasks = []
        for func, args, home in self._calls:
            where = (
                contextlib.nullcontext()
                if home is None
                else dask.annotate(workers=[home], allow_other_workers=True)
            )
            with where:
                tasks.append(dask.delayed(func, pure=False)(*args))
        client = active_client()
        if progress and client is not None:
            from distributed import progress as progress_bar

            futures = client.compute(tasks)
            with contextlib.redirect_stdout(sys.stderr):
                progress_bar(futures, notebook=False)
            return list(client.gather(futures))
        if progress:
            from dask.diagnostics import ProgressBar

            with ProgressBar(out=sys.stderr):
                return list(dask.compute(*tasks))
        return list(dask.compute(*tasks))
