"""kcpstream against ruptures, a real peer used as a test oracle."""

from __future__ import annotations

import numpy as np
import pytest
import ruptures as rpt
from ruptures.costs import CostRbf
from scipy.spatial.distance import pdist, squareform

import kcpstream
from kcpstream import Linear, Nystrom


def _piecewise(seed: int, n: int, d: int, n_cps: int, jump: float = 2.0):
    rng = np.random.default_rng(seed)
    cps = np.sort(rng.choice(np.arange(5, n - 5), size=n_cps, replace=False))
    levels = rng.normal(scale=jump, size=(n_cps + 1, d))
    x = rng.normal(size=(n, d)) + np.repeat(levels, np.diff(np.r_[0, cps, n]), axis=0)
    return x


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("min_size", [1, 2, 7])
def test_linear_equals_ruptures_l2_binseg(seed, min_size):
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(60, 400))
    d = int(rng.integers(1, 4))
    x = _piecewise(seed, n, d, n_cps=int(rng.integers(1, 6)))
    n_bkps = int(rng.integers(1, 8))
    expected = rpt.Binseg(model="l2", jump=1, min_size=min_size).fit(x).predict(n_bkps=n_bkps)
    greedy = {"d_max": n_bkps + 1}  # a path of n_bkps splits: binary segmentation's own
    res = kcpstream.segment(
        x, features=Linear(), n_bkps=n_bkps, min_size=min_size, block_size=7, **greedy
    )
    assert res.breakpoints == expected
    best = kcpstream.segment(x, features=Linear(), n_bkps=n_bkps, min_size=min_size, block_size=7)
    assert best.cost <= res.cost * (1 + 1e-12)  # the best n_bkps of twice as many splits


@pytest.mark.parametrize("seed", range(8))
def test_linear_equals_ruptures_l2_binseg_with_penalty(seed):
    x = _piecewise(seed, 300, 2, n_cps=4)
    algo = rpt.Binseg(model="l2", jump=1, min_size=2).fit(x)
    for pen in (5.0, 20.0, 80.0):
        res = kcpstream.segment(x, features=Linear(), pen=pen, block_size=11, min_size=2)
        assert res.breakpoints == algo.predict(pen=pen)


class ExactRbf(CostRbf):
    """ruptures' rbf cost with the exact Gaussian Gram matrix (no clipping of gamma*d^2)."""

    @property
    def gram(self):
        if self._gram is None:
            sq = squareform(pdist(self.signal, metric="sqeuclidean"))
            self._gram = np.exp(-self.gamma * sq)
        return self._gram


def _distribution_changes(seed: int, n: int):
    """Segments that differ in scale or shape more than in mean."""
    rng = np.random.default_rng(seed)
    cps = np.sort(rng.choice(np.arange(8, n - 8), size=2, replace=False))
    parts = [
        rng.normal(0, 0.3, cps[0]),
        rng.normal(0, 2.0, cps[1] - cps[0]),
        rng.uniform(-1, 3, n - cps[1]),
    ]
    return np.concatenate(parts)


@pytest.mark.parametrize("seed", range(10))
def test_full_rank_nystrom_equals_exact_kernel_binseg(seed):
    x = _distribution_changes(seed, n=int(np.random.default_rng(seed).integers(40, 90)))
    sigma = 0.8
    gamma = 1.0 / (2 * sigma**2)
    expected = (
        rpt.Binseg(custom_cost=ExactRbf(gamma=gamma), jump=1, min_size=2).fit(x).predict(n_bkps=3)
    )
    fmap = Nystrom(n_features=len(x), bandwidth=sigma, rcond=1e-9)
    res = kcpstream.segment(x, features=fmap, n_bkps=3, block_size=5, d_max=4, min_size=2)
    # every sample a landmark, no rank lost above rounding: phi reproduces the exact Gram matrix
    exact = np.exp(-gamma * squareform(pdist(x[:, None], metric="sqeuclidean")))
    assert np.abs(res.features.gram(x) - exact).max() < 1e-4
    assert res.breakpoints == expected


@pytest.mark.parametrize("seed", range(6))
def test_full_rank_nystrom_equals_ruptures_rbf(seed):
    """Unmodified ruptures rbf, on data where its clip of gamma*d^2 into [0.01, 100] is inert."""
    rng = np.random.default_rng(seed)
    sigma = 1.0
    grid = np.arange(40) * 0.15 * sigma  # distinct values, gamma*d^2 >= 0.01125 for every pair
    low, high = rng.permutation(grid[:20]), rng.permutation(grid[20:])
    mixed = rng.permutation(np.r_[low[10:], high[10:]])
    x = np.r_[low[:10], high[:10], mixed]
    gamma = 1.0 / (2 * sigma**2)
    sq = pdist(x[:, None], metric="sqeuclidean") * gamma
    assert sq.min() > 0.01 and sq.max() < 100  # the clip does not bite
    algo = rpt.Binseg(model="rbf", jump=1, min_size=2, params={"gamma": gamma})
    expected = algo.fit(x).predict(n_bkps=2)
    fmap = Nystrom(len(x), bandwidth=sigma, rcond=1e-9)
    res = kcpstream.segment(x, features=fmap, n_bkps=2, block_size=3)
    assert res.breakpoints == expected
