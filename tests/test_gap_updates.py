"""A stored series with gaps is updated as one without: an append, a rewrite
in place or a gap back-filled reads only the chunks that changed (to find
their gaps, and for the data pass), and the result is that of a run from
scratch on the same store."""

from __future__ import annotations

import logging
import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kcpstream
from kcpstream.persist import checkpoint

from .stored import assert_same_stats, write_store


def _series(n, seed, gaps=True):
    """Two regimes, with a run of NaN across a chunk boundary, dropped samples
    and a run at the end (an append then continues a gap)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    x[int(0.6 * n) :] += 1.5
    if gaps:
        x[rng.choice(n, n // 50, replace=False)] = np.nan
        a = int(rng.integers(n // 10, n // 2))
        x[a : a + int(rng.integers(100, n // 8))] = np.nan
        x[n - int(rng.integers(1, 50)) :] = np.nan
    return x


def _same(res, ref):
    np.testing.assert_array_equal(res.changepoints, ref.changepoints)
    np.testing.assert_array_equal(res.gains, ref.gains)
    np.testing.assert_array_equal(res.path_costs, ref.path_costs)
    np.testing.assert_array_equal(res.pvalues, ref.pvalues)
    np.testing.assert_array_equal(res.earliest, ref.earliest)
    for name in ("n_missing", "longest_gap", "missing_share"):
        assert getattr(res.diagnostics, name) == getattr(ref.diagnostics, name)


KW = {"features": "rff:16", "seed": 0, "block_size": 128}
N, CHUNK = 120_000, 8_000
#: a map fitted beforehand: a rewrite under the fit sample would otherwise refit it
FITTED = kcpstream.RFF(16, seed=0).fit(np.random.default_rng(0).normal(size=(999, 1)))


def _archive(tmp_path, x):
    """``x`` in a store of chunks of :data:`CHUNK`: the array, its path, a checkpoint folder."""
    store = str(tmp_path / "s.zarr")
    return write_store(store, x, CHUNK), store, tmp_path / "ck"


def _append(z, add):
    """``add`` appended to the store's array ``z``."""
    n = z.shape[0]
    z.resize((n + len(add),))
    z[n:] = add


def test_an_append_reads_only_the_chunks_that_changed(tmp_path):
    z, store, ck = _archive(tmp_path, _series(N, 1))
    first = kcpstream.segment(store, checkpoint=ck, **KW)
    assert first.diagnostics.checkpoint == "written"
    assert first.diagnostics.gap_chunks_read == N // CHUNK  # every chunk, once
    # a 5 % append, with gaps of its own
    add = np.random.default_rng(2).normal(size=6_000) + 1.5
    add[1_000:1_400] = np.nan
    _append(z, add)
    res = kcpstream.segment(store, checkpoint=ck, **KW)
    d = res.diagnostics
    assert d.checkpoint == "updated"
    assert d.gap_chunks_read == 1  # the last chunk, which the append rewrote
    # the pass: that chunk and the one before (a block of valid samples spans both)
    assert d.chunks_read <= 2 and d.chunks_reused >= N // CHUNK - 2
    assert d.samples_featurized_pass <= 2 * CHUNK
    _same(res, kcpstream.segment(store, **KW))


def test_a_gap_back_filled_keeps_the_chunks_before_it(tmp_path):
    x = _series(N, 3)
    x[90_000:90_500] = np.nan
    z, store, ck = _archive(tmp_path, x)
    kcpstream.segment(store, checkpoint=ck, **KW)
    z[90_000:90_500] = np.random.default_rng(4).normal(size=500) + 1.5  # late data arrives
    res = kcpstream.segment(store, checkpoint=ck, **KW)
    d = res.diagnostics
    assert d.checkpoint == "updated" and d.gap_chunks_read == 1
    # the valid samples after it moved: read again; those before it kept
    assert d.chunks_reused >= 90_000 // CHUNK - 1
    _same(res, kcpstream.segment(store, **KW))


def test_a_rewrite_that_keeps_the_gaps_keeps_the_chunks_after_it(tmp_path):
    z, store, ck = _archive(tmp_path, _series(N, 5))
    # (a map fitted beforehand: a rewrite under the fit sample would refit it)
    kw = {**KW, "features": FITTED}
    kcpstream.segment(store, checkpoint=ck, **kw)
    part = np.array(z[40_000:48_000])
    part[~np.isnan(part)] *= 3  # corrected values, the same samples missing
    z[40_000:48_000] = part
    res = kcpstream.segment(store, checkpoint=ck, **kw)
    d = res.diagnostics
    assert d.checkpoint == "updated" and d.gap_chunks_read == 1
    assert d.chunks_read <= 3
    _same(res, kcpstream.segment(store, **kw))


def test_the_first_gap_appended_is_found_by_the_pass_not_by_a_read_of_all(tmp_path):
    z, store, ck = _archive(tmp_path, _series(N, 6, gaps=False))
    kcpstream.segment(store, checkpoint=ck, **KW)
    add = np.random.default_rng(7).normal(size=6_000) + 1.5
    add[2_000:2_100] = np.nan
    _append(z, add)
    res = kcpstream.segment(store, checkpoint=ck, **KW)
    # the pass over the chunks that changed met the NaN: no other chunk is read
    # to find gaps (the series of valid samples is new: its statistics are
    # computed once, in full)
    assert res.diagnostics.gap_chunks_read == 0 and res.diagnostics.n_missing == 100
    _same(res, kcpstream.segment(store, **KW))
    again = kcpstream.segment(store, checkpoint=ck, **KW)
    assert again.diagnostics.checkpoint == "loaded"


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    chunk=st.sampled_from([3_000, 7_000, 10_000]),
    edits=st.lists(
        st.tuples(st.integers(0, 59_999), st.integers(1, 6_000), st.booleans()), max_size=3
    ),
    grow=st.integers(-4_000, 9_000),
    seed=st.integers(0, 2**16),
    absent=st.booleans(),
)
def test_updated_statistics_with_gaps_are_those_of_a_run_from_scratch(
    tmp_path_factory, chunk, edits, grow, seed, absent
):
    """Appends, shrinks, rewrites that make or fill gaps (chunks all NaN
    written, or absent from a store whose fill value is NaN): the updated
    checkpoint holds the statistics a run from scratch writes, bit for bit."""
    tmp = tmp_path_factory.mktemp("gapreuse")
    rng = np.random.default_rng(seed)
    x = _series(60_000, seed)
    x[2 * chunk : 3 * chunk] = np.nan  # a chunk all missing (not written when absent)
    store = str(tmp / "s.zarr")
    z = write_store(store, x, chunk, np.nan if absent else 0.0)
    assert (z.nchunks_initialized < z.nchunks) == absent
    kw = {"features": kcpstream.RFF(16).fit(rng.normal(size=(2048, 1))), "block_size": 300}
    kw.update(n_bkps=3, missing="skip" if absent else "error")
    kcpstream.segment(store, checkpoint=tmp / "ck", **kw)
    for a, length, gap in edits:
        size = len(range(a, min(a + length, 60_000)))
        z[a : a + length] = np.nan if gap else rng.normal(size=size) * 3
    if grow:
        z.resize((60_000 + grow,))
        if grow > 0:
            new = rng.normal(size=grow) + 2
            new[: grow // 3] = np.nan
            z[60_000:] = new
    res = kcpstream.segment(store, checkpoint=tmp / "ck", **kw)
    _same(res, kcpstream.segment(store, **kw))
    kcpstream.segment(store, checkpoint=tmp / "fresh", **kw)
    assert_same_stats(tmp / "ck", tmp / "fresh")


def test_positions_mapped_back_once_are_kept_for_the_chunks_that_did_not_change(tmp_path, caplog):
    """A chunk with more runs of missing samples than the gap map keeps is read
    again to map a change-point in it back; the checkpoint keeps the indices
    found, so neither a run on the same store nor an append reads it again.
    A new gap before it moves its valid samples by one, onto a position that
    held the sample before the change: mapped again, never taken as kept."""
    rng = np.random.default_rng(9)
    x = rng.normal(size=100_000)
    x[55_000:] += 2
    x[50_000:60_000:2] = np.nan  # 5000 runs in the change-point's chunk
    store = str(tmp_path / "s.zarr")
    z = write_store(store, x, 10_000)
    ck = tmp_path / "ck"
    # (a map fitted beforehand: the new gap below lies under the fit sample)
    kw = {**KW, "n_bkps": 1, "features": FITTED}
    caplog.set_level(logging.INFO, logger="kcpstream")
    first = kcpstream.segment(store, checkpoint=ck, **kw)
    assert first.changepoints.tolist() == [55_001]  # (55 000 is missing)
    assert "gaps: 1 chunks read to map positions back" in caplog.messages
    caplog.clear()
    again = kcpstream.segment(store, checkpoint=ck, **kw)
    assert again.diagnostics.checkpoint == "loaded"
    _append(z, rng.normal(size=6_000) + 2)
    update = kcpstream.segment(store, checkpoint=ck, **kw)
    assert update.diagnostics.checkpoint == "updated"
    assert not [m for m in caplog.messages if "map positions back" in m]
    _same(update, kcpstream.segment(store, **kw))
    np.testing.assert_array_equal(again.earliest, first.earliest)
    z[20_000] = np.nan  # a sample lost: one valid sample fewer before the change
    caplog.clear()
    filled = kcpstream.segment(store, checkpoint=ck, **kw)
    assert filled.diagnostics.checkpoint == "updated"
    assert "gaps: 1 chunks read to map positions back" in caplog.messages
    assert filled.changepoints.tolist() == [55_001]
    _same(filled, kcpstream.segment(store, **kw))


def test_gap_records_are_pruned_by_kind(tmp_path):
    """Records of inputs without a store keep the newest GAP_RECORDS; one
    record per stored array is kept apart from them (a batch of sensors
    keeps one each)."""
    record = {"starts": [0, 4], "summary": [[3, -1, 1, 0, 0, 1]]}

    def name(k):  # (records are named by their first 32 hex digits)
        return f"{k:032x}" * 2

    for k in range(3):
        checkpoint.save_gaps(tmp_path, name(k), record, name(k + 100), (8, {0: "v"}))
    for k in range(checkpoint.GAP_RECORDS + 5):
        checkpoint.save_gaps(tmp_path, name(k + 500), record)
    names = os.listdir(tmp_path / "gaps")
    assert sum(n.startswith("lineage-") for n in names) == 3
    assert sum(not n.startswith("lineage-") for n in names) == checkpoint.GAP_RECORDS
    for k in range(3):  # each stored array's record, for its own version or a later one
        got = checkpoint.load_gaps(tmp_path, "f" * 64, name(k + 100))
        assert got["identity"] == name(k) and got["slabs"] == {"0": "v"}
