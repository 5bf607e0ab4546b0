"""A split with a short side is tested by the samples' own law: the Chernoff
bound of a short piece's sum, and what it does to series of discrete samples
(:mod:`kcpstream.selection.edges`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kcpstream
from kcpstream._kernels.edges import log_moments
from kcpstream.search.stats import BlockStats
from kcpstream.selection.edges import (
    EDGE_SAMPLES,
    RATES,
    bounded_edge_length,
    bounded_tail,
    edge_length,
    length_bands,
    piece_tail,
    short_tail,
)
from tests.reference import bennett_tail_reference, log_moments_reference


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


def test_series_on_the_block_grid_get_the_blocks_bound(monkeypatch):
    # the samples' law needs every sample's sums: a series held in blocks gets
    # the bound of what its blocks keep instead
    from kcpstream.selection import choose

    asked, bounded = [], []
    real, real_bounded = choose.short_tail, choose.bounded_tail
    monkeypatch.setattr(choose, "short_tail", lambda *a: asked.append(a) or real(*a))
    monkeypatch.setattr(choose, "bounded_tail", lambda *a: bounded.append(a) or real_bounded(*a))
    x = _flag(13, 10_000)
    assert kcpstream.segment(x, n_bkps=2, block_size=64).params["block_size"] == 64
    assert not asked and bounded
    bounded.clear()
    assert kcpstream.segment(x, n_bkps=2).params["block_size"] == 1
    assert asked and not bounded


def _block_stats(q: np.ndarray, block_size: int) -> BlockStats:
    """Block statistics of integer feature rows ``q`` (n, p)."""
    n = q.shape[0]
    edges = np.arange(0, n + block_size, block_size).clip(max=n)
    blocks = [q[a:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]
    S = np.array([b.sum(axis=0) for b in blocks], np.int64)
    norms = [(b.astype(np.float64) ** 2).sum(axis=1) for b in blocks]
    Q = np.array([v.sum() for v in norms])
    M2 = np.array([v.max() for v in norms])
    return BlockStats(n, block_size, 0, S, Q, M2, np.zeros(len(blocks)))


def test_length_bands_cover_every_length_once():
    for trim, most in [(10, 11), (10, 64), (3, 5000), (200, 10**7)]:
        firsts, counts = length_bands(trim, most)
        assert firsts[0] == trim and (counts > 0).all() and firsts[-1] + counts[-1] == most
        assert (firsts[1:] == firsts[:-1] + counts[:-1]).all()
        assert (counts[firsts < trim + 1024] == 1).all()
    assert len(length_bands(200, 10**7)[0]) < 4000  # O(log N) bands


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(40, 3000),
    trim=st.integers(1, 12),
    gain=st.floats(1e-2, 1e3),
)
def test_the_blocks_bound_is_at_least_its_sum_over_every_length(seed, n, trim, gain):
    # bands bound the exact sum over lengths from above, and stay close to it
    rng = np.random.default_rng(seed)
    q = rng.integers(-30, 31, size=(n, 3))
    stats = _block_stats(q, 16)
    most = n // 2 + 1
    got = bounded_tail(stats, 0, n, gain, trim, most)
    expected = bennett_tail_reference(q, gain, trim, most)
    assert got >= expected * (1 - 1e-9)
    assert got <= expected * 1.5 + 1e-300


def test_the_blocks_bound_holds_for_draws_without_replacement():
    # the chance that m of the segment's samples (drawn without replacement:
    # any m as likely to be the piece) have a sum about the mean of norm t or
    # more is below the bound's term for m, for a rare flag's features and for
    # Gaussian ones
    rng = np.random.default_rng(8)
    n, m, draws = 4000, 20, 20_000
    flag = (rng.random(n) < 0.01)[:, None] * np.array([[700, -300]])
    gauss = np.rint(rng.standard_normal((n, 4)) * 100).astype(np.int64)
    for q in (flag.astype(np.int64), gauss):
        centred = q - q.mean(axis=0)
        sums = np.array(
            [centred[rng.choice(n, m, replace=False)].sum(axis=0) for _ in range(draws)]
        )
        norms = np.sort(np.sqrt((sums**2).sum(axis=1)))
        stats = _block_stats(q, 64)
        for level in (0.1, 0.01, 0.002):
            t = norms[int((1 - level) * draws)]
            gain = t**2 * n / (m * (n - m))
            # one length (m) at one end: a quarter of the bound's two ends and factor 2
            assert bounded_tail(stats, 0, n, gain, m, m + 1) / 2 >= level


def test_a_rare_flag_on_the_block_grid_gets_no_change_points():
    # one event in 10^4 samples: each was a 10-sample segment of its own (p = 0)
    # when the long-run law, whose noise estimate sets the events aside, tested them
    rng = np.random.default_rng(101)
    x = (rng.random(100_000) < 1e-4).astype(float)
    assert x.sum() == 10
    res = kcpstream.segment(x)
    assert res.params["block_size"] > 1
    assert res.n_changepoints == 0
    # a change of its rate is still one change
    y = x.copy()
    y[50_000:] = rng.random(50_000) < 2e-3
    (c,) = kcpstream.segment(y).changepoints
    assert 50_000 <= c < 51_000


def test_pieces_of_a_rare_flag_are_tested_as_far_as_they_are_not_gaussian():
    # a flag at 0.5 % of 10^6 samples held in blocks: 6 events in a 100-sample
    # piece (0.5 expected) are a chance event somewhere in the series (Poisson,
    # not Gaussian), and the long-run law called that piece certain (p = 6e-12)
    x = (np.random.default_rng(0).random(1_000_000) < 0.005).astype(float)
    assert x[978_369:978_469].sum() == 6
    res = kcpstream.segment(x)
    assert res.params["block_size"] > 1
    assert res.n_changepoints == 0
    # a change of its rate is still found
    y = x.copy()
    y[600_000:] = np.random.default_rng(1).random(400_000) < 0.01
    (c,) = kcpstream.segment(y).changepoints
    assert abs(c - 600_000) < 10_000


def test_the_blocks_edge_reaches_as_far_as_the_samples_are_not_gaussian():
    # b^2 / v of a continuous law through the default map is 3.5 to 4: the edge
    # stays at EDGE_SAMPLES; a flag at rate r reaches a few times 16 / r samples
    # (b bounds the distance to the mean by the norms of both)
    rng = np.random.default_rng(5)
    n = 1 << 17
    lengths = {}
    for name, x in (
        ("normal", rng.standard_normal(n)),
        ("flag 0.5 %", (rng.random(n) < 0.005).astype(float)),
    ):
        fmap = kcpstream.QuadratureFF().fit(x[:4096, None])
        q = np.round(fmap.transform(x[:, None]) * 2**20).astype(np.int64)
        lengths[name] = bounded_edge_length(_block_stats(q, 64), 0, n, 10)
    assert lengths["normal"] == EDGE_SAMPLES
    assert 16 / 0.005 < lengths["flag 0.5 %"] < 4 * 16 / 0.005


def test_a_short_segments_own_level_needs_no_refined_split():
    # the mixture checks test splits at positions no search refined: a short
    # segment's own level is then its variance about its mean, not an error
    from kcpstream.selection import choose
    from kcpstream.selection.significance import LongRunNoise

    rng = np.random.default_rng(8)
    q = rng.integers(-1000, 1000, size=(4096, 3))
    q[1024:1536] *= 4  # a noisier stretch
    stats = _block_stats(q, 64)
    memo = choose.Memo(stats, 2, False, "test")
    noise = LongRunNoise(trace=1.0, scale=0.5, dof=2.0, batch=64, n_batches=60)
    assert not stats.knows(1100)
    raised = choose._own_level(memo, noise, 1024, 1100, 1536)
    ratio = (stats.cost(1024, 1536) / 512) / (stats.cost(0, 4096) / 4096)
    assert ratio > 1 and raised.trace == pytest.approx(ratio)
    assert choose._own_level(memo, noise, 0, 1024, 4096) == noise  # no noisier than the series
