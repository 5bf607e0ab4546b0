"""Checkpoints: reuse with no data pass, stale ones detected, atomic writes."""

from __future__ import annotations

import os

import numpy as np
import pytest
import zarr

import kcpstream
from kcpstream import datasets
from kcpstream.persist import checkpoint


@pytest.fixture
def store(tmp_path):
    sig = datasets.changing_distribution(200_000, 6, seed=2)
    datasets.write_zarr(sig.x, tmp_path / "s.zarr", chunks=20_000)
    return str(tmp_path / "s.zarr")


def _same(a, b):
    assert a.changepoints.tolist() == b.changepoints.tolist()
    assert a.gains.tolist() == b.gains.tolist()
    assert a.path_costs.tolist() == b.path_costs.tolist()


def test_second_run_makes_no_data_pass_and_reads_nothing_it_read_before(store, tmp_path):
    ck = tmp_path / "ck"
    first = kcpstream.segment(store, n_bkps=6, checkpoint=ck)
    assert first.diagnostics.checkpoint == "written"
    assert first.diagnostics.samples_featurized_pass == 200_000
    # another selection rule on the same statistics: nothing featurized at all
    again = kcpstream.segment(store, n_bkps=3, checkpoint=ck)
    assert again.diagnostics.checkpoint == "loaded"
    assert again.diagnostics.samples_featurized == 0
    _same(again, kcpstream.segment(store, n_bkps=3))
    # another method: no data pass (its refinement may read a few blocks)
    dp = kcpstream.segment(store, n_bkps=6, method="dynp", checkpoint=ck)
    assert dp.diagnostics.samples_featurized_pass == 0
    assert (
        dp.changepoints.tolist()
        == kcpstream.segment(store, n_bkps=6, method="dynp").changepoints.tolist()
    )
    # a deeper search continues from the stored exact segments, and gives the exact answer
    deeper = kcpstream.segment(store, n_bkps=10, checkpoint=ck)
    assert deeper.diagnostics.samples_featurized_pass == 0
    _same(deeper, kcpstream.segment(store, n_bkps=10))


def test_changed_input_or_parameters_are_never_served_stale(store, tmp_path):
    ck = tmp_path / "ck"
    kcpstream.segment(store, n_bkps=3, checkpoint=ck)
    assert (
        kcpstream.segment(store, n_bkps=3, features="rff:32", checkpoint=ck).diagnostics.checkpoint
        == "written"
    )
    assert (
        kcpstream.segment(
            store, n_bkps=3, features="rff:64", seed=7, checkpoint=ck
        ).diagnostics.checkpoint
        == "written"
    )
    assert (
        kcpstream.segment(store, n_bkps=3, block_size=100, checkpoint=ck).diagnostics.checkpoint
        == "written"
    )
    # rewrite samples inside the fit windows: the content fingerprint changes
    arr = zarr.open_group(store, mode="r+")["x"]
    arr[0:10] = arr[0:10] + 1.0
    res = kcpstream.segment(store, n_bkps=3, checkpoint=ck)
    assert res.diagnostics.checkpoint == "written"
    _same(res, kcpstream.segment(store, n_bkps=3))
    # a longer archive is another input
    longer = np.concatenate([arr[...], arr[:1000]])
    datasets.write_zarr(longer, store, overwrite=True)
    assert kcpstream.segment(store, n_bkps=3, checkpoint=ck).diagnostics.checkpoint == "written"


def test_a_killed_write_leaves_the_previous_checkpoint(store, tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    first = kcpstream.segment(store, n_bkps=2, checkpoint=ck)
    keys = os.listdir(ck)
    assert len(keys) == 1

    def boom(*args, **kwargs):
        raise KeyboardInterrupt("killed while writing")

    # killed after the arrays were written, before the attributes
    monkeypatch.setattr(checkpoint, "write_attrs", boom)
    with pytest.raises(KeyboardInterrupt):
        kcpstream.segment(store, n_bkps=5, checkpoint=ck)
    monkeypatch.undo()
    assert os.listdir(ck) == keys  # no temporary directory, the old checkpoint intact
    again = kcpstream.segment(store, n_bkps=2, checkpoint=ck)
    assert again.diagnostics.checkpoint == "loaded"
    _same(again, first)


def test_checkpoint_must_be_local(store):
    with pytest.raises(ValueError, match="local directory"):
        checkpoint.save("s3://bucket/ck", "k", None, {}, {})


@pytest.mark.parametrize("first, second", [(2, 15_000), (15_000, 2)])
def test_another_min_size_reuses_the_statistics_not_the_segments(tmp_path, first, second):
    # a segment's best split depends on min_size, which the fingerprint does not hold
    x = datasets.scenario1(200_000, 10, seed=3).x
    ck = tmp_path / "ck"
    kcpstream.segment(x, n_bkps=5, min_size=first, checkpoint=ck)
    again = kcpstream.segment(x, n_bkps=5, min_size=second, checkpoint=ck)
    fresh = kcpstream.segment(x, n_bkps=5, min_size=second)
    assert again.diagnostics.checkpoint == "loaded"
    assert again.diagnostics.samples_featurized_pass == 0  # the statistics were reused
    assert again.changepoints.tolist() == fresh.changepoints.tolist()
    assert again.gains.tolist() == fresh.gains.tolist()
    assert np.diff([0, *again.changepoints, len(x)]).min() >= second


def test_a_long_cycle_found_after_the_pass_is_found_again_from_the_checkpoint(tmp_path):
    # the checkpoint keeps the samples' block statistics, not the cycle's windows
    n = 400_000
    t = np.arange(n)
    rng = np.random.default_rng(3)
    x = np.sin(2 * np.pi * 20 * t / n) * np.where(t < 250_000, 1.0, 1.8)
    x = (x + 0.5 * rng.standard_normal(n)).astype(np.float32)
    path = str(tmp_path / "cycle.zarr")
    arr = zarr.open_array(path, mode="w", shape=(n,), chunks=(50_000,), dtype="f4")
    arr[:] = x
    ck = str(tmp_path / "ck")
    first = kcpstream.segment(path, checkpoint=ck)
    again = kcpstream.segment(path, checkpoint=ck)
    w = first.params["window"]
    # a change inside a window makes that window a mixture of both sides, which can
    # stand apart as a segment of its own with the next window
    assert w is not None and 1 <= first.n_changepoints <= 2
    assert all(abs(int(c) - 250_000) <= 2 * w for c in first.changepoints)
    assert again.diagnostics.checkpoint == "loaded"
    assert again.changepoints.tolist() == first.changepoints.tolist()
    assert again.params["window"] == first.params["window"]
    np.testing.assert_array_equal(again.pvalues, first.pvalues)


def test_a_group_of_the_earlier_zarr_layout_is_neither_used_nor_an_error(store, tmp_path):
    # checkpoints were zarr groups before they were folders of .npy files: one
    # left in the directory (the same lineage, an earlier version of the input)
    # is passed over, and the run computes from scratch
    ck = tmp_path / "ck"
    kcpstream.segment(store, n_bkps=3, checkpoint=ck)
    (key,) = [k for k in os.listdir(ck) if not k.startswith(".")]
    where = str(ck / key)
    attrs = checkpoint.read_attrs(where)
    arrays = {k: checkpoint.read_array(where, k) for k in attrs["checksums"]}
    old = zarr.open_group(str(ck / ("0" * 32)), mode="w")
    for name, value in arrays.items():
        old.create_array(name, data=value)
    old.attrs.update({**attrs, "format": 3})
    checkpoint.remove(ck, key)
    z = zarr.open_group(store, mode="r+")["x"]
    z[100:200] = z[100:200] * 3
    res = kcpstream.segment(store, n_bkps=3, checkpoint=ck)
    assert res.diagnostics.checkpoint == "written" and res.diagnostics.chunks_reused == 0
    _same(res, kcpstream.segment(store, n_bkps=3))


def test_attributes_changed_on_disk_are_a_miss(store, tmp_path):
    # the attributes decide which stored segments apply (min_size): a digit
    # changed in the file, still valid JSON, must not pass for another setting
    ck = tmp_path / "ck"
    first = kcpstream.segment(store, n_bkps=3, block_size=100, checkpoint=ck)
    (key,) = [k for k in os.listdir(ck) if not k.startswith(".")]
    path = ck / key / checkpoint.ATTRS
    text = path.read_text()
    size = f'"min_size": {first.min_size}'
    assert size in text
    path.write_text(text.replace(size, f'"min_size": {first.min_size + 1}'))
    again = kcpstream.segment(store, n_bkps=3, block_size=100, checkpoint=ck)
    assert again.diagnostics.checkpoint == "recomputed"
    _same(again, first)


def _inodes(ck):
    """``{file: inode}`` of the prefix slabs of the one group in ``ck``."""
    (key,) = [k for k in os.listdir(ck) if not k.startswith(".")]
    where = ck / key
    return {f: os.stat(where / f).st_ino for f in os.listdir(where) if f.startswith("prefix.")}


def _grown_store(tmp_path):
    rng = np.random.default_rng(8)
    x = rng.normal(size=300_000).astype("f4")
    x[100_000:] += 1.0
    path = str(tmp_path / "g.zarr")
    z = zarr.create_array(path, shape=x.shape, chunks=(25_000,), dtype=x.dtype)
    z[:] = x
    fmap = kcpstream.RFF(64).fit(x[:2048, None].astype(np.float64))
    # 6000 blocks of 50, 64 features: the prefix sums in two slabs (4096 blocks each)
    assert checkpoint.slab_columns(64) == 4096
    return path, z, {"features": fmap, "block_size": 50}


def test_an_update_links_the_prefix_slabs_the_append_did_not_change(tmp_path):
    path, z, kw = _grown_store(tmp_path)
    ck = tmp_path / "ck"
    kcpstream.segment(path, checkpoint=ck, **kw)
    before = _inodes(ck)
    assert sorted(before) == ["prefix.0.npy", "prefix.1.npy"]
    z.resize((310_000,))
    z[300_000:] = np.random.default_rng(9).normal(size=10_000).astype("f4") * 2
    grown = kcpstream.segment(path, checkpoint=ck, **kw)
    assert grown.diagnostics.checkpoint == "updated"
    after = _inodes(ck)
    # slab 0 (blocks before 4096) is the earlier group's file; slab 1 holds the append
    assert after["prefix.0.npy"] == before["prefix.0.npy"]
    assert after["prefix.1.npy"] != before["prefix.1.npy"]
    # a run that loads the group and needs nothing more leaves it as it is
    loaded = kcpstream.segment(path, checkpoint=ck, n_bkps=2, **kw)
    assert loaded.diagnostics.checkpoint == "loaded" and _inodes(ck) == after
    _same(loaded, kcpstream.segment(path, n_bkps=2, **kw))
    _same(grown, kcpstream.segment(path, **kw))
    again = kcpstream.segment(path, checkpoint=ck, **kw)
    assert again.diagnostics.checkpoint == "loaded"
    _same(again, grown)
    # a rewrite in place before block 4096: the same shapes, other sums in both slabs
    z[150_000:160_000] = z[150_000:160_000] * 3
    rewritten = kcpstream.segment(path, checkpoint=ck, **kw)
    assert rewritten.diagnostics.checkpoint == "updated"
    assert not set(_inodes(ck).values()) & set(after.values())
    _same(rewritten, kcpstream.segment(path, **kw))


def test_a_file_system_without_hard_links_gets_the_slabs_written(tmp_path, monkeypatch):
    path, z, kw = _grown_store(tmp_path)
    ck = tmp_path / "ck"
    kcpstream.segment(path, checkpoint=ck, **kw)
    before = _inodes(ck)

    def refuse(src, dst, *args, **kwargs):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", refuse)
    z.resize((310_000,))
    z[300_000:] = np.random.default_rng(9).normal(size=10_000).astype("f4") * 2
    grown = kcpstream.segment(path, checkpoint=ck, **kw)
    assert grown.diagnostics.checkpoint == "updated"
    assert not set(_inodes(ck).values()) & set(before.values())
    monkeypatch.undo()
    again = kcpstream.segment(path, checkpoint=ck, **kw)
    assert again.diagnostics.checkpoint == "loaded"
    _same(again, kcpstream.segment(path, **kw))


def test_a_linked_slab_damaged_later_is_a_miss(tmp_path):
    path, z, kw = _grown_store(tmp_path)
    ck = tmp_path / "ck"
    kcpstream.segment(path, checkpoint=ck, **kw)
    z.resize((310_000,))
    z[300_000:] = np.random.default_rng(9).normal(size=10_000).astype("f4") * 2
    kcpstream.segment(path, checkpoint=ck, **kw)
    (key,) = [k for k in os.listdir(ck) if not k.startswith(".")]
    slab = ck / key / "prefix.0.npy"
    raw = bytearray(slab.read_bytes())
    raw[-8] ^= 0x01
    slab.write_bytes(bytes(raw))
    again = kcpstream.segment(path, checkpoint=ck, **kw)
    assert again.diagnostics.checkpoint == "recomputed"
    _same(again, kcpstream.segment(path, **kw))


def test_blocks_longer_than_a_tile_are_kept_per_tile(tmp_path):
    # a block longer than a tile merges its sums of squares from the tiles'
    # pieces: another tile gives costs one rounding apart, so neither its
    # checkpoint nor an earlier version's statistics serve it
    path, z, kw = _grown_store(tmp_path)
    kw = {**kw, "block_size": 1000, "n_bkps": 2}
    ck = tmp_path / "ck"
    kcpstream.segment(path, checkpoint=ck, tile=4096, **kw)
    other = kcpstream.segment(path, checkpoint=ck, tile=300, **kw)
    assert other.diagnostics.checkpoint == "written"
    _same(other, kcpstream.segment(path, tile=300, **kw))
    z.resize((310_000,))
    z[300_000:] = np.random.default_rng(9).normal(size=10_000).astype("f4") * 2
    grown = kcpstream.segment(path, checkpoint=ck, tile=500, **kw)
    assert grown.diagnostics.checkpoint == "written"
    _same(grown, kcpstream.segment(path, tile=500, **kw))
    # blocks within a tile: the tile does not matter, the checkpoint serves
    small = {**kw, "block_size": 50}
    kcpstream.segment(path, checkpoint=tmp_path / "ck2", tile=4096, **small)
    again = kcpstream.segment(path, checkpoint=tmp_path / "ck2", tile=300, **small)
    assert again.diagnostics.checkpoint == "loaded"
    _same(again, kcpstream.segment(path, tile=300, **small))


def test_groups_of_an_earlier_layout_are_removed_when_the_input_is_saved_again(tmp_path):
    import shutil

    path, z, kw = _grown_store(tmp_path)
    ck = tmp_path / "ck"
    kcpstream.segment(path, checkpoint=ck, **kw)
    (key,) = [k for k in os.listdir(ck) if not k.startswith(".")]
    old = ck / ("f" * 32)  # the same input's group as an earlier release wrote it
    shutil.copytree(ck / key, old)
    attrs = checkpoint.read_attrs(str(old))
    checkpoint.write_attrs(str(old), {**attrs, "format": checkpoint.FORMAT - 1})
    other = ck / ("e" * 32)  # another input's group of that layout stays
    shutil.copytree(ck / key, other)
    checkpoint.write_attrs(
        str(other), {**attrs, "format": checkpoint.FORMAT - 1, "lineage": "another"}
    )
    z.resize((310_000,))
    z[300_000:] = np.random.default_rng(9).normal(size=10_000).astype("f4") * 2
    grown = kcpstream.segment(path, checkpoint=ck, **kw)
    assert grown.diagnostics.checkpoint == "updated"
    assert not old.exists() and other.exists()
    assert len([k for k in os.listdir(ck) if not k.startswith(".")]) == 2


def _files(ck):
    """``{file: (inode, mtime)}`` of the one group in ``ck``."""
    (key,) = [k for k in os.listdir(ck) if not k.startswith(".")]
    where = ck / key
    return {
        f: (os.stat(where / f).st_ino, os.stat(where / f).st_mtime_ns) for f in os.listdir(where)
    }


def test_a_group_loaded_and_used_as_it_is_is_not_written_again(tmp_path):
    path, z, kw = _grown_store(tmp_path)
    ck = tmp_path / "ck"
    first = kcpstream.segment(path, checkpoint=ck, n_bkps=2, **kw)
    written = _files(ck)
    assert "kept_samples.npy" in written  # samples an append's refinement scans again
    (key,) = [k for k in os.listdir(ck) if not k.startswith(".")]
    os.utime(ck / key, ns=(10**9, 10**9))  # (an old group, whatever the clock's grain)
    again = kcpstream.segment(path, checkpoint=ck, n_bkps=2, **kw)
    assert again.diagnostics.checkpoint == "loaded" and _files(ck) == written
    # the newest group of its lineage, as one written again would be
    assert os.stat(ck / key).st_mtime_ns > 10**9
    _same(again, first)
    # a deeper search evaluates segments the group did not hold: it is written
    # again with them, and the next deep call reads nothing
    deeper = kcpstream.segment(path, checkpoint=ck, n_bkps=8, **kw)
    assert deeper.diagnostics.checkpoint == "loaded" and deeper.diagnostics.samples_featurized > 0
    assert _files(ck)["attrs.json"] != written["attrs.json"]
    held = _files(ck)
    last = kcpstream.segment(path, checkpoint=ck, n_bkps=8, **kw)
    assert last.diagnostics.samples_featurized == 0 and _files(ck) == held
    _same(last, deeper)
    _same(last, kcpstream.segment(path, n_bkps=8, **kw))
    # the samples kept for an append are still there: it reads only its chunk
    z.resize((310_000,))
    z[300_000:] = np.random.default_rng(9).normal(size=10_000).astype("f4") * 2
    grown = kcpstream.segment(path, checkpoint=ck, n_bkps=8, **kw)
    assert grown.diagnostics.checkpoint == "updated" and grown.diagnostics.chunks_read == 1
    _same(grown, kcpstream.segment(path, n_bkps=8, **kw))


def test_a_batch_reads_its_checkpoint_folder_once(tmp_path, monkeypatch):
    # each series looks up its earlier versions, its fit and its outdated
    # groups: the folder is listed once a call, not once a series
    import xarray as xr

    sensors = 24
    x = np.random.default_rng(4).normal(size=(3000, sensors)).astype("f4")
    x[1500:, ::2] += 1.0
    path = tmp_path / "b.zarr"
    xr.Dataset({"v": (("time", "sensor"), x)}).to_zarr(path, encoding={"v": {"chunks": (3000, 1)}})
    reads = []
    read_attrs = checkpoint.read_attrs
    monkeypatch.setattr(
        checkpoint, "read_attrs", lambda where: reads.append(where) or read_attrs(where)
    )
    ck = tmp_path / "ck"
    da = xr.open_zarr(path, chunks=None)["v"]
    first = kcpstream.segment(da, dim="time", batch_dims="sensor", checkpoint=ck)
    assert {r.diagnostics.checkpoint for _, r in first} == {"written"}
    assert len(reads) <= 2 * sensors  # each group read back once as it is written
    reads.clear()
    again = kcpstream.segment(da, dim="time", batch_dims="sensor", checkpoint=ck)
    assert {r.diagnostics.checkpoint for _, r in again} == {"loaded"}
    assert len(reads) <= 3 * sensors  # the listing, each group's load, and its fit record
    fresh = kcpstream.segment(da, dim="time", batch_dims="sensor")
    for (_, a), (_, b) in zip(again, fresh, strict=True):
        _same(a, b)
