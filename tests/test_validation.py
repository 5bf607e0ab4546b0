"""Bad input gets a clear error naming the problem and the fix, never a wrong answer."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import zarr

import kcpstream
from kcpstream import RFF, InputError, Linear, NotEnoughSplitsError, datasets


@pytest.fixture
def x():
    return np.random.default_rng(0).normal(size=5_000)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", [17, 2_500, 4_999])
def test_nonfinite_names_the_first_bad_index(x, bad, where):
    x = x.copy()
    x[where] = bad
    x[where + 1 :: 97] = np.nan  # later bad values must not be reported instead
    # (a NaN is a gap unless skipna=False refuses it; an infinity is always refused)
    match = rf"first at index {where}\b" if np.isnan(bad) else rf"infinity at index {where}\b"
    with pytest.raises(InputError, match=match):
        kcpstream.segment(da.from_array(x, chunks=700), n_bkps=1, skipna=False)


def test_nonfinite_outside_the_fit_sample_in_a_zarr_store(tmp_path, x):
    x = x.copy()
    x[1_234] = np.nan  # between the fit windows: found by the data pass
    datasets.write_zarr(x, tmp_path / "s.zarr", chunks=500)
    with pytest.raises(InputError, match=r"index 1234\b.*fill"):
        kcpstream.segment(tmp_path / "s.zarr", n_bkps=1, skipna=False)


def test_nonfinite_in_one_channel(x):
    x2 = np.stack([x, x], axis=1)
    x2[321, 1] = np.nan
    with pytest.raises(InputError, match=r"1 missing sample \(NaN\).*index 321\b"):
        kcpstream.segment(x2, n_bkps=1, skipna=False)


def test_too_short_for_min_size():
    with pytest.raises(InputError, match=r"fewer than 2\*min_size=10.*smaller min_size"):
        kcpstream.segment(np.arange(9.0), n_bkps=1, min_size=5)
    # one sample: no min_size makes room for a split (it was advised, as "1 samples")
    with pytest.raises(InputError, match="has 1 sample: .*give a longer signal") as err:
        kcpstream.segment(np.array([1.0]))
    assert "min_size" not in str(err.value)


def test_more_changepoints_than_can_fit(x):
    with pytest.raises(InputError, match=r"n_bkps=500 .*at most 499"):
        kcpstream.segment(x, n_bkps=500, min_size=10)


def test_binseg_running_out_of_splits():
    x = np.r_[np.zeros(5), np.ones(5)]  # splits at 5, leaving two segments too short to split
    with pytest.raises(NotEnoughSplitsError, match=r"only 1 change-points.*n_bkps<=1"):
        kcpstream.segment(x, features=Linear(), n_bkps=2, min_size=3)


@pytest.mark.parametrize("shape", [(10, 2, 2), ()])
def test_wrong_number_of_dimensions(shape):
    with pytest.raises(InputError, match=r"shape \(n,\) or \(n, d\)"):
        kcpstream.segment(np.zeros(shape), n_bkps=1)


@pytest.mark.parametrize(
    "arr, match",
    [
        (np.array(["a", "b"] * 10), "dtype <U1"),
        (np.zeros(20, dtype=complex), "complex128"),
        (np.array([object()] * 20), "object"),
    ],
)
def test_non_numeric_dtype(arr, match):
    with pytest.raises(InputError, match=match):
        kcpstream.segment(arr, n_bkps=1)


def test_constant_signal_median_bandwidth_is_zero():
    with pytest.raises(InputError, match=r"are equal.*constant signal.*bandwidth=<float>"):
        kcpstream.segment(np.full(1_000, 3.0), n_bkps=1)


@pytest.mark.parametrize("shape", [(10,), (1_000,), (300, 2)])
def test_a_constant_series_read_whole_has_no_change_points(shape):
    # the fit read every sample and found one value: no scale to fit, and no
    # change to find; a rule that may choose none says so
    x = np.full(shape, 3.0)
    for kwargs in ({}, {"pen": 1.0}, {"method": "dynp"}, {"features": RFF(8, bandwidth=1.0)}):
        res = kcpstream.segment(x, **kwargs)
        assert res.n_changepoints == 0 and res.n_samples == shape[0]
    # a given number of change-points cannot be had
    with pytest.raises(InputError, match="constant signal has nothing to segment"):
        kcpstream.segment(x, n_bkps=1)


def test_a_long_series_whose_fit_sample_holds_one_value_is_refused():
    # past the wider fit sample the series may vary (its scale unknown): an error
    x = np.full(100_000, 3.0)
    x[-10:] = 4.0
    with pytest.raises(InputError, match="all 65536 samples of the fit sample are equal"):
        kcpstream.segment(x)


@pytest.mark.parametrize("fmap", [Linear(), RFF(8, bandwidth=1.0)], ids=repr)
def test_constant_signal_with_any_map(fmap):
    with pytest.raises(InputError, match="constant"):
        kcpstream.segment(np.full(1_000, 3.0), features=fmap, n_bkps=1)


def test_empty():
    with pytest.raises(InputError, match="empty"):
        kcpstream.segment(np.zeros((0, 2)), n_bkps=1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_bkps": 1, "pen": 1.0}, "not both"),
        ({"pen": "maybe"}, "'auto' or 'slope'"),
        ({"method": "greedy"}, "method must be 'binseg' or 'dynp'"),
        ({"d_max": 0}, "d_max must be an integer >= 1"),
        ({"d_max": 3, "pen": "slope"}, "at least 4 segmentations"),
        ({"d_max": 3, "n_bkps": 5}, r"d_max=3 segments cannot hold n_bkps=5 .*d_max >= 6"),
        ({"alpha": 0.0}, "alpha must be a number in"),
        ({"alpha": 1.5}, "alpha must be a number in"),
        ({"pen": -1.0}, ">= 0"),
        ({"pen": float("nan")}, "finite"),
        ({"n_bkps": -1}, "n_bkps must be an integer >= 0"),
        ({"n_bkps": 1.5}, "n_bkps must be an integer"),
        ({"n_bkps": 1, "min_size": 0}, "min_size must be an integer >= 1"),
        ({"n_bkps": 1, "block_size": 0}, "block_size must be an integer >= 1"),
        ({"n_bkps": 1, "block_size": 2**25}, "smaller block_size"),
        (
            {"n_bkps": 1, "features": "fourier"},
            "unknown feature map 'fourier'; known maps: brownian, linear",
        ),
        ({"n_bkps": 1, "features": "rff:x"}, "must be an integer"),
        ({"n_bkps": 1, "features": 3}, "spec string"),
        ({"n_bkps": 1, "storage_options": "anon"}, "storage_options must be a dict"),
        # the same line with every map (the default's fit took int("a"))
        ({"n_bkps": 1, "seed": "a"}, "seed must be a non-negative integer"),
        ({"n_bkps": 1, "seed": -1}, "seed must be a non-negative integer"),
        ({"n_bkps": 1, "seed": 2.5, "features": "rff"}, "seed must be a non-negative integer"),
    ],
)
def test_bad_parameters(x, kwargs, match):
    with pytest.raises(InputError, match=match):
        kcpstream.segment(x, **kwargs)


@pytest.mark.parametrize("features", ["auto", "rff", "orf"])
def test_a_numpy_integer_seed_is_a_seed(x, features):
    # (a fit record is JSON: a numpy integer failed to encode with "rff")
    res = kcpstream.segment(x, n_bkps=1, seed=np.int64(3), features=features)
    same = kcpstream.segment(x, n_bkps=1, seed=3, features=features)
    assert res.changepoints.tolist() == same.changepoints.tolist()
    assert res.to_dict()["features"] == same.to_dict()["features"]


def test_rff_needs_an_even_number_of_features():
    with pytest.raises(ValueError, match="even n_features"):
        RFF(63)


def test_fitted_map_of_the_wrong_width(x):
    fmap = RFF(8).fit(np.random.default_rng(1).normal(size=(100, 3)))
    with pytest.raises(InputError, match="expects d=3 .* has d=1"):
        kcpstream.segment(x, features=fmap, n_bkps=1)


def test_a_dim_or_storage_options_that_name_nothing_are_refused(tmp_path, x):
    # (they were ignored: a dim naming no dimension of the input looked checked)
    dask_array = pytest.importorskip("dask.array")
    for data, what in ((x, "an array"), (dask_array.from_array(x), "a dask array")):
        with pytest.raises(InputError, match=f"dim='time' names .*; {what} names none"):
            kcpstream.segment(data, dim="time", n_bkps=1)
    zarr.create_array(str(tmp_path / "plain.zarr"), shape=x.shape, dtype=x.dtype)[:] = x
    for data in (str(tmp_path / "plain.zarr"), zarr.open_array(tmp_path / "plain.zarr")):
        with pytest.raises(InputError, match="dim='foo' names .*omit dim"):
            kcpstream.segment(data, dim="foo", n_bkps=1)
    named = tmp_path / "named.zarr"
    datasets.write_zarr(x, named)
    with pytest.raises(InputError, match="first dimension is 'time', not dim='foo'"):
        kcpstream.segment(str(named), dim="foo", n_bkps=1)
    assert kcpstream.segment(str(named), dim="time", n_bkps=1).n_changepoints == 1
    with pytest.raises(InputError, match="storage_options applies to a store given by its URL"):
        kcpstream.segment(x, storage_options={"anon": True}, n_bkps=1)


def test_zarr_path_errors(tmp_path, x):
    with pytest.raises(InputError, match="no zarr store at"):
        kcpstream.segment(tmp_path / "missing.zarr", n_bkps=1)
    # arrays without dimension names: nothing says they are variables along time
    for name in "ab":
        zarr.create_array(str(tmp_path / "s.zarr"), name=name, shape=x.shape, dtype=x.dtype)
    with pytest.raises(InputError, match=r"holds 2 arrays \(a, b\).*variable=<name>"):
        kcpstream.segment(tmp_path / "s.zarr", n_bkps=1)
    with pytest.raises(InputError, match="no array 'c'; available arrays: a, b"):
        kcpstream.segment(tmp_path / "s.zarr", variable="c", n_bkps=1)
    # variables along time (dimension names) are a group's channels, as in xarray
    datasets.write_zarr(x, tmp_path / "t.zarr", name="a")
    datasets.write_zarr(x, tmp_path / "t.zarr", name="b")
    both = kcpstream.segment(tmp_path / "t.zarr", n_bkps=1)
    assert both.params["source"]["shape"][1] == 2
