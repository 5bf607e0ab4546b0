"""Searches driven against the data: each round, the scans every search asked
for are read in one graph (:func:`~kcpstream.passes.scan.scan_many`) and
their results sent back to the searches (I/O-free generators of
:mod:`kcpstream.search`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcpstream.features.base import FeatureMap
from kcpstream.inputs.signal import Signal
from kcpstream.passes.cache import SampleCache
from kcpstream.passes.scan import scan_many
from kcpstream.search.binseg import Steps
from kcpstream.search.requests import ScanRequest
from kcpstream.tasks.threads import each_in_threads


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

    each_in_threads(lambda i: advance(i, None), range(len(runs)), MIN_THREAD_SEARCHES)
    while asked:
        ids = sorted(asked)  # the series' order, whichever advanced first
        batches = [(runs[i][1], runs[i][2], asked[i], runs[i][3]) for i in ids]
        scans = zip(ids, scan_many(batches, min_size, tile), strict=True)
        each_in_threads(lambda scan: advance(*scan), list(scans), MIN_THREAD_SEARCHES)
        if on_round is not None:
            on_round(sum(r.pieces for b in batches for r in b[2]))
    return outcomes


#: Fewest searches in a round worth threads: each search's bounds are
#: compiled and release the GIL, and a batch's searches are independent
#: (:mod:`kcpstream.tasks.threads`).
MIN_THREAD_SEARCHES = 4
