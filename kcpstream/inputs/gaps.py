"""Missing samples: where a series' gaps are, and the series without them.

A sample with a NaN in any channel is missing.  kcpstream segments a series
with gaps as the sequence of its valid samples (what ``x[valid]`` holds),
read out of core: a :class:`GapMap` counts each stored chunk's valid samples
(:func:`kcpstream.passes.gaps.find_gaps` reads them), :func:`compact` makes the
:class:`~kcpstream.inputs.signal.Signal` of the valid samples alone (its
chunks are the input's with the gaps taken out) and :class:`ValidPositions`
turns positions among the valid samples back into the input's.  Every stage
after that (fit, data pass, search, selection, checkpoints) sees a series
without gaps, so a result is exactly that of the valid samples segmented
alone, with its positions mapped back.

This module does not decide when a series is compacted (the engine does, on
finding a NaN), and holds no statistics.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Any

import dask
import dask.array as da
import numpy as np

from kcpstream._kernels.gaps import compact_rows, scan_gaps
from kcpstream.errors import InputError
from kcpstream.inputs.labeled import TimeAxis
from kcpstream.inputs.signal import Signal
from kcpstream.progress import note

#: The fields of one chunk's :func:`chunk_gaps` summary, in order.
SUMMARY = ("valid", "first_inf", "first_missing", "leading", "trailing", "longest")


def valid_rows(x: np.ndarray, own: bool = False) -> np.ndarray:
    """The rows of ``x`` (``(n,)`` or ``(n, d)``) without a NaN in any channel
    (``x`` itself when there is none).  ``own``: ``x`` is a fresh read no one
    else holds, whose valid rows are moved to its start in place (a view of
    them is returned): a copy of every chunk, of another length each time,
    left the allocator's arenas 15 % larger at 10**8 samples
    (``benchmarks/results/gaps.md``)."""
    if np.asarray(x).dtype.kind != "f":  # (integers hold no NaN)
        return x
    x2 = x[:, None] if x.ndim == 1 else x
    if own and x2.flags.writeable and x2.flags.c_contiguous and x.base is None:
        return x[: compact_rows(x2)]
    nan = np.isnan(x)
    miss = nan.any(axis=1) if nan.ndim == 2 else nan
    return x if not miss.any() else x[~miss]


#: Runs of missing samples kept per chunk (a chunk of more is read again to map
#: positions: scattered dropped samples would otherwise cost memory in proportion).
MAX_RUNS = 4096


def scan_chunk(x: np.ndarray, max_runs: int = MAX_RUNS) -> tuple[np.ndarray, np.ndarray | None]:
    """One chunk's gaps: its :func:`chunk_gaps` summary and its runs of missing
    rows (``(k, 2)``: start, length), or None for the runs when there are more
    than ``max_runs``."""
    x = np.asarray(x)
    x2 = x[:, None] if x.ndim == 1 else x
    if x.dtype.kind != "f" or x2.shape[0] == 0:  # (integers hold no NaN)
        return no_gaps(x2.shape[0])
    summary, starts, lengths, complete = scan_gaps(x2, max(1, int(max_runs)))
    return summary, np.stack([starts, lengths], axis=1) if complete else None


def no_gaps(n: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`scan_chunk` of a chunk of ``n`` samples none of which is missing."""
    return np.array([n, -1, -1, 0, 0, 0], np.int64), np.zeros((0, 2), np.int64)


def chunk_gaps(x: np.ndarray) -> np.ndarray:
    """One chunk's gaps (int64, one value per :data:`SUMMARY` field): its valid
    samples, the first row holding an infinity (-1: none), the first missing
    row (-1: none), the missing rows at its start and at its end, and its
    longest run of missing rows."""
    return scan_chunk(x)[0]


@dataclass(frozen=True)
class GapMap:
    """Where a series' missing samples are, chunk by chunk.

    Attributes
    ----------
    starts : numpy.ndarray
        The input's chunk boundaries along time (its first sample of every
        chunk, then ``n``).
    summary : numpy.ndarray
        ``(n_chunks, len(SUMMARY))``: each chunk's :func:`chunk_gaps`.
    """

    starts: np.ndarray
    summary: np.ndarray
    #: each chunk's runs of missing rows (:func:`scan_chunk`; None: not kept)
    runs: tuple = field(default=(), compare=False, repr=False)
    #: chunks read to find the gaps (the others' came with the data pass, or
    #: from a checkpoint's record of this or an earlier version)
    chunks_read: int = field(default=0, compare=False)

    def runs_of(self, chunk: int) -> np.ndarray | None:
        """The runs of missing rows of one chunk (``(k, 2)``), or None when not kept."""
        return self.runs[chunk] if chunk < len(self.runs) else None

    @property
    def n(self) -> int:
        """Samples of the input, missing or not."""
        return int(self.starts[-1])

    @property
    def valid(self) -> np.ndarray:
        """Valid samples of each chunk."""
        return self.summary[:, 0]

    @property
    def n_valid(self) -> int:
        return int(self.valid.sum())

    @property
    def n_missing(self) -> int:
        return self.n - self.n_valid

    @property
    def compact_starts(self) -> np.ndarray:
        """Where each chunk's valid samples start among all valid samples, then ``n_valid``."""
        return np.concatenate([[0], np.cumsum(self.valid)]).astype(np.int64)

    @property
    def first_missing(self) -> int | None:
        """Index of the first missing sample, or None."""
        for j in np.flatnonzero(self.summary[:, 2] >= 0):
            return int(self.starts[j] + self.summary[j, 2])
        return None

    @property
    def first_inf(self) -> int | None:
        """Index of the first sample holding an infinity, or None."""
        for j in np.flatnonzero(self.summary[:, 1] >= 0):
            return int(self.starts[j] + self.summary[j, 1])
        return None

    @property
    def longest_gap(self) -> int:
        """The longest run of consecutive missing samples (across chunks)."""
        best = run = 0
        sizes = np.diff(self.starts)
        for size, (valid, _, _, leading, trailing, longest) in zip(
            sizes, self.summary, strict=True
        ):
            if valid == 0:
                run += int(size)
                continue
            best = max(best, run + int(leading), int(longest))
            run = int(trailing)
        return max(best, run)

    def to_dict(self) -> dict[str, Any]:
        """The map as JSON keeps it (:meth:`from_dict`)."""
        return {"starts": self.starts.tolist(), "summary": self.summary.tolist()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GapMap:
        starts = np.asarray(data["starts"], np.int64)
        summary = np.asarray(data["summary"], np.int64).reshape(-1, len(SUMMARY))
        if len(starts) != len(summary) + 1:
            raise ValueError("a gap map has one summary per chunk")
        return cls(starts, summary)

    def digest(self) -> str:
        """A hash of the valid samples' layout (which chunks hold how many)."""
        h = hashlib.sha256(np.ascontiguousarray(self.starts, np.int64).tobytes())
        h.update(np.ascontiguousarray(self.summary[:, :1], np.int64).tobytes())
        return h.hexdigest()[:16]


def gap_map(starts: np.ndarray, scans: list[tuple], chunks_read: int = 0) -> GapMap:
    """The :class:`GapMap` of chunks ``starts`` from each chunk's :func:`scan_chunk`."""
    summary = np.array([sc[0] for sc in scans], np.int64).reshape(-1, len(SUMMARY))
    return GapMap(np.asarray(starts, np.int64), summary, tuple(sc[1] for sc in scans), chunks_read)


def kept_summaries(
    old: GapMap, starts: np.ndarray, changed: list[tuple[int, int]]
) -> dict[int, np.ndarray]:
    """The chunks of a later version of a series (chunk starts ``starts``)
    whose gaps ``old`` (an earlier version's map) still tells: those spanning
    the same samples as one of its chunks, none of which is in ``changed``
    (the samples ``[a, b)`` that may differ,
    :meth:`kcpstream.inputs.provenance.Units.changed`).  Chunk index -> its
    :data:`SUMMARY` row."""
    bounds = zip(old.starts[:-1].tolist(), old.starts[1:].tolist(), strict=True)
    where = {ab: i for i, ab in enumerate(bounds)}
    moved = np.asarray(changed, np.int64).reshape(-1, 2)
    out = {}
    for j in range(len(starts) - 1):
        a, b = int(starts[j]), int(starts[j + 1])
        i = where.get((a, b))
        if i is not None and not ((moved[:, 0] < b) & (a < moved[:, 1])).any():
            out[j] = old.summary[i]
    return out


class ValidPositions:
    """Positions among a series' valid samples as positions of the input.

    A chunk's positions come from its runs of missing rows: those the gap map
    kept, or found by reading the chunk again (a result needs a few dozen
    positions, so a few chunks, read a few at a time) and kept.
    """

    #: chunks read together to find the runs the gap map did not keep
    READ_TOGETHER = 4
    #: positions a checkpoint keeps mapped (a result's change-points, each twice)
    MAX_KEPT = 4096

    def __init__(self, gaps: GapMap, data: da.Array, reader: Any = None) -> None:
        self.gaps = gaps
        self._data = data  # the input, gaps included
        self._reader = reader  # its kcpstream.inputs.signal.ChunkReader, if known
        self._compact = gaps.compact_starts
        self._runs: dict[int, np.ndarray] = {}  # runs of the chunks read to map positions
        self._mapped: dict[int, int] = {}  # positions mapped: by this run, or kept

    @property
    def read_starts(self) -> np.ndarray:
        """The input's row where each chunk with valid samples starts, then
        where the last one ends (:attr:`Signal.read_starts`)."""
        keep = np.flatnonzero(self.gaps.valid > 0)
        return np.concatenate([self.gaps.starts[keep], [self.gaps.starts[keep[-1] + 1]]])

    def learn(self, pairs) -> None:
        """Take ``(position, index)`` pairs as mapped (a checkpoint's, of
        positions whose chunk and valid samples before it did not change)."""
        for p, i in pairs:
            if 0 <= int(p) < self.gaps.n_valid and 0 <= int(i) < self.gaps.n:
                self._mapped[int(p)] = int(i)

    def mapped(self) -> list[list[int]]:
        """The ``(position, index)`` pairs mapped so far (at most :data:`MAX_KEPT`)."""
        return [[p, i] for p, i in sorted(self._mapped.items())[: self.MAX_KEPT]]

    def original(self, positions) -> np.ndarray:
        """The input's index of each valid sample ``positions`` (``n_valid``: ``n``)."""
        pos = np.asarray(positions, dtype=np.int64)
        flat = pos.ravel()
        out = np.full(flat.shape, self.gaps.n, np.int64)
        found = np.zeros(flat.shape, bool)
        if self._mapped:
            pairs = np.array(sorted(self._mapped.items()), np.int64)
            keys, values = pairs[:, 0], pairs[:, 1]
            at = np.minimum(np.searchsorted(keys, flat), len(keys) - 1)
            found = keys[at] == flat
            out[found] = values[at[found]]
        inside = np.flatnonzero((flat < self.gaps.n_valid) & ~found)
        # the chunk holding each: the last one starting at or before it (with valid samples)
        chunk = np.searchsorted(self._compact, flat[inside], side="right") - 1
        rank = flat[inside] - self._compact[chunk]  # among the chunk's valid samples
        to_read = [
            int(j)
            for j in np.unique(chunk)
            if self.gaps.summary[j, 2] >= 0
            and self.gaps.runs_of(int(j)) is None
            and int(j) not in self._runs
        ]
        if to_read:
            note("gaps: %d chunks read to map positions back", len(to_read))
        for i in range(0, len(to_read), self.READ_TOGETHER):
            group = to_read[i : i + self.READ_TOGETHER]
            for j, x in zip(group, self._read(group), strict=True):
                # all of its runs, kept: far fewer numbers than the chunk's samples
                self._runs[j] = scan_chunk(x, max_runs=len(x))[1]
        for j in np.unique(chunk):
            at = chunk == j
            runs = None
            if self.gaps.summary[j, 2] >= 0:
                runs = self.gaps.runs_of(int(j))
                runs = self._runs[int(j)] if runs is None else runs
            out[inside[at]] = self.gaps.starts[j] + _skip_runs(rank[at], runs)
        self._mapped.update(zip(flat[inside].tolist(), out[inside].tolist(), strict=True))
        return out.reshape(pos.shape)

    def _read(self, chunks: list[int]) -> list[np.ndarray]:
        """Chunks of the input: read here, as the data pass's tasks read them (a
        store's chunks sliced directly), or computed by dask when the input's
        chunks are held by a cluster."""
        reader = self._reader
        if reader is not None and reader.self_contained:
            return [reader.run(j, j).read() for j in chunks]
        return list(dask.compute(*[self._data.blocks[j] for j in chunks]))

    def earliest(self, positions) -> np.ndarray:
        """For each change-point at valid sample ``positions`` (> 0): the first
        index of the input it could lie at, just after the valid sample before
        it (below the change-point's own index when a gap precedes it)."""
        pos = np.asarray(positions, dtype=np.int64)
        if not pos.size:
            return pos.copy()
        return self.original(pos - 1) + 1


def _skip_runs(rank: np.ndarray, runs: np.ndarray | None) -> np.ndarray:
    """Offsets in a chunk of its valid rows ``rank`` (0-based among them), with
    its runs of missing rows ``(k, 2)`` in order (None or empty: none)."""
    if runs is None or not len(runs):
        return rank
    starts, lengths = runs[:, 0], runs[:, 1]
    before = starts - np.concatenate([[0], np.cumsum(lengths)[:-1]])  # valid rows before each
    passed = np.searchsorted(before, rank, side="right")  # runs that start before the row
    return rank + np.concatenate([[0], np.cumsum(lengths)])[passed]


class CompactCoord:
    """A time coordinate seen at the valid samples' positions."""

    def __init__(self, coord: Any, positions: ValidPositions) -> None:
        self._coord = coord
        self._positions = positions

    def __len__(self) -> int:
        return self._positions.gaps.n_valid

    def __getitem__(self, positions) -> np.ndarray:
        return self.at_input(self._positions.original(positions))

    def at_input(self, indices) -> np.ndarray:
        """The coordinate at indices of the input (the indices without one)."""
        indices = np.asarray(indices, dtype=np.int64)
        return indices if self._coord is None else np.asarray(self._coord[indices])


class CompactRows:
    """The valid rows of a signal as one array to slice: rows ``[a, b)`` of its
    valid samples are its chunks holding them, read with one call to what the
    signal's own reader slices (:attr:`Signal.store_array`), without their
    missing rows.  The chunks of the series of valid samples are the input's,
    so a run of them is one read, as the input's run would be."""

    def __init__(self, signal: Signal, gaps: GapMap) -> None:
        self._rows = signal.store_array
        self._fresh = _reads_anew(signal.store_array)
        self._starts = gaps.starts
        self._compact = gaps.compact_starts
        self.shape = (gaps.n_valid, signal.d)
        self.dtype = signal.data.dtype

    def __getitem__(self, key: slice) -> np.ndarray:
        a, b, _ = key.indices(self.shape[0])
        first = int(np.searchsorted(self._compact, a, side="right")) - 1
        end = int(np.searchsorted(self._compact, b, side="left"))
        x = np.asarray(self._rows[int(self._starts[first]) : int(self._starts[end])])
        # a zarr array's read is a new array: its valid rows are moved in place
        x = valid_rows(x, own=self._fresh)
        x = x[:, None] if x.ndim == 1 else x
        offset = a - int(self._compact[first])
        out = x[offset : offset + (b - a)]
        # a piece of a chunk is its own array (as zarr gives it), not a view
        # that keeps the whole chunk alive where it is kept
        return out.copy() if 2 * out.nbytes < x.nbytes else out


def _reads_anew(array: Any) -> bool:
    """Whether a slice of ``array`` is a new array each time (a zarr array's
    read), not a view of memory someone else holds (numpy, a cached xarray
    variable)."""
    return type(array).__module__.split(".")[0] == "zarr"


def compact(signal: Signal, gaps: GapMap) -> Signal:
    """The signal of ``signal``'s valid samples alone: each chunk without its
    missing rows (chunks left empty are left out), read as the input's chunks
    are (:class:`CompactRows`, or through the input's graph); its ``valid``
    maps its positions back to the input's."""
    counts = gaps.valid
    if gaps.n_valid == 0:
        raise InputError(
            f"{signal.description} has no valid sample: all {gaps.n} are missing (NaN); "
            "there is nothing to segment"
        )
    x = signal.data.map_blocks(
        valid_rows, chunks=(tuple(int(c) for c in counts), (signal.d,)), dtype=signal.data.dtype
    )
    keep = np.flatnonzero(counts > 0)
    if len(keep) < len(counts):
        x = x.blocks[keep.tolist()]
    positions = ValidPositions(gaps, signal.data, signal.reader)
    origin, starts = signal.origin, gaps.starts
    time = None
    if signal.time is not None:
        time = TimeAxis(signal.time.dim, CompactCoord(signal.time.coord, positions))
    token = f"valid samples {gaps.digest()}"
    return dataclasses.replace(
        signal,
        data=x,
        source={**signal.source, "missing_samples": gaps.n_missing},
        time=time,
        # read as the input's chunks are, their missing rows dropped
        store_array=None if signal.store_array is None else CompactRows(signal, gaps),
        origin=None if origin is None else origin.valid_samples(token, starts, counts),
        valid=positions,
    )
