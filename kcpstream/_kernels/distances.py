"""Pairwise distances of a small sample (the median heuristic)."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["kth_smallest_nonnegative", "pairwise_distances"]


@njit(nogil=True, cache=True)
def pairwise_distances(x, euclidean):
    """Distances ``||x_i - x_j||`` for ``i < j`` of a sample ``x`` (m, d), row by row.

    Euclidean (``sqrt`` of the sum of squared differences) or, without
    ``euclidean``, L1 (the sum of absolute differences); the channels are
    summed in order, as ``scipy.spatial.distance.pdist`` does.
    """
    m, d = x.shape
    out = np.empty(m * (m - 1) // 2)
    k = 0
    for i in range(m - 1):
        for j in range(i + 1, m):
            acc = 0.0
            for c in range(d):
                diff = x[i, c] - x[j, c]
                acc += diff * diff if euclidean else abs(diff)
            out[k] = np.sqrt(acc) if euclidean else acc
            k += 1
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
