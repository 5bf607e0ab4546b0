"""The fast search equals the brute-force scan of every sample (property tests)."""

from __future__ import annotations

import contextlib
from fractions import Fraction

import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kcpstream
from kcpstream import RFF, InputError, Linear, NotEnoughSplitsError, Nystrom
from kcpstream.features import (
    ORF,
    BrownianThreshold,
    MaternRFF,
    QuadratureFF,
    SketchedNystrom,
)

from .reference import (
    best_among_candidates,
    default_candidates,
    exact_value,
    local_gains,
    quantized,
    reference_binseg,
)


@st.composite
def signals(draw):
    n = draw(st.integers(6, 240))
    d = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    kind = draw(st.sampled_from(["normal", "piecewise", "integers"]))
    rng = np.random.default_rng(seed)
    if kind == "normal":
        x = rng.normal(size=(n, d))
    elif kind == "integers":  # many exact ties
        x = rng.integers(0, draw(st.integers(2, 4)), size=(n, d)).astype(np.float64)
    else:
        k = draw(st.integers(1, 4))
        cps = np.sort(rng.choice(np.arange(1, n), size=min(k, n - 1), replace=False))
        levels = rng.normal(scale=3, size=(len(cps) + 1, d))
        x = rng.normal(size=(n, d)) + np.repeat(levels, np.diff(np.r_[0, cps, n]), axis=0)
    return x if d > 1 or draw(st.booleans()) else x[:, 0]


@st.composite
def chunkings(draw, n):
    sizes = []
    left = n
    while left > 0:
        s = draw(st.integers(1, max(1, min(left, n // 2 + 1))))
        sizes.append(s)
        left -= s
    return tuple(sizes)


feature_maps = st.one_of(
    st.builds(
        lambda p, s: RFF(p, bandwidth=1.5, seed=s), st.sampled_from([2, 4, 16]), st.integers(0, 9)
    ),
    st.builds(
        lambda m, s: Nystrom(m, bandwidth=1.5, seed=s), st.integers(1, 12), st.integers(0, 9)
    ),
    st.builds(
        lambda p, s: RFF(p, kernel="laplacian", bandwidth=2.0, seed=s),
        st.sampled_from([2, 8]),
        st.integers(0, 9),
    ),
    st.just(Linear()),
    st.builds(lambda k: BrownianThreshold(k), st.integers(1, 12)),
    st.builds(
        lambda s, seed: SketchedNystrom(s, density=0.3, bandwidth=1.5, seed=seed),
        st.integers(1, 8),
        st.integers(0, 9),
    ),
    st.builds(lambda p: QuadratureFF(p, bandwidth=1.2), st.sampled_from([2, 8, 16])),
    st.builds(
        lambda p, s: ORF(p, bandwidth=1.5, seed=s), st.sampled_from([2, 8]), st.integers(0, 9)
    ),
    st.builds(
        lambda p, s: MaternRFF(p, nu=0.5, bandwidth=1.5, seed=s),
        st.sampled_from([4, 16]),
        st.integers(0, 9),
    ),
)


def _run(x, chunks, fmap, **kw):
    arr = np.asarray(x)
    data = da.from_array(arr, chunks=(chunks,) + arr.shape[1:])
    return kcpstream.segment(data, features=fmap, **kw)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), x=signals(), fmap=feature_maps)
def test_binseg_equals_bruteforce(data, x, fmap):
    n = x.shape[0]
    chunks = data.draw(chunkings(n), label="chunks")
    block_size = data.draw(st.one_of(st.just(1), st.integers(1, n + 3)), label="block_size")
    tile = data.draw(st.sampled_from([1, 3, 7, 64, 4096]), label="tile")
    min_size = data.draw(st.integers(1, max(1, n // 4)), label="min_size")
    use_pen = data.draw(st.booleans(), label="use_pen")
    kw = dict(min_size=min_size, block_size=block_size, tile=tile)
    # pieces scanned in turns (largest bounds first) and in slices (a long piece)
    limits = data.draw(st.sampled_from([None, (1, 1), (2, 5), (1, 17)]), label="scan_limits")

    fitted = fmap.fit(x) if not isinstance(fmap, Linear) else Linear().fit(x)
    q = quantized(fitted.transform(x), fitted.quantum_exponent_)
    constant = bool((q == q[0]).all())
    if use_pen:
        pen = data.draw(st.floats(0, 50), label="pen")
        kw["pen"] = pen
        expected = reference_binseg(q, min_size, pen_q=pen / 2.0 ** (-2 * fitted.quantum_exponent_))
    else:
        n_bkps = data.draw(st.integers(0, min(6, n // min_size - 1)), label="n_bkps")
        kw["n_bkps"] = n_bkps
        greedy = data.draw(st.booleans(), label="greedy")
        if greedy:  # a path of n_bkps splits: the greedy change-points themselves
            kw["d_max"] = n_bkps + 1
        expected = reference_binseg(q, min_size, n_bkps=n_bkps)
        if expected is not None and not greedy:
            path = reference_binseg(
                q, min_size, n_bkps=default_candidates(n, n_bkps, min_size), allow_fewer=True
            )
            candidates = [pos for pos, _ in path]

    if constant:
        with pytest.raises(InputError, match="constant"), scan_limits(limits):
            _run(x, chunks, fitted, **kw)
        return
    if expected is None:
        with pytest.raises(NotEnoughSplitsError), scan_limits(limits):
            _run(x, chunks, fitted, **kw)
        return
    with scan_limits(limits):
        res = _run(x, chunks, fitted, **kw)
    unit = 2.0 ** (-2 * fitted.quantum_exponent_)
    if "n_bkps" in kw and not greedy:
        # the best n_bkps of the path's first splits, exactly (ties: any best choice)
        best, argbest = best_among_candidates(q, candidates, n_bkps)
        assert set(res.changepoints.tolist()) <= set(candidates)
        assert len(res.changepoints) == n_bkps
        value = exact_value(q, res.changepoints)
        assert value >= best * (1 - Fraction(1, 10**12))
        if len(argbest) == 1 and value == best:
            assert res.changepoints.tolist() == argbest[0]
        assert res.order.tolist() == [c for c in candidates if c in set(res.changepoints)]
        assert res.gains.tolist() == [g * unit for g in local_gains(q, res.changepoints)]
        return
    assert res.order.tolist() == [pos for pos, _ in expected]
    # gains are computed by the same function from the same integers: equal to the bit
    if use_pen:  # the gain of each split when it was made
        gains = [g * unit for _, g in expected]
        assert res.gains[np.argsort(np.argsort(res.order))].tolist() == gains
    else:  # the gain of each change-point between its neighbours
        assert res.gains.tolist() == [g * unit for g in local_gains(q, res.changepoints)]
    assert res.diagnostics.samples_featurized >= n


@contextlib.contextmanager
def scan_limits(limits: tuple[int, int] | None):
    """Within: ``binseg.FIRST_SCANS, sliced.LONG_PIECE = limits`` (None: as they are)."""
    from kcpstream.passes import sliced
    from kcpstream.search import binseg

    old = binseg.FIRST_SCANS, sliced.LONG_PIECE
    if limits is not None:
        binseg.FIRST_SCANS, sliced.LONG_PIECE = limits
    try:
        yield
    finally:
        binseg.FIRST_SCANS, sliced.LONG_PIECE = old


@pytest.mark.parametrize("limits", [None, (1, 1), (1, 3)], ids=["whole", "turns-1", "turns-3"])
@pytest.mark.parametrize("block_size", [1, 3, 5, 12, 13])
@pytest.mark.parametrize(
    "fmap", [RFF(8, bandwidth=1.0), Nystrom(10, bandwidth=1.0), Linear()], ids=repr
)
def test_ties_go_to_smallest_index(fmap, block_size, limits):
    # a symmetric signal: the splits at 4 and 8 have bit-for-bit equal gains, found at block
    # boundaries, in different scanned blocks, or inside one scanned block (block_size >= 12);
    # pieces scanned in turns, or in slices of 1 or 3 samples, alike
    x = np.array([0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0], dtype=float)
    kw = {"features": fmap, "min_size": 1, "block_size": block_size}
    with scan_limits(limits):
        res = kcpstream.segment(da.from_array(x, chunks=5), n_bkps=1, **kw)
        assert res.changepoints.tolist() == [4]
        res2 = kcpstream.segment(da.from_array(x, chunks=5), n_bkps=2, **kw)
        assert res2.order.tolist() == [4, 8]
