"""The dependence-aware test behind pen="auto": its p-values, its noise estimate, its defaults."""

from __future__ import annotations

import math
from dataclasses import replace

import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.signal import lfilter

import kcpstream
from kcpstream import datasets
from kcpstream.selection.permutation import best_gains
from kcpstream.selection.significance import (
    SPAN_NODES,
    LongRunNoise,
    RangeGrams,
    cycle_noise,
    discrete_span,
    local_noise,
    long_run_noise,
    overshoot,
    split_pvalue,
)

from . import reference


def _ar1(n: int, phi: float, seed: int) -> np.ndarray:
    e = np.random.default_rng(seed).standard_normal(n + 500)
    return lfilter([1.0], [1.0, -phi], e)[500:]


NOISE = LongRunNoise(trace=2.0, scale=0.5, dof=4.0, batch=1, n_batches=100)


def test_pvalues_are_probabilities_that_fall_with_the_gain():
    gains = np.linspace(0.0, 40.0, 81)
    p = np.array([split_pvalue(g, 1000, 2, NOISE) for g in gains])
    assert np.all((p >= 0) & (p <= 1))
    assert p[0] == 1.0 and p[-1] < 1e-3
    assert np.all(np.diff(p) <= 0)
    # a longer segment has more places for a chance maximum: never a smaller p-value
    assert split_pvalue(10.0, 10**6, 2, NOISE) >= split_pvalue(10.0, 10**3, 2, NOISE)


def test_pvalue_is_conservative_for_the_maximum_of_independent_gaussian_cusums():
    # the exact law of the largest standardised CUSUM^2 of iid N(0, 1) in one
    # dimension, by simulation: its 95 % quantile must get a p-value >= 0.05
    rng = np.random.default_rng(0)
    n, reps = 1000, 400
    t = np.arange(1, n)
    maxima = []
    for _ in range(reps):
        s = np.cumsum(rng.standard_normal(n))
        dev = s[:-1] - t / n * s[-1]
        maxima.append(float((dev**2 * n / (t * (n - t))).max()))
    q95 = float(np.quantile(maxima, 0.95))
    unit = LongRunNoise(trace=1.0, scale=1.0, dof=1.0, batch=1, n_batches=n)
    assert split_pvalue(q95, n, 1, unit) >= 0.05


def test_the_overshoot_factor():
    x = np.array([0.0, 0.05, 0.2, 0.5, 1.0, 2.0])
    nu = overshoot(x)
    assert nu[0] == pytest.approx(1.0) and np.all(np.diff(nu) < 0) and np.all(nu > 0)
    # the small-x expansion nu(x) ~ exp(-0.583 x)
    np.testing.assert_allclose(nu[1:3], np.exp(-0.583 * x[1:3]), rtol=0.01)
    # the compiled factor is the formula as written, in numpy (both sides of erf's switch)
    wide = np.concatenate([x, np.geomspace(1e-6, 50.0, 400)])
    np.testing.assert_allclose(overshoot(wide), reference.overshoot(wide), rtol=1e-13)


@given(
    b=st.floats(0.05, 20.0),
    log_t0=st.floats(-6.0, math.log10(0.49)),
    log_steps=st.floats(0.0, 14.0),
)
@settings(max_examples=300, deadline=None)
def test_the_compiled_span_is_the_overshoot_summed_at_every_node(b, log_t0, log_steps):
    # the reference: the overshoot in numpy at SPAN_NODES nodes, trapezoid in numpy
    t0, steps = 10.0**log_t0, 10.0**log_steps
    edge = math.log((1.0 - t0) / t0)
    u = np.linspace(-edge, edge, SPAN_NODES)
    t = 1.0 / (1.0 + np.exp(-u))
    nu = reference.overshoot(b / np.sqrt(steps * t * (1.0 - t)))
    expected = float(((nu[1:] + nu[:-1]) * 0.5 * np.diff(u)).sum())
    assert discrete_span(b, t0, steps) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("t0", [1e-4, 0.02, 0.3])
def test_the_discrete_span_tends_to_the_continuous_one(t0):
    continuous = 2.0 * np.log((1.0 - t0) / t0)
    spans = [discrete_span(4.0, t0, m) for m in (10, 100, 10**4, 10**8, 10**14)]
    assert np.all(np.diff(spans) > 0) and spans[-1] <= continuous
    assert spans[-1] == pytest.approx(continuous, rel=1e-3)


@pytest.mark.parametrize(("m", "dof"), [(40, 1), (40, 3), (400, 2)])
def test_the_discrete_tail_matches_the_maximum_over_a_segments_positions(m, dof):
    # the largest standardised CUSUM^2 of m iid N(0, I) vectors over the splits
    # leaving 2 on each side, simulated: at its 99 % and 95 % quantiles the tail
    # over m positions is close, and the continuous one far above for short segments
    rng = np.random.default_rng(1)
    reps, trim = 20_000, 2
    t = np.arange(1, m)[trim - 1 : m - trim]
    s = np.cumsum(rng.standard_normal((reps, m, dof)), axis=1)
    dev = s[:, t - 1, :] - (t / m)[None, :, None] * s[:, -1:, :]
    maxima = ((dev**2).sum(axis=2) * m / (t * (m - t))).max(axis=1)
    unit = LongRunNoise(trace=float(dof), scale=1.0, dof=float(dof), batch=1, n_batches=m)
    for level in (0.01, 0.05):
        q = float(np.quantile(maxima, 1.0 - level))
        discrete = split_pvalue(q, m, trim, unit, steps=m)
        assert level * 0.7 <= discrete <= level * 1.5
        assert split_pvalue(q, m, trim, unit) > discrete
        if m == 40:
            assert split_pvalue(q, m, trim, unit) > 1.5 * discrete


def _weighted_maxima(weights: np.ndarray, m: int, trim: int, reps: int, seed: int) -> np.ndarray:
    """The largest gain over the splits of ``m`` independent N(0, diag(weights))
    vectors leaving ``trim`` on each side, ``reps`` times."""
    rng = np.random.default_rng(seed)
    draws = (min(500, reps - first) for first in range(0, reps, 500))
    scale = np.sqrt(weights)
    return np.concatenate(
        [best_gains(rng.standard_normal((k, m, len(weights))) * scale, trim) for k in draws]
    )


@pytest.mark.parametrize(
    "weights",
    [
        np.r_[1.0, np.full(15, 0.05)],  # one large eigenvalue and many small ones
        0.6 ** np.arange(8),  # a decaying spectrum, as a kernel's features have
    ],
    ids=["one-large", "decaying"],
)
def test_the_three_cumulant_tail_holds_for_unequal_eigenvalues(weights):
    # the gain of features whose covariance has unequal eigenvalues is a weighted
    # sum of squares; at the simulated 99 % and 95 % quantiles of its maximum the
    # three-cumulant law is within a factor 2 (0.6-1.0 times the level here), and
    # Satterthwaite's two-moment law 5 to 9 times short at 1 %
    m, trim = 400, 2
    maxima = _weighted_maxima(weights, m, trim, reps=6000, seed=2)
    c1, c2, c3 = (float((weights**k).sum()) for k in (1, 2, 3))
    two = LongRunNoise(trace=c1, scale=c2 / c1, dof=c1 * c1 / c2, batch=1, n_batches=m)
    three = replace(two, tail_scale=c3 / c2)
    for level, short in ((0.01, 0.3), (0.05, 0.6)):
        q = float(np.quantile(maxima, 1.0 - level))
        assert level * 0.5 <= split_pvalue(q, m, trim, three, steps=m) <= level * 1.5
        assert split_pvalue(q, m, trim, two, steps=m) < level * short


def test_the_noise_estimate_carries_the_third_cumulant():
    # iid features of a known covariance: tr(S^3) / tr(S^2) is estimated, and the
    # segment's and the cycle's adjustments never set it below Satterthwaite's c
    rng = np.random.default_rng(3)
    weights = np.r_[4.0, 1.0, np.full(6, 0.25)]
    x = rng.standard_normal((20_000, len(weights))) * np.sqrt(weights)
    prefix = np.concatenate([np.zeros((len(weights), 1)), np.cumsum(x, axis=0).T], axis=1)
    noise = long_run_noise(prefix, 1, extrapolate=False)
    truth = float((weights**3).sum() / (weights**2).sum())
    assert noise.tail_scale == pytest.approx(truth, rel=0.1)
    assert noise.tail_scale > 1.3 * noise.scale  # (c = 2.67 for these weights)
    wider = local_noise((2.0 * noise.trace, 4.0 * noise.scale * noise.trace, 1.0), noise)
    assert wider.tail_scale >= max(wider.scale, noise.tail_scale)
    cyclic = replace(noise, cycle_trace=noise.trace, cycle_frob=1.0, cycle_cube=1.0)
    mixed = cycle_noise(cyclic, 1000, 2, 10)
    assert mixed.tail_scale >= mixed.scale and mixed.trace > noise.trace


def test_noise_free_signals_have_certain_changes_and_no_others():
    noise = LongRunNoise(0.0, 0.0, 0.0, 1, 10)
    assert split_pvalue(1e-3, 100, 2, noise) == 0.0
    assert split_pvalue(0.0, 100, 2, noise) == 1.0


def test_the_long_run_variance_of_an_ar1_is_found():
    # features = the values themselves: the long-run variance of an AR(1) with unit
    # innovations is 1 / (1 - phi)^2, 100 for phi = 0.9, while their variance is 5.3
    x = _ar1(200_000, 0.9, seed=1)
    prefix = np.concatenate([[0.0], np.cumsum(x)])[None, :]
    noise = long_run_noise(prefix, 1)
    assert 80 < noise.trace < 125
    assert noise.dof == pytest.approx(1.0)


def test_a_series_shorter_than_its_dependence_is_extrapolated():
    # 200 samples of an AR(1) with phi = 0.95: the batch means are still growing at
    # the longest batches (25 of 8 samples); as an AR(1) of batch sums, the
    # estimate moves towards the long-run variance, 400, which the batches miss
    est, low = [], []
    for seed in range(20):
        x = _ar1(200, 0.95, seed)
        prefix = np.concatenate([[0.0], np.cumsum(x)])[None, :]
        est.append(long_run_noise(prefix, 1).trace)
        low.append(long_run_noise(prefix, 1, extrapolate=False).trace)
    assert all(e >= lo for e, lo in zip(est, low, strict=True))
    assert np.median(low) < 100 < np.median(est)
    # iid: the estimate levels off, and the correction at the plateau by its
    # batches' lag-one correlation (about 0, 2 / sqrt(k) from the differences
    # of k = 2 10^5 batches) moves it by about that
    x = np.random.default_rng(0).normal(size=200_000)
    prefix = np.concatenate([[0.0], np.cumsum(x)])[None, :]
    kept = long_run_noise(prefix, 1, extrapolate=False).trace
    assert long_run_noise(prefix, 1).trace == pytest.approx(kept, rel=0.02)


@pytest.mark.parametrize("phi", [0.9, 0.95])
def test_short_strongly_dependent_noise_gets_few_change_points(phi):
    # n = 100: five to ten correlation lengths (38 % and 55 % of series had
    # change-points before the extrapolation, 4.5 % and 7.5 % of these 200 with
    # the extrapolation's rho itself where the estimate does not level off, 0.5 %
    # and 3 % with its upper standard error)
    found = [kcpstream.segment(_ar1(100, phi, seed)).n_changepoints for seed in range(200)]
    assert sum(k > 0 for k in found) <= 10, found


def test_short_mildly_dependent_noise_keeps_the_false_alarm_rate():
    # n = 100, phi = 0.5: the batch estimate levels off at batches of 1 or 2
    # samples for want of batches, short of the long-run variance; its lag-one
    # correlation corrects it (25 of these 400 series had a change-point
    # without, 12 with)
    found = [kcpstream.segment(_ar1(100, 0.5, 20_000 + s)).n_changepoints for s in range(400)]
    assert sum(k > 0 for k in found) <= 20  # the 5 % target


def test_anti_correlated_features_get_their_long_run_variance():
    # x_t = e_t - 0.8 e_(t-1): long-run variance (1 - 0.8)^2 = 0.04, while batches of
    # one sample see 1 + 0.8^2 + 0.8 = 2.44 (windows of half a cycle alternate
    # like this); longer batches average the alternation out and are kept
    e = np.random.default_rng(2).standard_normal(200_001)
    x = e[1:] - 0.8 * e[:-1]
    noise = long_run_noise(np.concatenate([[0.0], np.cumsum(x)])[None, :], 1)
    assert 0.03 < noise.trace < 0.06


def test_anti_correlated_batches_keep_the_spread_of_a_part_cycle():
    # the alternation of the batches above is set aside for the long-run estimate,
    # and kept as the spread of the sums over a part of a cycle: half the variance
    # of the difference of two consecutive sums of ell samples, 0.04 ell + 2.4,
    # less the long-run part, 0.04 ell
    e = np.random.default_rng(2).standard_normal(200_001)
    x = e[1:] - 0.8 * e[:-1]
    noise = long_run_noise(np.concatenate([[0.0], np.cumsum(x)])[None, :], 1)
    assert noise.cycle_trace == pytest.approx(2.4, rel=0.1)
    # positively dependent batches have no cycle
    ar = _ar1(200_000, 0.7, seed=2)
    assert long_run_noise(np.concatenate([[0.0], np.cumsum(ar)])[None, :], 1).cycle_trace == 0


def test_a_split_near_a_segments_end_is_tested_against_the_cycle():
    noise = LongRunNoise(trace=1.0, scale=0.25, dof=4.0, batch=4, n_batches=100,
                         cycle_trace=50.0, cycle_frob=50.0)  # fmt: skip
    at_trim = cycle_noise(noise, 1000, 10, 10)
    middle = cycle_noise(noise, 1000, 10, 500)
    # N R / (t (N - t)): 1000 * 50 / (10 * 990) at the trim, 1000 * 50 / 500^2 in the middle
    assert at_trim.trace == pytest.approx(1.0 + 50.0 * 1000 / (10 * 990))
    assert middle.trace == pytest.approx(1.0 + 0.2)
    # the fewest degrees of freedom over the positions: the cycle's, near the ends
    assert middle.dof == pytest.approx(at_trim.dof) and middle.dof < noise.dof
    assert middle.trace == pytest.approx(middle.scale * middle.dof)
    # no cycle, or no admissible split: the noise as it is
    assert cycle_noise(replace(noise, cycle_trace=0.0), 1000, 10, 500) == replace(
        noise, cycle_trace=0.0
    )
    assert cycle_noise(noise, 15, 10, 7) == noise


@pytest.mark.parametrize("window", [5, 10, 20, 40])
def test_a_window_shorter_than_the_cycle_gets_no_change_point(window):
    # windows on several phases of a fixed cycle differ, but no more at one time
    # than at another: splits a few windows from a segment's end once passed
    # against the long-run covariance, in which whole cycles cancel (99 of them)
    t = np.arange(20_000)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        x = np.sin(2 * np.pi * (t / 80 + rng.random())) + 0.1 * rng.standard_normal(t.size)
        assert kcpstream.segment(x, window=window).n_changepoints == 0


def test_a_cycle_in_one_part_of_the_series_is_no_change_point():
    # windows of half the first half's cycle alternate there, and only there: the
    # batch estimate leaves them out as changes, the short-range covariance of the
    # whole series keeps them (17 change-points, one every third window, before)
    rng = np.random.default_rng(1)
    t = np.arange(4000)
    x = np.where(t < 2000, np.sin(2 * np.pi * t / 80), np.sin(2 * np.pi * t / 40))
    found = kcpstream.segment(x + 0.1 * rng.standard_normal(t.size), window=40).changepoints
    assert found.tolist() == [2000]


def test_a_short_window_still_sees_a_change_of_the_cycle():
    rng = np.random.default_rng(1)
    t = np.arange(40_000)
    amplitude = np.sin(2 * np.pi * t / 80) * np.where(t < 20_000, 1.0, 1.5)
    frequency = np.where(t < 20_000, np.sin(2 * np.pi * t / 80), np.sin(2 * np.pi * t / 40))
    for x in (amplitude, frequency):
        found = kcpstream.segment(x + 0.1 * rng.standard_normal(t.size), window=10).changepoints
        assert len(found) == 1 and abs(int(found[0]) - 20_000) <= 400


def test_sparse_flags_have_noise():
    # 95 % of consecutive differences are exactly 0: the spread of the others is
    # the noise (a median of 0 once made the estimate 0, every split certain)
    f = (np.random.default_rng(3).random(200_000) < 0.05).astype(float)
    noise = long_run_noise(np.concatenate([[0.0], np.cumsum(f)])[None, :], 1)
    assert noise.trace == pytest.approx(0.05 * 0.95, rel=0.1)


def test_rare_events_are_not_certain_changes():
    # a single event: its batch differences, the only ones that vary, are set
    # aside as changes, and the series is noise-free between batches; a split
    # through the event was then certain (p = 0), and is now bounded by the
    # samples' own law over every split
    one = np.zeros(500)
    one[200] = 1.0
    assert long_run_noise(np.concatenate([[0.0], np.cumsum(one)])[None, :], 1).trace == 0
    assert kcpstream.segment(one).n_changepoints == 0
    # a stationary flag at 0.2 %: all 18 of these series with a one got
    # change-points with p = 0
    flags = [(np.random.default_rng([7, s]).random(1000) < 0.002).astype(float) for s in range(20)]
    flags = [f for f in flags if f.any()]
    assert len(flags) == 18
    assert sum(kcpstream.segment(f).n_changepoints > 0 for f in flags) <= 1
    # a step is still a change, and as sure as the bound of 500 samples drawn
    # from a 50/50 law all falling on one side
    step = kcpstream.segment(np.r_[np.zeros(500), np.ones(500)])
    assert step.changepoints.tolist() == [500] and step.pvalues[0] < 1e-100
    # a level shift with rare spikes on both levels: one change, where each
    # spike was a certain pair of change-points (12 of them on 1000 samples)
    rng = np.random.default_rng(5)
    shift = np.r_[np.zeros(500), 5 * np.ones(500)] + (rng.random(1000) < 0.003)
    assert kcpstream.segment(shift).changepoints.tolist() == [500]


def test_a_segment_is_scaled_by_the_series_long_run_to_short_range_ratio():
    # below 1 as well: anti-correlated batches make the series' long-run trace a
    # quarter of its short-range one, and a segment's own level is scaled alike
    noise = LongRunNoise(trace=1.0, scale=0.25, dof=4.0, batch=4, n_batches=100, local=4.0)
    assert local_noise((4.0, 4.0, 1.0), noise).trace == pytest.approx(1.0)
    assert local_noise((8.0, 16.0, 2.0), noise).trace == pytest.approx(2.0)
    # a long-run estimate of 0 (no spread between batches) keeps a segment's own
    zero = LongRunNoise(trace=0.0, scale=0.0, dof=0.0, batch=4, n_batches=100, local=4.0)
    assert local_noise((8.0, 16.0, 2.0), zero).trace == pytest.approx(8.0)


def test_a_burst_of_noise_is_tested_against_its_own_level():
    # a flag at 5 % for 5000 samples of one at 0.5 % (10^6 samples, in blocks):
    # pieces of the burst too short for their own spread were tested against
    # the quiet series' level and cut the burst into 16 pieces (p down to 6e-45);
    # scaled by their own variance they are one burst
    rng = np.random.default_rng([9, 5000, 2])
    x = (rng.random(1_000_000) < 0.005).astype(float)
    start = int(rng.integers(200_000, 800_000))
    x[start : start + 5000] = rng.random(5000) < 0.05
    assert start == 552_140
    res = kcpstream.segment(x)
    assert res.params["block_size"] > 1
    first, last = res.changepoints.tolist()
    assert abs(first - start) < 500 and abs(last - start - 5000) < 500


def _noisy_level(n: int, phi: float, seed: int) -> np.ndarray:
    # a level wandering as an AR(1) of unit variance, measured with white noise of
    # the same variance
    rng = np.random.default_rng([6, seed])
    level = lfilter([1.0], [1.0, -phi], rng.standard_normal(n + 3000))[3000:]
    return level * math.sqrt(1.0 - phi * phi) + rng.standard_normal(n)


def test_a_plateau_left_by_change_points_must_hold_at_longer_batches():
    # 10^4 samples, phi = 0.99 under as much white noise: from one doubling of the
    # batches to the next, up to 8 samples, the estimate grows by 0-4 %, within
    # its error, while the long-run variance is 100 times the white noise's.
    # Without change-points the plateau is taken as it is; the differences clear
    # of change-points (here every 250 samples, as an over-segmented wander would
    # leave) are looked at further, where the growth shows
    x = _noisy_level(10_000, 0.99, seed=0)
    prefix = np.concatenate([[0.0], np.cumsum(x)])[None, :]
    plain = long_run_noise(prefix, 1)
    assert plain.batch <= 8
    cut = np.arange(250, 10_000, 250)
    left = long_run_noise(prefix, 1, cut)
    assert left.batch >= 32 and left.trace > 2 * plain.trace
    # nothing grows past the plateau of white noise: the same estimate as without
    # looking further (the look's estimates come from at least LOOK_DIFFERENCES
    # differences, and fewer are not looked at)
    y = np.random.default_rng(1).standard_normal(10_000)
    prefix = np.concatenate([[0.0], np.cumsum(y)])[None, :]
    assert long_run_noise(prefix, 1, cut).batch <= 4
    # a dependence known to span 64 samples: no plateau at shorter batches, and the
    # growth up to them is found without any change-point left out
    prefix = np.concatenate([[0.0], np.cumsum(x)])[None, :]
    assert long_run_noise(prefix, 1, shortest=64).trace > 2 * plain.trace
    # no noise at all is no noise at any length: not grown from the steps' spread
    steps = np.repeat([0.0, 1.0, 2.0], [333, 333, 334])
    prefix = np.concatenate([[0.0], np.cumsum(steps)])[None, :]
    assert long_run_noise(prefix, 1, shortest=64).trace == 0.0


def test_a_wandering_level_measured_with_noise_gets_no_change_point():
    # phi = 0.95 at n = 10^4: 5 of 20 such series got change-points (10.7 each on
    # average) when the plateau of the estimate without them was taken as it was;
    # the wander, cut into change-points, shrank the noise estimate further
    found = [kcpstream.segment(_noisy_level(10_000, 0.95, s)).n_changepoints for s in range(20)]
    assert sum(k > 0 for k in found) <= 1, found


def test_a_change_in_a_wandering_level_measured_with_noise_is_not_cut_into_many():
    # a shift of one standard deviation of the level at 6000: each series gets one
    # change-point (one of these 8 got 39 when the plateau was taken as it was),
    # most of them within 1 % of the change (the level's wander moves it)
    found = []
    for seed in range(8):
        x = _noisy_level(10_000, 0.95, seed)
        x[6000:] += 1.0
        found.append(kcpstream.segment(x).changepoints.tolist())
    assert all(len(f) <= 2 for f in found), found
    assert sum(any(abs(c - 6000) <= 100 for c in f) for f in found) >= 4, found


def test_too_few_batches_give_no_estimate():
    assert long_run_noise(np.arange(10, dtype=float)[None, :], 1) is None


@pytest.mark.parametrize("phi", [0.5, 0.9, 0.95])
def test_stationary_dependent_noise_gets_no_change_point(phi):
    found = [kcpstream.segment(_ar1(5000, phi, seed)).n_changepoints for seed in range(20)]
    # alpha = 0.01 per series; the estimate of the long-run covariance adds its error
    assert sum(k > 0 for k in found) <= 2, found


def test_heavy_tails_get_no_change_point():
    rng = np.random.default_rng(3)
    found = [kcpstream.segment(rng.standard_t(3, 5000)).n_changepoints for _ in range(10)]
    assert sum(found) == 0


@pytest.mark.parametrize("n", [1_000, 10_000, 100_000])
def test_noise_free_steps_get_exactly_their_change_points(n):
    step = np.r_[np.zeros(n // 2), np.ones(n - n // 2)]
    assert kcpstream.segment(step).changepoints.tolist() == [n // 2]
    third = n // 3
    levels = np.r_[np.zeros(third), np.ones(third), 2 * np.ones(n - 2 * third)]
    assert kcpstream.segment(levels).changepoints.tolist() == [third, 2 * third]


def test_counts_and_flags_are_segmented_without_a_bandwidth():
    rng = np.random.default_rng(0)
    counts = np.r_[rng.poisson(0.2, 5000), rng.poisson(0.5, 5000)].astype(float)
    flags = np.r_[rng.random(5000) < 0.1, rng.random(5000) < 0.3].astype(float)
    for x in (counts, flags):
        res = kcpstream.segment(x)
        assert res.n_changepoints == 1 and abs(int(res.changepoints[0]) - 5000) < 100
    codes = rng.integers(0, 5, 10_000).astype(float)  # no change
    assert kcpstream.segment(codes).n_changepoints == 0


def test_a_pair_the_splits_did_not_show_is_tested_for_both_ends():
    # iid Gamma(0.5) samples: binary segmentation's first two splits pass at
    # alpha = 0.03 by chance (p = 0.023 and 0.027), and a segmentation with more
    # change-points is then another one, with a 60-sample segment [1637, 1697)
    # whose ends the DP chose together; tested at alpha like the splits it
    # passed it would count (628, 1637 and 1697), corrected for where both
    # ends could lie it does not
    laws = dict(datasets.SCENARIO1_LAWS)
    x = np.asarray(laws["Gamma(0.5, scale 5)"](np.random.default_rng(7056), 2000), float)
    res = kcpstream.segment(x, alpha=0.03)
    assert res.changepoints.tolist() == [628]  # the first split's own false alarm


def test_default_min_size_is_a_share_of_the_series():
    x = np.random.default_rng(0).standard_normal(300_000)
    assert kcpstream.segment(x, n_bkps=1).min_size == 30
    # at least 10 samples, a tenth of a series shorter than 100
    assert kcpstream.segment(x[:50_000], n_bkps=1).min_size == 10
    assert kcpstream.segment(x[:1000], n_bkps=1).min_size == 10
    assert kcpstream.segment(x[:40], n_bkps=1).min_size == 4
    assert kcpstream.segment(x[:12], n_bkps=1).min_size == 2
    assert kcpstream.segment(x, n_bkps=1, min_size=30).min_size == 30
    # windows of a cycle: at least 2 windows
    cycle = np.sin(2 * np.pi * np.arange(20_000) / 50) + 0.3 * x[:20_000]
    res = kcpstream.segment(cycle, n_bkps=1)
    assert res.params["window"] == 50 and res.min_size == 100


def test_a_window_hint_sees_a_change_of_frequency():
    rng = np.random.default_rng(0)
    t = np.arange(3000)
    x = np.r_[np.sin(t * 2 * np.pi / 20), np.sin(t * 2 * np.pi / 35)] + 0.2 * rng.standard_normal(
        6000
    )
    res = kcpstream.segment(x, window=40)
    assert res.changepoints.tolist() == [3000]
    with pytest.raises(kcpstream.InputError, match="give window or features"):
        kcpstream.segment(x, window=40, features="rff")


@settings(max_examples=6, deadline=None)
@given(chunk=st.integers(min_value=700, max_value=30_000))
def test_the_selection_does_not_depend_on_the_chunking(chunk):
    x = _ar1(40_000, 0.7, seed=5)
    x[25_000:] += 1.5
    ref = kcpstream.segment(x, block_size=64)
    res = kcpstream.segment(da.from_array(x, chunks=chunk), block_size=64)
    assert res.changepoints.tolist() == ref.changepoints.tolist()
    assert res.selection == ref.selection
    np.testing.assert_array_equal(res.pvalues, ref.pvalues)


def test_the_selection_is_deterministic():
    x = _ar1(20_000, 0.8, seed=2)
    x[7_000:] *= 2.0
    a, b = kcpstream.segment(x), kcpstream.segment(x)
    assert a.changepoints.tolist() == b.changepoints.tolist() and a.selection == b.selection
    np.testing.assert_array_equal(a.pvalues, b.pvalues)


def test_a_series_too_short_for_the_noise_estimate_is_tested_by_permutations():
    x = np.random.default_rng(0).standard_normal(12)
    res = kcpstream.segment(x)  # (tests/test_short_series.py: the permutation test)
    assert res.selection.rule == "auto" and res.selection.noise is None
    assert kcpstream.segment(x, n_bkps=1).n_changepoints == 1
    # on blocks of several samples there is neither a noise estimate nor samples to permute
    with pytest.raises(
        kcpstream.InputError, match="too short to estimate its noise.*n_bkps or pen"
    ):
        kcpstream.segment(x, block_size=2)


@settings(max_examples=40, deadline=None)
@given(
    p=st.integers(1, 40),
    m=st.integers(2, 1500),
    per_batch=st.integers(1, 8),
    seed=st.integers(0, 2**16),
)
def test_batch_sums_in_tiles_give_the_dense_products_bit_for_bit(p, m, per_batch, seed):
    from kcpstream.selection.significance import GRAM_TILE, BatchSums

    rng = np.random.default_rng(seed)
    prefix = np.cumsum(rng.normal(size=(p, m + 1)), axis=1)
    sums = BatchSums(prefix)
    k, tiles, ss = sums.level(per_batch)
    D = np.diff(prefix[:, : k * per_batch + 1 : per_batch], n=2, axis=1)
    assert all(t.flags.c_contiguous and t.shape[1] <= GRAM_TILE for t in tiles)
    assert sum(t.shape[1] for t in tiles) == D.shape[1]
    lags = sums.lag_products(per_batch)
    assert lags.tobytes() == np.einsum("ij,ij->j", D[:, 1:], D[:, :-1]).tobytes()
    keep = rng.random(D.shape[1]) < 0.9
    want = np.zeros((p, p))  # the same tiles, summed in order
    for t0 in range(0, D.shape[1], GRAM_TILE):
        part = np.ascontiguousarray(D[:, t0 : t0 + GRAM_TILE])[:, keep[t0 : t0 + GRAM_TILE]]
        want += part @ part.T
    assert sums.gram(per_batch, keep).tobytes() == want.tobytes()


@settings(max_examples=60, deadline=None)
@given(
    k=st.integers(1, 900),
    ranges=st.lists(
        st.tuples(st.floats(0, 1), st.floats(0, 1), st.integers(0, 2**32 - 1)),
        min_size=1,
        max_size=6,
    ),
)
def test_range_grams_are_the_masked_products_with_the_same_bits_in_any_order(k, ranges):
    rng = np.random.default_rng(k)
    diffs = rng.standard_normal((5, k))
    asked = []
    for u, v, seed in ranges:
        lo, hi = sorted((int(u * k), int(v * k)))
        keep = np.random.default_rng(seed).random(hi - lo) < 0.9
        asked.append((lo, hi, keep))
    first, again = RangeGrams(diffs), RangeGrams(diffs)
    got = [first.gram(lo, hi, keep) for lo, hi, keep in asked]
    for (lo, hi, keep), product in zip(asked, got, strict=True):
        part = diffs[:, lo:hi][:, keep]
        np.testing.assert_allclose(product, part @ part.T, rtol=1e-12, atol=1e-12 * k)
    # each product is its tiles' sum whatever was asked before (or not)
    for (lo, hi, keep), product in reversed(list(zip(asked, got, strict=True))):
        assert np.array_equal(again.gram(lo, hi, keep), product)
        assert np.array_equal(RangeGrams(diffs).gram(lo, hi, keep), product)
    np.testing.assert_array_equal(first.ss, (diffs**2).sum(axis=0))


@given(
    values=st.lists(
        st.one_of(st.just(0.0), st.floats(0.0, 1e12, allow_nan=False)), min_size=1, max_size=300
    )
)
@settings(max_examples=300, deadline=None)
def test_the_median_of_squared_differences_is_numpys(values):
    from kcpstream.selection.significance import _median

    a = np.asarray(values)
    assert _median(a) == float(np.median(a))
