"""Plots: the envelope is the true per-bin min/max; the figures draw."""

from __future__ import annotations

import dask.array as da
import matplotlib
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import kcpstream
from kcpstream import datasets
from kcpstream.plotdata import envelope

from .reference import segment_gains_reference

matplotlib.use("Agg")


@pytest.mark.parametrize("chunks", [1_000, 333, 50_000])
def test_envelope_is_the_binned_min_and_max(chunks):
    x = np.random.default_rng(0).normal(size=(50_000, 2))
    starts, lo, hi, _ = envelope(da.from_array(x, chunks=(chunks, 2)), max_points=700)
    edges = np.append(starts, 50_000)
    for i in (0, 1, 350, len(starts) - 1):
        part = x[edges[i] : edges[i + 1]]
        np.testing.assert_array_equal(lo[i], part.min(axis=0))
        np.testing.assert_array_equal(hi[i], part.max(axis=0))


def test_plots_draw_with_times():
    sig = datasets.piecewise_constant(20_000, 3, jump=3.0, seed=0)
    arr = xr.DataArray(
        sig.x, dims="time", coords={"time": pd.date_range("2026-01-01", periods=20_000, freq="min")}
    )
    res = kcpstream.segment(arr)
    ax = res.plot(arr, true_changepoints=sig.changepoints)
    assert len(ax.lines) >= 2 * res.n_changepoints  # found and true change-points
    assert res.plot_path().get_xlabel() == "number of segments D"
    assert res.plot_gain(arr, 0).lines


@pytest.mark.parametrize("pen, curves", [("auto", ["cost"]), ("slope", ["cost", "cost + penalty"])])
def test_the_path_plot_draws_a_penalty_only_for_the_rules_that_have_one(pen, curves):
    sig = datasets.piecewise_constant(3_000, 3, jump=3.0, seed=0)
    ax = kcpstream.segment(sig.x, pen=pen).plot_path()
    drawn = [line.get_label() for line in ax.lines if not line.get_label().startswith("chosen")]
    assert drawn == curves


def test_a_series_with_gaps_is_drawn_from_its_valid_samples_with_the_gaps_hatched():
    from kcpstream.plotdata import envelope_gaps, segment_gains

    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(0, 1, 6_000), rng.normal(4, 1, 4_000)]
    x[2_000:3_000] = np.nan  # an outage: ten whole bins of 100
    x[rng.choice(10_000, 50, replace=False)] = np.nan  # dropped samples: no bin lost
    starts, lo, hi, _, missing = envelope_gaps(da.from_array(x, chunks=700), max_points=100)
    edges = np.append(starts, 10_000)
    for i in range(len(starts)):
        part = x[edges[i] : edges[i + 1]]
        assert missing[i] == np.isnan(part).sum()
        if np.isnan(part).all():
            assert np.isnan(lo[i, 0]) and np.isnan(hi[i, 0])
        else:
            assert lo[i, 0] == np.nanmin(part) and hi[i, 0] == np.nanmax(part)
    res = kcpstream.segment(x, n_bkps=1)
    ax = res.plot(x)
    hatched = [p for p in ax.patches if p.get_hatch() == "//"]  # the outage
    shaded = [p for p in ax.patches if p.get_hatch() is None]  # every other segment
    assert hatched and shaded
    # a gap inside a shaded segment shows: drawn above the shading
    assert min(p.zorder for p in hatched) > max(p.zorder for p in shaded)
    # the gain curve of the segments' valid samples, at positions of the input
    positions, gains, _ = segment_gains(res, x, 1, 500)
    start = res.segments[1][0]  # (offsets from the segment's start)
    assert not np.isnan(gains).any()
    assert np.isin(start + positions, np.flatnonzero(~np.isnan(x))).all()


@pytest.mark.parametrize("case", ["pointwise", "gaps", "channels", "windows", "windows with gaps"])
def test_the_gain_curve_is_read_in_pieces_and_equals_the_whole_segment_featurized(
    case, monkeypatch
):
    from kcpstream import plotdata

    rng = np.random.default_rng(7)
    n = 12_000
    x = rng.normal(size=(n, 3 if case == "channels" else 1))
    x[7_000:] += 1.5
    if "gaps" in case:
        x[2_000:2_900] = np.nan
        x[rng.choice(n, 300, replace=False)] = np.nan
    kw = {"window": 50} if "windows" in case else {}
    data = da.from_array(x if x.shape[1] > 1 else x[:, 0], chunks=1_000)
    res = kcpstream.segment(data, n_bkps=0, **kw)  # one segment: the whole series
    want = segment_gains_reference(res, data, 0, 300)
    # pieces that cut chunks, windows and runs of missing samples anywhere
    monkeypatch.setattr(plotdata, "READ_SAMPLES", 777)
    monkeypatch.setattr(plotdata, "SUB_ROWS", 13)
    offsets, gains, _ = plotdata.segment_gains(res, data, 0, 300)
    np.testing.assert_array_equal(offsets, want[0])
    np.testing.assert_array_equal(gains, want[1])  # bit for bit
    # the best split of the whole series is the change-point the search reports
    first = kcpstream.segment(data, n_bkps=1, d_max=2, **kw)
    assert int(offsets[np.argmax(gains)]) == int(first.changepoints[0])


def test_the_gain_curve_of_a_long_segment_holds_a_piece_at_a_time():
    import tracemalloc

    from kcpstream import plotdata

    x = np.random.default_rng(1).normal(size=4_000_000).astype("f4")
    x[3_000_000:] += 0.5
    res = kcpstream.segment(x, n_bkps=0, features="rff:64")
    tracemalloc.start()
    plotdata.segment_gains(res, x, 0, 2000)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # whole, the segment's features alone are 4e6 x 64 float64: 2 GiB
    assert peak < 300 * 2**20, peak
