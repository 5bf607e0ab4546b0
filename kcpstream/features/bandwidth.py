"""Bandwidth heuristics."""

from __future__ import annotations

import numpy as np

from .._kernels.distances import pairwise_distances_1d

__all__ = ["median_distance", "resolve_bandwidth"]


#: The median heuristic uses the pairs among at most this many points.
MAX_MEDIAN_POINTS = 1024


def median_distance(sample: np.ndarray, metric: str = "euclidean", block: int = 256) -> float:
    """Median of the pairwise distances ``||x_i - x_j||`` (i < j) of a sample.

    ``metric`` is ``"euclidean"`` or ``"cityblock"`` (L1).  A sample larger
    than :data:`MAX_MEDIAN_POINTS` is thinned to an evenly strided subset
    (every part of it stays represented).  Computed in row blocks.
    """
    x = np.asarray(sample, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.shape[0] > MAX_MEDIAN_POINTS:
        x = x[np.linspace(0, x.shape[0] - 1, MAX_MEDIAN_POINTS).round().astype(np.int64)]
    m = x.shape[0]
    if m < 2:
        raise ValueError("the median heuristic needs at least 2 sample points")
    if metric not in ("euclidean", "cityblock"):
        raise ValueError(f"unknown metric {metric!r}; use 'euclidean' or 'cityblock'")
    if x.shape[1] == 1:
        dist = pairwise_distances_1d(np.ascontiguousarray(x[:, 0]), metric == "euclidean")
    else:
        parts = []
        for lo in range(0, m - 1, block):
            hi = min(m - 1, lo + block)
            diff = x[lo:hi, None, :] - x[None, :, :]
            if metric == "euclidean":
                d = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
            else:
                d = np.abs(diff).sum(axis=2)
            parts.append(d[np.arange(m)[None, :] > np.arange(lo, hi)[:, None]])
        dist = np.concatenate(parts)
    half = dist.size // 2
    dist.partition(half)  # in place: dist[half] is the order statistic half
    if dist.size % 2:
        return float(dist[half])
    return float(0.5 * (dist[:half].max() + dist[half]))


def resolve_bandwidth(bandwidth: float | str, sample: np.ndarray, metric: str) -> float:
    """A positive bandwidth from a number or ``"median"``, or a clear error."""
    if isinstance(bandwidth, str):
        if bandwidth != "median":
            raise ValueError(f"bandwidth must be a positive number or 'median', got {bandwidth!r}")
        value = median_distance(sample, metric)
        if not value > 0:
            raise ValueError(
                "the median heuristic gave bandwidth 0: more than half of the sampled pairs of "
                f"points are equal (sample of {sample.shape[0]} points). If the signal is "
                "constant there is nothing to segment; otherwise pass an explicit "
                "bandwidth=<float> (a typical distance between samples of different regimes)"
            )
        return value
    value = float(bandwidth)
    if not (np.isfinite(value) and value > 0):
        raise ValueError(
            f"bandwidth must be a positive finite number or 'median', got {bandwidth!r}"
        )
    return value
