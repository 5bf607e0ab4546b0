"""What the plots of a segmentation draw (:mod:`kcpstream.plot`), computed
without matplotlib: the signal's min/max envelope over bins, in one dask pass
(each run of chunks gives the minima and maxima of the bins it overlaps, so a
signal of 10^8 samples is summarised in seconds), and the exact gain of
splitting one segment at each of its positions, out of core (the segment
read twice in pieces: its features' total, then the gains).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kcpstream._kernels.blockstats import split_gains
from kcpstream.inputs.signal import as_signal
from kcpstream.passes.data import pass_runs
from kcpstream.tasks.graph import TaskBatch

__all__ = ["envelope", "envelope_gaps", "segment_gains"]


def _chunk_envelope(x: np.ndarray, start: int, edges: np.ndarray):
    """Min and max of each bin (edges in signal positions) that chunk ``x``
    overlaps, over its valid samples (NaN where a bin holds none), and the
    count of its missing samples (a NaN in any channel)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    end = start + len(x)
    first = int(np.searchsorted(edges, start, side="right")) - 1
    last = int(np.searchsorted(edges, end - 1, side="right")) - 1
    cuts = np.clip(edges[first : last + 2], start, end) - start
    lo = np.fmin.reduceat(x, cuts[:-1], axis=0)  # (fmin: a NaN is a gap, not the minimum)
    hi = np.fmax.reduceat(x, cuts[:-1], axis=0)
    missing = np.add.reduceat(np.isnan(x).any(axis=1).astype(np.int64), cuts[:-1])
    return first, lo, hi, missing


def _run_envelope(source, edges: np.ndarray):
    """:func:`_chunk_envelope` of a run of chunks, read inside the task."""
    return _chunk_envelope(source.read(), source.start, edges)


def envelope(data: Any, max_points: int = 4000, **signal_kwargs: Any):
    """``(bin_starts, lo, hi, signal)``: min and max of each channel over at most
    ``max_points`` bins (of the valid samples: NaN where a bin holds none), and
    the signal they were read from.  :func:`envelope_gaps` also gives each
    bin's missing samples."""
    return envelope_gaps(data, max_points, **signal_kwargs)[:4]


def envelope_gaps(data: Any, max_points: int = 4000, **signal_kwargs: Any):
    """:func:`envelope` and, last, each bin's count of missing samples."""
    signal = as_signal(data, **signal_kwargs)
    n = signal.n
    bins = max(1, min(n, max_points))
    edges = np.unique(np.linspace(0, n, bins + 1).round().astype(np.int64))
    batch = TaskBatch("envelope")  # one task per run of chunks, as in the data pass
    for first, last in pass_runs(signal.chunk_starts, signal.row_bytes):
        signal.reader.add_task(batch, _run_envelope, first, last, edges)
    lo = np.full((len(edges) - 1, signal.d), np.nan)
    hi = np.full((len(edges) - 1, signal.d), np.nan)
    missing = np.zeros(len(edges) - 1, np.int64)
    for first, clo, chi, cmiss in batch.compute():
        k = len(clo)
        lo[first : first + k] = np.fmin(lo[first : first + k], clo)
        hi[first : first + k] = np.fmax(hi[first : first + k], chi)
        missing[first : first + k] += cmiss
    return edges[:-1], lo, hi, signal, missing


#: Feature rows computed at a time by :func:`segment_gains` (bounds its memory:
#: ``SUB_ROWS * p`` int64 and float64 values, 4 MiB each at 64 features).
SUB_ROWS = 1 << 13
#: Samples read at a time by :func:`segment_gains`, at most (whole stored chunks
#: when they are shorter).
READ_SAMPLES = 1 << 20


def segment_gains(
    res: Any, data: Any, segment: int, max_points: int, **signal_kwargs: Any
) -> tuple[np.ndarray, np.ndarray, Any]:
    """``(positions, gains, signal)``: the gain of splitting segment ``segment`` of
    ``res`` at up to ``max_points`` of its positions (offsets from its start, in
    samples), and at the best admissible split (the position the search
    reports).  Out of core: the segment is read twice, piece by piece (its
    features' total, then the gains), and featurized in pieces of
    :data:`SUB_ROWS` feature vectors; gains are exact (from integer prefix
    sums, each as :func:`~kcpstream._kernels.blockstats.split_gain` gives it)."""
    signal = as_signal(data, **signal_kwargs)
    a, e = res.segments[segment]
    total, n_seg = None, 0
    for _, z in _feature_rows(res, signal, a, e):
        part = z.sum(axis=0)
        total = part if total is None else total + part
        n_seg += len(z)
    w = res.features.window_samples
    positions = np.unique(
        np.linspace(1, n_seg - 1, min(max_points, n_seg - 1)).round().astype(np.int64)
    )
    lo = max(1, res.min_size // w)
    lo = lo if n_seg >= 2 * lo else 1
    shown, best = _gains(res, signal, a, e, total, n_seg, positions, (lo, n_seg - lo))
    if best[1] is not None:
        shown[best[1]] = (best[0], best[2])
    order = sorted(shown)
    offsets = np.array([shown[c][1] for c in order], dtype=np.int64)
    gains = np.array([shown[c][0] for c in order]) * 2.0 ** (-2 * res.features.quantum_exponent_)
    return offsets, gains, signal


def _gains(res, signal, a: int, e: int, total, n_seg: int, positions, admissible):
    """The gains at ``positions`` (split indices among the feature rows) and the
    first best in ``admissible`` (inclusive): ``({c: (gain, offset)}, (gain, c,
    offset))``, offsets of each split's first sample from ``a``."""
    shown: dict[int, tuple[float, int]] = {}
    best: tuple[float, int | None, int] = (-1.0, None, -1)
    lo, hi = admissible
    done = 0  # rows before the piece
    before = np.zeros_like(total)  # their features' sum
    for offsets, z in _feature_rows(res, signal, a, e):
        c = done + np.arange(len(z))  # splits before each row of the piece
        left = before + np.concatenate(
            [np.zeros((1, z.shape[1]), np.int64), np.cumsum(z, axis=0)[:-1]]
        )
        keep = c >= 1
        g = np.full(len(z), -np.inf)
        g[keep] = split_gains(c[keep], n_seg, np.ascontiguousarray(left[keep]), total)
        for i in np.flatnonzero(np.isin(c, positions)):
            shown[int(c[i])] = (float(g[i]), int(offsets[i]))
        inside = (c >= lo) & (c <= hi)
        if inside.any():
            i = int(np.flatnonzero(inside)[np.argmax(g[inside])])
            if g[i] > best[0]:  # the first best: a later piece must exceed it
                best = (float(g[i]), int(c[i]), int(offsets[i]))
        done += len(z)
        before = before + z.sum(axis=0)
    return shown, best


def _feature_rows(res, signal, a: int, e: int):
    """The feature vectors of samples ``[a, e)`` of ``signal`` as the
    segmentation saw them (its valid samples; a window map's whole windows of
    them), in pieces of at most :data:`SUB_ROWS`: ``(offsets, z)`` with ``z``
    the quantized features (int64) and ``offsets`` each row's first sample,
    from ``a``."""
    w = res.features.window_samples
    scale = 2.0**res.features.quantum_exponent_
    # valid samples short of a whole window, and their offsets
    carry_x, carry_at = None, np.zeros(0, np.int64)
    for lo in range(a, e, READ_SAMPLES):
        hi = min(e, lo + READ_SAMPLES)
        x = np.asarray(signal.data[lo:hi].compute())
        nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
        nan = nan.any(axis=1) if nan.ndim == 2 else nan
        valid = np.flatnonzero(~nan) if nan.any() else None  # None: every sample
        if valid is not None:
            x = x[valid]
        if len(carry_at):
            x = np.concatenate([carry_x, x])
        offsets = _Offsets(carry_at, lo - a, valid)
        whole = len(x) // w * w
        carry_x, carry_at = x[whole:], offsets.of(np.arange(whole, len(x)))
        rows = x[:whole].reshape(-1, w * x.shape[1])
        for r in range(0, len(rows), SUB_ROWS):
            z = res.features.transform(rows[r : r + SUB_ROWS]).astype(np.float64) * scale
            yield offsets.of(np.arange(r, r + len(z)) * w), z.astype(np.int64)


class _Offsets:
    """Offsets (from the segment's start) of the samples of a piece: those
    carried over from the last piece (``carried``), then the valid samples of
    the samples read from offset ``base`` (``valid`` their indices, None for
    all): computed for the positions asked for, not held for every sample."""

    def __init__(self, carried: np.ndarray, base: int, valid: np.ndarray | None) -> None:
        self.carried, self.base, self.valid = carried, base, valid

    def of(self, j: np.ndarray) -> np.ndarray:
        """The offsets of the piece's samples ``j``."""
        j = np.asarray(j, dtype=np.int64)
        out = np.empty(len(j), dtype=np.int64)
        k = len(self.carried)
        early = j < k
        out[early] = self.carried[j[early]]
        read = j[~early] - k
        out[~early] = self.base + (read if self.valid is None else self.valid[read])
        return out
