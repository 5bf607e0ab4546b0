"""What ``features="auto"`` stands for, from a first look at the signal.

A few stretches of consecutive samples are read (through
the job's sample cache, which keeps their chunks for the data pass) and
:func:`kcpstream.features.period.dominant_period` looks for a cycle in them.  With a
cycle, the signal is segmented as windows of one period with
:class:`~kcpstream.features.Temporal` features; without one, sample by sample
with the pointwise default (:func:`kcpstream.features.default_feature_map`),
fitted on the fit sample cut from the stretches (no second read).  A cycle
too long for the stretches is looked for after the data pass, in the block
sums of the features (:func:`block_cycle`; the job is then segmented as
windows of it, see ``kcpstream.engine.run._long_cycle``).
"""

from __future__ import annotations

import numpy as np

from kcpstream.features import DEFAULT_FEATURES, FeatureMap, Temporal
from kcpstream.features.period import (
    MIN_PERIOD,
    PERIOD_LEVEL,
    dominant_period,
    refine_period,
)
from kcpstream.inputs.signal import NonFiniteInput, Signal, fit_windows
from kcpstream.passes.cache import SampleCache
from kcpstream.passes.data import fit_sample
from kcpstream.selection.significance import MIN_BATCHES

#: Length of the stretches of consecutive samples the dominant period is estimated on.
PERIOD_WIDTH = 8192
#: Most block sums per feature :func:`block_cycle` looks for a cycle in.
BLOCK_CYCLE_POINTS = 1 << 15


def auto_features(
    signal: Signal, sample_size: int, seed: int | None, cache: SampleCache
) -> tuple[FeatureMap | str, np.ndarray | None, int | None]:
    """The feature map ``"auto"`` stands for on ``signal``, and the period found.

    Returns ``(Temporal(window=period), None, period)`` when the signal has a
    cycle (:func:`auto_window`), or ``("auto", fit_sample, period)``: the
    pointwise default and the fit sample of :meth:`Signal.sample` with
    ``sample_size`` points, cut from the stretches.
    """
    pieces, read = _stretches(signal, sample_size, cache)
    if not all(np.isfinite(v).all() for v in read[1]):
        raise NonFiniteInput(f"the fit sample of {signal.description} holds NaN or inf")
    period = signal_period(pieces)
    window = auto_window(period, signal.n)
    if window < 2:
        windows, values = read
        rows = [_cut(windows, values, a, b) for a, b in signal.fit_windows(sample_size)]
        return "auto", np.concatenate(rows, axis=0), period
    return Temporal(DEFAULT_FEATURES, window=window, seed=0 if seed is None else seed), None, period


def signal_period(pieces: list[np.ndarray]) -> int | None:
    """The period (samples) of the cycle of the stretches ``pieces`` (m_i, d), or None.

    Each channel is checked on its own (:func:`~kcpstream.features.period.dominant_period`
    at level ``PERIOD_LEVEL / d``: a Bonferroni correction over the channels),
    so that a cycle in one channel is not hidden by channels without it; the
    period of each channel with a cycle is refined on each stretch
    (:func:`~kcpstream.features.period.refine_period`: the lag of the
    autocorrelation's peak can be a few samples off a long period, and windows
    of a wrong length drift through the cycle) and the median taken.  The
    period is the median of the channels' (the lower middle one for an even
    count): none of it depends on the order of the channels.
    """
    d = pieces[0].shape[1] if pieces else 0
    periods = []
    for j in range(d):
        stretches = [v[:, j] for v in pieces]
        found = dominant_period(stretches, level=PERIOD_LEVEL / d)
        if found is not None:
            refined = np.median([refine_period(s, found) for s in stretches])
            periods.append(max(MIN_PERIOD, int(np.rint(refined))))
    if not periods:
        return None
    return sorted(periods)[(len(periods) - 1) // 2]


def auto_window(period: int | None, n: int) -> int:
    """The window ``"auto"`` segments a series of ``n`` samples in, for the
    period found (1: sample by sample): at most ``n // MIN_BATCHES`` samples,
    so that the test of a split has :data:`~kcpstream.selection.significance.MIN_BATCHES`
    batches of windows."""
    return 1 if period is None else min(period, n // MIN_BATCHES)


def stretch_windows(
    n: int, sample_size: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """``(merged, disjoint)``: the ``[start, end)`` the period check reads of a
    series of ``n`` samples (merged where they overlap) and its disjoint
    stretches of :data:`PERIOD_WIDTH` samples (or the whole series), which
    start where the fit sample's windows start (the last ending at the
    series' end) and hold the fit sample.  They are placed in time only, so
    the period (and the result) is the same for every chunking."""
    width = min(n, PERIOD_WIDTH)
    merged: list[list[int]] = []
    disjoint: list[tuple[int, int]] = []
    for a, b in fit_windows(n, sample_size):
        lo = max(0, min(a, n - width))
        hi = max(lo + width, b)
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
        if not disjoint or lo >= disjoint[-1][1]:
            disjoint.append((lo, lo + width))
    return [(a, b) for a, b in merged], disjoint


def _stretches(signal: Signal, sample_size: int, cache: SampleCache):
    """The stretches of :func:`stretch_windows` and the samples read for them:
    ``(pieces, (windows, values))`` with ``windows`` the merged ``[start,
    end)`` read and ``values`` their samples (m_i, d)."""
    windows, disjoint = stretch_windows(signal.n, sample_size)
    values = fit_sample(signal, windows, cache)
    bounds = np.cumsum([0] + [b - a for a, b in windows])
    read = [values[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
    pieces = [_cut(windows, read, a, b) for a, b in disjoint]
    return pieces, (windows, read)


def _cut(windows, values, a: int, b: int) -> np.ndarray:
    """Samples ``[a, b)`` from ``values`` read for ``windows`` (one holds them)."""
    k = next(k for k, (lo, hi) in enumerate(windows) if lo <= a and b <= hi)
    return values[k][a - windows[k][0] : b - windows[k][0]]


def block_cycle(prefix: np.ndarray, block_size: int) -> float | None:
    """The period of a cycle of the features' block sums, in blocks (to a small
    fraction of one: :func:`~kcpstream.features.period.refine_period`), or None.

    ``prefix`` (p, m + 1) holds the features' sums over the first ``j`` whole
    blocks of ``block_size`` samples.  A cycle longer than the stretches the
    period check reads can show (over ``PERIOD_WIDTH // 8`` samples; shorter
    ones are that check's to find) still shows in the block sums of the data pass:
    :func:`~kcpstream.features.period.dominant_period` (with its guards against
    changes) of their projection on their first principal direction, kept
    when the series holds at least :data:`~kcpstream.selection.significance.MIN_BATCHES`
    cycles.
    """
    blocks = prefix.shape[1] - 1
    # at most BLOCK_CYCLE_POINTS sums per feature (a cycle of fewer blocks than the
    # step is one the period check sees)
    step = max(1, -(-blocks // BLOCK_CYCLE_POINTS))
    coarse = np.asarray(prefix[:, : blocks // step * step + 1 : step], dtype=np.float64)
    sums = np.diff(coarse, axis=1)
    if sums.shape[1] < 8 * MIN_BATCHES:
        return None
    # the direction the block sums vary most in: a cycle of the kernel mean
    # embedding shows there (features that barely see it would outvote it in
    # a median over features)
    centred = sums - sums.mean(axis=1, keepdims=True)
    u, _, _ = np.linalg.svd(centred @ centred.T)
    projected = u[:, 0] @ centred
    period = dominant_period([projected])
    if period is None or sums.shape[1] // period < MIN_BATCHES:
        return None
    if period * step * block_size <= PERIOD_WIDTH // 8:
        return None
    return refine_period(projected, period) * step
