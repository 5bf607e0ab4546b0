"""What the plots of a segmentation draw (:mod:`kcpstream.plot`), computed
without matplotlib: the signal's min/max envelope over bins, in one dask pass
(each run of chunks gives the minima and maxima of the bins it overlaps, so a
signal of 10^8 samples is summarised in seconds), and the exact gain of
splitting one segment at each of its positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kcpstream._kernels.blockstats import split_gain
from kcpstream._kernels.dense import best_split_between
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


def segment_gains(
    res: Any, data: Any, segment: int, max_points: int, **signal_kwargs: Any
) -> tuple[np.ndarray, np.ndarray, Any]:
    """``(positions, gains, signal)``: the gain of splitting segment ``segment`` of
    ``res`` at up to ``max_points`` of its positions (offsets from its start, in
    samples).  The segment's samples are featurized once; gains are exact (from
    integer prefix sums)."""
    signal = as_signal(data, **signal_kwargs)
    a, e = res.segments[segment]
    w = res.features.window_samples  # window maps: one feature vector per w samples
    q_exp = res.features.quantum_exponent_
    x = np.asarray(signal.data[a:e].compute())
    nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
    valid = np.flatnonzero(~(nan.any(axis=1) if nan.ndim == 2 else nan))
    if len(valid) < len(x):  # a series with gaps was segmented as its valid samples
        x = x[valid]
    if w > 1:
        x = x[: len(x) // w * w].reshape(-1, w * x.shape[1])
    z = res.features.transform(x).astype(np.float64) * 2.0**q_exp
    cums = np.concatenate(
        [np.zeros((1, z.shape[1]), np.int64), np.cumsum(z.astype(np.int64), axis=0)]
    )
    n_seg = len(z)
    positions = np.unique(
        np.linspace(1, n_seg - 1, min(max_points, n_seg - 1)).round().astype(np.int64)
    )
    # the drawn positions are a subset: add the exact best admissible split, so
    # that the title's "best at" is the position the search would report
    lo = max(1, res.min_size // w)
    lo = lo if n_seg >= 2 * lo else 1
    best = best_split_between(np.ascontiguousarray(cums.T), 0, n_seg, lo, n_seg - lo)[1]
    if best >= 0:
        positions = np.union1d(positions, [best])
    total = cums[-1]
    unit = 2.0 ** (-2 * q_exp)
    gains = np.array([split_gain(int(c), int(n_seg - c), cums[c], total) * unit for c in positions])
    positions = positions * w
    if len(valid) < e - a:  # offsets of the first valid sample of each split's right part
        positions = valid[positions]
    return positions, gains, signal
