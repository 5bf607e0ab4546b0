"""TaskBatch: calls computed as one raw graph, in the order added, on any scheduler."""

from __future__ import annotations

import subprocess
import sys
import threading

import dask
import pytest
from dask._task_spec import TaskRef
from distributed import Client, LocalCluster, get_task_stream, get_worker

from kcpstream.tasks import graph
from kcpstream.tasks.graph import TaskBatch


def _where(i: int, offset: int = 0):
    """The call's value, the worker and the thread that ran it."""
    return i + offset, get_worker().address, threading.get_ident()


def _plus(i: int, base: int) -> int:
    return i + base


@pytest.mark.parametrize("scheduler", ["threads", "sync"])
def test_local_results_in_the_order_added(scheduler):
    batch = TaskBatch("t")
    for i in range(50):
        batch.add(_plus, i, 1000)
    with dask.config.set(scheduler=scheduler):
        assert batch.compute() == [i + 1000 for i in range(50)]
    single = TaskBatch("one")
    single.add(_plus, 1, 2)
    assert single.compute() == [3]


@pytest.fixture
def client():
    """A cluster of 2 workers of 2 threads in this process, its client active."""
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=2, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def test_merged_calls_run_on_their_worker_in_order(client):
    workers = sorted(client.scheduler_info()["workers"])
    base = client.scatter(7, workers=[workers[0]])  # a key the cluster holds
    homes = [workers[i % 3] if i % 3 < 2 else None for i in range(40)]
    batch = TaskBatch("m", merge_per_thread=True)  # (calls taking a key: not packed)
    for i, home in enumerate(homes):
        batch.add(_where, i, TaskRef(base.key), home=home)
    with get_task_stream(client) as stream:
        out = batch.compute()
    assert [v for v, _, _ in out] == [i + 7 for i in range(40)]
    for (_, worker, _), home in zip(out, homes, strict=True):
        if home is not None:
            assert worker == home
    # each worker's calls were merged into one task per thread (2 each); calls
    # without a preferred worker stay one task each
    tasks = {str(t["key"]) for t in stream.data if "kcpstream-m-" in str(t["key"])}
    assert len(tasks) == 2 * 2 + homes.count(None)


_PACKS: list[int] = []


def _counting_packed_results(packed: bytes, _real=graph._packed_results) -> bytes:
    _PACKS.append(len(packed))
    return _real(packed)


def _sums(x, i: int):
    """A call with arrays in and out, like a scan's, and where it ran."""
    import numpy as np

    return {"sums": np.cumsum(x) + i, "worker": get_worker().address}


def test_merged_calls_without_keys_travel_as_one_pickle_and_give_the_same_values(
    client, monkeypatch
):
    import numpy as np

    _PACKS.clear()  # (workers in this process: a function of this module counts them)
    monkeypatch.setattr(graph, "_packed_results", _counting_packed_results)
    xs = [np.arange(64, dtype=np.int64) * k for k in range(30)]
    workers = sorted(client.scheduler_info()["workers"])
    batch = TaskBatch("p", merge_per_thread=True)
    for k, x in enumerate(xs):
        batch.add(_sums, x, k, home=workers[k % 2])
    with get_task_stream(client) as stream:
        out = batch.compute()
    for k, (x, got) in enumerate(zip(xs, out, strict=True)):
        np.testing.assert_array_equal(got["sums"], np.cumsum(x) + k)
        assert got["worker"] == workers[k % 2]
    # one task per worker's thread (2 each), each its calls' one pickle
    ran = [t for t in stream.data if "kcpstream-p-" in str(t["key"])]
    assert len(ran) == 2 * 2 and len(_PACKS) == 2 * 2


def test_the_scheduler_is_found_without_importing_distributed():
    # dask imports distributed to look for a client (half a second of a first
    # call); without it imported none can exist, and dask.config still counts
    code = """
import sys
import dask
import numpy as np
import kcpstream
from kcpstream.tasks.graph import active_client, in_process_scheduler

x = np.random.default_rng(0).normal(size=5000)
x[2500:] += 3
assert kcpstream.segment(x).n_changepoints == 1
assert "distributed" not in sys.modules
assert active_client() is None and in_process_scheduler()
with dask.config.set(scheduler="processes"):
    assert not in_process_scheduler()
with dask.config.set(scheduler="sync"):
    assert in_process_scheduler()
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_a_client_is_found_once_distributed_is_imported():
    from kcpstream.tasks.graph import active_client

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False) as cluster:
        with Client(cluster) as client:
            assert active_client() is client
    assert active_client() is None


def test_what_follows_the_searches_is_made_once_each_and_one_at_a_time():
    # searches end in several threads; their choices (which hold the GIL) are
    # made by one thread at a time while the others go on, each exactly once
    import threading
    import time

    from kcpstream.passes.drive import _Ended
    from kcpstream.tasks.threads import each_in_threads

    outcomes: list = [None] * 64
    running, most, made = [0], [0], []
    lock = threading.Lock()

    def then(i, value):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.001)  # (a choice's length: the other threads end searches meanwhile)
        with lock:
            running[0] -= 1
            made.append(i)
        return value * 2

    ended = _Ended(then, outcomes)
    each_in_threads(lambda i: ended.add(i, i), range(64), least=1, most=4)
    ended.drain()
    assert outcomes == [2 * i for i in range(64)]
    assert sorted(made) == list(range(64)) and most[0] == 1
