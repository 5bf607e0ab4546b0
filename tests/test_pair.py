"""features="auto" on a cycle: windows segmented with both shape parts, each at its share of
the level (half, or a third where a short series' nearest neighbours are the third part:
tests/test_neighbours.py)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
import zarr

import kcpstream
from kcpstream.features import Temporal
from kcpstream.selection.neighbours import NEIGHBOUR_SAMPLES


def _sawtooth(flip: bool = True, seed: int = 0, cycles: int = 300) -> np.ndarray:
    # a ramp up and a drop, then a ramp down and a rise: the same values and the
    # same distribution over cyclic shifts of every template's projection, so
    # only the canonical part tells the two apart
    rng = np.random.default_rng(seed)
    t = np.arange(48)
    saw = np.clip((t - 8) / 24, 0, 1) * (t < 32)
    after = saw[::-1] if flip else saw
    x = np.concatenate([np.tile(saw, cycles // 2), np.tile(after, cycles - cycles // 2)])
    return x + 0.3 * rng.normal(size=x.size)


def _level_step(seed: int) -> np.ndarray:
    # a cycle whose level steps up: the invariant map's marginal part sees it
    rng = np.random.default_rng(seed)
    t = np.arange(20_000)
    x = np.sin(2 * np.pi * t / 50) + 0.5 * rng.normal(size=t.size)
    x[12_000:] += 0.8
    return x


def _jittered(seed: int, n: int = 20_000, jitter: float = 0.05) -> np.ndarray:
    # a 50-sample cycle whose phase is a random walk: stationary, no change
    rng = np.random.default_rng(seed)
    phase = np.cumsum(2 * np.pi / 50 * (1 + jitter * rng.standard_normal(n)))
    return np.sin(phase) + 0.3 * rng.standard_normal(n)


def _drifting(seed: int, n: int = 30_000) -> np.ndarray:
    # a cycle on a drift of its level (one unit over the series), AR(0.6) noise
    rng = np.random.default_rng(seed)
    e = rng.normal(size=n) * 0.5
    for i in range(1, n):
        e[i] += 0.6 * e[i - 1]
    t = np.arange(n)
    return 2 * np.sin(2 * np.pi * t / 24.3) + t / n + e


def _share(x) -> float:
    """Each part's level: a third where the series is short enough for the
    nearest neighbours' part too, else half."""
    return 0.01 / 3 if x.size <= NEIGHBOUR_SAMPLES else 0.01 / 2


def _half(x, res) -> dict:
    """Each shape part alone, at its share of the level, on the windows ``res`` used."""
    window, period = res.params["window"], res.params["period"]
    cycles = round(window / period)
    canonical = Temporal(window=window, shape="canonical", cycles=cycles, level=False)
    return {
        "invariant": kcpstream.segment(x, features=Temporal(window=window), alpha=_share(x)),
        "canonical": kcpstream.segment(x, features=canonical, alpha=_share(x)),
    }


def test_the_default_tries_both_shape_parts_and_says_which_answered():
    x = _sawtooth()
    res = kcpstream.segment(x)
    assert res.changepoints.tolist() == [7200]
    assert res.params["shape"] == "canonical" and res.params["window"] == 48
    assert res.windowing.endswith(", canonical shapes") and "canonical shapes" in repr(res)
    # both maps featurized the windows once each
    assert res.diagnostics.passes == 2.0
    assert "shape='canonical'" in res.to_dataframe().attrs["features"]
    # the invariant map alone sees no change here
    assert _half(x, res)["invariant"].n_changepoints == 0


@pytest.mark.parametrize(
    "make",
    [
        _sawtooth,
        lambda: _sawtooth(seed=1),
        lambda: _level_step(1),
        lambda: _level_step(2),
        lambda: _sawtooth(cycles=800),  # longer than the neighbours' test takes
    ],
)
def test_the_answer_is_the_map_with_more_change_points_each_at_its_share_of_the_level(make):
    x = make()
    res = kcpstream.segment(x)
    assert res.selection.alpha == pytest.approx(_share(x))
    half = _half(x, res)
    twin = half["canonical"].n_changepoints > half["invariant"].n_changepoints
    assert res.params["shape"] == ("canonical" if twin else "invariant")
    chosen = half[res.params["shape"]]  # each map is fitted as an explicit one would be
    np.testing.assert_array_equal(res.changepoints, chosen.changepoints)
    np.testing.assert_array_equal(res.pvalues, chosen.pvalues)
    # a level was tested at its share of the default's: a p-value above it is never kept
    assert (np.asarray(res.pvalues) <= _share(x)).all()


@pytest.mark.parametrize("seed", range(3))
def test_a_steady_cycle_gets_no_change_point_from_either_map(seed):
    res = kcpstream.segment(_sawtooth(flip=False, seed=seed))
    assert res.n_changepoints == 0 and res.params["shape"] == "invariant"


@pytest.mark.parametrize("seed", range(3))
def test_a_wandering_phase_is_no_change(seed):
    # a waveform that moves through the windows is the same waveform at another
    # phase: the canonical part turns it back
    res = kcpstream.segment(_jittered(seed))
    assert res.params["window"] and res.n_changepoints == 0


@pytest.mark.parametrize("seed", range(3))
def test_a_cycle_on_a_drifting_level_gets_no_change_point(seed):
    # (the canonical part does not see the level: tests/test_temporal.py)
    res = kcpstream.segment(_drifting(seed))
    assert res.params["window"] and res.n_changepoints == 0


def test_a_cycle_with_gaps_keeps_the_invariant_shapes():
    x = _sawtooth(flip=False)
    x[5000:5010] = np.nan
    res = kcpstream.segment(x)
    assert res.n_changepoints == 0 and "shape" not in res.params
    assert res.diagnostics.passes == 1.0


def test_a_number_of_change_points_or_a_penalty_keeps_the_invariant_map():
    x = _sawtooth()
    for kw in ({"n_bkps": 1}, {"pen": 50.0}):
        res = kcpstream.segment(x, **kw)
        assert "shape" not in res.params and res.diagnostics.passes == 1.0


def test_a_batch_of_cycles_gives_each_series_its_single_answer():
    xs = np.stack([_sawtooth(), _sawtooth(flip=False, seed=1), _level_step(3)[:14_400]])
    da = xr.DataArray(xs, dims=("sensor", "time"))
    batch = kcpstream.segment(da, dim="time", batch_dims="sensor")
    for (_, got), x in zip(batch, xs, strict=True):
        alone = kcpstream.segment(x)
        np.testing.assert_array_equal(got.changepoints, alone.changepoints)
        np.testing.assert_array_equal(got.pvalues, alone.pvalues)
        assert got.params["shape"] == alone.params["shape"]


def test_a_segmenter_reselects_with_both_maps():
    x = _sawtooth()
    seg = kcpstream.Segmenter().fit(x)
    again = seg.predict()
    alone = kcpstream.segment(x)
    np.testing.assert_array_equal(again.changepoints, alone.changepoints)
    assert again.params["shape"] == "canonical"
    fixed = seg.predict(n_bkps=1)
    np.testing.assert_array_equal(fixed.changepoints, kcpstream.segment(x, n_bkps=1).changepoints)
    assert "shape" not in fixed.params


def test_a_checkpointed_cycle_gives_the_answer_of_a_fresh_call(tmp_path):
    x = _sawtooth().astype("f4")
    path = str(tmp_path / "x.zarr")
    xr.Dataset({"x": ("time", x)}).to_zarr(path)
    first = kcpstream.segment(path, variable="x", checkpoint=tmp_path / "ck")
    second = kcpstream.segment(path, variable="x", checkpoint=tmp_path / "ck")
    fresh = kcpstream.segment(path, variable="x")
    assert first.diagnostics.checkpoint == "written" and second.diagnostics.checkpoint == "loaded"
    for res in (first, second):
        np.testing.assert_array_equal(res.changepoints, fresh.changepoints)
        assert res.params["shape"] == fresh.params["shape"] == "canonical"
    assert second.diagnostics.reads.samples_featurized == 0
    # the nearest neighbours' test read the short series' samples once more
    assert second.diagnostics.reads.samples_read_again == x.size


def test_a_checkpointed_cycle_that_grows_gives_the_answer_of_a_fresh_call(tmp_path):
    x = _sawtooth(cycles=400).astype("f4")
    n = 300 * 48
    path = str(tmp_path / "x.zarr")
    z = zarr.create_array(path, shape=(n,), chunks=(4096,), dtype="f4")
    z[:] = x[:n]
    first = kcpstream.segment(path, checkpoint=tmp_path / "ck")
    z.resize((x.size,))
    z[n:] = x[n:]
    grown = kcpstream.segment(path, checkpoint=tmp_path / "ck")
    fresh = kcpstream.segment(path)
    assert first.params["shape"] == grown.params["shape"] == fresh.params["shape"] == "canonical"
    assert grown.n_samples == x.size and grown.diagnostics.checkpoint in ("written", "updated")
    np.testing.assert_array_equal(grown.changepoints, fresh.changepoints)
    np.testing.assert_array_equal(grown.pvalues, fresh.pvalues)


@pytest.mark.parametrize("n, gap", [(100_000, 90_003), (300_000, 280_003)])
def test_a_gap_the_data_pass_finds_in_windows_is_mapped_on_the_samples(n, gap):
    # NaN past the fit sample's windows: found by the data pass of the windows,
    # whose map counts windows; the series is redone from its own samples
    rng = np.random.default_rng(3)
    t = np.arange(n)
    x = np.sin(2 * np.pi * t / 50) + 0.5 * rng.normal(size=n)
    x[60_000:] += 1.0
    x[gap : gap + 17] = np.nan
    res = kcpstream.segment(x)
    assert res.n_samples == n and res.params["window"]
    assert res.changepoints.tolist() == kcpstream.segment(x[np.isfinite(x)]).changepoints.tolist()
    assert abs(int(res.changepoints[0]) - 60_000) <= res.params["window"]


def test_windows_all_alike_have_no_change_point():
    # the fit sample holds one value: the whole series is looked at before the
    # series is called constant (its windows are all there is, fewer than 2**16)
    cycle = np.sin(2 * np.pi * np.arange(50) / 50)
    for kw in ({}, {"pen": 5.0}):
        assert kcpstream.segment(np.tile(cycle, 2000), window=50, **kw).n_changepoints == 0


def test_no_features_argument_finds_the_second_maps_fit(tmp_path):
    x = _sawtooth().astype("f4")
    path = str(tmp_path / "x.zarr")
    xr.Dataset({"x": ("time", x)}).to_zarr(path)
    kcpstream.segment(path, variable="x", checkpoint=tmp_path / "ck")
    for ck in (None, tmp_path / "ck"):
        with pytest.raises(kcpstream.InputError):
            kcpstream.segment(path, variable="x", features="auto:canonical", checkpoint=ck)
