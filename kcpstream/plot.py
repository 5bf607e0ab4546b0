"""Plots of a segmentation (matplotlib, the ``plot`` extra).

The signal is drawn as a min/max envelope over at most ``max_points`` bins,
computed in one dask pass (each run of chunks gives the minima and maxima of
the bins it overlaps), so a signal of 10^8 samples plots in seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._graph import TaskBatch
from .passes import pass_runs

if TYPE_CHECKING:  # pragma: no cover
    from .result import Segmentation

__all__ = ["envelope", "plot_segmentation", "plot_path", "plot_gain"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "plotting needs matplotlib: pip install 'kcpstream[plot]' (or pip install matplotlib)"
        ) from None
    return plt


def _chunk_envelope(x: np.ndarray, start: int, edges: np.ndarray):
    """Min and max of each bin (edges in signal positions) that chunk ``x`` overlaps."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    end = start + len(x)
    first = int(np.searchsorted(edges, start, side="right")) - 1
    last = int(np.searchsorted(edges, end - 1, side="right")) - 1
    cuts = np.clip(edges[first : last + 2], start, end) - start
    lo = np.minimum.reduceat(x, cuts[:-1], axis=0)
    hi = np.maximum.reduceat(x, cuts[:-1], axis=0)
    return first, lo, hi


def _run_envelope(source, edges: np.ndarray):
    """:func:`_chunk_envelope` of a run of chunks, read inside the task."""
    return _chunk_envelope(source.read(), source.start, edges)


def envelope(data: Any, max_points: int = 4000, **signal_kwargs: Any):
    """``(bin_starts, lo, hi)``: min and max of each channel over at most ``max_points`` bins."""
    from .signal import as_signal

    signal = as_signal(data, **signal_kwargs)
    n = signal.n
    bins = max(1, min(n, max_points))
    edges = np.unique(np.linspace(0, n, bins + 1).round().astype(np.int64))
    batch = TaskBatch("envelope")  # one task per run of chunks, as in the data pass
    for first, last in pass_runs(signal.chunk_starts, signal.row_bytes):
        signal.reader.add_task(batch, _run_envelope, first, last, edges)
    lo = np.full((len(edges) - 1, signal.d), np.inf)
    hi = np.full((len(edges) - 1, signal.d), -np.inf)
    for first, clo, chi in batch.compute():
        k = len(clo)
        lo[first : first + k] = np.minimum(lo[first : first + k], clo)
        hi[first : first + k] = np.maximum(hi[first : first + k], chi)
    return edges[:-1], lo, hi, signal


def _positions_to_axis(res: Segmentation, positions: np.ndarray, signal=None):
    if signal is not None and signal.time is not None:
        return signal.time.at(positions)
    return positions


def plot_segmentation(
    res: Segmentation,
    data: Any,
    *,
    true_changepoints: Any = None,
    ax: Any = None,
    max_points: int = 4000,
    channels: list[int] | None = None,
    **signal_kwargs: Any,
):
    """The signal's envelope with the segments shaded and the change-points marked."""
    plt = _pyplot()
    starts, lo, hi, signal = envelope(data, max_points, **signal_kwargs)
    if ax is None:
        _, ax = plt.subplots(figsize=(12, 3.5))
    xs = _positions_to_axis(res, starts, signal)
    for c in channels if channels is not None else range(lo.shape[1]):
        ax.fill_between(xs, lo[:, c], hi[:, c], step="post", alpha=0.6, lw=0.5)
    bounds = np.array([0, *res.changepoints, res.n_samples - 1], dtype=np.int64)
    edges = _positions_to_axis(res, bounds, signal)
    for i in range(len(bounds) - 1):
        if i % 2:
            ax.axvspan(edges[i], edges[i + 1], color="0.9", zorder=0)
    for c in _positions_to_axis(res, res.changepoints, signal):
        ax.axvline(c, color="C3", lw=1.2)
    if true_changepoints is not None:
        truth = _positions_to_axis(res, np.asarray(true_changepoints, dtype=np.int64), signal)
        for c in truth:
            ax.axvline(c, color="k", lw=1.0, ls="--")
    label = f"{res.n_changepoints} change-points ({res.method}, {res.selection.rule})"
    ax.set_title(label + ("; dashed: true" if true_changepoints is not None else ""))
    ax.set_xlabel(res.time_dim if signal.time is not None else "sample")
    ax.margins(x=0)
    ax.figure.tight_layout()
    return ax


def plot_path(res: Segmentation, *, ax: Any = None):
    """The cost of the path's segmentations against D, and the chosen D."""
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    costs = np.asarray(res.path_costs)
    d = np.arange(1, len(costs) + 1)
    finite = np.isfinite(costs)
    ax.plot(d[finite], costs[finite], "o-", ms=3, label="cost")
    sel = res.selection
    if sel.rule in ("slope", "pen"):  # the rules that add a penalty to the cost
        crit = costs + sel.penalty(res.n_samples, d)
        ax.plot(d[finite], crit[finite], "-", label="cost + penalty")
    if sel.fit_range is not None:
        ax.axvspan(*sel.fit_range, color="0.92", zorder=0, label="slope fit")
    ax.axvline(sel.n_segments, color="C3", lw=1.2, label=f"chosen D = {sel.n_segments}")
    ax.set_xlabel("number of segments D")
    ax.set_ylabel("cost")
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax


def plot_gain(
    res: Segmentation,
    data: Any,
    segment: int = 0,
    *,
    ax: Any = None,
    max_points: int = 2000,
    **signal_kwargs: Any,
):
    """The gain of splitting one segment of the result at each position (up to ``max_points``).

    The segment's samples are featurized once; gains are exact (from integer
    prefix sums), evaluated at an even subset of the positions.
    """
    from ._kernels.blockstats import split_gain
    from .signal import as_signal

    plt = _pyplot()
    signal = as_signal(data, **signal_kwargs)
    a, e = res.segments[segment]
    w = res.features.window_samples  # window maps: one feature vector per w samples
    q_exp = res.features.quantum_exponent_
    x = np.asarray(signal.data[a:e].compute())
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
    total = cums[-1]
    unit = 2.0 ** (-2 * q_exp)
    gains = np.array([split_gain(int(c), int(n_seg - c), cums[c], total) * unit for c in positions])
    positions = positions * w
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3))
    xs = _positions_to_axis(res, positions + a, signal)
    ax.plot(xs, gains, lw=1)
    best = int(positions[int(np.argmax(gains))]) + a
    ax.axvline(_positions_to_axis(res, np.array([best]), signal)[0], color="C3", lw=1.0)
    ax.set_title(f"gain of a split of segment {segment} [{a}, {e}); best at {best}")
    ax.set_ylabel("gain")
    ax.figure.tight_layout()
    return ax
