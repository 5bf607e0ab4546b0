"""Pure choices for one call: its settings, each series' job, block size, ``min_size``, ``d_max``.

Nothing here reads data or runs dask: :func:`kcpstream.segment` checks its
arguments into :class:`Settings`, and each series gets a :class:`Job` whose
sizes these functions choose.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kcpstream.engine.fitting import FitRecord
from kcpstream.errors import InputError
from kcpstream.features import DEFAULT_FEATURES, FeatureMap, Temporal
from kcpstream.features.rff import resolve_seed
from kcpstream.inputs.signal import EPOCH_MIN, Signal, epoch_length
from kcpstream.passes.cache import SampleCache
from kcpstream.persist.reuse import Reuse
from kcpstream.search.binseg import SearchLog
from kcpstream.search.dynp import MAX_GRID
from kcpstream.search.stats import BlockStats
from kcpstream.selection.choose import METHODS, Rule

#: Blocks the automatic grid aims at: enough for tight pruning bounds, few enough
#: that the prefix sums (``8 p`` bytes per block) and the per-segment boundary
#: scans stay small (16 MiB of prefix sums at p = 64).
TARGET_BLOCKS = 2**15

#: The default ``min_size`` is this share of the series (at least 2 samples): on a
#: long signal a segment of a few samples is below any plot's resolution and
#: its gain is dominated by the few samples' own noise, not by a change.
MIN_SEGMENT_SHARE = 1e-4

#: ... and, segmented sample by sample, at least this many samples (a tenth of a
#: shorter series): a segment's law is told from its neighbour's by its mean
#: features, and the test's Gaussian tail for the maximum over positions does
#: not hold for sums of a few samples of skewed or discrete features.
MIN_SEGMENT_SAMPLES = 10

#: Default largest number of segments on the path (pen="auto"; bounds the n_bkps default).
DEFAULT_D_MAX = 100

#: Largest d_max accepted (a path of segmentations longer than this costs minutes).
MAX_D_MAX = 1000

#: Smallest automatic block size: below it the per-block work (statistics, and
#: the boundary scans of every segment) costs more than the samples it saves
#: reading again.
MIN_AUTO_BLOCK = 64

#: Blocks stop growing at this size (from 2**31 samples on, the grid of a
#: series holds more than ``TARGET_BLOCKS`` blocks): a refinement reads whole
#: blocks again, and the share of a long series read again grows quickly with
#: the block's share of its segments (looser bounds: 4 times the blocks read
#: a tenth as much again, ``benchmarks/results/headroom.md``), so a longer
#: series gets more blocks instead ...
LONG_SERIES_BLOCK = 2**16

#: ... until its grid holds this many (past 2**34 samples): the
#: statistics, the chunk results held before they are assembled and the noise
#: estimate all grow with the blocks, and stay within a call's budget up to
#: ``MAX_SAMPLES``.  Blocks larger than 2**16 samples at 10**10 read many times
#: more again: a block's bound grows with its length, and the pieces it flags
#: scatter over more chunks, each read whole (``benchmarks/results/headroom.md``).
MAX_GRID_BLOCKS = 2**18

#: What the statistics of one series, and the work made of them at once (the
#: noise estimate's batch sums and products, the data pass's results before
#: they are assembled, a checkpoint's slabs), take at most: about 0.5 GiB,
#: which :data:`MAX_GRID_BLOCKS` keeps them within up to ``MAX_SAMPLES``
#: (``tests/test_budgets.py``).  A batch's series are grouped within
#: :data:`BATCH_STATE_BYTES`.
SERIES_STATE_BYTES = 2**29

#: Largest block size: that of the longest series taken (``MAX_SAMPLES``, 2**40)
#: at :data:`MAX_GRID_BLOCKS` blocks.  A refinement scans a long block in
#: slices (:mod:`kcpstream.passes.sliced`), so memory does not bound it.
MAX_BLOCK = 2**22

#: Largest ``n * p`` (samples times features) searched in memory: the signal is
#: read whole, every sample featurized once and the exact prefix sum of every
#: position kept (``8 n p`` bytes, 32 MiB at this size), so binary segmentation
#: is one compiled loop with no dask graph after the read.  ``benchmarks/bench_small.py``
#: places it: at n = 64000 with 64 features in memory is as fast as the block
#: grid with ``n_bkps`` and faster with ``pen="auto"``; beyond, the block grid's
#: pruned scans win.
DENSE_MAX_VALUES = 2**22

#: Most bytes of exact prefix sums the series searched in memory may hold together
#: in one call: a batch of many small series would otherwise keep ``8 n p`` bytes
#: for each of them at once.  The series beyond it use the block grid (the same
#: change-points, statistics of ``8 n p / B`` bytes).
DENSE_BATCH_BYTES = 2**30

#: Most bytes of statistics and search records the series of one call hold
#: at once: a batch past it is run a group of consecutive series at a time
#: (fit, pass, search, choice and results), each group's freed before the
#: next one's pass: a batch held about 2.4 MB per series of 10**5 samples
#: until the call ended (``benchmarks/results/throughput.md``).  The answers
#: are the whole batch's at once: the in-memory limit is decided for the
#: whole batch, and each series has the block grid it has alone.  A quarter
#: of a GiB: a thousand series of 10^6 on their own grids (64-sample blocks,
#: 8.5 MB each) peaked at 1.0 GiB in groups of 28, at 1.45-1.6 GiB in groups
#: of 56 for 5 % less time (``benchmarks/results/throughput.md``).
BATCH_STATE_BYTES = 2**28

#: A series' search records (its segments, the halves of the pieces it
#: scanned, its exact splits) whatever its length: about 0.9 MB for a path
#: of 99 splits (``benchmarks/results/throughput.md``).
SEARCH_RECORD_BYTES = 2**20


def auto_block_size(n: int) -> int:
    """Block size B for ``n`` samples: about :data:`TARGET_BLOCKS` blocks, at least
    :data:`MIN_AUTO_BLOCK` samples.  A series of a batch has the grid it has
    alone, so its answer is the one a call on it alone gives, bit for bit
    (the statistics of a batch are bounded by running it in groups,
    :data:`BATCH_STATE_BYTES`; a grid shared over the batch's series once
    gave a thousand series of 10^6 blocks of 955 samples instead of 64, and
    their searches scanned and featurized ten times longer pieces).

    Smaller blocks make the pruning bounds tighter (fewer samples read again)
    at the price of a larger grid (about ``8 (p + 3)`` bytes of statistics per
    block) and longer boundary scans.  Blocks stop at
    :data:`LONG_SERIES_BLOCK` samples while the grid of a long series holds
    at most :data:`MAX_GRID_BLOCKS` blocks.
    """
    B = min(LONG_SERIES_BLOCK, max(MIN_AUTO_BLOCK, -(-n // TARGET_BLOCKS)))
    return int(min(MAX_BLOCK, max(B, -(-n // MAX_GRID_BLOCKS))))


def check_positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def planned_length(n: int) -> int:
    """The length the block grid and the default ``min_size`` are planned for:
    ``n`` up to :data:`~kcpstream.inputs.signal.EPOCH_MIN`, beyond it the end of the
    series' epoch (the smallest power of two above ``n``): fixed while an
    archive grows (a checkpoint of it stays usable), and on the side of fewer,
    longer blocks and segments than ``n`` itself gives (at most 2x)."""
    return n if n <= EPOCH_MIN else 2 * epoch_length(n)


def min_size_floor(n: int, window: int = 1) -> int:
    """The least :func:`default_min_size` gives: 2 windows, or
    :data:`MIN_SEGMENT_SAMPLES` samples (a tenth of a shorter series)."""
    return 2 if window > 1 else max(2, min(MIN_SEGMENT_SAMPLES, n // 10))


def default_min_size(n: int, window: int = 1) -> int:
    """``min_size`` when none is given, for ``n`` feature vectors of ``window``
    samples each: :data:`MIN_SEGMENT_SHARE` of the series (of its
    :func:`planned_length`), at least 2 windows, or, samples segmented one by
    one, at least :data:`MIN_SEGMENT_SAMPLES` (a tenth of a shorter series)."""
    return max(min_size_floor(n, window), int(planned_length(n) * MIN_SEGMENT_SHARE))


@dataclass(frozen=True)
class Settings:
    """:func:`kcpstream.segment`'s arguments for every series of one call, checked."""

    choice: Rule  # how many change-points
    d_max: int | None
    min_size: int | None  # None: default_min_size(n)
    block_size: int | None
    seed: int | None
    sample_size: int
    tile: int
    cache_bytes: int
    checkpoint: str | None
    progress: bool
    n_series: int = 1  # segmented in this call (a batch shares the sample cache)
    min_duration: Any = None  # min_size as a duration of the time coordinate


@dataclass
class SearchState:
    """What a job's search knows: the segments evaluated exactly, where the
    segments ending at the series' end split before it grew, and its log."""

    known: dict = field(default_factory=dict)  # (start, end) -> SegmentSplit, exact
    hints: dict = field(default_factory=dict)  # start -> its segment that ended at its end
    log: SearchLog = field(default_factory=SearchLog)


@dataclass
class Stored:
    """A job's checkpoint: the group its statistics are stored under, the
    earlier version's group they were updated from, and what the next save
    keeps for a later version."""

    key: str | None = None  # checkpoint fingerprint
    damaged: bool = False  # a group was found damaged: recomputed, written again
    like: Any = None  # (key, prefix, checksums) of the group the stats came from
    tail: Any = None  # (start, end, digest) of the last chunk: the next version's Reuse.head
    reuse: Reuse | None = None  # an earlier version's statistics to keep
    base_key: str | None = None  # the group ``reuse`` came from
    base_tail: Any = None  # that group's ``tail``
    base_known: dict = field(default_factory=dict)  # that group's exact segments
    fit: FitRecord | None = None  # what the feature map was fitted on
    # the group as loaded: its attributes and how much it held (see
    # :func:`kcpstream.engine.stored.save_checkpoints`), None if not loaded
    loaded: Any = None


@dataclass
class Reads:
    """What a job read (its result's diagnostics)."""

    loaded: bool = False  # no data pass: the statistics were there
    featurized: int | None = None  # samples the data pass featurized (read chunks' if None)
    samples_per_pass: int | None = None  # samples a pass featurizes (stats.n if None)
    series: int = 1  # the series read by the same data pass (its tasks' size)
    fit_chunks: int = 0  # chunks the fit (and the period check) read
    single_value: bool = False  # the fit read the whole series, and it holds one value


@dataclass(frozen=True)
class Windows:
    """What a job's feature vectors stand for: ``width`` consecutive samples each
    (1: one sample), or, for windows that follow a cycle's period, the
    windows between consecutive ``cuts`` (samples from the series' start) of
    ``width`` samples on average."""

    width: int = 1
    cuts: np.ndarray | None = None  # (m + 1,) window edges in samples, from 0

    def samples(self, positions) -> np.ndarray:
        """Feature-vector positions (window edges) as sample positions."""
        positions = np.asarray(positions, dtype=np.int64)
        return positions * self.width if self.cuts is None else self.cuts[positions]


@dataclass
class Auto:
    """What ``features="auto"`` made of a job: samples one by one
    (``pointwise``; a cycle too long for the period check may still show in
    the block sums), or windows of a cycle, which its ``twin`` segments with
    the canonical shape part (:mod:`kcpstream.engine.pair`); each job of
    such a pair is ``paired``, and tested at the level divided by the
    ``parts`` that answer for the series (3 where a short series' samples
    are also tested by their nearest neighbours, else 2).  ``dependence``:
    the span of the samples' dependence the fit found (one channel, sample
    by sample; :func:`~kcpstream.selection.neighbours.serial_dependence`),
    whatever the rule and the parts: the samples' own test takes its noise
    from batches no shorter.  Where such a series is short, it is also
    tested by the nearest neighbours of its :attr:`subsequence` samples long
    subsequences (2 parts)."""

    pointwise: bool = False
    twin: Job | None = None
    parts: int = 1
    dependence: int | None = None

    @property
    def paired(self) -> bool:
        return self.parts > 1

    @property
    def subsequence(self) -> int | None:
        """The length of the subsequences whose nearest neighbours test a series
        segmented sample by sample (its dependence, where that is a part of
        its test: :func:`~kcpstream.engine.pair.with_neighbours`), else None."""
        return self.dependence if self.paired and self.twin is None else None


@dataclass
class Job:
    """One series: its signal, fitted map, grid, sizes and cache; its
    statistics; the state of its search, checkpoint and reads."""

    signal: Signal
    fmap: FeatureMap
    block_size: int
    d_max: int
    cache: SampleCache
    min_size: int = 2
    windows: Windows = field(default_factory=Windows)  # samples per feature vector
    original: Signal | None = None  # the signal before windowing
    in_memory: bool = False  # one block per sample, searched without reading data again
    auto: Auto = field(default_factory=lambda: Auto())  # what features="auto" made of it
    params: dict = field(default_factory=dict)  # the call's settings, for the result
    stats: BlockStats | None = None
    search: SearchState = field(default_factory=SearchState)
    stored: Stored = field(default_factory=Stored)
    reads: Reads = field(default_factory=Reads)

    @property
    def window(self) -> int:
        """Samples per feature vector (on average, for windows that follow a cycle)."""
        return self.windows.width

    @property
    def segmented(self) -> Signal:
        """The series segmented: its samples (the signal before windowing)."""
        return self.original if self.original is not None else self.signal


def searched_in_memory(n: int, p: int, st: Settings) -> bool:
    """Whether a series of ``n`` samples and ``p`` features is searched in memory."""
    return st.block_size in (None, 1) and n * p <= DENSE_MAX_VALUES


def min_size_of(st: Settings, signal: Signal, n: int, window: int) -> int:
    """``min_size`` in feature vectors, for ``n`` of them of ``window`` samples
    of ``signal`` each: ``min_duration`` or ``min_size`` (samples: a window map
    keeps the whole windows that hold them), else :func:`default_min_size`."""
    if st.min_duration is not None:  # not below the default's floor (min_size=1 still can)
        return max(samples_of(st.min_duration, signal, window), min_size_floor(n, window))
    return default_min_size(n, window) if st.min_size is None else -(-st.min_size // window)


def d_max_of(st: Settings, n: int, min_size: int) -> int:
    """The most segments of the path for ``n`` samples (windows) and ``min_size``."""
    if st.choice.n_bkps is not None and st.d_max is None:
        # binary segmentation proposes twice as many candidates as change-points
        # asked for (within the default path), among which the best are chosen
        return max(
            st.choice.n_bkps + 1, min(2 * st.choice.n_bkps + 1, DEFAULT_D_MAX, n // min_size)
        )
    if st.choice.n_bkps is not None:
        return max(st.d_max, st.choice.n_bkps + 1)
    return min(st.d_max or DEFAULT_D_MAX, n // min_size)


def block_size_of(n: int, st: Settings, window: int = 1) -> int:
    """The block size of the statistics grid of a series of ``n`` samples (or
    windows of ``window`` samples: blocks of about as many samples as the
    samples' own grid would have, since a refinement reads whole blocks)."""
    if st.block_size is None:
        # a growing series keeps its grid until it doubles
        B = max(1, auto_block_size(planned_length(n * window)) // window)
        if st.choice.method == "dynp":  # a grid of every sample when the DP can afford it
            B = max(1, min(B, -(-n // MAX_GRID)))
        return B
    B = check_positive_int("block_size", st.block_size)
    if B > MAX_BLOCK:
        raise InputError(
            f"block_size={B} is larger than {MAX_BLOCK}, the block of the longest series "
            "kcpstream takes (a refinement reads whole blocks again); use a smaller block_size"
        )
    return B


def is_auto(features) -> bool:
    return isinstance(features, str) and features.strip().lower() == "auto"


def samples_of(duration: Any, signal: Signal, window: int) -> int:
    """``min_duration`` as a number of samples (windows, for a window map) at
    the mean sampling interval of the signal's time coordinate."""
    axis = signal.time
    if axis is None or axis.coord is None:
        raise InputError(
            f"min_duration needs a time coordinate, and {signal.description} has none; "
            "give min_size in samples, or an xarray object with a time coordinate"
        )
    if signal.n < 2:
        return 1
    first, last = axis.at([0, signal.n - 1])
    span = last - first
    if np.asarray(span).dtype.kind == "m":
        import pandas as pd

        if unitless(duration):  # pandas would read it as nanoseconds
            raise InputError(
                f"min_duration={duration!r} has no unit, and the time coordinate holds "
                "time stamps; give a duration such as '60s' or '10min'"
            )
        try:
            wanted = pd.Timedelta(duration)
        except (TypeError, ValueError):
            raise InputError(
                f"min_duration={duration!r} is not a duration; give one like '10min' or "
                "pandas.Timedelta(minutes=10)"
            ) from None
        if pd.isna(wanted):
            raise InputError(f"min_duration={duration!r} is not a duration")
        ratio = wanted / pd.Timedelta(span) * (signal.n - 1)
    else:
        if isinstance(duration, bool) or not isinstance(duration, int | float | np.number):
            raise InputError(
                f"min_duration={duration!r}: the time coordinate holds numbers, so give the "
                "duration as a number in its units"
            )
        ratio = float(duration) / float(span) * (signal.n - 1)
    if not (math.isfinite(ratio) and ratio > 0):
        raise InputError(f"min_duration={duration!r} must be a positive duration")
    return max(1, math.ceil(ratio / window - 1e-9))


def unitless(duration: Any) -> bool:
    """A number, or the text of one: a duration without a unit (which pandas
    would read as nanoseconds)."""
    if isinstance(duration, bool):
        return False
    if isinstance(duration, np.timedelta64):  # (a numpy integer too: its unit decides)
        return np.datetime_data(duration.dtype)[0] == "generic"
    if isinstance(duration, int | float | np.number):
        return True
    if isinstance(duration, str):
        try:
            float(duration)
        except ValueError:
            return False
        return True
    return False


def limit_in_memory(jobs: list[Job]) -> None:
    """Series past :data:`DENSE_BATCH_BYTES` of in-memory prefix sums, in order,
    go to the block grid instead."""
    held = 0
    for job in jobs:
        if job.in_memory and not job.reads.loaded:
            size = 8 * (job.signal.n + 1) * job.fmap.n_features_out_
            if held + size > DENSE_BATCH_BYTES:
                job.in_memory = False
            else:
                held += size


def state_bytes(job: Job) -> int:
    """About the bytes a job's statistics and search hold: ``8 (p + 4)`` per
    row of its prefix sums (one per block, or per sample in memory) and
    :data:`SEARCH_RECORD_BYTES`."""
    n = job.signal.n
    rows = n + 1 if job.in_memory else -(-n // job.block_size) + 1
    return 8 * (job.fmap.n_features_out_ + 4) * rows + SEARCH_RECORD_BYTES


def consecutive_groups(sizes: list[int], budget: int) -> list[list[int]]:
    """Consecutive items (their ``sizes``) in groups of at most ``budget``
    together, in order, a group closed when the next item would pass it (an
    item larger than ``budget`` alone)."""
    groups: list[list[int]] = [[]]
    held = 0
    for i, size in enumerate(sizes):
        if groups[-1] and held + size > budget:
            groups.append([])
            held = 0
        groups[-1].append(i)
        held += size
    return groups


def state_groups(jobs: list[Job], budget: int | None = None) -> list[list[int]]:
    """Consecutive jobs in as few groups as ``budget`` (:data:`BATCH_STATE_BYTES`)
    of :func:`state_bytes` allows, ``ceil(total / budget)`` (each job alone
    when that is as many as the jobs), balanced: each job goes to the group
    its middle byte falls in.  A group holds at most ``total / groups`` plus
    one job's bytes."""
    budget = BATCH_STATE_BYTES if budget is None else budget
    sizes = [state_bytes(job) for job in jobs]
    total = sum(sizes)
    k = max(1, -(-total // max(1, budget)))
    if k >= len(jobs):  # a budget of a series or less: each is a group
        return [[i] for i in range(len(jobs))]
    groups: list[list[int]] = [[] for _ in range(k)]
    held = 0
    for i, size in enumerate(sizes):
        groups[min(k - 1, (2 * held + size) * k // (2 * total))].append(i)
        held += size
    return [g for g in groups if g]


def settings_of(
    *,
    features,
    n_bkps,
    pen,
    method,
    d_max,
    min_size,
    min_duration,
    alpha,
    window,
    block_size,
    seed,
    sample_size,
    tile,
    cache_bytes,
    checkpoint,
    progress,
) -> tuple[Settings, Any]:
    """:func:`kcpstream.segment`'s arguments checked into :class:`Settings`, and
    the feature map (``window=`` stands for the temporal map of that window);
    an :class:`InputError` naming the argument and the fix otherwise."""
    if min_size is not None:
        min_size = check_positive_int("min_size", min_size)
        if min_duration is not None:
            raise InputError("give min_size (samples) or min_duration (time), not both")
    if (
        isinstance(alpha, bool)
        or not isinstance(alpha, int | float | np.number)
        or not (0.0 < float(alpha) < 1.0)
    ):
        raise InputError(f"alpha must be a number in (0, 1), got {alpha!r}")
    if seed is not None:  # (a numpy integer kept as an int: fit records are JSON)
        seed = resolve_seed(seed)
    tile = check_positive_int("tile", tile)
    cache_bytes = check_positive_int("cache_bytes", cache_bytes, 0)
    sample_size = check_positive_int("sample_size", sample_size, 2)
    if n_bkps is not None and pen is not None:
        raise InputError("give n_bkps or pen, not both")
    features = _window_features(window, features)
    kind, n_bkps, pen = _rule_of(n_bkps, pen)
    if method not in METHODS:
        raise InputError(f"method must be {' or '.join(map(repr, METHODS))}, got {method!r}")
    if d_max is not None:
        d_max = _checked_d_max(d_max)
        if n_bkps is not None and d_max < n_bkps + 1:
            raise InputError(
                f"d_max={d_max} segments cannot hold n_bkps={n_bkps} change-points; "
                f"give d_max >= {n_bkps + 1}, or leave d_max out"
            )
    settings = Settings(
        Rule(kind, n_bkps, pen, float(alpha), method),
        d_max,
        min_size,
        block_size,
        seed,
        sample_size,
        tile,
        cache_bytes,
        None if checkpoint is None else os.fspath(checkpoint),
        bool(progress),
        min_duration=min_duration,
    )
    return settings, features


def _window_features(window, features):
    """The feature map ``window=`` chooses (``features`` must be left "auto")."""
    if window is None:
        return features
    window = check_positive_int("window", window, 2)
    if not is_auto(features):
        raise InputError(
            "window= chooses the temporal feature map; give window or features, not both "
            "(a window map takes its own window: features=Temporal(window=...))"
        )
    return Temporal(DEFAULT_FEATURES, window=window)


def _rule_of(n_bkps, pen) -> tuple[str, int | None, float | None]:
    """``(rule, n_bkps, pen)``: how the number of change-points is chosen."""
    if n_bkps is not None:
        return "n_bkps", check_positive_int("n_bkps", n_bkps, 0), None
    if pen is None or (isinstance(pen, str) and pen in ("auto", "slope")):
        return pen or "auto", None, None
    if isinstance(pen, bool) or not isinstance(pen, int | float | np.number):
        raise InputError(f"pen must be a number >= 0, 'auto' or 'slope', got {pen!r}")
    pen = float(pen)
    if not (math.isfinite(pen) and pen >= 0):
        raise InputError(f"pen must be a finite number >= 0, 'auto' or 'slope', got {pen!r}")
    return "pen", None, pen


def _checked_d_max(d_max) -> int:
    d_max = check_positive_int("d_max", d_max, 1)
    if d_max > MAX_D_MAX:
        raise InputError(
            f"d_max={d_max} is more than the {MAX_D_MAX} segments kcpstream searches a "
            f"path of (longer paths cost minutes); ask for d_max <= {MAX_D_MAX}, or give "
            "pen= to let the penalty choose"
        )
    return d_max
