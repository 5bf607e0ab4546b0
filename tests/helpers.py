"""Shared test helpers: a zarr store that counts what is read through it."""

from __future__ import annotations

import threading
from collections import Counter

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
