"""What a person sees first: results that count right, JSON with p-values,
messages that name things and blame the true cause."""

from __future__ import annotations

import json

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner

import kcpstream
from kcpstream.errors import InputError
from kcpstream.jobs.cli import main


def _two_regimes(n: int = 4_000) -> np.ndarray:
    x = np.random.default_rng(5).normal(size=n)
    x[n // 2 :] *= 3
    return x


def test_counts_are_singular_and_plural():
    one = kcpstream.segment(_two_regimes(), n_bkps=1)
    assert "1 change-point in" in repr(one)
    none = kcpstream.segment(np.random.default_rng(0).normal(size=2_000))
    assert "0 change-points in" in repr(none)
    two = kcpstream.segment(_two_regimes(), n_bkps=2)
    assert "2 change-points in" in repr(two)


def test_a_numpy_input_has_no_change_point_times():
    res = kcpstream.segment(_two_regimes(), n_bkps=1)
    assert res.changepoint_times is None
    assert "time" not in res.to_xarray().coords


def test_the_cli_json_carries_the_p_values(tmp_path):
    ds = xr.Dataset({"v": ("time", _two_regimes().astype("f4"))})
    ds.to_zarr(tmp_path / "s.zarr")
    out = CliRunner().invoke(main, ["segment", str(tmp_path / "s.zarr"), "--json"])
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output)
    want = kcpstream.segment(str(tmp_path / "s.zarr"), variable="v")
    assert summary["changepoints"] == want.changepoints.tolist() == [2_000]
    assert summary["pvalues"] == want.pvalues.tolist() and summary["pvalues"][0] <= 0.01


def test_a_failing_computation_is_not_called_a_damaged_chunk():
    x = da.from_array(_two_regimes(), chunks=500)

    def broken(block, block_info=None):
        if block_info[0]["chunk-location"][0] == 3:
            raise ValueError("this step of the computation went wrong")
        return block

    with pytest.raises(InputError, match="computing them from the input's dask graph") as info:
        kcpstream.segment(x.map_blocks(broken, dtype=x.dtype), n_bkps=1)
    assert "damaged" not in str(info.value) and "fix the computation" in str(info.value)


def test_a_missing_package_is_named_as_the_fix():
    x = da.from_array(_two_regimes(), chunks=500)

    def needs(block):
        raise ModuleNotFoundError("No module named 'nosuchpkg'", name="nosuchpkg")

    with pytest.raises(InputError, match="install nosuchpkg") as info:
        kcpstream.segment(x.map_blocks(needs, dtype=x.dtype), n_bkps=1)
    assert "damaged" not in str(info.value)


def test_messages_name_an_unnamed_dataarray_and_a_datasets_variables():
    bad = xr.DataArray(np.zeros(1_000, dtype=bool), dims="time")
    with pytest.raises(InputError, match="an unnamed DataArray") as info:
        kcpstream.segment(bad)
    assert "None" not in str(info.value)
    x = _two_regimes()
    x[7] = np.nan
    ds = xr.Dataset({"temperature": ("time", x)})
    with pytest.raises(InputError, match=r"Dataset \(variable 'temperature'\) has 1 missing"):
        kcpstream.segment(ds, skipna=False)
