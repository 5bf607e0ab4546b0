"""A series too short for its noise to be estimated is tested by permutations of
its samples: it gets an answer with p-values, at the level asked for."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import kcpstream
from kcpstream._kernels.blockstats import split_gain
from kcpstream.selection.permutation import PERMUTATIONS, best_gains, permutation_pvalue


def _best_gain_reference(x: np.ndarray, min_size: int) -> float:
    """The largest gain of a split of ``x`` (integers) by the engine's own kernel."""
    total = x.sum(axis=0)
    return max(
        split_gain(c, len(x) - c, x[:c].sum(axis=0), total)
        for c in range(min_size, len(x) - min_size + 1)
    )


@pytest.mark.parametrize("length, min_size", [(4, 2), (7, 1), (11, 2), (15, 3)])
def test_best_gains_are_those_of_every_split(length, min_size):
    rng = np.random.default_rng(length)
    x = rng.integers(-(2**20), 2**20, size=(5, length, 6))
    got = best_gains(x.astype(np.float64), min_size)
    expected = [_best_gain_reference(row, min_size) for row in x]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_the_pvalue_is_the_share_of_orders_of_the_samples_gaining_as_much():
    # six samples: every order enumerated gives the exact p-value, which the
    # random orders estimate within their sampling error
    rng = np.random.default_rng(0)
    x = rng.integers(-1000, 1000, size=(6, 3)).astype(np.float64)
    x[3:] += 900
    gain = float(best_gains(x[None], 2)[0])
    orders = np.array(list(itertools.permutations(range(6))))
    exact = float(np.mean(best_gains(x[orders], 2) >= gain * (1 - 1e-9)))
    p = permutation_pvalue(x, gain, 2, (0, 6))
    assert abs(p - exact) < 4 * np.sqrt(exact * (1 - exact) / PERMUTATIONS) + 1 / PERMUTATIONS
    assert permutation_pvalue(x, gain, 2, (0, 6)) == p  # the same orders every time
    assert permutation_pvalue(x, 0.0, 2, (0, 6)) == 1.0


@pytest.mark.parametrize("n", [10, 11, 13, 15])
def test_any_series_of_ten_samples_or_more_gets_an_answer(n):
    rng = np.random.default_rng(n)
    for x in (
        rng.normal(size=n),
        rng.integers(0, 3, size=n).astype(float),
        rng.standard_t(2, size=(n, 2)),
    ):
        res = kcpstream.segment(x)
        assert res.selection.rule == "auto"
        assert len(res.pvalues) == len(res.changepoints)


def test_a_strong_change_in_a_short_series_is_found_with_its_pvalue():
    rng = np.random.default_rng(3)
    x = rng.normal(size=12)
    x[6:] += 6
    res = kcpstream.segment(x)
    assert res.changepoints.tolist() == [6]
    assert 0 < res.pvalues[0] <= 0.01
    # with n_bkps the p-value is given too
    assert kcpstream.segment(x, n_bkps=1).pvalues[0] == res.pvalues[0]


def test_short_series_without_change_get_one_at_about_alpha():
    # exchangeable samples: the permutation test holds its level exactly (up to
    # the random orders); 300 series at alpha = 0.01 give 3 on average
    found = 0
    for seed in range(300):
        x = np.random.default_rng(seed).normal(size=12)
        found += len(kcpstream.segment(x).changepoints) > 0
    assert found <= 10  # P(Binomial(300, 0.01) > 10) < 1e-3
