"""The read that finds a series' gaps: each chunk's :func:`~kcpstream.inputs.gaps.scan_chunk`.

One graph for several series (runs of small chunks read by one task, as
the data pass groups them), computed by the active scheduler; nothing
here creates a client.  :mod:`kcpstream.inputs.gaps` holds the map and the
series without its gaps.
"""

from __future__ import annotations

from kcpstream.inputs.gaps import GapMap, gap_map, scan_chunk
from kcpstream.inputs.signal import Signal
from kcpstream.passes.data import pass_runs
from kcpstream.tasks.graph import TaskBatch


def _summaries(source) -> list[tuple]:
    """:func:`~kcpstream.inputs.gaps.scan_chunk` of every chunk of a slice (a dask task)."""
    return [scan_chunk(x) for x in source.read_chunks(range(len(source.starts) - 1))]


def find_gaps(signals: list[Signal], progress: bool = False) -> list[GapMap]:
    """The :class:`GapMap` of each signal, from one read of all of them in one
    graph (runs of small chunks read by one task)."""
    batch = TaskBatch("gaps")
    sizes = []
    for sig in signals:
        reader = sig.reader
        runs = pass_runs(reader.starts, sig.row_bytes, len(signals))
        for first, last in runs:
            reader.add_task(batch, _summaries, first, last)
        sizes.append(len(runs))
    flat = batch.compute(progress)
    out, i = [], 0
    for sig, size in zip(signals, sizes, strict=True):
        scans = [s for part in flat[i : i + size] for s in part]
        out.append(gap_map(sig.chunk_starts, scans))
        i += size
    return out
