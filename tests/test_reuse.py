"""A checkpoint of an earlier version of a store: the unchanged chunks' statistics
are kept, the rest read, and the result is the one a run from scratch gives."""

from __future__ import annotations

import os

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kcpstream
from kcpstream.features.base import DEFAULT_TILE
from kcpstream.inputs.provenance import Units
from kcpstream.persist import checkpoint
from kcpstream.persist.reuse import kept_pieces, plan_reuse
from kcpstream.search.binseg import SegmentSplit, bound_segment
from kcpstream.search.stats import BlockStats

from .stored import assert_same_stats, write_store


def _same(a, b):
    assert a.changepoints.tolist() == b.changepoints.tolist()
    assert a.gains.tolist() == b.gains.tolist()
    assert a.path_costs.tolist() == b.path_costs.tolist()


def test_a_chunk_rewritten_in_place_is_the_only_one_read_again(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=400_000).astype("f4")
    x[250_000:] *= 2
    store = str(tmp_path / "s.zarr")
    z = write_store(store, x, 20_000)
    ck = tmp_path / "ck"
    first = kcpstream.segment(store, checkpoint=ck)
    assert first.diagnostics.checkpoint == "written"
    assert first.diagnostics.chunks_read == 20
    # late data: samples 280 000 - 320 000 (chunks 14 and 15) are rewritten with 4x the
    # variance, past the epoch of 2**18 samples the fit sample is drawn from (data
    # that changes in the fit sample's windows gives another fitted map, and every
    # chunk is read)
    z[280_000:320_000] = rng.normal(size=40_000).astype("f4") * 4
    again = kcpstream.segment(store, checkpoint=ck)
    d = again.diagnostics
    assert d.checkpoint == "updated"
    assert d.chunks_reused + d.chunks_read == 20
    # the two chunks, and at most one neighbour each whose blocks they share
    assert 2 <= d.chunks_read <= 4 and d.chunks_reused >= 16
    assert d.samples_featurized_pass == 20_000 * d.chunks_read
    fresh = kcpstream.segment(store)
    _same(again, fresh)
    found = again.changepoints
    assert min(abs(found - 280_000)) < 100 and min(abs(found - 320_000)) < 100
    # the checkpoint now holds exactly what a first run on the new data writes
    kcpstream.segment(store, checkpoint=tmp_path / "fresh")
    assert_same_stats(ck, tmp_path / "fresh")
    # and a third run loads it: nothing to read
    assert kcpstream.segment(store, checkpoint=ck).diagnostics.checkpoint == "loaded"
    # another chunking reads everything (its blocks cut by chunk boundaries round apart)
    z[200_000:210_000] = 0.5
    other = kcpstream.segment(store, checkpoint=ck, chunks=40_000)
    assert other.diagnostics.checkpoint == "written" and other.diagnostics.chunks_reused == 0


def test_appends_and_shrinks_read_only_the_new_end(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=300_000).astype("f4")
    x[120_000:] += 1.5
    store = str(tmp_path / "s.zarr")
    z = write_store(store, x, 25_000)
    # a map fitted once: the data's own fit would move with every append
    fmap = kcpstream.RFF(32).fit(x[:4096, None].astype(np.float64))
    kw = {"features": fmap, "block_size": 500}
    ck = tmp_path / "ck"
    kcpstream.segment(store, checkpoint=ck, **kw)
    z.resize((340_000,))  # the last chunk filled, and one more
    z[300_000:] = rng.normal(size=40_000).astype("f4") * 3
    grown = kcpstream.segment(store, checkpoint=ck, **kw)
    assert grown.diagnostics.checkpoint == "updated"
    assert grown.diagnostics.chunks_read == 2 and grown.diagnostics.chunks_reused == 12
    _same(grown, kcpstream.segment(store, **kw))
    assert abs(int(grown.changepoints[-1]) - 300_000) < 500
    z.resize((290_000,))
    shrunk = kcpstream.segment(store, checkpoint=ck, **kw)
    assert shrunk.diagnostics.checkpoint == "updated"
    # zarr leaves the last chunk as it was (it reads up to the new shape): its
    # samples did not change, and 290 000 is on the block grid: nothing to read
    assert shrunk.diagnostics.chunks_read == 0 and shrunk.diagnostics.chunks_reused == 12
    _same(shrunk, kcpstream.segment(store, **kw))
    # only the current version's statistics are kept
    assert len([k for k in os.listdir(ck) if not k.startswith(".")]) == 1


def test_an_append_featurizes_only_the_new_samples_of_the_chunk_it_rewrote(tmp_path):
    """An append rewrites the last, partial chunk: its samples before the old end
    are checked against the digest the checkpoint kept of them, and the whole
    tiles among them are not featurized again; a sample changed there is seen,
    and the chunk is featurized whole."""
    rng = np.random.default_rng(11)
    x = rng.normal(size=290_000).astype("f4")  # chunks of 25 000: the last holds 15 000
    x[100_000:] += 1.0
    store = str(tmp_path / "s.zarr")
    z = write_store(store, x, 25_000)
    fmap = kcpstream.RFF(32).fit(x[:4096, None].astype(np.float64))
    kw = {"features": fmap, "block_size": 500, "tile": 4000}
    ck = tmp_path / "ck"
    kcpstream.segment(store, checkpoint=ck, **kw)
    z.resize((310_000,))
    z[290_000:] = rng.normal(size=20_000).astype("f4") * 3
    grown = kcpstream.segment(store, checkpoint=ck, **kw)
    d = grown.diagnostics
    assert d.checkpoint == "updated" and d.chunks_read == 2 and d.chunks_reused == 11
    # chunk 11 ([275 000, 300 000)) and chunk 12: the tiles of 4000 samples from 275 000
    # that end by 290 000 (three) are the checkpoint's
    assert d.samples_featurized_pass == 35_000 - 3 * 4_000
    _same(grown, kcpstream.segment(store, **kw))
    kcpstream.segment(store, checkpoint=tmp_path / "fresh", **kw)
    assert_same_stats(ck, tmp_path / "fresh")
    # the next append: the digest of the chunk the last one wrote (300 000 - 310 000)
    z.resize((330_000,))
    z[310_000:] = rng.normal(size=20_000).astype("f4") * 3
    again = kcpstream.segment(store, checkpoint=ck, **kw)
    assert again.diagnostics.samples_featurized_pass == 30_000 - 2 * 4_000
    _same(again, kcpstream.segment(store, **kw))
    # one sample of the old part of the last chunk changed with the append: no skip
    z.resize((340_000,))
    z[327_000] = 7.0  # (the last chunk is [325 000, 330 000) before the append)
    z[330_000:] = rng.normal(size=10_000).astype("f4") * 3
    edited = kcpstream.segment(store, checkpoint=ck, **kw)
    assert edited.diagnostics.chunks_read == 1
    assert edited.diagnostics.samples_featurized_pass == 15_000
    _same(edited, kcpstream.segment(store, **kw))
    kcpstream.segment(store, checkpoint=tmp_path / "fresh2", **kw)
    assert_same_stats(ck, tmp_path / "fresh2")


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    chunk=st.integers(1_500, 2_400),
    n=st.integers(20_000, 40_000),
    grow=st.integers(1, 15_000),
    edit=st.one_of(st.none(), st.floats(0, 1)),
    B=st.sampled_from([100, 300, 1000]),
    tile=st.sampled_from([250, 500, 1000]),
    seed=st.integers(0, 2**16),
)
def test_appends_keep_the_unchanged_samples_of_the_last_chunk_exactly(
    tmp_path_factory, chunk, n, grow, edit, B, tile, seed
):
    """Blocks smaller and larger than a tile, chunk ends on and off the block
    grid, and a sample of the old part of the last chunk changed or not.
    (Chunks of at most n / 8 samples: a larger one is featurized in slices,
    without a digest.)"""
    tmp = tmp_path_factory.mktemp("head")
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    store = str(tmp / "s.zarr")
    z = write_store(store, x, chunk)
    fmap = kcpstream.RFF(16).fit(x[:2048, None])
    kw = {"features": fmap, "block_size": B, "tile": tile, "n_bkps": 2}
    kcpstream.segment(store, checkpoint=tmp / "ck", **kw)
    last = (n - 1) // chunk * chunk  # the last chunk's start
    if edit is not None:
        z[last + int(edit * (n - 1 - last))] = 5.0
    z.resize((n + grow,))
    z[n:] = rng.normal(size=grow) + 1
    res = kcpstream.segment(store, checkpoint=tmp / "ck", **kw)
    assert res.diagnostics.checkpoint == "updated"
    # the samples of the chunks read: the last ones, from the old last chunk (or
    # the one before, whose block it shares) on
    final = (n + grow - 1) // chunk * chunk
    read = n + grow - (final - (res.diagnostics.chunks_read - 1) * chunk)
    # a whole tile of whole blocks held in an old last chunk that the append
    # rewrote (a full one is not read again: only the new samples are)
    if edit is None and n % chunk and n - last >= 3 * max(tile, B):
        assert res.diagnostics.samples_featurized_pass < read
    else:
        assert res.diagnostics.samples_featurized_pass <= read
    _same(res, kcpstream.segment(store, **kw))
    kcpstream.segment(store, checkpoint=tmp / "fresh", **kw)
    assert_same_stats(tmp / "ck", tmp / "fresh")


def test_another_codec_or_dtype_is_read_whole(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.normal(size=200_000).astype("f4")
    store = str(tmp_path / "s.zarr")
    write_store(store, x, 20_000)
    ck = tmp_path / "ck"
    kcpstream.segment(store, checkpoint=ck, block_size=400)
    write_store(store, x.astype("f8"), 20_000)  # same values, other dtype
    res = kcpstream.segment(store, checkpoint=ck, block_size=400)
    assert res.diagnostics.checkpoint == "written" and res.diagnostics.chunks_reused == 0
    z = zarr.create_array(store, shape=x.shape, chunks=(20_000,), dtype="f4", overwrite=True,
                          compressors=None)  # fmt: skip
    z[:] = x
    res = kcpstream.segment(store, checkpoint=ck, block_size=400)
    assert res.diagnostics.checkpoint == "written" and res.diagnostics.chunks_reused == 0


def _reference_plan(base_n, n, B, starts, step, old, new):
    """Block by block, sample by sample: the definition plan_reuse implements."""
    nb = -(-n // B)
    keep = np.zeros(nb, bool)
    for j in range(nb):
        a, b = j * B, min((j + 1) * B, n)
        same_extent = b == min((j + 1) * B, base_n)
        keep[j] = same_extent and all(old.get(i // step) == new.get(i // step) for i in range(a, b))
    redo = {j for j in range(nb) if not keep[j]}
    chunks = [
        c for c in range(len(starts) - 1)
        if any(starts[c] < min((j + 1) * B, n) and j * B < starts[c + 1] for j in redo)
    ]  # fmt: skip
    return keep, chunks


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base_n=st.integers(1, 400),
    n=st.integers(1, 400),
    B=st.integers(1, 40),
    step=st.integers(1, 60),
    chunk=st.integers(1, 90),
    changed=st.sets(st.integers(0, 10), max_size=4),
)
def test_plan_reuse_is_its_definition(base_n, n, B, step, chunk, changed):
    nb_base = -(-base_n // B)
    base = BlockStats(base_n, B, 0, np.zeros((nb_base, 1), np.int64), *np.zeros((3, nb_base)))
    old = {i: "v" for i in range(-(-base_n // step))}
    new = {i: ("w" if i in changed else "v") for i in range(-(-n // step))}
    starts = np.array([*range(0, n, chunk), n], dtype=np.int64)
    keep, chunks = _reference_plan(base_n, n, B, starts, step, old, new)
    plan = plan_reuse(base, n, starts, Units.direct(step, 0, n, new).changed(old))
    if not keep.any():
        assert plan is None
        return
    np.testing.assert_array_equal(plan.keep, keep)
    assert plan.chunks.tolist() == chunks


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    chunk=st.sampled_from([3_000, 7_000, 10_000]),
    read_chunks=st.sampled_from([None, 14_000, 30_000]),
    edits=st.lists(st.tuples(st.integers(0, 59_999), st.integers(1, 9_000)), max_size=3),
    grow=st.integers(-5_000, 12_000),
    seed=st.integers(0, 2**16),
)
def test_updated_statistics_are_those_of_a_run_from_scratch(
    tmp_path_factory, chunk, read_chunks, edits, grow, seed
):
    tmp = tmp_path_factory.mktemp("reuse")
    rng = np.random.default_rng(seed)
    x = rng.normal(size=60_000)
    store = str(tmp / "s.zarr")
    z = write_store(store, x, chunk)
    fmap = kcpstream.RFF(16).fit(x[:2048, None])
    # (a block cut by a chunk boundary sums its squared norms in two parts, one
    # rounding apart from one read whole: every run reads with the same chunks)
    kw = {"features": fmap, "block_size": 300, "n_bkps": 3, "chunks": read_chunks}
    kcpstream.segment(store, checkpoint=tmp / "ck", **kw)
    for a, length in edits:
        z[a : a + length] = rng.normal(size=len(range(a, min(a + length, 60_000)))) * 3
    if grow:
        z.resize((60_000 + grow,))
        if grow > 0:
            z[60_000:] = rng.normal(size=grow) + 2
    res = kcpstream.segment(store, checkpoint=tmp / "ck", **kw)
    _same(res, kcpstream.segment(store, **kw))
    kcpstream.segment(store, checkpoint=tmp / "fresh", **kw)
    assert_same_stats(tmp / "ck", tmp / "fresh")


def test_xarray_variables_opened_lazily_are_updated_too(tmp_path):
    xr = pytest.importorskip("xarray")
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200_000, 2))
    xr.Dataset({"v": (("time", "ch"), x)}).chunk({"time": 20_000}).to_zarr(tmp_path / "d.zarr")
    kw = {"checkpoint": tmp_path / "ck", "block_size": 400}
    kcpstream.segment(xr.open_zarr(tmp_path / "d.zarr", chunks=None)["v"], **kw)
    z = zarr.open_group(tmp_path / "d.zarr", mode="r+")["v"]
    z[160_000:180_000] = rng.normal(size=(20_000, 2)) * 3  # past the fit's epoch (2**17)
    res = kcpstream.segment(xr.open_zarr(tmp_path / "d.zarr", chunks=None)["v"], **kw)
    assert res.diagnostics.checkpoint == "updated" and res.diagnostics.chunks_read <= 3
    _same(
        res, kcpstream.segment(xr.open_zarr(tmp_path / "d.zarr", chunks=None)["v"], block_size=400)
    )


def test_the_epoch_keeps_fit_grid_and_min_size_while_a_series_grows():
    from kcpstream.engine.plan import Settings, block_size_of, default_min_size, planned_length
    from kcpstream.inputs.signal import EPOCH_MIN, epoch_length
    from kcpstream.selection.choose import Rule

    assert epoch_length(1000) == planned_length(1000) == 1000
    assert epoch_length(EPOCH_MIN) == planned_length(EPOCH_MIN) == EPOCH_MIN
    st = Settings(Rule("auto"), None, None, None, None, 2048, 4096, 0, None, False)
    for n in (EPOCH_MIN + 1, 10**8, 3 * 2**30 + 5):
        e = epoch_length(n)
        assert e & (e - 1) == 0 and e <= n < 2 * e  # a power of two, at least half
        assert planned_length(n) == 2 * e  # blocks and min_size: at most 2x longer
        grown = min(2 * e - 1, int(n * 1.01))
        assert epoch_length(grown) == e and default_min_size(grown) == default_min_size(n)
        assert block_size_of(grown, st) == block_size_of(n, st)


def test_an_append_to_a_long_archive_reads_only_the_new_chunks_with_the_defaults(tmp_path):
    """Past EPOCH_MIN samples the fit, the grid and min_size follow the epoch: a
    1 % append keeps all of them, and the checkpoint's statistics and exact
    splits before the old end hold."""
    rng = np.random.default_rng(5)
    n = 2**21 + 200_000
    x = rng.normal(size=n).astype("f4")
    for k, c in enumerate(range(300_000, n, 400_000)):
        x[c:] += 0.6 * (-1) ** k
    store = str(tmp_path / "s.zarr")
    z = write_store(store, x, 2**16)
    ck = tmp_path / "ck"
    full = kcpstream.segment(store, checkpoint=ck)
    assert full.diagnostics.chunks_read == full.diagnostics.n_chunks == 36
    assert full.diagnostics.fit_chunks_read > 0
    z.resize((n + n // 100,))
    z[n:] = rng.normal(size=n // 100).astype("f4") + 2
    grown = kcpstream.segment(store, checkpoint=ck)
    d = grown.diagnostics
    # the new samples all land in the last chunk, which the append rewrote
    assert d.checkpoint == "updated" and d.chunks_read == 1 and d.chunks_reused == 35
    assert d.samples_featurized_pass < 2**17 + 2**16
    # the fit (on unchanged chunks) is the checkpoint's
    assert d.fit_chunks_read == 0
    fresh = kcpstream.segment(store)
    _same(grown, fresh)
    assert fresh.diagnostics.fit_chunks_read == full.diagnostics.fit_chunks_read
    assert abs(int(grown.changepoints[-1]) - n) < 100
    # the exact splits refined before the old end were kept: far less is scanned again
    assert d.samples_scanned < fresh.diagnostics.samples_scanned / 2
    # a chunk under the fit sample rewritten (the first: a window starts at 0):
    # the fit is made again, on the new samples
    z[1_000:3_000] = rng.normal(size=2_000).astype("f4") * 5
    again = kcpstream.segment(store, checkpoint=ck)
    assert again.diagnostics.fit_chunks_read == full.diagnostics.fit_chunks_read
    _same(again, kcpstream.segment(store))


def test_a_fit_is_kept_only_from_this_release_and_with_any_integer_seed(tmp_path):
    rng = np.random.default_rng(4)
    n = 2**21 + 200_000
    x = rng.normal(size=n).astype("f4")
    x[1_000_000:] *= 2
    store = str(tmp_path / "s.zarr")
    z = write_store(store, x, 2**16)
    ck = tmp_path / "ck"
    kw = {"seed": np.int64(3), "pen": 1e5}  # a numpy integer is a seed like any other
    first = kcpstream.segment(store, checkpoint=ck, **kw)
    # the record says what the fit read, not how another release would fit it
    (key,) = [k for k in os.listdir(ck) if not k.startswith(".")]
    where = os.path.join(ck, key)
    checkpoint.write_attrs(where, {**checkpoint.read_attrs(where), "kcpstream": "0.0.1"})
    z.resize((n + 20_000,))
    z[n:] = rng.normal(size=20_000).astype("f4")
    grown = kcpstream.segment(store, checkpoint=ck, **kw)
    assert grown.diagnostics.fit_chunks_read == first.diagnostics.fit_chunks_read > 0
    _same(grown, kcpstream.segment(store, **kw))
    # this release's record, written by that run, is kept by the next
    z.resize((n + 40_000,))
    z[n + 20_000 :] = rng.normal(size=20_000).astype("f4")
    again = kcpstream.segment(store, checkpoint=ck, **kw)
    assert again.diagnostics.checkpoint == "updated" and again.diagnostics.fit_chunks_read == 0
    _same(again, kcpstream.segment(store, **kw))


def test_segments_an_append_makes_longer_are_scanned_from_the_samples_kept(tmp_path):
    # appended samples that continue the last regime leave the best splits of the
    # segments that end at the series' end where they were: refinement scans
    # the samples the checkpoint kept around them, and reads no stored chunk
    rng = np.random.default_rng(0)
    n = 2**21 + 200_000
    x = rng.normal(size=n).astype("f4")
    x[700_000:] += 1.0
    x[1_500_000:] -= 2.0
    store = str(tmp_path / "s.zarr")
    z = write_store(store, x, 2**16)
    pen = float(kcpstream.segment(store, n_bkps=2).gains.min()) / 4
    ck = tmp_path / "ck"
    full = kcpstream.segment(store, checkpoint=ck, pen=pen)
    assert full.diagnostics.samples_scanned > 0
    z.resize((n + n // 100,))
    z[n:] = (rng.normal(size=n // 100) - 1.0).astype("f4")
    grown = kcpstream.segment(store, checkpoint=ck, pen=pen)
    d = grown.diagnostics
    assert d.checkpoint == "updated" and d.fit_chunks_read == 0
    assert d.samples_scanned > 0 and d.samples_read_again == 0
    _same(grown, kcpstream.segment(store, pen=pen))
    # the same append to a checkpoint without the kept samples reads them again
    ck2 = tmp_path / "ck2"
    z.resize((n,))
    z[:] = x
    kcpstream.segment(store, checkpoint=ck2, pen=pen)
    (key,) = [k for k in os.listdir(ck2) if not k.startswith(".")]
    where = os.path.join(ck2, key)
    attrs = checkpoint.read_attrs(where)
    for name in ("kept_bounds", "kept_samples"):
        os.remove(os.path.join(where, f"{name}.npy"))
        del attrs["checksums"][name]
    checkpoint.write_attrs(where, attrs)
    z.resize((n + n // 100,))
    z[n:] = (rng.normal(size=n // 100) - 1.0).astype("f4")
    without = kcpstream.segment(store, checkpoint=ck2, pen=pen)
    assert without.diagnostics.checkpoint == "updated"
    assert without.diagnostics.samples_read_again > 0


@pytest.mark.parametrize("first_scans", [16, 1])  # 1: most segments scan their pieces in turns
def test_the_pieces_refinement_scanned_are_those_its_bounds_give(
    tmp_path, monkeypatch, first_scans
):
    """kept_pieces takes the pieces a segment refined in this run scanned, and
    recomputes them for the others: both are bound_segment's (those scanned
    in turns, the largest bounds first, are some of them)."""
    from kcpstream.engine import stored as engine
    from kcpstream.search import binseg

    monkeypatch.setattr(binseg, "FIRST_SCANS", first_scans)
    checked, ruled_out = [], []

    def spy(stats, known, min_size):
        for seg in known.values():
            if seg.exact and seg.scanned is not None:
                again = [
                    (r.piece_start, r.piece_end)
                    for r in bound_segment(stats, seg.start, seg.end, min_size).pending
                ]
                if len(again) <= first_scans:
                    assert seg.scanned == again
                else:  # in turns: in order within each, some perhaps ruled out
                    assert set(seg.scanned) <= set(again)
                    assert len(set(seg.scanned)) == len(seg.scanned)
                    ruled_out.append(len(again) - len(seg.scanned))
                checked.append(seg)
        return kept_pieces(stats, known, min_size)

    monkeypatch.setattr(engine, "kept_pieces", spy)
    rng = np.random.default_rng(12)
    x = rng.normal(size=400_000).astype("f4")
    x[130_000:] += 0.7
    x[290_000:] *= 2
    store = str(tmp_path / "s.zarr")
    z = write_store(store, x, 50_000)
    kw = {"features": kcpstream.RFF(32).fit(x[:4096, None].astype(np.float64)), "block_size": 256}
    kcpstream.segment(store, checkpoint=tmp_path / "ck", **kw)
    z.resize((404_000,))
    z[400_000:] = rng.normal(size=4_000).astype("f4") * 2 + 1
    res = kcpstream.segment(store, checkpoint=tmp_path / "ck", **kw)
    assert res.diagnostics.checkpoint == "updated" and len(checked) > 10
    assert (sum(ruled_out) > 0) == (first_scans == 1)  # pieces never read


def test_the_samples_kept_are_those_of_the_segments_that_end_at_the_end_or_at_its_splits():
    # an append moves the best split of a segment ending at the last sample by a
    # few samples when the last regime grows: the segments ending at that split
    # are then new, and their pieces are kept with those of the segments ending
    # at the last sample (each segment's pending pieces, by its bounds)
    rng = np.random.default_rng(1)
    n, B = 40_000, 256
    q = rng.integers(-(2**12), 2**12, size=(n, 3))
    q[10_000:] += 600
    q[25_000:] -= 1100
    q[33_000:] += 300
    blocks = [q[j * B : (j + 1) * B] for j in range(-(-n // B))]
    S = np.stack([b.sum(axis=0) for b in blocks])
    R = np.array([float(np.abs(np.cumsum(b - b.mean(axis=0), axis=0)).max()) * 3 for b in blocks])
    stats = BlockStats(n, B, 0, S, np.zeros(len(blocks)), np.ones(len(blocks)), R)
    b = B  # splits on the grid
    tree = {  # (start, end): split; the path's exact segments
        (0, n): 98 * b,
        (98 * b, n): 129 * b,  # ends at the last sample
        (129 * b, n): 143 * b,  # ends at the last sample
        (0, 98 * b): 39 * b,  # ends at a split of a segment ending at the last sample
        (98 * b, 129 * b): 113 * b,  # likewise
        (39 * b, 98 * b): 66 * b,  # likewise
        (0, 39 * b): 19 * b,  # ends at a split of a segment that does not end there
        (39 * b, 66 * b): 50 * b,  # likewise
    }
    known = {k: SegmentSplit(*k, gain=1.0, split=c) for k, c in tree.items()}
    min_size = 50

    def pieces(segments):
        out = set()
        for a, e in segments:
            out |= {
                (r.piece_start, r.piece_end) for r in bound_segment(stats, a, e, min_size).pending
            }
        return out

    kept = [(0, n), (98 * b, n), (129 * b, n), (0, 98 * b), (98 * b, 129 * b), (39 * b, 98 * b)]
    want, others = pieces(kept), pieces([(0, 39 * b), (39 * b, 66 * b)])
    assert want and others - want  # the bounds leave pieces to scan, in both kinds
    merged: list[tuple[int, int]] = []
    for a, e in sorted(want):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((a, e))
    assert kept_pieces(stats, known, min_size) == merged


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(st.tuples(st.integers(0, 2**21), st.integers(1, 50_000)), max_size=2),
    grow=st.integers(-40_000, 60_000),
    seed=st.integers(0, 2**16),
)
def test_updates_with_the_default_features_are_runs_from_scratch(
    tmp_path_factory, edits, grow, seed
):
    # the fit and the period check kept or made again, the samples kept for the
    # segments that end at the old end used or not, the path guessed from the
    # old one: always the change-points, gains and costs of a run from scratch
    tmp = tmp_path_factory.mktemp("defaults")
    rng = np.random.default_rng(seed)
    n = 2**21 + 100_000
    x = rng.normal(size=n).astype("f4")
    for c in rng.choice(np.arange(200_000, n - 200_000, 1_000), size=4, replace=False):
        x[c:] += rng.choice([-0.7, 0.7])
    store = str(tmp / "s.zarr")
    z = write_store(store, x, 2**16)
    kcpstream.segment(store, checkpoint=tmp / "ck")
    _edit_and_grow(z, rng, edits, grow, lambda: rng.normal(size=grow).astype("f4") + 1)
    _same(kcpstream.segment(store, checkpoint=tmp / "ck"), kcpstream.segment(store))


def _edit_and_grow(z, rng, edits, grow: int, new) -> None:
    """The store ``z`` rewritten at ``edits`` (``(start, length)``) and grown by
    ``grow`` samples (``new()`` when positive)."""
    n = z.shape[0]
    for a, length in edits:
        z[a : a + length] = rng.normal(size=len(range(a, min(a + length, n)))).astype("f4") * 2
    if grow:
        z.resize((n + grow,))
        if grow > 0:
            z[n:] = new()


def _cyclic(n: int, rng: np.random.Generator) -> np.ndarray:
    # a cycle short enough for windows of whole cycles (373 samples, 10 of 37.3)
    t = np.arange(n)
    x = np.sin(2 * np.pi * t / 37.3) + 0.8 * rng.normal(size=n)
    for c in rng.choice(np.arange(30_000, n - 30_000, 1_000), size=2, replace=False):
        x[c:] += rng.choice([-0.3, 0.3])
    return x.astype("f4")


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(st.tuples(st.integers(0, 2**17), st.integers(1, 20_000)), max_size=2),
    grow=st.integers(-20_000, 30_000),
    seed=st.integers(0, 2**16),
)
def test_updates_of_a_cycle_segmented_in_windows_are_runs_from_scratch(
    tmp_path_factory, edits, grow, seed
):
    # the windows' statistics kept where their samples are (both shape parts'),
    # searched on their blocks, where a run from scratch holds every window in
    # memory: the same change-points, gains and costs
    tmp = tmp_path_factory.mktemp("cyclic")
    rng = np.random.default_rng(seed)
    n = 2**17 + 30_000
    x = _cyclic(n, rng)
    store = str(tmp / "s.zarr")
    z = write_store(store, x, 2**14)
    kcpstream.segment(store, checkpoint=tmp / "ck")
    _edit_and_grow(z, rng, edits, grow, lambda: _cyclic(n + grow, rng)[n:])
    again = kcpstream.segment(store, checkpoint=tmp / "ck")
    fresh = kcpstream.segment(store)
    # (an edit may move the period found: windows of another length)
    assert again.params["window"] == fresh.params["window"]
    assert again.params["shape"] == fresh.params["shape"]
    _same(again, fresh)
    assert again.pvalues.tolist() == fresh.pvalues.tolist()


@pytest.mark.parametrize("n, chunk", [(300_000, 2**14), (2_000_000, 2**16)])
def test_a_one_percent_append_to_a_cycle_reads_the_new_chunks_only(tmp_path, n, chunk):
    """Segmented in windows of a cycle, with both shape parts: their fits (on
    the windows of the series' epoch) and their statistics are kept."""
    rng = np.random.default_rng(n + chunk)
    grown = n + n // 100
    x = _cyclic(grown, rng)
    store = str(tmp_path / "s.zarr")
    z = write_store(store, x[:n], chunk)
    ck = tmp_path / "ck"
    first = kcpstream.segment(store, checkpoint=ck)
    z.resize((grown,))
    z[n:] = x[n:]
    again = kcpstream.segment(store, checkpoint=ck)
    d = again.diagnostics
    assert first.params["window"] == again.params["window"] == 373
    assert d.checkpoint == "updated" and d.fit_chunks_read == 0
    # both maps read the old last chunk and the new ones, once each
    new_chunks = -(-grown // chunk) - n // chunk
    assert d.chunks_read <= 2 * new_chunks
    assert d.samples_featurized <= 2 * (grown - n + chunk)
    _same(again, kcpstream.segment(store))


@pytest.mark.parametrize("victim", ["slab_version", "block_q", "prefix.0"])
def test_a_damaged_earlier_version_is_not_a_base(tmp_path, victim):
    rng = np.random.default_rng(6)
    x = rng.normal(size=200_000)
    store = str(tmp_path / "s.zarr")
    z = write_store(store, x, 20_000)
    ck = tmp_path / "ck"
    kcpstream.segment(store, checkpoint=ck, block_size=400)
    (key,) = [k for k in os.listdir(ck) if not k.startswith(".")]
    chunk = ck / key / f"{victim}.npy"
    raw = bytearray(open(chunk, "rb").read())
    raw[len(raw) // 2] ^= 0x55
    open(chunk, "wb").write(bytes(raw))
    z[150_000:160_000] = rng.normal(size=10_000) * 3
    res = kcpstream.segment(store, checkpoint=ck, block_size=400)
    assert res.diagnostics.checkpoint == "written" and res.diagnostics.chunks_reused == 0
    _same(res, kcpstream.segment(store, block_size=400))


def test_series_of_one_store_selected_lazily_never_share_statistics(tmp_path):
    xr = pytest.importorskip("xarray")
    rng = np.random.default_rng(7)
    x = rng.normal(size=(100_000, 2))
    x[50_000:, 1] *= 3  # only sensor b changes
    ds = xr.Dataset({"v": (("time", "sensor"), x)}, coords={"sensor": ["a", "b"]})
    ds.chunk({"time": 10_000}).to_zarr(tmp_path / "d.zarr")
    lazy = xr.open_zarr(tmp_path / "d.zarr", chunks=None)
    kw = {"checkpoint": tmp_path / "ck", "block_size": 200}
    a = kcpstream.segment(lazy["v"].sel(sensor="a"), **kw)
    b = kcpstream.segment(lazy[["v"]].isel(sensor=1), **kw)  # a Dataset of one variable
    assert a.diagnostics.checkpoint == b.diagnostics.checkpoint == "written"
    _same(b, kcpstream.segment(x[:, 1], block_size=200))
    assert len([k for k in os.listdir(tmp_path / "ck") if not k.startswith(".")]) == 2


@pytest.mark.parametrize(
    "n, chunk",
    [(100_000, 2**12), (100_000, 2**14), (500_000, 2**16), (500_000, 2**18), (2_000_000, 2**16),
     (2_000_000, 2**20)],
)  # fmt: skip
def test_a_one_percent_append_featurizes_the_new_samples_only_at_any_chunking(tmp_path, n, chunk):
    """With the defaults: the fit (drawn from the series' epoch past 2**16
    samples) and the grid stay, a chunk featurized in slices keeps its digest,
    so only the appended samples are featurized by the pass."""
    rng = np.random.default_rng(n + chunk)
    grown = n + n // 100
    x = rng.normal(size=grown).astype("f4")
    x[n // 3 :] += 1.0
    store = str(tmp_path / "s.zarr")
    z = write_store(store, x[:n], chunk)
    ck = tmp_path / "ck"
    kcpstream.segment(store, checkpoint=ck)
    z.resize((grown,))
    z[n:] = x[n:]
    again = kcpstream.segment(store, checkpoint=ck)
    d = again.diagnostics
    assert d.checkpoint == "updated"
    assert d.chunks_read <= 2 and d.chunks_reused >= -(-n // chunk) - 1
    # the new samples, and those of the old last chunk short of a whole tile
    assert d.samples_featurized_pass <= grown - n + DEFAULT_TILE + again.params["block_size"]
    _same(again, kcpstream.segment(store))


def test_a_rare_flag_fitted_on_the_wider_sample_keeps_its_fit_after_an_append(tmp_path):
    """A flag whose fit sample holds no event is fitted on the wider sample
    (it was an error: "all samples of the fit sample are equal"); the record
    says so, and an append that leaves those windows alone keeps the fit."""
    from kcpstream.engine.autofeatures import stretch_windows
    from kcpstream.engine.fitting import wide_fit_windows
    from kcpstream.inputs.signal import fit_windows

    n = 300_000
    x = np.full(n, 2.0, dtype="f4")  # (not the fill value: every chunk is written)
    narrow = fit_windows(n) + stretch_windows(n, 2048)[0]
    wide = [w for w in wide_fit_windows(n) if not any(a < w[1] and w[0] < b for a, b in narrow)]
    x[[a + 100 for a, _ in wide[::3]]] = 3.0  # events in the wider sample only
    x[[n - 5_000, n - 70_000]] = 3.0
    store = str(tmp_path / "flag.zarr")
    z = write_store(store, x, 2**14)
    ck = tmp_path / "ck"
    full = kcpstream.segment(store, checkpoint=ck)
    assert full.n_changepoints == 0 and full.diagnostics.fit_chunks_read > 0
    z.resize((n + 3_000,))
    z[n:] = 2.0
    grown = kcpstream.segment(store, checkpoint=ck)
    assert grown.diagnostics.checkpoint == "updated" and grown.diagnostics.fit_chunks_read == 0
    assert grown.n_changepoints == 0
    # a series with no other value in the wider sample is still refused, clearly
    with pytest.raises(kcpstream.InputError, match="samples of the fit sample are equal"):
        kcpstream.segment(np.zeros(100_000))


def test_a_series_searched_in_memory_keeps_only_statistics_of_one_vector_a_block(tmp_path):
    # statistics on a grid of 64-sample blocks, written by a call that asked for
    # them, are not what a search in memory gives: an update with the defaults
    # featurizes the series whole, as a fresh call does
    rng = np.random.default_rng(11)
    x = rng.normal(size=60_000).astype("f4")
    x[35_000:] += 0.1
    store = str(tmp_path / "s.zarr")
    z = write_store(store, x, 2**12)
    kw = {"features": "quadrature"}  # (its fit reads 8 windows of 256 samples, not these)
    kcpstream.segment(store, checkpoint=tmp_path / "ck", block_size=64, **kw)
    z[40_000:41_000] = rng.normal(size=1_000).astype("f4")
    again = kcpstream.segment(store, checkpoint=tmp_path / "ck", **kw)
    fresh = kcpstream.segment(store, **kw)
    assert fresh.diagnostics.in_memory and again.diagnostics.in_memory
    _same(again, fresh)
    assert again.pvalues.tolist() == fresh.pvalues.tolist()
