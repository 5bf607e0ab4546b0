"""A step or a trend: the line fit behind it equals the obvious one, and a
trend gets no change-point while steps keep theirs."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import kcpstream
from kcpstream.search.stats import BlockStats, PieceStats
from kcpstream.selection.trend import GridMoments, line_gain

from .reference import line_gain_reference


def _stats(q: np.ndarray, B: int, splits=()) -> BlockStats:
    """Block statistics of the integer features ``q`` with exact splits inside blocks."""
    n = len(q)
    sums = np.array([q[i : i + B].sum(axis=0) for i in range(0, n, B)], dtype=np.int64)
    nb = len(sums)
    stats = BlockStats(n, B, 0, sums, np.ones(nb), np.ones(nb), np.zeros(nb))
    for pos in splits:
        if pos % B:
            a, e = pos - pos % B, min(pos - pos % B + B, n)
            parts = ((a, pos), (pos, e))
            left, right = (PieceStats(b - s, q[s:b].sum(axis=0), 1.0, 1.0, 0.0) for s, b in parts)
            stats.add_split(pos, a, e, left, right)
    return stats


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 120),
    B=st.integers(1, 9),
    ends=st.tuples(st.integers(0, 120), st.integers(0, 120)),
    seed=st.integers(0, 2**16),
)
def test_the_line_gain_is_the_least_squares_line_through_the_pieces(n, B, ends, seed):
    q = np.random.default_rng(seed).integers(-1000, 1000, size=(n, 3))
    start, end = sorted(min(e, n) for e in ends)
    if start == end:
        end = min(n, start + 1) if start < n else n
        start = end - 1
    stats = _stats(q, B, splits=(start, end))
    got = line_gain(stats, GridMoments.of(stats), start, end)
    want = line_gain_reference(q, B, start, end)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-6)


def test_one_block_per_sample_is_the_samples_own_regression():
    rng = np.random.default_rng(3)
    q = rng.integers(-50, 50, size=(400, 4)) + np.arange(400)[:, None] // 7
    stats = _stats(q, 1)
    t = np.arange(100, 350, dtype=np.float64)
    slope = ((t - t.mean())[:, None] * q[100:350]).sum(axis=0)
    want = float(slope @ slope) / float(((t - t.mean()) ** 2).sum())
    assert line_gain(stats, GridMoments.of(stats), 100, 350) == pytest.approx(want, rel=1e-12)


def test_the_line_gain_keeps_its_precision_far_from_the_origin():
    # the same 2000 samples at the start of a series and near 10^10: the sums
    # are taken about the range's own mean time, not the series' origin
    rng = np.random.default_rng(0)
    B, k = 2**20, 9537
    block = rng.integers(-(2**30), 2**30, size=(k, 2))
    near = BlockStats(k * B, B, 0, block, np.ones(k), np.ones(k), np.zeros(k))
    far = BlockStats(k * B, B, 0, block[::-1].copy(), np.ones(k), np.ones(k), np.zeros(k))
    g_near = line_gain(near, GridMoments.of(near), 0, 40 * B)
    mirrored = line_gain(far, GridMoments.of(far), (k - 40) * B, k * B)
    assert mirrored == pytest.approx(g_near, rel=1e-9)  # a reversed line has the same fit


def test_a_range_inside_one_piece_has_no_line():
    q = np.arange(40).reshape(20, 2)
    stats = _stats(q, 8, splits=(9, 14))
    assert line_gain(stats, GridMoments.of(stats), 9, 14) == 0.0


def test_a_linear_trend_gets_no_change_point():
    n = 100_000
    x = np.arange(n) / n * 3 + np.random.default_rng(n).standard_normal(n)
    assert kcpstream.segment(x).n_changepoints == 0
    assert kcpstream.segment(x, n_bkps=2).n_changepoints == 2  # steps when asked for


def test_short_trends_mostly_get_no_change_point():
    # on 10^4 samples the line wins in every neighbourhood but now and then
    # (1 series in 20 in benchmarks/results/real.md); without the rule, all 20
    found = [
        kcpstream.segment(
            np.arange(10_000) / 10_000 * 3 + np.random.default_rng(s).standard_normal(10_000)
        ).n_changepoints
        for s in range(20)
    ]
    assert sum(k > 0 for k in found) <= 2


def test_steps_keep_their_change_points():
    n = 3000
    x = np.repeat([0.0, 1.0, 2.0, 3.0], [800, 700, 700, 800])
    noisy = x + 0.4 * np.random.default_rng(1).standard_normal(n)
    assert kcpstream.segment(x).changepoints.tolist() == [800, 1500, 2200]
    found = kcpstream.segment(noisy).changepoints
    assert len(found) == 3 and np.all(np.abs(found - [800, 1500, 2200]) <= 5)


def test_a_step_on_a_trend_is_found():
    n = 2000
    t = np.arange(n)
    x = t / n * 3 + 3.0 * (t >= 1200) + np.random.default_rng(2).standard_normal(n)
    found = kcpstream.segment(x).changepoints
    assert np.any(np.abs(found - 1200) <= 10)


@settings(max_examples=5, deadline=None)
@given(chunk=st.integers(min_value=900, max_value=40_000))
def test_the_trend_rule_does_not_depend_on_the_chunking(chunk):
    n = 60_000
    t = np.arange(n)
    x = t / n * 4 + 2.0 * (t >= 41_000) + np.random.default_rng(7).standard_normal(n)
    ref = kcpstream.segment(x, block_size=64)
    res = kcpstream.segment(da.from_array(x, chunks=chunk), block_size=64)
    assert res.changepoints.tolist() == ref.changepoints.tolist()
    np.testing.assert_array_equal(res.pvalues, ref.pvalues)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    p=st.integers(1, 5),
    cols=st.integers(1, 9000),
    big=st.booleans(),
)
@example(seed=1, p=2, cols=256, big=True)  # one anchor's worth, and a part's edges
@example(seed=2, p=2, cols=4096, big=True)
@example(seed=3, p=2, cols=4097, big=True)
def test_moments_are_the_cumulative_sums_to_the_bit(seed, p, cols, big):
    # kept every ANCHOR_EVERY grid points and continued from there in the same
    # order: each column is numpy's float64 cumulative sum's, at every column
    rng = np.random.default_rng(seed)
    hi = 2**62 // max(cols, 1) if big else 2**20  # beyond 2^53: the casts round
    prefix = np.cumsum(rng.integers(-hi, hi, size=(p, cols)), axis=1)
    stats = type("Grid", (), {"prefix": prefix})()
    moments = GridMoments.of(stats)
    want = np.cumsum(prefix, axis=1, dtype=np.float64)
    for j in sorted({0, cols - 1, *rng.integers(0, cols, size=40).tolist()}):
        assert np.array_equal(moments.at(j), want[:, j]), j
    with pytest.raises(IndexError):
        moments.at(cols)
