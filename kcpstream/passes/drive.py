"""Searches driven against the data: each round, the scans every search asked
for are read in one graph (:func:`~kcpstream.passes.scan.scan_many`) and
their results sent back to the searches (I/O-free generators of
:mod:`kcpstream.search`)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from kcpstream.features.base import FeatureMap
from kcpstream.inputs.signal import Signal
from kcpstream.passes.cache import SampleCache
from kcpstream.passes.scan import held_scans, scan_many
from kcpstream.search.binseg import Steps
from kcpstream.search.requests import ScanRequest
from kcpstream.tasks.threads import each_in_threads


def drive_many(
    runs: list[tuple[Steps, Signal, FeatureMap, SampleCache | None]],
    min_size: int,
    tile: int,
    on_round: Callable[[int, bool], None] | None = None,
    then: Callable[[int, Any], Any] | None = None,
) -> list[Any]:
    """Advance several step generators in lockstep: every round scans the pieces all
    of them asked for in one graph.  Returns their outcomes; ``on_round(m,
    True)`` is told after each round that it scanned ``m`` pieces, and
    ``on_round(m, False)`` at the end the pieces searches scanned on their own.

    In a batch of :data:`MIN_THREAD_SEARCHES` or more, a search whose pieces
    are all held in this process (:func:`~kcpstream.passes.scan.held_scans`)
    goes on by itself, in its thread, until it asks for one that is not: a
    round of every series touched each one's statistics once a round, and
    a thousand series' do not stay in the processor's cache between two
    (``benchmarks/results/throughput.md``).  The scans are the same, so the
    answers are; a single series keeps its rounds, whose pieces are scanned
    in threads (:func:`~kcpstream.passes.scan.scan_many`).

    With ``then``, a search's outcome is ``then(i, value)`` of the value it
    returned, made as soon as a thread is free to: what follows a search (a
    series' choice, which holds the GIL) runs beside the other series'
    searches (compiled, without it) instead of after all of them, one at a
    time (:class:`_Ended`)."""
    outcomes: list[Any] = [None] * len(runs)
    asked: dict[int, list[ScanRequest]] = {}
    alone = [0] * len(runs)  # pieces each search scanned on its own
    on_its_own = len(runs) >= MIN_THREAD_SEARCHES
    ended = _Ended(then, outcomes)

    def advance(i: int, value) -> None:
        steps, _, fmap, cache = runs[i]
        try:
            asked[i] = steps.send(value)
            while on_its_own:
                found = held_scans(fmap, asked[i], cache, min_size, tile)
                if found is None:
                    break
                alone[i] += sum(r.pieces for r in asked[i])
                asked[i] = steps.send(found)
        except StopIteration as stop:
            asked.pop(i, None)
            ended.add(i, stop.value)

    each_in_threads(lambda i: advance(i, None), range(len(runs)), MIN_THREAD_SEARCHES)
    ended.drain()
    while asked:
        ids = sorted(asked)  # the series' order, whichever advanced first
        batches = [(runs[i][1], runs[i][2], asked[i], runs[i][3]) for i in ids]
        scans = zip(ids, scan_many(batches, min_size, tile), strict=True)
        each_in_threads(lambda scan: advance(*scan), list(scans), MIN_THREAD_SEARCHES)
        ended.drain()
        if on_round is not None:
            on_round(sum(r.pieces for b in batches for r in b[2]), True)
    if on_round is not None and any(alone):
        on_round(sum(alone), False)
    return outcomes


#: Fewest searches in a round worth threads: each search's bounds are
#: compiled and release the GIL, and a batch's searches are independent
#: (:mod:`kcpstream.tasks.threads`).
MIN_THREAD_SEARCHES = 4


class _Ended:
    """The searches that ended, and what follows each (``then``): made by one
    thread at a time, the others searching meanwhile.

    What follows a search (a series' choice) holds the GIL most of the time;
    two threads choosing at once mostly wait for each other, while a thread
    searching (compiled, without the GIL) beside one that chooses does not.
    A thread that ends a search queues it and, unless another thread is
    choosing, makes every queued choice; the last are made by :meth:`drain`.
    Each ``then(i, value)`` runs once, in some thread: the outcomes do not
    depend on which.
    """

    def __init__(self, then: Callable[[int, Any], Any] | None, outcomes: list) -> None:
        self._then = then
        self._outcomes = outcomes
        self._queue: deque = deque()
        self._choosing = threading.Lock()

    def add(self, i: int, value) -> None:
        if self._then is None:
            self._outcomes[i] = value
            return
        self._queue.append((i, value))
        if self._choosing.acquire(blocking=False):
            try:
                self._make()
            finally:
                self._choosing.release()

    def drain(self) -> None:
        """Every queued ``then`` made (no search is running)."""
        with self._choosing:
            self._make()

    def _make(self) -> None:
        while self._queue:
            i, value = self._queue.popleft()
            self._outcomes[i] = self._then(i, value)
