"""What makes an input the same input: a checkpoint (and a job's record of
its input) is served only for the samples as they are now, to the bit.

Each case here was once served stale: a lazy transpose, CF decoding, chunk
files or folders that are symbolic links, a rewrite that kept size, mtime and
inode, another pass chunking, and a job whose time coordinate changed."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

import kcpstream
from kcpstream import datasets

KW = {"n_bkps": 4, "features": "rff:32", "seed": 0}


def _same(a, b):
    assert a.changepoints.tolist() == b.changepoints.tolist()
    assert a.gains.tolist() == b.gains.tolist()
    assert a.path_costs.tolist() == b.path_costs.tolist()


def _signal(n=200_000, d=1, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    for i, a in enumerate(range(0, n, n // 5)):
        x[a : a + n // 5] = x[a : a + n // 5] * (1 + i % 2) + (i % 3)
    return x


def test_a_lazily_transposed_dataarray_is_read_along_its_time_axis(tmp_path):
    # stored (channel, time): the transpose's indexer hides which stored axis is
    # time, so the whole array is the source; before, the channel axis was
    # taken for time and a rewrite of one time chunk updated the wrong blocks
    path = tmp_path / "t.zarr"
    x = _signal(d=2)
    ds = xr.Dataset({"x": (("channel", "time"), x.T)})
    ds.to_zarr(path, encoding={"x": {"chunks": (1, 10_000)}}, mode="w")

    def data():
        return xr.open_zarr(path, chunks=None)["x"].transpose("time", "channel")

    kcpstream.segment(data(), checkpoint=tmp_path / "ck", **KW)
    z = zarr.open_group(path, mode="r+")["x"]
    z[0, 100_000:110_000] = 5.0 + 3 * np.random.default_rng(9).standard_normal(10_000)
    again = kcpstream.segment(data(), checkpoint=tmp_path / "ck", **KW)
    assert again.diagnostics.checkpoint == "written"
    _same(again, kcpstream.segment(data(), **KW))
    # not transposed, the store's chunks along time are the data pass's
    plain = xr.open_zarr(path, chunks=None)["x"]
    res = kcpstream.segment(plain, dim="time", checkpoint=tmp_path / "ck2", **KW)
    assert res.diagnostics.chunks_read == 20


def test_decoded_and_raw_values_of_one_store_are_other_inputs(tmp_path):
    path = tmp_path / "d.zarr"
    x = _signal(seed=2)[:, 0]
    xr.Dataset({"x": (("time",), x)}).to_zarr(path, encoding={"x": {"chunks": (10_000,)}})
    group = zarr.open_group(path, mode="r+")
    group["x"].attrs["scale_factor"] = 3.0  # the same float64 dtype either way
    zarr.consolidate_metadata(path)
    fmap = kcpstream.RFF(32, seed=0).fit(x[:2000, None])
    kw = {"n_bkps": 4, "features": fmap}
    raw = xr.open_zarr(path, chunks=None, mask_and_scale=False)["x"]
    decoded = xr.open_zarr(path, chunks=None)["x"]
    assert kcpstream.segment(raw, checkpoint=tmp_path / "ck", **kw).diagnostics.checkpoint == (
        "written"
    )
    res = kcpstream.segment(decoded, checkpoint=tmp_path / "ck", **kw)
    assert res.diagnostics.checkpoint == "written"
    _same(res, kcpstream.segment(decoded, **kw))
    assert kcpstream.segment(decoded, checkpoint=tmp_path / "ck", **kw).diagnostics.checkpoint == (
        "loaded"
    )


def _linked_store(tmp_path, folder: bool):
    """A store whose chunk files (or whose chunk folder) are symbolic links to
    objects elsewhere, as git-annex, DVC and datalad lay them out."""
    path = tmp_path / "l.zarr"
    datasets.write_zarr(_signal()[:, 0], path, chunks=10_000)
    chunks = path / "x" / "c"
    objects = tmp_path / "objects"
    if folder:
        shutil.move(chunks, objects)
        os.symlink(objects, chunks)
    else:
        objects.mkdir()
        for f in sorted(chunks.iterdir()):
            shutil.move(f, objects / f.name)
            os.symlink(objects / f.name, f)
    return str(path), objects


@pytest.mark.parametrize("folder", [False, True])
def test_a_store_of_symbolic_links_is_versioned_by_their_targets(tmp_path, folder):
    path, objects = _linked_store(tmp_path, folder)
    ck = tmp_path / "ck"
    first = kcpstream.segment(path, checkpoint=ck, **KW)  # every chunk found
    assert first.diagnostics.checkpoint == "written"
    # chunk 12 rewritten, its link unchanged (the same store written from other
    # samples gives the new object)
    y = _signal()[:, 0]
    y[120_000:130_000] = 5.0 + 3 * np.random.default_rng(9).standard_normal(10_000)
    datasets.write_zarr(y, tmp_path / "new.zarr", chunks=10_000)
    (objects / "12").write_bytes((tmp_path / "new.zarr" / "x" / "c" / "12").read_bytes())
    again = kcpstream.segment(path, checkpoint=ck, **KW)
    assert again.diagnostics.checkpoint == "updated"
    _same(again, kcpstream.segment(path, **KW))


def test_a_rewrite_in_place_that_restores_size_mtime_and_inode_is_seen(tmp_path):
    # ``tar -x``, ``rsync -t`` and ``cp -p`` set the modification time back
    path = tmp_path / "u.zarr"
    z = zarr.create_array(path, shape=(200_000,), chunks=(10_000,), dtype="f4", compressors=None)
    z[:] = _signal()[:, 0]
    ck = tmp_path / "ck"
    kcpstream.segment(str(path), checkpoint=ck, **KW)
    chunk = path / "c" / "15"  # past the epoch of 2**17 samples the fit is drawn from
    before = os.stat(chunk)
    values = np.frombuffer(chunk.read_bytes(), dtype="f4").copy()
    with open(chunk, "r+b") as fh:  # the same file, the same size
        fh.write((values[::-1] * 4).tobytes())
    os.utime(chunk, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(chunk)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size, before.st_mtime_ns, before.st_ino
    )  # fmt: skip
    again = kcpstream.segment(str(path), checkpoint=ck, **KW)
    assert again.diagnostics.checkpoint == "updated"
    _same(again, kcpstream.segment(str(path), **KW))


def test_another_pass_chunking_is_not_served_a_group_one_rounding_apart(tmp_path):
    # blocks of 3333 samples cut by chunk boundaries are merged from two parts
    path = tmp_path / "c.zarr"
    datasets.write_zarr(_signal(300_000)[:, 0], path, chunks=10_000)
    kw = {**KW, "block_size": 3333, "n_bkps": 6}
    ck = tmp_path / "ck"
    kcpstream.segment(str(path), checkpoint=ck, **kw)
    for chunks in (30_000, 70_000):
        res = kcpstream.segment(str(path), checkpoint=ck, chunks=chunks, **kw)
        assert res.diagnostics.checkpoint == "written"
        _same(res, kcpstream.segment(str(path), chunks=chunks, **kw))
    assert kcpstream.segment(str(path), checkpoint=ck, **kw).diagnostics.checkpoint == "loaded"


def test_runs_with_other_tiles_keep_each_other_s_groups(tmp_path):
    path = tmp_path / "t.zarr"
    datasets.write_zarr(_signal()[:, 0], path, chunks=10_000)
    kw = {**KW, "block_size": 2000}
    ck = tmp_path / "ck"
    states = [
        kcpstream.segment(str(path), checkpoint=ck, tile=tile, **kw).diagnostics.checkpoint
        for tile in (1024, 512, 1024, 512)
    ]
    assert states == ["written", "written", "loaded", "loaded"]


def test_a_job_whose_time_coordinate_changed_is_segmented_again(tmp_path):
    from kcpstream.jobs.pipeline import run_job

    n = 40_000
    x = np.random.default_rng(0).standard_normal((n, 2))
    x[16_000:16_400] += 4.0
    x[28_000:] *= 3
    times = pd.date_range("2026-01-01", periods=n, freq="10ms")
    coords = {"time": times, "sensor": ["A", "B"], "height": 2.0}  # and a scalar one
    ds = xr.Dataset({"v": (("time", "sensor"), x)}, coords=coords)
    ds.chunk({"time": 10_000, "sensor": 1}).to_zarr(tmp_path / "in.zarr", mode="w")
    job = tmp_path / "job.toml"
    job.write_text(
        '[input]\nstore = "in.zarr"\nvariables = ["v"]\nbatch_dims = ["sensor"]\n'
        '[features]\nmap = "rff"\nn_features = 32\nseed = 0\n'
        '[selection]\nn_bkps = 2\nmin_duration = "20s"\n'
        '[output]\nstore = "out"\ncheckpoint = "out/ck"\n'
    )
    out = tmp_path / "out/series/sensor=A.json"
    assert run_job(job)["done"] == 2
    assert kcpstream.Segmentation.from_json(out.read_text()).min_size == 2_000  # 20 s of 10 ms
    assert run_job(job)["skipped"] == 2
    # the sampling interval was wrong: 100 ms, not 10 ms (the samples unchanged)
    stored = zarr.open_group(tmp_path / "in.zarr", mode="r+")["time"]
    stored[:] = stored[:] * 10
    report = run_job(job)
    assert report["done"] == 2 and report["skipped"] == 0
    res = kcpstream.Segmentation.from_json(out.read_text())
    fresh = kcpstream.segment(
        xr.open_zarr(tmp_path / "in.zarr", chunks=None)["v"].sel(sensor="A"),
        features="rff:32", seed=0, n_bkps=2, min_duration="20s",
    )  # fmt: skip
    assert res.min_size == fresh.min_size == 200
    np.testing.assert_array_equal(res.changepoints, fresh.changepoints)
    assert res.to_dataframe()["end"].iloc[0] == fresh.to_dataframe()["end"].iloc[0]


def test_a_batch_series_is_versioned_by_its_own_sensor_s_chunks(tmp_path):
    path = tmp_path / "b.zarr"
    n = 200_000
    x = np.random.default_rng(0).standard_normal((n, 3))
    x[n // 2 :] *= 2
    ds = xr.Dataset({"v": (("time", "sensor"), x)}, coords={"sensor": ["a", "b", "c"]})
    ds.to_zarr(path, encoding={"v": {"chunks": (10_000, 1)}}, mode="w")
    kw = {"batch_dims": "sensor", "features": "rff:32", "seed": 0, "n_bkps": 2}

    def data():
        return xr.open_zarr(path, chunks=None)["v"]

    kcpstream.segment(data(), checkpoint=tmp_path / "ck", **kw)
    zarr.open_group(path, mode="r+")["v"][100_000:110_000, 1] = 5.0  # sensor b's chunk
    again = kcpstream.segment(data(), checkpoint=tmp_path / "ck", **kw)
    read = {label["sensor"]: res.diagnostics.chunks_read for label, res in again}
    states = {label["sensor"]: res.diagnostics.checkpoint for label, res in again}
    # the others' identities hash their own objects only: their groups hold them
    assert states == {"a": "loaded", "b": "updated", "c": "loaded"}
    assert read["a"] == read["c"] == 0 < read["b"]
    for (_, res), (_, fresh) in zip(again, kcpstream.segment(data(), **kw), strict=True):
        _same(res, fresh)
    # a chunk lost from sensor b's column: sensor a alone still reads all it needs
    os.remove(path / "v" / "c" / "5" / "1")
    single = {k: v for k, v in kw.items() if k != "batch_dims"}
    assert len(kcpstream.segment(data().sel(sensor="a"), **single).changepoints) == 2
    with pytest.raises(kcpstream.InputError, match="no chunk for samples"):
        kcpstream.segment(data().sel(sensor="b"), **single)
    named = "^DataArray 'v' at sensor='b': .* no chunk for samples"
    with pytest.raises(kcpstream.InputError, match=named):
        kcpstream.segment(data(), **kw)


def test_a_zarr_2_fill_value_written_by_xarray_is_missing_data_by_path(tmp_path):
    # xarray keeps a zarr 2 array's _FillValue as its fill_value, not an
    # attribute, and masks it as it reads: by path, too, it is no sample
    path = tmp_path / "v2.zarr"
    x = np.random.default_rng(0).normal(size=20_000)
    x[5_000:6_000] = -9999.0
    ds = xr.Dataset({"v": ("time", x)}, coords={"time": np.arange(20_000)})
    ds.to_zarr(path, zarr_format=2, encoding={"v": {"_FillValue": -9999.0}})
    for data in (str(path), xr.open_zarr(path)["v"]):
        kw = {"variable": "v"} if isinstance(data, str) else {}
        with pytest.raises(kcpstream.InputError, match="1000 missing samples.* at index 5000"):
            kcpstream.segment(data, n_bkps=1, skipna=False, **kw)
        res = kcpstream.segment(data, n_bkps=1, **kw)  # a gap, by default
        assert res.diagnostics.n_missing == 1000 and res.earliest.size == 1


def test_a_file_url_is_versioned_like_its_path(tmp_path):
    path = tmp_path / "u.zarr"
    z = zarr.create_array(path, shape=(200_000,), chunks=(10_000,), dtype="f4", compressors=None)
    z[:] = _signal()[:, 0]
    url = path.as_uri()
    ck = tmp_path / "ck"
    kcpstream.segment(url, checkpoint=ck, **KW)
    chunk = path / "c" / "15"  # past the epoch of 2**17 samples the fit is drawn from
    before = os.stat(chunk)
    values = np.frombuffer(chunk.read_bytes(), dtype="f4").copy()
    with open(chunk, "r+b") as fh:
        fh.write((values[::-1] * 4).tobytes())
    os.utime(chunk, ns=(before.st_atime_ns, before.st_mtime_ns))
    again = kcpstream.segment(url, checkpoint=ck, **KW)
    assert again.diagnostics.checkpoint != "loaded"
    _same(again, kcpstream.segment(str(path), **KW))


def _timed_store(path, n=13_000, **coord_encoding):
    x = np.random.default_rng(0).normal(size=n)
    x[7_000:] += 3
    times = pd.date_range("2024-01-01", periods=n, freq="1s")
    ds = xr.Dataset({"v": ("time", x.astype("f4"))}, coords={"time": times})
    encoding = {"v": {"chunks": (4_000,)}, "time": {"chunks": (4_000,), **coord_encoding}}
    ds.to_zarr(path, encoding=encoding)
    return times


def test_a_time_coordinate_read_lazily_is_checked_where_it_is_read(tmp_path):
    from click.testing import CliRunner

    from kcpstream.jobs.cli import main

    path = tmp_path / "t.zarr"
    _timed_store(path)
    lazy = xr.open_zarr(path, create_default_indexes=False)["v"]
    # a lost chunk of the coordinate would read as the fill value, a time
    os.remove(path / "time" / "c" / "1")
    for data, kw in ((str(path), {"variable": "v"}), (lazy, {})):
        with pytest.raises(kcpstream.InputError, match="'time' coordinate"):
            kcpstream.segment(data, n_bkps=1, **kw)
    out = CliRunner().invoke(main, ["segment", str(path), "-v", "v", "--n-bkps", "1"])
    assert out.exit_code == 1 and "coordinate has no chunk" in out.output
    assert "Traceback" not in out.output
    # a damaged one is one line too, never a codec's error
    (path / "time" / "c" / "1").write_bytes(b"\x00" * 7)
    with pytest.raises(kcpstream.InputError, match="cannot read the 'time' coordinate"):
        kcpstream.segment(str(path), variable="v", n_bkps=1)


def test_a_time_coordinate_is_decoded_by_path_as_xarray_decodes_it(tmp_path):
    # a numeric coordinate with a scale: its values, not the stored numbers
    path = tmp_path / "s.zarr"
    x = np.random.default_rng(0).normal(size=13_000)
    x[7_000:] += 3
    seconds = np.arange(13_000) * 0.5
    ds = xr.Dataset({"v": ("time", x)}, coords={"time": seconds})
    ds.to_zarr(path, encoding={"time": {"dtype": "int32", "scale_factor": 0.5}})
    by_path = kcpstream.segment(str(path), variable="v", n_bkps=1, min_duration=1000)
    by_xarray = kcpstream.segment(xr.open_zarr(path)["v"], n_bkps=1, min_duration=1000)
    assert by_path.min_size == by_xarray.min_size == 2000
    np.testing.assert_array_equal(by_path.changepoint_times, by_xarray.changepoint_times)
    assert by_path.changepoint_times[0] == 3500.0


def test_a_chunk_removed_after_the_listing_is_an_error_not_fill_values(tmp_path, monkeypatch):
    # a chunk deleted (or deleted to be written again) by another process
    # between the store's listing and its read: zarr reads it as fill values
    from kcpstream.inputs import provenance, signal

    path = tmp_path / "r.zarr"
    z = zarr.create_array(path, shape=(60_000,), chunks=(5_000,), dtype="f4")
    z[:] = _signal(60_000)[:, 0]
    listed = provenance.open_origin

    def list_then_remove(*args, **kwargs):
        origin = listed(*args, **kwargs)  # every chunk present
        (path / "c" / "3").unlink(missing_ok=True)
        return origin

    monkeypatch.setattr(signal.pv, "open_origin", list_then_remove)
    ck = tmp_path / "ck"
    with pytest.raises(kcpstream.InputError, match=r"c/3 .*removed after the store was listed"):
        kcpstream.segment(str(path), checkpoint=ck, **KW)
    assert not ck.exists() or not [p for p in ck.iterdir() if not p.name.startswith(".")]
    # what missing="fill" asks for: the fill value
    res = kcpstream.segment(str(path), missing="fill", **KW)
    assert res.n_samples == 60_000


def test_a_series_identity_hashes_the_objects_it_reads_or_every_one_listed(tmp_path):
    from kcpstream.inputs.provenance import StoredArray, chunk_versions, zarr_identity

    z = zarr.create_array(str(tmp_path / "a.zarr"), shape=(100, 3), chunks=(50, 1), dtype="f4")
    z[:] = 1.0
    sensor_a = StoredArray(z, 0, (0, 100), (("i", 0),))
    before = zarr_identity(sensor_a, chunk_versions(z)[1])
    z[:, 1] = 2.0  # another sensor's objects
    assert zarr_identity(sensor_a, chunk_versions(z)[1]) == before
    z[60, 0] = 3.0  # one of its own
    changed = zarr_identity(sensor_a, chunk_versions(z)[1])
    assert changed != before
    # a listing whose keys are not zarr's (no metadata among them): every object
    # listed counts, so that a change anywhere still shows
    listed = {f"x/{k}": v for k, v in chunk_versions(z)[1].items()}
    other = zarr_identity(sensor_a, listed)
    z[:, 2] = 4.0
    assert zarr_identity(sensor_a, {f"x/{k}": v for k, v in chunk_versions(z)[1].items()}) != other
