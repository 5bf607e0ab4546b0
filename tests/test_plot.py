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
