"""The dask graphs: the data pass and the refinement reads.

The tasks here call the pure kernels of :mod:`kcpstream._kernels`; each
phase's tasks are one graph (:class:`~kcpstream._graph.TaskBatch`) computed by
the active scheduler (threads, processes, a ``distributed.Client``).  Nothing
here creates a client.
"""

from __future__ import annotations

import bisect
import heapq
import sys
import threading
import uuid
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import dask
import numpy as np

from ._graph import TaskBatch, active_client, in_process_scheduler, pool_of_processes
from ._kernels.blockstats import (
    accumulate_tile,
    accumulate_work,
    first_nonfinite_row,
    largest_boundary_gain,
    merge_pieces_into_blocks,
    piece_stats,
)
from ._kernels.blockstats import scan_piece as _scan_piece_kernel
from ._kernels.blockstats import scan_pieces as _scan_pieces_kernel
from ._kernels.dense import sample_prefix_sums
from .features.base import FeatureMap
from .reuse import Reuse
from .signal import Signal, SourceSlice, check_finite_index
from .stats import BlockStats, PieceStats

__all__ = [
    "data_pass",
    "data_passes",
    "scan_many",
    "ScanRequest",
    "ScanResult",
    "SampleCache",
    "CacheHandle",
    "release_worker_caches",
    "featurize_range",
    "fit_sample",
    "in_memory_passes",
    "dense_stats",
]


def _as_2d(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x[:, None] if x.ndim == 1 else x


def chunk_block_stats(
    x: np.ndarray,
    start: int,
    fmap: FeatureMap,
    block_size: int,
    tile: int,
) -> dict:
    """Block statistics of one chunk ``x`` (samples ``start ..``).

    Tiles are featurized in float32 and cut at block boundaries (a block
    larger than a tile is accumulated from several tiles and merged).
    Returns the statistics of the blocks the chunk touches (the first and
    last may be partial), or the index of the first non-finite sample.
    ``"worker"`` names the distributed worker that ran the task (``None``
    outside one), so that refinement can be sent there.
    """
    x = _as_2d(x)
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
    fast = getattr(fmap, "_accumulate_tile", None)
    tile_len = (tile // B) * B if B <= tile else tile
    work_S, snaps = accumulate_work(max(tile_len, tile), B, p)
    buf = _scratch_features(fmap, tile_len, "tile")
    pos = start
    while pos < end:
        if B <= tile:
            t_end = min(end, (pos // B) * B + tile_len)
        else:
            t_end = min(end, pos + tile, (pos // B + 1) * B)
        xt = x[pos - start : t_end - start]
        if check_finite:
            bad = first_nonfinite_row(xt)
            if bad >= 0:
                return {"first_bad": pos + bad}
        if fast is not None:  # the map accumulates its statistics without dense features
            fast(xt, pos, B, jb0, cnt, S, Q, M2, R)
        else:
            z = buf if t_end - pos == tile_len else _scratch_features(fmap, t_end - pos, "tile")
            fmap._featurize_tile(xt, z)
            accumulate_tile(z, scale, pos, B, jb0, cnt, S, Q, M2, R, norm_bound, work_S, snaps)
        pos = t_end
    return {
        "first_bad": -1, "first_block": jb0, "counts": cnt, "S": S, "Q": Q, "M2": M2, "R": R,
        "worker": _worker_address(),
    }  # fmt: skip


def _worker_address() -> str | None:
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


#: Largest feature buffer a thread keeps for refinement scans (bytes): a
#: piece's features are written into it instead of a fresh allocation.
MAX_SCRATCH_BYTES = 8 * 2**20
_SCRATCH = threading.local()


def _scratch_features(fmap: FeatureMap, length: int, slot: str = "features") -> np.ndarray:
    """A float32 (k, length, m) buffer: this thread's scratch ``slot`` when it
    fits in :data:`MAX_SCRATCH_BYTES` (valid until the thread's next call for
    that slot), else new.  ``"features"`` holds a range's features,
    ``"tile"`` one tile's, consumed before the next tile is featurized.
    Reuse matters where the allocator hands large blocks back to the system
    at once (distributed's workers set ``MALLOC_TRIM_THRESHOLD_``): every
    fresh buffer then costs a page fault per 4 KiB written."""
    k, m = fmap.tile_groups_
    size = k * length * m
    if 4 * size > MAX_SCRATCH_BYTES:
        return fmap._tile_buffer(length)
    flat = getattr(_SCRATCH, slot, None)
    if flat is None or flat.size < size:
        grown = min(max(size, 2 * (0 if flat is None else flat.size)), MAX_SCRATCH_BYTES // 4)
        flat = np.empty(grown, np.float32)
        setattr(_SCRATCH, slot, flat)
    return flat[:size].reshape(k, length, m)


def featurize_range(
    fmap: FeatureMap, x: np.ndarray, tile: int, out: np.ndarray | None = None
) -> np.ndarray:
    """Raw float32 features (k, L, m) of every sample of ``x``, tile by tile
    (into ``out`` when given)."""
    x = _as_2d(x)
    length = x.shape[0]
    out = fmap._tile_buffer(length) if out is None else out
    if length <= tile:
        fmap._featurize_tile(x, out)
        return out
    buf = _scratch_features(fmap, tile, "tile")
    for lo in range(0, length, tile):
        hi = min(length, lo + tile)
        z = buf if hi - lo == tile else _scratch_features(fmap, hi - lo, "tile")
        fmap._featurize_tile(x[lo:hi], z)
        out[:, lo:hi] = z
    return out


def _split_pieces(z: np.ndarray, scale: float, cut: int) -> tuple[PieceStats, PieceStats]:
    """Statistics of the features ``z`` (k, L, m) before and after ``cut``."""
    p = z.shape[0] * z.shape[2]
    S = np.empty((2, p), np.int64)
    Q, M2, R = np.empty(2), np.empty(2), np.empty(2)
    cnt = np.empty(2, np.int64)
    piece_stats(z, scale, np.array([0, cut, z.shape[1]], np.int64), S, Q, M2, R, cnt)
    left, right = (
        PieceStats(count=int(cnt[i]), S=S[i], Q=float(Q[i]), M2=float(M2[i]), R=float(R[i]))
        for i in (0, 1)
    )
    return left, right


@dataclass(frozen=True)
class ScanRequest:
    """Scan every split strictly inside ``[piece_start, piece_end)`` of a segment."""

    segment: tuple[int, int]
    piece_start: int
    piece_end: int
    left_at_piece: np.ndarray  # exact sum of the segment's samples before piece_start
    total: np.ndarray  # exact sum of the segment


@dataclass(frozen=True)
class ScanResult:
    """The best split ``pos`` (``-1``: none) of a scanned piece and its ``gain``;
    ``left``/``right`` are the statistics of the piece's two halves (given for
    the split that wins among the scanned pieces of its segment)."""

    request: ScanRequest
    gain: float
    pos: int
    left: PieceStats | None
    right: PieceStats | None


def scan_piece(
    x: np.ndarray, fmap: FeatureMap, req: ScanRequest, min_size: int, tile: int
) -> ScanResult:
    """Featurize one piece (its raw samples ``x``) and scan it sample by sample.

    The one-piece form of :func:`scan_batch` (which the search uses), kept as
    the plain reference the batch is tested against."""
    x = _as_2d(x)
    z = featurize_range(fmap, x, tile, _scratch_features(fmap, x.shape[0]))
    scale = float(2.0**fmap.quantum_exponent_)
    a, e = req.segment
    gain, pos = _scan_piece_kernel(
        z, scale, req.piece_start, a, e, req.left_at_piece, req.total, min_size
    )
    left = right = None
    if pos >= 0:
        left, right = _split_pieces(z, scale, pos - req.piece_start)
    return ScanResult(req, float(gain), int(pos), left, right)


def scan_batch(
    xs: list[np.ndarray], fmap: FeatureMap, reqs: list[ScanRequest], min_size: int, tile: int
) -> list[ScanResult]:
    """:func:`scan_piece` of several pieces (their raw samples ``xs``), featurized
    together and scanned in one compiled loop, without the per-piece overhead
    that dominates when pieces are short.  The same gains and positions; the
    statistics of the two halves are given only for the split that wins among
    the scanned pieces of its segment (the only one a search keeps)."""
    out: list[ScanResult] = []
    limit = max(1, MAX_SCRATCH_BYTES // (4 * fmap.n_features_out_))  # samples per batch
    i = 0
    while i < len(reqs):
        j, length = i, 0
        while j < len(reqs) and (j == i or length + len(xs[j]) <= limit):
            length += len(xs[j])
            j += 1
        out += _scan_group([_as_2d(x) for x in xs[i:j]], fmap, reqs[i:j], min_size, tile)
        i = j
    return out


def _scan_group(xs, fmap: FeatureMap, reqs: list[ScanRequest], min_size: int, tile: int):
    offsets = np.zeros(len(xs) + 1, np.int64)
    np.cumsum([len(x) for x in xs], out=offsets[1:])
    x = xs[0] if len(xs) == 1 else np.concatenate(xs, axis=0)
    z = featurize_range(fmap, x, tile, _scratch_features(fmap, len(x)))
    scale = float(2.0**fmap.quantum_exponent_)
    meta = np.array([(r.piece_start, *r.segment) for r in reqs], np.int64)
    gains, positions = _scan_pieces_kernel(
        z, scale, offsets, meta[:, 0], meta[:, 1], meta[:, 2],
        np.stack([r.left_at_piece for r in reqs]), np.stack([r.total for r in reqs]), min_size,
    )  # fmt: skip
    best: dict[tuple[int, int], int] = {}  # per segment, the piece whose split wins here
    for i, r in enumerate(reqs):
        if positions[i] < 0:
            continue
        j = best.get(r.segment)
        if j is None or (gains[i], -positions[i]) > (gains[j], -positions[j]):
            best[r.segment] = i
    split = np.zeros(len(reqs), bool)
    split[list(best.values())] = True
    halves = _split_halves(z, scale, offsets, positions - meta[:, 0], split)
    return [
        ScanResult(r, float(gain), int(pos), *halves.get(i, (None, None)))
        for i, (r, gain, pos) in enumerate(zip(reqs, gains, positions, strict=True))
    ]


def _split_halves(
    z: np.ndarray, scale: float, offsets: np.ndarray, cuts: np.ndarray, split: np.ndarray
) -> dict[int, tuple[PieceStats, PieceStats]]:
    """Statistics of both halves of every split piece (piece ``i`` is
    ``z[:, offsets[i]:offsets[i + 1]]``, cut ``cuts[i]`` samples in), from one
    :func:`piece_stats` call over all their edges."""
    found = np.flatnonzero(split)
    if not found.size:
        return {}
    starts = offsets[found]
    middles = starts + cuts[found]
    edges = np.unique(np.concatenate([starts, middles, offsets[found + 1]]))
    n = len(edges) - 1
    S = np.empty((n, z.shape[0] * z.shape[2]), np.int64)
    Q, M2, R = np.empty(n), np.empty(n), np.empty(n)
    cnt = np.empty(n, np.int64)
    piece_stats(z, scale, edges, S, Q, M2, R, cnt)

    def stats(edge: int) -> PieceStats:
        j = int(np.searchsorted(edges, edge))
        return PieceStats(count=int(cnt[j]), S=S[j], Q=float(Q[j]), M2=float(M2[j]), R=float(R[j]))

    return {int(i): (stats(a), stats(c)) for i, a, c in zip(found, starts, middles, strict=True)}


def scan_run(
    source: SourceSlice,
    fmap: FeatureMap,
    reqs: list[ScanRequest],
    min_size: int,
    tile: int,
    cache: CacheHandle | None,
) -> tuple[list[ScanResult], bool]:
    """Scan several pieces of one run of chunks, a dask task.

    Pieces are taken from the job's sample cache in this process when all of
    them are there; otherwise the run is read once and its pieces are added
    to the cache.  Returns the scans and whether the source was read.
    """
    local = cache.resolve() if cache is not None else None
    xs = [None] * len(reqs)
    if local is not None:
        xs = [local.get(r.piece_start, r.piece_end) for r in reqs]
    read = any(x is None for x in xs)
    if read:
        x = source.read()
        xs = [x[r.piece_start - source.start : r.piece_end - source.start] for r in reqs]
        if local is not None:
            # whole chunks: kept where the budget has room (the data pass's chunks,
            # scored by their gains, are never dropped for them; none are offered
            # under a pool of processes), an oversized one always, since reading
            # any piece of it again decodes all of it; of a run of several, copies
            # (a view would keep the whole run for one chunk counted)
            several = len(source.starts) > 2
            for a, b in zip(source.starts[:-1], source.starts[1:], strict=True):
                part = x[int(a) - source.start : int(b) - source.start]
                local.add_chunk(int(a), part, copy=several)
        if local is not None:
            for r, xr in zip(reqs, xs, strict=True):
                local.add_piece(r.piece_start, r.piece_end, xr)
    results = scan_batch(xs, fmap, reqs, min_size, tile)
    return results, read


def _caches_reachable() -> bool:
    """Whether tasks run where a job's sample cache outlives a computation: in
    this process, or on distributed workers (not a pool of processes made per call)."""
    return not pool_of_processes()


#: A data-pass task covers consecutive chunks until it holds about this many
#: bytes of samples: a task per chunk of a few kB would be all overhead.
TASK_BYTES = 4 * 2**20
#: ... unless that leaves fewer tasks than this (chunks are never split).
MIN_PASS_TASKS = 64


#: A chunk of more than this many tasks' worth of samples is featurized in slices.
SPLIT_CHUNK_TASKS = 8


def pass_target(n: int, row_bytes: int) -> int:
    """Samples a data-pass task aims at: :data:`TASK_BYTES` of samples, or
    1 / :data:`MIN_PASS_TASKS` of the signal if that is less."""
    return max(1, min(TASK_BYTES // max(1, row_bytes), -(-n // MIN_PASS_TASKS)))


def pass_runs(starts: np.ndarray, row_bytes: int) -> list[tuple[int, int]]:
    """Consecutive chunks (``starts``: chunk starts and ``n``) grouped into the
    data pass's tasks, ``(first, last)`` inclusive: chunks are added to a run
    while it is shorter than :func:`pass_target`'s samples."""
    target = pass_target(int(starts[-1]), row_bytes)
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
    signal: Signal, block_size: int, only: np.ndarray | None = None
) -> list[tuple[int, int, np.ndarray | None]]:
    """The data pass's tasks: runs of chunks ``(first, last, cuts)``
    (:func:`pass_runs`), ``cuts`` the slices of a large chunk
    (:func:`slice_cuts`) or None.  Slices share their chunk where tasks share
    memory (threads) or a worker keeps it (distributed); a pool of processes
    would copy it to each, so there every chunk is one task.  ``only``: the
    indices of the chunks to read (the runs cut to them), all when None."""
    starts = signal.chunk_starts
    target = pass_target(signal.n, signal.row_bytes)
    sliced = _caches_reachable()
    runs = pass_runs(starts, signal.row_bytes)
    if only is not None:
        runs = _restrict_runs(runs, only)
    return [
        (first, last, slice_cuts(int(starts[first]), int(starts[last + 1]), target, block_size)
         if first == last and sliced else None)
        for first, last in runs
    ]  # fmt: skip


def _restrict_runs(runs: list[tuple[int, int]], only: np.ndarray) -> list[tuple[int, int]]:
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


def pass_task_count(signal: Signal, block_size: int, only: np.ndarray | None = None) -> int:
    """Tasks of the data pass (a sliced chunk: its read, its slices, their merge)."""
    plan = pass_plan(signal, block_size, only)
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
        return x, True, _worker_address()
    (x,) = source.read_chunks([0])
    if local is not None and local.oversized(x.nbytes):
        local.add_chunk(source.start, x)  # (others once their slices score them)
    return x, False, _worker_address()


def slice_block_stats(
    held: tuple, chunk_start: int, start: int, end: int, fmap: FeatureMap, block_size: int,
    tile: int,
) -> dict:  # fmt: skip
    """:func:`chunk_block_stats` of samples ``[start, end)`` of a held chunk."""
    x = _as_2d(held[0])
    return chunk_block_stats(
        x[start - chunk_start : end - chunk_start], start, fmap, block_size, tile
    )


def merge_slices(held: tuple, start: int, cache: CacheHandle | None, *parts: dict) -> list[dict]:
    """The statistics of the chunk at ``start`` from those of its slices (in
    order, on block boundaries: their blocks follow each other), as
    :func:`read_block_stats` gives them; the chunk is offered to the job's
    sample cache with its score, as there."""
    bad = [p["first_bad"] for p in parts if p["first_bad"] >= 0]
    if bad:
        return [{"first_bad": min(bad)}]
    out = {"first_bad": -1, "first_block": parts[0]["first_block"], "from_cache": held[1],
           "worker": held[2]}  # fmt: skip
    for name in ("counts", "S", "Q", "M2", "R"):
        out[name] = np.concatenate([p[name] for p in parts])
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
) -> list[dict]:
    """:func:`chunk_block_stats` of each chunk of a run, a dask task: a chunk is
    one the task was given (``held``: position in the run -> samples), or taken
    from the job's sample cache in this process (where the fit sample left
    it), or read (the missing chunks together).  ``"from_cache"`` says whether
    it was not read.  Each chunk is then offered to the job's sample cache in
    the process running the task (the client's own cache under a scheduler in
    this process, a worker's otherwise), scored by :func:`chunk_score`: a
    reference, or a copy when it is a view of a read of several chunks (a kept
    chunk must not hold on to its neighbours)."""
    local = cache.resolve() if cache is not None else None
    starts = source.starts
    xs, read, shared = _run_chunks(source, range(len(starts) - 1), local, held)
    out = []
    for i, x in xs.items():
        stats = chunk_block_stats(x, int(starts[i]), fmap, block_size, tile)
        stats["from_cache"] = i not in read
        if local is not None and stats["first_bad"] < 0:
            score = chunk_score(stats["counts"], stats["S"])
            local.add_chunk(int(starts[i]), x, score, copy=shared and i in read)
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
    batch: TaskBatch, signal: Signal, fmap: FeatureMap, block_size: int, tile: int, cache,
    only: np.ndarray | None = None,
) -> None:  # fmt: skip
    reader = signal.reader
    handle = cache.handle if cache is not None and _caches_reachable() else None
    here = handle is not None and in_process_scheduler()
    for first, last, cuts in pass_plan(signal, block_size, only):
        held, home = None, None
        if here and cuts is None:  # chunks the fit sample read in this process: the task holds them
            found = {i - first: cache.chunk(int(reader.starts[i])) for i in range(first, last + 1)}
            held = {i: x for i, x in found.items() if x is not None} or None
        elif handle is not None and not here:  # chunks the fit sample left in a worker's cache
            home = _home_of(cache, reader.starts, first, last)
        if cuts is None:
            reader.add_task(batch, read_block_stats, first, last, fmap, block_size, tile, handle,
                            held, home=home)  # fmt: skip
            continue
        # one read of the chunk (from the cache where the fit left it), shared by its slices
        chunk = reader.add_dependency(batch, held_chunk, first, last, handle, home=home)
        a = int(reader.starts[first])
        parts = [
            batch.dependency(slice_block_stats, chunk, a, lo, hi, fmap, block_size, tile, home=home)
            for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)
        ]
        batch.add(merge_slices, chunk, a, handle, *parts, home=home)


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
    rows = {i: [_as_2d(x)[lo:hi].astype(np.float64) for lo, hi in ranges[i]] for i, x in xs.items()}
    return rows, _worker_address()


def fit_sample(signal: Signal, windows: list[tuple[int, int]], cache: SampleCache) -> np.ndarray:
    """The samples of ``windows`` (float64, in order), read through the job's cache.

    The chunks the windows overlap are read whole, one task per data-pass run
    of chunks (:func:`pass_runs`), and kept where they were read (this
    process, or a distributed worker, whose data pass task for the run is
    then sent there), so the data pass does not read them again.  Where no
    cache outlives a compute (a process pool) only the windows are read.
    """
    reader = signal.reader
    starts = reader.starts
    ranges: dict[int, list[tuple[int, int]]] = {}
    order = []  # (chunk, index of its range)
    for a, b in windows:
        first, last = _chunks_holding(starts, a, b)
        for i in range(first, last + 1):
            lo, hi = max(a, starts[i]) - starts[i], min(b, starts[i + 1]) - starts[i]
            ranges.setdefault(i, []).append((int(lo), int(hi)))
            order.append((i, len(ranges[i]) - 1))
    needed = sorted(ranges)
    cache.fit_chunks.update(int(starts[i]) for i in needed)
    if not _caches_reachable():
        rows = dask.compute(*[signal.data[a:b] for a, b in windows])
        return np.concatenate([np.asarray(r, dtype=np.float64) for r in rows], axis=0)
    runs = pass_runs(starts, signal.row_bytes)  # the data pass's tasks
    in_run: dict[int, list[int]] = {}
    firsts = [first for first, _ in runs]
    for i in needed:
        in_run.setdefault(bisect.bisect_right(firsts, i) - 1, []).append(i)
    batch, groups = TaskBatch("fit"), []
    for r, members in in_run.items():
        first, last = runs[r]
        groups.append((first, members))
        ranges_in_run = {i - first: ranges[i] for i in members}
        reader.add_task(batch, read_rows, first, last, ranges_in_run, cache.handle)
    read: dict[int, list[np.ndarray]] = {}
    for (first, members), (rows, worker) in zip(groups, batch.compute(), strict=True):
        for i in members:
            read[i] = rows[i - first]
            if worker is not None:
                cache.homes[int(starts[i])] = worker
    return np.concatenate([read[i][k] for i, k in order], axis=0)


def _assemble(
    signal: Signal, fmap: FeatureMap, block_size: int, results, reuse: Reuse | None = None
) -> BlockStats:
    """The series' block statistics from its chunks' (``results``, in time
    order); with ``reuse``, the blocks it keeps are taken from its statistics
    and the chunks read only fill the others (all of whose chunks they are)."""
    bad = [r["first_bad"] for r in results if r["first_bad"] >= 0]
    check_finite_index(min(bad) if bad else None, signal.description)
    n = signal.n
    nb = -(-n // block_size)
    p = fmap.n_features_out_
    expected = np.full(nb, block_size, np.int64)
    expected[-1] = n - (nb - 1) * block_size
    if reuse is None:
        keep = np.zeros(nb, bool)
        cnt = np.zeros(nb, np.int64)
        S = np.zeros((nb, p), np.int64)
        Q = np.zeros(nb)
        M2 = np.zeros(nb)
        R = np.zeros(nb)
    else:
        keep = reuse.keep
        S, Q, M2, R = reuse.base_blocks(nb)
        cnt = np.where(keep, expected, 0)
        for a in (S, Q, M2, R):
            a[~keep] = 0
    for r in results:  # chunks in time order: only a chunk's first block may be shared
        j0 = r["first_block"]
        first = 1 if cnt[j0] > 0 else 0
        if first and not keep[j0]:
            merge_pieces_into_blocks(
                np.array([j0], np.int64), r["counts"][:1], r["S"][:1], r["Q"][:1],
                r["M2"][:1], r["R"][:1], cnt, S, Q, M2, R,
            )  # fmt: skip
        k = len(r["counts"])
        fill = np.flatnonzero(~keep[j0 + first : j0 + k]) + first
        for name, dest in (("counts", cnt), ("S", S), ("Q", Q), ("M2", M2), ("R", R)):
            dest[j0 + fill] = r[name][fill]
    if not np.array_equal(cnt, expected):  # pragma: no cover - internal consistency
        raise RuntimeError("internal error: the data pass did not cover every sample exactly once")
    return BlockStats(n, block_size, fmap.quantum_exponent_, S, Q, M2, R)


def data_passes(
    jobs: list[tuple[Signal, FeatureMap, int, SampleCache | None]],
    tile: int,
    progress: bool = False,
    reuses: list[Reuse | None] | None = None,
) -> list[BlockStats]:
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
    :class:`~kcpstream.reuse.Reuse` names are read), or None.
    """
    reuses = reuses or [None] * len(jobs)
    batch = TaskBatch("pass")
    sizes = []
    for (sig, fmap, b, cache), reuse in zip(jobs, reuses, strict=True):
        before = len(batch)
        _pass_tasks(batch, sig, fmap, b, tile, cache, None if reuse is None else reuse.chunks)
        sizes.append(len(batch) - before)
    flat = batch.compute(progress)
    out, i = [], 0
    for (sig, fmap, b, cache), size, reuse in zip(jobs, sizes, reuses, strict=True):
        results = [r for run in flat[i : i + size] for r in run]  # one per chunk read
        out.append(_assemble(sig, fmap, b, results, reuse))
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
    return out


def dense_stats(x: np.ndarray, fmap: FeatureMap, tile: int, description: str) -> BlockStats:
    """Statistics with one block per sample of the in-memory samples ``x``: every
    sample featurized once, the exact prefix sums kept at every position.  Raises
    the NaN/inf input error naming the first non-finite sample."""
    x = _as_2d(x)
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
    x = np.concatenate([_as_2d(xs[i]) for i in sorted(xs)], axis=0) if len(xs) > 1 else xs[0]
    return dense_stats(x, fmap, tile, description), sorted(read)


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
        handle = cache.handle if _caches_reachable() else None
        held, home = None, None
        last = reader.n_chunks - 1
        if handle is not None and in_process_scheduler():
            found = {i: cache.chunk(int(reader.starts[i])) for i in range(last + 1)}
            held = {i: x for i, x in found.items() if x is not None} or None
        elif handle is not None:
            home = _home_of(cache, reader.starts, 0, last)
        reader.add_task(batch, read_dense_stats, 0, last, fmap, tile, sig.description, handle,
                        held, home=home)  # fmt: skip
    out = []
    for (sig, _, cache), (stats, read) in zip(jobs, batch.compute(progress), strict=True):
        starts = sig.chunk_starts
        for i in read:
            if int(starts[i]) in cache.fit_chunks:
                cache.samples_read_again += int(starts[i + 1] - starts[i])
        out.append(stats)
    return out


def data_pass(
    signal: Signal,
    fmap: FeatureMap,
    block_size: int,
    tile: int,
    cache: SampleCache | None = None,
) -> BlockStats:
    """:func:`data_passes` for one signal."""
    return data_passes([(signal, fmap, block_size, cache)], tile)[0]


class SampleCache:
    """Raw samples already in this process, bounded in bytes.

    It holds whole chunks offered by the data pass (when the scheduler runs
    in this process, so keeping them costs no copy) and the pieces that
    refinement reads.  A split found inside a piece makes its two halves the
    end pieces of two new segments, which later rounds often scan again.

    Chunks take at most three quarters of the budget.  When they do not all
    fit, the chunks kept are those most likely to be read again: each comes
    with a score (the largest split gain inside the chunk, from its own block
    statistics), and a chunk with a change in it outscores a chunk without.

    A chunk larger than that share cannot be kept among the others; the last
    one offered is kept apart, beyond the budget.  Reading any part of it
    again decodes all of it (a compressed codec has no partial reads), for
    each round of refinement that needs a piece of it, and decoding it once
    already needed that much memory: the bound is the budget plus the
    largest chunk.

    Tasks reach the cache through its :attr:`handle`, resolved in the process
    that runs them: there this very object; in a distributed worker, that
    worker's own cache for the same job (with the same budget), which
    :func:`release_worker_caches` drops at the end of the job.
    """

    def __init__(
        self, block_size: int, max_bytes: int = 256 * 2**20, *, token: str | None = None
    ) -> None:
        self.block_size = block_size
        self.max_bytes = max_bytes
        self.chunk_budget = max_bytes - max_bytes // 4
        self.nbytes = 0
        self.chunk_bytes = 0
        self.hits = 0
        self._chunks: dict[int, np.ndarray] = {}  # start -> samples
        self._scores: dict[int, float] = {}
        self._chunk_starts: list[int] = []  # sorted
        self._oversized: int | None = None  # start of the chunk kept beyond the budget
        self._lowest: list[tuple[float, int]] = []  # heap of (score, start), some stale
        self._pieces: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._by_block: dict[int, list[tuple[int, int]]] = {}
        self._lock = threading.RLock()
        self.homes: dict[int, str] = {}  # chunk start -> the worker that read it
        self.fit_chunks: set[int] = set()  # starts of the chunks the fit sample read
        self.samples_read_again = 0  # samples read from the source a second time
        # a job's own cache gets a new token; a worker's copy for a job, the job's
        self.handle = CacheHandle(token or uuid.uuid4().hex, block_size, max_bytes)
        if token is None:
            _OWN_CACHES[self.handle.token] = self

    def add_chunk(
        self, start: int, x: np.ndarray, score: float = -np.inf, copy: bool = False
    ) -> bool:
        """Offer a whole chunk; it is kept (a copy of it with ``copy``) if it fits
        in the chunks' budget after dropping lower-scored chunks.  Returns whether
        it is kept.  Offering a kept chunk again updates its score."""
        score = float(score) if score == score else -np.inf  # NaN: the lowest
        with self._lock:
            if start == self._oversized:
                return True
            if start in self._chunks:
                self._scores[start] = score
                heapq.heappush(self._lowest, (score, start))
                return True
            if self.oversized(x.nbytes):
                self._keep_oversized(start, x.copy() if copy else x)
                return True
            while self.chunk_bytes + x.nbytes > self.chunk_budget:
                while self._lowest[0][0] != self._scores.get(self._lowest[0][1]):
                    heapq.heappop(self._lowest)  # an entry for an old score
                lowest_score, lowest = self._lowest[0]
                if lowest_score >= score:
                    return False
                heapq.heappop(self._lowest)
                dropped = self._chunks.pop(lowest)
                del self._scores[lowest]
                del self._chunk_starts[bisect.bisect_left(self._chunk_starts, lowest)]
                self.chunk_bytes -= dropped.nbytes
                self.nbytes -= dropped.nbytes
            self._chunks[start] = x.copy() if copy else x
            self._scores[start] = score
            heapq.heappush(self._lowest, (score, start))
            bisect.insort(self._chunk_starts, start)
            self.chunk_bytes += x.nbytes
            self.nbytes += x.nbytes
            self._evict_pieces()
            return True

    def oversized(self, nbytes: int) -> bool:
        """Whether a chunk of ``nbytes`` is larger than the chunks' budget."""
        return nbytes > self.chunk_budget

    @property
    def oversized_bytes(self) -> int:
        """Bytes of the chunk kept beyond the budget (0 if none)."""
        return 0 if self._oversized is None else self._chunks[self._oversized].nbytes

    def _keep_oversized(self, start: int, x: np.ndarray) -> None:
        if self._oversized is not None:  # one at a time: the last offered
            del self._chunks[self._oversized]
            del self._chunk_starts[bisect.bisect_left(self._chunk_starts, self._oversized)]
        self._chunks[start] = x
        self._oversized = start
        bisect.insort(self._chunk_starts, start)

    def chunk(self, start: int) -> np.ndarray | None:
        """The cached chunk starting at ``start``, if any."""
        return self._chunks.get(start)

    def _evict_pieces(self) -> None:
        while self.nbytes > self.max_bytes and self._pieces:
            (a, b), old = self._pieces.popitem(last=False)
            self._by_block[a // self.block_size].remove((a, b))
            self.nbytes -= old.nbytes

    def add_piece(self, start: int, end: int, x: np.ndarray) -> None:
        key = (start, end)
        with self._lock:
            if (
                key in self._pieces
                or x.nbytes > self.max_bytes // 4
                or self.get(start, end) is not None
            ):
                return
            if x.base is not None:
                # a view of the run read would keep all of it (a whole chunk for a
                # piece of a block) while the budget counts the piece: a copy
                x = x.copy()
            self._pieces[key] = x
            self._by_block.setdefault(start // self.block_size, []).append(key)
            self.nbytes += x.nbytes
            self._evict_pieces()

    def _from_chunks(self, start: int, end: int) -> np.ndarray | None:
        i = bisect.bisect_right(self._chunk_starts, start) - 1
        if i < 0:
            return None
        c0 = self._chunk_starts[i]
        x = self._chunks[c0]
        if end <= c0 + len(x):
            return x[start - c0 : end - c0]
        parts = [x[start - c0 :]]
        pos = c0 + len(x)
        while pos < end:  # a piece across chunk edges: the next chunks, if all are here
            nxt = self._chunks.get(pos)
            if nxt is None:
                return None
            parts.append(nxt[: end - pos])
            pos += len(nxt)
        return np.concatenate(parts, axis=0)

    def get(self, start: int, end: int) -> np.ndarray | None:
        """The samples ``[start, end)`` if every one of them is cached (a view of
        one cached chunk, or a copy joining consecutive cached chunks)."""
        with self._lock:
            if self._chunks:
                x = self._from_chunks(start, end)
                if x is not None:
                    self.hits += 1
                    return x
            for key in self._by_block.get(start // self.block_size, ()):
                a, b = key
                if a <= start and end <= b:
                    self._pieces.move_to_end(key)
                    self.hits += 1
                    return self._pieces[key][start - a : end - a]
            return None


#: Caches made by a job in this process, by token (weak: the job owns them).
_OWN_CACHES: weakref.WeakValueDictionary[str, SampleCache] = weakref.WeakValueDictionary()
#: Caches a worker process made for jobs of other processes, oldest first.
_WORKER_CACHES: OrderedDict[str, SampleCache] = OrderedDict()
_WORKER_CACHES_LOCK = threading.Lock()
#: Jobs whose caches a worker keeps at once (each bounded by its own budget);
#: a job's cache is dropped by :func:`release_worker_caches` when it ends.
MAX_WORKER_CACHES = 8


@dataclass(frozen=True)
class CacheHandle:
    """Names one job's sample cache; a task resolves it in its own process."""

    token: str
    block_size: int
    max_bytes: int

    def __dask_tokenize__(self):
        return ("kcpstream.CacheHandle", self.token)

    def resolve(self) -> SampleCache:
        """The job's cache in this process: the job's own object where the job
        runs, else this process's cache for the job (made on first use)."""
        own = _OWN_CACHES.get(self.token)
        if own is not None:
            return own
        with _WORKER_CACHES_LOCK:
            cache = _WORKER_CACHES.get(self.token)
            if cache is None:
                cache = SampleCache(self.block_size, self.max_bytes, token=self.token)
                _WORKER_CACHES[self.token] = cache
                while len(_WORKER_CACHES) > MAX_WORKER_CACHES:
                    _WORKER_CACHES.popitem(last=False)
            else:
                _WORKER_CACHES.move_to_end(self.token)
            return cache


def _drop_worker_caches(tokens: list[str]) -> int:
    """Drop this process's caches of the given jobs; returns how many it held."""
    with _WORKER_CACHES_LOCK:
        return sum(_WORKER_CACHES.pop(t, None) is not None for t in tokens)


def release_worker_caches(caches: list[SampleCache]) -> None:
    """Free the samples distributed workers keep for these jobs' refinement.

    Called when the jobs end.  Only under a distributed client do workers
    hold such caches; elsewhere this does nothing.
    """
    client = active_client()
    if client is None or not caches:
        return
    tokens = [c.handle.token for c in caches]
    client.run(_drop_worker_caches, tokens)


def _chunks_holding(starts: np.ndarray, start: int, end: int) -> tuple[int, int]:
    """The first and last chunk (``starts``: chunk starts and ``n``) holding
    samples ``[start, end)``."""
    first = int(np.searchsorted(starts, start, side="right")) - 1
    last = int(np.searchsorted(starts, end - 1, side="right")) - 1
    return first, last


def _home_of(cache: SampleCache, starts: np.ndarray, first: int, last: int) -> str | None:
    """The worker that read the most samples of chunks ``first .. last`` (None if
    none is known): a task on them is sent there."""
    held: dict[str, int] = {}
    for i in range(first, last + 1):
        home = cache.homes.get(int(starts[i]))
        if home is not None:
            held[home] = held.get(home, 0) + int(starts[i + 1] - starts[i])
    return max(held, key=held.__getitem__) if held else None


def _chunk_groups(
    starts: np.ndarray, reqs: list[ScanRequest]
) -> list[tuple[int, int, list[ScanRequest]]]:
    """Requests grouped by runs of overlapping chunks: ``(first, last, requests)``."""
    groups: list[tuple[int, int, list[ScanRequest]]] = []
    for r in sorted(reqs, key=lambda r: r.piece_start):
        c0, c1 = _chunks_holding(starts, r.piece_start, r.piece_end)
        if groups and c0 <= groups[-1][1]:
            first, last, members = groups[-1]
            groups[-1] = (first, max(last, c1), [*members, r])
        else:
            groups.append((c0, c1, [r]))
    return groups


def scan_many(
    batches: list[tuple[Signal, FeatureMap, list[ScanRequest], SampleCache | None]],
    min_size: int,
    tile: int,
) -> list[list[ScanResult]]:
    """Scan the requested pieces of several signals: pieces in the client's cache
    on the spot, the others in one graph with one task per run of
    chunks of a signal.  A task uses the samples its process already holds (a
    worker's cache) or reads its run once; under a distributed client it is sent
    to the worker that read the run's first chunk in the data pass.  Results
    come back per signal, in request order; samples are never sent back.

    Under a pool of processes (dask's ``processes`` scheduler) the scans run
    in this process's threads instead: the pool's processes keep no cache
    between computations, so every round of refinement (tens of rounds of a
    few reads each) would pay for shipping its tasks and their samples, and
    read its pieces again (at 10^8 samples: 23 s of refinement against 1 s
    in threads, the whole series read a second time).  The kernels release
    the GIL, so threads lose nothing the pool would give."""
    if not _caches_reachable():
        with dask.config.set(scheduler="threads"):
            return scan_many(batches, min_size, tile)
    out: list[dict[int, ScanResult]] = []
    batch, owners = TaskBatch("scan", merge_per_thread=True), []
    for b, (signal, fmap, requests, cache) in enumerate(batches):
        results: dict[int, ScanResult] = {}
        out.append(results)
        to_read, held, samples = [], [], []
        for i, r in enumerate(requests):
            x = None if cache is None else cache.get(r.piece_start, r.piece_end)
            if x is None:
                to_read.append(r)
            else:
                held.append(i)
                samples.append(x)
        if held:  # the pieces this process holds: scanned here, together
            found = scan_batch(samples, fmap, [requests[i] for i in held], min_size, tile)
            results.update(zip(held, found, strict=True))
        if not to_read:
            continue
        reader = signal.reader
        handle = cache.handle if cache is not None else None
        for c0, c1, members in _chunk_groups(reader.starts, to_read):
            home = None if cache is None else _home_of(cache, reader.starts, c0, c1)
            reader.add_task(batch, scan_run, c0, c1, fmap, members, min_size, tile, handle,
                            home=home)  # fmt: skip
            owners.append((b, int(reader.starts[c1 + 1] - reader.starts[c0])))
    for (b, length), (group, read) in zip(owners, batch.compute(), strict=True):
        _, _, requests, cache = batches[b]
        index = {(r.segment, r.piece_start, r.piece_end): i for i, r in enumerate(requests)}
        for res in group:
            req = res.request
            out[b][index[(req.segment, req.piece_start, req.piece_end)]] = res
        if read and cache is not None:
            cache.samples_read_again += length
    return [[res[i] for i in range(len(batches[b][2]))] for b, res in enumerate(out)]
