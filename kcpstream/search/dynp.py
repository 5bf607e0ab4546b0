"""Exact segmentation by dynamic programming on a grid, then exact local refinement.

The total cost of a segmentation is ``Q - sum_seg ||S_seg||^2 / N_seg``
(``Q`` is the same for every segmentation), so the best segmentation into D
segments maximises ``sum_seg V(seg)`` with ``V = ||S||^2 / N``: the DP works
on exact integer sums only.

The grid is the block grid (thinned to at most :data:`MAX_GRID` points)
together with the change-points of binary segmentation's path, so for every
D the DP optimum is at least as good as binary segmentation's.  With a grid
of every sample (block size 1) it is the exact kernel change-point
segmentation (Algorithm 1 of the thesis).  The chosen segmentation is then
refined exactly: each change-point moves to the best position between its
neighbouring grid points (scanning those samples), alternately the even
and the odd change-points, while the total cost decreases.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from kcpstream._kernels.blockstats import split_gain
from kcpstream.search.binseg import SearchLog, Steps, count_round
from kcpstream.search.requests import ScanRequest
from kcpstream.search.stats import BlockStats

#: Grid points of the DP (memory ``8 * MAX_GRID**2`` bytes for the values).
MAX_GRID = 2048
#: Rounds of local refinement at most.
MAX_REFINE_ROUNDS = 20


def dp_grid(
    stats: BlockStats, seeds: list[int] | np.ndarray, max_grid: int = MAX_GRID
) -> np.ndarray:
    """Grid positions: every ``k``-th block boundary (at most ``max_grid``), the seeds, 0 and n."""
    nb = stats.n_blocks
    step = max(1, math.ceil(nb / max_grid))
    grid = np.minimum(np.arange(0, nb + 1, step, dtype=np.int64) * stats.block_size, stats.n)
    return np.unique(np.concatenate([grid, np.asarray(seeds, dtype=np.int64), [0, stats.n]]))


@njit(nogil=True, cache=True)
def _segment_values(prefix, positions, min_size):
    """``V[j, i] = ||S(g_i, g_j)||^2 / (g_j - g_i)`` for admissible ``i < j`` (else -inf):
    row ``j`` holds every segment ending at ``g_j`` (the order the DP reads them).

    ``prefix`` is ``(m, p)``: the exact prefix sums at the grid positions, as
    int64, or as float64 when every one is an integer below ``2**53`` (then
    each difference is the same exact integer, and the float subtraction
    vectorizes).  Each square norm is summed over features in order, so the
    values do not depend on the layout.
    """
    m = positions.shape[0]
    p = prefix.shape[1]
    columns = np.ascontiguousarray(prefix.T)  # (p, m): one feature at every grid point
    values = np.full((m, m), -np.inf)
    acc = np.empty(m)
    for j in range(1, m):
        acc[:j] = 0.0
        for f in range(p):
            col = columns[f]
            top = col[j]
            for i in range(j):
                s = float(top - col[i])
                acc[i] += s * s
        for i in range(j):
            length = positions[j] - positions[i]
            if length >= min_size:
                values[j, i] = acc[i] / float(length)
    return values


@njit(nogil=True, cache=True, inline="always")
def _first_max(previous, row, j):
    """The largest ``previous[i] + row[i]`` over ``1 <= i < j`` and its first index
    (``-inf``, -1 if none is finite): four interleaved lanes, each keeping its
    first maximum, then the largest, ties to the smallest index -- the result
    of one scan, without its chain of dependent comparisons."""
    t0 = t1 = t2 = t3 = -np.inf
    w0 = w1 = w2 = w3 = -1
    i = 1
    while i + 4 <= j:
        v0 = previous[i] + row[i]
        v1 = previous[i + 1] + row[i + 1]
        v2 = previous[i + 2] + row[i + 2]
        v3 = previous[i + 3] + row[i + 3]
        if v0 > t0:
            t0, w0 = v0, i
        if v1 > t1:
            t1, w1 = v1, i + 1
        if v2 > t2:
            t2, w2 = v2, i + 2
        if v3 > t3:
            t3, w3 = v3, i + 3
        i += 4
    while i < j:
        v0 = previous[i] + row[i]
        if v0 > t0:
            t0, w0 = v0, i
        i += 1
    top, where = t0, w0
    for t, w in ((t1, w1), (t2, w2), (t3, w3)):
        if t > top or (t == top and w >= 0 and (where < 0 or w < where)):
            top, where = t, w
    return top, where


@njit(nogil=True, cache=True)
def _dp(values, d_max):
    """``best[d, j]``: largest sum of V over segmentations of ``[0, g_j)`` into d + 1 segments.

    ``values`` as :func:`_segment_values` gives it (row ``j``: segments ending
    at ``g_j``).  Returns the table and the argmax table for backtracking
    (first maximum).  An inadmissible segment or prefix is ``-inf``, and
    ``-inf + x`` never beats a running maximum, so it needs no test.  Every
    ``d`` of one ``j`` in turn, so that row ``j`` is read from memory once.
    """
    m = values.shape[0]
    best = np.full((d_max, m), -np.inf)
    arg = np.full((d_max, m), -1, np.int64)
    for j in range(1, m):
        row = values[j]
        best[0, j] = row[0]
        for d in range(1, d_max):
            best[d, j], arg[d, j] = _first_max(best[d - 1], row, j)
    return best, arg


#: Prefix sums below this are exact float64 integers (see :func:`_segment_values`).
_EXACT_FLOAT = 2**53


def optimal_partitions(
    stats: BlockStats, grid: np.ndarray, d_max: int, min_size: int
) -> tuple[np.ndarray, list[np.ndarray | None]]:
    """Best segmentation on the grid for every D = 1 .. d_max.

    Returns the costs (``costs[D - 1]``, feature units; ``inf`` where no
    segmentation into D admissible segments exists) and the change-points of
    each (``None`` where infeasible).
    """
    prefix = stats.prefix_rows(grid)
    if np.abs(prefix).max(initial=0) < _EXACT_FLOAT:
        prefix = prefix.astype(np.float64)
    values = _segment_values(prefix, grid, min_size)
    best, arg = _dp(values, d_max)
    q_total = stats.range_sum(0, stats.n)[1]
    last = len(grid) - 1
    costs = np.full(d_max, np.inf)
    table = _backtrack(arg, np.asarray(grid, dtype=np.int64), last)
    partitions: list[np.ndarray | None] = []
    for d in range(d_max):
        if best[d, last] == -np.inf:
            partitions.append(None)
            continue
        partitions.append(table[d, :d].copy())
        costs[d] = (q_total - best[d, last]) * stats.unit
    return costs, partitions


@njit(nogil=True, cache=True)
def _backtrack(arg, grid, last):
    """Row ``d``: the ``d`` change-points of the best segmentation of ``[0, g_last)``
    into ``d + 1`` segments, in order (from the argmax table of :func:`_dp`;
    rows of infeasible ``d`` hold garbage the caller skips)."""
    d_max = arg.shape[0]
    out = np.zeros((d_max, max(d_max - 1, 1)), np.int64)
    for d in range(d_max):
        j = last
        for level in range(d, 0, -1):
            j = arg[level, j]
            if j < 0:
                break
            out[d, level - 1] = grid[j]
    return out


def refine_steps(
    stats: BlockStats,
    changepoints: np.ndarray,
    grid: np.ndarray,
    *,
    log: SearchLog,
) -> Steps:
    """Move each change-point to the best position between its neighbouring grid points.

    A generator of refinement rounds (see :func:`~kcpstream.passes.drive.drive_many`):
    even-indexed and odd-indexed change-points move in turn (each with its
    neighbours fixed), all scans of a turn in one round, until a full round
    moves nothing; the total cost never increases.  Returns the change-points.
    """
    cps = [int(c) for c in changepoints]

    def window(k: int) -> ScanRequest | None:
        """Scan of the grid pieces on both sides of change-point k, neighbours fixed."""
        a = cps[k - 1] if k > 0 else 0
        e = cps[k + 1] if k + 1 < len(cps) else stats.n
        i = int(np.searchsorted(grid, cps[k]))  # grid[i - 1] < cps[k] <= grid[i]
        above = grid[i + 1] if grid[i] == cps[k] else grid[i]
        lo, hi = max(a, int(grid[i - 1])), min(e, int(above))
        if hi - lo < 2:
            return None
        pa = stats.prefix_at(a)[0]
        return ScanRequest((a, e), lo, hi, stats.prefix_at(lo)[0] - pa, stats.prefix_at(e)[0] - pa)

    def gain_at(c: int, a: int, e: int) -> float:
        pa = stats.prefix_at(a)[0]
        return split_gain(c - a, e - c, stats.prefix_at(c)[0] - pa, stats.prefix_at(e)[0] - pa)

    for _ in range(MAX_REFINE_ROUNDS):
        moved = False
        for parity in (0, 1):
            owners = [k for k in range(parity, len(cps), 2) if window(k) is not None]
            requests = [window(k) for k in owners]
            if not requests:
                continue
            count_round(log, requests)
            results = yield requests
            for k, res in zip(owners, results, strict=True):
                a, e = res.request.segment
                if res.pos < 0 or res.pos == cps[k] or not res.gain > gain_at(cps[k], a, e):
                    continue
                stats.add_split(res.pos, *res.piece, res.left, res.right)
                cps[k] = res.pos
                moved = True
        if not moved:
            break
    return np.array(cps, dtype=np.int64)
