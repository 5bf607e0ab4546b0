"""Pairwise distances of a small sample (the median heuristic)."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "kth_distance_1d",
    "kth_smallest_nonnegative",
    "largest_below",
    "largest_distance_below_1d",
    "pairwise_distances",
]


@njit(nogil=True, cache=True)
def pairwise_distances(x, euclidean):
    """Distances ``||x_i - x_j||`` for ``i < j`` of a sample ``x`` (m, d), row by row.

    Euclidean (``sqrt`` of the sum of squared differences) or, without
    ``euclidean``, L1 (the sum of absolute differences); the channels are
    summed in order, as ``scipy.spatial.distance.pdist`` does.  The pairs of
    a row are accumulated side by side (one lane each), channel after
    channel, so each pair's sum has that order and the loop vectorizes.
    """
    m, d = x.shape
    xt = np.ascontiguousarray(x.T)
    out = np.empty(m * (m - 1) // 2)
    acc = np.empty(m)
    k = 0
    for i in range(m - 1):
        w = m - i - 1
        acc[:w] = 0.0
        for c in range(d):
            xi = xt[c, i]
            row = xt[c, i + 1 :]
            if euclidean:
                for jj in range(w):
                    diff = xi - row[jj]
                    acc[jj] += diff * diff
            else:
                for jj in range(w):
                    acc[jj] += abs(xi - row[jj])
        if euclidean:
            for jj in range(w):
                out[k + jj] = np.sqrt(acc[jj])
        else:
            out[k : k + w] = acc[:w]
        k += w
    return out


@njit(nogil=True, cache=True)
def kth_smallest_nonnegative(values, k):
    """The ``k``-th smallest (from 0) of non-negative floats, exactly.

    Radix selection on the bit patterns (a non-negative float64 orders as
    its bits do as an unsigned integer): four 16-bit digits, the most
    significant first; each digit's histogram keeps only the candidates
    sharing the digits fixed so far.  Linear, and indifferent to repeated
    values (which slow a quickselect down).
    """
    bits = values.view(np.uint64)
    cand = bits
    prefix = np.uint64(0)
    hist = np.empty(65536, np.int64)
    for level in range(4):
        shift = np.uint64(48 - 16 * level)
        hist[:] = 0
        for v in cand:
            hist[(v >> shift) & np.uint64(0xFFFF)] += 1
        digit = 0
        while k >= hist[digit]:
            k -= hist[digit]
            digit += 1
        prefix |= np.uint64(digit) << shift
        if level < 3:
            kept = np.empty(hist[digit], np.uint64)
            j = 0
            for v in cand:
                if (v >> shift) & np.uint64(0xFFFF) == digit:
                    kept[j] = v
                    j += 1
            cand = kept
    return np.array([prefix]).view(np.float64)[0]


@njit(nogil=True, cache=True)
def largest_below(values, upper):
    """The largest of ``values`` below ``upper`` and how many are below it
    (``-inf`` and 0 when none is).  Branch-free, so it vectorizes."""
    best = -np.inf
    count = 0
    for v in values:
        below = v < upper
        count += below
        best = max(best, v if below else -np.inf)
    return best, count


@njit(nogil=True, cache=True)
def _distance_1d(a, b, euclidean):
    diff = a - b
    return np.sqrt(diff * diff) if euclidean else abs(diff)


@njit(nogil=True, cache=True)
def _pairs_within(xs, t, euclidean):
    """Pairs ``i < j`` of sorted finite ``xs`` at distance at most ``t`` (two pointers:
    the distance grows with ``j`` and shrinks with ``i``, rounding included)."""
    m = xs.size
    count = 0
    j = 0
    for i in range(m):
        if j < i + 1:
            j = i + 1
        while j < m and _distance_1d(xs[j], xs[i], euclidean) <= t:
            j += 1
        count += j - i - 1
    return count


@njit(nogil=True, cache=True)
def kth_distance_1d(xs, k, euclidean):
    """The ``k``-th smallest (from 0) distance between two of the sorted finite
    values ``xs``, computed as :func:`pairwise_distances` does, without forming
    them: the smallest float whose count of pairs within it exceeds ``k``,
    searched by bisection on its bits (a non-negative float64 orders as its
    bits do).  ``O(m)`` per step, at most 64 steps; the result is one of the
    distances since the count changes only at them."""
    hi_value = _distance_1d(xs[xs.size - 1], xs[0], euclidean)
    bits = np.empty(1, np.uint64)
    value = bits.view(np.float64)
    value[0] = hi_value
    lo, hi = np.uint64(0), bits[0]
    while lo < hi:
        mid = lo + (hi - lo) // np.uint64(2)
        bits[0] = mid
        if _pairs_within(xs, value[0], euclidean) > k:
            hi = mid
        else:
            lo = mid + np.uint64(1)
    bits[0] = lo
    return value[0]


@njit(nogil=True, cache=True)
def largest_distance_below_1d(xs, upper, euclidean):
    """:func:`largest_below` over the distances of the sorted finite values ``xs``
    (two pointers, without forming them)."""
    m = xs.size
    best = -np.inf
    count = 0
    j = 0
    for i in range(m):
        if j < i + 1:
            j = i + 1
        while j < m and _distance_1d(xs[j], xs[i], euclidean) < upper:
            j += 1
        count += j - i - 1
        if j > i + 1:
            best = max(best, _distance_1d(xs[j - 1], xs[i], euclidean))
    return best, count
