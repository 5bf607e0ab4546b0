"""The scan of a piece too long to featurize at once, slice by slice.

A refinement scans every split of a piece (:mod:`kcpstream.passes.scan`).
A piece of a long series' block grid can hold tens of millions of samples
(the grid of 2**40 samples has blocks of 2**25): its features would not fit
in memory, and its raw samples are read chunk by chunk.  :class:`SlicedScan`
takes the piece's samples in consecutive slices, featurizes one at a time
and carries the exact integer sum of the samples before the slice from one
to the next.  Every position's gain is :func:`split_gain`'s value on the
same integers as the scan of the whole piece, so the best split is the same,
ties going to the first position as there.

The statistics of the two halves of the winning split are those of the
slices before and after it, merged with the bridge rule of
:func:`~kcpstream._kernels.blockstats.merge_piece_into`: the same counts and
exact sums, a bridge bound that is valid though looser, and sums of squared
norms that may differ in their last bits (they only feed upper bounds and
costs, which are compared within their rounding).
"""

from __future__ import annotations

import numpy as np

from kcpstream._kernels.blockstats import (
    merge_piece_into,
    piece_stats,
    snapshot_every,
    split_gain,
)
from kcpstream._kernels.blockstats import scan_piece as _scan_piece_kernel
from kcpstream.features.base import FeatureMap
from kcpstream.passes import ranges
from kcpstream.passes.ranges import as_2d, featurize_range, scratch_features
from kcpstream.search.requests import ScanRequest, ScanResult, piece_of
from kcpstream.search.stats import PieceStats

#: Longest piece scanned whole: beyond it a piece is scanned in slices (its
#: features would take ``4 p`` bytes per sample at once: 64 MiB at 64 features).
LONG_PIECE = 2**18

#: Float64 sums of integer features are exact below ``2**53`` (``2**52`` kept).
FLOAT_SUM_BITS = 52


def whole_length(fmap: FeatureMap) -> int:
    """The longest piece scanned whole, and the longest slice: :data:`LONG_PIECE`
    samples, fewer on a grid so fine that the float64 sums of a piece's
    features (its halves' statistics) could round.  A map whose features
    depend on the data is checked against :data:`LONG_PIECE` after the data
    pass instead (:func:`~kcpstream.engine.headroom.check_after_pass`)."""
    bound = fmap.quantized_amplitude_bound_
    if bound <= 0:
        return LONG_PIECE
    return int(max(1, min(LONG_PIECE, (2.0**FLOAT_SUM_BITS - 1) // bound)))


def slice_length(fmap: FeatureMap) -> int:
    """Samples per slice: the features of one fill a thread's scratch buffer."""
    return max(1, min(whole_length(fmap), ranges.MAX_SCRATCH_BYTES // (4 * fmap.n_features_out_)))


def _stats(z: np.ndarray, scale: float, bounds: np.ndarray, every: int) -> list[PieceStats]:
    """:func:`piece_stats` of the pieces ``bounds`` cuts the features ``z`` into."""
    n = len(bounds) - 1
    S = np.empty((n, z.shape[0] * z.shape[2]), np.int64)
    Q, M2, R = np.empty(n), np.empty(n), np.empty(n)
    cnt = np.empty(n, np.int64)
    piece_stats(z, scale, bounds, S, Q, M2, R, cnt, -1.0, every)
    return [
        PieceStats(count=int(cnt[i]), S=S[i], Q=float(Q[i]), M2=float(M2[i]), R=float(R[i]))
        for i in range(n)
    ]


def _merged(parts: list[PieceStats]) -> PieceStats:
    """The statistics of consecutive pieces, in order, as one."""
    first = parts[0]
    S = first.S.copy()
    count, Q, M2, R = first.count, first.Q, first.M2, first.R
    for part in parts[1:]:
        count, Q, M2, R = merge_piece_into(
            count, S, Q, M2, R, part.count, part.S, part.Q, part.M2, part.R
        )
    return PieceStats(count=int(count), S=S, Q=float(Q), M2=float(M2), R=float(R))


class SlicedScan:
    """The exact scan of one piece whose samples come in consecutive slices.

    Feed the piece's raw samples in order (:meth:`feed`), then take the
    result (:meth:`result`): the same best gain and position as
    :func:`~kcpstream.passes.scan.scan_piece` of the whole piece (or run of
    grid pieces: its grid points skipped, the halves those of the grid piece
    split).  Holds the features of one slice at a time, the statistics of
    every slice (``p`` integers each) and the raw samples of the slice
    holding the best split so far.
    """

    def __init__(self, req: ScanRequest, fmap: FeatureMap, min_size: int, tile: int) -> None:
        self.req, self.fmap, self.min_size, self.tile = req, fmap, min_size, tile
        self.scale = float(2.0**fmap.quantum_exponent_)
        self.every = snapshot_every(fmap.window_samples)
        self.left = np.array(req.left_at_piece, np.int64)  # the segment's sum before `at`
        self.at = req.piece_start
        self.gain, self.pos = -1.0, -1
        self.parts: list[tuple[int, PieceStats]] = []  # (start, statistics) of each slice
        self.best_slice: tuple[int, np.ndarray] | None = None

    def feed(self, x: np.ndarray) -> None:
        """Scan the next samples ``[at, at + len(x))`` of the piece, in slices of
        at most :func:`slice_length` (of a run of grid pieces, cut at the
        grid's points too: each slice lies in one)."""
        x = as_2d(x)
        a, b = self.at, self.at + x.shape[0]
        if b > self.req.piece_end or a == b:
            raise ValueError("samples outside the piece")
        g, step = self.req.grid, slice_length(self.fmap)
        grid_points = range((a // g + 1) * g, b, g) if g else ()
        cuts = sorted({a, b, *grid_points, *range(a, b, step)})
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
            self._feed(x[lo - a : hi - a])

    def _feed(self, x: np.ndarray) -> None:
        a, b = self.at, self.at + x.shape[0]
        seg_a, seg_e = self.req.segment
        grid = self.req.grid
        inside = a > self.req.piece_start and not (grid and a % grid == 0)
        if inside and seg_a + self.min_size <= a <= seg_e - self.min_size:
            # the slice's first position: strictly inside the piece, not the slice
            g = float(split_gain(a - seg_a, seg_e - a, self.left, self.req.total))
            if g > self.gain:
                self.gain, self.pos, self.best_slice = g, a, (a, x)
        z = featurize_range(self.fmap, x, self.tile, scratch_features(self.fmap, len(x)))
        g, pos = _scan_piece_kernel(
            z, self.scale, a, seg_a, seg_e, self.left, self.req.total, self.min_size, grid
        )
        if g > self.gain:
            self.gain, self.pos, self.best_slice = float(g), int(pos), (a, x)
        (part,) = _stats(z, self.scale, np.array([0, b - a], np.int64), self.every)
        self.left += part.S
        self.parts.append((a, part))
        self.at = b

    def result(self) -> ScanResult:
        """The best split of the piece and the statistics of its two halves."""
        if self.at != self.req.piece_end:
            raise ValueError("the piece was not fed whole")
        if self.pos < 0:
            return ScanResult(self.req, -1.0, -1, None, None)
        a, x = self.best_slice
        pa, pb = piece_of(self.req, self.pos)  # the piece (of a run, the grid's) split
        before = [s for start, s in self.parts if pa <= start < a]
        after = [s for start, s in self.parts if a < start < pb]
        if self.pos == a:  # the split is at the slice's start: it is all on the right
            mine = [next(s for start, s in self.parts if start == a)]
            left, right = before, mine + after
        else:
            z = featurize_range(self.fmap, x, self.tile, scratch_features(self.fmap, len(x)))
            cut = np.array([0, self.pos - a, len(x)], np.int64)
            head, tail = _stats(z, self.scale, cut, self.every)
            left, right = [*before, head], [tail, *after]
        return ScanResult(self.req, self.gain, self.pos, _merged(left), _merged(right))


def scan_sliced(
    x: np.ndarray, fmap: FeatureMap, req: ScanRequest, min_size: int, tile: int
) -> ScanResult:
    """:class:`SlicedScan` of a piece whose samples ``x`` are all held."""
    scan = SlicedScan(req, fmap, min_size, tile)
    scan.feed(x)
    return scan.result()
