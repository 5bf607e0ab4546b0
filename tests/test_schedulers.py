"""Same result on every scheduler: threads, synchronous, processes, a distributed cluster."""

from __future__ import annotations

import concurrent.futures

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

import kcpstream
from kcpstream import datasets
from kcpstream.inputs.signal import as_signal

from .helpers import on_the_grid, routed_cluster


def _stored(tmp_path_factory, name: str, chunks: int) -> str:
    """The test signal (300 000 samples, 6 changes) in a zarr store on disk (a
    LocalStore: workers can open it) in chunks of ``chunks`` samples."""
    sig = datasets.changing_distribution(300_000, 6, seed=5)
    path = tmp_path_factory.mktemp(name) / "s.zarr"
    datasets.write_zarr(sig.x, path, chunks=chunks)
    return str(path)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return _stored(tmp_path_factory, "sched", 40_000)


@pytest.fixture(scope="module")
def small_chunks(tmp_path_factory):
    """The same signal in 600 chunks of 500 samples: 10 per data-pass task."""
    return _stored(tmp_path_factory, "small", 500)


@pytest.fixture(scope="module")
def one_chunk(tmp_path_factory):
    """The same signal in one chunk: the data pass featurizes it in slices."""
    return _stored(tmp_path_factory, "one", 300_000)


@pytest.fixture(scope="module")
def threaded(store):
    with dask.config.set(scheduler="threads"):
        return kcpstream.segment(store, n_bkps=8)


def _same(res, ref):
    assert res.changepoints.tolist() == ref.changepoints.tolist()
    assert res.gains.tolist() == ref.gains.tolist()
    assert res.path_costs.tolist() == ref.path_costs.tolist()
    assert res.features == ref.features


def test_sync_scheduler(store, threaded):
    with dask.config.set(scheduler="sync"):
        _same(kcpstream.segment(store, n_bkps=8), threaded)


def test_a_pool_of_processes_gives_the_same_result_with_a_warning(store, threaded):
    with dask.config.set(scheduler="processes"):
        with pytest.warns(kcpstream.SchedulerWarning, match="use threads"):
            res = kcpstream.segment(store, n_bkps=8)
    _same(res, threaded)
    # no process of the pool keeps samples: the data pass reads again what the fit
    # read, and refinement, run in this process with its cache, reads each chunk
    # at most once (shipped from the pool, it read 3.7 n)
    assert res.diagnostics.samples_read_again <= 2 * 300_000


@pytest.mark.parametrize("scheduler", ["threads", "sync", "processes"])
def test_one_large_chunk_is_read_once_and_featurized_in_slices(one_chunk, threaded, scheduler):
    from kcpstream.passes.data import SPLIT_CHUNK_TASKS, pass_target

    target = pass_target(300_000, 8)
    assert 300_000 > SPLIT_CHUNK_TASKS * target  # large enough to be sliced
    with dask.config.set(scheduler=scheduler):
        res = kcpstream.segment(one_chunk, n_bkps=8)
        # a cache budget below the chunk: it is kept beyond it, so refinement
        # does not decode the whole chunk again for each round
        small_cache = kcpstream.segment(one_chunk, n_bkps=8, cache_bytes=2**20)
    _same(res, threaded)
    _same(small_cache, threaded)
    assert res.diagnostics.n_chunks == 1
    if scheduler == "processes":  # a pool would copy the chunk to every slice's task
        assert res.diagnostics.pass_tasks == 1
        return
    slices = -(-300_000 // -(-target // res.diagnostics.block_size) // res.diagnostics.block_size)
    assert res.diagnostics.pass_tasks >= slices + 2 > SPLIT_CHUNK_TASKS  # read, slices, merge
    for r in (res, small_cache):
        assert r.diagnostics.samples_read_again == 0 < r.diagnostics.samples_scanned


def test_a_nan_in_a_sliced_chunk_is_named(tmp_path):
    x = datasets.changing_distribution(300_000, 2, seed=1).x.copy()
    x[123_457] = np.nan
    path = tmp_path / "nan.zarr"
    datasets.write_zarr(x, path, chunks=300_000)
    with pytest.raises(kcpstream.InputError, match="index 123457"):
        kcpstream.segment(str(path), n_bkps=2, features="rff:16", skipna=False)


def test_a_damaged_sliced_chunk_is_one_clear_error(tmp_path):
    x = datasets.changing_distribution(300_000, 2, seed=1).x
    path = tmp_path / "bad.zarr"
    datasets.write_zarr(x, path, chunks=300_000)
    chunk = path / "x" / "c" / "0"
    chunk.write_bytes(chunk.read_bytes()[: chunk.stat().st_size // 2])  # truncated
    with pytest.raises(kcpstream.InputError, match=r"samples \[0, 300000\).*c/0.*damaged"):
        kcpstream.segment(str(path), n_bkps=2, features="rff:16")


def test_chunks_smaller_than_a_stored_chunk_are_rounded_up_to_whole_ones(store, threaded):
    res = kcpstream.segment(store, n_bkps=8, chunks=50_000)  # stored: 40 000
    _same(res, threaded)
    assert res.diagnostics.n_chunks == -(-300_000 // 80_000)


def _in_memory(path: str) -> np.ndarray:
    return zarr.open(path, mode="r")["x"][:]


@pytest.mark.parametrize("scheduler", ["threads", "sync", "processes"])
def test_numpy_input_is_sliced_in_process_and_sent_once_otherwise(store, threaded, scheduler):
    x = _in_memory(store)
    with dask.config.set(scheduler=scheduler):
        direct = as_signal(x).reader._array
        _same(kcpstream.segment(x, n_bkps=8), threaded)
    # threads and sync take views of the array; a process pool gets it through
    # the graph, once, not pickled with every task
    assert (direct is x) == (scheduler != "processes")


def test_no_sample_cache_gives_the_same_result(store, threaded, monkeypatch):
    res = kcpstream.segment(store, n_bkps=8, cache_bytes=0)
    _same(res, threaded)
    # held, the series was searched in one call over its blocks' features;
    # without a cache, in rounds of reads on the grid: the same answer
    assert threaded.diagnostics.rounds == 0 < res.diagnostics.rounds
    on_the_grid(monkeypatch)  # both on the grid: the same pieces scanned too
    grid = kcpstream.segment(store, n_bkps=8)
    _same(grid, threaded)
    assert res.diagnostics.samples_featurized == grid.diagnostics.samples_featurized


def _worker_caches_held() -> int:
    from kcpstream.passes.cache import _WORKER_CACHES

    return len(_WORKER_CACHES)


def _pass_reads_again(path: str) -> int:
    """Samples the data pass reads again after the fit sample (with a cache)."""
    from kcpstream.inputs.signal import as_signal
    from kcpstream.passes.cache import SampleCache, release_worker_caches
    from kcpstream.passes.data import data_passes, fit_sample

    signal = as_signal(path)
    cache = SampleCache(block_size=64)
    fmap = kcpstream.RFF(16, seed=0).fit(fit_sample(signal, signal.fit_windows(), cache))
    try:
        data_passes([(signal, fmap, 64, cache)], tile=4096)
    finally:
        release_worker_caches([cache])
    assert len(cache.fit_chunks) > 1 and len(set(cache.homes.values())) == 2
    return cache.samples_read_again


@pytest.fixture(scope="module")
def sensors(tmp_path_factory):
    """24 series of 2**17 samples (searched in blocks, refined by reading
    samples again) in one zarr store, a change each, chunked by series."""
    xr = pytest.importorskip("xarray")
    rng = np.random.default_rng(24)
    x = rng.standard_normal((24, 2**17)).astype("f4")
    for s in range(24):
        x[s, 2**15 + 1000 * s :] += 1.5
    path = str(tmp_path_factory.mktemp("sensors") / "b.zarr")
    data = xr.Dataset({"v": (("sensor", "time"), x)}).chunk({"sensor": 1, "time": 2**15})
    data.to_zarr(path, consolidated=False)
    return path


def _batch(path: str):
    import xarray as xr

    v = xr.open_zarr(path, consolidated=False)["v"]
    return kcpstream.segment(v, dim="time", batch_dims="sensor", n_bkps=2)


def test_a_batch_on_a_cluster_keeps_every_series_samples_on_its_workers(sensors):
    # a worker kept the caches of 8 jobs at most: a batch of 24 series read
    # 294 912 to 458 752 samples of each series' 131 072 again in refinement
    with dask.config.set(scheduler="threads"):
        expected = _batch(sensors)
    with routed_cluster():
        got = _batch(sensors)
    for res, ref in zip(got.results, expected.results, strict=True):
        _same(res, ref)
        assert res.diagnostics.samples_scanned > 0
        # each series' pass is two tasks of two chunks, each task's chunks kept by
        # the worker that read them; a piece across both is scanned on one of
        # them, which reads the other's run (once: it keeps it)
        assert res.diagnostics.reads.pass_tasks == 2
        assert res.diagnostics.samples_read_again <= 2 * 2**15


def test_a_batch_in_groups_on_a_cluster_gives_the_threads_answers(sensors, monkeypatch):
    import kcpstream.engine.plan

    with dask.config.set(scheduler="threads"):
        expected = _batch(sensors)
    # 3 groups of 8 series
    monkeypatch.setattr(kcpstream.engine.plan, "state_bytes", lambda job: 2**20)
    monkeypatch.setattr(kcpstream.engine.plan, "BATCH_STATE_BYTES", 8 * 2**20)
    assert len(kcpstream.engine.plan.state_groups([None] * 24)) == 3
    with routed_cluster():
        got = _batch(sensors)
    for res, ref in zip(got.results, expected.results, strict=True):
        _same(res, ref)


def _die_once_in(prefix: str, flag: str):
    """A worker plugin that ends its worker's process (as a node's OOM killer
    or a crash would) when it starts a task of ``kcpstream-{prefix}``, once in
    the cluster: ``flag`` is created by the one that dies.  Defined here, it
    travels to the workers by value."""
    import os

    from distributed.diagnostics.plugin import WorkerPlugin

    class DieOnce(WorkerPlugin):
        def transition(self, key, start, finish, **kwargs):
            name = key[0] if isinstance(key, tuple) else key
            if finish != "executing" or not str(name).startswith(f"kcpstream-{prefix}-"):
                return
            try:
                os.close(os.open(flag, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return
            os._exit(1)

    return DieOnce()


@pytest.mark.parametrize("stage", ["pass", "scan"])
def test_a_batch_survives_a_worker_lost_in_the_middle_of_it(sensors, tmp_path, stage):
    # the worker holding half of the series' chunks dies while it runs a task
    # of the data pass or of refinement: its tasks are run again
    # elsewhere (a task prefers the worker holding its chunks, but may run on
    # any), what it kept is read again, and the answer is the threads' own
    import xarray as xr

    def batch():
        v = xr.open_zarr(sensors, consolidated=False)["v"]
        return kcpstream.segment(v, dim="time", batch_dims="sensor")

    with dask.config.set(scheduler="threads"):
        expected = batch()
    flag = tmp_path / "died"
    with routed_cluster() as client:
        before = set(client.scheduler_info()["workers"])
        client.register_plugin(_die_once_in(stage, str(flag)))
        pool = concurrent.futures.ThreadPoolExecutor(1)
        try:  # a task left waiting for the lost worker fails the test, not hangs it
            got = pool.submit(batch).result(timeout=300)
        finally:
            pool.shutdown(wait=False)
        after = set(client.scheduler_info()["workers"])
    assert flag.exists() and before - after  # a worker died during the call
    for res, ref in zip(got.results, expected.results, strict=True):
        _same(res, ref)
        assert res.pvalues.tolist() == ref.pvalues.tolist()


def test_distributed_local_cluster_with_processes(store, small_chunks, one_chunk, threaded):
    # Tasks are sent to the worker holding their chunks, but allowed elsewhere (a
    # worker may leave); distributed's work stealing may then move one to balance
    # load, and its chunk is read again.  Without stealing the reads below are
    # exactly what kcpstream's routing gives.
    with routed_cluster() as client:
        res = kcpstream.segment(store, n_bkps=8)
        no_cache = kcpstream.segment(store, n_bkps=8, cache_bytes=0)
        grouped = kcpstream.segment(small_chunks, n_bkps=8)
        sliced = kcpstream.segment(one_chunk, n_bkps=8)
        grouped_pass_read_again = _pass_reads_again(small_chunks)
        held = client.run(_worker_caches_held)
        # an array the cluster already holds: tasks take its chunks as dependencies
        persisted = da.from_zarr(store, component="x").persist()
        in_memory = [kcpstream.segment(persisted, n_bkps=8, cache_bytes=c) for c in (2**28, 0)]
        # a numpy array goes to the cluster once, in the graph (tasks take its chunks)
        x = _in_memory(store)
        numpy_direct = as_signal(x).reader._array
        in_memory.append(kcpstream.segment(x, n_bkps=8))
        # a small series is featurized whole by one task, on the worker that read it
        small = da.from_zarr(store, component="x")[:20_000]
        small_res = kcpstream.segment(small, n_bkps=4)
    assert numpy_direct is None
    _same(res, threaded)
    _same(no_cache, threaded)
    # one chunk: read by one task, featurized by its slices' tasks on the worker
    # holding it, kept there for refinement
    _same(sliced, threaded)
    assert sliced.diagnostics.pass_tasks > 8 and sliced.diagnostics.samples_read_again == 0
    for r in in_memory:
        _same(r, threaded)
    # each worker kept the chunks it read (the fit sample's too); the data pass and
    # refinement were sent back to them
    assert threaded.diagnostics.samples_read_again == 0
    assert res.diagnostics.samples_read_again == 0
    assert no_cache.diagnostics.samples_read_again >= no_cache.diagnostics.samples_scanned > 0
    assert sorted(held.values()) == [0, 0]  # the workers' caches were freed with the job
    assert small_res.diagnostics.in_memory and small_res.diagnostics.samples_read_again == 0
    with dask.config.set(scheduler="threads"):
        small_threaded = kcpstream.segment(small, n_bkps=4)
    _same(small_res, small_threaded)
    # small chunks: the fit and the pass read runs of 10 chunks, each run's pass
    # task where the fit left its chunks, so the pass reads nothing twice
    # (refinement may: a piece across two runs kept by two workers)
    with dask.config.set(scheduler="threads"):
        grouped_threaded = kcpstream.segment(small_chunks, n_bkps=8)
    _same(grouped, grouped_threaded)
    assert grouped.diagnostics.n_chunks == 600 and grouped.diagnostics.pass_tasks == 60
    assert grouped_pass_read_again == 0


def test_a_worker_keeps_a_whole_batchs_caches_and_at_most_eight_calls_budgets():
    from kcpstream.passes.cache import _WORKER_CACHES, MAX_WORKER_BUDGETS, CacheHandle

    before = dict(_WORKER_CACHES)
    _WORKER_CACHES.clear()
    try:
        call = 2**20
        batch = [CacheHandle(f"batch-{k}", 64, call // 100, call) for k in range(100)]
        for h in batch:
            h.resolve()
        assert len(_WORKER_CACHES) == 100  # one call's budget in all: every series kept
        # calls that never ended (their client gone): the oldest budgets go first
        for k in range(2 * MAX_WORKER_BUDGETS):
            CacheHandle(f"alone-{k}", 64, call, call).resolve()
        kept = sum(c.max_bytes for c in _WORKER_CACHES.values())
        assert kept <= MAX_WORKER_BUDGETS * call
        assert f"alone-{2 * MAX_WORKER_BUDGETS - 1}" in _WORKER_CACHES
        assert not any(t.startswith("batch-") for t in _WORKER_CACHES)
    finally:
        _WORKER_CACHES.clear()
        _WORKER_CACHES.update(before)
