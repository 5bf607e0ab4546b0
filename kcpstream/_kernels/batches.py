"""Kernels of the noise estimate: consecutive differences of batch sums.

:mod:`kcpstream.selection.significance` estimates the features' long-run covariance
from the sums over batches of consecutive blocks.  These kernels give what
its numpy expressions give, bit for bit (the same operations in the same
order), in one pass over the prefix sums instead of one per operation.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def batch_difference_tiles(prefix, per_batch, tile):
    """``(k, T, ss)``: the ``k`` whole batches of ``per_batch`` columns of the
    float prefix sums ``prefix`` (p, m + 1), the consecutive differences of
    their sums ``D = np.diff(prefix[:, :k * per_batch + 1:per_batch], n=2, axis=1)``
    (p, k - 1) in tiles of ``tile`` columns, ``T[t] = D[:, t * tile:(t + 1) * tile]``
    (the last tile padded with zeros; the differences are held once, not
    once whole and once tiled), and their squared norms ``ss``, summed over
    the features in their order (as numpy's ``(D ** 2).sum(axis=0)`` does
    for two columns or more)."""
    p, m1 = prefix.shape
    k = (m1 - 1) // per_batch
    width = max(k - 1, 0)
    n_tiles = (width + tile - 1) // tile
    T = np.zeros((n_tiles, p, tile))
    ss = np.zeros(width)
    for i in range(p):
        for j in range(width):
            a = prefix[i, j * per_batch]
            b = prefix[i, (j + 1) * per_batch]
            c = prefix[i, (j + 2) * per_batch]
            d = (c - b) - (b - a)
            T[j // tile, i, j % tile] = d
            ss[j] += d * d
    return k, T, ss
