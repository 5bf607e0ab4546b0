"""The test of a series too short for its noise to be estimated: a permutation test.

Below :data:`~kcpstream.selection.significance.MIN_BATCHES` batches there is
no long-run covariance to test a split against.  The samples' features are
then taken as exchangeable under "no change" (independent and identically
distributed samples are; dependent ones are not, which is why the
dependence-aware test is used wherever the noise can be estimated), and a
split's p-value is the share of random orders of the segment's samples whose
best split gains at least as much: a Monte Carlo permutation test, exact
for any law of the features and any number of samples.
"""

from __future__ import annotations

import numpy as np

#: Random orders drawn per test: the smallest p-value is ``1 / (PERMUTATIONS + 1)``.
PERMUTATIONS = 1999

#: Orders evaluated together (bounds the memory: ``ORDERS * L * p`` floats).
ORDERS = 200


def best_gains(x: np.ndarray, min_size: int) -> np.ndarray:
    """The largest split gain of each row of ``x`` (``(R, L, p)``: ``R`` orders of
    ``L`` samples), over the splits that leave at least ``min_size`` samples on
    each side: ``max_c (c (L - c) / L) ||mean_left - mean_right||^2``."""
    length = x.shape[1]
    sums = np.cumsum(x, axis=1)
    total = sums[:, -1:, :]
    c = np.arange(min_size, length - min_size + 1)
    left = sums[:, c - 1, :]
    nl = c[:, None].astype(np.float64)
    nr = (length - c)[:, None].astype(np.float64)
    diff = left / nl - (total - left) / nr
    gains = (nl[:, 0] * nr[:, 0] / length) * (diff * diff).sum(axis=2)
    return gains.max(axis=1)


def permutation_pvalue(x: np.ndarray, gain: float, min_size: int, seed: tuple[int, ...]) -> float:
    """p-value of a split of the samples ``x`` (``(L, p)``, one row per sample's
    features) whose gain is ``gain`` (the same units): ``(1 + k) / (1 + R)`` for
    ``k`` of ``R`` random orders (drawn from ``seed``: the same answer every
    time) whose best split gains at least ``gain`` less its float rounding."""
    x = np.asarray(x, dtype=np.float64)
    length = x.shape[0]
    if length < 2 * min_size:
        return 1.0
    rng = np.random.default_rng(seed)
    # the gain of the samples in their own order, as this arithmetic gives it,
    # differs from the exact integer one by rounding only
    tolerance = 1e-9 * max(abs(gain), float(best_gains(x[None], min_size)[0]))
    at_least = 0
    for first in range(0, PERMUTATIONS, ORDERS):
        count = min(ORDERS, PERMUTATIONS - first)
        orders = rng.permuted(np.broadcast_to(np.arange(length), (count, length)), axis=1)
        at_least += int(np.count_nonzero(best_gains(x[orders], min_size) >= gain - tolerance))
    return (1 + at_least) / (1 + PERMUTATIONS)
