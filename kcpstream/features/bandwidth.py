"""Bandwidth heuristics."""

from __future__ import annotations

import numpy as np

from .._kernels.distances import (
    kth_distance_1d,
    kth_smallest_nonnegative,
    largest_below,
    largest_distance_below_1d,
    pairwise_distances,
)

__all__ = ["median_distance", "resolve_bandwidth"]


#: The median heuristic uses the pairs among at most this many points.
MAX_MEDIAN_POINTS = 1024


def median_distance(sample: np.ndarray, metric: str = "euclidean") -> float:
    """Median of the pairwise distances ``||x_i - x_j||`` (i < j) of a sample.

    ``metric`` is ``"euclidean"`` or ``"cityblock"`` (L1).  A sample larger
    than :data:`MAX_MEDIAN_POINTS` is thinned to an evenly strided subset
    (every part of it stays represented).  The distances are those of
    ``scipy.spatial.distance.pdist`` (channels summed in order), computed in
    one compiled loop; the median is selected exactly in linear time.  For one
    channel the distances are not formed: the median is found by bisection
    over the sorted sample (``O(m log m)``).
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
    n_pairs = m * (m - 1) // 2
    half = n_pairs // 2  # rank of the upper median among the pairs
    even = n_pairs % 2 == 0
    euclidean = metric == "euclidean"
    if x.shape[1] == 1 and np.isfinite(x).all():  # bisection over the sorted values
        xs = np.sort(x[:, 0])
        upper = kth_distance_1d(xs, half, euclidean)
        if not even:
            return float(upper)
        below, count = largest_distance_below_1d(xs, upper, euclidean)
    else:
        dist = pairwise_distances(np.ascontiguousarray(x), euclidean)
        upper = kth_smallest_nonnegative(dist, half)
        if not even:
            return float(upper)
        below, count = largest_below(dist, upper)
    # the lower median: the largest distance below the upper one, or that one again
    return float(0.5 * ((below if count >= half else upper) + upper))


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
