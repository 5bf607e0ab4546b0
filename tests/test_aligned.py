"""features="auto" on a cycle: windows segmented with both shape parts, each at half the level."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import kcpstream
from kcpstream.features import Temporal
from kcpstream.features.temporal import SHAPES


def _bumps(change: bool = True, seed: int = 4, cycles: int = 300) -> np.ndarray:
    # a bump in a 48-sample cycle that moves half a cycle on: the marginal law and
    # every cyclic shift of the cycle are the same on both sides
    rng = np.random.default_rng(seed)
    bump = np.exp(-0.5 * ((np.arange(48) - 10) / 2.0) ** 2) * 3
    after = np.roll(bump, 24) if change else bump
    x = np.concatenate([np.tile(bump, cycles // 2), np.tile(after, cycles - cycles // 2)])
    return x + 0.3 * rng.normal(size=x.size)


def _level_step(seed: int) -> np.ndarray:
    # a cycle whose level steps up: the invariant part sees it as well
    rng = np.random.default_rng(seed)
    t = np.arange(20_000)
    x = np.sin(2 * np.pi * t / 50) + 0.5 * rng.normal(size=t.size)
    x[12_000:] += 0.8
    return x


def _explicit(x, shape: str, window: int, alpha: float):
    return kcpstream.segment(x, features=Temporal(window=window, shape=shape), alpha=alpha)


def test_the_default_tries_both_shape_parts_and_says_which_answered():
    res = kcpstream.segment(_bumps())
    assert res.changepoints.tolist() == [7200]
    assert res.params["shape"] == "aligned" and res.params["window"] == 48
    assert res.windowing.endswith(", aligned shapes") and "aligned shapes" in repr(res)
    # both maps featurized the windows once each
    assert res.diagnostics.passes == 2.0
    assert "shape='aligned'" in res.to_dataframe().attrs["features"]


@pytest.mark.parametrize("make", [_bumps, lambda: _level_step(1), lambda: _level_step(2)])
def test_the_answer_is_the_map_with_more_change_points_each_at_half_the_level(make):
    x = make()
    res = kcpstream.segment(x)
    window = res.params["window"]
    half = {shape: _explicit(x, shape, window, 0.005) for shape in SHAPES}
    aligned = half["aligned"].n_changepoints > half["invariant"].n_changepoints
    assert res.params["shape"] == ("aligned" if aligned else "invariant")
    if aligned:  # the aligned map is fitted as an explicit one would be
        np.testing.assert_array_equal(res.changepoints, half["aligned"].changepoints)
        np.testing.assert_array_equal(res.pvalues, half["aligned"].pvalues)
    else:
        assert res.n_changepoints >= half["aligned"].n_changepoints
    # a level was tested at half the default's: a p-value above it is never kept
    assert (np.asarray(res.pvalues) <= 0.005).all()


def test_a_steady_cycle_gets_no_change_point_from_either_map():
    for seed in range(3):
        res = kcpstream.segment(_bumps(change=False, seed=seed))
        assert res.n_changepoints == 0 and res.params["shape"] == "invariant"


def test_a_cycle_with_gaps_keeps_the_invariant_shapes():
    # the valid samples' windows change phase at a gap of 10 samples: the aligned
    # part alone puts a change-point there (checked below), so it is not tried
    x = _bumps(change=False)
    x[5000:5010] = np.nan
    res = kcpstream.segment(x)
    assert res.n_changepoints == 0 and "shape" not in res.params
    assert res.diagnostics.passes == 1.0
    valid = x[np.isfinite(x)]
    assert _explicit(valid, "aligned", 48, 0.005).changepoints.tolist() == [4992]


def test_a_number_of_change_points_or_a_penalty_keeps_the_invariant_map():
    x = _bumps()
    for kw in ({"n_bkps": 1}, {"pen": 50.0}):
        res = kcpstream.segment(x, **kw)
        assert "shape" not in res.params and res.diagnostics.passes == 1.0


def test_a_batch_of_cycles_gives_each_series_its_single_answer():
    xs = np.stack([_bumps(), _bumps(change=False, seed=1), _level_step(3)[:14_400]])
    da = xr.DataArray(xs, dims=("sensor", "time"))
    batch = kcpstream.segment(da, dim="time", batch_dims="sensor")
    for (_, got), x in zip(batch, xs, strict=True):
        alone = kcpstream.segment(x)
        np.testing.assert_array_equal(got.changepoints, alone.changepoints)
        np.testing.assert_array_equal(got.pvalues, alone.pvalues)
        assert got.params["shape"] == alone.params["shape"]


def test_a_segmenter_reselects_with_both_maps():
    x = _bumps()
    seg = kcpstream.Segmenter().fit(x)
    again = seg.predict()
    alone = kcpstream.segment(x)
    np.testing.assert_array_equal(again.changepoints, alone.changepoints)
    assert again.params["shape"] == "aligned"
    fixed = seg.predict(n_bkps=1)
    np.testing.assert_array_equal(fixed.changepoints, kcpstream.segment(x, n_bkps=1).changepoints)
    assert "shape" not in fixed.params


def test_a_checkpointed_cycle_gives_the_answer_of_a_fresh_call(tmp_path):
    x = _bumps().astype("f4")
    path = str(tmp_path / "x.zarr")
    xr.Dataset({"x": ("time", x)}).to_zarr(path)
    first = kcpstream.segment(path, variable="x", checkpoint=tmp_path / "ck")
    second = kcpstream.segment(path, variable="x", checkpoint=tmp_path / "ck")
    fresh = kcpstream.segment(path, variable="x")
    for res in (first, second):
        np.testing.assert_array_equal(res.changepoints, fresh.changepoints)
        assert res.params["shape"] == fresh.params["shape"] == "aligned"
