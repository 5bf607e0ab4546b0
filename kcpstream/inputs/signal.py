"""Inputs to one ``(n, d)`` dask array along time, and every input check.

numpy, dask, zarr arrays, paths to zarr stores and xarray DataArrays all
become a :class:`Signal`: a dask array chunked along time only, so a single
code path (the data pass) serves every input.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.core import get_dependencies
from dask.local import get_sync

from kcpstream.errors import InputError
from kcpstream.inputs import provenance as pv
from kcpstream.inputs.checks import check_dtype, default_chunk
from kcpstream.inputs.stores import open_decoded, open_zarr
from kcpstream.tasks.graph import in_process_scheduler
from kcpstream.tasks.internals import List, TaskRef, array_source, getter

#: Largest number of samples a series may have (1.1e12).  Its exact int64 sums
#: are held on a grid of ``2**-22`` of the largest feature
#: (:meth:`kcpstream.features.base.FeatureMap.holding`), still far finer than
#: the kernel approximation (``benchmarks/results/headroom.md``); the grid and
#: the bookkeeping sizes are tested up to here (``tests/test_headroom.py``).
MAX_SAMPLES = 2**40


#: Series longer than this are planned on their *epoch*, the largest power of
#: two not above their length: see :func:`epoch_length`.
EPOCH_MIN = 2**21

#: Series longer than this draw their fit sample from their epoch (shorter
#: ones from all their samples): from here on the default features search the
#: block grid (``n * 64`` values past ``DENSE_MAX_VALUES``), whose statistics
#: a checkpoint updates after an append only when the fitted map is the same.
#: Below :data:`EPOCH_MIN` the block grid (64 samples a block) does not move
#: with ``n`` anyway.
FIT_EPOCH_MIN = 2**16


def epoch_length(n: int) -> int:
    """The samples the fit sample is drawn from: ``n`` itself up to
    :data:`FIT_EPOCH_MIN` samples, beyond it the largest power of two not above
    ``n`` (past :data:`EPOCH_MIN`, the block grid and default ``min_size``
    follow the same epoch, see :func:`kcpstream.engine.plan.planned_length`).
    An archive that grows keeps its fit and block grid (so a checkpoint of it
    stays usable: only the new chunks are read) until its length doubles; the
    fit still covers at least half of it."""
    n = int(n)
    return n if n <= FIT_EPOCH_MIN else 1 << (n.bit_length() - 1)


def fit_windows(n: int, max_points: int = 2048, max_windows: int = 8) -> list[tuple[int, int]]:
    """The ``[start, end)`` windows of the fit sample of a series of ``n``
    samples: ``max_windows`` evenly spaced windows of ``max_points //
    max_windows`` samples within the first :func:`epoch_length` of them (all
    of them when they are fewer than ``max_points``)."""
    n = epoch_length(n)
    if n <= max_points:
        return [(0, n)]
    width = max(1, max_points // max_windows)
    starts = np.unique(np.linspace(0, n - width, max_windows).round().astype(np.int64))
    return [(int(s), int(s) + width) for s in starts]


@dataclass(frozen=True)
class Signal:
    """A signal of ``n`` samples in ``d`` channels as a dask array ``(n, d)``.

    Attributes
    ----------
    data : dask.array.Array
        Shape (n, d), chunked along the first axis only.
    description : str
        Where the data comes from (for messages and fingerprints).
    source : dict
        Identification of the source: kind, path, variable, dtype.
    """

    data: da.Array
    description: str
    source: dict[str, Any] = field(default_factory=dict)
    time: Any = None  #: kcpstream.inputs.labeled.TimeAxis of a labelled input (else positions)
    #: What ``data`` reads, unchanged (``data[a:b]`` holds ``store_array[a:b]``): a
    #: zarr array, a numpy array, or an array-like ``data`` was made from with
    #: ``da.from_array`` (an xarray variable opened lazily): runs of chunks are then
    #: sliced from it directly, one read each (all but zarr arrays only under an
    #: in-process scheduler, see ChunkReader).
    store_array: Any = field(default=None, compare=False, repr=False)
    #: What the samples are read from (kcpstream.inputs.provenance.Origin): the
    #: identity a checkpoint is keyed on.  None: not known.
    origin: Any = field(default=None, compare=False, repr=False)
    #: The valid samples' positions in the input this signal holds the valid
    #: samples of (kcpstream.inputs.gaps.ValidPositions); None: no sample was left out.
    valid: Any = field(default=None, compare=False, repr=False)
    #: A sample with a NaN is left out as missing (else the NaN is an InputError).
    skipna: bool = True
    #: The samples the fit sample is drawn from the first :func:`epoch_length` of,
    #: when not ``n``: a signal of windows draws from the windows of its series'
    #: epoch, so that its fit holds while the series grows (see :func:`window_signal`).
    fit_length: int | None = field(default=None, compare=False, repr=False)

    @cached_property
    def identity(self) -> str | None:
        """A hash that changes whenever the samples may have (the store's chunk
        versions, an in-memory array's bytes), or None when it cannot be told."""
        return None if self.origin is None else self.origin.identity()

    @property
    def n(self) -> int:
        return int(self.data.shape[0])

    @property
    def d(self) -> int:
        return int(self.data.shape[1])

    @property
    def row_bytes(self) -> int:
        """Bytes of one sample (all channels)."""
        return self.d * self.data.dtype.itemsize

    @property
    def chunk_starts(self) -> np.ndarray:
        """Start index of every chunk, plus ``n`` at the end."""
        return _chunk_starts(self.data)

    @property
    def read_starts(self) -> np.ndarray:
        """Where each chunk's read starts in what is read, then where the last
        one's ends: :attr:`chunk_starts`, or for the valid samples of a series
        with gaps, the input's rows under each chunk (its gaps are read with
        it).  Tasks group chunks by the samples they read."""
        return self.chunk_starts if self.valid is None else self.valid.read_starts

    @cached_property
    def reader(self) -> ChunkReader:
        """Reads runs of chunks inside tasks (see :class:`ChunkReader`)."""
        stores = () if self.origin is None else tuple(st for st, _ in self.origin.stores)
        return ChunkReader(self.data, self.store_array, ReadContext(self.description, stores))

    @property
    def fit_n(self) -> int:
        """The samples the fit sample's epoch is taken of (:attr:`fit_length`, or ``n``)."""
        return self.n if self.fit_length is None else self.fit_length

    def fit_windows(self, max_points: int = 2048, max_windows: int = 8) -> list[tuple[int, int]]:
        """The ``[start, end)`` windows of the fit sample (see :meth:`sample`),
        within the first :func:`epoch_length` samples (of :attr:`fit_n`)."""
        return fit_windows(self.fit_n, max_points, max_windows)

    def sample(self, max_points: int = 2048, max_windows: int = 8) -> np.ndarray:
        """A fit sample (float64, shape (m, d)): ``max_windows`` evenly spaced
        windows of ``max_points // max_windows`` consecutive samples (over the
        series' first :func:`epoch_length` samples: all of it up to
        :data:`EPOCH_MIN`, at least half beyond).

        The windows are placed in time, not by chunk, so the sample (and the
        fitted feature map) is the same for every chunking of the same data.
        Only the chunks that the windows overlap are read
        (:func:`kcpstream.passes.data.fit_sample` reads them whole through a job's
        sample cache instead, so that the data pass does not read them again).
        """
        windows = self.fit_windows(max_points, max_windows)
        rows = dask.compute(*[self.data[a:b] for a, b in windows])
        return np.concatenate([np.asarray(r, dtype=np.float64) for r in rows], axis=0)


@dataclass(frozen=True)
class ReadContext:
    """What a failed read is reported with: the signal and the zarr arrays under it."""

    description: str
    stores: tuple = ()

    def error(self, start: int, end: int, exc: Exception) -> InputError:
        """The :class:`InputError` for samples ``[start, end)`` failing to read,
        naming the damaged chunk (and only its samples) when a store has it."""

        found, complete = pv.find_damaged(self.stores, start, end)
        computed = found is None and complete  # every stored chunk reads: the graph failed
        where = "a chunk under them fails to read"
        if found is not None:
            where, exc = f"{found.label} fails to read", found.error
            start, end = found.samples or (start, end)
        elif computed:
            where = "computing them from the input's dask graph fails"
        if isinstance(exc, pv.ChunkAbsent):
            fix = (
                "it was removed after the store was listed (while it was read): run "
                "again once the store is complete"
            )
        elif isinstance(exc, OSError):
            # refused, timed out, unreachable: the store's answer, not the chunk's bytes
            fix = "check access to the store (credentials, network) and run again"
        elif isinstance(exc, ImportError):  # a codec's or the input's computation's
            fix = f"a package is missing: install {exc.name or 'it'} and run again"
        elif computed:
            fix = "fix the computation that makes the input, and run again"
        else:
            fix = "the chunk is damaged: restore or rewrite it"
        return InputError(
            f"cannot read samples [{start}, {end}) of {self.description}: {where} "
            f"({type(exc).__name__}: {exc}); {fix}"
        )


class SourceSlice:
    """Chunks ``[start, end)`` of a signal, read only when a task asks for them.

    It carries the part of the array's graph those chunks need (for a zarr
    store: the array handle and the chunks' read tasks), so the read happens
    inside the task that uses the samples, after that task has looked in its
    process's sample cache.  Chunks already held by a cluster (a persisted
    array) are passed to the task as its dependencies instead.
    """

    def __init__(
        self,
        graph: dict | None,
        keys: list | None,
        starts: np.ndarray,
        parts: list | None = None,
        array: Any = None,
        context: ReadContext | None = None,
    ) -> None:
        self.graph, self.keys, self.parts, self.array = graph, keys, parts, array
        self.context = context
        self.starts = starts  # chunk boundaries: the chunks and their end
        self.start, self.end = int(starts[0]), int(starts[-1])

    def read(self) -> np.ndarray:
        """The samples, shape ``(end - start, d)`` (one chunk: no copy)."""
        try:
            return self._read()
        except InputError:
            raise
        except Exception as exc:  # a codec's or a store's error: name the samples
            if self.context is None:
                raise
            raise self.context.error(self.start, self.end, exc) from exc

    def _read(self) -> np.ndarray:
        if self.array is not None:
            return _rows(self.array[self.start : self.end])
        parts = self.read_chunks(range(len(self.keys)))
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    def read_chunks(self, indices) -> list[np.ndarray]:
        """Chunks ``indices`` (positions in this slice), each as its own array
        (consecutive chunks of a zarr array: views of one read)."""
        indices = list(indices)
        try:
            return self._read_chunks(indices)
        except InputError:
            raise
        except Exception as exc:  # a codec's or a store's error: name the samples
            if self.context is None or not indices:
                raise
            a, b = self.starts[min(indices)], self.starts[max(indices) + 1]
            raise self.context.error(int(a), int(b), exc) from exc

    def _read_chunks(self, indices: list[int]) -> list[np.ndarray]:
        if self.array is not None:
            out = []
            for group in np.split(indices, np.flatnonzero(np.diff(indices) != 1) + 1):
                if not len(group):
                    continue
                a, b = self.starts[group[0]], self.starts[group[-1] + 1]
                x = _rows(self.array[a:b])
                out += [x[self.starts[i] - a : self.starts[i + 1] - a] for i in group]
            return out
        if self.parts is not None:
            return [np.asarray(self.parts[i]) for i in indices]
        keys = [self.keys[i] for i in indices]
        graph = self.graph if len(keys) == len(self.keys) else _subgraph(self.graph, keys)
        return [np.asarray(x) for x in get_sync(graph, keys)]


def _with_parts(func, source: SourceSlice, parts: list, *args):
    """Call ``func`` on a slice whose chunks dask computed as dependencies."""
    return func(SourceSlice(None, source.keys, source.starts, parts), *args)


def _chunk_starts(data: da.Array) -> np.ndarray:
    """Start index of every chunk of ``data`` along time, plus its length."""
    return np.concatenate([[0], np.cumsum(data.chunks[0])]).astype(np.int64)


def _rows(x) -> np.ndarray:
    """Samples as ``(length, d)``."""
    x = np.asarray(x)
    return x[:, None] if x.ndim == 1 else x


def _subgraph(graph: dict, keys: list, deps: dict | None = None) -> dict:
    """The tasks of ``graph`` that ``keys`` need (``deps``: each key's dependencies);
    keys the graph does not hold (a cluster's) are left out."""
    out: dict = {}
    todo = list(keys)
    while todo:
        key = todo.pop()
        if key not in out and key in graph:
            out[key] = graph[key]
            todo.extend(deps[key] if deps is not None else _dependencies(graph, key))
    return out


def _dependencies(graph: dict, key) -> set:
    """The keys a task of ``graph`` needs, including keys the graph does not hold."""
    node = graph[key]
    deps = getattr(node, "dependencies", None)  # a dask task spec node knows them all
    return set(deps) if deps is not None else get_dependencies(graph, key)


class ChunkReader:
    """The chunks of a signal's dask array, as tasks that read them.

    The array's optimized graph is materialised once; a task on a run of
    chunks carries only the graph those chunks depend on, so making one costs
    microseconds and the read and its use are a single task.  When the graph
    refers to keys it does not hold (an array persisted on a cluster), tasks
    take the chunks as dependencies instead.  A signal read straight from a
    zarr array (``store_array``) needs no graph: a task reads its run of
    chunks with one zarr call.  So do a numpy array and the array-like of
    ``da.from_array`` (an xarray variable of a zarr store, say) under an
    in-process scheduler (threads or synchronous: no copies); a distributed
    or multiprocessing scheduler gets them once, through the graph, instead
    of a copy with every task.
    """

    def __init__(
        self, data: da.Array, store_array: Any = None, context: ReadContext | None = None
    ) -> None:
        self.starts = _chunk_starts(data)
        self.context = context
        if not _is_zarr_array(store_array) and not in_process_scheduler():
            store_array = None  # a numpy array or an array-like: sent once, in the graph
        self._array = store_array
        if store_array is not None:  # read the array directly: no graph to keep
            self._keys = [None] * len(data.chunks[0])
            self.self_contained = True
            return
        (opt,) = dask.optimize(data)
        self._graph = dict(opt.__dask_graph__())
        self._keys = [row[0] for row in opt.__dask_keys__()]  # one chunk along channels
        self._deps = {k: _dependencies(self._graph, k) for k in self._graph}
        self.self_contained = all(d in self._graph for ds in self._deps.values() for d in ds)

    @property
    def n_chunks(self) -> int:
        return len(self._keys)

    def run(self, first: int, last: int) -> SourceSlice:
        """Chunks ``first .. last`` (inclusive)."""
        keys = self._keys[first : last + 1]
        starts = self.starts[first : last + 2]
        if self._array is not None:
            return SourceSlice(None, None, starts, array=self._array, context=self.context)
        if not self.self_contained:
            return SourceSlice(None, keys, starts)
        graph = _subgraph(self._graph, keys, self._deps)
        return SourceSlice(graph, keys, starts, context=self.context)

    def add_task(self, batch, func, first: int, last: int, *args, home: str | None = None) -> None:
        """Add ``func(slice of chunks first .. last, *args)`` to a
        :class:`~kcpstream.tasks.graph.TaskBatch` (to prefer worker ``home``)."""
        call, graph = self._call(func, first, last, args)
        batch.add(*call, home=home, graph=graph)

    def add_dependency(self, batch, func, first: int, last: int, *args, home: str | None = None):
        """:meth:`add_task` as a :meth:`~kcpstream.tasks.graph.TaskBatch.dependency`
        of the batch's calls: returns the reference to its value."""
        call, graph = self._call(func, first, last, args)
        return batch.dependency(*call, home=home, graph=graph)

    def _call(self, func, first: int, last: int, args: tuple) -> tuple[tuple, dict | None]:
        """``(func, source, *args)`` on chunks ``first .. last`` and the graph it needs."""
        source = self.run(first, last)
        if self.self_contained:
            return (func, source, *args), None
        # the chunks are the task's dependencies, made from keys the cluster holds
        keys = self._keys[first : last + 1]
        parts = List(*(TaskRef(k) for k in keys))
        graph = _subgraph(self._graph, keys, self._deps)
        return (_with_parts, func, source, parts, *args), graph


class NonFiniteInput(InputError):
    """A series holds NaN or inf where the search cannot take it.  Internal:
    the engine catches it, segments a series with NaN as its valid samples
    (:mod:`kcpstream.inputs.gaps`), and raises the one-line :class:`InputError`
    for an infinity or for NaN that may not be skipped.

    ``position``: the index of the first non-finite sample, -1 when not known;
    ``series``: the positions of the series it was found in, among those a
    pass was given; ``passed``: that pass's results for the others;
    ``gaps_of``: by position, where the pass found each one's missing samples
    (a ``kcpstream.inputs.gaps.GapMap``, or None); ``gaps``: one series'."""

    def __init__(self, message: str, position: int = -1) -> None:
        super().__init__(message, position)
        self.position = int(position)
        self.series: list[int] = []
        self.passed: list = []
        self.gaps_of: dict = {}
        self.gaps = None

    def __str__(self) -> str:
        return str(self.args[0])


def check_finite_index(first_bad: int | None, description: str) -> None:
    """Raise :class:`~kcpstream.errors.NonFiniteInput` for the first non-finite
    sample, if there is one (the engine skips NaN, or says what it found)."""
    if first_bad is not None:
        raise NonFiniteInput(
            f"{description} contains NaN or inf; the first non-finite sample is at index "
            f"{first_bad}",
            first_bad,
        )


def as_signal(
    data: Any,
    *,
    variable: str | None = None,
    variables: list[str] | None = None,
    dim: str | None = None,
    chunks: int | None = None,
    missing: str = "error",
    skipna: bool = True,
    storage_options: dict | None = None,
    listed: dict | None = None,
    series: str | None = None,
) -> Signal:
    """Normalise any supported input to a :class:`Signal`.

    Parameters
    ----------
    data : numpy array, dask array, zarr array, xarray DataArray or Dataset, or path/URL
        ``(n,)`` or ``(n, d)`` with time first; a path opens a zarr store
        (``variable`` names the array inside a group).  A DataArray's other
        dimensions, and a Dataset's variables, become channels.
    variable : str, optional
        Array name inside a zarr group.
    variables : list of str, optional
        Variables of a Dataset to segment jointly (default: all with ``dim``).
    dim : str, optional
        Time dimension of an xarray object (default: ``"time"``, or the only one).
    chunks : int, optional
        Chunk length along time for in-memory input (default: a few chunks per
        core, at most 2**20 samples; numpy arrays are wrapped without a copy);
        for a zarr store, rounded up to whole stored chunks.
    missing : {"error", "skip", "fill"}
        What an absent chunk of a zarr store is: an :class:`InputError` naming
        its samples (default: a lost chunk may be data loss), missing samples
        (``"skip"``: a gap, see ``skipna``), or the array's fill value (for
        stores that leave out chunks that are all fill values).
    skipna : bool
        A sample with a NaN in any channel is missing, left out of the
        statistics (default), or (False) an :class:`InputError`.
    storage_options : dict, optional
        Options of the object store a URL opens (fsspec's: ``endpoint_url``,
        ``key``, ``secret``, ``anon``, ``client_kwargs``, ...).
    listed : dict, optional
        Store listings already made (by zarr array), shared by the series of a batch.
    series : str, optional
        Which series of a batch this is (``"sensor='b'"``): every message about
        it names it.
    """
    if missing not in pv.MISSING_CHOICES:
        raise InputError(f"missing={missing!r} is not one of {', '.join(pv.MISSING_CHOICES)}")
    if not isinstance(skipna, bool | np.bool_):
        raise InputError(
            f"skipna must be True (leave samples with NaN out as gaps) or False (refuse "
            f"them), got {skipna!r}"
        )
    if chunks is not None and (
        isinstance(chunks, bool) or not isinstance(chunks, int | np.integer) or chunks < 1
    ):
        raise InputError(f"chunks must be a positive number of samples, got {chunks!r}")
    if storage_options is not None and not isinstance(storage_options, dict):
        raise InputError(
            f"storage_options must be a dict of the object store's options, got "
            f"{type(storage_options).__name__}"
        )
    if _is_pandas(data):  # its index is the time axis: go through xarray
        data = _pandas_as_xarray(data)
    read = _read_input(data, variable, variables, dim, chunks, storage_options, missing)
    # a series read through dask is checked with its whole store: what is wrong
    # there (a chunk of any series) is not said of this one
    store_description = read.description
    if series is not None:
        read.description = f"{read.description} at {series}"
        if isinstance(read.store_array, CheckedArray):
            read.store_array = CheckedArray(
                read.store_array.array, read.description, read.store_array.upcast
            )
    x = _time_first(read, dim)
    if x.dtype == np.float16:  # the kernels compute in float32 or float64
        x = x.astype(np.float32)
        if isinstance(read.store_array, CheckedArray):
            read.store_array = CheckedArray(read.store_array.array, read.description, upcast=True)
        else:
            read.store_array = None  # read through the graph, which casts each chunk
    x = _rechunked(x, read, chunks)
    n = int(x.shape[0])
    if n == 0 or x.shape[1] == 0:
        raise InputError(
            f"{read.description} is empty (shape {tuple(x.shape)}); nothing to segment"
        )
    if n > MAX_SAMPLES:
        raise InputError(
            f"{read.description} has {n} samples, more than the {MAX_SAMPLES} one series may "
            "have; split it into consecutive series"
        )
    read.source.update(shape=list(x.shape), dtype=str(x.dtype))
    origin = pv.open_origin(
        read.stores,
        read.arrays,
        read.token,
        read.description if read.direct else store_description,
        missing,
        listed,
        read.direct,
    )
    return Signal(
        data=x,
        description=read.description,
        source=read.source,
        time=read.time,
        store_array=read.store_array,
        origin=origin,
        skipna=bool(skipna),
    )


def batch_signals(
    data: Any, batch_dims: str | list[str], **kwargs: Any
) -> tuple[list[str], list[dict[str, Any]], list[Signal], list[Any]]:
    """The independent series of an xarray object along ``batch_dims``: the
    dimensions, each series' labels, its :class:`Signal` (``kwargs`` as
    :func:`as_signal` takes them) and its part of ``data``."""
    from kcpstream.inputs.labeled import split_batches

    if not _is_labeled(data):
        raise InputError(
            "batch_dims applies to xarray input (a DataArray or a Dataset, e.g. a store "
            "opened with xarray.open_zarr)"
        )
    dims = [batch_dims] if isinstance(batch_dims, str) else list(batch_dims)
    twice = next((b for k, b in enumerate(dims) if b in dims[:k]), None)
    if twice is not None:
        raise InputError(f"batch_dims names {twice!r} twice; name each dimension once")
    # without dim=, the time dimension is "time" where the data has one
    time_dim = kwargs.get("dim") or "time"
    if time_dim in dims and (kwargs.get("dim") or time_dim in data.dims):
        raise InputError(
            f"{time_dim!r} is the time dimension, so it cannot be a batch dimension: "
            "batch_dims names the dimensions that tell series apart (e.g. 'sensor'), and "
            "dim= the one along which each series runs"
        )
    parts = split_batches(data, dims)
    listed: dict = {}  # each store is listed once for the whole batch
    signals = []
    for labels, sub in parts:
        name = ", ".join(f"{k}={_label(v)}" for k, v in labels.items())
        try:
            signals.append(as_signal(sub, listed=listed, series=name, **kwargs))
        except InputError as exc:
            if pv.stored_array(sub) is None or name in str(exc):
                # a dask-backed series is checked with its whole store: the error
                # (a chunk of any series) is not this series' own
                raise
            raise InputError(f"series {name}: {exc}") from None
    return dims, [labels for labels, _ in parts], signals, [sub for _, sub in parts]


def _label(value: Any) -> str:
    """A batch coordinate's value as a message shows it: text quoted."""
    return repr(value) if isinstance(value, str) else str(value)


@dataclass
class _Input:
    """An input as read, before the checks every kind shares (:func:`as_signal`)."""

    x: da.Array
    description: str
    source: dict[str, Any]
    store_array: Any = None  # what a run of chunks is sliced from (see Signal.store_array)
    time: Any = None
    stores: list = field(default_factory=list)  # provenance.StoredArray of each store read
    arrays: list = field(default_factory=list)  # in-memory arrays the samples come from
    token: str = ""
    direct: bool = False  # data[i] is row i of the one store read (see Origin.direct)
    stored_chunk: int = 0  # a zarr store's chunk length along time


def _read_input(data, variable, variables, dim, chunks, storage_options, missing="error") -> _Input:
    """Any supported input as a dask array and what it is read from."""
    if storage_options and not isinstance(data, str | os.PathLike):
        raise InputError(
            "storage_options applies to a store given by its URL (e.g. "
            "'s3://bucket/archive.zarr'); this input is already opened: give the "
            "options where it is opened, or pass the URL"
        )
    if isinstance(data, str | os.PathLike):
        opened = open_zarr(data, variable, storage_options)
        arr = opened.array
        if opened.group is None or pv.stored_as_values(arr):
            read = _from_path(data, variable, dim, arr, opened.description, opened.group, missing)
            # a store that is one CF-encoded array: decoded chunk by chunk
            return read if pv.stored_as_values(arr) else _decoded(read, arr)
        # CF-encoded values (a scale, a fill value to mask): xarray decodes them
        data = open_decoded(opened.group_path, opened.name, storage_options)
    if _is_zarr_array(data):
        description = f"zarr array {getattr(data, 'path', '') or '<root>'}"
        source = {"kind": "zarr-array", "path": str(getattr(data, "store", "")), "name": data.path}
        from kcpstream.inputs.labeled import stored_time_axis

        _check_dim(stored_time_axis(None, data, dim), dim, description)
        read = _stored(data, description, source, missing)
        return read if pv.stored_as_values(data) else _decoded(read, data)
    if isinstance(data, da.Array):
        _check_dim(None, dim, "a dask array")
        stores, arrays = pv.graph_sources(data)
        store_array = _direct(array_source(data), "dask array")
        return _Input(
            data,
            "dask array",
            {"kind": "dask", "name": data.name},
            store_array,
            stores=stores,
            arrays=arrays,
            token=data.name,
        )
    if _is_labeled(data):
        return _from_labeled(data, dim, variables, chunks)
    if variable is not None:
        raise InputError("variable= applies to zarr stores only; pass the array itself")
    _check_dim(None, dim, "an array")
    if isinstance(data, np.ma.MaskedArray) and np.ma.getmask(data) is not np.ma.nomask:
        # masked values are missing samples: NaN (in floats wide enough for the values)
        data = np.ma.filled(data.astype(np.result_type(data.dtype, np.float32)), np.nan)
    return _from_numpy(np.asarray(data), chunks)


def _decoded(read: _Input, arr: Any) -> _Input:
    """``read`` of the CF-encoded zarr array ``arr``, its stored numbers decoded
    chunk by chunk as xarray decodes them (:func:`decode_cf`): a fill value is
    a missing sample, never a value."""
    attrs = pv.cf_attrs(arr)
    dtype = decode_cf(np.zeros((1,) * read.x.ndim, arr.dtype), attrs).dtype
    read.x = read.x.map_blocks(decode_cf, attrs, dtype=dtype)
    read.store_array = None  # (read through the graph, which decodes)
    return read


def _check_dim(axis: Any, dim: str | None, description: str) -> None:
    """An :class:`InputError` for a ``dim`` that names nothing of an input whose
    time runs along its first axis (``axis``: its :class:`TimeAxis` when the
    store names its dimensions, checked against ``dim`` there; else None)."""
    if dim is None or axis is not None:
        return
    raise InputError(
        f"dim={dim!r} names the time dimension of labelled input (an xarray object, or a "
        f"store whose arrays name their dimensions); {description} names none, and its "
        "time runs along its first axis: omit dim"
    )


def decode_cf(block: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    """A block of a zarr array's stored numbers as values, decoded as xarray
    decodes them (scale, offset; a fill value or ``missing_value`` as NaN)."""
    import warnings

    import xarray as xr

    var = xr.Variable(tuple(f"dim_{i}" for i in range(block.ndim)), block, attrs)
    with warnings.catch_warnings():  # xarray's notes on decoding defaults
        warnings.simplefilter("ignore")
        out = xr.conventions.decode_cf_variable(
            "v", var, decode_times=False, decode_timedelta=False
        )
    return np.asarray(out.values)


def _stored(arr, description: str, source: dict, missing: str = "error") -> _Input:
    """A zarr array read directly, chunk runs sliced from it (an absent chunk
    an error at read time too with ``missing == "error"``, missing samples with
    ``"skip"``, the fill value with ``"fill"``)."""
    if missing == "error":
        reader = pv.strict_reader(arr)
    elif missing == "skip":
        reader = pv.gap_reader(arr, description)
    else:
        reader = arr
    store_array = CheckedArray(reader, description)
    rows = int(arr.shape[0]) if arr.ndim else 0
    return _Input(
        _from_zarr(store_array),
        description,
        source,
        store_array,
        stores=[pv.StoredArray(arr, 0, (0, rows))],
        direct=True,
        stored_chunk=int(arr.chunks[0]) if arr.ndim else 0,
    )


def _from_path(data, variable, dim, arr, description: str, group, missing: str = "error") -> _Input:
    """A zarr store opened by path or URL: its array, and its group's time coordinate."""
    from kcpstream.inputs.labeled import stored_time_axis

    source = {"kind": "zarr", "path": os.fspath(data), "variable": variable, "dim": dim}
    read = _stored(arr, description, source, missing)
    read.time = stored_time_axis(group, arr, dim)
    _check_dim(read.time, dim, description)
    return read


def _from_labeled(data, dim, variables, chunks) -> _Input:
    """An xarray DataArray or Dataset: channels, time axis, the store behind it if any."""
    from kcpstream.inputs.labeled import labeled_signal

    x, time, description, origin = labeled_signal(data, dim, variables, chunks)
    source = {"kind": "xarray", "name": str(getattr(data, "name", "") or "")}
    read = _Input(x, description, source, _direct(origin, description), time=time)
    found = pv.stored_array(data, time.dim)
    if found is not None:
        read.stores, read.token, read.direct = [found], f"xarray|{time.dim}", True
    else:
        read.stores, read.arrays = pv.graph_sources(x)
        read.token = x.name
    return read


def _from_numpy(arr: np.ndarray, chunks: int | None) -> _Input:
    """An in-memory array, wrapped in dask chunks without a copy."""
    description = "array"
    if arr.ndim not in (1, 2):
        raise InputError(
            "expected a signal of shape (n,) or (n, d) with time first, "
            f"got shape {arr.shape}; "
            "reshape it (for several independent series, segment each one)"
        )
    check_dtype(arr.dtype, description)
    c = chunks or default_chunk(arr.shape[0])
    x = da.from_array(arr, chunks=(c,) + arr.shape[1:])
    return _Input(x, description, {"kind": "numpy"}, arr, arrays=[arr])


def _time_first(read: _Input, dim: str | None) -> da.Array:
    """The input as ``(n, d)``, time first, of a dtype the kernels take."""
    x, description = read.x, read.description
    if x.ndim not in (1, 2):
        raise InputError(
            f"expected a signal of shape (n,) or (n, d) with time first, got shape {x.shape} "
            f"from {description}; select one series or reshape"
        )
    check_dtype(np.dtype(x.dtype), description)
    if x.ndim == 1:
        x = x[:, None]
    labeled = read.source["kind"] == "xarray"
    if 0 < x.shape[0] < x.shape[1] and not (labeled and dim is not None):
        fix = (
            f"name the time dimension with dim= (now {read.time.dim!r})"
            if labeled
            else "if time runs along the second axis, transpose it (x.T)"
        )
        raise InputError(
            f"{description} has shape {tuple(x.shape)}: {x.shape[0]} samples of "
            f"{x.shape[1]} channels, more channels than samples. kcpstream takes time "
            f"first; {fix}"
        )
    return x


def _rechunked(x: da.Array, read: _Input, chunks: int | None) -> da.Array:
    """Known chunk sizes, ``chunks=`` samples per chunk (whole stored chunks), one
    chunk across channels."""
    if any(np.isnan(c) for c in x.chunks[0]):
        raise InputError(
            f"{read.description} has unknown chunk sizes; call .compute_chunk_sizes() first"
        )
    if chunks is not None and read.source["kind"] != "numpy":
        if read.stored_chunk:  # a store decodes whole chunks: a task never takes part of one
            chunks = -(-chunks // read.stored_chunk) * read.stored_chunk
        x = x.rechunk({0: chunks})
    if len(x.chunks[1]) > 1:
        x = x.rechunk({1: -1})
    return x


def window_signal(signal: Signal, window: int) -> Signal:
    """The signal as a sequence of windows: ``(n // window, window * d)``.

    Chunks are first aligned on multiples of ``window`` so that every window
    lies in one chunk; samples after the last whole window are left out of
    the windows (they stay in the last segment of a result).
    """
    n_windows = signal.n // window
    if n_windows < 1:
        raise InputError(
            f"{signal.description} has {signal.n} samples, fewer than one window of {window}; "
            "use a smaller window"
        )
    x = signal.data[: n_windows * window]
    typical = int(np.median(x.chunks[0]))
    # every channel in one chunk: a window row holds all of them
    x = x.rechunk({0: max(window, typical // window * window), 1: -1})
    # in two steps: dask splits the time axis evenly, then merges the window with
    # the channels (one step is refused for more than one channel)
    x = x.reshape(n_windows, window, signal.d).reshape(n_windows, window * signal.d)
    source = {**signal.source, "window": window}
    origin = None if signal.origin is None else signal.origin.windowed(window)
    return Signal(
        data=x,
        description=f"{signal.description} in windows of {window}",
        source=source,
        origin=origin,
        fit_length=window_fit_length(signal.n, window),
    )


def window_fit_length(n: int, window: int) -> int:
    """The windows of ``window`` samples a series of ``n`` samples draws the fit
    sample of its windows from: those of the series' :func:`epoch_length`, which
    an archive keeps while it grows until its length doubles (all of them up
    to :data:`FIT_EPOCH_MIN` samples)."""
    return max(1, min(n // window, epoch_length(n) // window))


def _direct(obj: Any, description: str) -> Any:
    """What a reader slices for a dask array built on ``obj``: a zarr array
    (whose read errors name the samples), a numpy array, another array-like
    through dask's ``getter``; None for none."""
    if obj is None or (len(getattr(obj, "shape", ())) not in (1, 2)):
        return None
    if isinstance(obj, CheckedArray):
        return obj
    if _is_zarr_array(obj):
        return CheckedArray(obj, description)
    return obj if isinstance(obj, np.ndarray) else _GetterRows(obj)


class CheckedArray:
    """A zarr array whose read errors are :class:`InputError` naming the
    samples and the store: a chunk that fails to decode (truncated, corrupt)
    is a clear error, never a traceback from a codec."""

    def __init__(self, array: Any, description: str, upcast: bool = False) -> None:
        self.array = array
        self.upcast = upcast  # float16 storage read as float32
        self.shape, self.ndim = array.shape, array.ndim
        self.dtype = np.dtype(np.float32) if upcast else array.dtype
        self.chunks = array.chunks
        rows = (0, int(array.shape[0]) if array.ndim else 0)
        self.context = ReadContext(description, (pv.StoredArray(array, 0, rows),))

    def __getitem__(self, key) -> np.ndarray:
        try:
            out = self.array[key]
        except Exception as exc:  # codecs raise RuntimeError, ValueError, ...
            rows = key[0] if isinstance(key, tuple) else key
            if not isinstance(rows, slice):
                rows = slice(None)
            start, stop, _ = rows.indices(self.shape[0])
            raise self.context.error(start, stop, exc) from exc
        return out.astype(np.float32) if self.upcast else out


def _from_zarr(checked: CheckedArray) -> da.Array:
    """``da.from_zarr`` over a :class:`CheckedArray` (same chunks, reads checked)."""
    from dask.base import tokenize

    arr = checked.array
    name = "from-zarr-" + tokenize(arr, arr.chunks)
    return da.from_array(checked, chunks=arr.chunks, name=name)


class _GetterRows:
    """Rows ``[a:b]`` of an array-like as dask's ``getter`` reads a chunk of it."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.ndim = len(obj.shape)

    def __getitem__(self, rows: slice) -> np.ndarray:
        return np.asarray(getter(self.obj, (rows,) + (slice(None),) * (self.ndim - 1)))


def _is_zarr_array(obj: Any) -> bool:
    if isinstance(obj, CheckedArray):
        return True
    try:
        import zarr
    except ImportError:  # pragma: no cover - zarr is a dependency
        return False
    return isinstance(obj, zarr.Array)


def _is_pandas(obj: Any) -> bool:
    import sys

    pd = sys.modules.get("pandas")  # never imported just to ask
    return pd is not None and isinstance(obj, pd.Series | pd.DataFrame)


def _pandas_as_xarray(obj: Any) -> Any:
    """A Series or DataFrame as a DataArray along ``time`` with its index as the
    coordinate (a DataFrame's columns are channels)."""
    import xarray as xr

    _check_pandas_index(obj)
    values = obj.to_numpy()
    if values.ndim == 1:
        return xr.DataArray(values, dims=("time",), coords={"time": obj.index}, name=obj.name)
    return xr.DataArray(
        values,
        dims=("time", "channel"),
        coords={"time": obj.index, "channel": [str(c) for c in obj.columns]},
    )


def _check_pandas_index(obj: Any) -> None:
    """An :class:`InputError` with the pandas fix for an index of times or numbers
    with a missing value or out of order, or for an index of text labels, which
    is no time axis; any other index is left to xarray's checks of a coordinate."""
    import pandas as pd

    index, kind = obj.index, type(obj).__name__
    if isinstance(index, pd.MultiIndex):
        return
    if pd.api.types.infer_dtype(index, skipna=True) in ("string", "bytes"):
        raise InputError(
            f"the index of the pandas {kind} holds text labels, not times or numbers: the "
            "index is the time axis; set one (obj.set_index), or drop it to segment by "
            "position (obj.reset_index(drop=True))"
        )
    if index.dtype.kind not in "iufmM":
        return
    values = np.asarray(index)
    if index.hasnans:
        bad = int(np.flatnonzero(pd.isna(values))[0])
        raise InputError(
            f"the index of the pandas {kind} has a missing value at position {bad}; "
            "drop those rows (obj[obj.index.notna()])"
        )
    if len(values) > 1 and not (values[1:] > values[:-1]).all():
        bad = int(np.argmin(values[1:] > values[:-1])) + 1
        raise InputError(
            f"the index of the pandas {kind} is not strictly increasing (first at position "
            f"{bad}); sort it (obj.sort_index()) and drop duplicate times "
            "(obj[~obj.index.duplicated()])"
        )


def _is_labeled(obj: Any) -> bool:
    try:
        import xarray as xr
    except ImportError:  # pragma: no cover - xarray is a dependency
        return False
    return isinstance(obj, xr.DataArray | xr.Dataset)
