"""Metrics: hand-worked cases, dense definitions on small n, and ruptures where they overlap."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from ruptures import metrics as rpt_metrics

from kcpstream import metrics


def _dense_m(cps, n):
    bounds = [0, *cps, n]
    m = np.zeros((n, n))
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        m[a:b, a:b] = 1.0 / (b - a)
    return m


@st.composite
def two_segmentations(draw):
    n = draw(st.integers(2, 60))
    pool = st.lists(st.integers(1, n - 1), unique=True, max_size=min(8, n - 1)).map(sorted)
    return n, draw(pool), draw(pool)


@given(two_segmentations())
def test_frobenius_equals_the_dense_definition(case):
    n, a, b = case
    dense = np.linalg.norm(_dense_m(a, n) - _dense_m(b, n))
    assert metrics.frobenius(a, b, n) == pytest.approx(dense, abs=1e-9)


@given(two_segmentations())
def test_rand_index_equals_the_pair_count(case):
    n, a, b = case
    la = np.repeat(np.arange(len(a) + 1), np.diff([0, *a, n]))
    lb = np.repeat(np.arange(len(b) + 1), np.diff([0, *b, n]))
    iu = np.triu_indices(n, 1)
    agree = (la[:, None] == la[None, :]) == (lb[:, None] == lb[None, :])
    expected = agree[iu].mean() if n > 1 else 1.0
    assert metrics.rand_index(a, b, n) == pytest.approx(expected)


@given(two_segmentations())
def test_rand_index_and_hausdorff_match_ruptures(case):
    n, a, b = case
    if a and b:
        assert metrics.hausdorff(a, b) == rpt_metrics.hausdorff([*a, n], [*b, n])
    assert metrics.rand_index(a, b, n) == pytest.approx(rpt_metrics.randindex([*a, n], [*b, n]))


def test_precision_recall_matches_ruptures_on_well_separated_change_points():
    rng = np.random.default_rng(0)
    margin = 5  # ruptures counts |d| < margin, kcpstream |d| <= margin: compare with margin - 1
    compared = 0
    for _ in range(300):
        true = np.sort(rng.choice(np.arange(1, 99), size=5, replace=False)) * 20
        keep = rng.random(5) < 0.7
        hits = true[keep] + rng.integers(-8, 9, size=int(keep.sum()))
        alarms = rng.integers(1, 2000, size=int(rng.integers(0, 3)))
        pred = np.unique(np.r_[hits, alarms])
        if pred.size == 0 or np.any(np.diff(pred) <= 2 * margin):
            continue  # ruptures lets one truth use up several close predictions
        theirs = rpt_metrics.precision_recall([*true, 2000], [*pred, 2000], margin=margin)
        assert metrics.precision_recall(true, pred, margin - 1) == pytest.approx(theirs)
        compared += 1
    assert compared > 100


def test_hand_worked_cases():
    n = 10
    assert metrics.hausdorff([3, 7], [4]) == 3  # 7 is 3 from 4
    assert metrics.hausdorff([], []) == 0 and metrics.hausdorff([2], []) == float("inf")
    # identical segmentations
    assert metrics.frobenius([3, 7], [3, 7], n) == 0
    assert metrics.rand_index([3, 7], [3, 7], n) == 1
    assert metrics.covering([3, 7], [3, 7], n) == 1
    # one segment vs two halves: <M, M'> = 5^2/(10*5) * 2 = 1 -> ||M - M'||^2 = 1 + 2 - 2
    assert metrics.frobenius([], [5], n) == pytest.approx(1.0)
    # rand index: 45 pairs, the two halves disagree on the 25 cross pairs
    assert metrics.rand_index([], [5], n) == pytest.approx(20 / 45)
    # covering of [0,5),[5,10) by [0,4),[4,10): (5 * 4/5 + 5 * 5/6) / 10
    assert metrics.covering([5], [4], n) == pytest.approx((5 * 4 / 5 + 5 * 5 / 6) / 10)
    # precision / recall: one hit within 2, one false alarm, one miss
    assert metrics.precision_recall([10, 50], [12, 30], margin=2) == (0.5, 0.5)
    assert metrics.f1_score([10, 50], [12, 30], margin=2) == pytest.approx(0.5)
    # maximum matching: each truth matched once, no prediction used twice
    assert metrics.precision_recall([100, 104], [101, 103], margin=5) == (1.0, 1.0)
    assert metrics.precision_recall([100], [99, 101], margin=5) == (0.5, 1.0)
    assert metrics.precision_recall([], [], margin=1) == (1.0, 1.0)


def test_breakpoints_with_n_are_refused():
    with pytest.raises(ValueError, match="not breakpoints ending with n"):
        metrics.frobenius([5, 10], [5], 10)
