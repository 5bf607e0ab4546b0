"""Featurization of one tile of samples, on plain arrays.

Each function takes a tile ``x`` of shape ``(L, d)`` (any real dtype) and
writes float32 features into ``out`` of shape ``(p, L)`` (feature-major).
Every output element is computed by the same sequence of elementwise float32
operations whatever the tile's length or position, so the features of a
sample do not depend on how the signal was chunked or tiled.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["centered_float32", "rff_tile", "nystrom_tile", "linear_tile", "quantize"]


def centered_float32(x: np.ndarray, center: np.ndarray) -> np.ndarray:
    """``(x - center)`` computed in float64, returned as a (d, L) float32 array."""
    xc = np.asarray(x, dtype=np.float64) - center
    return np.ascontiguousarray(xc.T, dtype=np.float32)


def _project(xct: np.ndarray, weights: np.ndarray, out: np.ndarray) -> None:
    """``out[j, i] = sum_k weights[k, j] * xct[k, i]``, summed in order of k."""
    np.multiply(weights[0][:, None], xct[0][None, :], out=out)
    if weights.shape[0] > 1:
        tmp = np.empty_like(out)
        for k in range(1, weights.shape[0]):
            np.multiply(weights[k][:, None], xct[k][None, :], out=tmp)
            out += tmp


def rff_tile(
    x: np.ndarray, center: np.ndarray, weights: np.ndarray, amplitude: np.float32, out: np.ndarray
) -> None:
    """Random Fourier features ``amplitude * [cos(W^T x); sin(W^T x)]``.

    ``weights`` is float32 (d, m); ``out`` is float32 (2m, L).
    """
    m = weights.shape[1]
    xct = centered_float32(x, center)
    proj = out[m:]  # use the sin half as scratch for the projection
    _project(xct, weights, proj)
    np.cos(proj, out=out[:m])
    np.sin(proj, out=proj)
    out *= amplitude


@njit(nogil=True, cache=True)
def _matmul_tn(a, k, out):
    """``out[j, i] = sum_l a[l, j] * k[l, i]``, summed in order of l (deterministic)."""
    m = a.shape[0]
    r = a.shape[1]
    n = k.shape[1]
    for j in range(r):
        for i in range(n):
            out[j, i] = 0.0
        for lm in range(m):
            coef = a[lm, j]
            for i in range(n):
                out[j, i] += coef * k[lm, i]


def nystrom_tile(
    x: np.ndarray,
    center: np.ndarray,
    landmarks: np.ndarray,
    scale: np.float32,
    laplacian: bool,
    projection: np.ndarray,
    out: np.ndarray,
) -> None:
    """Nyström features ``A^T k(L, x)``.

    ``landmarks`` float32 (m, d) (centred), ``projection`` float32 (m, r),
    ``out`` float32 (r, L).  Gaussian: ``k = exp(-scale * ||x - l||^2)``;
    Laplacian: ``k = exp(-scale * ||x - l||_1)``.
    """
    xct = centered_float32(x, center)
    m = landmarks.shape[0]
    dist = np.zeros((m, xct.shape[1]), dtype=np.float32)
    tmp = np.empty_like(dist)
    for k in range(xct.shape[0]):
        np.subtract(xct[k][None, :], landmarks[:, k][:, None], out=tmp)
        if laplacian:
            np.abs(tmp, out=tmp)
        else:
            np.multiply(tmp, tmp, out=tmp)
        dist += tmp
    dist *= -scale
    np.exp(dist, out=dist)
    _matmul_tn(projection, dist, out)


def linear_tile(x: np.ndarray, center: np.ndarray, out: np.ndarray) -> None:
    """Identity features ``x - center`` (float32, (d, L))."""
    out[...] = centered_float32(x, center)


def quantize(z: np.ndarray, exponent: int) -> np.ndarray:
    """Round float32 features onto the grid ``2**-exponent`` (exact, in place safe).

    Returns a new float32 array whose values times ``2**exponent`` are exact
    integers: the values the block-statistics kernels accumulate.
    """
    scale = np.float32(2.0**exponent)
    return np.rint(z * scale) / scale
