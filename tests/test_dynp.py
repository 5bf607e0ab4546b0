"""Dynamic programming: exact on a grid of every sample, never worse than binary segmentation."""

from __future__ import annotations

import itertools

import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kcpstream
from kcpstream import RFF, Linear, Nystrom, datasets

from .reference import quantized


def _cost(q: np.ndarray, cps) -> float:
    bounds = [0, *cps, len(q)]
    total = 0.0
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        seg = q[a:b].astype(np.float64)
        total += float(((seg - seg.mean(axis=0)) ** 2).sum())
    return total


def _bruteforce(q: np.ndarray, k: int, min_size: int):
    """Every segmentation with k change-points: the least cost and its change-points."""
    n = len(q)
    best, best_cps = np.inf, None
    for cps in itertools.combinations(range(1, n), k):
        bounds = [0, *cps, n]
        if min(np.diff(bounds)) < min_size:
            continue
        c = _cost(q, cps)
        if best_cps is None or c < best - 1e-9 * max(1.0, abs(best)):
            best, best_cps = c, cps
    return best, best_cps


@settings(max_examples=60)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(6, 13),
    k=st.integers(1, 3),
    min_size=st.integers(1, 3),
    kind=st.sampled_from(["linear", "rff", "nystrom"]),
)
def test_dp_on_every_sample_is_the_exact_optimum(seed, n, k, min_size, kind):
    if (k + 1) * min_size > n:
        return
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n) + np.repeat(rng.normal(scale=3, size=3), -(-n // 3))[:n]
    fmap = {"linear": Linear(), "rff": RFF(8, bandwidth=1.0), "nystrom": Nystrom(6, bandwidth=1.0)}[
        kind
    ]
    fmap = fmap.fit(x)
    q = quantized(fmap.transform(x), fmap.quantum_exponent_)
    best, _ = _bruteforce(q, k, min_size)
    res = kcpstream.segment(
        x, features=fmap, n_bkps=k, method="dynp", min_size=min_size, block_size=1
    )
    unit = 2.0 ** (-2 * fmap.quantum_exponent_)
    assert _cost(q, res.changepoints) == pytest.approx(best, rel=1e-9, abs=1e-6)
    assert res.cost == pytest.approx(best * unit, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_dp_never_costs_more_than_binseg(seed):
    rng = np.random.default_rng(seed)
    sig = datasets.scenario1(int(rng.integers(400, 3000)), int(rng.integers(3, 12)), seed=seed)
    x = da.from_array(sig.x, chunks=int(rng.integers(97, 900)))
    fmap = RFF(32, seed=seed).fit(sig.x)
    block = int(rng.integers(1, 40))
    for k in (1, 3, 7, 15):
        bs = kcpstream.segment(x, features=fmap, n_bkps=k, block_size=block)
        dp = kcpstream.segment(x, features=fmap, n_bkps=k, block_size=block, method="dynp")
        assert dp.cost <= bs.cost * (1 + 1e-12) + 1e-9
        assert len(dp.changepoints) == k


def test_refinement_never_increases_the_cost_and_reaches_the_exact_optimum():
    sig = datasets.piecewise_constant(2_000, 5, jump=2.0, seed=3)
    fmap = Linear().fit(sig.x)
    exact = kcpstream.segment(sig.x, features=fmap, n_bkps=5, method="dynp", block_size=1)
    coarse = kcpstream.segment(sig.x, features=fmap, n_bkps=5, method="dynp", block_size=40)
    assert coarse.cost <= coarse.path_costs[5] * (1 + 1e-12)  # refined <= best on the grid
    assert coarse.diagnostics.samples_scanned > 0  # it read the neighbouring blocks again
    assert coarse.changepoints.tolist() == exact.changepoints.tolist()


def _sse(x: np.ndarray) -> float:
    return float(((x - x.mean()) ** 2).sum())


def test_dp_gains_are_local_merge_costs():
    sig = datasets.piecewise_constant(2_000, 3, jump=3.0, seed=1)
    res = kcpstream.segment(sig.x, features=Linear(), n_bkps=3, method="dynp")
    bounds = [0, *res.changepoints, sig.n]
    x = sig.x
    for i, g in enumerate(res.gains):
        a, c, e = bounds[i], bounds[i + 1], bounds[i + 2]
        assert g == pytest.approx(_sse(x[a:e]) - _sse(x[a:c]) - _sse(x[c:e]), rel=1e-5)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    m=st.integers(2, 40),
    p=st.integers(1, 9),
    min_size=st.integers(1, 6),
    d_max=st.integers(1, 8),
    magnitude=st.sampled_from([0, 2**7, 2**40, 2**52, 2**60]),  # 0: every value ties
)
def test_dp_kernels_equal_the_pairwise_reference(seed, m, p, min_size, d_max, magnitude):
    # the vectorised values (float prefix when exact, int64 above 2**53) and the
    # DP without inadmissibility tests give the reference's tables bit for bit
    from kcpstream.search.dynp import _EXACT_FLOAT, _dp, _segment_values

    from .reference import dp_reference, segment_values_reference

    rng = np.random.default_rng(seed)
    positions = np.concatenate([[0], np.cumsum(rng.integers(1, 5, m - 1))]).astype(np.int64)
    steps = rng.integers(-magnitude, magnitude + 1, (m, p), dtype=np.int64) // 64
    prefix = np.cumsum(steps, axis=0)  # below 2**60 in magnitude: no overflow
    expected = segment_values_reference(prefix, positions, min_size)
    given_prefix = prefix.astype(np.float64) if np.abs(prefix).max() < _EXACT_FLOAT else prefix
    values = _segment_values(given_prefix, positions, min_size)
    np.testing.assert_array_equal(values, expected.T)
    best, arg = _dp(values, d_max)
    best_ref, arg_ref = dp_reference(expected, d_max)
    np.testing.assert_array_equal(best, best_ref)
    np.testing.assert_array_equal(arg, arg_ref)
