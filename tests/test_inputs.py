"""Every kind of input, chunk invariance, and the fit sample's reads."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr
from hypothesis import given, settings
from hypothesis import strategies as st

import kcpstream
from kcpstream import datasets
from kcpstream.inputs.signal import as_signal

from .helpers import CountingStore


@pytest.fixture(scope="module")
def signal():
    return datasets.piecewise_constant(60_000, 6, jump=3.0, seed=3)


@pytest.fixture(scope="module")
def reference(signal):
    return kcpstream.segment(signal.x, n_bkps=6, chunks=len(signal.x))  # one chunk


def _zarr(tmp_path, x, chunks):
    return datasets.write_zarr(x, tmp_path / "s.zarr", chunks=chunks)


def test_one_chunk_finds_the_truth(signal, reference):
    assert reference.diagnostics.n_chunks == 1
    assert np.abs(reference.changepoints - signal.changepoints).max() < 60


@pytest.mark.parametrize(
    "chunks",
    [(7_001, 13_000, 999, 20_000, 19_000), (1,) * 5 + (59_995,), (30_000, 30_000)],
    ids=["irregular", "tiny-then-huge", "halves"],
)
def test_dask_chunkings_give_the_same_result(signal, reference, chunks):
    res = kcpstream.segment(da.from_array(signal.x, chunks=(chunks,)), n_bkps=6)
    assert res.diagnostics.n_chunks == len(chunks)
    assert res.changepoints.tolist() == reference.changepoints.tolist()
    assert res.gains.tolist() == reference.gains.tolist()
    assert res.features == reference.features


@pytest.mark.parametrize("zchunks", [4_096, 25_000])
def test_zarr_store_path_array_and_dask(tmp_path, signal, reference, zchunks):
    arr = _zarr(tmp_path, signal.x, zchunks)
    by_path = kcpstream.segment(str(tmp_path / "s.zarr"), variable="x", n_bkps=6)
    by_array = kcpstream.segment(arr, n_bkps=6)
    by_dask = kcpstream.segment(da.from_zarr(arr), n_bkps=6)
    for res in (by_path, by_array, by_dask):
        assert res.changepoints.tolist() == reference.changepoints.tolist()
        assert res.gains.tolist() == reference.gains.tolist()


def test_zarr_group_with_a_single_array_needs_no_variable(tmp_path, signal, reference):
    _zarr(tmp_path, signal.x, 10_000)
    res = kcpstream.segment(tmp_path / "s.zarr", n_bkps=6)
    assert res.changepoints.tolist() == reference.changepoints.tolist()


def test_multivariate_and_dataarray(signal):
    x2 = np.stack([signal.x, np.roll(signal.x, 5) * 0.5], axis=1)
    res = kcpstream.segment(x2, n_bkps=6)
    arr = xr.DataArray(x2.T, dims=("channel", "time"))  # time not first: dim= says which
    res_xr = kcpstream.segment(arr, dim="time", n_bkps=6)
    assert res_xr.changepoints.tolist() == res.changepoints.tolist()


def test_fit_sample_reads_few_chunks_spread_over_the_signal(tmp_path, signal):
    _zarr(tmp_path, signal.x, 2_000)  # 30 chunks
    store = CountingStore(zarr.storage.LocalStore(tmp_path / "s.zarr"))
    arr = zarr.open_group(store, mode="r")["x"]
    sample = as_signal(arr).sample(max_points=2048)
    reads = store.chunk_reads("x")
    assert sample.shape == (2048, 1)
    assert sum(reads.values()) == len(reads) <= 16  # each chunk once, at most 2 per window
    idx = sorted(int(k.rsplit("/", 1)[1]) for k in reads)
    assert idx[0] == 0 and idx[-1] == 29  # windows spread from the start to the end


@pytest.mark.parametrize("chunks", [60_000, 1_000, 7_777])
def test_fit_sample_does_not_depend_on_chunking(signal, chunks):
    base = as_signal(signal.x, chunks=60_000).sample()
    assert np.array_equal(as_signal(signal.x, chunks=chunks).sample(), base)


@pytest.mark.parametrize("block_size", [None, 64])  # in memory, the block grid
def test_data_pass_reads_each_chunk_once(tmp_path, signal, block_size):
    _zarr(tmp_path, signal.x, 2_000)
    store = CountingStore(zarr.storage.LocalStore(tmp_path / "s.zarr"))
    arr = zarr.open_group(store, mode="r")["x"]
    res = kcpstream.segment(arr, n_bkps=6, block_size=block_size)
    assert res.diagnostics.in_memory == (block_size is None)
    reads = store.chunk_reads("x")
    assert len(reads) == 30  # every chunk read
    # fit (<= 8 chunks) + one pass + the refinement reads of a few blocks
    assert sum(reads.values()) <= 30 + 8 + res.diagnostics.pieces_scanned


def test_seed_changes_the_features_and_fixes_them(signal):
    a = kcpstream.segment(signal.x, n_bkps=3, features="rff:64", seed=1)
    b = kcpstream.segment(signal.x, n_bkps=3, features="rff:64", seed=1)
    c = kcpstream.segment(signal.x, n_bkps=3, features="rff:64", seed=2)
    assert a.features == b.features and a.changepoints.tolist() == b.changepoints.tolist()
    assert not np.array_equal(a.features.weights_, c.features.weights_)


def test_unfitted_map_passed_in_stays_unfitted(signal):
    fmap = kcpstream.RFF(16)
    res = kcpstream.segment(signal.x, features=fmap, n_bkps=2)
    assert not fmap.is_fitted and res.features.is_fitted


def test_fitted_map_is_used_as_is(signal):
    fmap = kcpstream.RFF(16, seed=4).fit(signal.x[:1000])
    res = kcpstream.segment(signal.x, features=fmap, n_bkps=2)
    assert res.features == fmap


def test_result_round_trips_through_json(reference):
    back = kcpstream.Segmentation.from_json(reference.to_json())
    assert back.changepoints.tolist() == reference.changepoints.tolist()
    assert back.path_costs.tolist() == reference.path_costs.tolist()
    assert back.features == reference.features
    assert back.diagnostics == reference.diagnostics


def test_what_from_json_cannot_read_is_one_clear_line(tmp_path, reference):
    # (a KeyError or a JSONDecodeError before, naming nothing)
    from kcpstream import BatchSegmentation, InputError, Segmentation

    batch = BatchSegmentation(["sensor"], [{"sensor": "a"}], [reference]).to_json()
    with pytest.raises(InputError, match="batch's result .* BatchSegmentation.from_json"):
        Segmentation.from_json(batch)
    with pytest.raises(InputError, match="one series' result: .*Segmentation.from_json"):
        BatchSegmentation.from_json(reference.to_json())
    assert BatchSegmentation.from_json(batch)["a"].changepoints.tolist() == (
        reference.changepoints.tolist()
    )
    path = tmp_path / "r.json"
    path.write_text(reference.to_json())
    for as_path in (path, str(path)):
        with pytest.raises(InputError, match=r"not a file's path: .*open\("):
            Segmentation.from_json(as_path)
    with pytest.raises(InputError, match="not JSON"):
        Segmentation.from_json("changepoints: 3")
    with pytest.raises(InputError, match="no 'changepoints'"):
        Segmentation.from_json("{}")


def test_path_costs_decrease_by_the_gains(signal):
    greedy = kcpstream.segment(signal.x, pen=200.0)  # binary segmentation's own path
    assert greedy.n_changepoints == 6
    costs = greedy.path_costs
    gains_in_order = greedy.gains[np.argsort(np.argsort(greedy.order))]
    assert len(costs) == len(greedy.order) + 1
    np.testing.assert_allclose(np.diff(costs), -gains_in_order, rtol=1e-6)


def test_the_change_points_are_the_best_among_the_paths_candidates(signal, reference):
    # the path has 12 splits (twice n_bkps); its costs are the best over them for each D
    assert reference.selection.d_max == len(reference.path_costs) == 13
    assert np.all(np.diff(reference.path_costs) <= 0)
    np.testing.assert_allclose(reference.path_costs[6], reference.cost, rtol=1e-12)
    greedy = kcpstream.segment(signal.x, n_bkps=6, d_max=7, chunks=len(signal.x))
    assert reference.cost <= greedy.cost * (1 + 1e-12)
    assert reference.path_costs[6] <= greedy.path_costs[6] * (1 + 1e-12)


def test_chunks_holding_changes_stay_cached_when_the_cache_is_small(tmp_path, signal):
    _zarr(tmp_path, signal.x, 2_000)  # 30 chunks of 16 kB; the cache keeps 9 of them
    store = CountingStore(zarr.storage.LocalStore(tmp_path / "s.zarr"))
    arr = zarr.open_group(store, mode="r")["x"]
    # the pointwise map: the default's period stretches (8 x 4096 samples) would not
    # fit this cache, and this test is about what the data pass keeps for refinement
    with dask.config.set(scheduler="threads"):  # blocks of 16: pieces stay inside chunks
        res = kcpstream.segment(
            arr, n_bkps=6, d_max=7, cache_bytes=200_000, block_size=16, features="quadrature"
        )
    assert np.abs(res.changepoints - signal.changepoints).max() < 60
    reads = store.chunk_reads("x")
    inside = {int(c) // 2_000 for c in signal.changepoints if 100 <= int(c) % 2_000 <= 1_900}
    assert len(inside) >= 4
    # refinement scans around every change; the chunks that hold one were kept
    assert all(reads[f"x/c/{i}"] == 1 for i in inside)
    assert sum(reads.values()) <= 30 + 2  # one change sits 4 samples from a chunk's edge


def test_sample_cache_joins_consecutive_chunks_for_a_piece_across_their_edge():
    from kcpstream.passes.cache import SampleCache

    x = np.arange(400.0)[:, None]
    cache = SampleCache(block_size=16)
    for a in (0, 100, 200):
        cache.add_chunk(a, x[a : a + 100])
    assert cache.get(40, 60).base is not None  # inside one chunk: a view
    np.testing.assert_array_equal(cache.get(90, 110), x[90:110])
    np.testing.assert_array_equal(cache.get(50, 250), x[50:250])
    assert cache.get(290, 310) is None  # [300, 400) is not cached
    gap = SampleCache(block_size=16)
    for a in (0, 200):
        gap.add_chunk(a, x[a : a + 100])
    assert gap.get(90, 110) is None and gap.get(50, 250) is None  # [100, 200) is missing


def test_a_cached_piece_does_not_keep_the_run_it_was_read_with():
    # refinement reads a whole chunk for a piece of one block: a view of it would
    # keep the chunk (4 MiB for 16 KiB at 10^8) while the budget counts the piece
    import weakref

    from kcpstream.passes.cache import SampleCache

    cache = SampleCache(block_size=16, max_bytes=2**20)
    for i in range(50):
        run = np.random.default_rng(i).standard_normal((100_000, 1))  # 800 kB, > the budget
        alive = weakref.ref(run)
        cache.add_piece(i * 100_000 + 16, i * 100_000 + 32, run[16:32])
        np.testing.assert_array_equal(cache.get(i * 100_000 + 16, i * 100_000 + 32), run[16:32])
        del run  # (freed by its count of references: a full collection in a
        assert alive() is None  # test process of thousands of objects took 0.7 s)
    assert cache.nbytes == 50 * 16 * 8


def test_a_refinement_read_keeps_the_score_of_a_cached_chunk_and_caches_the_others():
    # a run read for a piece of its second chunk holds the first too, which the
    # data pass cached with its score: offering it again would reset the score
    import dask.array as da

    from kcpstream.inputs.signal import as_signal
    from kcpstream.passes.cache import SampleCache
    from kcpstream.passes.scan import scan_run
    from kcpstream.search.requests import ScanRequest

    x = np.random.default_rng(4).normal(size=300)
    reader = as_signal(da.from_array(x, chunks=100)).reader
    fmap = kcpstream.RFF(8).fit(x[:, None])
    cache = SampleCache(block_size=10, max_bytes=2**20)
    cache.add_chunk(0, x[:100, None], score=5.0)
    zero = np.zeros(8, np.int64)
    req = ScanRequest((0, 200), 120, 140, zero, zero)
    _, read = scan_run(reader.run(0, 1), fmap, [req], 2, 64, cache.handle)
    assert read and cache._scores[0] == 5.0
    np.testing.assert_array_equal(cache.chunk(100), x[100:200, None])


def test_sample_cache_keeps_the_highest_scored_chunks_within_its_budget():
    from kcpstream.passes.cache import SampleCache

    cache = SampleCache(block_size=10, max_bytes=4 * 800)  # chunks: 3 of 800 bytes
    chunk = [np.full((100, 1), float(i)) for i in range(5)]
    assert cache.add_chunk(0, chunk[0], score=1.0)
    assert cache.add_chunk(100, chunk[1], score=5.0)
    assert cache.add_chunk(200, chunk[2], score=3.0)
    assert cache.add_chunk(300, chunk[3], score=4.0)  # drops the chunk scored 1
    assert not cache.add_chunk(400, chunk[4], score=2.0)  # lower than every kept chunk
    assert cache.chunk(0) is None and cache.chunk(400) is None
    assert cache.chunk(300) is chunk[3] and cache.chunk_bytes == 3 * 800 <= cache.chunk_budget
    assert cache.add_chunk(200, chunk[2], score=0.5)  # offered again: new score
    assert cache.add_chunk(0, chunk[0], score=1.0)  # now outscores it
    assert cache.chunk(200) is None and cache.chunk(0) is chunk[0]
    np.testing.assert_array_equal(cache.get(120, 150), chunk[1][20:50])
    # pieces share what is left of the budget and are dropped first
    cache.add_piece(400, 490, np.zeros((90, 1)))
    assert cache.get(400, 450) is not None and cache.nbytes <= cache.max_bytes
    cache.add_piece(500, 590, np.zeros((90, 1)))
    assert cache.get(400, 450) is None and cache.get(500, 590) is not None
    assert cache.nbytes <= cache.max_bytes


def test_a_run_of_pieces_is_served_from_the_pieces_kept():
    from kcpstream.passes.cache import SampleCache

    # refinement keeps the pieces of a run scanned as one request one by one; a
    # later run over some of them is joined from them, a gap is not served
    cache = SampleCache(block_size=10, max_bytes=2**20)
    x = np.arange(100, dtype=np.float32)[:, None]
    for a, b in ((23, 30), (30, 40), (40, 50), (60, 70)):
        cache.add_piece(a, b, x[a:b])
    np.testing.assert_array_equal(cache.get(25, 47), x[25:47])
    np.testing.assert_array_equal(cache.get(31, 39), x[31:39])
    assert cache.get(45, 65) is None and cache.get(20, 30) is None
    # a piece over several blocks is found from any of them
    cache.add_piece(70, 95, x[70:95])
    np.testing.assert_array_equal(cache.get(82, 90), x[82:90])
    np.testing.assert_array_equal(cache.get(65, 80), x[65:80])
    cache.max_bytes = 0
    cache._evict_pieces()  # every piece dropped, from every block it was found from
    assert cache.get(82, 90) is None and cache.nbytes == 0 and not any(cache._by_block.values())


def _kept_by_reference(budget: int, whole: int, offers) -> dict[int, float]:
    """The chunks a cache keeps, the obvious way: drop the lowest score (then the
    lowest start) while the new chunk does not fit and outscores it; a chunk
    over the chunks' ``budget`` but within the ``whole`` budget is kept among
    them when it comes alone."""
    kept: dict[int, tuple[float, int]] = {}
    oversized = None
    for start, nbytes, score in offers:
        if start == oversized:
            continue
        if start in kept:
            kept[start] = (score, kept[start][1])
            continue
        if nbytes > budget and (kept or nbytes > whole):
            oversized = start  # kept apart, beyond the budget: the last one offered
            continue
        accepted = True
        while kept and sum(nb for _, nb in kept.values()) + nbytes > budget:
            lowest = min(kept, key=lambda a: (kept[a][0], a))
            if kept[lowest][0] >= score:
                accepted = False
                break
            del kept[lowest]
        if accepted:
            kept[start] = (score, nbytes)
    return {a: sc for a, (sc, _) in kept.items()}, oversized


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 12),  # which chunk (start = 1000 * it)
            st.integers(1, 17),  # rows of 8 bytes x 10 (13-16: alone; over 16: oversized)
            st.sampled_from([-np.inf, 0.0, 1.0, 2.0, 2.5, 3.0, 7.0]),
        ),
        max_size=60,
    )
)
def test_sample_cache_keeps_what_the_reference_policy_keeps(offers):
    from kcpstream.passes.cache import SampleCache

    cache = SampleCache(block_size=10, max_bytes=4 * 320)  # chunks: 960 bytes
    lengths: dict[int, int] = {}
    made = []
    for which, rows, score in offers:
        start = 1000 * which
        rows = lengths.setdefault(start, 10 * rows)  # a chunk keeps its length
        cache.add_chunk(start, np.full((rows, 1), float(which)), score=score)
        made.append((start, rows * 8, score))
    expected, oversized = _kept_by_reference(cache.chunk_budget, cache.max_bytes, made)
    held = {a for a in range(0, 13000, 1000) if cache.chunk(a) is not None}
    assert held == set(expected) | ({oversized} - {None})
    assert cache.chunk_bytes == sum(lengths[a] * 8 for a in expected)
    # within the chunks' budget, or one chunk alone within the whole budget
    assert cache.chunk_bytes <= (cache.chunk_budget if len(expected) > 1 else cache.max_bytes)
    assert cache.oversized_bytes == (0 if oversized is None else lengths[oversized] * 8)
    assert cache.nbytes == cache.chunk_bytes  # the oversized chunk is not in the budget
    for a in held:  # the sorted starts the joins use
        np.testing.assert_array_equal(cache.get(a, a + lengths[a]), cache.chunk(a))


def test_one_chunk_beyond_the_budget_per_process_whatever_the_number_of_caches():
    from kcpstream.passes.cache import SampleCache

    # the caches of a batch: each a share of the budget, smaller than a chunk
    caches = [SampleCache(block_size=10, max_bytes=4 * 320) for _ in range(6)]
    for i, cache in enumerate(caches):
        assert cache.add_chunk(0, np.full((200, 1), float(i)))  # 1600 bytes > 960
        beyond = [c for c in caches if c.oversized_bytes]
        assert beyond == [cache]  # the last one offered, and only it
        assert cache.get(0, 200)[0, 0] == i
    assert all(c.chunk(0) is None for c in caches[:-1])
    # a chunk within the budget stays where it is
    caches[0].add_chunk(1000, np.zeros((50, 1)))
    caches[1].add_chunk(0, np.ones((200, 1)))
    assert caches[0].chunk(1000) is not None and caches[-1].chunk(0) is None
    del caches  # the holder's chunk goes with its cache: a new one takes the slot freely
    SampleCache(block_size=10, max_bytes=4 * 320).add_chunk(0, np.zeros((200, 1)))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 5_000), min_size=1, max_size=80),
    st.sampled_from([4, 8, 32, 4096]),
    st.sampled_from([1, 3, 64, 256]),
)
def test_pass_runs_group_consecutive_chunks_up_to_the_target(sizes, row_bytes, series):
    from kcpstream.passes.data import MIN_PASS_TASKS, TASK_BYTES, pass_runs

    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(starts[-1])
    # MIN_PASS_TASKS tasks for the whole call: a series of a batch needs fewer
    tasks = max(1, MIN_PASS_TASKS // series)
    target = max(1, min(TASK_BYTES // row_bytes, -(-n // tasks)))
    runs = pass_runs(starts, row_bytes, series)
    assert [i for a, b in runs for i in range(a, b + 1)] == list(range(len(sizes)))
    for k, (a, b) in enumerate(runs):
        assert starts[b] - starts[a] < target  # without its last chunk it was too short
        if k < len(runs) - 1:
            assert starts[b + 1] - starts[a] >= target


def test_small_zarr_chunks_share_tasks_and_are_read_once(tmp_path, signal, reference):
    _zarr(tmp_path, signal.x, 100)  # 600 chunks of 800 bytes
    store = CountingStore(zarr.storage.LocalStore(tmp_path / "s.zarr"))
    arr = zarr.open_group(store, mode="r")["x"]
    with dask.config.set(scheduler="threads"):  # the block grid's data pass
        res = kcpstream.segment(arr, n_bkps=6, block_size=64)
    assert res.diagnostics.n_chunks == 600
    assert res.diagnostics.pass_tasks == 60  # runs of 938 samples or more: 10 chunks
    assert res.changepoints.tolist() == reference.changepoints.tolist()
    assert res.gains.tolist() == reference.gains.tolist()
    reads = store.chunk_reads("x")
    assert len(reads) == 600 and set(reads.values()) == {1}


def test_a_kept_chunk_of_a_run_read_at_once_owns_its_samples(tmp_path):
    from kcpstream.passes.cache import SampleCache
    from kcpstream.passes.data import read_block_stats

    x = np.random.default_rng(0).normal(size=3_000)
    arr = _zarr(tmp_path, x, 1_000)
    signal = as_signal(arr)
    fmap = kcpstream.RFF(8, bandwidth=1.0, seed=0).fit(x[:500, None])
    cache = SampleCache(block_size=100)
    source = signal.reader.run(0, 2)
    assert source.array is not None  # read straight from the zarr array
    out = read_block_stats(source, fmap, 100, 64, cache.handle)
    assert [r["first_block"] for r in out] == [0, 10, 20]
    for start in (0, 1_000, 2_000):
        kept = cache.chunk(start)
        np.testing.assert_array_equal(kept[:, 0], x[start : start + 1_000])
        assert kept.base is None  # a copy: it does not keep the whole run alive


def test_a_run_of_chunks_is_sent_to_the_worker_holding_most_of_it():
    from kcpstream.passes.cache import SampleCache, home_of

    cache = SampleCache(block_size=10)
    starts = np.array([0, 100, 350, 400, 500])
    cache.homes.update({0: "tcp://a", 100: "tcp://b", 350: "tcp://a"})
    assert home_of(cache, starts, 0, 2) == "tcp://b"  # b read 250 samples, a 150
    assert home_of(cache, starts, 0, 0) == "tcp://a"
    assert home_of(cache, starts, 3, 3) is None  # nobody read chunk 3 yet


def test_array_source_only_for_a_plain_from_array():
    import threading

    import dask.array as da

    from kcpstream.tasks.internals import array_source

    class Rows:  # an array-like that is not numpy (dask embeds numpy chunks as data)
        def __init__(self, a):
            self.a, self.shape, self.dtype, self.ndim = a, a.shape, a.dtype, a.ndim

        def __getitem__(self, key):
            return self.a[key]

    x = Rows(np.arange(1000.0).reshape(500, 2))
    assert array_source(da.from_array(x, chunks=100)) is x
    assert array_source(da.from_array(x.a, chunks=100)) is None  # numpy: chunks in the graph
    for other in (
        da.from_array(x, chunks=100, lock=threading.Lock()),  # reads must take the lock
        da.from_array(x, chunks=100, inline_array=True),
        da.from_array(x, chunks=100) * 2,
        da.from_array(x, chunks=100)[10:],
        da.from_array(x, chunks=100).rechunk(200),
        da.zeros((500, 2), chunks=100),
    ):
        assert array_source(other) is None


def test_resizing_a_cache_drops_what_no_longer_fits_lowest_score_first():
    from kcpstream.passes.cache import SampleCache

    cache = SampleCache(block_size=10, max_bytes=4 * 800)  # chunks: 3 of 800 bytes
    for i, score in enumerate([3.0, 1.0, 2.0]):
        assert cache.add_chunk(100 * i, np.full((100, 1), float(i)), score=score)
    cache.add_piece(300, 390, np.zeros((90, 1)))
    cache.resize(4 * 400)  # chunks: 1200 bytes, one chunk of 800
    assert [a for a in (0, 100, 200) if cache.chunk(a) is not None] == [0]
    assert cache.nbytes <= cache.max_bytes and cache.chunk_bytes == 800
    cache.resize(900)  # a chunk alone may take the whole budget
    assert cache.chunk(0) is not None and cache.get(300, 390) is None
    cache.resize(4 * 800)  # growing keeps what is there
    assert cache.chunk(0) is not None
    assert cache.add_chunk(1000, np.zeros((500, 1)))  # beyond the budget: kept apart
    assert cache.oversized_bytes == 4000
    cache.resize(0)
    assert cache.nbytes == cache.chunk_bytes == cache.oversized_bytes == 0
    assert cache.get(0, 10) is None and cache.get(1000, 1010) is None


def test_an_error_whose_first_line_announces_the_next_keeps_both():
    # botocore: "Parameter validation failed:" and, on the next line, what failed
    from kcpstream.errors import one_line

    exc = ValueError('Parameter validation failed:\nInvalid bucket name "a_b!": must match')
    assert one_line(exc, typed=True) == (
        'ValueError: Parameter validation failed: Invalid bucket name "a_b!": must match'
    )
    assert one_line(exc) == 'Parameter validation failed: Invalid bucket name "a_b!": must match'
    missing = FileNotFoundError("bucket/x.zarr")
    assert one_line(missing, typed=True) == "FileNotFoundError: bucket/x.zarr"
    assert one_line(KeyError("x")) == "x" and one_line(ValueError("")) == "ValueError"


def _flags(n: int = 20_000, seed: int = 0) -> np.ndarray:
    """A flag that is set 5 % of the time, then 25 %."""
    rng = np.random.default_rng(seed)
    return np.r_[rng.random(n) < 0.05, rng.random(n) < 0.25]


def _routes(x: np.ndarray, tmp_path, name: str):
    """``x`` as each entry point takes it."""
    t = np.arange(x.size)
    ds = xr.DataArray(x, dims="time", coords={"time": t}, name="flag").to_dataset()
    ds.to_zarr(tmp_path / f"{name}.zarr", mode="w")
    z = zarr.create_array(
        str(tmp_path / f"{name}-raw.zarr"), shape=x.shape, chunks=(8192,), dtype=x.dtype
    )
    z[:] = x
    return {
        "numpy": lambda: kcpstream.segment(x),
        "dask": lambda: kcpstream.segment(da.from_array(x, chunks=8192)),
        "zarr array": lambda: kcpstream.segment(z),
        "path": lambda: kcpstream.segment(str(tmp_path / f"{name}.zarr"), variable="flag"),
        "xarray": lambda: kcpstream.segment(ds["flag"]),
        "open_zarr": lambda: kcpstream.segment(xr.open_zarr(tmp_path / f"{name}.zarr")["flag"]),
    }


@pytest.mark.parametrize("route", ["numpy", "dask", "zarr array", "path", "xarray", "open_zarr"])
def test_booleans_are_segmented_as_zeros_and_ones_on_every_route(tmp_path, route):
    x = _flags()
    got = _routes(x, tmp_path, "bool")[route]()
    want = _routes(x.astype(np.uint8), tmp_path, "uint8")[route]()
    assert got.changepoints.tolist() == want.changepoints.tolist()
    assert got.changepoints.tolist() == pytest.approx([20_000], abs=400)
    assert got.gains.tolist() == want.gains.tolist()
    assert got.pvalues.tolist() == want.pvalues.tolist()


def test_booleans_in_a_batch_are_each_series_zeros_and_ones():
    flags = np.stack([_flags(seed=1), ~_flags(seed=2), _flags(seed=3)[::-1]])
    arr = xr.DataArray(flags, dims=("sensor", "time"), coords={"sensor": [0, 1, 2]})
    got = kcpstream.segment(arr, dim="time", batch_dims="sensor")
    want = kcpstream.segment(arr.astype(np.uint8), dim="time", batch_dims="sensor")
    found = [r.changepoints.tolist() for _, r in got]
    assert found == [r.changepoints.tolist() for _, r in want]
    assert all(cps == pytest.approx([20_000], abs=400) for cps in found)


@pytest.mark.parametrize("route", ["path", "zarr array"])
def test_a_boolean_store_with_an_absent_chunk_is_refused(tmp_path, route):
    # an absent chunk of a flag reads as its fill value, False: a run of 0s
    # that no sensor wrote, which must not pass for samples
    x = _flags()
    path = str(tmp_path / "flag.zarr")
    z = zarr.create_array(path, shape=x.shape, chunks=(8192,), dtype=bool)
    z[:] = x
    chunk = tmp_path / "flag.zarr" / "c" / "2"
    assert chunk.exists()
    chunk.unlink()
    src = path if route == "path" else zarr.open_array(path)
    with pytest.raises(kcpstream.InputError, match=r"no chunk for samples \[16384, 24576\)"):
        kcpstream.segment(src)
