"""Plots of a segmentation (matplotlib, the ``plot`` extra).

What they draw is computed by :mod:`kcpstream.plotdata`: the signal as a
min/max envelope over at most ``max_points`` bins (one dask pass), and the
gain of splitting a segment at each position.

Each function takes ``res``, a :class:`~kcpstream.Segmentation` (whose
methods call them: this module does not import it back).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kcpstream.plotdata import envelope_gaps, segment_gains

__all__ = ["plot_segmentation", "plot_path", "plot_gain"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "plotting needs matplotlib: pip install matplotlib (or the plot extra of a "
            "checkout: pip install '.[plot]')"
        ) from None
    return plt


def _time_axis(ax: Any, res: Any, signal: Any, xs: Any) -> None:
    """The x axis named after the time dimension (or samples), with dates
    (``xs``, the positions drawn, are date-times) labelled concisely: full
    time stamps overlap on a wide range."""
    ax.set_xlabel(res.time_dim if signal.time is not None else "sample")
    if np.asarray(xs).dtype.kind == "M":
        import matplotlib.dates as mdates

        locator = mdates.AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def _positions_to_axis(res: Any, positions: np.ndarray, signal=None):
    if signal is not None and signal.time is not None:
        return signal.time.at(positions)
    return positions


def plot_segmentation(
    res: Any,
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
    starts, lo, hi, signal, missing = envelope_gaps(data, max_points, **signal_kwargs)
    names = _channel_names(data, lo.shape[1])
    shown = list(channels if channels is not None else range(lo.shape[1]))
    if ax is None:
        _, ax = plt.subplots(figsize=(12, 3.5 if len(shown) == 1 else 1.5 + 0.8 * len(shown)))
    xs = _positions_to_axis(res, starts, signal)
    ends = np.r_[starts[1:], signal.n]
    gap = missing == ends - starts  # bins with no valid sample: hatched, not drawn
    cuts = np.flatnonzero(np.diff(np.r_[0, gap.astype(np.int8), 0]))
    for a, b in zip(cuts[::2], cuts[1::2], strict=True):
        span = _positions_to_axis(res, np.array([starts[a], ends[b - 1] - 1]), signal)
        # above the segments' shading (zorder 0), below the signal
        ax.axvspan(
            span[0], span[1], facecolor="none", edgecolor="0.6", hatch="//", lw=0, zorder=0.5
        )
    if len(shown) > 1:  # channels of other units and scales: one band each, named
        lo, hi = _bands(lo, hi, shown)
        ax.set_yticks(np.arange(len(shown))[::-1] + 0.45, [names[c] for c in shown])
        ax.set_ylabel("each channel over its range")
    for c in shown:
        ax.fill_between(xs, lo[:, c], hi[:, c], step="post", alpha=0.6, lw=0.5, label=names[c])
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
    k = res.n_changepoints
    label = f"{k} change-point{'' if k == 1 else 's'} ({res.method}, {res.selection.rule})"
    label += "; dashed: true" if true_changepoints is not None else ""
    ax.set_title(label + (f"\n{res.windowing}" if res.windowing else ""))
    _time_axis(ax, res, signal, xs)
    ax.margins(x=0)
    ax.figure.tight_layout()
    return ax


def _bands(lo: np.ndarray, hi: np.ndarray, shown: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The envelopes with channel ``shown[i]`` scaled from its own range to the
    band ``[k, k + 0.9]``, ``k = len(shown) - 1 - i`` (the first channel on top):
    a channel near 1013 would flatten one near 0 on a shared scale."""
    lo, hi = lo.copy(), hi.copy()
    for i, c in enumerate(shown):
        a, b = np.nanmin(lo[:, c]), np.nanmax(hi[:, c])
        scale = 0.9 / (b - a) if b > a else 0.0
        k = len(shown) - 1 - i
        lo[:, c] = k + (lo[:, c] - a) * scale + (0.0 if scale else 0.45)
        hi[:, c] = k + (hi[:, c] - a) * scale + (0.0 if scale else 0.45)
    return lo, hi


def _channel_names(data: Any, d: int) -> list[str]:
    """A name per channel: a Dataset's variables, or the labels of a 2-D
    DataArray's other dimension, when they number ``d``; else ``channel i``."""
    names = None
    if hasattr(data, "data_vars") and len(data.data_vars) == d:
        names = [str(v) for v in data.data_vars]
    elif getattr(data, "ndim", 0) == 2 and hasattr(data, "coords"):
        other = data.dims[1]
        if other in data.coords and data.sizes[other] == d:
            names = [f"{other}={v}" for v in data.coords[other].values]
    return names or [f"channel {i}" for i in range(d)]


def plot_path(res: Any, *, ax: Any = None):
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
    res: Any,
    data: Any,
    segment: int = 0,
    *,
    ax: Any = None,
    max_points: int = 2000,
    **signal_kwargs: Any,
):
    """The gain of splitting one segment of the result at each position (up to ``max_points``).

    Out of core: the segment is read twice, in pieces
    (:func:`~kcpstream.plotdata.segment_gains`); gains are exact (from integer
    prefix sums), drawn at an even subset of the positions and at the best.
    """
    plt = _pyplot()
    positions, gains, signal = segment_gains(res, data, segment, max_points, **signal_kwargs)
    a, e = res.segments[segment]
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3))
    xs = _positions_to_axis(res, positions + a, signal)
    ax.plot(xs, gains, lw=1)
    best = int(positions[int(np.argmax(gains))]) + a
    ax.axvline(_positions_to_axis(res, np.array([best]), signal)[0], color="C3", lw=1.0)
    ax.set_title(f"gain of a split of segment {segment} [{a}, {e}); best at {best}")
    ax.set_ylabel("gain")
    _time_axis(ax, res, signal, xs)
    ax.figure.tight_layout()
    return ax
