"""Featurization of one tile of samples, on plain arrays.

Each function takes a tile ``x`` of shape ``(L, d)`` (any real dtype) and
writes float32 features into ``out`` of shape ``(k, L, m)``: ``k`` groups of
``m`` features (RFF: the cosines and the sines), each group a contiguous
sample-major array, so numpy's vectorised float32 trigonometry runs on
contiguous memory and the accumulation kernels read a sample's features
contiguously.  Feature ``g * m + j`` is ``out[g, :, j]``.

Every output element is computed by the same sequence of elementwise float32
operations whatever the tile's length or position, so the features of a
sample do not depend on how the signal was chunked or tiled.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "centered_float32",
    "rff_tile",
    "nystrom_tile",
    "linear_tile",
    "quantize",
    "groups_to_rows",
]


def centered_float32(x: np.ndarray, center: np.ndarray) -> np.ndarray:
    """``(x - center)`` computed in float64, returned as an (L, d) float32 array."""
    xc = np.asarray(x, dtype=np.float64) - center
    return np.ascontiguousarray(xc, dtype=np.float32)


@njit(nogil=True, cache=True)
def _project_rows(x, center, weights, out):
    """``out[t, j] = sum_k xc[t, k] * weights[k, j]`` with ``xc = float32(x - center)``
    (the difference in float64), summed in order of k (deterministic)."""
    for t in range(x.shape[0]):
        v = np.float32(np.float64(x[t, 0]) - center[0])
        for j in range(weights.shape[1]):
            out[t, j] = v * weights[0, j]
        for k in range(1, weights.shape[0]):
            v = np.float32(np.float64(x[t, k]) - center[k])
            for j in range(weights.shape[1]):
                out[t, j] += v * weights[k, j]


def rff_tile(
    x: np.ndarray, center: np.ndarray, weights: np.ndarray, amplitudes: np.ndarray, out: np.ndarray
) -> None:
    """Fourier features ``[a * cos(x W), a * sin(x W)]``.

    ``weights`` is float32 (d, m), ``amplitudes`` float32 (m,); ``out`` is
    float32 (2, L, m).  The projection ``x W`` is summed over the input
    channels in order.
    """
    proj = out[1]  # the sin group holds the projection first
    _project_rows(x, center, weights, proj)
    np.cos(proj, out=out[0])
    np.sin(proj, out=proj)
    if np.ndim(amplitudes) == 0:
        out *= amplitudes
    else:
        _scale_columns(out, amplitudes)


@njit(nogil=True, cache=True)
def _scale_columns(out, amplitudes):
    """``out[g, t, j] *= amplitudes[j]`` (the float32 products numpy would make)."""
    for g in range(out.shape[0]):
        for t in range(out.shape[1]):
            for j in range(out.shape[2]):
                out[g, t, j] *= amplitudes[j]


@njit(nogil=True, cache=True)
def _matmul_rows(k, a, out):
    """``out[i, j] = sum_l k[i, l] * a[l, j]``, summed in order of l (deterministic)."""
    for i in range(k.shape[0]):
        for j in range(a.shape[1]):
            out[i, j] = 0.0
        for lm in range(a.shape[0]):
            coef = k[i, lm]
            for j in range(a.shape[1]):
                out[i, j] += coef * a[lm, j]


def nystrom_tile(
    x: np.ndarray,
    center: np.ndarray,
    landmarks: np.ndarray,
    scale: np.float32,
    laplacian: bool,
    projection: np.ndarray,
    out: np.ndarray,
) -> None:
    """Nyström features ``k(x, L) A``.

    ``landmarks`` float32 (m, d) (centred), ``projection`` float32 (m, r),
    ``out`` float32 (1, L, r).  Gaussian: ``k = exp(-scale * ||x - l||^2)``;
    Laplacian: ``k = exp(-scale * ||x - l||_1)``.
    """
    xc = centered_float32(x, center)
    dist = np.zeros((xc.shape[0], landmarks.shape[0]), dtype=np.float32)
    tmp = np.empty_like(dist)
    for k in range(xc.shape[1]):
        np.subtract(xc[:, k : k + 1], landmarks[:, k][None, :], out=tmp)
        if laplacian:
            np.abs(tmp, out=tmp)
        else:
            np.multiply(tmp, tmp, out=tmp)
        dist += tmp
    dist *= -scale
    np.exp(dist, out=dist)
    _matmul_rows(dist, projection, out[0])


def linear_tile(x: np.ndarray, center: np.ndarray, out: np.ndarray) -> None:
    """Identity features ``x - center`` (float32, (1, L, d))."""
    out[0] = centered_float32(x, center)


def quantize(z: np.ndarray, exponent: int) -> np.ndarray:
    """Round float32 features onto the grid ``2**-exponent`` (exact).

    Returns a new float32 array whose values times ``2**exponent`` are exact
    integers: the values the block-statistics kernels accumulate.
    """
    scale = np.float32(2.0**exponent)
    return np.rint(z * scale) / scale


def groups_to_rows(z: np.ndarray) -> np.ndarray:
    """A (k, L, m) tile as (L, k * m) rows of features."""
    return z.transpose(1, 0, 2).reshape(z.shape[1], z.shape[0] * z.shape[2])
