"""The dominant period of a signal, from the autocorrelation of a few stretches.

A cycle (a daily pattern, a heartbeat, a machine's rotation) makes the
samples of a stationary signal strongly dependent at the scale of its period:
a pointwise kernel then sees the phase of the cycle as a change of
distribution.  Segmenting windows of one period instead (see
:class:`~kcpstream.features.Temporal`) averages the cycle out within each
window and lets the features see changes of the cycle's shape.

The period is the lag of the highest peak of the sample autocorrelation
``r_k`` after its first zero crossing ``q``, kept only when the peak is
significant: under the hypothesis that the series is short-memory (an
MA(q) process: no dependence beyond the first crossing), Bartlett's formula
gives ``var(r_k) ~ (1 + 2 sum_{0<j<q} r_j^2) / m`` for ``m`` samples, and the
peak must exceed ``z`` standard errors with ``z`` the normal quantile of
``level`` divided by the number of lags searched (Bonferroni).  Red noise
(AR(1), random walks) has no peak after its crossing beyond that bound, so
it gets no period; an iid series none either.

Three guards keep changes from passing for a cycle (changes of level make
the autocorrelation of a stretch positive and slowly varying, with bumps):

* ``r_k`` is the median of the stretches' own autocorrelations (a change
  inside a few stretches does not move it; a cycle shows in every stretch);
* a cycle repeats: the autocorrelation near twice the period (within an
  eighth of a period, for cycles of slightly varying length) must pass the
  same bound, so periods up to an eighth of the stretches are found;
* a cycle dips between its echoes: the peak must stand above the lowest
  autocorrelation between a quarter and three quarters of the period by
  twice the bound (a bump on the slowly varying autocorrelation of level
  changes does not).

Multiples of the period peak about as high as the period itself: of the
peaks within the bound of the highest, the shortest of which the highest is
a multiple (within an eighth) is taken.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

__all__ = ["autocorrelation", "dominant_period", "refine_period", "PERIOD_LEVEL", "MIN_PERIOD"]

#: Chance that a short-memory series without a cycle is given a period.
PERIOD_LEVEL = 1e-3
#: Shortest period looked for (samples).
MIN_PERIOD = 3


def dominant_period(stretches: list[np.ndarray], *, level: float = PERIOD_LEVEL) -> int | None:
    """The dominant period (samples) of a univariate signal, or None.

    Parameters
    ----------
    stretches : list of numpy.ndarray
        Stretches of consecutive samples (1-D), e.g. evenly spaced over a long
        series.  Each is taken about its own least-squares line (a level that
        differs from one stretch to the next is not a cycle, nor is a drift
        within one, which would hide the cycle); the median of their
        autocorrelations is used.  Lags up to a quarter of the shortest
        stretch are searched.
    level : float
        Chance, under a short-memory series without a cycle, of a period.

    Returns
    -------
    int or None
        The lag of the shortest autocorrelation peak after the first zero
        crossing that passes the tests above and is within the bound of the
        highest; None when there is none (or too few samples).
    """
    pieces = [np.asarray(s, dtype=np.float64).ravel() for s in stretches]
    pieces = [p for p in pieces if p.size]
    if not pieces:
        return None
    max_lag = min(p.size for p in pieces) // 4
    if max_lag < MIN_PERIOD + 2:
        return None
    acfs = [r for r in (autocorrelation(p, max_lag) for p in pieces) if r is not None]
    if not acfs:
        return None
    # the median over the stretches: a change inside a few of them does not make
    # a cycle, which every stretch of a stationary series shows
    r = np.median(acfs, axis=0)
    m = sum(p.size for p in pieces)
    if len(acfs) > 2:
        m = m * 2.0 / np.pi  # the median of k estimates has about pi / 2 their mean's variance
    below = np.flatnonzero(r < 0)
    if not below.size:
        return None  # never decorrelates within the stretches: a trend or red noise
    crossing = int(below[0])
    lags = np.arange(max(crossing, MIN_PERIOD) + 1, max_lag)
    if not lags.size:
        return None
    peaks = lags[(r[lags] > r[lags - 1]) & (r[lags] >= r[lags + 1])]
    if not peaks.size:
        return None
    se = np.sqrt((1.0 + 2.0 * float(np.sum(r[1:crossing] ** 2))) / m)
    z = NormalDist().inv_cdf(1.0 - level / lags.size)
    bound = z * se
    # a cycle must show again near twice its period, within the lags computed
    peaks = peaks[2 * peaks + np.maximum(1, peaks // 8) < r.size]
    significant = peaks[r[peaks] > bound]
    if not significant.size:
        return None
    # a cycle dips between its echoes: the peak stands above the lowest value half a
    # cycle earlier by more than twice the bound (the standard deviation of a
    # difference of two autocorrelations is at most twice either's)
    dips = np.array([r[max(1, k // 4) : k - k // 4 + 1].min() for k in significant])
    significant = significant[r[significant] - dips > 2.0 * bound]
    if not significant.size:
        return None
    # a multiple of the period peaks as high, up to the noise: the shortest peak
    # within the bound of the highest of which the highest is a multiple is the period
    highest = int(significant[np.argmax(r[significant])])
    top = float(r[highest])
    first = _shortest_divisor(highest, significant[r[significant] >= top - bound])
    # ... and the top of that peak: noise puts local maxima on its flanks
    lo = hi = first
    while lo - 1 > crossing and r[lo - 1] >= top - bound:
        lo -= 1
    while hi + 1 < r.size and r[hi + 1] >= top - bound:
        hi += 1
    period = lo + int(np.argmax(r[lo : hi + 1]))
    echo = _echo(r, 2 * period, period)
    if echo is None or not echo > bound:
        return None
    return period


def refine_period(y: np.ndarray, period: int) -> float:
    """The period of the cycle of ``y`` near the lag ``period``, to a small
    fraction of a sample.

    The autocorrelation's peak gives a period to the nearest lag.  Windows of
    that length drift against a cycle whose period is not a whole number of
    samples (a beat: the phase at the windows' edges moves through the cycle,
    which the windows' means show as a slow oscillation, and a search as
    changes).  Here the period is the one that best explains ``y`` as a
    cycle of any shape: the series folded at a trial period and cut into
    phase bins, the share of its variance the bins' means hold (epoch
    folding, or phase dispersion minimisation).  Over ``k`` cycles that share
    peaks within about ``period / k`` of the period, so the search starts on
    the first 64 cycles, within a sixteenth of ``period``, and doubles the
    samples folded while it narrows the trial periods around the best, to the
    whole series: windows that follow the result drift by a small fraction of
    a cycle over it.  A ``period`` that is a multiple of the cycle's is refined
    as given (a fold at a multiple explains as much).

    Parameters
    ----------
    y : numpy.ndarray
        The series (1-D), evenly spaced.
    period : int
        The period to the nearest sample (:func:`dominant_period`).

    Returns
    -------
    float
        The period; ``period`` itself when ``y`` holds fewer than 8 cycles.
    """
    c = _detrended(np.asarray(y, dtype=np.float64).ravel())
    if period < 2 or c.size < 8 * period:
        return float(period)
    bins = int(min(period, 64))  # the same bins for every trial: comparable scores
    best, spread = float(period), max(1.0, period / 16.0)
    length = min(c.size, 64 * period)
    while True:
        # trials half a peak's width apart over the spread still possible; on
        # the whole series, a sixteenth apart over the peak and the top of a
        # parabola through the best and its neighbours
        width = best * best / length
        last = length == c.size
        step = width / 16 if last else width / 2
        trials = best + np.arange(-spread, spread + step / 2, step)
        trials = trials[trials > 1.0]
        head = c[:length]
        t = np.arange(length, dtype=np.float64)
        scores = np.array([_folded_share(head, t, p, bins) for p in trials])
        i = int(np.argmax(scores))
        best = float(trials[i])
        if last:
            if 0 < i < trials.size - 1:
                a, b, d = scores[i - 1 : i + 2]
                curve = a - 2.0 * b + d
                if curve < 0:
                    best += step * float(np.clip(0.5 * (a - d) / curve, -0.5, 0.5))
            return best
        spread, length = width, min(c.size, 2 * length)
        if length == c.size:
            spread = width / 2


def _folded_share(c: np.ndarray, t: np.ndarray, period: float, bins: int) -> float:
    """The sum of squares of ``c`` (centred) held by the means of its phase bins
    when folded at ``period``: sum over bins of (bin sum)^2 / (bin count)."""
    where = (np.mod(t / period, 1.0) * bins).astype(np.intp)
    counts = np.bincount(where, minlength=bins)
    sums = np.bincount(where, weights=c, minlength=bins)
    held = counts > 0
    return float(np.sum(sums[held] ** 2 / counts[held]))


def autocorrelation(p: np.ndarray, max_lag: int) -> np.ndarray | None:
    """The autocorrelation of the stretch ``p`` (1-D) about its least-squares
    line (:func:`_detrended`) at lags ``0 .. max_lag``, or None when it does
    not vary about that line."""
    c = _detrended(p)
    # zero-padded to at least 2 c.size - 1 (no lag wraps around), to a length
    # of small prime factors: a large prime factor makes the FFT many times
    # slower (benchmarks/results/design.md)
    size = _fast_length(2 * c.size)
    spec = np.fft.rfft(c, size)
    acov = np.fft.irfft(spec * np.conj(spec), size)[: max_lag + 1]
    return acov / acov[0] if acov[0] > 0 else None


def _fast_length(n: int) -> int:
    """The smallest ``2^a 3^b 5^c`` at least ``n``."""
    best = 1 << max(0, (n - 1).bit_length())
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


def _detrended(p: np.ndarray) -> np.ndarray:
    """``p`` less its least-squares line in time: a trend keeps the
    autocorrelation positive at every lag the stretch holds, and a cycle on it
    would never show its dips."""
    t = np.arange(p.size, dtype=np.float64) - (p.size - 1) / 2.0
    c = p - p.mean()
    return c - (float(t @ c) / float(t @ t)) * t


def _shortest_divisor(highest: int, lags: np.ndarray) -> int:
    """The shortest of the increasing ``lags`` of which ``highest`` is a multiple
    within an eighth of that lag (``highest`` itself when no shorter one is).

    The tolerance is in periods, not in multiples of them: one that grew with
    the multiple would let any lag a quarter of ``highest`` or shorter pass
    for a divisor (``highest / lag`` is always within half of an integer)."""
    ratio = highest / np.asarray(lags, dtype=np.float64)
    divides = np.abs(ratio - np.round(ratio)) <= 0.125
    return int(np.asarray(lags)[divides][0]) if divides.any() else int(highest)


def _echo(r: np.ndarray, lag: int, period: int) -> float | None:
    """The autocorrelation's largest value within an eighth of a period of
    ``lag``, or None beyond the lags computed."""
    slack = max(1, period // 8)
    if lag + slack >= r.size:  # the top of the peak may lie past the one searched
        return None
    return float(r[lag - slack : lag + slack + 1].max())
