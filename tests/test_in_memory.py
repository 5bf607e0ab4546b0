"""Small series are searched in memory: exactly what the block grid and the
brute-force scan return, with every sample read and featurized once."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kcpstream
import kcpstream.engine.plan
from kcpstream import InputError, Linear, NotEnoughSplitsError, datasets
from kcpstream._kernels.dense import SCAN_TILE, best_split_between, dense_binseg
from kcpstream.features import (
    RFF,
    BrownianThreshold,
    InvariantWindow,
    Nystrom,
    QuadratureFF,
)
from kcpstream.inputs.signal import as_signal
from kcpstream.passes.data import data_passes, dense_stats
from kcpstream.search.binseg import SearchLog, binseg_steps, dense_binseg_steps
from kcpstream.search.stats import BlockStats

from .helpers import CountingStore
from .reference import cusum_gains, quantized, reference_binseg


def _stats_of(q: np.ndarray) -> BlockStats:
    """Statistics with one block per sample of integer features ``q`` (n, p)."""
    prefix = np.zeros((q.shape[1], q.shape[0] + 1), np.int64)
    np.cumsum(q.T, axis=1, out=prefix[:, 1:])
    sq = (q.astype(np.float64) ** 2).sum(axis=1)
    return BlockStats.from_samples(0, prefix, sq, sq)


@st.composite
def integer_features(draw):
    n = draw(st.integers(2, 700))
    p = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if draw(st.booleans()):  # few distinct values: many exact ties
        return rng.integers(-2, 3, size=(n, p)).astype(np.int64)
    cps = np.sort(rng.choice(np.arange(1, n), size=min(3, n - 1), replace=False))
    levels = rng.integers(-(2**20), 2**20, size=(len(cps) + 1, p))
    noise = rng.integers(-(2**21), 2**21, size=(n, p))
    return noise + np.repeat(levels, np.diff(np.r_[0, cps, n]), axis=0)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), q=integer_features())
def test_dense_search_equals_bruteforce_and_the_block_grid_search(data, q):
    n = q.shape[0]
    min_size = data.draw(st.integers(1, max(1, n // 3)), label="min_size")
    stats = _stats_of(q)
    if data.draw(st.booleans(), label="use_pen"):
        pen = data.draw(st.floats(0, 2.0**44), label="pen")
        kw, expected = {"pen": pen}, reference_binseg(q, min_size, pen_q=pen, compiled=True)
    else:
        n_bkps = data.draw(st.integers(0, 12), label="n_bkps")
        kw, expected = {"n_bkps": n_bkps}, reference_binseg(q, min_size, n_bkps, compiled=True)

    def run(steps):
        try:
            next(steps)
        except StopIteration as stop:  # neither search asks for a scan here
            return stop.value
        raise AssertionError("a search over one block per sample asked to read data")

    if expected is None:
        with pytest.raises(NotEnoughSplitsError):
            run(dense_binseg_steps(stats, min_size=min_size, **kw))
        return
    order = run(dense_binseg_steps(stats, min_size=min_size, **kw))
    assert [(s.split, s.gain) for s in order] == expected  # gains equal to the bit
    # the block-grid search over the same statistics: the same splits, segments, gains
    grid = run(binseg_steps(stats, min_size=min_size, **kw))
    assert [(s.start, s.end, s.split, s.gain) for s in order] == [
        (s.start, s.end, s.split, s.gain) for s in grid
    ]


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(4, 3 * SCAN_TILE + 5),
    p=st.integers(1, 5),
    seed=st.integers(0, 2**32 - 1),
    ties=st.booleans(),
)
def test_best_split_between_is_split_gain_at_every_position(n, p, seed, ties):
    rng = np.random.default_rng(seed)
    q = rng.integers(-1, 2, size=(n, p)) if ties else rng.integers(-(2**28), 2**28, size=(n, p))
    stats = _stats_of(q.astype(np.int64))
    cumsum = np.ascontiguousarray(stats.prefix.T)
    a, e = sorted(int(v) for v in rng.choice(n + 1, size=2, replace=False))
    if e - a < 2:
        return
    lo, hi = sorted(int(v) for v in rng.integers(a + 1, e, size=2))
    gains = cusum_gains(cumsum, a, e, 1)[lo - a : hi - a + 1]  # split_gain at lo .. hi
    gain, pos = best_split_between(stats.prefix, a, e, lo, hi)
    assert pos == lo + int(np.argmax(gains)) and gain == gains.max()
    assert best_split_between(stats.prefix, a, e, hi + 1, hi) == (-1.0, -1)


def test_dense_binseg_stops_at_the_penalty_and_when_nothing_can_split():
    q = np.array([[0], [0], [9], [9], [0], [0]], np.int64)
    stats = _stats_of(q)
    starts, ends, splits, gains = dense_binseg(stats.prefix, 5, -np.inf, 2)
    assert splits.tolist() == [2, 4] and starts.tolist() == [0, 2] and ends.tolist() == [6, 6]
    assert gains[0] < gains[1]  # 2*4/6 * 4.5^2 = 27 at 2, then 2*2/4 * 9^2 = 81 at 4
    # binary segmentation stops at the first best gain not above the penalty
    _, _, splits, _ = dense_binseg(stats.prefix, 5, float(gains[0]), 2)
    assert splits.tolist() == []
    _, _, splits, _ = dense_binseg(stats.prefix, 5, float(np.nextafter(gains[0], 0)), 2)
    assert splits.tolist() == [2, 4]
    _, _, splits, _ = dense_binseg(stats.prefix, 1, -np.inf, 2)  # at most one split
    assert splits.tolist() == [2]


@pytest.mark.parametrize(
    "fmap",
    [
        QuadratureFF(16),
        RFF(32, seed=3),
        Nystrom(12, seed=1),
        Linear(),
        BrownianThreshold(8),  # the data pass accumulates it without dense features
        InvariantWindow(16, window=4, n_bins=4),  # rows: flattened windows
    ],
    ids=lambda f: type(f).__name__,
)
def test_in_memory_statistics_equal_the_data_pass(fmap):
    rng = np.random.default_rng(0)
    d = 4 if isinstance(fmap, InvariantWindow) else 2
    x = np.concatenate([rng.normal(size=(300, d)), rng.gamma(2.0, size=(301, d))]).astype(
        np.float32
    )
    fmap = fmap.fit(x.astype(np.float64))
    signal = as_signal(da.from_array(x, chunks=(97, d)))
    mem = dense_stats(x, fmap, 64, "x")
    for B in (1, 7):
        grid = data_passes([(signal, fmap, B, None)], 64)[0].stats
        assert np.array_equal(mem.prefix[:, np.r_[0 : mem.n : B, mem.n]], grid.prefix)
        np.testing.assert_allclose(
            mem.prefix_q[np.r_[0 : mem.n : B, mem.n]], grid.prefix_q, rtol=1e-13
        )
    q = quantized(fmap.transform(x), fmap.quantum_exponent_).astype(np.float64)
    assert np.all(mem.max_norm2 >= (q**2).sum(axis=1))  # a valid bound on every sample
    assert mem.global_max_norm2 <= grid.global_max_norm2 * (1 + 1e-9)


def _signal(n, seed=0):
    return datasets.scenario1(n, 8, seed=seed).x


# the automatic test estimates the noise on the block grid, which these two
# searches do not share; its path and every split are compared with n_bkps
@pytest.mark.parametrize(
    "kw", [{"n_bkps": 8}, {"pen": 2.0}, {"pen": "slope"}], ids=["n_bkps", "pen", "slope"]
)
@pytest.mark.parametrize("n", [40, 1000, 5000])
def test_segment_in_memory_equals_the_block_grid(n, kw):
    x = _signal(n)
    mem = kcpstream.segment(x, min_size=2, **kw)  # 8 change-points fit in 40 samples
    grid = kcpstream.segment(x, min_size=2, block_size=16, **kw)
    assert mem.diagnostics.in_memory and not grid.diagnostics.in_memory
    assert mem.changepoints.tolist() == grid.changepoints.tolist()
    assert mem.order.tolist() == grid.order.tolist()
    assert mem.gains.tolist() == grid.gains.tolist()  # integer sums: equal to the bit
    assert mem.selection.n_segments == grid.selection.n_segments
    # sums of ||q||^2 round in another order (blocks of 16 against single samples)
    np.testing.assert_allclose(mem.path_costs, grid.path_costs, rtol=1e-12)


def test_window_features_in_memory_equal_the_block_grid():
    x = _signal(4000, seed=3)
    fmap = InvariantWindow(16, window=8, n_bins=4)
    mem = kcpstream.segment(x, features=fmap, n_bkps=5)
    grid = kcpstream.segment(x, features=fmap, n_bkps=5, block_size=4)
    assert mem.diagnostics.in_memory and mem.diagnostics.n_blocks == 500  # windows
    assert mem.changepoints.tolist() == grid.changepoints.tolist()
    assert mem.gains.tolist() == grid.gains.tolist()


def test_dynp_in_memory_equals_the_block_grid_with_the_same_grid():
    # n = 5000: the DP grid is every third sample either way (every third of 5000
    # single-sample blocks, or every block of 3); the refinement that the block
    # grid answers by reading data again is answered from the prefix sums
    x = _signal(5000, seed=4)
    mem = kcpstream.segment(x, n_bkps=8, method="dynp")
    grid = kcpstream.segment(x, n_bkps=8, method="dynp", block_size=3)
    assert mem.diagnostics.in_memory and grid.diagnostics.rounds > 0
    assert mem.changepoints.tolist() == grid.changepoints.tolist()
    np.testing.assert_allclose(mem.path_costs, grid.path_costs, rtol=1e-12)
    assert mem.diagnostics.rounds == 0 and mem.diagnostics.samples_scanned == 0


def test_in_memory_diagnostics_say_every_sample_was_read_and_featurized_once():
    x = _signal(3000)
    res = kcpstream.segment(x, n_bkps=8)
    d = res.diagnostics
    assert d.in_memory and d.block_size == 1 and d.n_blocks == 3000
    assert d.samples_featurized == 3000 and d.passes == 1.0
    assert d.rounds == 0 and d.samples_scanned == 0 and d.pieces_scanned == 0
    assert d.samples_read_again == 0 and d.pass_tasks == 0


def test_the_threshold_on_samples_times_features(monkeypatch):
    x = _signal(1000)
    monkeypatch.setattr(kcpstream.engine.plan, "DENSE_MAX_VALUES", 1000 * 64)
    assert kcpstream.segment(x, n_bkps=3).diagnostics.in_memory  # 1000 x 64 features
    assert not kcpstream.segment(x, n_bkps=3, features="rff:66").diagnostics.in_memory
    assert not kcpstream.segment(x, n_bkps=3, block_size=64).diagnostics.in_memory
    monkeypatch.setattr(kcpstream.engine.plan, "DENSE_MAX_VALUES", 999 * 64)
    big = kcpstream.segment(x, n_bkps=3)
    assert not big.diagnostics.in_memory and big.diagnostics.block_size == 64
    monkeypatch.undo()
    assert big.changepoints.tolist() == kcpstream.segment(x, n_bkps=3).changepoints.tolist()


def _three_sensors():
    """Three series of 4000 samples, one per label of a ``sensor`` dimension."""
    import pandas as pd
    import xarray as xr

    sigs = [datasets.piecewise_constant(4_000, 3, jump=3.0, seed=s) for s in range(3)]
    return xr.DataArray(
        np.stack([s.x for s in sigs], axis=1),
        dims=("time", "sensor"),
        coords={"time": pd.RangeIndex(4_000), "sensor": ["a", "b", "c"]},
    )


def test_a_batch_holds_at_most_its_budget_of_prefix_sums_in_memory(monkeypatch):
    da_ = _three_sensors()
    unlimited = kcpstream.segment(da_, batch_dims="sensor", n_bkps=3)
    assert [r.diagnostics.in_memory for _, r in unlimited] == [True, True, True]
    each = 8 * 4_001 * 64  # exact prefix sums of one series
    monkeypatch.setattr(kcpstream.engine.plan, "DENSE_BATCH_BYTES", 2 * each + each // 2)
    limited = kcpstream.segment(da_, batch_dims="sensor", n_bkps=3)
    assert [r.diagnostics.in_memory for _, r in limited] == [True, True, False]
    assert limited["c"].diagnostics.block_size == 64
    for (_, a), (_, b) in zip(unlimited, limited, strict=True):
        assert a.changepoints.tolist() == b.changepoints.tolist()
        assert a.gains.tolist() == b.gains.tolist()


def test_a_batchs_series_have_the_grid_they_have_alone(monkeypatch):
    import dataclasses

    from kcpstream.engine.plan import block_size_of

    from .helpers import default_settings

    da_ = _three_sensors()
    monkeypatch.setattr(kcpstream.engine.plan, "DENSE_MAX_VALUES", 0)  # the block grid
    alone = [kcpstream.segment(da_.sel(sensor=s), n_bkps=3) for s in "abc"]
    assert {r.diagnostics.block_size for r in alone} == {64}  # 4000 / 64 blocks each
    batch = kcpstream.segment(da_, batch_dims="sensor", n_bkps=3)
    assert [r.diagnostics.block_size for _, r in batch] == [64, 64, 64]
    for a, (_, b) in zip(alone, batch, strict=True):
        assert a.changepoints.tolist() == b.changepoints.tolist()
        assert a.gains.tolist() == b.gains.tolist()
    # however many series one call holds (its groups bound their statistics)
    st = default_settings()
    for n in (10**5, 10**6, 10**9):
        grid = block_size_of(n, st)
        assert block_size_of(n, dataclasses.replace(st, n_series=10**4)) == grid


@pytest.mark.parametrize("first", [{"block_size": 64}, {}])  # the block grid, in memory
def test_a_checkpoint_of_either_search_serves_the_other(tmp_path, first):
    # both searches of a small series share the checkpoint's key (its block size)
    x = _signal(3000)
    then = {} if first else {"block_size": 64}
    fresh = kcpstream.segment(x, n_bkps=4, **then)
    written = kcpstream.segment(x, n_bkps=4, checkpoint=tmp_path / "ck", **first)
    loaded = kcpstream.segment(x, n_bkps=4, checkpoint=tmp_path / "ck", **then)
    assert written.diagnostics.checkpoint == "written"
    assert loaded.diagnostics.checkpoint == "loaded"
    assert loaded.diagnostics.in_memory == written.diagnostics.in_memory  # as stored
    assert loaded.changepoints.tolist() == fresh.changepoints.tolist()
    assert loaded.gains.tolist() == fresh.gains.tolist()


def test_a_small_zarr_store_is_read_once(tmp_path):
    sig = datasets.scenario1(6000, 8, seed=2)
    datasets.write_zarr(sig.x.astype(np.float32), tmp_path / "s.zarr", chunks=1000)
    counting = CountingStore(zarr.storage.LocalStore(tmp_path / "s.zarr"))
    arr = zarr.open_group(counting, mode="r")["x"]
    res = kcpstream.segment(arr, n_bkps=8)
    reads = counting.chunk_reads("x")
    assert res.diagnostics.in_memory and res.diagnostics.n_chunks == 6
    assert len(reads) == 6 and set(reads.values()) == {1}  # every chunk, each once
    grid = kcpstream.segment(arr, n_bkps=8, block_size=64)
    assert res.changepoints.tolist() == grid.changepoints.tolist()


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_chunking_and_scheduler_do_not_change_the_result(scheduler):
    x = _signal(2000, seed=7)
    ref = kcpstream.segment(x, n_bkps=8)
    with dask.config.set(scheduler=scheduler):
        for chunks in (1, 333, 2000):
            res = kcpstream.segment(da.from_array(x, chunks=chunks), n_bkps=8)
            assert res.diagnostics.in_memory
            assert res.changepoints.tolist() == ref.changepoints.tolist()
            assert res.path_costs.tolist() == ref.path_costs.tolist()


def test_non_finite_samples_are_a_clear_error():
    x = _signal(2000)
    x[1234] = np.inf  # (a NaN is a gap)
    with pytest.raises(InputError, match="infinity at index 1234"):
        kcpstream.segment(x, n_bkps=3, features=QuadratureFF(16).fit(_signal(2000)))


def test_checkpoint_of_an_in_memory_search(tmp_path):
    x = _signal(3000, seed=5)
    ck = tmp_path / "ck.zarr"
    first = kcpstream.segment(x, n_bkps=8, checkpoint=ck)
    again = kcpstream.segment(x, n_bkps=5, checkpoint=ck)
    assert first.diagnostics.checkpoint == "written" and again.diagnostics.checkpoint == "loaded"
    assert again.diagnostics.in_memory and again.diagnostics.samples_featurized == 0
    assert again.changepoints.tolist() == kcpstream.segment(x, n_bkps=5).changepoints.tolist()


def test_too_many_change_points_for_a_small_series_is_a_clear_error():
    with pytest.raises(NotEnoughSplitsError, match="n_bkps<="):
        kcpstream.segment(np.r_[np.zeros(5), np.ones(5)], n_bkps=4, min_size=2, features=Linear())
    log = SearchLog()
    stats = _stats_of(np.arange(10, dtype=np.int64)[:, None])
    order = dense_binseg_steps(stats, min_size=5, n_bkps=3, allow_fewer=True, log=log)
    with pytest.raises(StopIteration) as stop:
        next(order)
    assert [s.split for s in stop.value.value] == [5]
