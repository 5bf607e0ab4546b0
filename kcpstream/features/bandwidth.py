"""Bandwidth heuristics."""

from __future__ import annotations

import numpy as np

from kcpstream._kernels.distances import (
    kth_distance_1d,
    largest_distance_below_1d,
    order_statistic_pair,
    pairwise_sums,
)
from kcpstream.errors import InputError

__all__ = ["AUTO_FRACTION", "median_distance", "resolve_bandwidth"]


#: The median heuristic uses the pairs among at most this many points.
MAX_MEDIAN_POINTS = 1024


def _rows(sample: np.ndarray) -> np.ndarray:
    """The sample as float64 rows (m, d)."""
    x = np.asarray(sample, dtype=np.float64)
    return x[:, None] if x.ndim == 1 else x


def _thinned_rows(sample: np.ndarray) -> np.ndarray:
    """The sample as float64 rows (m, d), thinned to an evenly strided subset of
    at most :data:`MAX_MEDIAN_POINTS` (every part of it stays represented)."""
    x = _rows(sample)
    if x.shape[0] > MAX_MEDIAN_POINTS:
        x = x[np.linspace(0, x.shape[0] - 1, MAX_MEDIAN_POINTS).round().astype(np.int64)]
    return x


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
    x = _thinned_rows(sample)
    m = x.shape[0]
    if m < 2:
        raise InputError("the median heuristic needs at least 2 sample points")
    if metric not in ("euclidean", "cityblock"):
        raise InputError(f"unknown metric {metric!r}; use 'euclidean' or 'cityblock'")
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
    else:  # a distance is the root of its sum, and the root keeps the order
        sums = pairwise_sums(np.ascontiguousarray(x), euclidean)
        if np.isnan(sums).any():  # an infinite coordinate minus itself
            raise InputError(
                "the median heuristic's sample has infinite values, so some distances are "
                "undefined; remove them or give a numeric bandwidth"
            )
        first, second = order_statistic_pair(sums, half - 1 if even else half)
        if euclidean:
            first, second = np.sqrt(first), np.sqrt(second)
        return float(0.5 * (first + second)) if even else float(first)
    # the lower median: the largest distance below the upper one, or that one again
    return float(0.5 * ((below if count >= half else upper) + upper))


def _median_nonzero_distance(sample: np.ndarray, metric: str) -> float:
    """Median of the non-zero pairwise distances of (a thinned) sample, 0 if none."""
    x = _thinned_rows(sample)
    i, j = np.triu_indices(x.shape[0], 1)
    diff = x[i] - x[j]
    dist = np.sqrt((diff**2).sum(axis=1)) if metric == "euclidean" else np.abs(diff).sum(axis=1)
    dist = dist[dist > 0]
    return float(np.median(dist)) if dist.size else 0.0


#: ``bandwidth="auto"`` is this fraction of the median heuristic's distance:
#: a narrower kernel than the median's sees changes of shape and of correlation
#: that the median's smooths over, at a small cost for pure mean shifts (for
#: which a larger bandwidth or the linear map is the better choice).  Chosen by
#: measurement over seven signal families, not assumed:
#: ``benchmarks/results/bandwidth_results.md``.
AUTO_FRACTION = 0.5

#: The rules a string bandwidth may name, as fractions of the median distance.
BANDWIDTH_RULES = {"auto": AUTO_FRACTION, "median": 1.0}


def resolve_bandwidth(bandwidth: float | str, sample: np.ndarray, metric: str) -> float:
    """A positive bandwidth from a number, ``"auto"`` or ``"median"``, or a clear error.

    ``"median"`` is the median pairwise distance of ``sample`` (the median
    heuristic); ``"auto"`` is :data:`AUTO_FRACTION` of it.  When more than
    half of the pairs are equal (discrete values: counts, flags, codes) the
    median of the distances between *different* values stands in for it.
    """
    if isinstance(bandwidth, str):
        if bandwidth not in BANDWIDTH_RULES:
            raise InputError(
                "bandwidth must be a positive number, 'auto' (half the median distance "
                f"between samples) or 'median' (the median distance), got {bandwidth!r}"
            )
        value = median_distance(sample, metric)
        if not value > 0:
            # discrete values (counts, flags, codes): most pairs are equal, and the
            # typical distance between *different* values is the scale that matters
            value = _median_nonzero_distance(sample, metric)
        if not value > 0:
            # the thinned sample holds one value: rare others (an event flag's
            # ones) are the only scale the sample has
            value = _median_nonzero_distance(np.unique(_rows(sample), axis=0), metric)
        if not value > 0:
            raise InputError(
                f"all {sample.shape[0]} samples of the fit sample are equal, so the kernel has "
                "no scale: a constant signal has nothing to segment. If it varies elsewhere, "
                "give the scale, a typical distance between samples of different regimes: "
                "features=QuadratureFF(bandwidth=<float>), or the spec "
                "'quadrature:bandwidth=<float>' ('rff:bandwidth=<float>' for several "
                "channels; --features on the command line)"
            )
        return BANDWIDTH_RULES[bandwidth] * value
    value = float(bandwidth)
    if not (np.isfinite(value) and value > 0):
        raise InputError(
            f"bandwidth must be a positive finite number, 'auto' or 'median', got {bandwidth!r}"
        )
    return value
