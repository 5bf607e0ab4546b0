"""The samples a job keeps for refinement: :class:`SampleCache`, bounded in bytes.

A job's cache lives in the process that runs the job; a distributed worker
keeps its own for the job (:class:`CacheHandle` names it in a task), which
:func:`release_worker_caches` drops when the job ends.
"""

from __future__ import annotations

import bisect
import heapq
import threading
import uuid
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from kcpstream.tasks.graph import active_client, pool_of_processes


class SampleCache:
    """Raw samples already in this process, bounded in bytes.

    It holds whole chunks offered by the data pass (when the scheduler runs
    in this process, so keeping them costs no copy) and by refinement's
    reads (where the budget has room), and the pieces that refinement reads.
    A split found inside a piece makes its two halves the end pieces of two
    new segments, which later rounds often scan again.

    Chunks take at most three quarters of the budget (or, alone, a chunk
    that fits in all of it: the pieces of a chunk kept are never needed).
    When they do not all fit, the chunks kept are those most likely to be
    read again: each comes with a score (the largest split gain inside the
    chunk, from its own block statistics), and a chunk with a change in it
    outscores a chunk without.

    A chunk larger than that share cannot be kept among the others; the last
    one offered is kept apart, beyond the budget.  Reading any part of it
    again decodes all of it (a compressed codec has no partial reads), for
    each round of refinement that needs a piece of it, and decoding it once
    already needed that much memory: the bound is the budget plus the
    largest chunk.  One such chunk is kept per process, whatever the number
    of caches (a batch of a thousand series, each with a thousandth of the
    budget, would otherwise keep a thousand chunks beyond it): a cache that
    keeps one takes the place of the chunk another kept.

    Tasks reach the cache through its :attr:`handle`, resolved in the process
    that runs them: there this very object; in a distributed worker, that
    worker's own cache for the same job (with the same budget), which
    :func:`release_worker_caches` drops at the end of the job.
    """

    def __init__(
        self,
        block_size: int,
        max_bytes: int = 256 * 2**20,
        *,
        token: str | None = None,
        call_bytes: int = 0,
    ) -> None:
        self.block_size = block_size
        self.max_bytes = max_bytes
        self.nbytes = 0
        self.chunk_bytes = 0
        self.hits = 0
        self._chunks: dict[int, np.ndarray] = {}  # start -> samples
        self._scores: dict[int, float] = {}
        self._chunk_starts: list[int] = []  # sorted
        self._oversized: int | None = None  # start of the chunk kept beyond the budget
        self._lowest: list[tuple[float, int]] = []  # heap of (score, start), some stale
        self._pieces: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self._by_block: dict[int, list[tuple[int, int]]] = {}
        self._lock = threading.RLock()
        self.homes: dict[int, str] = {}  # chunk start -> the worker that read it
        self.fit_chunks: set[int] = set()  # starts of the chunks the fit sample read
        self.samples_read_again = 0  # samples read from the source a second time
        # a job's own cache gets a new token; a worker's copy for a job, the job's
        self.handle = CacheHandle(token or uuid.uuid4().hex, block_size, max_bytes, call_bytes)
        if token is None:
            _OWN_CACHES[self.handle.token] = self

    def add_chunk(
        self, start: int, x: np.ndarray, score: float = -np.inf, copy: bool = False
    ) -> bool:
        """Offer a whole chunk; it is kept (a copy of it with ``copy``) if it fits
        in the chunks' budget after dropping lower-scored chunks.  Returns whether
        it is kept.  Offering a kept chunk again updates its score."""
        score = float(score) if score == score else -np.inf  # NaN: the lowest
        with self._lock:
            if start == self._oversized:
                return True
            if start in self._chunks:
                self._scores[start] = score
                heapq.heappush(self._lowest, (score, start))
                return True
            if not self.oversized(x.nbytes):
                return self._keep_chunk(start, x, score, copy)
            self._keep_oversized(start, x.copy() if copy else x)
        _claim_oversized(self)  # outside this cache's lock: it drops another cache's chunk
        return True

    def _keep_chunk(self, start: int, x: np.ndarray, score: float, copy: bool) -> bool:
        """Keep a chunk within the chunks' budget, dropping lower-scored ones, if
        its score beats theirs (the cache's lock held)."""
        while self.chunk_bytes and self.chunk_bytes + x.nbytes > self.chunk_budget:
            if self._lowest_chunk()[0] >= score:
                return False
            self._drop_lowest_chunk()
        self._chunks[start] = x.copy() if copy else x
        self._scores[start] = score
        heapq.heappush(self._lowest, (score, start))
        bisect.insort(self._chunk_starts, start)
        self.chunk_bytes += x.nbytes
        self.nbytes += x.nbytes
        self._evict_pieces()
        return True

    @property
    def chunk_budget(self) -> int:
        """Bytes the chunks kept within the budget may take: three quarters of it."""
        return self.max_bytes - self.max_bytes // 4

    def _lowest_chunk(self) -> tuple[float, int]:
        """(score, start) of the lowest-scored chunk kept within the budget."""
        while self._lowest[0][0] != self._scores.get(self._lowest[0][1]):
            heapq.heappop(self._lowest)  # an entry for an old score
        return self._lowest[0]

    def _drop_lowest_chunk(self) -> None:
        _, lowest = self._lowest_chunk()
        heapq.heappop(self._lowest)
        dropped = self._chunks.pop(lowest)
        del self._scores[lowest]
        del self._chunk_starts[bisect.bisect_left(self._chunk_starts, lowest)]
        self.chunk_bytes -= dropped.nbytes
        self.nbytes -= dropped.nbytes

    def resize(self, max_bytes: int) -> None:
        """Give the cache a new budget: what no longer fits is dropped, the
        lowest-scored chunks and the oldest pieces first (0: everything, the
        chunk kept beyond the budget too).  A batch whose series do not all fit
        in the budget together searches a group of them at a time
        (:func:`kcpstream.engine.searches.search_groups`), each with a larger share."""
        with self._lock:
            self.max_bytes = max_bytes
            if max_bytes == 0:
                self._drop_oversized()
            while self.chunk_bytes > self.chunk_budget:
                kept = len(self._scores)
                if kept == 1 and self.chunk_bytes <= max_bytes:
                    break  # a chunk alone within the whole budget (:meth:`oversized`)
                self._drop_lowest_chunk()
            self._evict_pieces()

    def oversized(self, nbytes: int) -> bool:
        """Whether a chunk of ``nbytes`` is larger than the chunks' budget (but for
        a first chunk that fits in the whole budget, which is kept among them: a
        series of a batch whose samples fit its share of the budget keeps them,
        even when the quarter of it left for pieces would not leave room)."""
        if nbytes <= self.max_bytes and self.chunk_bytes == 0:
            return False
        return nbytes > self.chunk_budget

    @property
    def oversized_bytes(self) -> int:
        """Bytes of the chunk kept beyond the budget (0 if none)."""
        return 0 if self._oversized is None else self._chunks[self._oversized].nbytes

    def _keep_oversized(self, start: int, x: np.ndarray) -> None:
        self._drop_oversized()  # one at a time: the last offered
        self._chunks[start] = x
        self._oversized = start
        bisect.insort(self._chunk_starts, start)

    def _drop_oversized(self) -> None:
        with self._lock:
            if self._oversized is not None:
                del self._chunks[self._oversized]
                del self._chunk_starts[bisect.bisect_left(self._chunk_starts, self._oversized)]
                self._oversized = None

    def chunk(self, start: int) -> np.ndarray | None:
        """The cached chunk starting at ``start``, if any."""
        return self._chunks.get(start)

    def _blocks_of(self, start: int, end: int) -> range:
        """The blocks a piece (or a run of pieces) ``[start, end)`` touches."""
        return range(start // self.block_size, (end - 1) // self.block_size + 1)

    def _evict_pieces(self) -> None:
        while self.nbytes > self.max_bytes and self._pieces:
            (a, b), old = self._pieces.popitem(last=False)
            for j in self._blocks_of(a, b):
                self._by_block[j].remove((a, b))
            self.nbytes -= old.nbytes

    def add_piece(self, start: int, end: int, x: np.ndarray) -> None:
        key = (start, end)
        with self._lock:
            if (
                key in self._pieces
                or x.nbytes > self.max_bytes // 4
                or self.get(start, end) is not None
            ):
                return
            if x.base is not None:
                # a view of the run read would keep all of it (a whole chunk for a
                # piece of a block) while the budget counts the piece: a copy
                x = x.copy()
            self._pieces[key] = x
            for j in self._blocks_of(start, end):  # a run: found from any of its blocks
                self._by_block.setdefault(j, []).append(key)
            self.nbytes += x.nbytes
            self._evict_pieces()

    def _from_chunks(self, start: int, end: int) -> np.ndarray | None:
        i = bisect.bisect_right(self._chunk_starts, start) - 1
        if i < 0:
            return None
        c0 = self._chunk_starts[i]
        x = self._chunks[c0]
        if end <= c0 + len(x):
            return x[start - c0 : end - c0]
        parts = [x[start - c0 :]]
        pos = c0 + len(x)
        while pos < end:  # a piece across chunk edges: the next chunks, if all are here
            nxt = self._chunks.get(pos)
            if nxt is None:
                return None
            parts.append(nxt[: end - pos])
            pos += len(nxt)
        return np.concatenate(parts, axis=0)

    def get(self, start: int, end: int) -> np.ndarray | None:
        """The samples ``[start, end)`` if every one of them is cached (a view of
        one cached chunk or piece, or a copy joining consecutive ones)."""
        with self._lock:
            if self._chunks:
                x = self._from_chunks(start, end)
                if x is not None:
                    self.hits += 1
                    return x
            x = self._from_pieces(start, end)
            if x is not None:
                self.hits += 1
            return x

    def _from_pieces(self, start: int, end: int) -> np.ndarray | None:
        """``[start, end)`` from the pieces kept (a view of one, or a copy joining
        consecutive ones: a run of pieces scanned as one request), or None."""
        parts, pos = [], start
        while pos < end:
            key = next(
                (k for k in self._by_block.get(pos // self.block_size, ()) if k[0] <= pos < k[1]),
                None,
            )
            if key is None:
                return None
            self._pieces.move_to_end(key)
            a, b = key
            parts.append(self._pieces[key][pos - a : min(end, b) - a])
            pos = min(end, b)
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)


#: The cache holding this process's one chunk beyond a budget (weak: its job owns it).
_OVERSIZED: list[weakref.ref] = []

_OVERSIZED_LOCK = threading.Lock()


def _claim_oversized(cache: SampleCache) -> None:
    """Make ``cache`` the one that keeps a chunk beyond its budget in this
    process: the chunk another cache kept so is dropped.  Never called with a
    cache's lock held (the previous holder's is taken to drop it)."""
    with _OVERSIZED_LOCK:
        previous = _OVERSIZED[0]() if _OVERSIZED else None
        _OVERSIZED[:] = [weakref.ref(cache)]
    if previous is not None and previous is not cache:
        previous._drop_oversized()


#: Caches made by a job in this process, by token (weak: the job owns them).
_OWN_CACHES: weakref.WeakValueDictionary[str, SampleCache] = weakref.WeakValueDictionary()


#: Caches a worker process made for jobs of other processes, oldest first.
_WORKER_CACHES: OrderedDict[str, SampleCache] = OrderedDict()


_WORKER_CACHES_LOCK = threading.Lock()


#: A worker keeps jobs' caches (each bounded by its own budget) up to this many
#: calls' budgets in all (``cache_bytes``, which a call's series share), the
#: oldest dropped first; a job's cache is dropped by
#: :func:`release_worker_caches` when it ends, so this bounds only what calls
#: that never ended (a client gone) left.  A bound on the number of caches
#: instead (it was 8) dropped a batch's own: with 40 series a round of
#: refinement read every chunk again.
MAX_WORKER_BUDGETS = 8


@dataclass(frozen=True)
class CacheHandle:
    """Names one job's sample cache; a task resolves it in its own process."""

    token: str
    block_size: int
    max_bytes: int
    call_bytes: int = 0  # the budget of the call's series together (0: max_bytes)

    def __dask_tokenize__(self):
        return ("kcpstream.CacheHandle", self.token)

    def resolve(self) -> SampleCache:
        """The job's cache in this process: the job's own object where the job
        runs, else this process's cache for the job (made on first use)."""
        own = _OWN_CACHES.get(self.token)
        if own is not None:
            return own
        with _WORKER_CACHES_LOCK:
            cache = _WORKER_CACHES.get(self.token)
            if cache is None:
                cache = SampleCache(
                    self.block_size, self.max_bytes, token=self.token, call_bytes=self.call_bytes
                )
                _WORKER_CACHES[self.token] = cache
                limit = MAX_WORKER_BUDGETS * max(self.call_bytes, self.max_bytes)
                total = sum(c.max_bytes for c in _WORKER_CACHES.values())
                while total > limit and len(_WORKER_CACHES) > 1:  # (never this one: newest)
                    total -= _WORKER_CACHES.popitem(last=False)[1].max_bytes
            else:
                _WORKER_CACHES.move_to_end(self.token)
            return cache


def _drop_worker_caches(tokens: list[str]) -> int:
    """Drop this process's caches of the given jobs; returns how many it held."""
    with _WORKER_CACHES_LOCK:
        return sum(_WORKER_CACHES.pop(t, None) is not None for t in tokens)


def release_worker_caches(caches: list[SampleCache]) -> None:
    """Free the samples distributed workers keep for these jobs' refinement.

    Called when the jobs end.  Only under a distributed client do workers
    hold such caches; elsewhere this does nothing.
    """
    client = active_client()
    if client is None or not caches:
        return
    tokens = [c.handle.token for c in caches]
    client.run(_drop_worker_caches, tokens)


def caches_reachable() -> bool:
    """Whether tasks run where a job's sample cache outlives a computation: in
    this process, or on distributed workers (not a pool of processes made per call)."""
    return not pool_of_processes()


def chunks_holding(starts: np.ndarray, start: int, end: int) -> tuple[int, int]:
    """The first and last chunk (``starts``: chunk starts and ``n``) holding
    samples ``[start, end)``."""
    first = int(np.searchsorted(starts, start, side="right")) - 1
    last = int(np.searchsorted(starts, end - 1, side="right")) - 1
    return first, last


def home_of(cache: SampleCache, starts: np.ndarray, first: int, last: int) -> str | None:
    """The worker that read the most samples of chunks ``first .. last`` (None if
    none is known): a task on them is sent there."""
    held: dict[str, int] = {}
    for i in range(first, last + 1):
        home = cache.homes.get(int(starts[i]))
        if home is not None:
            held[home] = held.get(home, 0) + int(starts[i + 1] - starts[i])
    return max(held, key=held.__getitem__) if held else None
