"""Shared test helpers: a zarr store that counts what is read through it, the
comparison of two segmentations that must be the same, and the plan of a
series too long to read (a map fitted on a small sample, segment()'s default
settings, a job prepared with nothing read)."""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections import Counter

import dask.array as da
import numpy as np
from zarr.storage import LocalStore, WrapperStore


@contextlib.contextmanager
def routed_cluster():
    """A ``LocalCluster`` of 2 worker processes of 1 thread, its client active,
    without distributed's work stealing: a task then runs on the worker
    kcpstream sends it to, so the reads counted are exactly its routing's."""
    import dask
    from distributed import Client, LocalCluster

    with (
        dask.config.set({"distributed.scheduler.work-stealing": False}),
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


class CountingStore(WrapperStore):
    """Wraps a store and counts the keys and bytes read through ``get``."""

    def __init__(self, store: LocalStore) -> None:
        if not store.read_only:  # zarr would re-wrap a writable store and lose the counters
            store = store.with_read_only(True)
        super().__init__(store)
        self.reads: Counter[str] = Counter()
        self.bytes_read = 0
        self._lock = threading.Lock()

    async def get(self, key, prototype, byte_range=None):
        buf = await self._store.get(key, prototype, byte_range)
        with self._lock:
            self.reads[key] += 1
            self.bytes_read += 0 if buf is None else len(buf)
        return buf

    def chunk_reads(self, name: str) -> Counter[str]:
        """Reads of data chunks of array ``name`` (metadata excluded)."""
        return Counter({k: v for k, v in self.reads.items() if k.startswith(f"{name}/c")})


def assert_same_segmentation(a, b) -> None:
    """Two results with the same change-points, gains, path costs and p-values."""
    np.testing.assert_array_equal(a.changepoints, b.changepoints)
    np.testing.assert_array_equal(a.gains, b.gains)
    np.testing.assert_array_equal(a.path_costs, b.path_costs)
    np.testing.assert_array_equal(a.pvalues, b.pvalues)


def on_the_grid(monkeypatch) -> None:
    """Every search on the block grid, its pieces scanned in rounds, none in
    one call over its held features (:mod:`kcpstream.search.held`)."""
    import kcpstream.engine.searches

    monkeypatch.setattr(kcpstream.engine.searches, "HELD_MAX_VALUES", 0)
    monkeypatch.setattr(kcpstream.engine.searches, "HELD_MAX_VALUES_FOURIER", 0)


def fitted_map(name: str, d: int = 1):
    """The map of spec ``name`` fitted on 3000 N(0, 1) samples of ``d`` channels
    (in windows of its window length, for a window map)."""
    from kcpstream.features import make_feature_map

    fmap = make_feature_map(name, seed=0, d=d)
    x = np.random.default_rng(0).normal(size=(3000, d))
    w = fmap.window_samples
    rows = x[: (len(x) // w) * w].reshape(-1, w * d) if w > 1 else x
    return fmap.fit(rows)


def default_settings(**kw):
    """:func:`kcpstream.segment`'s defaults, with ``kw``, checked into Settings."""
    import kcpstream
    from kcpstream.engine.plan import settings_of

    params = inspect.signature(kcpstream.segment).parameters
    args = {k: params[k].default for k in inspect.signature(settings_of).parameters}
    args.update(kw)
    return settings_of(**args)[0]


def _unread(block):
    raise AssertionError("a chunk was read")


def planned_job(n: int, fmap, **kw):
    """``(job, settings)`` of a series of ``n`` samples prepared with ``fmap``
    (fitted) and the default settings with ``kw``: a lazy array whose every
    chunk fails if read (large chunks: planning 2**22-sample chunks at 1e12
    takes seconds for nothing it needs)."""
    from kcpstream.engine.run import prepare
    from kcpstream.inputs.signal import as_signal

    x = da.zeros((n,), chunks=2**28, dtype="f8").map_blocks(_unread, dtype="f8")
    st = default_settings(features=fmap, **kw)
    return prepare(as_signal(x), fmap, st), st
