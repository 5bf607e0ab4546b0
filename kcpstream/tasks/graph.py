"""Many calls computed as one dask graph, at a cost linear in their number.

``dask.compute`` of a list of ``Delayed`` objects treats each as a collection:
their graphs are merged and each is culled, which costs more than linear
time in their number.  A data pass over a long archive has one call per
chunk, so :class:`TaskBatch` builds the calls as one raw graph instead and
hands it to the active scheduler's ``get`` (threads, processes, or a
distributed client's); ``benchmarks/results/design.md`` has the figures.
Nothing here creates a client.
"""

from __future__ import annotations

import contextlib
import pickle
import sys
import uuid
from collections.abc import Callable
from typing import Any

import cloudpickle
import dask
import dask.base
import dask.local
import dask.threaded

from kcpstream.tasks.internals import HighLevelGraph, MaterializedLayer, Task, TaskRef


def active_scheduler():
    """``dask.base.get_scheduler()``: the scheduler a compute would use (None:
    the collection's default).

    dask imports ``distributed`` to look for a client (half a second, on a
    first call that may need nothing else of it); with ``distributed`` not
    imported no client can exist, and only ``dask.config``'s scheduler counts.
    """
    if "distributed" not in sys.modules and dask.config.get("scheduler", None) is None:
        return None
    return dask.base.get_scheduler()


def active_client():
    """The distributed client that is the active scheduler, if one is."""
    client = getattr(active_scheduler(), "__self__", None)
    return client if client is not None and hasattr(client, "gather") else None


def in_process_scheduler() -> bool:
    """Whether the active scheduler runs tasks in this process (threads or
    synchronous), so that they may share its arrays without copies."""
    return active_scheduler() in (None, dask.threaded.get, dask.local.get_sync)


def pool_of_processes() -> bool:
    """Whether the active scheduler is a pool of processes made per computation
    (dask's ``processes``): neither this process nor a distributed cluster,
    whose workers keep what they hold between computations."""
    return not in_process_scheduler() and active_client() is None


class TaskBatch:
    """Calls ``func(*args)`` to compute together, results in the order added.

    A call made with ``home`` (a distributed worker's address) prefers that
    worker (allowed elsewhere if it is gone).  Arguments may hold references
    (``dask._task_spec.TaskRef``) to keys computed by the tasks of ``graph``
    given with the call, or held by the cluster already: their values are
    passed in their place.  With ``merge_per_thread``, under a distributed
    client, the calls preferring one worker become as many tasks as it has
    threads (for rounds of many short calls, where distributed's cost per
    task would dominate).
    """

    def __init__(self, name: str, merge_per_thread: bool = False) -> None:
        self._prefix = f"kcpstream-{name}-{uuid.uuid4().hex}"
        self._merge = merge_per_thread
        self._calls: list[tuple[Callable, tuple, str | None]] = []
        self._extra: dict = {}  # tasks the calls depend on
        self._dependencies: list[tuple[tuple, Task, str | None]] = []  # and their homes

    def __len__(self) -> int:
        return len(self._calls)

    def add(
        self, func: Callable, *args: Any, home: str | None = None, graph: dict | None = None
    ) -> None:
        self._calls.append((func, args, home))
        if graph:
            self._extra.update(graph)

    def dependency(
        self, func: Callable, *args: Any, home: str | None = None, graph: dict | None = None
    ) -> TaskRef:
        """A call whose value other calls of the batch take as an argument:
        they are given the reference returned, and get the value in its place
        (computed once, by one task, on worker ``home`` if it is given;
        ``graph``: the tasks it depends on)."""
        key = (f"{self._prefix}-dep", len(self._dependencies))
        if graph:
            self._extra.update(graph)
        self._dependencies.append((key, Task(key, func, *args), home))
        return TaskRef(key)

    def compute(self, progress: bool = False) -> list:
        """Run every call with the active scheduler; a progress bar on stderr if asked."""
        if not self._calls:
            return []
        client = active_client()
        if client is not None and self._merge and not progress and not self._dependencies:
            return self._compute_merged(client)
        keys = [(self._prefix, i) for i in range(len(self._calls))]
        layers: dict[str | None, dict] = {}
        for key, task, home in self._dependencies:
            layers.setdefault(home, {})[key] = task
        for key, (func, args, home) in zip(keys, self._calls, strict=True):
            layers.setdefault(home, {})[key] = Task(key, func, *args)
        if client is not None:
            graph = self._layered(layers)
            if not progress:
                return list(client.get(graph, keys, sync=True))
            from distributed import progress as progress_bar

            futures = client.get(graph, keys, sync=False)
            with contextlib.redirect_stdout(sys.stderr):
                progress_bar(futures, notebook=False)
            return list(client.gather(futures))
        dsk = {k: v for layer in (self._extra, *layers.values()) for k, v in layer.items()}
        get = active_scheduler() or dask.threaded.get
        alone = len(keys) == 1 and not self._dependencies
        if alone and not progress and in_process_scheduler():
            get = dask.local.get_sync  # one call: a thread pool would only add a hand-off
        if not progress:
            return list(get(dsk, keys))
        from dask.diagnostics import ProgressBar

        with ProgressBar(out=sys.stderr):
            return list(get(dsk, keys))

    def _compute_merged(self, client) -> list:
        """The calls preferring one worker as that worker's thread count of tasks
        (each runs its share in turn): a round of many short calls then pays the
        scheduler's cost per task a few times, not once per call, and, unless
        they take keys of a graph, sends its calls and gets their results as
        one pickle per task."""
        workers = client.scheduler_info().get("workers", {})
        threads = {w: int(info.get("nthreads", 1)) for w, info in workers.items()}
        by_home: dict[str | None, list[int]] = {}
        for i, (_, _, home) in enumerate(self._calls):
            by_home.setdefault(home, []).append(i)
        layers: dict[str | None, dict] = {}
        parts: list[tuple[tuple, list[int]]] = []
        tasks = [Task(None, func, *args) for func, args, _ in self._calls]
        # calls that take no key (of a graph, or held by the cluster) travel as one pickle
        packed = not self._extra and not any(t.dependencies for t in tasks)
        for home, members in by_home.items():
            n_tasks = len(members) if home is None else max(1, threads.get(home, 1))
            for k in range(min(n_tasks, len(members))):
                share = members[k::n_tasks]
                key = (self._prefix, len(parts))
                if packed:
                    calls = cloudpickle.dumps([self._calls[i][:2] for i in share])
                    task = Task(key, _packed_results, calls)
                else:
                    task = Task(key, _results, *(tasks[i] for i in share))
                layers.setdefault(home, {})[key] = task
                parts.append((key, share))
        found = client.get(self._layered(layers), [key for key, _ in parts], sync=True)
        out: list = [None] * len(self._calls)
        for (_, share), results in zip(parts, found, strict=True):
            for i, r in zip(share, pickle.loads(results) if packed else results, strict=True):
                out[i] = r
        return out

    def _layered(self, layers: dict[str | None, dict]) -> HighLevelGraph:
        """The calls as graph layers, one per preferred worker (annotated), over a
        layer of the tasks they depend on."""
        deps_name = f"{self._prefix}-deps"
        graph_layers = {deps_name: MaterializedLayer(self._extra)} if self._extra else {}
        dependencies: dict[str, set] = {deps_name: set()} if self._extra else {}
        for i, (home, dsk) in enumerate(layers.items()):
            where = None if home is None else {"workers": [home], "allow_other_workers": True}
            graph_layers[f"{self._prefix}-{i}"] = MaterializedLayer(dsk, annotations=where)
            dependencies[f"{self._prefix}-{i}"] = {deps_name} if self._extra else set()
        return HighLevelGraph(graph_layers, dependencies)


def _results(*values):
    """The results of a merged task's calls (computed as its arguments)."""
    return list(values)


def _packed_results(packed: bytes) -> bytes:
    """The results of a merged task's calls, as one pickle: its calls come as
    one too.  A round's calls and results hold thousands of small arrays
    (each piece's sums), which distributed would send as a frame each."""
    return pickle.dumps([func(*args) for func, args in pickle.loads(packed)], protocol=5)
