"""Deterministic quadrature features for the Gaussian kernel in low dimension."""

from __future__ import annotations

import functools
import itertools

import numpy as np

from kcpstream.errors import InputError
from kcpstream.features.rff import FourierFeatures, _check_even

__all__ = ["QuadratureFF"]

#: Largest input dimension: the tensor grid has (nodes per axis)^d points.
MAX_DIM = 3


class QuadratureFF(FourierFeatures):
    """Gauss-Hermite quadrature features for the Gaussian kernel (d <= 3).

    ``k(x, y) = E_w[cos(w^T (x - y))]`` with ``w ~ N(0, I / sigma^2)``; a
    Gauss-Hermite rule with nodes ``w_i`` and weights ``a_i`` replaces the
    expectation by ``sum a_i cos(w_i^T (x - y))`` -- exact for polynomials
    of high degree, so the kernel error falls far faster than RFF's
    ``O(1 / sqrt(p))``.  Antipodal nodes give the same cosine and are
    merged (weights added).  No randomness: the map depends only on the
    bandwidth (``seed`` is accepted and ignored, for a uniform interface).

    The rule has ``N`` nodes per axis, the largest with at most
    ``n_features / 2`` frequencies after merging (for d = 1: ``N = n_features``,
    all nodes positive); ``n_features_out_`` may therefore be below
    ``n_features`` when d > 1.

    Parameters
    ----------
    n_features : int
        Output dimension p at most (even).
    bandwidth : float, "auto" or "median"
        sigma; ``"auto"`` (default) is half the median pairwise distance of the
        fit sample, ``"median"`` the median distance itself.
    seed : ignored
    """

    name = "quadrature"
    _param_names = ("n_features", "bandwidth", "seed")

    def __init__(
        self, n_features: int = 64, *, bandwidth: float | str = "auto", seed: int | None = 0
    ):
        self.n_features = _check_even("QuadratureFF", n_features)
        self.bandwidth = bandwidth
        self.seed = seed

    def _draw(self, rng, d, sigma):
        if d > MAX_DIM:
            raise InputError(
                f"quadrature features are for d <= {MAX_DIM} (the grid grows like N^d); "
                f"the signal has d={d}: use RFF or ORF"
            )
        m = self.n_features // 2
        nodes_per_axis = 1
        while _merged_count(nodes_per_axis + 1, d) <= m:
            nodes_per_axis += 1
        grid, weights = _merged_rule(nodes_per_axis, d)
        ws = (np.sqrt(2.0) * grid / sigma).T
        return ws, np.sqrt(weights / weights.sum())


@functools.lru_cache(maxsize=64)
def _merged_rule(nodes_per_axis: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """The tensor Gauss-Hermite rule with antipodal nodes merged, for unit
    bandwidth: nodes (one per pair, the first non-zero coordinate positive)
    and weights, read-only.  Merging does not depend on the bandwidth: the
    rule is symmetric, so a node's opposite is a node."""
    t, a = np.polynomial.hermite.hermgauss(nodes_per_axis)
    idx = np.array(list(itertools.product(range(nodes_per_axis), repeat=d)), dtype=np.int64)
    nodes = t[idx]  # (N^d, d), in the order of itertools.product
    weight = np.prod(a[idx], axis=1) / np.pi ** (d / 2)
    first = np.argmax(nodes != 0, axis=1)
    sign = np.where(nodes[np.arange(len(nodes)), first] < 0, -1.0, 1.0)
    canonical = nodes * sign[:, None] + 0.0
    _, where, group = np.unique(canonical, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(where)  # groups in the order their first node comes
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    merged = np.bincount(rank[group.ravel()], weights=weight)
    grid = canonical[where[order]]
    grid.flags.writeable = False
    merged.flags.writeable = False
    return grid, merged


def _merged_count(n: int, d: int) -> int:
    """Frequencies of an n-node tensor grid in d dimensions after merging w and -w."""
    total = n**d
    zero = 1 if n % 2 else 0
    return (total - zero) // 2 + zero
