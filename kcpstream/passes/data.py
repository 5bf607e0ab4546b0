"""The data pass: each series' block statistics from one read of its chunks.

Also the fit sample's read and the in-memory pass of short series.  The
tasks call the pure kernels of :mod:`kcpstream._kernels`; each phase's tasks
are one graph (:class:`~kcpstream.tasks.graph.TaskBatch`) computed by the active
scheduler (threads, processes, a ``distributed.Client``).  Nothing here
creates a client.  Refinement's reads are :mod:`kcpstream.passes.scan`; the
samples kept for them, :mod:`kcpstream.passes.cache`.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import sys
from dataclasses import dataclass, replace

import dask
import numpy as np

from kcpstream._kernels.blockstats import (
    accumulate_tile,
    accumulate_work,
    first_nonfinite_row,
    largest_boundary_gain,
    merge_pieces_into_blocks,
    snapshot_every,
)
from kcpstream._kernels.dense import sample_prefix_sums
from kcpstream.features.base import FeatureMap
from kcpstream.inputs.gaps import GapMap, gap_map, no_gaps, scan_chunk
from kcpstream.inputs.signal import NonFiniteInput, Signal, SourceSlice, check_finite_index
from kcpstream.passes.cache import (
    CacheHandle,
    SampleCache,
    caches_reachable,
    chunks_holding,
    home_of,
)
from kcpstream.passes.ranges import as_2d, featurize_range, scratch_features
from kcpstream.persist.reuse import Reuse
from kcpstream.search.stats import BlockStats, prefix_columns
from kcpstream.tasks.graph import TaskBatch, in_process_scheduler


def chunk_block_stats(
    x: np.ndarray,
    start: int,
    fmap: FeatureMap,
    block_size: int,
    tile: int,
    skip: tuple[int, int] | None = None,
) -> dict:
    """Block statistics of one chunk ``x`` (samples ``start ..``).

    Tiles are featurized in float32 and cut at block boundaries (a block
    larger than a tile is accumulated from several tiles and merged).
    Returns the statistics of the blocks the chunk touches (the first and
    last may be partial), or the index of the first non-finite sample.
    ``"worker"`` names the distributed worker that ran the task (``None``
    outside one), so that refinement can be sent there.

    ``skip``: ``[a, b)`` (on block boundaries) whose statistics are known
    already.  The tiles inside it are not featurized; the others are the
    tiles of a call without ``skip``, so their blocks get the same bits.
    ``"skipped"`` is then ``(j0, j1)``, the blocks left out (count 0), and
    ``"featurized"`` the samples that were featurized.
    """
    x = as_2d(x)
    n_c = x.shape[0]
    end = start + n_c
    B = block_size
    jb0 = start // B
    nbc = (end - 1) // B - jb0 + 1
    p = fmap.n_features_out_
    scale = float(2.0**fmap.quantum_exponent_)
    cnt = np.zeros(nbc, np.int64)
    S = np.zeros((nbc, p), np.int64)
    Q = np.zeros(nbc)
    M2 = np.zeros(nbc)
    R = np.zeros(nbc)
    check_finite = x.dtype.kind == "f"
    norm_bound = float(fmap.quantized_norm_bound_)
    fast = fmap.accumulate_tile_stats
    tile_len = (tile // B) * B if B <= tile else tile
    every = snapshot_every(fmap.window_samples)
    work_S, snaps = accumulate_work(max(tile_len, tile), B, p, every)
    buf = scratch_features(fmap, tile_len, "tile")
    pos = start
    left_out = [end, end]  # the skipped tiles' union: a run of consecutive tiles
    while pos < end:
        if B <= tile:
            t_end = min(end, (pos // B) * B + tile_len)
        else:
            t_end = min(end, pos + tile, (pos // B + 1) * B)
        if skip is not None and skip[0] <= pos and t_end <= skip[1]:
            left_out = [min(left_out[0], pos), t_end]
            pos = t_end
            continue
        xt = x[pos - start : t_end - start]
        if check_finite:
            bad = first_nonfinite_row(xt)
            if bad >= 0:  # a NaN (a gap) or an infinity: where they are, for the engine
                return {"first_bad": pos + bad, "gaps": scan_chunk(x)}
        if fast is not None:  # the map accumulates its statistics without dense features
            fast(xt, pos, B, jb0, cnt, S, Q, M2, R)
        else:
            z = buf if t_end - pos == tile_len else scratch_features(fmap, t_end - pos, "tile")
            fmap.featurize_tile(xt, z)
            accumulate_tile(
                z, scale, pos, B, jb0, cnt, S, Q, M2, R, norm_bound, work_S, snaps, every
            )
        pos = t_end
    out = {
        "first_bad": -1,
        "first_block": jb0,
        "counts": cnt,
        "S": S,
        "Q": Q,
        "M2": M2,
        "R": R,
        "worker": worker_address(),
    }
    if left_out[0] < left_out[1]:
        if left_out[0] % B or left_out[1] % B:  # pragma: no cover - skip is on block bounds
            raise RuntimeError("internal error: skipped tiles cut a block")
        out["skipped"] = (left_out[0] // B, left_out[1] // B)
        out["featurized"] = n_c - (left_out[1] - left_out[0])
    return out


def sample_digest(x: np.ndarray) -> str:
    """SHA-256 of the samples ``x`` as a chunk holds them: dtype, shape, bytes."""
    x = np.ascontiguousarray(x)
    h = hashlib.sha256(json.dumps([x.dtype.str, list(x.shape)]).encode())
    h.update(memoryview(x).cast("B") if x.size else b"")
    return h.hexdigest()


def head_skip(x: np.ndarray, start: int, head: tuple[int, int, str], block_size: int):
    """The blocks of chunk ``x`` (samples ``start ..``) an earlier version's
    statistics hold: ``head`` is ``(start, end, digest)`` of the samples it
    had at the start of this chunk, which the rows ``[start, end)`` of ``x``
    still are when their :func:`sample_digest` is the same.  Returns the
    ``skip`` of :func:`chunk_block_stats` (the whole blocks inside those rows),
    or None."""
    a, v, digest = head
    B = block_size
    if a != start or v > start + len(x) or sample_digest(as_2d(x)[: v - a]) != digest:
        return None
    lo, hi = -(-a // B) * B, (v // B) * B
    return (lo, hi) if lo < hi else None


def worker_address() -> str | None:
    """The address of the distributed worker running this task, if any."""
    if "distributed" not in sys.modules:  # no worker can run here
        return None
    from distributed import get_worker

    try:
        return get_worker().address
    except ValueError:  # not inside a worker
        return None


def chunk_score(counts: np.ndarray, S: np.ndarray) -> float:
    """The largest gain of a split at a block boundary inside a chunk, from its
    blocks' sums: large when the chunk holds a change, which refinement will
    read again."""
    return float(largest_boundary_gain(counts, S))


#: A data-pass task covers consecutive chunks until it holds about this many
#: bytes of samples: a task per chunk of a few kB would be all overhead.
TASK_BYTES = 4 * 2**20
#: ... unless that leaves fewer tasks than this for the whole call (chunks are
#: never split): a batch of many series has tasks enough in their chunks.
MIN_PASS_TASKS = 64


#: A chunk of more than this many tasks' worth of samples is featurized in slices.
SPLIT_CHUNK_TASKS = 8


def pass_target(n: int, row_bytes: int, series: int = 1) -> int:
    """Samples a data-pass task aims at: :data:`TASK_BYTES` of samples, or less,
    so that the pass of the ``series`` signals of one call (of about ``n``
    samples each) has :data:`MIN_PASS_TASKS` tasks.  A batch of 256 series of
    2e5 samples was cut into 66 tasks per series (17 000 tasks of 3125
    samples, most of the pass's time their overhead)."""
    tasks = max(1, MIN_PASS_TASKS // max(1, series))
    return max(1, min(TASK_BYTES // max(1, row_bytes), -(-n // tasks)))


def pass_runs(starts: np.ndarray, row_bytes: int, series: int = 1) -> list[tuple[int, int]]:
    """Consecutive chunks (``starts``: chunk starts and ``n``) grouped into the
    data pass's tasks, ``(first, last)`` inclusive: chunks are added to a run
    while it is shorter than :func:`pass_target`'s samples."""
    target = pass_target(int(starts[-1]), row_bytes, series)
    runs: list[tuple[int, int]] = []
    first = 0
    for i in range(len(starts) - 1):
        if starts[i + 1] - starts[first] >= target or i == len(starts) - 2:
            runs.append((first, i))
            first = i + 1
    return runs


def slice_cuts(start: int, end: int, target: int, block_size: int) -> np.ndarray | None:
    """Where a chunk ``[start, end)`` is cut into slices featurized by tasks of
    their own (``[start, ..., end]``, inner cuts on block boundaries), or None
    when it is one task: it holds at most :data:`SPLIT_CHUNK_TASKS` times
    ``target`` samples.

    A chunk is the unit a store decodes: a task per chunk reads it once, but
    a chunk of hundreds of MB would then be featurized by one thread while
    the others wait.  Its slices share one read of it instead; cut on block
    boundaries, they give each block the same tiles as the whole chunk, so
    the statistics are the same bits."""
    if end - start <= SPLIT_CHUNK_TASKS * target:
        return None
    step = -(-target // block_size) * block_size
    inner = np.arange((start // step + 1) * step, end, step, dtype=np.int64)
    return np.concatenate([[start], inner, [end]]).astype(np.int64)


def pass_plan(
    signal: Signal,
    block_size: int,
    only: np.ndarray | None = None,
    series: int = 1,
    whole: int | None = None,
) -> list[tuple[int, int, np.ndarray | None]]:
    """The data pass's tasks: runs of chunks ``(first, last, cuts)``
    (:func:`pass_runs`), ``cuts`` the slices of a large chunk
    (:func:`slice_cuts`) or None.  Slices share their chunk where tasks share
    memory (threads) or a worker keeps it (distributed); a pool of processes
    would copy it to each, so there every chunk is one task.  ``only``: the
    indices of the chunks to read (the runs cut to them), all when None;
    ``series``: the signals the call's pass reads together; ``whole``: a
    sample whose chunk is one task, never sliced (the chunk a
    :attr:`~kcpstream.persist.reuse.Reuse.head` starts: only a task of its own
    keeps the blocks the earlier version held there, see :func:`head_skip`)."""
    starts = signal.chunk_starts
    target = pass_target(signal.n, signal.row_bytes, series)
    sliced = caches_reachable()
    runs = pass_runs(signal.read_starts, signal.row_bytes, series)
    if only is not None:
        runs = restrict_runs(runs, only)
    return [
        (
            first,
            last,
            slice_cuts(int(starts[first]), int(starts[last + 1]), target, block_size)
            if first == last
            and sliced
            and not (whole is not None and starts[first] <= whole < starts[last + 1])
            else None,
        )
        for first, last in runs
    ]


def restrict_runs(runs: list[tuple[int, int]], only: np.ndarray) -> list[tuple[int, int]]:
    """The parts of ``runs`` made of the chunks ``only`` (sorted indices)."""
    out: list[tuple[int, int]] = []
    keep = set(int(i) for i in only)
    for first, last in runs:
        start = None
        for i in range(first, last + 2):
            if i <= last and i in keep:
                start = i if start is None else start
            elif start is not None:
                out.append((start, i - 1))
                start = None
    return out


def pass_task_count(
    signal: Signal,
    block_size: int,
    only: np.ndarray | None = None,
    series: int = 1,
    whole: int | None = None,
) -> int:
    """Tasks of the data pass (a sliced chunk: its read, its slices, their merge)."""
    plan = pass_plan(signal, block_size, only, series, whole)
    return sum(1 if cuts is None else len(cuts) + 1 for _, _, cuts in plan)


def held_chunk(
    source: SourceSlice, cache: CacheHandle | None
) -> tuple[np.ndarray, bool, str | None]:
    """The one chunk of ``source``, a dask task whose value the tasks of its
    slices share: ``(samples, from_cache, worker)``, taken from the job's
    sample cache in this process or read and offered to it."""
    local = cache.resolve() if cache is not None else None
    x = None if local is None else local.chunk(source.start)
    if x is not None:
        return x, True, worker_address()
    (x,) = source.read_chunks([0])
    if local is not None and local.oversized(x.nbytes):
        local.add_chunk(source.start, x)  # (others once their slices score them)
    return x, False, worker_address()


def slice_block_stats(
    held: tuple,
    chunk_start: int,
    start: int,
    end: int,
    fmap: FeatureMap,
    block_size: int,
    tile: int,
) -> dict:
    """:func:`chunk_block_stats` of samples ``[start, end)`` of a held chunk."""
    x = as_2d(held[0])
    return chunk_block_stats(
        x[start - chunk_start : end - chunk_start], start, fmap, block_size, tile
    )


def merge_slices(
    held: tuple, start: int, cache: CacheHandle | None, tail: bool, *parts: dict
) -> list[dict]:
    """The statistics of the chunk at ``start`` from those of its slices (in
    order, on block boundaries: their blocks follow each other), as
    :func:`read_block_stats` gives them; the chunk is offered to the job's
    sample cache with its score, as there.  ``tail``: the chunk is the
    series' last, whose :func:`sample_digest` comes back as ``"tail"``."""
    bad = [p["first_bad"] for p in parts if p["first_bad"] >= 0]
    if bad:
        return [{"first_bad": min(bad), "gaps": scan_chunk(held[0])}]
    out = {
        "first_bad": -1,
        "first_block": parts[0]["first_block"],
        "from_cache": held[1],
        "worker": held[2],
    }
    for name in ("counts", "S", "Q", "M2", "R"):
        out[name] = np.concatenate([p[name] for p in parts])
    if tail:  # (the next version's Reuse.head, as read_block_stats gives it)
        x = as_2d(held[0])
        out["tail"] = (start, start + len(x), sample_digest(x))
    if cache is not None:
        cache.resolve().add_chunk(start, held[0], chunk_score(out["counts"], out["S"]))
    return [out]


def read_block_stats(
    source: SourceSlice,
    fmap: FeatureMap,
    block_size: int,
    tile: int,
    cache: CacheHandle | None,
    held: dict[int, np.ndarray] | None = None,
    head: tuple[int, int, str] | None = None,
    tail: int | None = None,
) -> list[dict]:
    """:func:`chunk_block_stats` of each chunk of a run, a dask task: a chunk is
    one the task was given (``held``: position in the run -> samples), or taken
    from the job's sample cache in this process (where the fit sample left
    it), or read (the missing chunks together).  ``"from_cache"`` says whether
    it was not read.  Each chunk is then offered to the job's sample cache in
    the process running the task (the client's own cache under a scheduler in
    this process, a worker's otherwise), scored by :func:`chunk_score`: a
    reference, or a copy when it is a view of a read of several chunks (a kept
    chunk must not hold on to its neighbours).

    ``head``: the samples an earlier version's statistics hold at the start
    of one of these chunks (see :func:`head_skip`): the blocks they still
    are are not featurized again.  ``tail``: the start of the series' last
    chunk, whose :func:`sample_digest` comes back as ``"tail"``
    (``(start, end, digest)``: the ``head`` of the next version)."""
    local = cache.resolve() if cache is not None else None
    starts = source.starts
    xs, read, shared = _run_chunks(source, range(len(starts) - 1), local, held)
    out = []
    for i, x in xs.items():
        a = int(starts[i])
        skip = None if head is None else head_skip(x, a, head, block_size)
        stats = chunk_block_stats(x, a, fmap, block_size, tile, skip)
        stats["from_cache"] = i not in read
        if a == tail and stats["first_bad"] < 0:
            stats["tail"] = (a, a + len(x), sample_digest(as_2d(x)))
        if local is not None and stats["first_bad"] < 0:
            done = stats["counts"] > 0  # (the blocks of a skip are not in these sums)
            score = chunk_score(stats["counts"][done], stats["S"][done])
            local.add_chunk(a, x, score, copy=shared and i in read)
        out.append(stats)
    return out


def _run_chunks(
    source: SourceSlice, positions, local: SampleCache | None, held: dict | None = None
) -> tuple[dict[int, np.ndarray], set[int], bool]:
    """Chunks ``positions`` of a run, in order: given to the task (``held``), in
    this process's cache, or read (the missing ones together).  Returns them,
    the positions read, and whether those are views of a zarr read of several
    chunks (to be copied if kept; views of a numpy input hold nothing more)."""
    held = held or {}
    xs = {
        i: held.get(i, None if local is None else local.chunk(int(source.starts[i])))
        for i in positions
    }
    read = [i for i, x in xs.items() if x is None]
    if read:
        xs.update(zip(read, source.read_chunks(read), strict=True))
    shared = len(read) > 1 and source.array is not None and not isinstance(source.array, np.ndarray)
    return xs, set(read), shared


def _pass_tasks(
    batch: TaskBatch,
    signal: Signal,
    fmap: FeatureMap,
    block_size: int,
    tile: int,
    cache,
    *,
    only: np.ndarray | None = None,
    series: int = 1,
    head: tuple[int, int, str] | None = None,
    tail: bool = False,
) -> None:
    reader = signal.reader
    handle = cache.handle if cache is not None and caches_reachable() else None
    here = handle is not None and in_process_scheduler()
    starts = reader.starts
    last_start = int(starts[-2]) if tail else None
    whole = None if head is None else head[0]
    for first, last, cuts in pass_plan(signal, block_size, only, series, whole):
        held, home = None, None
        if here and cuts is None:  # chunks the fit sample read in this process: the task holds them
            found = {i - first: cache.chunk(int(starts[i])) for i in range(first, last + 1)}
            held = {i: x for i, x in found.items() if x is not None} or None
        elif handle is not None and not here:  # chunks the fit sample left in a worker's cache
            home = home_of(cache, starts, first, last)
        if cuts is None:
            a, b = int(starts[first]), int(starts[last + 1])
            reader.add_task(
                batch,
                read_block_stats,
                first,
                last,
                fmap,
                block_size,
                tile,
                handle,
                held,
                head if head is not None and a <= head[0] < b else None,
                last_start if last_start is not None and a <= last_start < b else None,
                home=home,
            )
            continue
        # one read of the chunk (from the cache where the fit left it), shared by its slices
        chunk = reader.add_dependency(batch, held_chunk, first, last, handle, home=home)
        a = int(reader.starts[first])
        parts = [
            batch.dependency(slice_block_stats, chunk, a, lo, hi, fmap, block_size, tile, home=home)
            for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)
        ]
        batch.add(merge_slices, chunk, a, handle, a == last_start, *parts, home=home)


def read_rows(
    source: SourceSlice,
    ranges: dict[int, list[tuple[int, int]]],
    cache: CacheHandle | None,
) -> tuple[dict[int, list[np.ndarray]], str | None]:
    """Rows of some chunks of a run, a dask task: ``ranges`` maps a chunk's
    position in the run to its ``[lo, hi)`` row ranges (positions within the
    chunk); the rows come back float64.  Those chunks are read whole (the
    missing ones together) and offered to the job's sample cache in this
    process, for the data pass (with the lowest score until the data pass
    scores them).  Also returns the worker that ran it, if any."""
    local = cache.resolve() if cache is not None else None
    xs, read, shared = _run_chunks(source, sorted(ranges), local)
    if local is not None:
        for i in sorted(read):
            local.add_chunk(int(source.starts[i]), xs[i], copy=shared)
    rows = {i: [as_2d(x)[lo:hi].astype(np.float64) for lo, hi in ranges[i]] for i, x in xs.items()}
    return rows, worker_address()


def fit_sample(signal: Signal, windows: list[tuple[int, int]], cache: SampleCache) -> np.ndarray:
    """The samples of ``windows`` (float64, in order), read through the job's cache.

    The chunks the windows overlap are read whole, one task per data-pass run
    of chunks (:func:`pass_runs`), and kept where they were read (this
    process, or a distributed worker, whose data pass task for the run is
    then sent there), so the data pass does not read them again.  Where no
    cache outlives a compute (a process pool) only the windows are read.
    """
    return fit_samples([(signal, windows, cache)])[0]


def fit_samples(
    reads: list[tuple[Signal, list[tuple[int, int]], SampleCache]],
) -> list[np.ndarray]:
    """:func:`fit_sample` of several series (``(signal, windows, cache)`` each),
    their reads in one graph.

    A batch's series fitted side by side in threads each waited on the store's
    reads while another held the GIL: a read hands over between threads a few
    times, each hand-over waiting for the interpreter's switch interval, and
    128 reads of one chunk took 1.6 s beside a busy thread against 0.09 s
    alone (``benchmarks/results/throughput.md``).  Read together first, they
    leave the fits nothing to wait for.
    """
    if not caches_reachable():
        for sig, windows, cache in reads:
            starts = sig.reader.starts
            cache.fit_chunks.update(int(starts[i]) for i in _chunk_ranges(starts, windows)[0])
        rows = dask.compute(*[sig.data[a:b] for sig, windows, _ in reads for a, b in windows])
        out, k = [], 0
        for _, windows, _ in reads:
            part = rows[k : k + len(windows)]
            out.append(np.concatenate([np.asarray(r, dtype=np.float64) for r in part], axis=0))
            k += len(windows)
        return out
    batch = TaskBatch("fit")
    plans = [_fit_tasks(batch, *read) for read in reads]
    results = iter(batch.compute())
    return [finish(results) for finish in plans]


def _chunk_ranges(starts: np.ndarray, windows: list[tuple[int, int]]):
    """``(ranges, order)``: the ``[lo, hi)`` rows of each chunk (by position)
    the windows take, and the windows' parts in order as ``(chunk, index of
    its range)``."""
    ranges: dict[int, list[tuple[int, int]]] = {}
    order = []
    for a, b in windows:
        first, last = chunks_holding(starts, a, b)
        for i in range(first, last + 1):
            lo, hi = max(a, starts[i]) - starts[i], min(b, starts[i + 1]) - starts[i]
            ranges.setdefault(i, []).append((int(lo), int(hi)))
            order.append((i, len(ranges[i]) - 1))
    return ranges, order


def _fit_tasks(batch: TaskBatch, signal: Signal, windows: list[tuple[int, int]], cache):
    """Add the tasks reading ``windows`` of ``signal`` to ``batch``; returns the
    function that takes their results (an iterator over the batch's, in order)
    and gives the samples (:func:`fit_sample`)."""
    groups, order, runs = _read_plan(signal, windows, cache)
    for first, last, ranges in runs:
        signal.reader.add_task(batch, read_rows, first, last, ranges, cache.handle)
    starts = signal.reader.starts

    def finish(results) -> np.ndarray:
        parts = [next(results) for _ in groups]
        for (_, members), (_, worker) in zip(groups, parts, strict=True):
            if worker is not None:
                for i in members:
                    cache.homes[int(starts[i])] = worker
        return _assembled(groups, order, parts)

    return finish


def add_on_samples(
    batch: TaskBatch, signal: Signal, windows: list[tuple[int, int]], cache, func
) -> None:
    """Add a call ``func(samples)`` to ``batch``: the samples of ``windows``
    (float64, in order, as :func:`fit_sample` gives them) read by tasks it
    depends on, so that on a distributed cluster it runs where they were read
    and only its value comes back."""
    groups, order, runs = _read_plan(signal, windows, cache)
    refs = [
        signal.reader.add_dependency(batch, read_rows, first, last, ranges, cache.handle)
        for first, last, ranges in runs
    ]
    # (a partial: dask takes the plan's lists as they are, not as tasks)
    batch.add(functools.partial(_on_samples, func, groups, order), *refs)


def _on_samples(func, groups, order, *parts):
    """``func`` of the samples the read tasks ``parts`` give (:func:`add_on_samples`)."""
    return func(_assembled(groups, order, parts))


def _read_plan(signal: Signal, windows: list[tuple[int, int]], cache):
    """``(groups, order, runs)``: the read tasks of ``windows``, one per data
    pass run of chunks it needs (``runs``: first and last chunk, and each
    chunk's row ranges), the chunks each task gives (``groups``: its first
    chunk and the chunks it reads) and the windows' parts in order
    (:func:`_chunk_ranges`); the chunks are noted in ``cache.fit_chunks``."""
    starts = signal.reader.starts
    ranges, order = _chunk_ranges(starts, windows)
    needed = sorted(ranges)
    cache.fit_chunks.update(int(starts[i]) for i in needed)
    passes = pass_runs(signal.read_starts, signal.row_bytes)  # the data pass's tasks
    in_run: dict[int, list[int]] = {}
    firsts = [first for first, _ in passes]
    for i in needed:
        in_run.setdefault(bisect.bisect_right(firsts, i) - 1, []).append(i)
    groups, runs = [], []
    for r, members in in_run.items():
        first, last = passes[r]
        groups.append((first, members))
        runs.append((first, last, {i - first: ranges[i] for i in members}))
    return groups, order, runs


def _assembled(groups, order, parts) -> np.ndarray:
    """The samples of the read tasks' values ``parts`` (``(rows, worker)``
    each), in the windows' order."""
    read: dict[int, list[np.ndarray]] = {}
    for (first, members), (rows, _) in zip(groups, parts, strict=True):
        for i in members:
            read[i] = rows[i - first]
    return np.concatenate([read[i][k] for i, k in order], axis=0)


@dataclass(frozen=True)
class Passed:
    """What the data pass found for one series.

    Attributes
    ----------
    stats : BlockStats
        Its block statistics.
    reuse : Reuse or None
        The reuse it was given, keeping also the blocks of a rewritten chunk
        whose samples it found unchanged (:func:`head_skip`).
    featurized : int
        Samples featurized.
    tail : tuple of (int, int, str) or None
        ``(start, end, digest)`` of the series' last chunk, when asked for
        and read by a task of its own (not a chunk featurized in slices, see
        :func:`slice_cuts`): :func:`sample_digest`.
    """

    stats: BlockStats
    reuse: Reuse | None
    featurized: int
    tail: tuple[int, int, str] | None = None


def _assemble(
    signal: Signal, fmap: FeatureMap, block_size: int, results, reuse: Reuse | None = None
) -> Passed:
    """The series' block statistics from its chunks' (``results``, in time
    order); with ``reuse``, the blocks it keeps are taken from its statistics
    and the chunks read only fill the others (all of whose chunks they are),
    and so are the blocks a chunk's task found unchanged (``"skipped"``).

    The blocks before the first one not kept have the base's prefix sums:
    those are copied, and only the blocks from there on are summed (exact
    integers: the same sums as over every block)."""
    bad = [r["first_bad"] for r in results if r["first_bad"] >= 0]
    if bad:
        exc = NonFiniteInput(f"{signal.description} holds NaN or inf", min(bad))
        exc.gaps = _gaps_of(signal, results, None if reuse is None else reuse.chunks)
        raise exc
    n = signal.n
    nb = -(-n // block_size)
    p = fmap.n_features_out_
    expected = np.full(nb, block_size, np.int64)
    expected[-1] = n - (nb - 1) * block_size
    featurized = sum(r.get("featurized", int(r["counts"].sum())) for r in results)
    tail = next((r["tail"] for r in results if "tail" in r), None)
    if reuse is None:
        keep = np.zeros(nb, bool)
    else:
        skipped = [r["skipped"] for r in results if "skipped" in r]
        if skipped:  # whole blocks of samples the base held, within its full blocks
            keep = reuse.keep.copy()
            for j0, j1 in skipped:
                if j1 * block_size > reuse.base.n:  # pragma: no cover - head is the base's
                    raise RuntimeError("internal error: a skipped block is not the base's")
                keep[j0:j1] = True
            reuse = replace(reuse, keep=keep)
        keep = reuse.keep
    redo = np.flatnonzero(~keep)
    o = int(redo[0]) if len(redo) else nb  # blocks [0, o) are all the base's
    m = nb - o
    cnt = np.where(keep[o:], expected[o:], 0)
    S = np.zeros((m, p), np.int64)
    Q, M2, R = np.zeros(m), np.zeros(m), np.zeros(m)
    if reuse is not None:  # the base's blocks from o on (a rewrite in place keeps some)
        base = reuse.base
        kept = np.flatnonzero(keep[o:])
        S[kept] = (base.prefix[:, o + kept + 1] - base.prefix[:, o + kept]).T
        for dest, src in ((Q, base.block_q), (M2, base.max_norm2), (R, base.bridge)):
            dest[kept] = src[o + kept]
    for r in results:  # chunks in time order: only a chunk's first block may be shared
        j0 = r["first_block"]
        first = 1 if j0 < o or cnt[j0 - o] > 0 else 0
        if first and not keep[j0]:
            merge_pieces_into_blocks(
                np.array([j0 - o], np.int64),
                r["counts"][:1],
                r["S"][:1],
                r["Q"][:1],
                r["M2"][:1],
                r["R"][:1],
                cnt,
                S,
                Q,
                M2,
                R,
            )
        k = len(r["counts"])
        fill = np.flatnonzero(~keep[j0 + first : j0 + k]) + first
        for name, dest in (("counts", cnt), ("S", S), ("Q", Q), ("M2", M2), ("R", R)):
            dest[j0 + fill - o] = r[name][fill]
    if not np.array_equal(cnt, expected[o:]):  # pragma: no cover - internal consistency
        raise RuntimeError("internal error: the data pass did not cover every sample exactly once")
    prefix = np.empty((p, nb + 1), np.int64)
    if reuse is None:
        prefix[:, 0] = 0
    else:
        prefix[:, : o + 1] = reuse.base.prefix[:, : o + 1]
    prefix[:, o:] = prefix_columns(S, prefix[:, o])
    if reuse is not None:
        base = reuse.base
        Q, M2, R = (
            np.concatenate([a[:o], b])
            for a, b in ((base.block_q, Q), (base.max_norm2, M2), (base.bridge, R))
        )
    stats = BlockStats.from_prefix(n, block_size, fmap.quantum_exponent_, prefix, Q, M2, R)
    return Passed(stats, reuse, featurized, tail)


def _gaps_of(signal: Signal, results: list[dict], read: np.ndarray | None = None) -> GapMap:
    """The series' gaps from its data pass's chunk results (one per chunk
    ``read``, in order; all when None).  A chunk not read holds only samples
    an earlier version's statistics hold, unchanged: a series with NaN is
    never summed, so it has none."""
    starts = signal.chunk_starts
    sizes = np.diff(starts)
    scans = [no_gaps(int(size)) for size in sizes]
    for j, r in zip(range(len(sizes)) if read is None else read.tolist(), results, strict=True):
        if "gaps" in r:
            scans[j] = r["gaps"]
    return gap_map(starts, scans)


def data_passes(
    jobs: list[tuple[Signal, FeatureMap, int, SampleCache | None]],
    tile: int,
    progress: bool = False,
    reuses: list[Reuse | None] | None = None,
    tails: list[bool] | None = None,
) -> list[Passed]:
    """One pass over several signals in one graph: block statistics of every
    chunk (small chunks grouped into tasks by :func:`pass_runs`), merged on the
    client per signal.

    With a cache, the chunks most likely to be read again that fit in its
    budget are kept where they were read (references, not copies): in this
    process under the threaded or synchronous scheduler, in each worker's
    memory under a distributed client.  Refinement then scans them without
    reading the store again.  Raises the NaN/inf input error naming the first
    non-finite sample.  ``reuses``: per signal, the statistics of an earlier
    version of it to keep where its samples did not change (only the chunks
    :class:`~kcpstream.persist.reuse.Reuse` names are read), or None.  ``tails``: per
    signal, whether to take the digest of its last chunk
    (:attr:`Passed.tail`: what the next version's ``Reuse.head`` checks).
    """
    reuses = reuses or [None] * len(jobs)
    tails = tails or [False] * len(jobs)
    batch = TaskBatch("pass")
    sizes = []
    for (sig, fmap, b, cache), reuse, tail in zip(jobs, reuses, tails, strict=True):
        before = len(batch)
        only = None if reuse is None else reuse.chunks
        head = None if reuse is None else reuse.head
        _pass_tasks(
            batch, sig, fmap, b, tile, cache, only=only, series=len(jobs), head=head, tail=tail
        )
        sizes.append(len(batch) - before)
    flat = batch.compute(progress)
    out: list[Passed | None] = []
    i, nonfinite = 0, None
    for k, ((sig, fmap, b, cache), size, reuse) in enumerate(zip(jobs, sizes, reuses, strict=True)):
        results = [r for run in flat[i : i + size] for r in run]  # one per chunk read
        flat[i : i + size] = [None] * size  # a batch's chunk results go as they are merged
        try:
            out.append(_assemble(sig, fmap, b, results, reuse))
        except NonFiniteInput as exc:  # every series is assembled: all those with NaN are named
            nonfinite = nonfinite or exc
            nonfinite.series.append(k)
            nonfinite.gaps_of[k] = exc.gaps
            out.append(None)
            i += size
            continue
        if cache is not None:
            starts = sig.chunk_starts
            read = np.arange(len(starts) - 1) if reuse is None else reuse.chunks
            for s0, s1, r in zip(starts[read], starts[read + 1], results, strict=True):
                if r.get("worker"):  # where the chunk was read: refinement goes back there
                    cache.homes[int(s0)] = r["worker"]
                # (a chunk the task was given was not read again)
                if int(s0) in cache.fit_chunks and not r.get("from_cache", True):
                    cache.samples_read_again += int(s1 - s0)  # the fit had read it
        i += size
    if nonfinite is not None:
        nonfinite.passed = out  # the statistics of the series without
        raise nonfinite
    return out


def dense_stats(x: np.ndarray, fmap: FeatureMap, tile: int, description: str) -> BlockStats:
    """Statistics with one block per sample of the in-memory samples ``x``: every
    sample featurized once, the exact prefix sums kept at every position.  Raises
    the NaN/inf input error naming the first non-finite sample."""
    x = as_2d(x)
    if x.dtype.kind == "f":
        bad = first_nonfinite_row(x)
        check_finite_index(bad if bad >= 0 else None, description)
    z = featurize_range(fmap, x, tile)
    prefix, Q, M2 = sample_prefix_sums(
        z, float(2.0**fmap.quantum_exponent_), float(fmap.quantized_norm_bound_)
    )
    return BlockStats.from_samples(fmap.quantum_exponent_, prefix, Q, M2)


def read_dense_stats(
    source: SourceSlice,
    fmap: FeatureMap,
    tile: int,
    description: str,
    cache: CacheHandle | None,
    held: dict[int, np.ndarray] | None = None,
) -> tuple[BlockStats, list[int]]:
    """:func:`dense_stats` of a whole (small) signal, a dask task: its chunks are
    those the task was given (``held``), those the job's sample cache holds in
    this process (where the fit sample left them), and the others read
    together.  Also returns the positions of the chunks it read."""
    local = cache.resolve() if cache is not None else None
    xs, read, _ = _run_chunks(source, range(len(source.starts) - 1), local, held)
    x = np.concatenate([as_2d(xs[i]) for i in sorted(xs)], axis=0) if len(xs) > 1 else xs[0]
    try:
        return dense_stats(x, fmap, tile, description), sorted(read)
    except NonFiniteInput as exc:  # returned: the other series of the graph are kept
        starts = np.asarray(source.starts, np.int64)
        x, bounds = as_2d(x), starts - starts[0]
        scans = [scan_chunk(x[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        exc.gaps = gap_map(starts, scans)
        return exc, sorted(read)


def in_memory_passes(
    jobs: list[tuple[Signal, FeatureMap, SampleCache]], tile: int, progress: bool = False
) -> list[BlockStats]:
    """Statistics with one block per sample of several small signals, one task
    each in one graph (they run in parallel), each where the fit sample left
    its chunks: this process's cache, or the worker that read most of them.
    A chunk the fit sample read that is read again counts in the cache's
    ``samples_read_again``."""
    batch = TaskBatch("pass")
    for sig, fmap, cache in jobs:
        reader = sig.reader
        handle = cache.handle if caches_reachable() else None
        held, home = None, None
        last = reader.n_chunks - 1
        if handle is not None and in_process_scheduler():
            found = {i: cache.chunk(int(reader.starts[i])) for i in range(last + 1)}
            held = {i: x for i, x in found.items() if x is not None} or None
        elif handle is not None:
            home = home_of(cache, reader.starts, 0, last)
        reader.add_task(
            batch, read_dense_stats, 0, last, fmap, tile, sig.description, handle, held, home=home
        )
    out: list[BlockStats | None] = []
    nonfinite = None
    for k, ((sig, _, cache), (stats, read)) in enumerate(
        zip(jobs, batch.compute(progress), strict=True)
    ):
        if isinstance(stats, NonFiniteInput):
            nonfinite = nonfinite or stats
            nonfinite.series.append(k)
            nonfinite.gaps_of[k] = stats.gaps
            out.append(None)
            continue
        starts = sig.chunk_starts
        for i in read:
            if int(starts[i]) in cache.fit_chunks:
                cache.samples_read_again += int(starts[i + 1] - starts[i])
        out.append(stats)
    if nonfinite is not None:
        nonfinite.passed = out  # the statistics of the series without
        raise nonfinite
    return out
