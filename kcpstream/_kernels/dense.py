"""Kernels for signals small enough to keep the exact prefix sums of every sample.

With a prefix sum at every position, the best split of any segment is a scan
of its positions with no data read, and binary segmentation runs whole in one
compiled loop.  Every gain is the value of
:func:`~kcpstream._kernels.blockstats.split_gain` on the same integers (the
operations of its loop, in its order, one position per vector lane), so the
search returns exactly what the block-grid search returns.

``prefix`` is feature-major, ``(p, n + 1)`` int64 with a leading zero column,
as :attr:`kcpstream.search.stats.BlockStats.prefix` with ``block_size = 1``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kcpstream._kernels.blockstats import ordered_sumsq

#: Positions scanned together: their accumulators stay in L1 while every
#: feature row streams past them.
SCAN_TILE = 256


@njit(nogil=True, cache=True)
def sample_prefix_sums(Z, scale, norm_bound):
    """Exact prefix sums of quantized features, and per-sample ``||q||^2`` and bound.

    Parameters
    ----------
    Z : float32 (k, L, m) raw features (:mod:`kcpstream._kernels.featurize`).
    scale : float64, ``2**quantum_exponent``.
    norm_bound : float
        A bound on every sample's quantized norm known from the map, or a
        negative number to bound each sample from its own features.

    Returns
    -------
    prefix : int64 (p, L + 1), ``prefix[:, t]`` the sum of ``q`` over samples ``< t``.
    Q : float64 (L,), ``||q_t||^2``.
    M2 : float64 (L,), an upper bound on ``||q_t||^2`` (as the data pass computes it
        for a block of one sample).

    The quantized values are integers held in float64; each sample's sum of
    squares is summed over the features in order, as the data pass sums a
    block's (the same bits for a block of one sample); the prefix sums are
    exact int64.
    """
    k, L, m = Z.shape
    p = k * m
    prefix = np.zeros((p, L + 1), np.int64)
    Q = np.empty(L)
    M2 = np.empty(L)
    run = np.zeros(p, np.int64)
    rows = np.empty((64, p), np.int64)
    q = np.empty(m)
    bounds = np.empty(m)
    for t0 in range(0, L, 64):
        width = min(64, L - t0)
        for r in range(width):
            t = t0 + r
            qsum = 0.0
            m2 = 0.0
            for g in range(k):
                for jj in range(m):
                    q[jj] = np.rint(np.float64(Z[g, t, jj]) * scale)
                qsum = ordered_sumsq(qsum, q)  # the same bits wherever q lies
                for jj in range(m):
                    j = g * m + jj
                    run[j] += np.int64(q[jj])
                    rows[r, j] = run[j]
                if norm_bound < 0.0:  # |q_j| <= |z_j| * scale + 1/2
                    for jj in range(m):
                        bounds[jj] = abs(np.float64(Z[g, t, jj])) * scale + 0.5
                    m2 = ordered_sumsq(m2, bounds)
            Q[t] = qsum
            if norm_bound >= 0.0:
                m2 = norm_bound * norm_bound
            M2[t] = m2 * (1.0 + 1e-12)
        for j in range(p):  # transposed write, while the tile is in cache
            for r in range(width):
                prefix[j, t0 + r + 1] = rows[r, j]
    return prefix, Q, M2


@njit(nogil=True, cache=True)
def best_split_between(prefix, a, e, lo, hi):
    """Best split of the segment ``[a, e)`` among the positions ``lo .. hi``
    (inclusive, ``a < lo <= hi < e``): ``(gain, position)`` in quantized
    units, the first position on ties; ``(-1.0, -1)`` when ``lo > hi``.

    The gain at ``c`` is ``split_gain(c - a, e - c, prefix[:, c] - prefix[:, a],
    prefix[:, e] - prefix[:, a])``, bit for bit: each position keeps its own
    accumulator over the features in the same order.
    """
    best = -1.0
    pos = -1
    if lo > hi:
        return best, pos
    p = prefix.shape[0]
    start = np.empty(p, np.int64)
    total = np.empty(p, np.int64)
    for j in range(p):
        start[j] = prefix[j, a]
        total[j] = prefix[j, e] - prefix[j, a]
    inv_l = np.empty(SCAN_TILE)
    inv_r = np.empty(SCAN_TILE)
    acc = np.empty(SCAN_TILE)
    for c0 in range(lo, hi + 1, SCAN_TILE):
        width = min(SCAN_TILE, hi + 1 - c0)
        for i in range(width):
            inv_l[i] = 1.0 / float(c0 + i - a)
            inv_r[i] = 1.0 / float(e - c0 - i)
            acc[i] = 0.0
        for j in range(p):
            row = prefix[j, c0 : c0 + width]
            s0 = start[j]
            tj = total[j]
            for i in range(width):
                sl = row[i] - s0
                sr = tj - sl
                d = float(sl) * inv_l[i] - float(sr) * inv_r[i]
                acc[i] += d * d
        for i in range(width):
            fl = float(c0 + i - a)
            fr = float(e - c0 - i)
            gain = (fl * fr / (fl + fr)) * acc[i]
            if gain > best:
                best = gain
                pos = c0 + i
    return best, pos


@njit(nogil=True, cache=True)
def next_split(open_, gains, splits, count):
    """The segment sequential binary segmentation splits next, among the
    first ``count``: of those open with a split (``splits >= 0``), the largest
    gain, ties going to the smallest split position; -1 when there is none."""
    best = -1
    for i in range(count):
        if not open_[i] or splits[i] < 0:
            continue
        if (
            best < 0
            or gains[i] > gains[best]
            or (gains[i] == gains[best] and splits[i] < splits[best])
        ):
            best = i
    return best


@njit(nogil=True, cache=True)
def dense_binseg(prefix, max_splits, pen_q, min_size):
    """Sequential binary segmentation over every position.

    Splits the segment with the largest best gain (ties: the smallest
    split position), at most ``max_splits`` times, while that gain is above
    ``pen_q`` (``-inf``: no penalty) and some segment has an admissible split.

    Returns ``(starts, ends, splits, gains)`` of the splits in the order made.
    """
    n = prefix.shape[1] - 1
    cap = 2 * max_splits + 1
    seg_start = np.empty(cap, np.int64)
    seg_end = np.empty(cap, np.int64)
    seg_gain = np.empty(cap)
    seg_split = np.empty(cap, np.int64)
    open_ = np.zeros(cap, np.bool_)
    out_start = np.empty(max_splits, np.int64)
    out_end = np.empty(max_splits, np.int64)
    out_split = np.empty(max_splits, np.int64)
    out_gain = np.empty(max_splits)
    seg_start[0] = 0
    seg_end[0] = n
    seg_gain[0], seg_split[0] = best_split_between(prefix, 0, n, min_size, n - min_size)
    open_[0] = True
    count = 1
    made = 0
    while made < max_splits:
        best = next_split(open_, seg_gain, seg_split, count)
        if best < 0 or not seg_gain[best] > pen_q:
            break
        open_[best] = False
        a, c, e = seg_start[best], seg_split[best], seg_end[best]
        out_start[made], out_end[made], out_split[made] = a, e, c
        out_gain[made] = seg_gain[best]
        made += 1
        for lo, hi in ((a, c), (c, e)):
            seg_start[count] = lo
            seg_end[count] = hi
            seg_gain[count], seg_split[count] = best_split_between(
                prefix, lo, hi, lo + min_size, hi - min_size
            )
            open_[count] = True
            count += 1
    return out_start[:made], out_end[:made], out_split[:made], out_gain[:made]
