"""Group-invariant window features see a change of frequency that pointwise kernels cannot."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

import kcpstream
from kcpstream.features import InvariantWindow


def _frequency_change(n_windows=400, window=64, change=230, seed=0):
    """A sine with 2 then 5 cycles per window, a random phase in every window, and the
    same amplitude: every sample has the arcsine law before and after the change."""
    rng = np.random.default_rng(seed)
    t = np.arange(window)
    rows = [
        np.sin(2 * np.pi * (2 if i < change else 5) * t / window + rng.uniform(0, 2 * np.pi))
        for i in range(n_windows)
    ]
    x = np.concatenate(rows) + 0.1 * rng.normal(size=n_windows * window)
    return x, change * window


def test_window_map_finds_the_frequency_change_and_rff_does_not():
    x, true = _frequency_change()
    res = kcpstream.segment(x, features=InvariantWindow(32, window=64, n_bins=4))
    assert res.changepoints.tolist() == [true]  # chosen automatically, at window resolution
    assert res.n_samples == len(x) and res.changepoints[0] % 64 == 0
    pointwise = kcpstream.segment(x, features=kcpstream.RFF(64))
    assert true not in pointwise.changepoints.tolist()
    forced = kcpstream.segment(x, features=kcpstream.RFF(64), n_bkps=1)
    assert abs(int(forced.changepoints[0]) - true) > 64 * 10


def test_window_results_are_in_samples_with_times_and_a_remainder():
    x, true = _frequency_change(n_windows=300, change=120)
    x = np.r_[x, x[:37]]  # 37 samples after the last whole window
    arr = xr.DataArray(
        x, dims="time", coords={"time": pd.date_range("2026-01-01", periods=len(x), freq="ms")}
    )
    res = kcpstream.segment(arr, features=InvariantWindow(32, window=64, n_bins=4), n_bkps=1)
    assert res.changepoints.tolist() == [true]
    assert res.changepoint_times[0] == arr["time"].values[true]
    df = res.to_dataframe()
    assert df["end"].iloc[-1] == len(x) and df["length"].sum() == len(x)
    # chunking does not matter
    import dask.array as da

    again = kcpstream.segment(
        da.from_array(x, chunks=1000), features=InvariantWindow(32, window=64, n_bins=4), n_bkps=1
    )
    assert again.changepoints.tolist() == res.changepoints.tolist()


def test_gain_curve_of_a_window_map():
    import matplotlib

    matplotlib.use("Agg")
    x, true = _frequency_change(n_windows=200, change=90)
    fmap = InvariantWindow(32, window=64, n_bins=4)
    whole = kcpstream.segment(x, features=fmap, n_bkps=1)
    assert whole.changepoints.tolist() == [true]
    one_segment = kcpstream.segment(x, features=whole.features, pen=1e9)  # no change-point
    assert one_segment.n_changepoints == 0
    assert f"best at {true}" in one_segment.plot_gain(x, 0).get_title()


def test_window_features_norm_and_json():
    x, _ = _frequency_change(n_windows=100)
    rows = x.reshape(-1, 64)
    fmap = InvariantWindow(32, window=64, n_bins=4, seed=3).fit(rows)
    z = fmap.transform(rows).astype(np.float64)
    assert ((z**2).sum(axis=1) <= 1.0 + 1e-6).all()  # at most 1 = k(W, W)
    back = kcpstream.FeatureMap.from_json(fmap.to_json())
    assert back == fmap and np.array_equal(back.transform(rows), fmap.transform(rows))


def test_the_windowing_says_whose_window_it_is():
    # (a window map's own length was said to come from window=)
    x = np.random.default_rng(0).standard_normal(5000)
    x[2500:] += 2
    own = kcpstream.segment(x, features="window", n_bkps=1)
    given = kcpstream.segment(x, window=50, n_bkps=1)
    assert own.windowing == "windows of 64 samples (the feature map's)"
    assert given.windowing == "windows of 50 samples (the feature map's)"
    assert kcpstream.segment(x, n_bkps=1).windowing == ""
