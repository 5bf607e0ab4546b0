"""Choosing the number of segments: penalties, the slope heuristic, the API's default."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kcpstream
from kcpstream import datasets
from kcpstream.selection.rules import (
    Selection,
    log_binomial_shape,
    select_by_penalty,
    significant_splits,
    slope_heuristic,
)
from kcpstream.selection.significance import DEFAULT_ALPHA


def _path(n: int, d_star: int, d_max: int, s1: float, s2: float, drop: float) -> np.ndarray:
    """Costs that fall steeply up to d_star, then exactly like s1*logbinom + s2*D."""
    d = np.arange(1, d_max + 1, dtype=float)
    tail = -(s1 * log_binomial_shape(n, d) + s2 * d)
    return tail + drop * np.maximum(d_star - d, 0)


@pytest.mark.parametrize("s1, s2", [(0.3, 0.0), (0.0, 2.0), (0.2, 1.0)])
def test_slope_heuristic_recovers_the_minimal_penalty_and_d_star(s1, s2):
    costs = _path(1000, 11, 100, s1, s2, drop=500.0)
    sel = slope_heuristic(costs, 1000)
    assert sel.rule == "slope" and sel.n_segments == 11 and sel.d_max == 100
    assert sel.c1 == pytest.approx(2 * s1, abs=1e-6)
    assert sel.c2 == pytest.approx(2 * s2, abs=1e-6)
    assert sel.fit_range == (60, 100)


def test_fit_fraction_sets_the_range_the_slopes_are_fitted_on():
    costs = _path(1000, 11, 100, 0.2, 1.0, drop=500.0)
    upper = slope_heuristic(costs, 1000, fit_fraction=0.2)
    assert upper.fit_range == (80, 100)
    assert (upper.c1, upper.c2) == (pytest.approx(0.4, abs=1e-6), pytest.approx(2.0, abs=1e-6))
    # reaching below D* = 11 the fit sees the drop and no longer finds the minimal penalty
    whole = slope_heuristic(costs, 1000, fit_fraction=0.95)
    assert whole.fit_range[0] < 11 and whole.fit_range[1] == 100
    assert abs(whole.c1 - 0.4) + abs(whole.c2 - 2.0) > 0.1
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="fit_fraction must be in"):
            slope_heuristic(costs, 1000, fit_fraction=bad)


def test_a_wrong_sign_slope_is_dropped():
    d = np.arange(1, 51, dtype=float)
    # costs decreasing in D but increasing in the log-binomial direction once D is accounted for
    costs = 1000.0 - 3.0 * d + 0.05 * log_binomial_shape(500, d)
    sel = slope_heuristic(costs, 500)
    assert sel.c1 == 0.0 and sel.c2 > 0


def test_select_by_penalty_minimises_cost_plus_pen_per_change_point():
    costs = np.array([100.0, 60.0, 45.0, 44.0, 43.5])
    crit = costs + 10.0 * np.arange(5)
    assert select_by_penalty(costs, 10.0).n_segments == int(np.argmin(crit)) + 1
    assert select_by_penalty(costs, 0.0).n_segments == 5
    assert select_by_penalty(costs, 1e6).n_segments == 1


def test_selection_penalty_and_json():
    sel = slope_heuristic(_path(800, 5, 40, 0.1, 0.5, 300.0), 800)
    back = Selection.from_dict(sel.to_dict())
    assert back == sel
    d = np.arange(1, 41)
    np.testing.assert_allclose(
        sel.penalty(800, d), sel.c1 * log_binomial_shape(800, d) + sel.c2 * d
    )


@pytest.mark.parametrize("method", ["binseg", "dynp"])
def test_default_is_auto_and_shows_its_work(method):
    # (the draw of seed 0 has a split of the segment [757, 1450) at p = 0.0099, one
    # of the alpha-level false alarms the next test allows for)
    sig = datasets.piecewise_constant(3_000, 4, jump=3.0, seed=1)
    res = kcpstream.segment(sig.x, method=method)
    assert res.selection.rule == "auto" and res.selection.alpha == DEFAULT_ALPHA
    assert res.n_changepoints == res.selection.n_segments - 1
    assert len(res.path_costs) == res.selection.d_max >= 60
    assert res.changepoints.tolist() == pytest.approx(sig.changepoints.tolist(), abs=15)
    assert np.all(res.pvalues <= DEFAULT_ALPHA)
    noise = res.selection.noise
    assert noise["trace"] > 0 and noise["dof"] >= 1 and noise["batch"] >= 1
    back = kcpstream.Segmentation.from_json(res.to_json())
    assert back.selection == res.selection and back.method == method
    np.testing.assert_array_equal(back.pvalues, res.pvalues)


def test_the_test_finds_the_true_count_of_mean_shifts_most_of_the_time():
    # 4 changes of 3 noise standard deviations: the root and the 4 segments
    # after the last true split are each tested at alpha, so a few draws get
    # an extra change-point; none may lose a true one
    counts = [
        kcpstream.segment(datasets.piecewise_constant(3_000, 4, jump=3.0, seed=s).x).n_changepoints
        for s in range(30)
    ]
    assert min(counts) == 4
    assert np.mean(np.array(counts) == 4) >= 0.8


def test_the_slope_heuristic_stays_available():
    sig = datasets.piecewise_constant(3_000, 4, jump=3.0, seed=0)
    res = kcpstream.segment(sig.x, pen="slope")
    assert res.selection.rule == "slope" and res.selection.c1 is not None


def test_linear_penalty_with_dynp():
    sig = datasets.piecewise_constant(2_000, 3, jump=3.0, seed=5)
    fmap = kcpstream.Linear().fit(sig.x)
    res = kcpstream.segment(sig.x, features=fmap, pen=50.0, method="dynp")
    crit = res.path_costs + 50.0 * np.arange(len(res.path_costs))
    assert res.selection.n_segments == int(np.argmin(crit)) + 1


def test_a_short_segment_inside_a_long_one_is_found():
    # a shift of one standard deviation over 200 of 4000 samples: the best single
    # split of the whole series barely sees it (1 draw in 10 before), the
    # segmentation into three segments has both its change-points significant
    found = []
    for seed in range(10):
        x = np.random.default_rng(seed).standard_normal(4000)
        x[1900:2100] += 1.0
        cps = kcpstream.segment(x).changepoints
        found.append(len(cps) == 2 and abs(cps[0] - 1900) < 50 and abs(cps[1] - 2100) < 50)
    assert sum(found) >= 8


def test_short_segments_of_noise_are_not_changes():
    # a segmentation of noise can always isolate a few extreme samples, whose
    # splits are then significant between their neighbours: they must pass a level
    # corrected for where both neighbours could lie (half the draws had a
    # change-point without it)
    rng = np.random.default_rng(5)
    found = [kcpstream.segment(rng.standard_normal(10_000)).n_changepoints for _ in range(20)]
    assert sum(k > 0 for k in found) <= 2, found


@settings(max_examples=15, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 6),
    st.floats(0.3, 3.0),
)
def test_every_change_point_chosen_is_significant_between_its_neighbours(seed, k, jump):
    sig = datasets.piecewise_constant(2_000, k, jump=jump, seed=seed)
    res = kcpstream.segment(sig.x)
    assert np.all(res.pvalues <= DEFAULT_ALPHA)


def _binseg_tree(rng: np.random.Generator, n: int, splits: int) -> list[tuple[int, int, int]]:
    """``(start, end, split)`` of a random binary segmentation of ``[0, n)``, parents first."""
    leaves, out = [(0, n)], []
    while len(out) < splits:
        wide = [seg for seg in leaves if seg[1] - seg[0] >= 2]
        if not wide:
            break
        a, e = wide[rng.integers(len(wide))]
        c = int(rng.integers(a + 1, e))
        leaves.remove((a, e))
        leaves += [(a, c), (c, e)]
        out.append((a, e, c))
    return out


def _significant_reference(splits, p_values, n: int, alpha: float) -> list[int]:
    """Every p-value known first, the tree walked from the root."""
    accepted, open_segments = [], {(0, n)}
    for (a, e, c), p in zip(splits, p_values, strict=True):
        if (a, e) in open_segments and p <= alpha:
            accepted.append(c)
            open_segments |= {(a, c), (c, e)}
    return accepted


@settings(max_examples=200, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1), splits=st.integers(0, 40), alpha=st.sampled_from([0.01, 0.3])
)
def test_significant_splits_asks_only_for_the_p_values_that_can_count(seed, splits, alpha):
    rng = np.random.default_rng(seed)
    n = 1000
    tree = _binseg_tree(rng, n, splits)
    p_values = rng.uniform(0, 1, len(tree)) ** 3  # some below alpha, some above
    asked = []

    def p_value(i: int) -> float:
        asked.append(i)
        return float(p_values[i])

    found = significant_splits(tree, n, alpha, p_value)
    assert found == _significant_reference(tree, p_values, n, alpha)
    # asked once each, and only for splits of the root or of a segment a counted split made
    assert len(asked) == len(set(asked))
    made = {(0, n)} | {seg for a, e, c in tree if c in found for seg in ((a, c), (c, e))}
    assert asked == [i for i, (a, e, _) in enumerate(tree) if (a, e) in made]
