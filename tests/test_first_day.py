"""What a person sees first: results that count right, JSON with p-values,
messages that name things and blame the true cause."""

from __future__ import annotations

import json
import pickle

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr
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
    assert "computing them from the input's dask graph" in str(info.value)
    assert "a chunk under them fails to read" not in str(info.value)


def test_messages_name_an_unnamed_dataarray_and_a_datasets_variables():
    bad = xr.DataArray(np.zeros(1_000, dtype=complex), dims="time")
    with pytest.raises(InputError, match="an unnamed DataArray") as info:
        kcpstream.segment(bad)
    assert "None" not in str(info.value)
    x = _two_regimes()
    x[7] = np.nan
    ds = xr.Dataset({"temperature": ("time", x)})
    with pytest.raises(InputError, match=r"Dataset \(variable 'temperature'\) has 1 missing"):
        kcpstream.segment(ds, skipna=False)


def _plots():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def test_a_result_of_a_store_draws_itself_and_names_its_channels(tmp_path):
    plt = _plots()
    x = _two_regimes()
    store = str(tmp_path / "s.zarr")
    z = zarr.create_array(store, shape=x.shape, chunks=(1_000,), dtype="f4")
    z[:] = x
    res = kcpstream.segment(store)
    ax = res.plot()  # the store is opened again
    assert "1 change-point (" in ax.get_title()
    ax = res.plot(store)
    plt.close("all")
    rng = np.random.default_rng(2)
    ds = xr.Dataset(
        {
            "pressure": ("time", (1013 + x).astype("f4")),
            "temperature": ("time", rng.normal(size=len(x)).astype("f4")),
        }
    )
    ax = kcpstream.segment(ds).plot(ds)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["pressure", "temperature"]
    plt.close("all")
    with pytest.raises(TypeError, match="give the data to draw"):
        kcpstream.segment(x, n_bkps=1).plot()


def _drawn(ax) -> tuple[float, float]:
    """The lowest and highest value of the envelopes drawn on ``ax``."""
    ys = np.concatenate([c.get_paths()[0].vertices[:, 1] for c in ax.collections])
    return float(ys.min()), float(ys.max())


def test_a_result_draws_the_input_it_was_made_from(tmp_path):
    plt = _plots()
    x = _two_regimes().astype("f4")
    span = (float(x.min()), float(x.max()))
    store = str(tmp_path / "s.zarr")
    xr.Dataset({"v": ("time", x), "w": ("time", 10 + x)}).to_zarr(store)
    z = zarr.open_array(store, path="v")
    inputs = {
        "xarray (lazy)": xr.open_zarr(store).v,
        "zarr array": z,
        "dask array": da.from_zarr(z),
    }
    for name, data in inputs.items():
        res = kcpstream.segment(data)
        assert _drawn(res.plot()) == pytest.approx(span), name
        assert "best at" in res.plot_gain().get_title(), name
        plt.close("all")
    # a group's variables together, by path: read again with the same variables
    res = kcpstream.segment(store, variables=["w", "v"])
    ax = res.plot()
    # each channel in a band of its own, over its own range, named (w above v)
    bands = [c.get_paths()[0].vertices[:, 1] for c in ax.collections]
    ends = [float(v) for b in bands for v in (b.min(), b.max())]
    assert ends == pytest.approx([1.0, 1.9, 0.0, 0.9])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["w", "v"]
    # read from JSON or unpickled: the store is opened again by its path, as the call did
    for copied in (
        kcpstream.Segmentation.from_json(res.to_json()),
        pickle.loads(pickle.dumps(res)),
    ):
        ax = copied.plot()
        assert [t.get_text() for t in ax.get_yticklabels()] == ["w", "v"]
        assert "best at" in copied.plot_gain().get_title()
    plt.close("all")
    # a Segmenter's results and each series of a batch draw their own
    fitted = kcpstream.Segmenter().fit(inputs["xarray (lazy)"])
    assert _drawn(fitted.predict(n_bkps=1).plot()) == pytest.approx(span)
    batch = xr.DataArray(np.stack([x, 3 * x]), dims=("sensor", "time"))
    for k, res in enumerate(kcpstream.segment(batch, batch_dims="sensor").results):
        assert _drawn(res.plot()) == pytest.approx((span[0] * (1 + 2 * k), span[1] * (1 + 2 * k)))
    plt.close("all")
    # what a result does not keep: an in-memory numpy array, anything after a pickle
    with pytest.raises(TypeError, match=r"res.plot\(x\).*in-memory numpy array"):
        kcpstream.segment(x).plot()
    with pytest.raises(TypeError, match=r"res.plot_gain\(x\)"):
        kcpstream.segment(x).plot_gain()
    copied = pickle.loads(pickle.dumps(kcpstream.segment(inputs["dask array"])))
    with pytest.raises(TypeError, match="unpickled"):
        copied.plot()


def test_the_gain_plot_says_the_position_the_result_reports():
    plt = _plots()
    rng = np.random.default_rng(4)
    x = rng.normal(size=200_000)
    x[123_457:] += 1.0
    kw = {"block_size": 64, "min_size": 100}
    first = kcpstream.segment(x, n_bkps=1, d_max=2, **kw)  # the best split of the whole
    ax = kcpstream.segment(x, n_bkps=0, **kw).plot_gain(x)
    assert f"best at {int(first.changepoints[0])}" in ax.get_title()
    plt.close("all")


def test_a_series_searched_in_memory_reports_its_grid_of_samples():
    res = kcpstream.segment(_two_regimes(), n_bkps=1)
    assert res.diagnostics.block_size == res.params["block_size"] == 1


def test_a_batch_shows_every_series_with_times_and_p_values(tmp_path):
    rng = np.random.default_rng(0)
    data = rng.normal(size=(3_000, 12))
    data[1_500:, ::2] += 3
    time = np.arange(3_000).astype("datetime64[m]")
    da_ = xr.DataArray(data, dims=("time", "sensor"), coords={"time": time})
    res = kcpstream.segment(da_, batch_dims="sensor")
    text = repr(res)
    assert "(p=" in text and "to_dataframe() lists all" in text
    da_.to_dataset(name="v").to_zarr(tmp_path / "b.zarr")
    out = CliRunner().invoke(main, ["segment", str(tmp_path / "b.zarr"), "--batch-dim", "sensor"])
    assert out.exit_code == 0, out.output
    assert out.output.count("sensor=") == 12 and "p=" in out.output


def test_min_duration_does_not_go_below_the_default_floor():
    time = np.arange(400).astype("datetime64[D]")
    x = xr.DataArray(_two_regimes(400), dims="time", coords={"time": time})
    res = kcpstream.segment(x, min_duration="1D", n_bkps=1)
    assert res.params["min_size"] >= 10


def test_p_values_beyond_float64_print_as_a_bound_not_as_zero(tmp_path):
    x = np.r_[np.zeros(5_000), np.full(5_000, 10.0)] + np.random.default_rng(0).normal(size=10_000)
    res = kcpstream.segment(x)
    assert res.pvalues.tolist() == [0.0]  # underflows: the gain is far beyond the noise
    ds = xr.Dataset({"v": ("time", x.astype("f4"))})
    ds.to_zarr(tmp_path / "s.zarr")
    out = CliRunner().invoke(main, ["segment", str(tmp_path / "s.zarr")])
    assert out.exit_code == 0, out.output
    assert "p=<1e-300" in out.output and "p=0" not in out.output
    batch = kcpstream.segment(xr.DataArray(np.c_[x, x], dims=("time", "s")), batch_dims="s")
    assert "(p=<1e-300)" in repr(batch)


def test_the_segment_table_says_which_ends_are_exclusive():
    time = np.arange(4_000).astype("datetime64[s]")
    x = xr.DataArray(_two_regimes(), dims="time", coords={"time": time})
    table = kcpstream.segment(x, n_bkps=1).to_dataframe()
    assert list(table.columns[:2]) == ["start", "end"]  # end: exclusive, the next start
    assert table["end"].iloc[0] == table["start"].iloc[1] == 2_000
    assert "end_time" not in table  # the last sample's time: inclusive, so named
    assert (table["last_time"].to_numpy() == time[table["end"].to_numpy() - 1]).all()


def test_a_folder_that_is_no_store_is_named_as_such(tmp_path):
    (tmp_path / "notes.txt").write_text("not a store")
    with pytest.raises(InputError, match="holds no zarr array or group") as err:
        kcpstream.segment(str(tmp_path), variable="pressure")
    assert "Error" not in str(err.value) and "StorePath" not in str(err.value)


def test_the_printed_result_names_its_channels_and_what_a_checkpoint_held(tmp_path):
    x = np.random.default_rng(0).standard_normal((20_000, 3))
    x[10_000:, 1] += 1
    assert " in 20000 samples of 3 channels [" in repr(kcpstream.segment(x))
    z = zarr.create_array(str(tmp_path / "s.zarr"), shape=(20_000,), chunks=(5_000,), dtype="f8")
    z[:] = x[:, 1]
    first = kcpstream.segment(str(tmp_path / "s.zarr"), checkpoint=tmp_path / "ck")
    again = kcpstream.segment(str(tmp_path / "s.zarr"), checkpoint=tmp_path / "ck")
    assert repr(first).endswith("; checkpoint written>") and " channels" not in repr(first)
    assert repr(again).endswith("; checkpoint loaded>")


def test_the_command_line_gives_its_own_spelling_of_the_advice(tmp_path):
    x = np.random.default_rng(0).standard_normal(8_000)
    store = str(tmp_path / "s.zarr")
    z = zarr.create_array(store, shape=x.shape, chunks=(1_000,), dtype="f8")
    z[:] = x
    z[3_000:4_000] = z.fill_value  # a whole chunk at the fill value: not written
    (tmp_path / "s.zarr" / "c" / "3").unlink(missing_ok=True)
    res = CliRunner().invoke(main, ["segment", store])
    assert res.exit_code == 1 and "--missing skip" in res.output, res.output
    assert "missing='skip'" not in res.output
    # the Python API keeps its own spelling
    with pytest.raises(InputError, match="missing='skip'"):
        kcpstream.segment(store)


def test_each_python_spelling_of_advice_has_a_command_line_one():
    from kcpstream.jobs.cli import cli_spelling

    said = (
        "too short (needs 16 blocks); give n_bkps or pen. no split; use a smaller min_size "
        "or a larger d_max; raise d_max; or skipna=False; missing='fill' reads the fill value"
    )
    assert cli_spelling(said) == (
        "too short (needs 16 blocks); give --n-bkps or --pen. no split; use a smaller "
        "--min-size or a larger --d-max; raise --d-max; or --no-skipna; --missing fill reads "
        "the fill value"
    )
