"""The nearest-neighbour test of a short series with a cycle, or of dependent samples.

On a series of a few dozen cycles, the windows of whole cycles the kernel
test compares are too few for it to tell a change of waveform from the
windows' own variation (``benchmarks/results/real.md``): two classes of
recorded instances, one after the other, are told apart by eye and not by
the test.  Every subsequence of a window's length, at every offset, says
more.  Each subsequence ``x[i:i+m]`` is joined to its ``k`` nearest others
under the z-normalised Euclidean distance (the shape, not the level or the
scale), those within ``L`` samples of it in time left out (they overlap it,
or follow from it).  Where the series changes at ``t``, the subsequences on
either side have their neighbours on their own side; where it does not,
anywhere.  The statistic of a segment of ``N`` subsequences is the largest,
over the splits ``t`` that leave ``min_side`` on each side, of the
standardised deficit of edges that cross ``t``,

``Z(t) = (E(t) - X(t)) / sqrt(E(t))``, ``E(t) = K 2 t (N - t) / (N (N - 1))``,

``X(t)`` the edges that cross, ``K`` the edges in all (the edge-count scan
of Chen & Zhang 2015, on the subsequences of a series, as ClaSP's
classification score is).

**The null.** Neighbouring subsequences overlap, so their edges come in runs
(``i + 1``'s neighbour is often ``i``'s plus one): the edges are not
independent, and a permutation of single subsequences would understate the
statistic's spread.  The p-value is that of a block permutation: the
subsequences are cut into blocks of ``L`` consecutive ones, the blocks put in
a random order (the runs inside a block kept), and the statistic taken again
over ``PERMUTATIONS`` orders.  Under no change, a stationary series whose
shapes depend on each other over fewer than ``L`` samples gives every block
order the same law; ``L`` is twice the window.  A shape that drifts over
longer spans than that (a cycle whose rate wanders for hundreds of samples)
is beyond what this null holds: measured in ``benchmarks/results/real.md``.

Binary segmentation applies the test top down, the neighbours found again
within each segment it tests, as :func:`~kcpstream.selection.rules.significant_splits`
does with the kernel test: a segment is split only if its parent's split was
significant.  I/O-free: it works on the samples it is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kcpstream._kernels.neighbours import block_exceedances, crossing_scan, nearest_subsequences
from kcpstream.features.period import autocorrelation

__all__ = [
    "DEPENDENCE_PIECES",
    "DEPENDENCE_Z",
    "MIN_PIECE",
    "MIN_SUBSEQUENCE",
    "NEIGHBOURS",
    "NEIGHBOUR_SAMPLES",
    "PERMUTATIONS",
    "SMALLEST_PVALUE",
    "NeighbourAnswer",
    "neighbour_changes",
    "serial_dependence",
    "split_statistic",
]

#: Nearest subsequences joined to each (ClaSP's ``k``).
NEIGHBOURS = 3

#: Block orders drawn per test: the smallest p-value is ``1 / (PERMUTATIONS + 1)``.
PERMUTATIONS = 1999
#: The smallest p-value the test gives: at a lower level it can find nothing.
SMALLEST_PVALUE = 1.0 / (PERMUTATIONS + 1)

#: Block orders drawn at once (bounds their memory: ``ORDERS * N / (2 window)``
#: integers; the rows are drawn in turn from one stream, so the orders are the
#: same whatever this is).
ORDERS = 200

#: Longest series the test is made on: its work grows as the square of the
#: length (1.2 s at this one with a cycle of 40 samples,
#: ``benchmarks/bench_neighbours.py``).
NEIGHBOUR_SAMPLES = 1 << 15


@dataclass(frozen=True)
class NeighbourAnswer:
    """The change-points of :func:`neighbour_changes`, in samples: sorted, with
    the p-value and the statistic of each split when it was made, and the order
    they were made in."""

    changepoints: np.ndarray
    pvalues: np.ndarray
    statistics: np.ndarray
    order: np.ndarray


#: Standard errors by which the correlation of consecutive differences must
#: pass -1/2 for a series' samples to count as dependent
#: (:func:`serial_dependence`): an independent series passes in about 0.13 %
#: of draws.
DEPENDENCE_Z = 3.0
#: Pieces a series is cut into for :func:`serial_dependence`: the median of
#: their autocorrelations is that of the noise, whatever a few pieces
#: holding a change add.
DEPENDENCE_PIECES = 8
#: Fewest samples of a subsequence :func:`serial_dependence` gives.
MIN_SUBSEQUENCE = 4
#: Fewest samples of a piece :func:`serial_dependence` estimates from: the
#: normal law of a correlation from fewer is too optimistic (independent
#: series of 64 and 100 samples, in pieces of 8 and 12, passed in 0.7 to
#: 2.0 % of 2000 draws instead of about 0.13 %).
MIN_PIECE = 32


def serial_dependence(stretches: list[np.ndarray]) -> int | None:
    """The length of the subsequences a series segmented sample by sample is
    also tested on, or None when its samples do not depend on each other.

    The stretches (1-D, consecutive samples; e.g. the whole series) are cut
    into :data:`DEPENDENCE_PIECES` pieces.  Dependence is read from the
    samples' first differences: for independent samples (of any law) two
    consecutive differences have a correlation of exactly -1/2, and a change
    of level moves one difference only (the samples' own autocorrelation is
    positive at every lag across a change of their mean).  The samples are
    dependent when the median over the pieces of that correlation passes
    -1/2 by :data:`DEPENDENCE_Z` standard errors (``sqrt(pi / (4 m))`` for
    the median of estimates from ``m`` samples in all: Bartlett's variance
    of a moving average's lag-one correlation is ``1 / (2 m)``): a shape
    over several samples, which a test of the samples' law alone does not
    see.  The length is the first zero of the median of the pieces'
    autocorrelations, each piece about its own least-squares line (the
    span of the samples' dependence: the classic span of a delay
    embedding), at least :data:`MIN_SUBSEQUENCE`.  Independent samples (the
    thesis scenarios' laws, a flag) get None."""
    total = sum(int(np.size(s)) for s in stretches)
    pieces = []
    for s in stretches:
        s = np.asarray(s, dtype=np.float64).reshape(-1)
        k = max(1, round(DEPENDENCE_PIECES * s.size / max(total, 1)))
        for p in np.array_split(s, k):
            top = float(np.max(np.abs(p))) if p.size else 0.0
            if p.size >= MIN_PIECE and top > 0:
                pieces.append(p / top)  # (of unit scale: no product overflows)
    steps, used = [], 0
    for p in pieces:
        d = np.diff(p)
        moved = np.count_nonzero(d)  # (exact zeros: a sample equal to the one before)
        d = d - d.mean()
        ss = float(d @ d)
        # a piece whose differences are all equal to rounding (a ramp, a flat
        # stretch) says nothing of the noise: no estimate, and not counted; nor
        # does one that stays where it is at most samples (steps without noise,
        # rare events): its differences' correlation is that of a few jumps
        if ss > d.size * 1e-24 and 2 * moved > d.size:
            # less its mean for independent samples: -1/2 and about 1/(m - 1)
            # more in a piece of m (the differences about their own mean; 0.030,
            # 0.015 and 0.008 at 32, 64 and 128 samples, 20 000 normal draws)
            steps.append(float(d[1:] @ d[:-1]) / ss - 1.0 / (p.size - 1))
            used += d.size
    if not steps:
        return None
    se = math.sqrt(math.pi / (4.0 * used))
    if not float(np.median(steps)) > -0.5 + DEPENDENCE_Z * se:
        return None
    lags = min(p.size for p in pieces) // 4
    acfs = [r for r in (autocorrelation(p, lags) for p in pieces) if r is not None]
    if not acfs:
        return MIN_SUBSEQUENCE
    r = np.median(acfs, axis=0)
    below = np.flatnonzero(r <= 0.0)
    zero = int(below[0]) if below.size else lags
    return max(zero, MIN_SUBSEQUENCE)


def split_statistic(
    x: np.ndarray, window: int, lo: int, hi: int, *, seed: int = 0
) -> tuple[float, int, np.ndarray]:
    """The scan statistic of the subsequences ``lo .. hi - 1`` of ``x`` (of
    ``window`` samples each): ``(statistic, split, edges)``, the split
    relative to ``lo`` (``-1`` if the segment is too short) and the ``(N,
    NEIGHBOURS)`` edges relative to ``lo``."""
    return _scan_segment(np.ascontiguousarray(x, dtype=np.float64), window, lo, hi, seed)


def _apart(window: int) -> int:
    """Two windows: the time apart within which neighbours are left out, the
    permutation's blocks and the fewest subsequences on either side of a split."""
    return 2 * window


def _scan_segment(x, window, lo, hi, seed):
    ties = np.random.default_rng([seed, lo, hi]).integers(0, 2**62)
    edges = nearest_subsequences(x, window, lo, hi, _apart(window), NEIGHBOURS, ties)
    position = np.arange(hi - lo, dtype=np.int64)
    statistic, split = crossing_scan(position, edges, _apart(window))
    return float(statistic), int(split), edges


def _block_pvalue(edges, window, statistic, alpha, seed) -> float:
    """``(1 + k) / (1 + R)`` for ``k`` of ``R = PERMUTATIONS`` block orders
    whose statistic is at least ``statistic`` (less its float rounding); drawn
    :data:`ORDERS` at a time until ``k`` shows the p-value above ``alpha``
    (then a lower bound of it)."""
    block = _apart(window)
    n_blocks = -(-edges.shape[0] // block)
    rng = np.random.default_rng(seed)
    # the smallest count whose p-value exceeds alpha: no need to draw on
    stop = max(1, math.floor(alpha * (PERMUTATIONS + 1)))
    threshold = statistic - 1e-9 * abs(statistic)
    count = drawn = 0
    while drawn < PERMUTATIONS and count < stop:
        size = min(ORDERS, PERMUTATIONS - drawn)
        orders = rng.permuted(np.broadcast_to(np.arange(n_blocks), (size, n_blocks)), axis=1)
        orders = np.ascontiguousarray(orders, dtype=np.int64)
        found, _ = block_exceedances(edges, orders, block, block, threshold, stop - count)
        count += found
        drawn += size
    return (1 + count) / (1 + PERMUTATIONS)


def neighbour_changes(
    x: np.ndarray,
    window: int,
    alpha: float,
    *,
    min_size: int = 0,
    max_changes: int | None = None,
    seed: int = 0,
) -> NeighbourAnswer:
    """Binary segmentation of ``x`` (one channel, finite) by the
    nearest-neighbour test of subsequences of ``window`` samples at level
    ``alpha`` (see the module docstring).

    Each side of a split holds at least ``max(2 window, min_size)``
    subsequences; at most ``max_changes`` change-points are kept.  A
    change-point is at the split's subsequence plus half a window: the
    subsequences that straddle a change hold some of each side.  The draws
    come from ``seed``: the same answer every time."""
    x = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    if window < 2 or x.size < 8 * window:
        return _answer([], window)
    side = max(_apart(window), int(min_size))
    found: list[tuple[int, float, float]] = []
    pending = [(0, x.size - window + 1)]
    while pending and (max_changes is None or len(found) < max_changes):
        lo, hi = pending.pop(0)  # (breadth first: the order binary segmentation tests in)
        if hi - lo < max(2 * side, 4 * _apart(window)):
            continue
        statistic, split, edges = _scan_segment(x, window, lo, hi, seed)
        if split < side or hi - lo - split < side:
            continue
        p = _block_pvalue(edges, window, statistic, alpha, [seed, lo, hi, 1])
        if p <= alpha:
            found.append((lo + split, p, statistic))
            pending += [(lo, lo + split), (lo + split, hi)]
    return _answer(found, window)


def _answer(found, window: int) -> NeighbourAnswer:
    order = np.array([f[0] for f in found], dtype=np.int64) + window // 2
    rank = np.argsort(order, kind="stable")
    pvalues = np.array([f[1] for f in found], dtype=np.float64)
    statistics = np.array([f[2] for f in found], dtype=np.float64)
    return NeighbourAnswer(order[rank], pvalues[rank], statistics[rank], order)
