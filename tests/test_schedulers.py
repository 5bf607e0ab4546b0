"""Same result on every scheduler: threads, synchronous, processes, a distributed cluster."""

from __future__ import annotations

import dask
import dask.array as da
import pytest
from distributed import Client, LocalCluster

import kcpstream
from kcpstream import datasets


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    sig = datasets.changing_distribution(300_000, 6, seed=5)
    path = tmp_path_factory.mktemp("sched") / "s.zarr"  # a LocalStore: workers can open it
    datasets.write_zarr(sig.x, path, chunks=40_000)
    return str(path)


@pytest.fixture(scope="module")
def threaded(store):
    with dask.config.set(scheduler="threads"):
        return kcpstream.segment(store, n_bkps=8)


def _same(res, ref):
    assert res.changepoints.tolist() == ref.changepoints.tolist()
    assert res.gains.tolist() == ref.gains.tolist()
    assert res.path_costs.tolist() == ref.path_costs.tolist()
    assert res.features == ref.features


@pytest.mark.parametrize("scheduler", ["sync", "processes"])
def test_local_schedulers(store, threaded, scheduler):
    with dask.config.set(scheduler=scheduler):
        _same(kcpstream.segment(store, n_bkps=8), threaded)


def test_no_sample_cache_gives_the_same_result(store, threaded):
    res = kcpstream.segment(store, n_bkps=8, cache_bytes=0)
    _same(res, threaded)
    assert res.diagnostics.samples_featurized == threaded.diagnostics.samples_featurized


def _worker_caches_held() -> int:
    from kcpstream.passes import _WORKER_CACHES

    return len(_WORKER_CACHES)


def test_distributed_local_cluster_with_processes(store, threaded):
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        res = kcpstream.segment(store, n_bkps=8)
        no_cache = kcpstream.segment(store, n_bkps=8, cache_bytes=0)
        held = client.run(_worker_caches_held)
        # an array the cluster already holds: tasks take its chunks as dependencies
        persisted = da.from_zarr(store, component="x").persist()
        in_memory = [kcpstream.segment(persisted, n_bkps=8, cache_bytes=c) for c in (2**28, 0)]
    _same(res, threaded)
    _same(no_cache, threaded)
    for r in in_memory:
        _same(r, threaded)
    # each worker kept the chunks it read (the fit sample's too); the data pass and
    # refinement were sent back to them
    assert threaded.diagnostics.samples_read_again == 0
    assert res.diagnostics.samples_read_again == 0
    assert no_cache.diagnostics.samples_read_again >= no_cache.diagnostics.samples_scanned > 0
    assert sorted(held.values()) == [0, 0]  # the workers' caches were freed with the job
