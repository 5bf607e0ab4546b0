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
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np

from kcpstream.errors import InputError
from kcpstream.inputs.labeled import TimeAxis
from kcpstream.inputs.signal import Signal

#: The fields of one chunk's :func:`chunk_gaps` summary, in order.
SUMMARY = ("valid", "first_inf", "first_missing", "leading", "trailing", "longest")


def missing_rows(x: np.ndarray) -> np.ndarray:
    """Which rows of ``x`` (``(n,)`` or ``(n, d)``) are missing: a NaN in any channel."""
    x = np.asarray(x)
    if x.dtype.kind not in "fc":
        return np.zeros(x.shape[0], bool)
    nan = np.isnan(x)
    return nan.any(axis=1) if nan.ndim == 2 else nan


def valid_rows(x: np.ndarray) -> np.ndarray:
    """The rows of ``x`` without a NaN (a view when there is none)."""
    miss = missing_rows(x)
    return x if not miss.any() else x[~miss]


def chunk_gaps(x: np.ndarray) -> np.ndarray:
    """One chunk's gaps (int64, one value per :data:`SUMMARY` field): its valid
    samples, the first row holding an infinity (-1: none), the first missing
    row (-1: none), the missing rows at its start and at its end, and its
    longest run of missing rows."""
    x = np.asarray(x)
    n = x.shape[0]
    miss = missing_rows(x)
    first_inf = -1
    if x.dtype.kind in "fc":
        inf = np.isinf(x)
        inf = inf.any(axis=1) if inf.ndim == 2 else inf
        if inf.any():
            first_inf = int(np.argmax(inf))
    if not miss.any():
        return np.array([n, first_inf, -1, 0, 0, 0], np.int64)
    edges = np.diff(np.concatenate([[0], miss.view(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    runs = ends - starts
    leading = int(runs[0]) if starts[0] == 0 else 0
    trailing = int(runs[-1]) if ends[-1] == n else 0
    return np.array(
        [n - int(runs.sum()), first_inf, int(starts[0]), leading, trailing, int(runs.max())],
        np.int64,
    )


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


class ValidPositions:
    """Positions among a series' valid samples as positions of the input.

    The valid rows of a chunk are found by reading it (a result needs a few
    dozen positions, so a few chunks) and kept.
    """

    def __init__(self, gaps: GapMap, data: da.Array) -> None:
        self.gaps = gaps
        self._data = data  # the input, gaps included
        self._compact = gaps.compact_starts
        self._rows: dict[int, np.ndarray] = {}

    def _valid_in(self, chunks: list[int]) -> None:
        todo = [j for j in chunks if j not in self._rows and self.gaps.summary[j, 2] >= 0]
        if todo:
            blocks = dask.compute(*[self._data.blocks[j] for j in todo])
            for j, x in zip(todo, blocks, strict=True):
                self._rows[j] = np.flatnonzero(~missing_rows(x))

    def original(self, positions) -> np.ndarray:
        """The input's index of each valid sample ``positions`` (``n_valid``: ``n``)."""
        pos = np.asarray(positions, dtype=np.int64)
        flat = pos.ravel()
        out = np.empty_like(flat)
        end = flat >= self.gaps.n_valid
        out[end] = self.gaps.n
        inside = flat[~end]
        # the chunk holding each: the last one starting at or before it with valid samples
        chunk = np.searchsorted(self._compact, inside, side="right") - 1
        self._valid_in(sorted(set(map(int, chunk))))
        mapped = np.empty_like(inside)
        for k, (j, p) in enumerate(zip(chunk, inside, strict=True)):
            r = int(p - self._compact[j])
            rows = self._rows.get(int(j))
            mapped[k] = self.gaps.starts[j] + (r if rows is None else rows[r])
        out[~end] = mapped
        return out.reshape(pos.shape)

    def earliest(self, positions) -> np.ndarray:
        """For each change-point at valid sample ``positions`` (> 0): the first
        index of the input it could lie at, just after the valid sample before
        it (below the change-point's own index when a gap precedes it)."""
        pos = np.asarray(positions, dtype=np.int64)
        if not pos.size:
            return pos.copy()
        return self.original(pos - 1) + 1


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


def compact(signal: Signal, gaps: GapMap) -> Signal:
    """The signal of ``signal``'s valid samples alone: each chunk without its
    missing rows (chunks left empty are left out), read through the input's
    own graph; its ``valid`` maps its positions back to the input's."""
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
    positions = ValidPositions(gaps, signal.data)
    time = None
    if signal.time is not None:
        time = TimeAxis(signal.time.dim, CompactCoord(signal.time.coord, positions))
    token = f"valid samples {gaps.digest()}"
    return dataclasses.replace(
        signal,
        data=x,
        source={**signal.source, "missing_samples": gaps.n_missing},
        time=time,
        store_array=None,  # the chunks' valid rows: read through the graph
        origin=None if signal.origin is None else signal.origin.derived(token),
        valid=positions,
    )
