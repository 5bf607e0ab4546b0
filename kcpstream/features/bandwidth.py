"""Bandwidth heuristics."""

from __future__ import annotations

import numpy as np

from .._kernels.distances import kth_smallest_nonnegative, pairwise_distances

__all__ = ["median_distance", "resolve_bandwidth"]


#: The median heuristic uses the pairs among at most this many points.
MAX_MEDIAN_POINTS = 1024


def median_distance(sample: np.ndarray, metric: str = "euclidean") -> float:
    """Median of the pairwise distances ``||x_i - x_j||`` (i < j) of a sample.

    ``metric`` is ``"euclidean"`` or ``"cityblock"`` (L1).  A sample larger
    than :data:`MAX_MEDIAN_POINTS` is thinned to an evenly strided subset
    (every part of it stays represented).  The distances are those of
    ``scipy.spatial.distance.pdist`` (channels summed in order), computed in
    one compiled loop; the median is selected exactly in linear time.
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
    dist = pairwise_distances(np.ascontiguousarray(x), metric == "euclidean")
    half = dist.size // 2
    upper = kth_smallest_nonnegative(dist, half)
    if dist.size % 2:
        return float(upper)
    return float(0.5 * (kth_smallest_nonnegative(dist, half - 1) + upper))


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
