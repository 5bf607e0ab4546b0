"""Pairwise distances of a small univariate sample (the median heuristic)."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["pairwise_distances_1d"]


@njit(nogil=True, cache=True)
def pairwise_distances_1d(x, squared_root):
    """Distances ``|x_i - x_j|`` for ``i < j`` of a 1-D sample, row by row.

    With ``squared_root`` each is computed as ``sqrt((x_i - x_j)**2)``, the
    Euclidean formula of the multivariate path, so both give the same bits.
    """
    m = x.shape[0]
    out = np.empty(m * (m - 1) // 2)
    k = 0
    for i in range(m - 1):
        xi = x[i]
        for j in range(i + 1, m):
            diff = xi - x[j]
            out[k] = np.sqrt(diff * diff) if squared_root else abs(diff)
            k += 1
    return out
