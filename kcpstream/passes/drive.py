"""Searches driven against the data: each round, the scans every search asked
for are read in one graph (:func:`~kcpstream.passes.scan.scan_many`) and
their results sent back to the searches (I/O-free generators of
:mod:`kcpstream.search`)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kcpstream.features.base import FeatureMap
from kcpstream.inputs.signal import Signal
from kcpstream.passes.cache import SampleCache
from kcpstream.passes.scan import scan_many, worker_threads
from kcpstream.search.binseg import Steps
from kcpstream.search.requests import ScanRequest


def drive_many(
    runs: list[tuple[Steps, Signal, FeatureMap, SampleCache | None]],
    min_size: int,
    tile: int,
    on_round: Callable[[int], None] | None = None,
) -> list[Any]:
    """Advance several step generators in lockstep: every round scans the pieces all
    of them asked for in one graph.  Returns their outcomes; ``on_round(m)`` is
    told after each round that it scanned ``m`` pieces."""
    outcomes: list[Any] = [None] * len(runs)
    asked: dict[int, list[ScanRequest]] = {}

    def advance(i: int, value) -> None:
        try:
            asked[i] = runs[i][0].send(value)
        except StopIteration as stop:
            asked.pop(i, None)
            outcomes[i] = stop.value

    with _Advancer(len(runs)) as each:
        each(advance, [(i, None) for i in range(len(runs))])
        while asked:
            ids = sorted(asked)  # the series' order, whichever advanced first
            batches = [(runs[i][1], runs[i][2], asked[i], runs[i][3]) for i in ids]
            each(advance, list(zip(ids, scan_many(batches, min_size, tile), strict=True)))
            if on_round is not None:
                on_round(sum(r.pieces for b in batches for r in b[2]))
    return outcomes


#: Fewest searches in a round worth threads: each search's bounds are
#: compiled and release the GIL, and a batch's searches are independent.
MIN_THREAD_SEARCHES = 4


class _Advancer:
    """Calls ``advance(i, value)`` for a round's searches: in this process's
    scan threads when there are enough of them, else one after the other.
    Each search is its own generator over its own statistics, so the order
    they advance in does not change what they return."""

    def __init__(self, searches: int):
        workers = worker_threads() if searches >= MIN_THREAD_SEARCHES else 1
        self.pool = ThreadPoolExecutor(workers, "kcpstream-search") if workers > 1 else None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown()

    def __call__(self, advance, work: list) -> None:
        if self.pool is None or len(work) < MIN_THREAD_SEARCHES:
            for i, value in work:
                advance(i, value)
            return
        for future in [self.pool.submit(advance, i, value) for i, value in work]:
            future.result()
