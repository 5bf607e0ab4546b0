"""Refinement's reads: every split of the pieces a search asks for, scanned exactly.

A search (:mod:`kcpstream.search.binseg`, :mod:`kcpstream.search.dynp`) asks for pieces of
segments (:class:`ScanRequest`); :func:`scan_many` scans them from the job's
sample cache or reads their chunks again, one task per run of chunks, and
returns each piece's best split (:class:`ScanResult`).
"""

from __future__ import annotations

import dask
import numpy as np

from kcpstream._kernels.blockstats import piece_stats, snapshot_every
from kcpstream._kernels.blockstats import scan_piece as _scan_piece_kernel
from kcpstream._kernels.blockstats import scan_pieces as _scan_pieces_kernel
from kcpstream.features.base import FeatureMap
from kcpstream.inputs.signal import Signal, SourceSlice
from kcpstream.passes.cache import (
    CacheHandle,
    SampleCache,
    caches_reachable,
    chunks_holding,
    home_of,
)
from kcpstream.passes.ranges import as_2d, featurize_range, scratch_features
from kcpstream.passes.sliced import SlicedScan, scan_sliced, slice_length, whole_length
from kcpstream.search.requests import ScanRequest, ScanResult, piece_of, pieces_of
from kcpstream.search.stats import PieceStats, split_piece
from kcpstream.tasks.graph import TaskBatch
from kcpstream.tasks.threads import each_in_threads, worker_threads


def scan_piece(
    x: np.ndarray, fmap: FeatureMap, req: ScanRequest, min_size: int, tile: int
) -> ScanResult:
    """Featurize one piece (its raw samples ``x``) and scan it sample by sample.

    The one-piece form of :func:`scan_batch` (which the search uses), kept as
    the plain reference the batch is tested against."""
    x = as_2d(x)
    z = featurize_range(fmap, x, tile, scratch_features(fmap, x.shape[0]))
    scale = float(2.0**fmap.quantum_exponent_)
    a, e = req.segment
    gain, pos = _scan_piece_kernel(
        z, scale, req.piece_start, a, e, req.left_at_piece, req.total, min_size, req.grid
    )
    left = right = None
    if pos >= 0:
        every = snapshot_every(fmap.window_samples)
        lo, hi = (b - req.piece_start for b in piece_of(req, pos))
        left, right = split_piece(z[:, lo:hi], scale, pos - req.piece_start - lo, every)
    return ScanResult(req, float(gain), int(pos), left, right)


def scan_batch(
    xs: list[np.ndarray], fmap: FeatureMap, reqs: list[ScanRequest], min_size: int, tile: int
) -> list[ScanResult]:
    """:func:`scan_piece` of several pieces (their raw samples ``xs``), featurized
    together and scanned in one compiled loop, without the per-piece overhead
    that dominates when pieces are short.  The same gains and positions; the
    statistics of the two halves are given for the split that wins among
    the scanned pieces of its segment (the only one a search keeps), and for
    a long piece's (:func:`~kcpstream.passes.sliced.scan_sliced`, scanned
    in slices on its own)."""
    out: list[ScanResult | None] = [None] * len(reqs)
    short = []
    whole = whole_length(fmap)  # (once: a map's bound costs tens of µs, a round asks thousands)
    for i, r in enumerate(reqs):
        if r.piece_end - r.piece_start > whole:  # long: scanned in slices
            out[i] = scan_sliced(xs[i], fmap, r, min_size, tile)
        else:
            short.append(i)
    limit = slice_length(fmap)  # samples per batch
    k = 0
    while k < len(short):
        j, length = k, 0
        while j < len(short) and (j == k or length + len(xs[short[j]]) <= limit):
            length += len(xs[short[j]])
            j += 1
        group = short[k:j]
        found = _scan_group(
            [as_2d(xs[i]) for i in group], fmap, [reqs[i] for i in group], min_size, tile
        )
        for i, res in zip(group, found, strict=True):
            out[i] = res
        k = j
    return out


def _scan_group(xs, fmap: FeatureMap, reqs: list[ScanRequest], min_size: int, tile: int):
    offsets = np.zeros(len(xs) + 1, np.int64)
    np.cumsum([len(x) for x in xs], out=offsets[1:])
    x = xs[0] if len(xs) == 1 else np.concatenate(xs, axis=0)
    z = featurize_range(fmap, x, tile, scratch_features(fmap, len(x)))
    scale = float(2.0**fmap.quantum_exponent_)
    meta = np.array([(r.piece_start, *r.segment, r.grid) for r in reqs], np.int64)
    gains, positions = _scan_pieces_kernel(
        z,
        scale,
        offsets,
        meta[:, 0],
        meta[:, 1],
        meta[:, 2],
        np.stack([r.left_at_piece for r in reqs]),
        np.stack([r.total for r in reqs]),
        min_size,
        meta[:, 3],
    )
    best: dict[tuple[int, int], int] = {}  # per segment, the piece whose split wins here
    for i, r in enumerate(reqs):
        if positions[i] < 0:
            continue
        j = best.get(r.segment)
        if j is None or (gains[i], -positions[i]) > (gains[j], -positions[j]):
            best[r.segment] = i
    split = np.zeros(len(reqs), bool)
    split[list(best.values())] = True
    every = snapshot_every(fmap.window_samples)
    # each winner's piece, in z's samples: the request, or the piece of its run holding the split
    pieces = np.array([piece_of(r, int(p)) for r, p in zip(reqs, positions, strict=True)])
    edges = offsets[:-1, None] + pieces - meta[:, :1]
    halves = _split_halves(z, scale, edges, positions - meta[:, 0] + offsets[:-1], split, every)
    return [
        ScanResult(r, float(gain), int(pos), *halves.get(i, (None, None)))
        for i, (r, gain, pos) in enumerate(zip(reqs, gains, positions, strict=True))
    ]


def _split_halves(
    z: np.ndarray,
    scale: float,
    pieces: np.ndarray,
    cuts: np.ndarray,
    split: np.ndarray,
    every: int,
) -> dict[int, tuple[PieceStats, PieceStats]]:
    """Statistics of both halves of every split piece (piece ``i`` is
    ``z[:, pieces[i, 0]:pieces[i, 1]]``, cut at ``cuts[i]``), from one
    :func:`piece_stats` call over all their edges."""
    found = np.flatnonzero(split)
    if not found.size:
        return {}
    starts = pieces[found, 0]
    middles = cuts[found]
    edges = np.unique(np.concatenate([starts, middles, pieces[found, 1]]))
    n = len(edges) - 1
    S = np.empty((n, z.shape[0] * z.shape[2]), np.int64)
    Q, M2, R = np.empty(n), np.empty(n), np.empty(n)
    cnt = np.empty(n, np.int64)
    piece_stats(z, scale, edges, S, Q, M2, R, cnt, -1.0, every)

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
            # scored by their gains, are never dropped for them, nor offered again,
            # which would reset their score; none are offered under a pool of
            # processes), an oversized one always, since reading any piece of it
            # again decodes all of it; of a run of several, copies (a view would
            # keep the whole run for one chunk counted)
            several = len(source.starts) > 2
            for a, b in zip(source.starts[:-1], source.starts[1:], strict=True):
                if local.chunk(int(a)) is None:
                    part = x[int(a) - source.start : int(b) - source.start]
                    local.add_chunk(int(a), part, copy=several)
        if local is not None:
            for r, xr in zip(reqs, xs, strict=True):
                for a, b in pieces_of(r):  # a run's pieces one by one, as if asked alone
                    local.add_piece(a, b, xr[a - r.piece_start : b - r.piece_start])
    results = scan_batch(xs, fmap, reqs, min_size, tile)
    return results, read


def scan_long(
    source: SourceSlice,
    fmap: FeatureMap,
    req: ScanRequest,
    min_size: int,
    tile: int,
    cache: CacheHandle | None,
) -> tuple[list[ScanResult], bool]:
    """Scan one long piece (longer than :func:`~kcpstream.passes.sliced.whole_length`) of a run
    of chunks chunk by chunk, a dask task: each chunk is taken from the job's
    sample cache in this process or read alone (and offered to the cache), and
    fed to a :class:`~kcpstream.passes.sliced.SlicedScan` in slices, so that
    neither the run's samples nor the piece's features are held at once.
    Returns the scan and whether the source was read."""
    local = cache.resolve() if cache is not None else None
    scan = SlicedScan(req, fmap, min_size, tile)
    read = False
    for i in range(len(source.starts) - 1):
        a = int(source.starts[i])
        x = None if local is None else local.chunk(a)
        if x is None:
            (x,) = source.read_chunks([i])
            read = True
            if local is not None:
                local.add_chunk(a, x)
        lo, hi = max(a, req.piece_start), min(a + len(x), req.piece_end)
        scan.feed(x[lo - a : hi - a])
    return [scan.result()], read


def _chunk_groups(
    starts: np.ndarray, reqs: list[ScanRequest]
) -> list[tuple[int, int, list[ScanRequest]]]:
    """Requests grouped by runs of overlapping chunks: ``(first, last, requests)``."""
    groups: list[tuple[int, int, list[ScanRequest]]] = []
    for r in sorted(reqs, key=lambda r: r.piece_start):
        c0, c1 = chunks_holding(starts, r.piece_start, r.piece_end)
        if groups and c0 <= groups[-1][1]:
            first, last, members = groups[-1]
            groups[-1] = (first, max(last, c1), [*members, r])
        else:
            groups.append((c0, c1, [r]))
    return groups


#: Fewest samples of held pieces worth a thread of their own (below, a thread
#: costs more than the scan).
MIN_THREAD_SAMPLES = 2**14


def _scan_here(batches, here, min_size: int, tile: int):
    """Scan the pieces this process holds (``here``: per signal ``b``, the indices
    of its held requests and their samples), yielding ``(b, indices, results)``.

    In threads, a few signals' pieces each (the kernels release the GIL): a
    batch of short series holds every series' samples, and a single series
    in a round may hold hundreds of pieces.  The results do not depend on
    how the pieces are grouped (each piece's best split is its own; the
    halves of a segment's winning piece are computed in whichever group
    holds it)."""
    work = []
    for b, held, samples in here:
        fmap, requests = batches[b][1], batches[b][2]
        for lo, hi in _even_parts([len(x) for x in samples], worker_threads()):
            work.append((b, held[lo:hi], samples[lo:hi], fmap, [requests[i] for i in held[lo:hi]]))
    total = sum(len(x) for _, _, xs, _, _ in work for x in xs)
    scans = each_in_threads(
        lambda part: scan_batch(*part[2:], min_size, tile),
        work,
        least=2,
        most=max(1, total // MIN_THREAD_SAMPLES),
    )
    for (b, held, _, _, _), found in zip(work, scans, strict=True):
        yield b, held, found


def _even_parts(lengths: list[int], parts: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` index ranges splitting ``lengths`` into at most ``parts``
    consecutive runs of about equal sums."""
    total = sum(lengths)
    if parts <= 1 or len(lengths) <= 1 or total < 2 * MIN_THREAD_SAMPLES:
        return [(0, len(lengths))]
    edges = np.searchsorted(np.cumsum(lengths), np.arange(1, parts) * total / parts, side="right")
    bounds = [0, *sorted(set(int(e) for e in edges) - {0, len(lengths)}), len(lengths)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def held_scans(
    fmap: FeatureMap,
    requests: list[ScanRequest],
    cache: SampleCache | None,
    min_size: int,
    tile: int,
) -> list[ScanResult] | None:
    """The scans of ``requests`` when this process holds every one of their
    pieces (none longer than a whole scan), in this thread; else None."""
    if cache is None or not requests:
        return None
    whole = whole_length(fmap)
    if any(r.piece_end - r.piece_start > whole for r in requests):
        return None
    xs = []
    for r in requests:
        x = cache.get(r.piece_start, r.piece_end)
        if x is None:
            return None
        xs.append(x)
    return scan_batch(xs, fmap, requests, min_size, tile)


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
    read its pieces again (the whole series a second time at 10^8 samples;
    ``benchmarks/results/design.md``).  The kernels release the GIL, so
    threads lose nothing the pool would give."""
    if not caches_reachable():
        with dask.config.set(scheduler="threads"):
            return scan_many(batches, min_size, tile)
    out: list[dict[int, ScanResult]] = []
    batch, owners = TaskBatch("scan", merge_per_thread=True), []
    here: list[tuple[int, list[int], list[np.ndarray]]] = []  # pieces this process holds
    for b, (signal, fmap, requests, cache) in enumerate(batches):
        results: dict[int, ScanResult] = {}
        out.append(results)
        long, short, held, samples = [], [], [], []
        whole = whole_length(fmap)
        for i, r in enumerate(requests):
            if r.piece_end - r.piece_start > whole:  # read chunk by chunk even when cached
                long.append(r)
                continue
            x = None if cache is None else cache.get(r.piece_start, r.piece_end)
            if x is None:
                short.append(r)
            else:
                held.append(i)
                samples.append(x)
        if held:
            here.append((b, held, samples))
        if not (long or short):
            continue
        reader = signal.reader
        handle = cache.handle if cache is not None else None
        tasks = [
            (scan_long, *chunks_holding(reader.starts, r.piece_start, r.piece_end), r) for r in long
        ]
        tasks += [(scan_run, *group) for group in _chunk_groups(reader.starts, short)]
        for func, c0, c1, what in tasks:
            home = None if cache is None else home_of(cache, reader.starts, c0, c1)
            reader.add_task(batch, func, c0, c1, fmap, what, min_size, tile, handle, home=home)
            owners.append((b, int(reader.starts[c1 + 1] - reader.starts[c0])))
    for b, held, found in _scan_here(batches, here, min_size, tile):
        out[b].update(zip(held, found, strict=True))
    for (b, length), (group, read) in zip(owners, batch.compute(), strict=True):
        _, _, requests, cache = batches[b]
        index = {(r.segment, r.piece_start, r.piece_end): i for i, r in enumerate(requests)}
        for res in group:
            req = res.request
            out[b][index[(req.segment, req.piece_start, req.piece_end)]] = res
        if read and cache is not None:
            cache.samples_read_again += length
    return [[res[i] for i in range(len(batches[b][2]))] for b, res in enumerate(out)]
