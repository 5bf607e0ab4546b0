"""How many change-points: from binary segmentation's path to the segmentation returned.

``n_bkps``, a penalty, the slope heuristic, or (``pen="auto"``) the test of
each split against the features' long-run covariance
(:mod:`kcpstream.selection.significance`), with the exact DP over the path's
change-points (:mod:`kcpstream.search.dynp`).  I/O-free: it works on a series'
block statistics (:class:`Memo`) and returns a :class:`Choice`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from kcpstream._kernels.blockstats import split_gain
from kcpstream.errors import InputError, NotEnoughSplitsError
from kcpstream.search.binseg import SegmentSplit, check_enough_splits
from kcpstream.search.dynp import dp_grid, optimal_partitions
from kcpstream.search.stats import BlockStats
from kcpstream.selection.edges import (
    bounded_edge_length,
    bounded_tail,
    edge_length,
    piece_tail,
    short_tail,
)
from kcpstream.selection.permutation import permutation_pvalue
from kcpstream.selection.rules import (
    Selection,
    select_by_penalty,
    significant_splits,
    slope_heuristic,
)
from kcpstream.selection.significance import (
    DEFAULT_ALPHA,
    MIN_BATCHES,
    BatchSums,
    LongRunNoise,
    RangeGrams,
    cycle_noise,
    local_batch,
    local_noise,
    long_run_noise,
    robust_cov,
    segment_spread,
    split_pvalue,
    tail_scale,
)
from kcpstream.selection.trend import GridMoments, line_gain

#: Rounds of noise estimation without the changes accepted so far (``pen="auto"``).
MAX_NOISE_ROUNDS = 8

#: The searches: binary segmentation, or dynamic programming over its candidates.
METHODS = ("binseg", "dynp")


@dataclass(frozen=True)
class Rule:
    """How the number of change-points is chosen: :func:`kcpstream.segment`'s
    ``n_bkps``, ``pen``, ``alpha`` and ``method``, checked.

    ``kind`` is ``"n_bkps"`` (exactly ``n_bkps``), ``"pen"`` (a linear penalty
    ``pen``), ``"slope"`` (the slope heuristic) or ``"auto"`` (the test at
    level ``alpha``)."""

    kind: str
    n_bkps: int | None = None
    pen: float | None = None
    alpha: float = DEFAULT_ALPHA
    method: str = "binseg"


@dataclass
class Memo:
    """One series as the choice tests it, and what its tests computed: each
    segment's spread, line and gain once, each split's p-value once per
    estimate of the noise (kept for the p-values of the result)."""

    stats: BlockStats
    min_size: int
    pointwise: bool  # samples segmented one by one, not windows
    description: str  # the series, for messages
    noise: LongRunNoise | None = None  # the features' long-run covariance tested against
    # (what, start, end) -> a segment's short-range spread ("spread") or a
    # line's gain in quantized units ("line")
    segments: dict = field(default_factory=dict)
    grams: RangeGrams | None = None  # consecutive differences of the batch sums, by tiles
    moments: GridMoments | None = None
    pvalues: dict = field(default_factory=dict)  # (start, split, end, gain, noise) -> p-value
    gains: dict = field(default_factory=dict)  # (start, split, end) -> gain, quantized units
    # windows whose features are the sums of their samples' (a long cycle's):
    # a window holding a change is a mixture of both sides, exactly
    mixtures: bool = False
    # the test may drop a change-point beside a window holding a change from a
    # segmentation of the path rather than take a lower D: binary segmentation
    # in memory (every subset of its candidates is a segmentation it can cost)
    merges: bool = False
    chosen: list | None = None  # the change-points the test kept (pen="auto")
    # the mixture checks' answers, by their arguments (for the noise tested against)
    apart: dict = field(default_factory=dict)
    # samples over which the samples depend on each other, as the fit found it
    # (0: not known): the noise estimate levels off at no shorter batches
    dependence: int = 0


@dataclass(frozen=True)
class Choice:
    """The segmentation chosen from a search's path.

    ``costs`` holds the path's cost for each number of segments;
    ``changepoints`` are on the block grid ``grid`` for ``method="dynp"``
    until refined (``gains`` and ``order`` are then None)."""

    costs: np.ndarray
    selection: Selection
    changepoints: np.ndarray
    gains: np.ndarray | None
    order: np.ndarray | None
    memo: Memo
    grid: np.ndarray | None = None

    def refined(self, changepoints: np.ndarray) -> Choice:
        """The choice at the exact positions ``changepoints`` of its grid's."""
        gains = local_gains(self.memo.stats, changepoints)
        return dataclasses.replace(self, changepoints=changepoints, gains=gains, order=changepoints)


def choose(memo: Memo, order: list[SegmentSplit], rule: Rule, d_max: int) -> Choice:
    """The path's costs, the chosen number of segments and its change-points,
    from binary segmentation's splits ``order`` and at most ``d_max`` segments
    (``memo.noise`` ends as the features' long-run covariance they were
    tested against)."""
    stats, n = memo.stats, memo.stats.n
    # the estimates of the noise share their work (BatchSums); a batch's series
    # are chosen one after the other, so one series' is held at a time
    grams = RangeGrams(_batch_diffs(stats))
    sums, short = batch_sums(stats), short_range(stats, grams)
    # the test's segments share the whole series' products (freed once chosen)
    memo.grams = grams if rule.kind == "auto" else None
    memo.noise = noise_of(
        stats, short, pointwise=memo.pointwise, sums=sums, shortest=memo.dependence
    )
    memo.apart.clear()
    path = [seg.split for seg in order]
    if rule.method == "binseg" and rule.kind == "pen":
        costs = _binseg_path_costs(stats, order)
        # binary segmentation's rule: every split the search made had a gain above
        # pen (the costs, in float, cannot tell a gain of a few quanta from none)
        selection = Selection("pen", len(path) + 1, len(costs), pen=float(rule.pen))
        changepoints = np.array(sorted(path[: selection.n_segments - 1]), dtype=np.int64)
        gain_of = {seg.split: seg.gain * stats.unit for seg in order}
        gains = np.array([gain_of[c] for c in changepoints])
        first = np.array(path[: selection.n_segments - 1], dtype=np.int64)
        return Choice(costs, selection, changepoints, gains, first, memo)
    if rule.method == "binseg":
        # the best segmentation for each D among binary segmentation's candidates
        # (an exact DP over at most d_max points, no data read): never costlier
        # than the greedy first splits, which it recovers from where the greedy
        # order went wrong, and the path the slope heuristic is fitted on (the
        # greedy path's costs fall too slowly)
        if rule.kind == "n_bkps":
            check_enough_splits(len(path), rule.n_bkps, memo.min_size, allow_fewer=False)
        grid = np.array([0, *sorted(path), n])
        costs, partitions = optimal_partitions(stats, grid, d_max, memo.min_size)
        memo.merges = stats.block_size == 1
        selection = _select(rule, costs, memo, order, partitions, (sums, short))
        changepoints = _kept(memo, selection, partitions)
        rank = {c: i for i, c in enumerate(path)}
        gains = local_gains(stats, changepoints)
        first = np.array(sorted(changepoints, key=rank.__getitem__), dtype=np.int64)
        return Choice(costs, selection, changepoints, gains, first, memo)
    grid = dp_grid(stats, path)
    d_dp = rule.n_bkps + 1 if rule.kind == "n_bkps" else d_max  # the DP's largest D
    costs, partitions = optimal_partitions(stats, grid, d_dp, memo.min_size)
    selection = _select(rule, costs, memo, order, partitions, (sums, short))
    chosen = partitions[selection.n_segments - 1]
    if chosen is None:  # pragma: no cover - n_bkps was checked against n and min_size
        raise NotEnoughSplitsError(
            f"no segmentation into {selection.n_segments} segments of at least "
            f"{memo.min_size} samples exists on the grid; lower n_bkps or min_size"
        )
    return Choice(costs, selection, chosen, None, None, memo, grid)


def _kept(memo: Memo, selection: Selection, partitions) -> np.ndarray:
    """The change-points chosen: those the test kept (a segmentation of the
    path less the change-points beside a window holding a change), else the
    path's segmentation into the number of segments selected."""
    if selection.rule == "auto" and memo.chosen is not None:
        return np.asarray(memo.chosen, dtype=np.int64)
    return partitions[selection.n_segments - 1]


def _binseg_path_costs(stats, order) -> np.ndarray:
    """Cost after each split: a split replaces one segment's cost by its two halves'."""
    costs = [stats.cost(0, stats.n)]
    for seg in order:
        a, c, e = seg.start, seg.split, seg.end
        costs.append(costs[-1] - stats.cost(a, e) + stats.cost(a, c) + stats.cost(c, e))
    return np.asarray(costs)


def _select(rule: Rule, costs, memo: Memo, order, partitions, noise_work) -> Selection:
    kind = rule.kind
    finite = costs[np.isfinite(costs)] if kind != "n_bkps" else costs
    if kind == "n_bkps":
        return Selection("n_bkps", rule.n_bkps + 1, len(costs))
    if kind == "pen":
        return select_by_penalty(finite, rule.pen)
    if kind == "auto":
        return _select_by_test(memo, order, partitions, rule.alpha, len(costs), *noise_work)
    if len(finite) < 4:
        raise InputError(
            f"the automatic penalty needs a path of at least 4 segmentations, but only "
            f"{len(finite)} exist for this signal with min_size; give n_bkps or pen"
        )
    return slope_heuristic(finite, memo.stats.n)


def _select_by_test(
    memo: Memo,
    order,
    partitions,
    alpha: float,
    d_max: int,
    sums: BatchSums,
    short: tuple[int, np.ndarray] | None,
) -> Selection:
    """The number of change-points that are significant (:func:`_significant`).

    The noise is estimated again without the change-points chosen so far,
    until they no longer change: with none chosen (every series without
    change, but for about ``alpha``) the whole series is the noise.
    ``memo.noise`` ends as the estimate the change-points were last tested
    against.
    """
    if memo.noise is None and not _permutable(memo):
        raise InputError(
            f"{memo.description} is too short to estimate its noise (the test "
            f"needs {MIN_BATCHES} blocks of samples); give n_bkps or pen"
        )
    accepted: list[int] = []
    try:
        for _ in range(MAX_NOISE_ROUNDS):
            found = _significant(memo, order, partitions, alpha)
            if found == accepted:
                break
            noise = noise_of(
                memo.stats,
                short,
                np.asarray(found, dtype=np.int64),
                memo.pointwise,
                sums,
                shortest=memo.dependence,
            )
            if noise is None:
                break
            accepted, memo.noise = found, noise
            memo.apart.clear()  # (answers for the noise before)
    finally:  # a batch's series are chosen one after the other: one holds them at a time
        memo.grams = memo.moments = None
    memo.chosen = found
    return Selection(
        "auto",
        min(len(found) + 1, d_max),
        d_max,
        alpha=alpha,
        noise=None if memo.noise is None else memo.noise.to_dict(),
    )


def _significant(memo: Memo, order, partitions, alpha: float) -> list[int]:
    """The change-points that are significant, from binary segmentation's
    splits ``order`` and the best segmentation into D segments
    ``partitions[D - 1]`` among their positions.

    * Top down: a split counts when its p-value is at most ``alpha`` and the
      split above it counted (:func:`~kcpstream.selection.rules.significant_splits`),
      which gives D segments.
    * Each change-point of the segmentation chosen must be significant
      between its neighbours: D is lowered until every local p-value is at
      most ``alpha`` (a split near a change whose rest is left in the next
      segment does not survive its neighbours).
    * A single split cannot see a short segment inside a long one, or two
      changes that cancel: a larger D is taken when every change-point of its
      segmentation has a local p-value at most ``alpha (min_size / m)^2``,
      for ``m`` samples between its neighbours: a Bonferroni correction for
      where both neighbours could lie (which the segmentation chose).  Up to
      D, a change-point the splits did not show (the best segmentation may
      take later candidates) is tested at that corrected level too.
    """

    def p_value(i: int) -> float:
        seg = order[i]
        return _pvalue(memo, seg.gain, seg.start, seg.split, seg.end)

    splits = [(seg.start, seg.end, seg.split) for seg in order]
    found = significant_splits(splits, memo.stats.n, alpha, p_value)
    top_down = len(found) + 1
    for d in range(len(partitions), 1, -1):
        chosen = partitions[d - 1]
        if chosen is None:
            continue
        chosen, beyond = np.asarray(chosen, dtype=np.int64).tolist(), d > top_down
        if not _passes(memo, chosen, beyond, found, alpha, mixtures=False):
            continue
        if _passes(memo, chosen, beyond, found, alpha, mixtures=True):
            return chosen
        # two change-points around the window that holds a change are one: the
        # segmentation without the second (a lower D would rather drop a true
        # change than the pair, which lowers the cost more)
        pruned = _without_mixtures(memo, chosen, alpha)
        if pruned != chosen and _passes(memo, pruned, beyond, found, alpha, mixtures=True):
            return pruned
    return []


def _passes(
    memo: Memo, chosen: list[int], beyond: bool, found: list, alpha: float, mixtures: bool
) -> bool:
    """Whether every change-point of the segmentation ``chosen`` is significant
    between its neighbours (:func:`_significant` says at which level: with
    ``beyond``, the segmentation has more change-points than the splits
    showed) and a step, not a trend; with ``mixtures``, also beside the
    windows that hold its neighbouring changes (:func:`_beside_mixtures`)."""
    bounds = [0, *chosen, memo.stats.n]
    shown = set(found)
    # the segmentations of the path share most of their (start, split, end):
    # each is tested once, and a segmentation only until one fails (a hundred
    # segmentations a series: element by element, no arrays)
    for i in range(1, len(bounds) - 1):
        a, c, e = bounds[i - 1], bounds[i], bounds[i + 1]
        # a change-point the splits did not show (the DP placed it, with its
        # neighbours, among later candidates) was searched for with both of its
        # neighbours: a short segment inside a long one
        ratio = memo.min_size / (e - a)
        level = alpha if not beyond and c in shown else alpha * (ratio * ratio)
        if not (
            _local_pvalue(memo, a, c, e) <= level
            and _is_step(memo, a, c, e)
            and (not mixtures or _beside_mixtures(memo, bounds, i, level))
        ):
            return False
    return True


def _local_pvalue(memo: Memo, start: int, split: int, end: int) -> float:
    """p-value of the change-point ``split`` between its neighbours ``start`` and ``end``."""
    key = (start, split, end)
    if key not in memo.gains:
        memo.gains[key] = local_gains(memo.stats, [split], start, end)[0] / memo.stats.unit
    return _pvalue(memo, memo.gains[key], start, split, end)


def _beside_mixtures(memo: Memo, bounds: list[int], i: int, level: float) -> bool:
    """Whether the change-point ``bounds[i]`` of windows is significant at
    ``level`` without the window next to a neighbouring change-point where
    that window could stand apart on its own.

    A change inside a window makes that window a mixture of both sides, unlike
    either: it can stand apart as a short segment of its own with its
    neighbour, two change-points for one change (and, next to a strong
    change, it moves the mean of a segment of many windows).  Next to a
    neighbouring change strong enough for one window of the other side to be
    significant (:func:`_could_stand_apart`), the change-point must be one
    without that window.  Samples segmented one by one hold no mixture.  A
    weak neighbouring change is left
    alone: its window cannot make a change-point, and a short true segment
    beside it keeps its power (on the TSSB series, applying the rule next to
    every change lost true change-points, ``benchmarks/results/cycles.md``)."""
    if memo.pointwise:
        return True
    start, split, end = bounds[i - 1], bounds[i], bounds[i + 1]
    far = (bounds[i - 2] if i >= 2 else None, bounds[i + 2] if i + 2 < len(bounds) else None)
    key = ("beside", *far, start, split, end, level)
    if key not in memo.apart:  # (the segmentations of the path share most of them)
        memo.apart[key] = _beside(memo, bounds, i, level)
    return memo.apart[key]


def _beside(memo: Memo, bounds: list[int], i: int, level: float) -> bool:
    """:func:`_beside_mixtures`, computed."""
    start, split, end = bounds[i - 1], bounds[i], bounds[i + 1]
    a, e = start, end
    if i >= 2 and _mixed(memo, bounds[i - 2], start, split, end, level):
        a = start + 1
    if i + 2 < len(bounds) and _mixed(memo, bounds[i + 2], end, split, start, level):
        e = end - 1
    if (a, e) == (start, end) or not a < split < e:
        return True  # (no such neighbour, or no window besides the mixture)
    return _local_pvalue(memo, a, split, e) <= level


def _without_mixtures(memo: Memo, chosen: list[int], level: float) -> list[int]:
    """``chosen`` without the change-points that are ones only beside a window
    holding a neighbouring change (:func:`_beside_mixtures` at ``level``), the
    first such removed and the rest tested again, until none is; as it is
    unless ``memo.merges``."""
    if memo.pointwise or not memo.merges:
        return chosen
    while True:
        bounds = [0, *chosen, memo.stats.n]
        drop = next(
            (i for i in range(1, len(bounds) - 1) if not _beside_mixtures(memo, bounds, i, level)),
            None,
        )
        if drop is None:
            return chosen
        chosen = chosen[: drop - 1] + chosen[drop:]


def _mixed(memo: Memo, far: int, at: int, split: int, other: int, level: float) -> bool:
    """Whether the window at the neighbouring change-point ``at`` (of the
    segment ``at .. split``, ``other`` the tested segment's other end; ``far``
    the change-point beyond ``at``) is to be left out of the test of ``split``.

    A long cycle's windows (sums of the samples' features: the mixture is
    exact) leave it out next to any change when the segment is shorter than
    twice ``min_size``, and next to a strong change (:func:`_could_stand_apart`)
    whatever its length; a temporal map's windows only when both hold (on the
    TSSB series, either alone lost true change-points)."""
    short = abs(split - at) < 2 * memo.min_size
    if memo.mixtures and short:
        return True
    if not (memo.mixtures or short):
        return False
    segment = (min(at, other), max(at, other))
    return _could_stand_apart(memo, far, at, split, segment, level)


def _could_stand_apart(
    memo: Memo, far: int, at: int, near: int, segment: tuple[int, int], level: float
) -> bool:
    """Whether a window at the change-point ``at`` (between ``[far, at)`` and
    ``[at, near)``, either order) that holds the far side alone would make the
    shortest segment it may start significant, split off the tested
    ``segment``: from the squared distance between the two sides' mean windows."""
    key = (far, at, near, segment, level)
    if key not in memo.apart:  # (the segmentations of the path share most of them)
        memo.apart[key] = _stands_apart(memo, far, at, near, segment, level)
    return memo.apart[key]


def _stands_apart(
    memo: Memo, far: int, at: int, near: int, segment: tuple[int, int], level: float
) -> bool:
    """:func:`_could_stand_apart`, computed."""
    prefix = memo.stats.prefix

    def mean(lo: int, hi: int) -> np.ndarray:
        lo, hi = min(lo, hi), max(lo, hi)
        return (prefix[:, hi] - prefix[:, lo]).astype(np.float64) / (hi - lo)

    jump = mean(far, at) - mean(at, near)
    lo, hi = segment
    # the fewest windows a segment may hold, one of them all of the far side:
    # their mean is jump / k off the rest
    k = max(1, min(memo.min_size, hi - lo - 1))
    gain = float(jump @ jump) * (hi - lo - k) / (k * (hi - lo))
    return _pvalue(memo, gain, lo, lo + k, hi) <= level


def _is_step(memo: Memo, start: int, split: int, end: int) -> bool:
    """Whether the change-point ``split`` explains ``[start, end)`` better than a
    straight line in time does (:mod:`kcpstream.selection.trend`): a trend is no change.

    The two models add as many parameters, so the larger gain wins; on a
    trend, the segmentations with fewer change-points (tried next) have
    longer neighbourhoods, where the line wins clearly."""
    key = ("line", start, end)
    if key not in memo.segments:
        if memo.moments is None:
            memo.moments = GridMoments.of(memo.stats)
        memo.segments[key] = line_gain(memo.stats, memo.moments, start, end)
    return memo.gains[(start, split, end)] > memo.segments[key]


def _pvalue(memo: Memo, gain_q: float, start: int, split: int, end: int) -> float:
    """p-value of a split of ``[start, end)`` at ``split`` with gain ``gain_q``
    (quantized units).

    A gain within the float rounding of exact integer sums is no gain: a split
    of a constant stretch is never a change-point, even when the noise is 0."""
    stats = memo.stats
    if not gain_q > stats.gain_rounding(end - start):
        return 1.0
    if memo.noise is None:  # too short for the noise: the samples' orders calibrate
        key = (start, split, end, gain_q, None)
        if key not in memo.pvalues:
            q = np.diff(stats.prefix[:, start : end + 1], axis=1).T
            memo.pvalues[key] = permutation_pvalue(q, gain_q, memo.min_size, (start, end))
        return memo.pvalues[key]
    # the segmentations of the path share most of their segments: each is
    # tested once against each estimate of the noise
    key = (start, split, end, gain_q, memo.noise)
    if key not in memo.pvalues:
        memo.pvalues[key] = _tested(memo, gain_q, start, split, end)
    return memo.pvalues[key]


def _tested(memo: Memo, gain_q: float, start: int, split: int, end: int) -> float:
    """:func:`_pvalue` against the noise estimate: the long-run test's tail over
    the splits, or, for a split with a short side, at least the short sides'
    tail: by the samples' own law where the statistics hold every sample, by
    what the blocks bound of it where they hold blocks
    (:mod:`kcpstream.selection.edges`)."""
    stats = memo.stats
    length = end - start
    gain = gain_q * stats.unit
    spread = _spread(memo, start, end)
    noise = local_noise(spread, memo.noise)
    if spread is None:
        noise = _own_level(memo, noise, start, split, end)
    noise = cycle_noise(noise, length, memo.min_size, split - start)
    steps = _steps(memo, length)
    p = split_pvalue(gain, length, memo.min_size, noise, steps)
    samples = stats.block_size == 1
    if p == 0.0 and not noise.trace > 0:
        # noise-free between batches but at the differences set aside as
        # changes: steps, or rare events (a flag at 0.1 %) whose every split
        # would be certain; the samples' own bound over every split tells them
        # apart (exchangeable samples: the test of a series without noise)
        half = length // 2 + 1  # every split, by its shorter side
        if samples:
            tail = piece_tail(stats.prefix, start, end, split, gain_q, memo.min_size, half)
        else:
            tail = bounded_tail(stats, start, end, gain_q, memo.min_size, half)
        return min(1.0, tail)
    side = min(split - start, end - split)
    # no short side reaches past a sixteenth of the segment (edge_length,
    # bounded_edge_length); a long-run p of 0 stands where the samples' law is
    # at hand (its bound was below it at the series' ends; the blocks' bound is
    # looser, and tests it)
    if not p < 1.0 or side >= length // 16 or (samples and not p > 0.0):
        return p
    if samples:
        short = edge_length(length, memo.min_size)
    else:
        short = bounded_edge_length(stats, start, end, memo.min_size)
    if side >= short:
        return p
    # the largest gain over the positions with both sides long (the long-run
    # test's tail over them) or over the short ones (the samples' bound)
    inner = split_pvalue(gain, length, short, noise, steps)
    if samples:
        tail = short_tail(stats.prefix, start, end, split, gain_q, memo.min_size)
    else:
        tail = bounded_tail(stats, start, end, gain_q, memo.min_size, short)
    return max(p, min(1.0, inner + tail))


def _own_level(memo: Memo, noise: LongRunNoise, start: int, split: int, end: int):
    """``noise`` for a segment too short for its own spread (fewer than
    ``MIN_LOCAL_BATCHES`` batches): scaled by the segment's variance per
    sample about its two sides' means over the whole series' about its
    mean, where that is above 1.

    A burst of noise in a quiet series (a flag at 5 % for a few thousand
    samples of one at 0.5 %) was tested against the quiet series' level,
    and its pieces of a few hundred samples became change-points.  The
    variances are exact (sums of ``||q||^2``); about the two sides' means,
    the split's own change does not count as the segment's noise."""
    stats = memo.stats
    key = ("variance", 0, stats.n)
    if key not in memo.segments:
        memo.segments[key] = stats.cost(0, stats.n) / stats.n
    whole = memo.segments[key]
    if stats.knows(split):
        own = (stats.cost(start, split) + stats.cost(split, end)) / (end - start)
    else:  # a position no search refined (a mixture check's): about the mean
        own = stats.cost(start, end) / (end - start)
    if not (whole > 0 and own > whole):
        return noise
    ratio = own / whole
    return dataclasses.replace(
        noise,
        trace=noise.trace * ratio,
        scale=noise.scale * ratio,
        tail_scale=tail_scale(noise) * ratio,
    )


def _spread(memo: Memo, start: int, end: int):
    """A segment's short-range spread (:func:`segment_spread`), once."""
    key = ("spread", start, end)
    if key not in memo.segments:
        first, diffs = _segment_diffs(memo, start, end)
        memo.segments[key] = segment_spread(diffs, _noise_batch(memo.stats), memo.grams, first)
    return memo.segments[key]


def _permutable(memo: Memo) -> bool:
    """Whether a series without a noise estimate is tested by permutations of
    its samples (:mod:`kcpstream.selection.permutation`): those held one by
    one, as every series too short for the estimate is by default."""
    return memo.stats.block_size == 1


def _steps(memo: Memo, length: int) -> float | None:
    """The positions of a segment of ``length`` as independent steps: fewer by
    the series' long-run to short-range ratio when its samples are dependent
    (never more: anti-correlated windows of a cycle count one step each)."""
    noise = memo.noise
    if not noise.local > 0:
        return None
    return length * max(1.0, noise.trace / noise.local)


def _noise_batch(stats: BlockStats) -> int:
    """Samples per batch of the local noise levels (:func:`local_batch`)."""
    return local_batch(stats.n, stats.block_size)


def _batch_diffs(stats: BlockStats) -> np.ndarray:
    """Consecutive differences (second differences of the sums) of the sums over
    batches of :func:`_noise_batch` samples of the whole series' full blocks,
    in feature units: ``(p, k - 1)`` for ``k`` batches."""
    ell = _noise_batch(stats)
    steps = ell // stats.block_size
    full = (stats.n // stats.block_size) // steps  # whole batches
    cols = stats.prefix[:, 0 : full * steps + 1 : steps].astype(np.float64)
    return np.diff(cols, n=2, axis=1) * math.ldexp(1.0, -stats.quantum_exponent)


def _segment_diffs(memo: Memo, start: int, end: int) -> tuple[int, np.ndarray]:
    """``(first, D)``: :func:`_batch_diffs` of the batches that lie inside
    ``[start, end)``, the columns of the series' from ``first`` (computed
    once per series: a segment's are a slice of the series')."""
    if memo.grams is None:
        memo.grams = RangeGrams(_batch_diffs(memo.stats))
    ell = _noise_batch(memo.stats)
    first, last = -(-start // ell), end // ell  # batch boundaries inside
    if last - first < 3:
        return 0, np.zeros((memo.stats.n_features, 0))
    return first, memo.grams.diffs[:, first : last - 1]


def local_pvalues(memo: Memo, changepoints: np.ndarray) -> np.ndarray:
    """p-value of each change-point's split between its two neighbours."""
    if memo.noise is None and not _permutable(memo):
        return np.full(len(changepoints), np.nan)
    bounds = [0, *map(int, changepoints), memo.stats.n]
    try:
        return np.array(
            [
                _local_pvalue(memo, a, c, e)
                for a, c, e in zip(bounds[:-2], bounds[1:-1], bounds[2:], strict=True)
            ],
            dtype=np.float64,
        )
    finally:  # (a batch's results are made one after the other)
        memo.grams = None


def short_range(
    stats: BlockStats, grams: RangeGrams | None = None
) -> tuple[int, np.ndarray] | None:
    """``(ell, C)``: the whole series' short-range covariance ``C`` at batches of
    ``ell`` samples (:func:`_noise_batch`), or None with too few batches
    (``grams``: the products of :func:`_batch_diffs`, when held)."""
    grams = RangeGrams(_batch_diffs(stats)) if grams is None else grams
    if grams.diffs.shape[1] < 2:  # fewer than 3 batches
        return None
    ell = _noise_batch(stats)
    return ell, robust_cov(grams.diffs, ell, grams)


def noise_of(
    stats: BlockStats,
    short: tuple[int, np.ndarray] | None,
    exclude: np.ndarray | None = None,
    pointwise: bool = True,
    sums: BatchSums | None = None,
    shortest: int = 0,
) -> LongRunNoise | None:
    """The features' long-run covariance from the prefix sums at full blocks,
    without the batches around the change-points ``exclude``, with ``short``,
    the whole series' :func:`short_range` covariance: its trace is the level
    a segment's own is compared with (``local``), and its spread beyond its
    long-run part is that of a part of a cycle.

    Samples segmented one by one have no cycle (or the period check would have
    made windows of it): their dependence is extrapolated as an AR(1) of
    batches when the batch estimate has not levelled off.  Windows of one
    period hold the cycle's dependence within them and are not extrapolated
    (see :func:`kcpstream.selection.significance.long_run_noise`).  ``sums``:
    :func:`batch_sums` of ``stats``, kept for the next estimate; ``shortest``:
    the span of the samples' dependence, where known (``long_run_noise``'s)."""
    sums = batch_sums(stats) if sums is None else sums
    noise = long_run_noise(
        sums, stats.block_size, exclude, extrapolate=pointwise, short=short, shortest=shortest
    )
    if noise is None or short is None:
        return noise
    return dataclasses.replace(noise, local=float(np.trace(short[1])))


def batch_sums(stats: BlockStats) -> BatchSums:
    """The batch sums :func:`noise_of` estimates the noise from: the prefix sums
    at full blocks, in feature units."""
    full = stats.n // stats.block_size
    prefix = stats.prefix[:, : full + 1].astype(np.float64) * math.ldexp(
        1.0, -stats.quantum_exponent
    )
    return BatchSums(prefix)


def local_gains(stats, changepoints, start: int = 0, end: int | None = None) -> np.ndarray:
    """Cost increase if each change-point were removed (its two neighbours fixed;
    the first's and the last's are ``start`` and ``end``, the series' ends by default)."""
    bounds = [start, *map(int, changepoints), stats.n if end is None else end]
    gains = []
    for a, c, e in zip(bounds[:-2], bounds[1:-1], bounds[2:], strict=True):
        pa = stats.prefix_at(a)[0]
        total = stats.prefix_at(e)[0] - pa
        gains.append(split_gain(c - a, e - c, stats.prefix_at(c)[0] - pa, total) * stats.unit)
    return np.asarray(gains)
