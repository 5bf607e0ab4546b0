"""A split with a short side is tested by the samples' own law: the Chernoff
bound of a short piece's sum, and what it does to series of discrete samples
(:mod:`kcpstream.selection.edges`)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import kcpstream
from kcpstream._kernels.edges import log_moments
from kcpstream.selection.edges import EDGE_SAMPLES, RATES, edge_length, piece_tail, short_tail
from tests.reference import log_moments_reference


def _prefix(q: np.ndarray) -> np.ndarray:
    q = np.atleast_2d(np.asarray(q, np.int64))
    return np.concatenate([np.zeros((q.shape[0], 1), np.int64), np.cumsum(q, axis=1)], axis=1)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    length=st.integers(8, 300),
    offset=st.integers(0, 20),
    values=st.sampled_from([1, 1000, 2**20]),
)
def test_log_moments_are_those_of_the_samples(seed, length, offset, values):
    rng = np.random.default_rng(seed)
    prefix = _prefix(rng.integers(-values, values + 1, size=(3, offset + length + 4)))
    start, end = offset, offset + length
    direction = rng.standard_normal(3)
    direction /= np.linalg.norm(direction)
    rates = np.geomspace(1e-3, 30, 17)
    got_scale, got = log_moments(prefix, start, end, direction, rates)
    scale, expected = log_moments_reference(prefix, start, end, direction, rates)
    assert math.isclose(got_scale, scale, rel_tol=1e-9)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)


def _kl(a: float, p: float) -> float:
    """Kullback-Leibler divergence of Bernoulli(a) from Bernoulli(p)."""
    out = a * math.log(a / p) if a > 0 else 0.0
    return out + ((1 - a) * math.log((1 - a) / (1 - p)) if a < 1 else 0.0)


def test_a_flag_gets_the_binomial_chernoff_bound():
    # a 0/1 series: a piece of m samples holding k ones is bounded by
    # exp(-m KL(k / m, the series' rate)), summed over the short sides at both ends
    rng = np.random.default_rng(0)
    n = 4000
    x = (rng.random(n) < 0.05).astype(np.int64)
    x[:10] = [1, 1, 0, 1, 1, 0, 1, 0, 0, 0]
    prefix = _prefix(x)
    split, trim = 10, 5
    gain = n / (split * (n - split)) * (x[:split].sum() - split * x.mean()) ** 2
    expected = 0.0
    for m in range(trim, edge_length(n, trim)):
        ones = math.sqrt(gain * m * (n - m) / n) + m * x.mean()  # k, from t_m
        a = ones / m
        expected += 2 * math.exp(-m * _kl(a, x.mean())) if a < 1 else 0.0
    got = short_tail(prefix, 0, n, split, gain, trim)
    # the rates are a grid: the bound is at least the exact one, and close to it
    assert expected <= got <= 1.05 * expected
    # the Gaussian law of the 10 samples' mean puts their gain far out
    sigma2 = x.var()
    assert got > 1e-3 > 1e3 * math.erfc(math.sqrt(gain * (n - split) / n / sigma2 / 2))


def test_every_split_of_a_flag_gets_the_binomial_bound_by_its_shorter_side():
    # the bound of a series without noise: pieces up to half the segment
    rng = np.random.default_rng(1)
    n, split, trim = 600, 200, 5
    x = (rng.random(n) < 0.2).astype(np.int64)
    x[:split] = rng.random(split) < 0.35
    prefix = _prefix(x)
    gain = n / (split * (n - split)) * (x[:split].sum() - split * x.mean()) ** 2
    expected = 0.0
    for m in range(trim, n // 2 + 1):
        a = (math.sqrt(gain * m * (n - m) / n) + m * x.mean()) / m
        expected += 2 * math.exp(-m * _kl(a, x.mean())) if a < 1 else 0.0
    got = piece_tail(prefix, 0, n, split, gain, trim, n // 2 + 1)
    assert expected <= got <= 1.05 * expected
    assert piece_tail(prefix, 0, n, split, gain, trim, trim) == 1.0  # no pieces


def test_the_short_tail_falls_with_the_gain_and_covers_only_short_pieces():
    rng = np.random.default_rng(1)
    prefix = _prefix(rng.integers(0, 3, size=(2, 2000)))
    tails = [short_tail(prefix, 0, 2000, 20, g, 10) for g in np.geomspace(1, 1e4, 30)]
    assert all(b <= a for a, b in zip(tails, tails[1:], strict=False))
    assert edge_length(100_000, 10) == EDGE_SAMPLES
    assert edge_length(800, 10) == 50  # a sixteenth of the segment
    assert edge_length(160, 10) == 0  # no short side above min_size
    assert short_tail(prefix[:, :161], 0, 160, 12, 10.0, 10) == 1.0
    assert RATES[0] < 1 < RATES[-1]


def _flag(seed: int, n: int) -> np.ndarray:
    return (np.random.default_rng([51, seed]).random(n) < 0.05).astype(np.float32)


def test_a_run_of_ones_in_a_stationary_flag_is_no_change():
    # 5 ones in 10 samples: the large-sample law put p at 0 for both ends of the
    # run; the flag holds such runs about once in 16 000 places
    x = _flag(13, 10_000)
    assert x[339:349].sum() == 5
    assert kcpstream.segment(x).n_changepoints == 0
    res = kcpstream.segment(x, n_bkps=2)
    assert (res.pvalues > 0.01).all()


def test_stationary_flags_get_change_points_at_about_alpha():
    # 14 of these 100 series got change-points (mostly 10 to 35-sample runs of ones)
    # when short sides were tested by the large-sample law
    hits = sum(kcpstream.segment(_flag(seed, 10_000)).n_changepoints > 0 for seed in range(100))
    assert hits <= 4


def test_a_short_segment_that_stands_out_is_found():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(10_000)
    x[6000:6030] += 4.0
    assert kcpstream.segment(x).changepoints.tolist() == [6000, 6030]


def test_a_flags_change_of_rate_is_still_found():
    rng = np.random.default_rng(4)
    x = (rng.random(10_000) < np.where(np.arange(10_000) < 4000, 0.05, 0.25)).astype(float)
    (c,) = kcpstream.segment(x).changepoints
    assert abs(c - 4000) < 100


def test_series_on_the_block_grid_keep_the_large_sample_law(monkeypatch):
    # the bound needs every sample's sums: a series held in blocks is tested as before
    from kcpstream.selection import choose

    asked = []
    real = choose.short_tail
    monkeypatch.setattr(choose, "short_tail", lambda *a: asked.append(a) or real(*a))
    x = _flag(13, 10_000)
    assert kcpstream.segment(x, n_bkps=2, block_size=64).params["block_size"] == 64
    assert not asked
    assert kcpstream.segment(x, n_bkps=2).params["block_size"] == 1
    assert asked
