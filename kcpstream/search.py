"""Binary segmentation over block statistics, with exact refinement.

The best split of a segment is found exactly:

1. gains at every block boundary inside the segment come from the prefix
   sums (:func:`~kcpstream._kernels.blockstats.segment_boundary_scan`);
2. each block (or refined piece) gets an upper bound on the gain of any split
   strictly inside it, ``N / (nL nR) * (max(||u_s||, ||u_t||) + R)^2`` with
   ``u`` the centred cumulative sum at the piece's ends and ``R`` its bridge
   excursion;
3. only pieces whose bound reaches the best boundary gain are read again and
   scanned sample by sample — all of a round's reads in one ``dask.compute``.

Because statistics are exact integers and one function computes every gain,
the result equals a brute-force scan of every split position, ties going to
the smallest index.

The driver reproduces sequential binary segmentation (split the segment with
the largest gain, repeat) but evaluates the children of every segment that
the sequential order would split next in the same round, so the number of
rounds is about the depth of the segmentation tree.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from ._kernels.blockstats import segment_boundary_scan
from .features.base import FeatureMap
from .passes import ScanRequest, scan_pieces
from .signal import Signal
from .stats import BlockStats, PieceStats

__all__ = [
    "SegmentSplit",
    "SearchLog",
    "best_splits",
    "binary_segmentation",
    "NotEnoughSplitsError",
]

#: relative slack on pruning bounds (covers floating-point rounding of the bounds)
_REL_SLACK = 1e-9


class NotEnoughSplitsError(ValueError):
    """Binary segmentation ran out of admissible splits before ``n_bkps``."""


@dataclass
class SegmentSplit:
    """The best split of the segment ``[start, end)``.

    ``gain`` is in quantized units (``-1`` and ``split = -1`` when the segment
    is too short to split).
    """

    start: int
    end: int
    gain: float = -1.0
    split: int = -1
    piece: tuple[int, int] | None = None
    left: PieceStats | None = None
    right: PieceStats | None = None

    @property
    def splittable(self) -> bool:
        return self.split >= 0


@dataclass
class SearchLog:
    """Counters of the search, for diagnostics."""

    rounds: int = 0
    segments_evaluated: int = 0
    pieces_scanned: int = 0
    samples_scanned: int = 0
    history: list[int] = field(default_factory=list)


def _segment_pieces(stats: BlockStats, start: int, end: int):
    """Grid indices of interior boundaries and bridge bounds of the end pieces."""
    B = stats.block_size
    j0 = start // B + 1
    j1 = (end - 1) // B
    if j0 > j1:
        return j0, j1, stats.piece_bridge(start, end), 0.0
    return j0, j1, stats.piece_bridge(start, j0 * B), stats.piece_bridge(j1 * B, end)


def best_splits(
    stats: BlockStats,
    signal: Signal,
    fmap: FeatureMap,
    segments: list[tuple[int, int]],
    min_size: int,
    tile: int,
    log: SearchLog,
) -> list[SegmentSplit]:
    """Exact best split of each segment; the refinement reads go in one compute."""
    B = stats.block_size
    p = stats.n_features
    qmax2 = max(stats.global_max_norm2, 1.0)
    out: list[SegmentSplit] = []
    requests: list[ScanRequest] = []
    owners: list[int] = []
    for start, end in segments:
        res = SegmentSplit(start, end)
        out.append(res)
        n_seg = end - start
        if n_seg < 2 * min_size:
            continue
        pa, _ = stats.prefix_at(start)
        pe, _ = stats.prefix_at(end)
        j0, j1, bridge_head, bridge_tail = _segment_pieces(stats, start, end)
        eps_norm = n_seg * math.sqrt(qmax2 * p) * 2.0**-48
        best_gain, best_pos, bounds = segment_boundary_scan(
            stats.prefix, stats.bridge, B, j0, j1, start, end, pa, pe,
            bridge_head, bridge_tail, min_size, eps_norm,
        )  # fmt: skip
        res.gain, res.split = float(best_gain), int(best_pos)
        abs_slack = n_seg * p * qmax2 * 2.0**-44
        if best_pos >= 0:
            chosen = np.flatnonzero(
                (bounds >= 0) & (bounds * (1 + _REL_SLACK) + abs_slack >= best_gain)
            )
        else:
            chosen = np.flatnonzero(bounds >= 0)
        if chosen.size == 0:
            continue
        positions = np.concatenate(([start], np.arange(j0, j1 + 1, dtype=np.int64) * B, [end]))
        total = pe - pa
        for i in chosen:
            ps, pend = int(positions[i]), int(positions[i + 1])
            if ps == start:
                left = np.zeros(p, np.int64)
            else:
                left = stats.prefix_at(ps)[0] - pa
            requests.append(ScanRequest((start, end), ps, pend, left, total))
            owners.append(len(out) - 1)
    log.rounds += 1
    log.segments_evaluated += len(segments)
    log.pieces_scanned += len(requests)
    log.samples_scanned += sum(r.piece_end - r.piece_start for r in requests)
    for owner, result in zip(
        owners, scan_pieces(signal, fmap, requests, min_size, tile), strict=True
    ):
        res = out[owner]
        if result.pos < 0:
            continue
        better = result.gain > res.gain or (result.gain == res.gain and result.pos < res.split)
        if res.split < 0 or better:
            res.gain, res.split = result.gain, result.pos
            res.piece = (result.request.piece_start, result.request.piece_end)
            res.left, res.right = result.left, result.right
    return out


def _record_split(stats: BlockStats, seg: SegmentSplit) -> None:
    if seg.piece is not None:
        stats.add_split(seg.split, seg.piece[0], seg.piece[1], seg.left, seg.right)


def binary_segmentation(
    stats: BlockStats,
    signal: Signal,
    fmap: FeatureMap,
    *,
    min_size: int,
    n_bkps: int | None = None,
    pen: float | None = None,
    tile: int,
    log: SearchLog | None = None,
) -> list[SegmentSplit]:
    """Sequential binary segmentation; returns the splits in the order made.

    Stops after ``n_bkps`` splits, or when the best gain is not above ``pen``
    (feature units), or when no segment can be split (an error when
    ``n_bkps`` was not reached).
    """
    if (n_bkps is None) == (pen is None):
        raise ValueError("give exactly one of n_bkps and pen")
    log = log if log is not None else SearchLog()
    pen_q = None if pen is None else pen / stats.unit
    limit = n_bkps if n_bkps is not None else math.inf
    splits: dict[tuple[int, int], SegmentSplit] = {}

    def evaluate(segs: list[tuple[int, int]]) -> None:
        for seg in best_splits(stats, signal, fmap, segs, min_size, tile, log):
            splits[(seg.start, seg.end)] = seg

    def children(seg: SegmentSplit) -> tuple[tuple[int, int], tuple[int, int]]:
        return (seg.start, seg.split), (seg.split, seg.end)

    evaluate([(0, stats.n)])
    while True:
        # simulate the sequential order with the gains known so far
        heap = [(-splits[(0, stats.n)].gain, splits[(0, stats.n)].split, (0, stats.n))]
        order: list[SegmentSplit] = []
        pending: list[SegmentSplit] = []
        while heap and len(order) + len(pending) < limit:
            _, _, key = heapq.heappop(heap)
            seg = splits[key]
            if not seg.splittable or (pen_q is not None and not seg.gain > pen_q):
                break
            kids = children(seg)
            if kids[0] not in splits:
                pending.append(seg)
                continue
            order.append(seg)
            for kid in kids:
                ks = splits[kid]
                heapq.heappush(heap, (-ks.gain, ks.split, kid))
        if not pending:
            break
        todo = []
        for seg in pending:
            _record_split(stats, seg)
            todo.extend(children(seg))
        evaluate(todo)
    for seg in order:
        _record_split(stats, seg)
    if n_bkps is not None and len(order) < n_bkps:
        raise NotEnoughSplitsError(
            f"binary segmentation can place only {len(order)} change-points in this signal with "
            f"min_size={min_size} (every remaining segment is shorter than 2*min_size); ask for "
            f"n_bkps<={len(order)} or use a smaller min_size"
        )
    log.history = [seg.split for seg in order]
    return order
