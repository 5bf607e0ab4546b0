"""What ``features="auto"`` stands for, from a first look at the signal.

A few stretches of consecutive samples are read (through
the job's sample cache, which keeps their chunks for the data pass) and
:func:`kcpstream.features.period.dominant_period` looks for a cycle in them.  With a
cycle, the signal is segmented as windows of whole cycles (:func:`whole_cycles`) with
:class:`~kcpstream.features.Temporal` features; without one, sample by sample
with the pointwise default (:func:`kcpstream.features.default_feature_map`),
fitted on the fit sample cut from the stretches (no second read).  A cycle
too long for the stretches is looked for after the data pass, in the block
sums of the features (:func:`block_cycle`; the job is then segmented as
windows of it, see ``kcpstream.engine.run._long_cycle``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
from kcpstream.selection.neighbours import serial_dependence
from kcpstream.selection.significance import MIN_BATCHES


@dataclass(frozen=True)
class Cycle:
    """The cycle ``"auto"`` found: its ``period`` in samples, refined to a
    fraction of one, and that refinement's standard ``error`` (from its
    spread over the stretches; ``inf`` from fewer than three)."""

    period: float
    error: float


#: Length of the stretches of consecutive samples the dominant period is estimated on.
PERIOD_WIDTH = 8192
#: Most block sums per feature :func:`block_cycle` looks for a cycle in.
BLOCK_CYCLE_POINTS = 1 << 15


def auto_features(
    signal: Signal,
    sample_size: int,
    seed: int | None,
    cache: SampleCache,
    values: np.ndarray | None = None,
) -> tuple[FeatureMap | str, np.ndarray | None, Cycle | None, int | None]:
    """The feature map ``"auto"`` stands for on ``signal``, and the cycle found.

    Returns ``(Temporal(window=window), None, cycle, None)`` when the signal
    has a cycle (:func:`auto_window`), or ``("auto", fit_sample, cycle,
    dependent)``: the pointwise default, the fit sample of
    :meth:`Signal.sample` with ``sample_size`` points, cut from the
    stretches, and for one channel the length of subsequences of its
    dependent samples (:func:`~kcpstream.selection.neighbours.serial_dependence`
    of the stretches; None when they are independent).  ``values``: the
    samples of :func:`stretch_reads` when already read (through ``cache``).
    """
    pieces, read = _stretches(signal, sample_size, cache, values)
    if not all(np.isfinite(v).all() for v in read[1]):
        raise NonFiniteInput(f"the fit sample of {signal.description} holds NaN or inf")
    cycle = signal_period(pieces)
    window = auto_window(cycle, signal.n)
    if window < 2:
        windows, values = read
        rows = [_cut(windows, values, a, b) for a, b in signal.fit_windows(sample_size)]
        dependent = serial_dependence([v[:, 0] for v in pieces]) if signal.d == 1 else None
        return "auto", np.concatenate(rows, axis=0), cycle, dependent
    fmap = Temporal(DEFAULT_FEATURES, window=window, seed=0 if seed is None else seed)
    return fmap, None, cycle, None


def signal_period(pieces: list[np.ndarray]) -> Cycle | None:
    """The cycle of the stretches ``pieces`` (m_i, d), or None.

    Each channel is checked on its own (:func:`~kcpstream.features.period.dominant_period`
    at level ``PERIOD_LEVEL / d``: a Bonferroni correction over the channels),
    so that a cycle in one channel is not hidden by channels without it; the
    period of each channel with a cycle is refined on each stretch
    (:func:`~kcpstream.features.period.refine_period`: the lag of the
    autocorrelation's peak can be a few samples off a long period, and windows
    of a wrong length drift through the cycle) and the median taken.  The
    period is the median of the channels' (the lower middle one for an even
    count): none of it depends on the order of the channels.  Its error is
    the standard error of the channel's median over the stretches.
    """
    d = pieces[0].shape[1] if pieces else 0
    cycles = []
    for j in range(d):
        stretches = [v[:, j] for v in pieces]
        found = dominant_period(stretches, level=PERIOD_LEVEL / d)
        if found is not None:
            refined = np.array([refine_period(s, found) for s in stretches])
            # the median's standard error, about 1.25 times the mean's
            error = (
                1.25 * float(refined.std(ddof=1)) / math.sqrt(refined.size)
                if refined.size >= 3
                else math.inf
            )
            cycles.append(Cycle(max(float(MIN_PERIOD), float(np.median(refined))), error))
    if not cycles:
        return None
    return sorted(cycles, key=lambda c: c.period)[(len(cycles) - 1) // 2]


#: Most samples a window may differ from a whole number of cycles by.  The
#: leftover part of a cycle falls at another phase in each window, so the
#: windows' features vary with a beat of ``window / leftover`` windows, long
#: enough for the test to take its halves for changes; how visible the beat
#: is grows with the leftover (in samples) times the cycle's strength against
#: the noise, not with the window's length.  A window within a fiftieth of a
#: sample exists among the first 50 multiples of any period (Dirichlet).
WHOLE_CYCLES_TOLERANCE = 0.02
#: Standard errors of the period a window's leftover is bounded with.
PERIOD_ERRORS = 2.0


def auto_window(cycle: Cycle | None, n: int) -> int:
    """The window ``"auto"`` segments a series of ``n`` samples in, for the
    cycle found (1: sample by sample): the whole number of samples closest
    to a whole number of cycles (:func:`whole_cycles`), at most ``n //
    MIN_BATCHES`` samples, so that the test of a split has
    :data:`~kcpstream.selection.significance.MIN_BATCHES` batches of windows."""
    if cycle is None:
        return 1
    return whole_cycles(cycle.period, cycle.error, n // MIN_BATCHES)


def whole_cycles(period: float, error: float, most: int) -> int:
    """Samples in a window of whole cycles of ``period`` samples.

    ``m`` cycles make ``w = round(m period)`` samples, which differ from them
    by at most ``|m period - w| + m PERIOD_ERRORS error`` for a period known
    to ``error``: the fewest cycles whose bound is within
    :data:`WHOLE_CYCLES_TOLERANCE` of a sample (a period of 7.3 samples: 73,
    ten cycles; 700.06 known to 0.08: 700), else those of the least bound; at
    most ``most`` samples (a shorter window when not even one cycle fits).
    """
    if period > most:
        return max(1, most)
    best, window = math.inf, max(1, round(period))
    for m in range(1, int(most // period) + 1):
        w = round(m * period)
        bound = abs(m * period - w) + m * PERIOD_ERRORS * error
        if bound <= WHOLE_CYCLES_TOLERANCE:
            return w
        if bound < best:
            best, window = bound, w
        elif not math.isfinite(bound):
            break  # a period known to no precision: one cycle
    return window


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


def stretch_reads(n: int, sample_size: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` :func:`auto_features` reads of a series of ``n`` samples."""
    return stretch_windows(n, sample_size)[0]


def _stretches(signal: Signal, sample_size: int, cache: SampleCache, values=None):
    """The stretches of :func:`stretch_windows` and the samples read for them
    (``values``, when given): ``(pieces, (windows, values))`` with ``windows``
    the merged ``[start, end)`` read and ``values`` their samples (m_i, d)."""
    windows, disjoint = stretch_windows(signal.n, sample_size)
    if values is None:
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
