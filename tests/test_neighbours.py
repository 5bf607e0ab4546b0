"""The nearest-neighbour test of short series with a cycle
(kcpstream.selection.neighbours), its kernels against the obvious
implementation, and its part in features="auto"."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

import kcpstream
from kcpstream._kernels.neighbours import block_exceedances, crossing_scan, nearest_subsequences
from kcpstream.selection.neighbours import (
    NEIGHBOUR_SAMPLES,
    neighbour_changes,
    serial_dependence,
)
from tests.reference import crossing_statistics, nearest_subsequences_reference


def _classes(seed: int, cycles: int = 15, period: int = 40, noise: float = 0.3) -> np.ndarray:
    # two classes of recorded instances, one after the other, each instance of
    # its own amplitude: a sine, then a sine with a second harmonic at a phase
    # of its own; too few windows for the kernel test to tell them apart
    rng = np.random.default_rng(seed)
    t = np.arange(period) / period
    out = []
    for c in range(2 * cycles):
        shape = np.sin(2 * np.pi * t)
        if c >= cycles:
            shape = shape + 0.6 * np.sin(4 * np.pi * t + rng.uniform(0, 2 * np.pi))
        out.append(rng.uniform(0.6, 1.4) * shape)
    x = np.concatenate(out)
    return x + noise * rng.standard_normal(x.size)


def _steady(seed: int, cycles: int = 60, period: int = 40) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(cycles * period)
    return np.sin(2 * np.pi * t / period + rng.uniform(0, 6)) + 0.4 * rng.standard_normal(t.size)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(30, 200),
    m=st.integers(2, 9),
    exclusion=st.integers(0, 12),
    k=st.integers(1, 4),
    values=st.sampled_from(["normal", "flag", "steps", "offset"]),
    seed=st.integers(0, 2**16),
)
def test_the_nearest_subsequences_are_the_obvious_ones(n, m, exclusion, k, values, seed):
    # (ties, which flags and steps make many of, go to each subsequence's own draw)
    rng = np.random.default_rng(seed)
    x = {
        "normal": lambda: rng.standard_normal(n),
        # equal distances everywhere: flat stretches and repeated shapes
        "flag": lambda: (rng.random(n) < 0.1).astype(float),
        "steps": lambda: np.repeat(rng.integers(0, 3, n // 5 + 1), 5)[:n].astype(float),
        # far from 0: the distances from dot products less the means' product
        "offset": lambda: 1e3 + rng.standard_normal(n),
    }[values]()
    nodes = n - m + 1
    lo = int(rng.integers(0, 3))
    hi = nodes - int(rng.integers(0, 3))
    got = nearest_subsequences(x, m, lo, hi, exclusion, k, seed)
    want = nearest_subsequences_reference(x, m, lo, hi, exclusion, k, seed)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(4, 80), k=st.integers(1, 3), side=st.integers(1, 6), seed=st.integers(0, 2**16)
)
def test_the_scan_counts_the_crossing_edges(n, k, side, seed):
    rng = np.random.default_rng(seed)
    edges = rng.integers(-1, n, (n, k)).astype(np.int64)
    position = rng.permutation(n).astype(np.int64)
    statistic, at = crossing_scan(position, edges, side)
    z = crossing_statistics(position, edges, side)
    if not np.isfinite(z).any():
        assert at == -1
        return
    assert at == int(np.nanargmax(z)) and statistic == pytest.approx(np.nanmax(z), rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(8, 60),
    block=st.integers(1, 9),
    stop=st.integers(1, 30),
    seed=st.integers(0, 2**16),
)
def test_the_block_orders_are_counted_until_the_stop(n, block, stop, seed):
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, n, (n, 2)).astype(np.int64)
    n_blocks = -(-n // block)
    orders = np.stack([rng.permutation(n_blocks) for _ in range(50)]).astype(np.int64)
    threshold = float(np.nanmax(crossing_statistics(np.arange(n), edges, 2)))
    count, done = block_exceedances(edges, orders, block, 2, threshold, stop)
    seen = 0
    for r, order in enumerate(orders):
        position = np.concatenate([np.arange(b * block, min((b + 1) * block, n)) for b in order])
        place = np.empty(n, np.int64)
        place[position] = np.arange(n)
        if np.nanmax(crossing_statistics(place, edges, 2)) >= threshold:
            seen += 1
            if seen == stop:
                assert (count, done) == (stop, r + 1)
                return
    assert (count, done) == (seen, len(orders))


@pytest.mark.parametrize("seed", range(3))
def test_a_change_of_waveform_is_found_where_it_is(seed):
    x = _classes(seed)
    found = neighbour_changes(x, 40, 0.01)
    assert found.changepoints.tolist() == pytest.approx([600], abs=20)
    assert (found.pvalues <= 0.01).all() and found.order.tolist() == found.changepoints.tolist()


@pytest.mark.parametrize("seed", range(5))
def test_a_steady_cycle_gets_none(seed):
    assert neighbour_changes(_steady(seed), 40, 0.01).changepoints.size == 0


def test_the_answer_is_drawn_from_the_seed():
    x = _classes(0)
    a, b = neighbour_changes(x, 40, 0.01, seed=3), neighbour_changes(x, 40, 0.01, seed=3)
    np.testing.assert_array_equal(a.pvalues, b.pvalues)
    np.testing.assert_array_equal(a.changepoints, b.changepoints)


def test_too_short_a_series_or_too_few_changes_allowed():
    x = _classes(0, cycles=3)
    assert neighbour_changes(x, 40, 0.01).changepoints.size == 0
    assert neighbour_changes(_classes(0), 40, 0.01, max_changes=0).changepoints.size == 0


def test_the_default_answers_with_the_neighbours_where_they_find_more():
    x = _classes(1)
    res = kcpstream.segment(x)
    assert res.params["shape"] == "neighbours" and res.params["window"] == 40
    assert res.changepoints.tolist() == pytest.approx([600], abs=20)
    assert res.windowing.endswith(", nearest-neighbour shapes")
    # each of the three parts is tested at a third of the level
    alone = neighbour_changes(x, 40, 0.01 / 3)
    np.testing.assert_array_equal(res.changepoints, alone.changepoints)
    np.testing.assert_array_equal(res.pvalues, alone.pvalues)
    assert res.selection.alpha == pytest.approx(0.01 / 3)
    assert res.selection.n_segments == res.n_changepoints + 1
    # costs in the windows' features at the nearest window edges, and whole
    assert res.segment_costs.shape == (res.n_changepoints + 1,)
    assert res.cost == pytest.approx(res.segment_costs.sum())
    back = kcpstream.Segmentation.from_json(res.to_json())
    np.testing.assert_array_equal(back.changepoints, res.changepoints)
    assert back.params["shape"] == "neighbours"


def test_the_phase_says_what_it_found(caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="kcpstream.progress"):
        kcpstream.segment(_classes(1))
        kcpstream.segment(_steady(0), n_bkps=1)  # no such part: nothing said of it
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("nearest")]
    assert len(said) == 1
    assert said[0].startswith("nearest neighbours: 1 change-point in 1 short series (")


def test_a_store_gives_the_answer_of_its_samples(tmp_path):
    x = _classes(0)
    z = zarr.open_array(tmp_path / "x.zarr", mode="w", shape=x.shape, chunks=(256,), dtype="f8")
    z[:] = x
    a, b = kcpstream.segment(x), kcpstream.segment(str(tmp_path / "x.zarr"))
    np.testing.assert_array_equal(a.changepoints, b.changepoints)
    np.testing.assert_array_equal(a.pvalues, b.pvalues)
    assert b.params["shape"] == a.params["shape"] == "neighbours"


def test_a_long_series_keeps_two_parts_at_half_the_level():
    cycles = NEIGHBOUR_SAMPLES // 40 + 10
    res = kcpstream.segment(_steady(0, cycles=cycles))
    assert res.params["shape"] == "invariant" and res.selection.alpha == pytest.approx(0.005)


def test_a_segmenter_and_a_batch_give_the_answer_of_a_single_call():
    xs = np.stack([_classes(0), _classes(3), _steady(1, cycles=30)])
    alone = [kcpstream.segment(x) for x in xs]
    assert alone[0].params["shape"] == "neighbours"
    again = kcpstream.Segmenter().fit(xs[0]).predict()
    np.testing.assert_array_equal(again.changepoints, alone[0].changepoints)
    assert again.params["shape"] == "neighbours"
    da = xr.DataArray(xs, dims=("sensor", "time"))
    for (_, got), want in zip(da.kcp.segment(dim="time", batch_dims="sensor"), alone, strict=True):
        np.testing.assert_array_equal(got.changepoints, want.changepoints)
        np.testing.assert_array_equal(got.pvalues, want.pvalues)
        assert got.params["shape"] == want.params["shape"]


def test_several_channels_or_a_count_keep_the_pair():
    x = _classes(0)
    assert "shape" not in kcpstream.segment(x, n_bkps=1).params
    both = kcpstream.segment(np.stack([x, x[::-1]], axis=1))
    assert both.params.get("shape") != "neighbours"


def test_equal_shapes_are_drawn_apart_for_each_subsequence():
    # a flag's flat stretches are all at distance 0 from each other: each
    # subsequence draws its own neighbours among them, rather than every one
    # taking the same few (a hub that makes the edges' positions a draw of
    # three, not of thousands)
    x = (np.random.default_rng(0).random(4000) < 0.005).astype(float)
    edges = nearest_subsequences(x, 20, 0, x.size - 19, 40, 3, 7)
    flat = np.lib.stride_tricks.sliding_window_view(x, 20).std(axis=1) < 1e-8
    targets = edges[flat].ravel()
    assert np.unique(targets).size > 0.3 * flat.sum()


def test_a_rare_flag_in_short_subsequences_gets_no_change_point():
    # nearly every subsequence of 4 samples of a flag at 0.5 % is flat: its
    # neighbours are drawn among thousands of equals, and must be drawn
    # independently for each (a tie order shared by neighbouring rows sent
    # their edges to the same stretches, and 18 of these 20 series got a
    # change-point at level 0.01)
    hits = 0
    for seed in range(20):
        x = (np.random.default_rng([31, 3000, seed]).random(3000) < 0.005).astype(float)
        hits += len(neighbour_changes(x, 4, 0.01).changepoints) > 0
    assert hits <= 2


def test_a_store_on_a_cluster_gives_the_answer_of_threads(tmp_path, monkeypatch):
    import kcpstream.engine.pair as pair
    from tests.helpers import routed_cluster

    x = _classes(0)
    path = str(tmp_path / "x.zarr")
    z = zarr.open_array(path, mode="w", shape=x.shape, chunks=(256,), dtype="f8")
    z[:] = x
    here = kcpstream.segment(path)

    def not_here(*args, **kwargs):
        raise AssertionError("the nearest neighbours' test ran in the client's process")

    # the workers are processes of their own: there the test is the real one
    monkeypatch.setattr(pair, "neighbour_changes", not_here)
    with routed_cluster():
        there = kcpstream.segment(path)
    assert there.params["shape"] == here.params["shape"] == "neighbours"
    np.testing.assert_array_equal(there.changepoints, here.changepoints)
    np.testing.assert_array_equal(there.pvalues, here.pvalues)


def test_a_labelled_series_has_the_times_of_the_neighbours_change_points():
    x = _classes(0)
    time = np.datetime64("2026-01-01T00:00") + np.arange(x.size) * np.timedelta64(1, "m")
    res = xr.DataArray(x, dims="time", coords={"time": time}).kcp.segment()
    assert res.params["shape"] == "neighbours"
    bounds = [0, *res.changepoints.tolist(), x.size]
    np.testing.assert_array_equal(res.times["start"], time[bounds[:-1]])
    np.testing.assert_array_equal(res.times["end"], time[np.array(bounds[1:]) - 1])


def test_the_block_orders_drawn_at_once_do_not_change_the_answer(monkeypatch):
    import kcpstream.selection.neighbours as neighbours

    x = _steady(3)
    statistic, _, edges = neighbours.split_statistic(x, 40, 0, x.size - 39)
    # (alpha 1: every order drawn; alpha 0.2: drawn until the count passes it)
    whole = [neighbours._block_pvalue(edges, 40, statistic, a, [1]) for a in (1.0, 0.2)]
    assert 0.01 < whole[0] < 1.0 and whole[1] > 0.2
    monkeypatch.setattr(neighbours, "ORDERS", 7)
    assert [neighbours._block_pvalue(edges, 40, statistic, a, [1]) for a in (1.0, 0.2)] == whole


def _ramps(seed: int, n: int = 3000) -> np.ndarray:
    # ramps of random lengths (no cycle), rising, then falling: the same values
    # on both sides in another order -- a change of shape, not of the law
    rng = np.random.default_rng(seed)

    def part(up: bool) -> np.ndarray:
        out = []
        while sum(map(len, out)) < n // 2:
            ramp = np.linspace(0.0, 1.0, int(rng.integers(8, 40)))
            out.append(ramp if up else ramp[::-1])
        return np.concatenate(out)[: n // 2]

    return np.concatenate([part(True), part(False)]) + 0.1 * rng.standard_normal(n)


def test_serial_dependence_sees_dependent_samples_not_changes():
    rng = np.random.default_rng(9)
    assert serial_dependence([rng.standard_normal(4000)]) is None
    shifted = np.r_[rng.standard_normal(2000), 2.0 + rng.standard_normal(2000)]
    assert serial_dependence([shifted]) is None  # a change of level is no dependence
    assert serial_dependence([(rng.random(4000) < 0.05).astype(float)]) is None
    ar = np.zeros(4000)
    for i in range(1, ar.size):
        ar[i] = 0.9 * ar[i - 1] + rng.standard_normal()
    length = serial_dependence([ar])
    assert length is not None and length >= 10  # about where its correlation fades
    assert serial_dependence([ar[:40]]) is None  # pieces too short to tell
    # steps without noise: the few pieces that move at all move at one sample
    staircase = np.repeat([0.0, 1.0, 2.0, 3.0], [800, 700, 700, 800])
    assert serial_dependence([staircase]) is None


def test_dependent_samples_are_also_tested_by_their_subsequences():
    x = _ramps(0)
    res = kcpstream.segment(x)
    m = serial_dependence([x])
    assert res.params["shape"] == "neighbours" and res.params["subsequence"] == m
    assert res.windowing == f"nearest-neighbour shapes of {m} samples"
    assert res.changepoints.tolist() == pytest.approx([1500], abs=15)
    # two parts, each at half the level
    assert res.selection.alpha == pytest.approx(0.005)
    alone = neighbour_changes(x, m, 0.005, min_size=res.params["min_size"])
    np.testing.assert_array_equal(res.changepoints, alone.changepoints)
    np.testing.assert_array_equal(res.pvalues, alone.pvalues)
    # the same from a store, a Segmenter, a batch and a checkpoint's second call
    again = kcpstream.Segmenter().fit(x).predict()
    np.testing.assert_array_equal(again.changepoints, res.changepoints)
    da = xr.DataArray(np.stack([x, _ramps(1)]), dims=("sensor", "time"))
    (_, first), _ = da.kcp.segment(dim="time", batch_dims="sensor")
    np.testing.assert_array_equal(first.changepoints, res.changepoints)


def _smooth_instances(seed: int) -> np.ndarray:
    """Recorded shapes of one class, without change (``bench_real.py``'s
    irregular nulls): a smooth random waveform, each instance stretched to
    15-60 samples and scaled, under white noise."""
    rng = np.random.default_rng([47, seed])
    t = np.linspace(0.0, 1.0, 256)
    h = np.arange(1, 4)[:, None]
    waves = []
    for _ in range(3):  # (the classes a series with changes draws from)
        wave = rng.normal(size=(3, 1)) / h * np.sin(np.pi * h * t + rng.uniform(0, 6, (3, 1)))
        waves.append((wave.sum(axis=0) - wave.sum(axis=0).mean()) / wave.sum(axis=0).std())
    pieces = []
    for _ in range(int(rng.integers(6, 31))):
        stretched = np.linspace(0, 255, int(rng.integers(15, 61)))
        pieces.append(rng.uniform(0.7, 1.3) * np.interp(stretched, np.arange(256), waves[0]))
    x = np.concatenate(pieces)
    return x + rng.choice([0.2, 0.5]) * rng.standard_normal(x.size)


@pytest.mark.parametrize("seed", [17, 38, 97])
def test_the_noise_of_dependent_samples_levels_off_past_their_dependence(seed):
    # 257-602 samples of one class: the batch estimate grows too little from one
    # sample to two to show the shapes under the noise, and levelled off there,
    # the samples' own test split these at 11-26 instances at p ~ 0
    x = _smooth_instances(seed)
    m = serial_dependence([x])
    assert m is not None
    res = kcpstream.segment(x)
    assert res.params["subsequence"] == m
    assert res.n_changepoints == 0, res.changepoints
    # the noise follows the dependence the fit found, not the parts: a level too
    # strict for the neighbours' permutations leaves their part out, and must
    # find no more (26, 14 and 2 change-points when it followed the part)
    strict = kcpstream.segment(x, alpha=0.0009)
    assert "subsequence" not in strict.params and strict.n_changepoints == 0
    again = kcpstream.Segmenter().fit(x).predict(alpha=0.0009)
    assert again.n_changepoints == 0


def test_a_checkpoint_keeps_the_subsequences_of_dependent_samples(tmp_path):
    x = _ramps(2)
    path = str(tmp_path / "x.zarr")
    z = zarr.open_array(path, mode="w", shape=x.shape, chunks=(512,), dtype="f8")
    z[:] = x
    first = kcpstream.segment(path, checkpoint=str(tmp_path / "ck"))
    second = kcpstream.segment(path, checkpoint=str(tmp_path / "ck"))
    assert second.diagnostics.checkpoint == "loaded"
    assert first.params["shape"] == second.params["shape"] == "neighbours"
    np.testing.assert_array_equal(first.changepoints, second.changepoints)
    np.testing.assert_array_equal(first.changepoints, kcpstream.segment(x).changepoints)


def test_the_default_map_named_tests_the_samples_alone():
    # the documented way to leave the nearest neighbours' part out
    x = _ramps(0)
    res = kcpstream.segment(x, features="quadrature")
    assert "subsequence" not in res.params and res.params.get("shape") is None
    assert res.selection.alpha == pytest.approx(0.01)
    assert res.params["features"] == kcpstream.segment(x).params["features"]


def test_independent_samples_keep_the_whole_level():
    rng = np.random.default_rng(3)
    x = np.r_[rng.standard_normal(2000), rng.exponential(1.0, 2000) - 1.0]
    res = kcpstream.segment(x)
    assert "shape" not in res.params and res.selection.alpha == pytest.approx(0.01)
    assert res.changepoints.tolist() == pytest.approx([2000], abs=40)


def test_a_level_the_permutations_cannot_reach_keeps_the_other_parts():
    # the permutation p-values are at least 1/2000: at alpha = 0.0012 a third
    # of it (and at 0.0005 half) could find nothing, and would only be taken
    # from the other parts
    cyclic = kcpstream.segment(_classes(1), alpha=0.0012)
    assert cyclic.selection.alpha == pytest.approx(0.0006)
    assert cyclic.params["shape"] != "neighbours"
    dependent = kcpstream.segment(_ramps(0), alpha=0.0005)
    assert dependent.selection.alpha == pytest.approx(0.0005)
    assert "subsequence" not in dependent.params
    assert kcpstream.segment(_ramps(0)).params["subsequence"] > 0
