"""The test of a split with a short side: a tail from the samples' own law.

The long-run test (:mod:`kcpstream.selection.significance`) takes the gain of
a split for a weighted sum of squared Gaussian bridges.  That is the law of
sums over many samples.  A split that cuts a few samples off a segment's end
tests the mean of those few, whose law is the samples' own: a 0/1 flag at
5 % holds 5 ones in 10 samples about once in 16 000 places, where the
Gaussian law puts it below 10⁻¹⁰, and runs of ones in a stationary flag
became change-points (in 13 % of 200 series of 10⁴ samples at ``alpha = 0.01``).

The long-run test's p-value is a sum over the positions of a split (the
tail of the largest gain).  A split found at a position that leaves ``m``
in ``[min_size, M)`` samples on one side, ``M`` at most :data:`EDGE_SAMPLES`
and a sixteenth of the segment (:func:`edge_length`: a larger piece would
weigh in the law it is compared with), has the p-value
``P_inner + P_short``, never below the long-run test's: the chance that the
largest gain over the other positions reaches its gain (the long-run test's
tail over them) plus the chance that a short piece does (a union bound over
the two sets of positions), with

* a piece of ``m`` samples at an end gains at least ``g`` when its sum
  about the segment's mean, ``D``, has ``||D|| >= t_m = sqrt(g m (N - m) / N)``;
* along ``u``, the direction of the split's own piece, the Chernoff bound
  for the sum of ``m`` samples drawn from the segment's samples (the
  hypothesis of no change: any ``m`` of them are as likely to be the
  piece; the bound for draws with replacement also holds for draws without,
  Hoeffding 1963) is ``P(<u, D> >= t) <= exp(-sup_l (l t - m L(l)))``, with
  ``L`` the log-moment function of the samples projected on ``u``: the
  large-deviation rate of their law (for a flag, of the binomial), where
  the Gaussian law's is ``t^2 / (2 m s^2)``;
* ``P_short`` is the sum of the bounds over the short sides at both ends.

Where the samples are Gaussian the bound is below the long-run test's own
tail at the ends (which counts the features' several directions), and the
p-value is the long-run test's; where a few samples can move the mean far
(discrete, skewed or heavy-tailed samples) the bound is the larger.
Serial dependence is the long-run test's to count: the p-value is never
below its.

The same bound over every split by its shorter side (:func:`piece_tail`)
tests a segment whose long-run noise is 0 (its batch sums vary only at the
differences set aside as changes): steps, where it is astronomically small,
or rare events, where the long-run law would call every split certain.

This needs every sample's sums: it applies where the statistics hold them
(series searched sample by sample in memory, or windows one by one).

Where the statistics hold blocks (a long series), a short piece found inside
blocks has the same problem and the samples are not at hand; what the blocks
keep bounds it instead (:func:`bounded_tail`): the segment's sum of ``||q||^2``
(its samples' variance about their mean, ``v`` per sample, exactly) and the
largest ``||q||^2`` of its blocks (every sample about the mean is within
``b`` of it).  For ``m`` draws of such vectors, Pinelis' (1994, Theorem 3.4)
Bennett inequality in a Hilbert space bounds the norm of their sum:
``P(||D|| >= t) <= 2 exp(-(m v / b^2) h(b t / (m v)))``, ``h(u) = (1 + u)
log(1 + u) - u``, whatever the direction (no union over directions) and the
dimension.  It is proved from ``E cosh(l ||D||)``, a convex function of the
sum, so Hoeffding's (1963) comparison carries it to draws without
replacement.  A single event in a rare flag (one sample in 10^4 away from
the rest) is a gain no long-run law expects but a piece of this bound's
expected size.  The bound sums over the pieces' lengths, in bands (each
bounded by its count times the bound at its smallest reach and largest
variance), so it costs ``O(log N)`` for any segment.  Its short sides reach
as far as a sum of that many samples is not yet Gaussian at the test's tail
(:func:`bounded_edge_length`): :data:`EDGE_SAMPLES` for samples of a
continuous law, thousands for a flag at 0.5 %.
"""

from __future__ import annotations

import math

import numpy as np

from kcpstream._kernels.edges import log_moments

__all__ = [
    "EDGE_SAMPLES",
    "bounded_edge_length",
    "bounded_tail",
    "edge_length",
    "piece_tail",
    "short_tail",
]

#: Short sides below this many samples are tested by the samples' own law.
EDGE_SAMPLES = 64

#: Standard deviations at which a sum must be Gaussian for the long-run law to
#: test it (:func:`bounded_edge_length`): a split's p-value of 0.01 over the
#: positions of a segment is about this far out at each.
GAUSSIAN_Z = 4.0

#: :func:`bounded_tail` sums the lengths up to this many above the shortest one
#: by one, and beyond in bands of relative width :data:`BAND_WIDTH`.
EXACT_LENGTHS = 1024
BAND_WIDTH = 1.0 / 256

#: The rates ``l`` (per root mean square of the projected samples) the
#: Chernoff bound is minimised over: a grid, so the bound is at worst the
#: grid's (larger, never smaller than the exact Chernoff bound).
RATES = np.geomspace(1e-3, 1e3, 61)


def edge_length(length: int, trim: int) -> int:
    """The short sides ``[trim, M)`` a segment of ``length`` samples tests by
    the samples' law: ``M = min(EDGE_SAMPLES, length // 16)``, or 0 (none)."""
    most = min(EDGE_SAMPLES, length // 16)
    return most if most > trim else 0


def short_tail(
    prefix: np.ndarray, start: int, end: int, split: int, gain: float, trim: int
) -> float:
    """``P_short``: the Chernoff bound of a gain of at least ``gain`` by a
    piece of ``[trim, M)`` samples at either end of ``[start, end)``, along
    the direction of the piece that ``split`` cuts off, for draws of the
    segment's samples (``prefix``: exact prefix sums at every sample,
    (p, n + 1); ``gain`` in their units)."""
    return piece_tail(prefix, start, end, split, gain, trim, edge_length(end - start, trim))


def piece_tail(
    prefix: np.ndarray, start: int, end: int, split: int, gain: float, trim: int, most: int
) -> float:
    """The Chernoff bound of :func:`short_tail` for the pieces of
    ``[trim, most)`` samples at either end: with ``most = (end - start) // 2
    + 1``, every split of the segment by its shorter side (the bound of its
    largest gain when its samples are exchangeable)."""
    length = end - start
    if not most > trim or not gain > 0:
        return 1.0
    lo, hi = (start, split) if split - start <= end - split else (split, end)
    total = (prefix[:, end] - prefix[:, start]).astype(np.float64)
    piece = (prefix[:, hi] - prefix[:, lo]).astype(np.float64) - (hi - lo) / length * total
    norm = float(np.sqrt(piece @ piece))
    if not norm > 0:
        return 1.0
    scale, log_mgf = log_moments(prefix, start, end, piece / norm, RATES)
    if not scale > 0:
        return 1.0
    m = np.arange(trim, most, dtype=np.float64)[:, None]
    reach = np.sqrt(gain * m * (length - m) / length) / scale  # t_m, per scale
    exponent = (RATES[None, :] * reach - m * log_mgf[None, :]).max(axis=1)
    return float(2.0 * np.exp(-np.maximum(exponent, 0.0)).sum())


def length_bands(trim: int, most: int) -> tuple[np.ndarray, np.ndarray]:
    """The lengths ``[trim, most)`` in bands: their first lengths and counts
    (one length each up to ``trim +`` :data:`EXACT_LENGTHS`, then bands
    :data:`BAND_WIDTH` wide)."""
    exact = min(most, trim + EXACT_LENGTHS)
    firsts = np.arange(trim, exact, dtype=np.int64)
    if exact < most:
        steps = math.ceil(math.log(most / exact) / math.log1p(BAND_WIDTH)) + 1
        wide = np.floor(exact * (1.0 + BAND_WIDTH) ** np.arange(steps)).astype(np.int64)
        firsts = np.unique(np.concatenate([firsts, wide[wide < most]]))
    counts = np.diff(np.append(firsts, most))
    return firsts, counts


def _spread_and_reach(stats, start: int, end: int) -> tuple[float, float]:
    """``(v, b)`` of ``[start, end)`` from block statistics: its samples'
    variance about their mean (per sample, from exact sums) and a bound on
    their distance to it (the largest norm of its blocks' samples plus the
    mean's)."""
    length = end - start
    total, square = stats.range_sum(start, end)
    total = total.astype(np.float64)
    mean2 = float(total @ total) / length**2
    var = square / length - mean2
    B = stats.block_size
    top = float(stats.max_norm2[start // B : (end - 1) // B + 1].max())
    return var, math.sqrt(top) + math.sqrt(mean2)


def bounded_edge_length(stats, start: int, end: int, trim: int) -> int:
    """:func:`edge_length` where the statistics hold blocks: the short sides
    ``[trim, M)`` tested by :func:`bounded_tail` reach as far as a sum of
    that many samples is not yet Gaussian at the test's tail.

    The Bennett bound is the Gaussian tail ``exp(-t^2 / 2 m v)`` while
    ``u = b t / (m v)`` is small; at ``t = z sqrt(m v)``, ``z =``
    :data:`GAUSSIAN_Z` standard deviations (where a split is decided), that
    is ``m >= z^2 b^2 / v``.  Samples of a continuous law through the
    default features have ``b^2 / v`` of 3.5 to 4 (``M`` is then
    :data:`EDGE_SAMPLES`); a 0/1 flag at rate ``r``, 2 to 3 times ``1 / r``
    (``b`` bounds the distance to the mean by the sum of both norms): a
    piece of a rare flag holds a few events, whose law is Poisson, not
    Gaussian, over many more samples.  At most a sixteenth of the segment,
    as :func:`edge_length`."""
    length = end - start
    var, reach = _spread_and_reach(stats, start, end)
    most = EDGE_SAMPLES
    if var > 0 and reach > 0:
        most = max(most, math.ceil(GAUSSIAN_Z**2 * reach * reach / var))
    most = min(most, length // 16)
    return most if most > trim else 0


def bounded_tail(stats, start: int, end: int, gain: float, trim: int, most: int) -> float:
    """The Bennett bound of a gain of at least ``gain`` (quantized units) by a
    piece of ``[trim, most)`` samples at either end of ``[start, end)``, from
    block statistics (``stats``, a :class:`~kcpstream.search.stats.BlockStats`
    that knows both ends): every split by its shorter side with ``most =
    (end - start) // 2 + 1``."""
    length = end - start
    if not most > trim or not gain > 0:
        return 1.0
    var, reach = _spread_and_reach(stats, start, end)  # reach bounds ||q_i - mean||
    if not (var > 0 and reach > 0):
        return 1.0
    firsts, counts = length_bands(trim, most)
    m = firsts.astype(np.float64)
    t = np.sqrt(gain * m * (length - m) / length)  # grows with m up to length / 2
    spread = (m + counts - 1) * var  # the band's largest variance of the sum
    u = reach * t / spread
    exponent = (spread / reach**2) * ((1.0 + u) * np.log1p(u) - u)
    return float(2.0 * (2.0 * counts * np.exp(-exponent)).sum())
