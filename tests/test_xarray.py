"""xarray inputs and outputs: time coordinates, channels, batch series, the accessor."""

from __future__ import annotations

import json

import dask
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

import kcpstream
from kcpstream import InputError, datasets

from .helpers import on_the_grid


@pytest.fixture(scope="module")
def sensors():
    """Three sensors, each with its own change-points, on a datetime axis."""
    sigs = [datasets.piecewise_constant(4_000, 3, jump=3.0, seed=s) for s in range(3)]
    t = pd.date_range("2026-03-01", periods=4_000, freq="250ms")
    data = np.stack([s.x for s in sigs], axis=1)
    ds = xr.Dataset(
        {"pressure": (("time", "sensor"), data), "temp": (("time", "sensor"), data * 0.5 + 1)},
        coords={"time": t, "sensor": ["s1", "s2", "s3"]},
    )
    return ds, sigs


def test_times_match_the_coordinate(sensors):
    ds, sigs = sensors
    res = kcpstream.segment(ds["pressure"].sel(sensor="s1"), n_bkps=3)
    assert res.changepoints.tolist() == pytest.approx(sigs[0].changepoints.tolist(), abs=5)
    t = ds["time"].values
    np.testing.assert_array_equal(res.changepoint_times, t[res.changepoints])
    assert res.changepoint_times.dtype.kind == "M"
    df = res.to_dataframe()
    assert df["start"].tolist() == [0, *res.changepoints]
    assert (df["start_time"].to_numpy() == t[df["start"]]).all()
    assert (df["last_time"].to_numpy() == t[df["end"] - 1]).all()
    assert df["length"].sum() == 4_000
    assert df["cost"].sum() == pytest.approx(res.cost)
    out = res.to_xarray()
    np.testing.assert_array_equal(out["time"].values, res.changepoint_times)
    np.testing.assert_array_equal(out["index"].values, res.changepoints)
    back = kcpstream.Segmentation.from_json(res.to_json())
    np.testing.assert_array_equal(back.changepoint_times, res.changepoint_times)
    assert back.to_dataframe().equals(df)


def test_numeric_coordinate_and_positions():
    x = datasets.piecewise_constant(1_000, 2, jump=3.0, seed=4).x
    arr = xr.DataArray(x, dims="depth", coords={"depth": np.linspace(10.0, 20.0, 1_000)})
    res = kcpstream.segment(arr, n_bkps=2)
    np.testing.assert_allclose(res.changepoint_times, arr["depth"].values[res.changepoints])
    bare = kcpstream.segment(xr.DataArray(x, dims="t"), n_bkps=2)  # no coordinate: positions
    assert bare.changepoint_times.tolist() == bare.changepoints.tolist()


def test_batch_equals_each_series_alone(sensors):
    ds, _ = sensors
    batch = kcpstream.segment(ds, dim="time", batch_dims="sensor", n_bkps=3)
    assert len(batch) == 3
    for label in ("s1", "s2", "s3"):
        alone = kcpstream.segment(ds.sel(sensor=label), n_bkps=3)
        res = batch[label]
        assert res.changepoints.tolist() == alone.changepoints.tolist()
        assert res.gains.tolist() == alone.gains.tolist()
        assert res.features == alone.features
    table = batch.to_dataframe()
    assert set(table["sensor"]) == {"s1", "s2", "s3"} and len(table) == 3 * 4
    out = batch.to_xarray()
    assert out.sizes["sensor"] == 3 and out.sizes["changepoint"] == 3
    back = kcpstream.BatchSegmentation.from_json(batch.to_json())
    assert back["s2"].changepoints.tolist() == batch["s2"].changepoints.tolist()


def test_batch_with_automatic_counts_pads_the_changepoint_dimension(sensors):
    ds, _ = sensors
    pressure = ds["pressure"].copy()
    pressure[:, 2] = np.random.default_rng(0).normal(size=4_000)  # s3 has no change
    batch = pressure.kcp.segment(batch_dims=["sensor"], pen=200.0)
    counts = [r.n_changepoints for _, r in batch]
    out = batch.to_xarray()
    assert out.sizes["changepoint"] == max(counts)
    assert counts[2] == 0
    assert (out["index"].sel(sensor="s3") == -1).all()


def test_dataset_variables_are_channels(sensors):
    ds, _ = sensors
    one = ds.sel(sensor="s1")
    both = kcpstream.segment(one, n_bkps=3)
    assert both.params["source"]["shape"] == [4_000, 2]
    only = kcpstream.segment(one, variables=["pressure"], n_bkps=3)
    assert only.params["source"]["shape"] == [4_000, 1]
    # a DataArray's other dimensions are channels too
    multi = kcpstream.segment(ds["pressure"], n_bkps=3)
    assert multi.params["source"]["shape"] == [4_000, 3]


def test_accessor(sensors):
    ds, _ = sensors
    a = ds["pressure"].sel(sensor="s2").kcp.segment(n_bkps=3)
    b = kcpstream.segment(ds["pressure"].sel(sensor="s2"), n_bkps=3)
    assert a.changepoints.tolist() == b.changepoints.tolist()


def test_time_axis_errors():
    x = np.arange(10.0)
    with pytest.raises(InputError, match="no dimension 'time'"):
        kcpstream.segment(xr.DataArray(x, dims="t"), dim="time", n_bkps=1)
    with pytest.raises(InputError, match=r"which dimension is time\?.*dim=<name>"):
        kcpstream.segment(xr.DataArray(np.zeros((10, 2)), dims=("a", "b")), n_bkps=1)
    t = pd.to_datetime(
        ["2026-01-01", "2026-01-03", "2026-01-02", *pd.date_range("2026-02-01", periods=7)]
    )
    with pytest.raises(
        InputError, match=r"not strictly increasing \(first at position 2\).*sortby"
    ):
        kcpstream.segment(xr.DataArray(x, dims="time", coords={"time": t}), n_bkps=1)
    with pytest.raises(InputError, match="no variable 'wind'"):
        kcpstream.segment(xr.Dataset({"a": ("time", x)}), variables=["wind"], n_bkps=1)
    with pytest.raises(InputError, match="batch dimension 'sensor'"):
        kcpstream.segment(xr.DataArray(x, dims="time"), batch_dims="sensor", n_bkps=1)
    with pytest.raises(InputError, match="batch_dims applies to xarray input"):
        kcpstream.segment(x, batch_dims="sensor", n_bkps=1)


class _ComputeLog:
    """Records, for every dask.compute, the names of the functions its tasks call."""

    def __init__(self):
        from dask.callbacks import Callback

        self.computes: list[set[str]] = []
        log = self

        class _CB(Callback):
            def _start(self, dsk):
                names = set()
                for task in dsk.values():
                    fn = getattr(task, "func", None)
                    names.add(getattr(fn, "__name__", ""))
                log.computes.append(names)

        self.callback = _CB()


def test_batch_uses_one_data_pass_and_shared_rounds(sensors):
    ds, _ = sensors
    kw = {"n_bkps": 3, "cache_bytes": 0, "block_size": 64}  # the block grid, not in memory
    log = _ComputeLog()
    with log.callback:
        batch = kcpstream.segment(ds["pressure"], batch_dims="sensor", **kw)
    # a chunk per task, or a long chunk read once and featurized in slices
    passes = [c for c in log.computes if c & {"read_block_stats", "slice_block_stats"}]
    assert len(passes) == 1  # every sensor's data pass in one graph
    scans = [c for c in log.computes if "scan_run" in c]
    assert len(scans) <= max(r.diagnostics.rounds for _, r in batch)  # rounds shared
    # besides the fit's reads (one per series) and the one data pass, every compute
    # is a round shared by all the series (with cache_bytes=0 no series keeps its
    # chunk: one chunk beyond the budget per process, so refinement reads again)
    fits = [c for c in log.computes if c == {"read_rows"}]
    assert len(fits) == 3
    assert len(log.computes) == len(fits) + len(passes) + len(scans)


def test_a_batchs_searches_advanced_in_threads_equal_each_series_alone(monkeypatch):
    # each round, a batch's searches take their scans' results in threads (their
    # bounds are compiled and release the GIL): the same change-points, gains,
    # p-values and search work as one after the other, and as each series alone
    from kcpstream.passes import drive
    from kcpstream.tasks import threads

    sigs = [datasets.changing_distribution(6_000, 2, seed=10 + s).x for s in range(6)]
    da = xr.DataArray(np.stack(sigs, axis=1), dims=("time", "sensor"))
    kw = {"block_size": 16, "cache_bytes": 0}  # the block grid and rounds of reads

    def work(r):
        return (r.changepoints.tolist(), r.gains.tolist(), r.pvalues.tolist(),
                r.diagnostics.search)  # fmt: skip

    monkeypatch.setattr(threads, "worker_threads", lambda: 2)
    on_the_grid(monkeypatch)
    threaded = kcpstream.segment(da, batch_dims="sensor", **kw)
    monkeypatch.setattr(drive, "MIN_THREAD_SEARCHES", 10**9)
    sequential = kcpstream.segment(da, batch_dims="sensor", **kw)
    for i in range(6):
        alone = kcpstream.segment(da.isel(sensor=i), **kw)
        assert work(threaded[i]) == work(sequential[i])
        assert work(threaded[i])[:3] == work(alone)[:3]
        assert threaded[i].diagnostics.search.rounds > 1


def test_a_search_whose_pieces_are_held_goes_on_alone_with_the_same_answers(monkeypatch):
    # a batch's series whose samples this process holds are searched each on
    # its own, with no round shared: the answers and each search's work are
    # those of the rounds of every series
    from kcpstream.passes import drive

    sigs = [datasets.changing_distribution(6_000, 2, seed=20 + s).x for s in range(6)]
    da = xr.DataArray(np.stack(sigs, axis=1), dims=("time", "sensor"))
    kw = {"block_size": 16}  # the block grid; the samples are kept by the data pass
    rounds = []
    scan_many = drive.scan_many

    def counting(batches, *args):
        rounds.append(len(batches))
        return scan_many(batches, *args)

    def work(r):
        return (r.changepoints.tolist(), r.gains.tolist(), r.pvalues.tolist(),
                r.diagnostics.search)  # fmt: skip

    monkeypatch.setattr(drive, "scan_many", counting)
    on_the_grid(monkeypatch)
    alone = kcpstream.segment(da, batch_dims="sensor", **kw)
    assert rounds == []  # every piece was held: no round of reads
    assert all(r.diagnostics.search.rounds > 1 for _, r in alone)
    monkeypatch.setattr(drive, "MIN_THREAD_SEARCHES", 10**9)  # rounds, one series after another
    shared = kcpstream.segment(da, batch_dims="sensor", **kw)
    assert len(rounds) > 1
    for i in range(6):
        assert work(alone[i]) == work(shared[i])


def test_small_series_of_a_batch_are_featurized_in_one_graph_and_searched_in_memory(sensors):
    ds, _ = sensors
    log = _ComputeLog()
    with log.callback:
        batch = kcpstream.segment(ds["pressure"], batch_dims="sensor", n_bkps=3)
    assert all(r.diagnostics.in_memory for _, r in batch)
    assert len([c for c in log.computes if "read_dense_stats" in c]) == 1  # one graph
    assert not [
        c for c in log.computes if c & {"read_block_stats", "slice_block_stats", "scan_run"}
    ]
    grid = kcpstream.segment(ds["pressure"], batch_dims="sensor", n_bkps=3, block_size=64)
    for (_, a), (_, b) in zip(batch, grid, strict=True):
        assert a.changepoints.tolist() == b.changepoints.tolist()


@pytest.mark.parametrize("d", [1, 3])
def test_a_written_store_opens_in_xarray_and_segments_the_same(tmp_path, d):
    sig = datasets.piecewise_constant(20_000, 3, d=d, jump=3.0, seed=2)
    datasets.write_zarr(sig.x, tmp_path / "s.zarr", chunks=1_000)
    ds = xr.open_zarr(tmp_path / "s.zarr", consolidated=False)
    assert ds["x"].dims == ("time", "channel")[: sig.x.ndim]
    np.testing.assert_array_equal(ds["x"].values, sig.x)
    # read as stored, and in dask chunks of several zarr chunks
    by_path = kcpstream.segment(str(tmp_path / "s.zarr"), n_bkps=3)
    wider = xr.open_zarr(tmp_path / "s.zarr", consolidated=False, chunks={"time": 4_000})
    for data in (ds["x"], wider["x"]):
        res = kcpstream.segment(data, n_bkps=3)
        assert res.changepoints.tolist() == by_path.changepoints.tolist()
        assert res.gains.tolist() == by_path.gains.tolist()


class _CountingArray:
    """A zarr array behind an array-like that counts its reads."""

    def __init__(self, array) -> None:
        self.array, self.reads = array, 0
        self.shape, self.dtype, self.ndim = array.shape, array.dtype, array.ndim

    def __getitem__(self, key):
        self.reads += 1
        return self.array[key]


def test_a_lazily_opened_variable_is_read_a_run_of_chunks_at_a_time(tmp_path):
    import dask
    import dask.array as da
    import zarr

    from kcpstream.inputs.signal import as_signal

    sig = datasets.changing_distribution(60_000, 4, seed=3)
    datasets.write_zarr(sig.x, tmp_path / "s.zarr", chunks=500)  # 120 chunks
    # the block grid, with a path of 4 splits: fewer refinement runs
    greedy = {"n_bkps": 4, "d_max": 5, "block_size": 64}
    by_path = kcpstream.segment(str(tmp_path / "s.zarr"), **greedy)
    counting = _CountingArray(zarr.open(tmp_path / "s.zarr", mode="r")["x"])
    lazy = da.from_array(counting, chunks=500)
    res = kcpstream.segment(lazy, cache_bytes=0, **greedy)
    assert res.changepoints.tolist() == by_path.changepoints.tolist()
    assert res.gains.tolist() == by_path.gains.tolist()
    d = res.diagnostics
    # one read per data-pass task (runs of 2 chunks), per run under the stretches of
    # 8192 samples the period is estimated on (7 of them here, disjoint, each under at
    # most 10 runs of 1000 samples; the fit sample is cut from them) and per
    # refinement run; not one per chunk
    assert d.n_chunks == 120 and d.pass_tasks == 60
    assert counting.reads < 60 + 7 * 10 + 3 * d.rounds
    ds = xr.open_zarr(tmp_path / "s.zarr", consolidated=False)
    assert type(as_signal(ds["x"]).reader._array).__name__ == "_GetterRows"
    with dask.config.set(scheduler="processes"):  # the graph, sent once
        assert as_signal(ds["x"]).reader._array is None
        res = kcpstream.segment(ds["x"], **greedy)
    assert res.changepoints.tolist() == by_path.changepoints.tolist()


def test_decoded_variables_are_read_decoded(tmp_path):
    # CF encoding (scale and offset, stored as int16): a direct read goes through
    # xarray's decoding, as each chunk's read does
    sig = datasets.changing_distribution(30_000, 3, seed=4)
    x = np.round(sig.x * 100) / 100
    ds = xr.Dataset({"v": (("time",), x)})
    encoding = {
        "v": {"dtype": "int16", "scale_factor": 0.01, "add_offset": 0.5, "_FillValue": -32768}
    }
    encoding["v"]["chunks"] = 700
    ds.to_zarr(tmp_path / "enc.zarr", encoding=encoding, consolidated=False, zarr_format=3)
    lazy = xr.open_zarr(tmp_path / "enc.zarr", consolidated=False)["v"]
    decoded = lazy.values
    np.testing.assert_allclose(decoded, x, atol=1e-9)
    expected = kcpstream.segment(decoded, n_bkps=3, chunks=700)
    res = kcpstream.segment(lazy, n_bkps=3)
    assert res.changepoints.tolist() == expected.changepoints.tolist()
    assert res.gains.tolist() == expected.gains.tolist()


def test_values_left_undecoded_are_refused(tmp_path):
    # opened with mask_and_scale=False (or decode_cf=False), the fill value is a
    # stored number in the data: read as samples it made two change-points
    # around every outage
    x = np.round(datasets.changing_distribution(20_000, 1, seed=2).x * 100) / 100
    x[5_000:6_000] = np.nan
    encoding = {"v": {"dtype": "int16", "scale_factor": 0.01, "_FillValue": -32768}}
    xr.Dataset({"v": (("time",), x)}).to_zarr(tmp_path / "enc.zarr", encoding=encoding)
    for kwargs in ({"mask_and_scale": False}, {"decode_cf": False}):
        raw = xr.open_zarr(tmp_path / "enc.zarr", **kwargs)["v"]
        with pytest.raises(
            InputError, match=r"still to be decoded \(_FillValue=-32768 in.*mask_and"
        ):
            kcpstream.segment(raw)
        with pytest.raises(InputError, match="still to be decoded"):
            kcpstream.segment(raw.to_dataset(), dim="time")
    decoded = kcpstream.segment(xr.open_zarr(tmp_path / "enc.zarr")["v"])
    assert decoded.diagnostics.n_missing == 1_000
    # a fill value of NaN decodes to itself: nothing to refuse
    plain = xr.DataArray(np.nan_to_num(x), dims="time", attrs={"_FillValue": np.nan})
    assert kcpstream.segment(plain, n_bkps=1).n_changepoints == 1


def _timed(freq="10s", n=6_000):
    rng = np.random.default_rng(0)
    x = rng.normal(size=n)
    x[n // 2 :] *= 3
    return xr.DataArray(
        x, dims="time", coords={"time": pd.date_range("2026-01-01", periods=n, freq=freq)}
    )


def test_min_duration_becomes_samples_at_the_sampling_interval():
    da = _timed("10s")
    res = kcpstream.segment(da, min_duration="10min")
    assert res.min_size == 60
    same = kcpstream.segment(da, min_size=60)
    np.testing.assert_array_equal(res.changepoints, same.changepoints)
    assert kcpstream.segment(da, min_duration=pd.Timedelta(minutes=10)).min_size == 60
    # numpy's timedelta64 is an integer type: its unit decides (it was refused as unitless)
    assert kcpstream.segment(da, min_duration=np.timedelta64(10, "m")).min_size == 60
    with pytest.raises(InputError, match="has no unit"):
        kcpstream.segment(da, min_duration=np.timedelta64(10))
    numeric = da.assign_coords(time=np.arange(da.size) * 0.5)  # seconds
    assert kcpstream.segment(numeric, min_duration=30.0).min_size == 60
    # a window map keeps whole windows: 60 samples are 3 windows of 20
    windows = kcpstream.segment(da, min_duration="10min", window=20, n_bkps=1)
    assert windows.min_size == 60 and windows.params["min_size"] == 60
    assert kcpstream.segment(da, min_size=50, window=20, n_bkps=1).min_size == 60


@pytest.mark.parametrize(
    ("data", "kwargs", "match"),
    [
        ("array", {"min_duration": "1h"}, "needs a time coordinate"),
        ("timed", {"min_duration": "soon"}, "is not a duration"),
        ("timed", {"min_duration": "10min", "min_size": 3}, "not both"),
        ("numeric", {"min_duration": "1h"}, "give the duration as a number"),
        # a number on time stamps would be read as nanoseconds
        ("timed", {"min_duration": 60}, "has no unit"),
        ("timed", {"min_duration": "60"}, "has no unit"),
    ],
)
def test_min_duration_errors(data, kwargs, match):
    da = _timed()
    obj = {"array": da.values, "timed": da, "numeric": da.assign_coords(time=np.arange(da.size))}
    with pytest.raises(kcpstream.InputError, match=match):
        kcpstream.segment(obj[data], **kwargs)


def test_min_duration_from_the_cli(tmp_path):
    from click.testing import CliRunner

    from kcpstream.jobs.cli import main

    _timed().to_dataset(name="v").to_zarr(tmp_path / "t.zarr")
    res = CliRunner().invoke(
        main, ["segment", str(tmp_path / "t.zarr"), "--min-duration", "10min", "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["min_size"] == 60


# -- time stamps at any n: read at the change-points, whatever the entry point ------


def _stored(tmp_path, scale=False, zarr_format=3):
    da = _timed("10s").rename("v")
    encoding = {"v": {"scale_factor": 0.001, "dtype": "int32"}} if scale else {}
    da.to_dataset().to_zarr(tmp_path / "t.zarr", encoding=encoding, zarr_format=zarr_format)
    return str(tmp_path / "t.zarr"), da


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_store_opened_by_path_gives_the_times_of_its_coordinate(tmp_path, zarr_format):
    from kcpstream.inputs.labeled import LazyCoord
    from kcpstream.inputs.signal import as_signal

    path, da = _stored(tmp_path, zarr_format=zarr_format)
    by_path = kcpstream.segment(path, variable="v")
    by_xarray = kcpstream.segment(xr.open_zarr(path)["v"])
    np.testing.assert_array_equal(by_path.changepoints, by_xarray.changepoints)
    assert by_path.changepoint_times.dtype.kind == "M"
    np.testing.assert_array_equal(by_path.changepoint_times, by_xarray.changepoint_times)
    # the coordinate is read lazily: no index of n values is built
    assert isinstance(as_signal(path, variable="v").time.coord, LazyCoord)


def test_the_cli_gives_the_same_times_by_path_and_through_xarray(tmp_path):
    from click.testing import CliRunner

    from kcpstream.inputs.stores import open_store
    from kcpstream.jobs.cli import main

    path, da = _stored(tmp_path)
    assert open_store(path, None, None) == (path, "v")  # one plain array: by path
    res = CliRunner().invoke(main, ["segment", path, "--json"])
    assert res.exit_code == 0, res.output
    want = kcpstream.segment(da)
    got = np.array(json.loads(res.output)["times"], dtype="datetime64[ns]")
    np.testing.assert_array_equal(got, want.changepoint_times.astype("datetime64[ns]"))


def test_cf_encoded_values_go_through_xarray_with_a_lazy_time_coordinate(tmp_path):
    from kcpstream.inputs.stores import open_store

    path, da = _stored(tmp_path, scale=True)
    data, _ = open_store(path, None, None)
    assert isinstance(data, xr.DataArray)  # scale_factor: xarray decodes the values
    res = kcpstream.segment(data)
    want = kcpstream.segment(xr.open_zarr(path)["v"])
    np.testing.assert_array_equal(res.changepoints, want.changepoints)
    np.testing.assert_array_equal(res.changepoint_times, want.changepoint_times)


def test_a_pandas_index_gives_the_times():
    da = _timed("1min")
    series = da.to_series()
    res = kcpstream.segment(series)
    np.testing.assert_array_equal(res.changepoint_times, kcpstream.segment(da).changepoint_times)
    frame = pd.DataFrame({"a": series, "b": series.to_numpy()[::-1]}, index=series.index)
    assert kcpstream.segment(frame).changepoint_times.dtype.kind == "M"


def test_a_pandas_index_that_is_no_time_axis_is_refused_with_the_pandas_fix():
    x = np.random.default_rng(3).normal(size=500) + np.repeat([0.0, 3.0], 250)
    backwards = pd.Series(x, index=pd.date_range("2020", periods=500, freq="s")[::-1])
    with pytest.raises(InputError, match=r"index of the pandas Series is not strictly.*sort_index"):
        kcpstream.segment(backwards)
    with pytest.raises(InputError, match=r"holds text labels.*reset_index\(drop=True\)"):
        kcpstream.segment(pd.Series(x, index=[f"s{i}" for i in range(500)]))
    positions = kcpstream.segment(pd.Series(x).reset_index(drop=True), n_bkps=1)
    assert positions.changepoints.tolist() == kcpstream.segment(x, n_bkps=1).changepoints.tolist()
    t = pd.date_range("2020", periods=500, freq="s").to_numpy().copy()
    t[10] = np.datetime64("NaT")
    with pytest.raises(InputError, match="has a missing value at position 10; drop those rows"):
        kcpstream.segment(pd.Series(x, index=t))
    # indexes of times that are not datetime64 go to xarray as before
    dates = [pd.Timestamp("2020-01-01").date() + pd.Timedelta(days=i) for i in range(500)]
    for index in (pd.period_range("2020-01-01", periods=500, freq="D"), dates):
        assert kcpstream.segment(pd.Series(x, index=index), n_bkps=1).changepoints.tolist() == [250]


def _sensors_with(bad: str) -> xr.DataArray:
    """Three sensors on a time axis, sensor 'b' holding ``bad``: an infinity, a
    constant, or nothing but NaN."""
    v = np.random.default_rng(8).normal(size=(3000, 3))
    if bad == "inf":
        v[100, 1] = np.inf
    elif bad == "constant":
        v[:, 1] = 3.0
    else:
        v[:, 1] = np.nan
    t = pd.date_range("2024", periods=3000, freq="min")
    return xr.DataArray(
        v, dims=("time", "sensor"), coords={"time": t, "sensor": list("abc")}, name="vib"
    )


@pytest.mark.parametrize(
    "bad, match",
    [
        ("inf", "holds an infinity at index 100"),
        ("constant", "samples of the fit sample are equal"),
        ("nan", "has no valid sample"),
    ],
)
def test_an_error_in_one_series_of_a_batch_names_that_series(bad, match):
    # a batch of hundreds of sensors fails on one: the message says which
    with pytest.raises(InputError, match=f"DataArray 'vib' at sensor='b'.*{match}"):
        kcpstream.segment(_sensors_with(bad), batch_dims="sensor", n_bkps=1)


def test_a_chunk_lost_from_a_store_read_through_dask_is_not_said_of_another_series(tmp_path):
    # a series read through dask is checked with its whole store: the absent
    # chunk (sensor c's) is the store's, not the first series' it was found with
    x = np.random.default_rng(0).normal(size=(40_000, 3))
    data = xr.Dataset({"v": (("time", "sensor"), x)}, coords={"sensor": list("abc")})
    path = tmp_path / "s.zarr"
    data.chunk({"time": 10_000, "sensor": 1}).to_zarr(path, consolidated=False)
    (path / "v" / "c" / "2" / "2").unlink()
    lazy = xr.open_zarr(path, consolidated=False)["v"]
    with pytest.raises(InputError, match=r"^DataArray 'v': the store has no chunk c/2/2"):
        kcpstream.segment(lazy, batch_dims="sensor")


def test_batch_dims_that_repeat_or_name_the_time_axis_are_refused():
    da = _sensors_with("inf")
    with pytest.raises(InputError, match="names 'sensor' twice"):
        kcpstream.segment(da, batch_dims=["sensor", "sensor"])
    for kw in ({}, {"dim": "time"}):
        with pytest.raises(InputError, match="'time' is the time dimension, so it cannot be"):
            kcpstream.segment(da, batch_dims="time", **kw)


def test_a_path_with_a_variable_and_batch_dims_is_the_store_opened_with_xarray(tmp_path, sensors):
    ds, _ = sensors
    path = str(tmp_path / "b.zarr")
    ds.chunk({"time": 1_000, "sensor": 1}).to_zarr(path, consolidated=False)
    by_path = kcpstream.segment(path, variable="pressure", batch_dims="sensor", n_bkps=3)
    opened = xr.open_zarr(path, consolidated=False)["pressure"]
    direct = kcpstream.segment(opened, batch_dims="sensor", n_bkps=3)
    assert by_path.labels == direct.labels == [{"sensor": s} for s in ("s1", "s2", "s3")]
    for a, b in zip(by_path.results, direct.results, strict=True):
        assert a.changepoints.tolist() == b.changepoints.tolist()
        assert a.gains.tolist() == b.gains.tolist()
    # a chunk lost from one sensor's column is that sensor's error by this route
    # too, and a gap of its own with missing="skip"
    (tmp_path / "b.zarr" / "pressure" / "c" / "2" / "2").unlink()
    with pytest.raises(InputError, match="at sensor='s3': the store has no chunk"):
        kcpstream.segment(path, variable="pressure", batch_dims="sensor", n_bkps=3)
    skipped = kcpstream.segment(
        path, variable="pressure", batch_dims="sensor", n_bkps=3, missing="skip"
    )
    assert [r.diagnostics.n_missing > 0 for r in skipped.results] == [False, False, True]


def test_a_store_without_the_time_dimension_names_its_variables_and_dim(tmp_path):
    path = str(tmp_path / "t.zarr")
    t = pd.date_range("2020", periods=1000, freq="s")
    x = np.random.default_rng(4).normal(size=1000) + np.repeat([0.0, 3.0], 500)
    xr.Dataset({"sig": ("t", x)}, coords={"t": t}).to_zarr(path)
    with pytest.raises(
        InputError,
        match=r"no variable of the store .* has the dimension 'time' \(its variables: "
        r"sig \(t\)\); choose the time dimension with dim=<name> \(--dim",
    ):
        kcpstream.segment(path)
    assert kcpstream.segment(path, dim="t", n_bkps=1).n_changepoints == 1
    # a store of one array is segmented by path, whatever its dimension's name
    for k, one in enumerate((xr.DataArray(x).to_dataset(name="v"), xr.Dataset({"v": ("t", x)}))):
        alone = str(tmp_path / f"one{k}.zarr")
        one.to_zarr(alone)
        assert kcpstream.segment(alone, n_bkps=1).changepoints.tolist() == [500]
    # batch_dims needs dimension names, which a plain zarr array has none of
    plain = zarr.open_group(str(tmp_path / "plain.zarr"), mode="w")
    plain.create_array("v", shape=(1000, 2), dtype="f8")[:] = np.c_[x, x]
    with pytest.raises(InputError, match="batch_dims needs dimension names, and the array 'v'"):
        kcpstream.segment(str(tmp_path / "plain.zarr"), variable="v", batch_dims="sensor")


def test_the_series_of_a_batch_share_one_cache_budget():
    # cache_bytes bounds the samples kept for refinement by the whole call: each
    # of a batch's series keeps its share (256 series once kept 256 budgets)
    import dataclasses

    from kcpstream.engine.plan import settings_of
    from kcpstream.engine.run import prepare
    from kcpstream.inputs.signal import as_signal

    st, features = settings_of(
        features="rff:8", n_bkps=None, pen=None, method="binseg", d_max=None, min_size=None,
        min_duration=None, alpha=0.01, window=None, block_size=None, seed=0, sample_size=2048,
        tile=4096, cache_bytes=2**24, checkpoint=None, progress=False,
    )  # fmt: skip
    x = np.random.default_rng(0).normal(size=100_000)
    for series in (1, 4, 256):
        job = prepare(as_signal(x), features, dataclasses.replace(st, n_series=series))
        assert job.cache.max_bytes == 2**24 // series


def test_a_batch_keeps_each_series_chunk_and_cuts_it_in_fewer_tasks(tmp_path):
    # each series' share of cache_bytes is above its one chunk but below 4/3 of
    # it (the chunks' three quarters of a budget): the chunk is kept all the
    # same (the pieces of a kept chunk take no room), and no round reads again
    n, k = 20_000, 4
    x = np.stack([datasets.changing_distribution(n, 3, seed=s).x for s in range(k)], axis=1)
    da = xr.DataArray(x.astype(np.float32), dims=("time", "sensor"))
    da.to_dataset(name="v").chunk({"time": n, "sensor": 1}).to_zarr(tmp_path / "s.zarr")
    lazy = xr.open_zarr(tmp_path / "s.zarr", chunks=None)["v"]
    share = int(4 * n * 1.1)  # float32 bytes per series, and a tenth more
    kw = {"block_size": 64, "n_bkps": 3}
    batch = kcpstream.segment(lazy, dim="time", batch_dims="sensor", cache_bytes=k * share, **kw)
    for i, (_, res) in enumerate(batch):
        assert res.diagnostics.samples_read_again == 0 < res.diagnostics.samples_scanned
        single = kcpstream.segment(lazy.isel(sensor=i), dim="time", **kw)
        np.testing.assert_array_equal(res.changepoints, single.changepoints)
        np.testing.assert_array_equal(res.gains, single.gains)
        # the pass aims at 64 tasks for the call: a series alone has its chunk cut
        # in 63 slices of 320 samples (5 blocks), one of a batch of 4 in 16 of
        # 1280; and each chunk has its read and the merge of its slices
        assert (res.diagnostics.pass_tasks, single.diagnostics.pass_tasks) == (18, 65)


def test_a_batch_too_large_for_its_cache_is_searched_a_group_at_a_time(tmp_path, monkeypatch):
    # 6 series of 80 kB in a budget of 200 kB: each series' share (33 kB) holds
    # none of its chunk, so refinement would decode it again in every round; a
    # group of two shares the budget instead, reads each chunk once and keeps it
    from kcpstream.engine import searches as engine

    n, k = 20_000, 6
    x = np.stack([datasets.changing_distribution(n, 3, seed=s).x for s in range(k)], axis=1)
    da = xr.DataArray(x.astype(np.float32), dims=("time", "sensor"))
    da.to_dataset(name="v").chunk({"time": n, "sensor": 1}).to_zarr(tmp_path / "s.zarr")
    lazy = xr.open_zarr(tmp_path / "s.zarr", chunks=None)["v"]
    kw = {"block_size": 64, "n_bkps": 3, "cache_bytes": 200_000}
    on_the_grid(monkeypatch)  # (held, each series is read once: tests/test_held_search.py)
    with dask.config.set(scheduler="threads"):
        grouped = kcpstream.segment(lazy, dim="time", batch_dims="sensor", **kw)
        monkeypatch.setattr(engine, "cache_groups", lambda jobs, st: None)
        lockstep = kcpstream.segment(lazy, dim="time", batch_dims="sensor", **kw)
    for i, ((_, g), (_, s)) in enumerate(zip(grouped, lockstep, strict=True)):
        single = kcpstream.segment(lazy.isel(sensor=i), dim="time", **kw)
        for res in (g, s):
            np.testing.assert_array_equal(res.changepoints, single.changepoints)
            np.testing.assert_array_equal(res.gains, single.gains)
        # grouped: the pass reads again the chunk the fit read, refinement once more
        assert g.diagnostics.samples_read_again <= 2 * n
    # in lockstep a series reads its chunk again in round after round (a series
    # whose pieces the last read left held goes on alone, so not in every one)
    again = [sum(r.diagnostics.samples_read_again for _, r in b) for b in (grouped, lockstep)]
    assert again[0] <= 2 * n * k < again[1]
