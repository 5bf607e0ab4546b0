"""Featurization of one tile of samples, on plain arrays.

Each function takes a tile ``x`` of shape ``(L, d)`` (any real dtype) and
writes float32 features into ``out`` of shape ``(k, L, m)``: ``k`` groups of
``m`` features (RFF: the cosines and the sines), each group a contiguous
sample-major array, so vectorised float32 arithmetic runs on contiguous
memory and the accumulation kernels read a sample's features contiguously.
Feature ``g * m + j`` is ``out[g, :, j]``.

Every output element is computed by the same sequence of elementwise float32
operations whatever the tile's length or position, so the features of a
sample do not depend on how the signal was chunked or tiled.
"""

from __future__ import annotations

import numpy as np
from numba import njit


def centered_float32(x: np.ndarray, center: np.ndarray) -> np.ndarray:
    """``(x - center)`` computed in float64, returned as an (L, d) float32 array."""
    xc = np.asarray(x, dtype=np.float64) - center
    return np.ascontiguousarray(xc, dtype=np.float32)


# Cody-Waite split of pi / 2: ``k * _PIO2_HI`` and ``k * _PIO2_MID`` are exact in
# float32 for the multiples k of pi / 2 that matter (|angle| < 2**13); beyond
# that the reduction loses accuracy gracefully and stays deterministic.
_TWO_OVER_PI = np.float32(0.636619772367581343)
_PIO2_HI = np.float32(1.5703125)
_PIO2_MID = np.float32(4.837512969970703125e-4)
_PIO2_LO = np.float32(7.54978995489188216e-8)
_QUARTER_PI = np.float32(0.78539818525314331)  # float32(pi / 4) rounded up
_HUGE_ANGLE = np.float32(2.0**100)


@njit(nogil=True, cache=True)
def rff_tile(x, center, weights, amplitudes, out):
    """Fourier features ``[a * cos(x W), a * sin(x W)]`` in one pass.

    ``weights`` is float32 (d, m), ``amplitudes`` float32 (m,); ``out`` is
    float32 (2, L, m).  The projection ``x W`` is summed in float32 over the
    input channels in order; then each angle's sine and cosine come from one
    range reduction (``angle = k pi / 2 + r``, ``|r| <= pi / 4``) and the
    minimax polynomials of Cephes' ``sinf`` / ``cosf`` (errors of about one
    float32 ulp, like numpy's vectorised ``np.sin`` / ``np.cos``).  All of it
    is branch-free elementwise float32 arithmetic (no fused multiply-add), so
    it vectorizes and every element is bit-identical wherever its sample sits
    in a tile.  ``|r|`` is clamped to ``pi / 4`` and an overflowed angle to
    ``2**100``, so every feature is finite and bounded by its amplitude
    whatever the input.
    """
    d = x.shape[1]
    m = weights.shape[1]
    proj = np.empty(m, np.float32)
    for t in range(x.shape[0]):
        v = np.float32(np.float64(x[t, 0]) - center[0])
        for j in range(m):
            proj[j] = v * weights[0, j]
        for k in range(1, d):
            v = np.float32(np.float64(x[t, k]) - center[k])
            for j in range(m):
                proj[j] += v * weights[k, j]
        cos_row = out[0, t]
        sin_row = out[1, t]
        for j in range(m):
            a = proj[j]
            # an overflowed projection (inf, or nan from inf - inf) becomes a finite angle
            a = a if abs(a) <= _HUGE_ANGLE else (_HUGE_ANGLE if a > 0 else -_HUGE_ANGLE)
            kq = np.rint(a * _TWO_OVER_PI)
            r = ((a - kq * _PIO2_HI) - kq * _PIO2_MID) - kq * _PIO2_LO
            r = min(max(r, -_QUARTER_PI), _QUARTER_PI)
            z = r * r
            sp = (
                (np.float32(-1.9515295891e-4) * z + np.float32(8.3321608736e-3)) * z
                - np.float32(1.6666654611e-1)
            ) * z * r + r
            cp = (
                (
                    (np.float32(2.443315711809948e-5) * z - np.float32(1.388731625493765e-3)) * z
                    + np.float32(4.166664568298827e-2)
                )
                * z
                * z
                - np.float32(0.5) * z
                + np.float32(1.0)
            )
            # quadrant k mod 4, exact in float32 for every k (no integer conversion)
            q = kq - np.float32(4.0) * np.floor(kq * np.float32(0.25))
            odd = (q == np.float32(1.0)) | (q == np.float32(3.0))
            s = cp if odd else sp
            c = sp if odd else cp
            s = -s if q >= np.float32(2.0) else s
            c = -c if (q == np.float32(1.0)) | (q == np.float32(2.0)) else c
            cos_row[j] = c * amplitudes[j]
            sin_row[j] = s * amplitudes[j]


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


@njit(nogil=True, cache=True)
def window_means(z, window, out):
    """Means over consecutive windows of ``window`` samples: ``z`` float32
    (k, L * window, m) into ``out`` float32 (k, L, m).

    Each mean is a float64 sum over the window's samples in order, divided by
    ``window`` and rounded to float32: the same value wherever the window sits.
    """
    k, total, m = z.shape
    n_windows = total // window
    acc = np.empty(m, np.float64)
    for g in range(k):
        for i in range(n_windows):
            acc[:] = 0.0
            base = i * window
            for t in range(window):
                for j in range(m):
                    acc[j] += np.float64(z[g, base + t, j])
            for j in range(m):
                out[g, i, j] = np.float32(acc[j] / window)


@njit(nogil=True, cache=True)
def threshold_shares(corr, thresholds, scale, out):
    """``out[l, t * b + j] = scale * #{s : corr[l, t, s] > thresholds[t, j]} / w``.

    ``corr`` float64 (L, m, w), ``thresholds`` float64 (m, b) ascending per
    template, ``out`` float32 (L, m * b).  The counts are integers: exact.
    """
    n, m, w = corr.shape
    b = thresholds.shape[1]
    hist = np.empty(b + 1, np.int64)
    for i in range(n):
        for t in range(m):
            hist[:] = 0
            for s in range(w):
                c = corr[i, t, s]
                k = 0
                for j in range(b):  # branch-free: the thresholds are ascending
                    k += c > thresholds[t, j]
                hist[k] += 1  # c is above exactly the first k thresholds
            above = 0
            for j in range(b - 1, -1, -1):
                above += hist[j + 1]
                out[i, t * b + j] = np.float32(np.float32(above) / np.float32(w)) * scale
