"""Shared test helpers: a zarr store that counts what is read through it, and
the comparison of two segmentations that must be the same."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
from zarr.storage import LocalStore, WrapperStore


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
