"""The read that finds a series' gaps: each chunk's :func:`~kcpstream.inputs.gaps.scan_chunk`.

One graph for several series (runs of small chunks read by one task, as
the data pass groups them), computed by the active scheduler; nothing
here creates a client.  :mod:`kcpstream.inputs.gaps` holds the map and the
series without its gaps.
"""

from __future__ import annotations

import numpy as np

from kcpstream.inputs.gaps import GapMap, gap_map, scan_chunk
from kcpstream.inputs.signal import Signal
from kcpstream.passes.data import pass_runs, restrict_runs
from kcpstream.tasks.graph import TaskBatch


def _summaries(source) -> list[tuple]:
    """:func:`~kcpstream.inputs.gaps.scan_chunk` of every chunk of a slice (a dask task)."""
    return [scan_chunk(x) for x in source.read_chunks(range(len(source.starts) - 1))]


def find_gaps(
    signals: list[Signal], progress: bool = False, kept: list[dict | None] | None = None
) -> list[GapMap]:
    """The :class:`GapMap` of each signal, from one read of all of them in one
    graph (runs of small chunks read by one task).  ``kept``: per signal,
    the summaries of the chunks whose gaps are known already
    (:func:`~kcpstream.inputs.gaps.kept_summaries`), which are not read."""
    kept = kept or [None] * len(signals)
    batch = TaskBatch("gaps")
    sizes, reads = [], []
    kept = [known or {} for known in kept]
    for sig, known in zip(signals, kept, strict=True):
        reader = sig.reader
        runs = pass_runs(reader.starts, sig.row_bytes, len(signals))
        read = np.array([j for j in range(reader.n_chunks) if j not in known], np.int64)
        if known:
            runs = restrict_runs(runs, read)
        for first, last in runs:
            reader.add_task(batch, _summaries, first, last)
        sizes.append(len(runs))
        reads.append(read)
    flat = batch.compute(progress)
    out, i = [], 0
    for sig, size, known, read in zip(signals, sizes, kept, reads, strict=True):
        scans = iter([s for part in flat[i : i + size] for s in part])
        chunks = range(sig.reader.n_chunks)
        whole = [(known[j], None) if j in known else next(scans) for j in chunks]
        out.append(gap_map(sig.chunk_starts, whole, len(read)))
        i += size
    return out
