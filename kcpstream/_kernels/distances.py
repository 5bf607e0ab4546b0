"""Pairwise distances of a small sample and their median (the median heuristic)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def pairwise_sums(x, euclidean):
    """Per pair ``i < j`` of a sample ``x`` (m, d), row by row, the sum over the
    channels of the squared differences (``euclidean``: the Euclidean distance's
    square) or of the absolute differences (the L1 distance).

    The channels are summed in order, as ``scipy.spatial.distance.pdist``
    does, so ``sqrt`` of a Euclidean sum is ``pdist``'s distance to the bit.
    The pairs of a row are accumulated side by side (one lane each), channel
    after channel, so each pair's sum has that order and the loop vectorizes.
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
        out[k : k + w] = acc[:w]
        k += w
    return out


#: at most this many candidates left: sort them
_SORT_BELOW = 512
#: from this many values on, a strided sample first narrows the candidates
_SAMPLE_FROM = 65536
#: the sample's size (about)
_SAMPLE_SIZE = 4096


@njit(nogil=True, cache=True)
def _radix_pair(bits, r1, r2, lo, hi):
    """Ranks ``r1`` and ``r2`` (``r1`` again or ``r1 + 1``) of the unsigned
    integers ``bits``, all within ``[lo, hi]``.

    Counted into at most 2**16 buckets of equal width, only the bucket
    holding both ranks is kept for the next round; when two adjacent ranks
    fall in different buckets, they are the largest of one and the smallest
    of the other.  Each round narrows the range 2**15-fold at least, and
    repeated values cost nothing more (a bucket of equal values ends it)."""
    pair = np.empty(2, np.uint64)
    cur = bits
    while True:
        if cur.size <= _SORT_BELOW:
            ordered = np.sort(cur)
            pair[0], pair[1] = ordered[r1], ordered[r2]
            return pair
        span = hi - lo
        if span == 0:
            pair[0], pair[1] = lo, lo
            return pair
        shift = np.uint64(0)
        while (span >> shift) >= np.uint64(65536):
            shift += np.uint64(1)
        hist = np.zeros(int(span >> shift) + 1, np.int64)
        for b in cur:
            hist[(b - lo) >> shift] += 1
        b1, b2, below, seen = -1, -1, 0, 0
        for i in range(hist.size):
            if b1 < 0 and seen + hist[i] > r1:
                b1, below = i, seen
            if seen + hist[i] > r2:
                b2 = i
                break
            seen += hist[i]
        first, second = np.uint64(b1), np.uint64(b2)
        if b1 != b2:
            pair[0], pair[1] = np.uint64(0), ~np.uint64(0)
            for b in cur:
                bucket = (b - lo) >> shift
                if bucket == first:
                    pair[0] = max(pair[0], b)
                elif bucket == second:
                    pair[1] = min(pair[1], b)
            return pair
        kept = np.empty(hist[b1], np.uint64)
        base = lo
        lo, hi = ~np.uint64(0), np.uint64(0)
        j = 0
        for b in cur:
            if (b - base) >> shift == first:
                kept[j] = b
                j += 1
                lo, hi = min(lo, b), max(hi, b)
        cur = kept
        r1 -= below
        r2 -= below


@njit(nogil=True, cache=True)
def order_statistic_pair(values, k):
    """The ``k``-th and ``k + 1``-th smallest (from 0; the last one twice when
    ``k + 1`` is past the end) of non-negative floats (no NaN), exactly.

    A non-negative float64 orders as its bits do as an unsigned integer, so
    the selection works on the bits: a radix selection over buckets of equal
    width between the smallest and the largest.  On many values a strided
    sample first gives a window that very likely holds both ranks: one pass
    counts the values below it and keeps those inside, and the selection
    runs on those (on all of them again if the window missed).
    """
    n = values.size
    r1, r2 = k, min(k + 1, n - 1)
    bits = values.view(np.uint64)
    if n >= _SAMPLE_FROM:
        sample = bits[:: n // _SAMPLE_SIZE].copy()
        s = sample.size
        margin = 4.0 * 0.5 / np.sqrt(s) + 2.0 / s  # four standard errors of a quantile
        i_lo = int(np.floor((r1 / n - margin) * s))
        i_hi = int(np.ceil((r2 / n + margin) * s))
        wlo, whi = np.uint64(0), ~np.uint64(0)
        smallest, largest = sample.min(), sample.max()
        if i_lo >= 0:
            wlo = _radix_pair(sample, i_lo, i_lo, smallest, largest)[0]
        if i_hi < s:
            whi = _radix_pair(sample, i_hi, i_hi, smallest, largest)[0]
        width = whi - wlo
        # room for twice the values the window should hold (a large array
        # allocated per call costs more in page faults than the selection)
        room = 2 * int((min(i_hi, s) - max(i_lo, 0) + 1) / s * n) + _SORT_BELOW
        kept = np.empty(min(room, n), np.uint64)
        below = 0
        j = 0
        lo, hi = ~np.uint64(0), np.uint64(0)
        for b in bits:
            below += b < wlo
            if b - wlo <= width:  # wlo <= b <= whi, in one unsigned comparison
                if j < kept.size:
                    kept[j] = b
                j += 1
                lo, hi = min(lo, b), max(hi, b)
        if j <= kept.size and r1 >= below and r2 < below + j:
            result = _radix_pair(kept[:j], r1 - below, r2 - below, lo, hi).view(np.float64)
            return result[0], result[1]
    result = _radix_pair(bits, r1, r2, bits.min(), bits.max()).view(np.float64)
    return result[0], result[1]


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
    values ``xs``, computed as ``pdist`` does (the root of the squared
    difference, or its absolute value), without forming them: the smallest
    float whose count of pairs within it exceeds ``k``, searched by bisection
    on its bits (a non-negative float64 orders as its bits do).  ``O(m)`` per
    step, at most 64 steps; the result is one of the distances since the
    count changes only at them."""
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
    """The largest distance below ``upper`` between two of the sorted finite values
    ``xs`` and how many are below it (``-inf`` and 0 when none is; two
    pointers, without forming the distances)."""
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
