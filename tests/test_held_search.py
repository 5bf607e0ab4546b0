"""A series whose features are all held is searched in one compiled call:
exactly what the block-grid search (and the brute-force scan) returns, in
a batch and alone."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import xarray as xr
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kcpstream
import kcpstream.engine.searches
from kcpstream._kernels.blockstats import piece_stats
from kcpstream._kernels.blockstats import scan_piece as scan_piece_kernel
from kcpstream._kernels.featurize import rff_tile
from kcpstream.search.binseg import SearchLog, binseg_steps
from kcpstream.search.held import held_binseg_steps
from kcpstream.search.requests import ScanResult, piece_of
from kcpstream.search.stats import BlockStats, split_piece

from .helpers import assert_same_segmentation, on_the_grid
from .reference import reference_binseg

EVERY = 8  # samples between bridge evaluations, as for a pointwise map


def _grid_stats(Z: np.ndarray, block_size: int, exponent: int = 0) -> BlockStats:
    """The block statistics of raw features ``Z`` (k, n, m) on the grid
    ``2**-exponent`` (``scale`` 1 by default), as the data pass makes them
    (:func:`piece_stats` over the blocks)."""
    n, p = Z.shape[1], Z.shape[0] * Z.shape[2]
    edges = np.r_[np.arange(0, n, block_size), n].astype(np.int64)
    nb = len(edges) - 1
    S = np.empty((nb, p), np.int64)
    Q, M2, R = np.empty(nb), np.empty(nb), np.empty(nb)
    scale = 2.0**exponent
    piece_stats(Z, scale, edges, S, Q, M2, R, np.empty(nb, np.int64), -1.0, EVERY)
    return BlockStats(n, block_size, exponent, S, Q, M2, R)


def _grid_search(stats: BlockStats, Z: np.ndarray, min_size: int, n_bkps: int, known=None):
    """:func:`binseg_steps`, every piece it asks for scanned from ``Z`` as
    :func:`kcpstream.passes.scan.scan_piece` scans a piece read again."""
    steps = binseg_steps(stats, min_size=min_size, n_bkps=n_bkps, allow_fewer=True, known=known)
    try:
        requests = next(steps)
        while True:
            results = []
            for r in requests:
                z = Z[:, r.piece_start : r.piece_end]
                gain, pos = scan_piece_kernel(
                    z, 1.0, r.piece_start, *r.segment, r.left_at_piece, r.total, min_size, r.grid
                )
                left = right = None
                if pos >= 0:
                    lo, hi = (b - r.piece_start for b in piece_of(r, pos))
                    left, right = split_piece(z[:, lo:hi], 1.0, pos - r.piece_start - lo, EVERY)
                results.append(ScanResult(r, float(gain), int(pos), left, right))
            requests = steps.send(results)
    except StopIteration as stop:
        return stop.value


def _held_search(
    stats: BlockStats, Z: np.ndarray, min_size: int, n_bkps: int, log=None, lazy=None, known=None
):
    steps = held_binseg_steps(
        stats, Z, EVERY, min_size=min_size, n_bkps=n_bkps, allow_fewer=True, log=log, lazy=lazy,
        known=known,
    )  # fmt: skip
    with pytest.raises(StopIteration) as stop:
        next(steps)  # it asks for no scan
    return stop.value.value


@st.composite
def held_series(draw):
    n = draw(st.integers(2, 3000))
    k, m = draw(st.sampled_from([(1, 1), (1, 3), (2, 2)]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):  # few distinct values: many exact ties
        Z = rng.integers(-2, 3, size=(k, n, m))
    else:
        cps = np.sort(rng.choice(np.arange(1, n + 1), size=min(4, n), replace=False))
        levels = rng.integers(-(2**14), 2**14, size=(k, len(cps) + 1, m))
        Z = rng.integers(-(2**15), 2**15, size=(k, n, m))
        Z += np.repeat(levels, np.diff(np.r_[0, cps, n]), axis=1)[:, :n]
    return Z.astype(np.float32)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), Z=held_series())
def test_the_held_search_is_the_block_grid_search_and_brute_force(data, Z):
    n = Z.shape[1]
    block_size = data.draw(st.sampled_from([1, 2, 3, 8, 16, 64, 100]), label="block_size")
    min_size = data.draw(st.integers(1, max(1, n // 4)), label="min_size")
    n_bkps = data.draw(st.integers(0, 40), label="n_bkps")
    grid_stats, held_stats = _grid_stats(Z, block_size), _grid_stats(Z, block_size)
    grid = _grid_search(grid_stats, Z, min_size, n_bkps)
    held = _held_search(held_stats, Z, min_size, n_bkps)
    assert [(s.start, s.end, s.split, s.gain) for s in held] == [
        (s.start, s.end, s.split, s.gain) for s in grid
    ]  # gains to the bit
    q = np.ascontiguousarray(Z.transpose(1, 0, 2).reshape(n, -1)).astype(np.int64)
    expected = reference_binseg(q, min_size, n_bkps, compiled=True, allow_fewer=True)
    assert [(s.split, s.gain) for s in held] == expected
    for s in held:  # the sums at every split, as the grid's search left them
        s_grid, q_grid = grid_stats.prefix_at(s.split)
        s_held, q_held = held_stats.prefix_at(s.split)
        np.testing.assert_array_equal(s_held, s_grid)
        assert q_held == q_grid


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(2, 3000),
    block_size=st.sampled_from([1, 3, 16, 64, 100]),
    n_bkps=st.integers(0, 30),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_fourier_maps_blocks_featurized_as_scanned_give_the_whole_features_search(
    n, block_size, n_bkps, seed
):
    # the lazy search featurizes runs of blocks into a buffer of its own and
    # copies them in: the same bits in Z as the whole series featurized at
    # once, so the same splits, gains and sums; only the blocks it scanned
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    x[n // 3 :] *= 3.0
    m = 8
    center = np.median(x, axis=0)
    weights = rng.normal(size=(2, m)).astype(np.float32)
    amplitudes = np.full(m, 0.25, np.float32)
    whole = np.empty((2, n, m), np.float32)
    rff_tile(x, center, weights, amplitudes, whole)
    exponent = 20
    eager_stats = _grid_stats(whole, block_size, exponent)
    lazy_stats = _grid_stats(whole, block_size, exponent)
    eager = _held_search(eager_stats, whole, 2, n_bkps)
    lazy_z = np.full_like(whole, np.nan)
    log = SearchLog()
    lazy = _held_search(lazy_stats, lazy_z, 2, n_bkps, log, (x, center, weights, amplitudes))
    assert [(s.start, s.end, s.split, s.gain) for s in lazy] == [
        (s.start, s.end, s.split, s.gain) for s in eager
    ]
    for s in eager:
        np.testing.assert_array_equal(
            lazy_stats.prefix_at(s.split)[0], eager_stats.prefix_at(s.split)[0]
        )
    made = ~np.isnan(lazy_z[0, :, 0])  # the samples it featurized
    np.testing.assert_array_equal(lazy_z[:, made], whole[:, made])
    assert log.samples_featurized == made.sum()
    starts = np.arange(0, n, block_size)  # whole blocks, never part of one
    assert all(made[a : a + block_size].all() or not made[a : a + block_size].any() for a in starts)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), Z=held_series())
def test_the_segments_a_held_search_records_are_the_grid_searchs(data, Z):
    # what a checkpoint keeps: every segment the grid's search made exact is
    # in the held search's record with the same split, gain and piece, and the
    # statistics hold the same exact sums at its split; a deeper search from
    # either record gives the same splits
    n = Z.shape[1]
    block_size = data.draw(st.sampled_from([1, 3, 16, 64]), label="block_size")
    min_size = data.draw(st.integers(1, max(1, n // 4)), label="min_size")
    n_bkps = data.draw(st.integers(0, 20), label="n_bkps")
    grid_stats, held_stats = _grid_stats(Z, block_size), _grid_stats(Z, block_size)
    grid_known, held_known = {}, {}
    grid = _grid_search(grid_stats, Z, min_size, n_bkps, grid_known)
    held = _held_search(held_stats, Z, min_size, n_bkps, known=held_known)
    assert [(s.start, s.end, s.split, s.gain) for s in held] == [
        (s.start, s.end, s.split, s.gain) for s in grid
    ]
    assert all(seg.exact for seg in held_known.values())
    for key, seg in grid_known.items():
        if not seg.exact or key not in held_known:  # (a guessed child it never formed)
            continue
        mine = held_known[key]
        assert (mine.split, mine.gain, mine.piece) == (seg.split, seg.gain, seg.piece)
        for half, theirs in ((mine.left, seg.left), (mine.right, seg.right)):
            if theirs is None:  # (a split on the grid: no piece cut)
                assert half is None
                continue
            assert (half.count, half.Q, half.M2, half.R) == (
                theirs.count, theirs.Q, theirs.M2, theirs.R,
            )  # fmt: skip
            np.testing.assert_array_equal(half.S, theirs.S)
        if seg.split >= 0:
            s_grid, q_grid = grid_stats.prefix_at(seg.split)
            s_held, q_held = held_stats.prefix_at(seg.split)
            np.testing.assert_array_equal(s_held, s_grid)
            assert q_held == q_grid
    deeper = n_bkps + data.draw(st.integers(1, 10), label="more")
    from_grid = _grid_search(grid_stats, Z, min_size, deeper, grid_known)
    from_held = _grid_search(held_stats, Z, min_size, deeper, held_known)
    assert [(s.start, s.end, s.split, s.gain) for s in from_held] == [
        (s.start, s.end, s.split, s.gain) for s in from_grid
    ]


def test_a_tie_inside_a_block_goes_to_the_smaller_position():
    # mirror-symmetric: the gains at 360 (inside a block) and at the grid point
    # 640 are equal to the bit; the boundary scan finds 640, the scan of the
    # block holding 360 must take the smaller position
    x = np.zeros(1000, np.float32)
    x[360:640] = 1.0
    Z = x[None, :, None]
    grid = _grid_search(_grid_stats(Z, 64), Z, 2, 1)
    held = _held_search(_grid_stats(Z, 64), Z, 2, 1)
    assert [s.split for s in grid] == [s.split for s in held] == [360]


def test_the_held_search_counts_what_it_scanned():
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(1, 5000, 4)).astype(np.float32) * 100
    Z[:, 2100:] += 40
    log = SearchLog()
    order = _held_search(_grid_stats(Z, 64), Z, 5, 10, log)
    assert order[0].split == 2100
    assert log.rounds == 0 and log.segments_evaluated == 21
    assert 0 < log.pieces_scanned and 0 < log.samples_scanned
    assert log.samples_featurized == 5000  # the whole series, once


def _store(path, sensors: int = 6, n: int = 70_000):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((sensors, n)).astype("f4")
    for i in range(sensors):
        x[i, (i + 2) * n // 10 :] += 1.0
        x[i, 3 * n // 4 :] *= 2.0
    xr.Dataset({"v": (("sensor", "time"), x)}).to_zarr(
        path, encoding={"v": {"chunks": (1, 2**14)}}, zarr_format=2
    )
    return xr.open_zarr(path)["v"]


@pytest.fixture(scope="module")
def sensors(tmp_path_factory):
    return _store(tmp_path_factory.mktemp("held") / "s.zarr")


@pytest.mark.parametrize(
    "kw", [{"features": "quadrature"}, {"features": "nystrom", "block_size": 64}]
)
def test_a_batch_searched_held_equals_the_grid_search_and_single_calls(sensors, monkeypatch, kw):
    n = 70_000
    held = kcpstream.segment(sensors, dim="time", batch_dims="sensor", **kw)
    for _, r in held:  # on the grid (p * n over the in-memory limit), its samples held
        d = r.diagnostics
        assert not d.in_memory and d.rounds == 0 and d.samples_featurized_pass == n
        if kw["features"] == "quadrature":  # a Fourier map: only the blocks the search scans
            assert n < d.samples_featurized < 2 * n
        else:  # every sample once more
            assert d.samples_featurized == 2 * n
    on_the_grid(monkeypatch)
    grid = kcpstream.segment(sensors, dim="time", batch_dims="sensor", **kw)
    assert all(r.diagnostics.rounds > 0 for _, r in grid)
    for (_, a), (_, b) in zip(held, grid, strict=True):
        assert_same_segmentation(a, b)
        assert a.cost == b.cost
    monkeypatch.undo()
    alone = kcpstream.segment(sensors.isel(sensor=4), dim="time", **kw)
    assert_same_segmentation(alone, held[4])


def test_a_series_the_cache_no_longer_holds_is_read_again_once(sensors, caplog):
    # 6 series of 280 kB in 600 kB: searched two at a time, each series' share of
    # the cache (100 kB) kept one of its five chunks from the data pass
    held = kcpstream.segment(sensors, dim="time", batch_dims="sensor")
    with caplog.at_level(logging.INFO, logger="kcpstream"):
        small = kcpstream.segment(sensors, dim="time", batch_dims="sensor", cache_bytes=600_000)
    assert sum("search, series" in r.getMessage() for r in caplog.records) == 3
    for (_, a), (_, b) in zip(held, small, strict=True):
        assert_same_segmentation(a, b)
        assert a.diagnostics.samples_read_again == 0
        # the data pass read again what the fit read; the search, the series once
        assert b.diagnostics.rounds == 0
        assert 70_000 <= b.diagnostics.samples_read_again <= 2 * 70_000


def test_a_single_series_the_cache_does_not_hold_is_searched_on_the_grid(sensors):
    # not read whole again: the grid's rounds read the chunks its pieces need
    # (the cache keeps those it has room for; tests/test_inputs.py)
    res = kcpstream.segment(sensors.isel(sensor=2), dim="time", cache_bytes=0)
    assert res.diagnostics.rounds > 0
    assert_same_segmentation(res, kcpstream.segment(sensors.isel(sensor=2), dim="time"))


def test_a_checkpointed_series_is_searched_held_and_its_segments_kept(sensors, tmp_path):
    x = sensors.isel(sensor=1).values
    path = tmp_path / "one.zarr"
    z = zarr.create_array(path, shape=x.shape, chunks=(2**14,), dtype="f4")
    z[:] = x
    ck = tmp_path / "ck"
    fresh = kcpstream.segment(zarr.open_array(path), checkpoint=ck)
    assert fresh.diagnostics.checkpoint == "written" and fresh.diagnostics.rounds == 0
    assert_same_segmentation(fresh, kcpstream.segment(zarr.open_array(path)))
    # every segment it evaluated is kept: other rules on them read nothing
    for kw in ({}, {"n_bkps": 5}, {"n_bkps": 40}):
        again = kcpstream.segment(zarr.open_array(path), checkpoint=ck, **kw)
        assert again.diagnostics.checkpoint == "loaded"
        assert again.diagnostics.samples_featurized == 0
        assert_same_segmentation(again, kcpstream.segment(zarr.open_array(path), **kw))
    # an update searches on the grid, reading only the chunks that changed
    z.resize((x.shape[0] + 2**14,))
    z[x.shape[0] :] = np.random.default_rng(1).normal(size=2**14).astype("f4") + 3
    grown = kcpstream.segment(zarr.open_array(path), checkpoint=ck)
    assert grown.diagnostics.checkpoint == "updated" and grown.diagnostics.chunks_read <= 2
    assert_same_segmentation(grown, kcpstream.segment(zarr.open_array(path)))


def test_several_channels_in_their_maps_order_equal_the_grid_search(monkeypatch):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((60_000, 3)) * [1.0, 30.0, 0.01]
    x[21_000:, 2] += 0.01
    x[40_000:, 1] *= 2.0
    held = kcpstream.segment(x, block_size=64)
    assert held.features.order_ is not None and held.diagnostics.rounds == 0
    on_the_grid(monkeypatch)
    grid = kcpstream.segment(x, block_size=64)
    assert grid.diagnostics.rounds > 0
    assert_same_segmentation(held, grid)


def test_a_series_with_gaps_is_searched_held_as_on_the_grid(tmp_path, monkeypatch):
    # its valid samples are what the cache holds and the held search reads
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 90_000)).astype("f4")
    x[:, 40_000:] += 0.8
    x[0, 10_000:17_000] = np.nan  # an outage
    x[1, rng.choice(90_000, 900, replace=False)] = np.nan  # dropped samples
    x[2, 60_000:62_000] = np.nan
    path = tmp_path / "gaps.zarr"
    xr.Dataset({"v": (("sensor", "time"), x)}).to_zarr(
        path, encoding={"v": {"chunks": (1, 2**14)}}, zarr_format=2
    )
    da = xr.open_zarr(path)["v"]
    held = kcpstream.segment(da, dim="time", batch_dims="sensor", block_size=64)
    assert all(r.diagnostics.rounds == 0 and r.diagnostics.n_missing for _, r in held)
    on_the_grid(monkeypatch)
    grid = kcpstream.segment(da, dim="time", batch_dims="sensor", block_size=64)
    for (_, a), (_, b) in zip(held, grid, strict=True):
        assert b.diagnostics.rounds > 0
        assert_same_segmentation(a, b)
        np.testing.assert_array_equal(a.earliest, b.earliest)


def test_a_batchs_choices_are_made_beside_its_searches_with_one_blas_thread(sensors, monkeypatch):
    import threading

    from threadpoolctl import threadpool_info

    import kcpstream.engine.run
    import kcpstream.tasks.threads

    def blas_threads() -> list[int]:
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    seen = []
    choose = kcpstream.engine.run._choose

    def spy(job, order, st):
        seen.append((threading.current_thread().name, blas_threads()))
        return choose(job, order, st)

    before = blas_threads()
    monkeypatch.setattr(kcpstream.engine.run, "_choose", spy)
    monkeypatch.setattr(kcpstream.tasks.threads, "worker_threads", lambda: 2)  # any runner
    res = kcpstream.segment(sensors, dim="time", batch_dims="sensor")
    # each series chosen in the thread its search ended in, as the others search
    assert len(seen) == len(res) == 6
    assert all(name.startswith("kcpstream") for name, _ in seen)
    assert all(threads == [1] * len(threads) for _, threads in seen)
    assert blas_threads() == before  # (the process's limit is given back)
    monkeypatch.undo()
    alone = kcpstream.segment(sensors.isel(sensor=1), dim="time")
    assert_same_segmentation(alone, res[1])
