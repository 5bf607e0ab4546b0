"""A step or a trend: whether a change-point explains its neighbourhood better
than a straight line does.

A steady drift -- a trend -- moves the mean of the features as surely as a
step does, and binary segmentation approximates it by a staircase whose every
step is significant against stationary noise.  A trend is not what a
change-point means, so a change-point ``c`` between its neighbours ``a`` and
``e`` is kept only when the step at ``c`` fits the samples of ``[a, e)`` better
than a straight line in time does (Bai & Perron's break and a linear trend
are the two models): both add one vector of ``p`` parameters to the segment's
mean, so the one with the larger gain -- the larger drop of the kernel cost --
is the better model, with no penalty between them.  A step between two flat
segments keeps most of its gain against the line (the line explains
``3 u (1 - u)`` of it, at most three quarters, for a step at the fraction
``u`` of the segment); a trend gives the line a third more gain than the best
step (the step explains at most three quarters of a line).

The line is fitted to the grid's pieces (the blocks, and the parts of a block
cut off by ``a`` and ``e``), each at its centre: exact with one block per
sample (short series, windows), and on the block grid a line through the
block means, which the within-block positions change by one block's width.
Both models are fitted to the same exact integer sums, so the decision is
the same whatever the chunking and however the pass was scheduled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kcpstream.search.stats import BlockStats

#: Grid points between the running sums :class:`GridMoments` keeps.
ANCHOR_EVERY = 256
#: Grid points cast and summed at a time while the running sums are made.
_PART = 16 * ANCHOR_EVERY


@dataclass(frozen=True)
class GridMoments:
    """The second prefix sums of a grid's feature sums, that a line fit needs:
    ``Q_j = sum_{l <= j} P_l``, ``P_l`` the exact prefix sum of the features
    at grid point ``l`` (quantized units), summed in float64 in order.

    Only every :data:`ANCHOR_EVERY`-th ``Q_j`` is kept; :meth:`at` continues
    from the one below with the same additions in the same order, so each
    ``Q_j`` is bit for bit ``numpy.cumsum(prefix, axis=1, dtype=float64)[:,
    j]`` without that ``(p, m + 1)`` array (as large as the prefix sums:
    1.25 GB at 10^10 samples, and a fresh allocation of that size can cost
    more than the sums).

    Attributes
    ----------
    prefix : ndarray
        The grid's prefix sums ``(p, m + 1)`` (int64, not copied).
    anchors : ndarray
        ``Q_j`` at ``j = 0, G, 2 G, ...`` for ``G`` = :data:`ANCHOR_EVERY`
        (float64, ``(p, m // G + 1)``).
    """

    prefix: np.ndarray
    anchors: np.ndarray

    @classmethod
    def of(cls, stats: BlockStats) -> GridMoments:
        """The moments of ``stats``'s grid (one pass over its prefix sums)."""
        P = stats.prefix
        p, cols = P.shape
        G = ANCHOR_EVERY
        anchors = np.empty((p, (cols - 1) // G + 1))
        part = np.empty((p, min(_PART, cols)))
        last = np.zeros(p)  # the running sum before the part
        for lo in range(0, cols, _PART):  # _PART is a multiple of G: anchors start each part
            hi = min(lo + _PART, cols)
            run = part[:, : hi - lo]
            run[...] = P[:, lo:hi]
            if lo:  # the running sum so far, added first, as cumsum adds it
                run[:, 0] += last
            np.cumsum(run, axis=1, out=run)
            anchors[:, lo // G : -(-hi // G)] = run[:, ::G]
            last = run[:, -1].copy()
        return cls(P, anchors)

    def at(self, j: int) -> np.ndarray:
        """``Q_j`` (float64, ``(p,)``)."""
        if not 0 <= j < self.prefix.shape[1]:
            raise IndexError(f"grid point {j} of {self.prefix.shape[1]}")
        g = j // ANCHOR_EVERY
        first = g * ANCHOR_EVERY
        if j == first:
            return self.anchors[:, g].copy()
        run = self.prefix[:, first + 1 : j + 1].astype(np.float64)
        run[:, 0] += self.anchors[:, g]
        return np.cumsum(run, axis=1, out=run)[:, -1].copy()

    @property
    def nbytes(self) -> int:
        return int(self.anchors.nbytes)


def _point(stats: BlockStats, j: int) -> int:
    """Grid point ``j``: ``j B``, and ``n`` for the last (a shorter block)."""
    return min(j * stats.block_size, stats.n)


def line_gain(stats: BlockStats, moments: GridMoments, start: int, end: int) -> float:
    """Cost decrease (quantized units) of a straight line in time over the mean
    of ``[start, end)``, fitted by least squares to its pieces on the grid.

    ``start`` and ``end`` are grid points or refined splits of ``stats``.  A
    range inside one piece has no line: 0.

    Every sum is taken about the range's mean time (``(start + end - 1) / 2``,
    which is also the pieces' mean centre): the moments of positions near
    ``10^10`` would otherwise cancel to nothing in float64.
    """
    first = min(-(-start // stats.block_size), stats.n_blocks)  # first grid point >= start
    last = stats.grid_index(end)  # last grid point <= end
    if first > last:
        return 0.0
    mean = (start + end - 1) / 2.0
    pieces = [(start, _point(stats, first)), (_point(stats, last), end)]  # parts of a block
    counts = [(b - a, 1) for a, b in pieces if b > a]  # (samples, pieces of that many)
    moment = np.zeros(stats.n_features, dtype=np.float64)
    for a, b in pieces:
        if b > a:
            s = stats.prefix_at(b)[0] - stats.prefix_at(a)[0]
            moment += ((a + b - 1) / 2.0 - mean) * s.astype(np.float64)
    if last > first:
        moment += _whole_pieces(stats, moments, first, last, mean)
        counts += _whole_counts(stats, first, last)
    N = float(end - start)
    # sum over the pieces of n_j (tau_j - mean)^2: the samples' spread about
    # their mean less each piece's own (sum n_j^3 - n_j, in exact integers)
    own = sum(k * (c * c - 1) * c for c, k in counts)
    spread = (N * N - 1.0) * N / 12.0 - float(own) / 12.0
    if not spread > 0:
        return 0.0
    return float(moment @ moment) / spread


def _whole_counts(stats: BlockStats, i: int, k: int) -> list[tuple[int, int]]:
    """The grid's pieces ``[g_j, g_j+1)`` for ``j = i .. k - 1`` as ``(samples,
    pieces of that many)``: blocks of ``B`` samples, but for the last, shorter one."""
    B, m = stats.block_size, stats.n_blocks - 1  # the last piece's index
    if i <= m < k:
        return [(B, k - i - 1), (_point(stats, m + 1) - _point(stats, m), 1)]
    return [(B, k - i)]


def _whole_pieces(stats, moments, i: int, k: int, mean: float) -> np.ndarray:
    """``sum_{j = i}^{k - 1} (tau_j - mean) S_j`` over the grid's pieces
    ``[g_j, g_j+1)``, by summation by parts: ``(tau_{k-1} - mean) P_k -
    (tau_i - mean) P_i - sum_{m = i+1}^{k-1} (tau_m - tau_{m-1}) P_m``."""
    B = stats.block_size

    def centre(j: int) -> float:
        return (_point(stats, j) + _point(stats, j + 1) - 1) / 2.0

    tau_i, tau_k = centre(i), centre(k - 1)
    P = stats.prefix
    out = (tau_k - mean) * P[:, k].astype(np.float64) - (tau_i - mean) * P[:, i].astype(np.float64)
    if k - 1 > i:
        # consecutive centres are B apart but for the last, shorter block
        inner = B * (moments.at(k - 1) - moments.at(i))
        m = stats.n_blocks - 1  # the last piece's index
        if i < m <= k - 1:
            inner += (centre(m) - centre(m - 1) - B) * P[:, m].astype(np.float64)
        out -= inner
    return out
