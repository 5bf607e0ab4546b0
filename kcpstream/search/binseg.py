"""Binary segmentation over block statistics, with exact refinement.

The best split of a segment is found exactly:

1. gains at every block boundary inside the segment come from the prefix
   sums (:func:`~kcpstream._kernels.blockstats.segment_boundary_scan`);
2. each block (or refined piece) gets an upper bound on the gain of any split
   strictly inside it, ``N / (nL nR) * (max(||u_s||, ||u_t||) + R)^2`` with
   ``u`` the centred cumulative sum at the piece's ends and ``R`` its bridge
   excursion;
3. only pieces whose bound reaches the best boundary gain are read again and
   scanned sample by sample — all of a round's reads in one graph, pieces
   next to each other as one run (one request, its grid points skipped).
   A segment with many such pieces scans those of the largest bounds first,
   a round at a time: the best split they hold is exact, and it rules out
   the pieces whose bounds fall below it without reading them.

Because statistics are exact integers and one function computes every gain,
the result equals a brute-force scan of every split position, ties going to
the smallest index.

The driver reproduces sequential binary segmentation (split the segment with
the largest gain, repeat) but evaluates the children of every segment that
the sequential order would split next in the same round, so the number of
rounds is about the depth of the segmentation tree.  The same round also
refines the segments whose bound could still displace the weakest split
taken, which the replay would otherwise meet one round at a time.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from kcpstream._kernels.blockstats import segment_pending
from kcpstream._kernels.dense import best_split_between, dense_binseg
from kcpstream.errors import NotEnoughSplitsError
from kcpstream.search.requests import ScanRequest, ScanResult
from kcpstream.search.stats import BlockStats, PieceStats

#: relative slack on pruning bounds (covers floating-point rounding of the bounds)
_REL_SLACK = 1e-9


class Pending(NamedTuple):
    """A piece, or a run of pieces of the grid ``grid`` (0: one piece), of a
    segment that its bounds could not rule out.  Its sums are not held: a
    search evaluates hundreds of segments per series, most never scanned
    (:meth:`SegmentSplit.request` makes the scan request when it is)."""

    piece_start: int
    piece_end: int
    grid: int


@dataclass
class SegmentSplit:
    """What is known of the best split of the segment ``[start, end)``.

    ``gain``/``split`` hold the best split found so far (quantized units;
    ``-1`` when there is none).  While ``pending`` lists pieces whose bound
    reaches ``gain``, the best split is only known to be at most ``upper``;
    a round of refinement scans them (:func:`binseg_steps` asks, :mod:`kcpstream.passes.scan`
    reads) and makes the segment exact.
    """

    start: int
    end: int
    gain: float = -1.0
    split: int = -1
    upper: float = -1.0
    pending: list[Pending] = field(default_factory=list)
    #: the bound of each pending request (with its rounding slack)
    bounds: list[float] = field(default_factory=list)
    piece: tuple[int, int] | None = None
    left: PieceStats | None = None
    right: PieceStats | None = None
    #: ``[a, b)`` of the pieces refinement scanned (of the ``pending`` of
    #: :func:`bound_segment`, all but those a better split ruled out), None
    #: when not scanned in this process
    scanned: list[tuple[int, int]] | None = None

    def request(self, stats: BlockStats, i: int) -> ScanRequest:
        """The scan of ``pending[i]``, with the exact sums it starts from."""
        a, e, grid = self.pending[i]
        base = stats.prefix_at(self.start)[0]
        left = stats.prefix_at(a)[0] - base
        return ScanRequest(
            (self.start, self.end), a, e, left, stats.prefix_at(self.end)[0] - base, grid
        )

    @property
    def exact(self) -> bool:
        return not self.pending

    @property
    def splittable(self) -> bool:
        return self.split >= 0 or bool(self.pending)

    def sort_key(self) -> tuple[float, int, int]:
        """Heap key: largest gain first; an unrefined segment before an exact one
        of equal value (it may tie at a smaller position); then the smaller split."""
        if self.exact:
            return (-self.gain, 1, self.split)
        return (-self.upper, 0, self.start)


@dataclass
class SearchLog:
    """Counters of the search, for diagnostics."""

    rounds: int = 0
    segments_evaluated: int = 0
    pieces_scanned: int = 0
    samples_scanned: int = 0
    #: samples featurized to scan them: those scanned in rounds, and those of
    #: the blocks a search in one call featurized (:mod:`kcpstream.search.held`)
    samples_featurized: int = 0
    #: searches made in one call over features held whole (no round, no replay)
    held_searches: int = 0


def _segment_pieces(stats: BlockStats, start: int, end: int):
    """Grid indices of interior boundaries and bridge bounds of the end pieces."""
    B = stats.block_size
    j0 = start // B + 1
    j1 = (end - 1) // B
    if j0 > j1:
        return j0, j1, stats.piece_bridge(start, end), 0.0
    return j0, j1, stats.piece_bridge(start, j0 * B), stats.piece_bridge(j1 * B, end)


def bound_segment(stats: BlockStats, start: int, end: int, min_size: int) -> SegmentSplit:
    """Best split at the block boundaries of a segment and the pieces that could beat it.

    No data is read: this uses the block statistics only, in one compiled call
    (:func:`~kcpstream._kernels.blockstats.segment_pending`): a search evaluates
    hundreds of segments per series, and their Python bookkeeping was most of a
    short series' search.
    """
    seg = SegmentSplit(start, end)
    n_seg = end - start
    if n_seg < 2 * min_size:
        return seg
    B = stats.block_size
    qmax2 = max(stats.global_max_norm2, 1.0)
    pa, _ = stats.prefix_at(start)
    pe, _ = stats.prefix_at(end)
    j0, j1, bridge_head, bridge_tail = _segment_pieces(stats, start, end)
    gain, split, upper, firsts, ends, grids, bounds = segment_pending(
        stats.prefix,
        stats.bridge,
        B,
        j0,
        j1,
        start,
        end,
        pa,
        pe,
        bridge_head,
        bridge_tail,
        min_size,
        math.sqrt(qmax2),
        n_seg * math.sqrt(qmax2 * stats.n_features) * 2.0**-48,
        1 + _REL_SLACK,
        stats.gain_rounding(n_seg),
        max(1, MAX_RUN_SAMPLES // B),
    )
    seg.gain, seg.split, seg.upper = float(gain), int(split), float(upper)
    if firsts.size:
        seg.bounds = bounds.tolist()
        runs = zip(firsts.tolist(), ends.tolist(), grids.tolist(), strict=True)
        seg.pending = [Pending(*run) for run in runs]
    return seg


#: Most samples of consecutive pending pieces one scan request covers: pieces
#: next to each other are scanned as one run (the Python work per request,
#: not the samples, is what a search of short blocks spends its time on); a
#: run's features stay within a thread's scratch buffer at 64 features.
MAX_RUN_SAMPLES = 2**15


#: A segment with more pending requests than this scans first those of the
#: largest bounds, about the square root of their number (at least this
#: many) a round: in a segment without a change the best boundary's gain is
#: a noise maximum that the bounds of most blocks reach, and the exact best
#: split of a few of them rules most of the others out.
FIRST_SCANS = 16


def _to_scan(seg: SegmentSplit) -> list[int]:
    """The indices of the pending requests of ``seg`` to scan this round."""
    k = len(seg.pending)
    if k <= FIRST_SCANS:
        return list(range(k))
    want = max(FIRST_SCANS, math.isqrt(k - 1) + 1)
    top = np.argsort(-np.asarray(seg.bounds), kind="stable")[:want]
    return sorted(top.tolist())


def _apply_scans(segments: list[SegmentSplit], taken: list[list[int]], results) -> None:
    """Fold the scans of the requests ``taken`` of every segment in; the pending
    ones left that could still hold a split at least as good stay pending."""
    owners = [seg for seg, idx in zip(segments, taken, strict=True) for _ in idx]
    for seg, result in zip(owners, results, strict=True):
        if result.pos < 0:
            continue
        better = result.gain > seg.gain or (result.gain == seg.gain and result.pos < seg.split)
        if seg.split < 0 or better:
            seg.gain, seg.split = result.gain, result.pos
            seg.piece = result.piece
            seg.left, seg.right = result.left, result.right
    for seg, idx in zip(segments, taken, strict=True):
        done = set(idx)
        scanned = [(seg.pending[i].piece_start, seg.pending[i].piece_end) for i in idx]
        seg.scanned = (seg.scanned or []) + scanned
        # a tie at a smaller position must still be found: ">=", as bound_segment
        left = [
            i
            for i in range(len(seg.pending))
            if i not in done and (seg.split < 0 or seg.bounds[i] >= seg.gain)
        ]
        seg.pending = [seg.pending[i] for i in left]
        seg.bounds = [seg.bounds[i] for i in left]
        seg.upper = max([seg.gain, *seg.bounds])


def _guess(
    seg: SegmentSplit, stats: BlockStats, hints: dict[int, SegmentSplit], min_size: int
) -> tuple[tuple[float, int, int], int]:
    """Heap key and split of a segment standing in for the descendants of one
    being refined (:func:`_replay`): its own when exact; else the split of the
    previous version's segment with the same start when that ended at the
    series' end (``hints``), else the best block boundary's (a lower bound of
    the gain)."""
    if seg.exact:
        return seg.sort_key(), seg.split
    hint = hints.get(seg.start) if seg.end == stats.n else None
    if hint is not None:
        # where this version's sums are known: the split itself, or the grid
        # point before it (its block changed)
        B = stats.block_size
        pos = hint.split if stats.knows(hint.split) else hint.split - hint.split % B
        if seg.start + min_size <= pos <= seg.end - min_size:
            return (-hint.gain, 1, pos), pos
    return (-seg.gain, 1, seg.start), seg.split


def _replay(root, known, segment_at, limit, pen_q, guess):
    """Sequential binary segmentation with what is known: ``(order, to_refine,
    heap)``, the exact splits it takes, the unrefined segments it reaches and
    what is left to take.

    Heap entries are ``(key, (start, end), guessed)``: a guessed segment
    stands in for a descendant of a segment being refined (``guess(seg)``:
    its key and split); it takes a place in the path, so that the replay goes
    no deeper elsewhere than the refined segment's own splits will let it, but
    is not refined itself.
    """
    heap = [(root.sort_key(), (root.start, root.end), False)]
    order: list[SegmentSplit] = []
    to_refine: list[SegmentSplit] = []
    guessed = 0
    while heap and len(order) + len(to_refine) + guessed < limit:
        _, key, is_guess = heapq.heappop(heap)
        seg = known[key]
        value = seg.gain if seg.exact else seg.upper
        if not seg.splittable or (pen_q is not None and not value > pen_q):
            break
        if is_guess or not seg.exact:
            if is_guess:
                guessed += 1
            else:
                to_refine.append(seg)
            split = guess(seg)[1]
            if split >= 0:
                for kid in (segment_at(seg.start, split), segment_at(split, seg.end)):
                    heapq.heappush(heap, (guess(kid)[0], (kid.start, kid.end), True))
            continue
        order.append(seg)
        for kid in (segment_at(seg.start, seg.split), segment_at(seg.split, seg.end)):
            heapq.heappush(heap, (kid.sort_key(), (kid.start, kid.end), False))
    return order, to_refine, heap


def _contenders(
    heap: list, known: dict, order: list[SegmentSplit], to_refine: list[SegmentSplit]
) -> list[SegmentSplit]:
    """Unrefined segments the replay did not reach whose bound reaches the weakest
    split it took (an exact gain, or a lower bound ``gain`` of a segment being
    refined).  Once the segments above them are refined they are the next ones
    the replay meets, one per round; refining them now saves those rounds.  Any
    segment may be refined early: its split becomes exact, the replay is unchanged.
    """
    taken = [seg.gain for seg in (*order, *to_refine) if seg.split >= 0]
    if not taken:
        return []
    floor = min(taken)
    real = (known[key] for _, key, is_guess in heap if not is_guess)
    return [seg for seg in real if not seg.exact and seg.upper >= floor]


def count_round(log: SearchLog, requests: list[ScanRequest]) -> None:
    log.rounds += 1
    log.pieces_scanned += sum(r.pieces for r in requests)
    samples = sum(r.piece_end - r.piece_start for r in requests)
    log.samples_scanned += samples
    log.samples_featurized += samples


#: A search step generator: yields the pieces it needs scanned, receives their scans,
#: returns its outcome.
Steps = Generator[list[ScanRequest], list[ScanResult], Any]


def check_enough_splits(made: int, n_bkps: int | None, min_size: int, allow_fewer: bool) -> None:
    if n_bkps is not None and made < n_bkps and not allow_fewer:
        raise NotEnoughSplitsError(
            f"binary segmentation can place only {made} change-points in this signal with "
            f"min_size={min_size} (every remaining segment is shorter than 2*min_size); ask for "
            f"n_bkps<={made} or use a smaller min_size"
        )


def binseg_steps(
    stats: BlockStats,
    *,
    min_size: int,
    n_bkps: int | None = None,
    pen: float | None = None,
    log: SearchLog | None = None,
    allow_fewer: bool = False,
    known: dict[tuple[int, int], SegmentSplit] | None = None,
    hints: dict[int, SegmentSplit] | None = None,
) -> Steps:
    """Sequential binary segmentation, as a generator of refinement rounds.

    Returns (through ``StopIteration``) the splits in the order made.  Stops
    after ``n_bkps`` splits, or when the best gain is not above ``pen``
    (feature units), or when no segment can be split (an error when
    ``n_bkps`` was not reached, unless ``allow_fewer``).

    Segments are refined lazily: the order of splits is replayed with what
    is known (exact gains, or upper bounds for unrefined segments); the
    unrefined segments that the replay reaches are refined together in one
    round (one ``yield``; a segment with many pending pieces scans those of
    the largest bounds, see :data:`FIRST_SCANS`, and stays unrefined while
    others can still beat what they held), and the replay repeats until it
    reaches none.
    Segments that binary segmentation never splits are usually never read
    again.  ``known`` (updated in place) holds the segments evaluated so far,
    so a later search over the same statistics (a checkpoint) reads nothing
    it has read before.

    A segment being refined holds a place in the replay for each split its
    subtree will make, or the replay would go deeper elsewhere and refine
    segments the path never reaches: its descendants are guessed (at the
    best block boundary, or at ``hints[start]``'s split for a segment that
    ends at the series' end: the segment of a previous version of the
    series with that start, which an append made longer) and counted, not
    refined.  Guesses only choose what a round refines; the path is replayed
    again until every segment it takes is exact, so the splits are those of
    sequential binary segmentation whatever was guessed.
    """
    if (n_bkps is None) == (pen is None):
        raise ValueError("give exactly one of n_bkps and pen")
    log = log if log is not None else SearchLog()
    pen_q = None if pen is None else pen / stats.unit
    limit = n_bkps if n_bkps is not None else math.inf
    known = known if known is not None else {}

    def segment_at(start: int, end: int) -> SegmentSplit:
        if (start, end) not in known:
            known[(start, end)] = bound_segment(stats, start, end, min_size)
            log.segments_evaluated += 1
        return known[(start, end)]

    root = segment_at(0, stats.n)
    hints = hints or {}

    def guess(seg: SegmentSplit):
        return _guess(seg, stats, hints, min_size)

    while True:
        order, to_refine, heap = _replay(root, known, segment_at, limit, pen_q, guess)
        if not to_refine:
            break
        to_refine += _contenders(heap, known, order, to_refine)
        taken = [_to_scan(seg) for seg in to_refine]
        requests = [
            seg.request(stats, i) for seg, idx in zip(to_refine, taken, strict=True) for i in idx
        ]
        count_round(log, requests)
        _apply_scans(to_refine, taken, (yield requests))
        for seg in to_refine:  # keep the exact split's pieces with the statistics
            if seg.piece is not None:  # (of a segment still pending too: its children are guessed)
                stats.add_split(seg.split, seg.piece[0], seg.piece[1], seg.left, seg.right)
    check_enough_splits(len(order), n_bkps, min_size, allow_fewer)
    return order


def dense_binseg_steps(
    stats: BlockStats,
    *,
    min_size: int,
    n_bkps: int | None = None,
    pen: float | None = None,
    log: SearchLog | None = None,
    allow_fewer: bool = False,
) -> Steps:
    """:func:`binseg_steps` over statistics with one block per sample
    (``block_size = 1``): every position's prefix sum is known, so the whole
    search is one compiled loop of exact scans and no round reads data (the
    generator returns at once).  Returns the same splits, in the same order,
    with the same gains."""
    if (n_bkps is None) == (pen is None):
        raise ValueError("give exactly one of n_bkps and pen")
    if stats.block_size != 1:
        raise ValueError("the dense search needs statistics with block_size 1")
    log = log if log is not None else SearchLog()
    max_splits = n_bkps if n_bkps is not None else max(0, stats.n // min_size - 1)
    pen_q = -math.inf if pen is None else pen / stats.unit
    starts, ends, splits, gains = dense_binseg(stats.prefix, max_splits, pen_q, min_size)
    log.segments_evaluated += 1 + 2 * len(splits)
    order = [
        SegmentSplit(int(a), int(e), float(g), int(c), float(g))
        for a, e, c, g in zip(starts, ends, splits, gains, strict=True)
    ]
    check_enough_splits(len(order), n_bkps, min_size, allow_fewer)
    return order
    yield  # a generator that asks for no scan  # pragma: no cover


def scans_from_prefix(steps: Steps, stats: BlockStats, min_size: int) -> Steps:
    """Run a step generator whose scans are answered from statistics with one
    block per sample, without reading data (every split inside a piece is a
    grid point: its gain comes from the prefix sums).  Returns its outcome
    and asks for no scan itself."""
    if stats.block_size != 1:
        raise ValueError("scans can be answered without data only with block_size 1")
    try:
        requests = next(steps)
        while True:
            results = []
            for req in requests:
                a, e = req.segment
                if req.grid:  # a run of pieces of one sample: nothing strictly inside
                    results.append(ScanResult(req, -1.0, -1, None, None))
                    continue
                lo = max(req.piece_start + 1, a + min_size)
                hi = min(req.piece_end - 1, e - min_size)
                gain, pos = best_split_between(stats.prefix, a, e, lo, hi)
                results.append(ScanResult(req, float(gain), int(pos), None, None))
            requests = steps.send(results)
    except StopIteration as stop:
        return stop.value
    yield  # pragma: no cover
