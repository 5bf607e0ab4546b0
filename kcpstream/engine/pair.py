"""The other parts ``features="auto"`` tries on a series with a cycle.

A series with a cycle is segmented as windows of whole cycles
(:mod:`kcpstream.engine.autofeatures`).  Two window maps see different
changes there.  :class:`~kcpstream.features.Temporal`'s default shape part
is the distribution of the window's projections over its cyclic shifts:
changes of waveform and frequency, whatever the window's phase.  Its
``shape="canonical", level=False`` part is the window turned to the phase 0
of the cycle's fundamental, less its mean, as a vector: it sees a waveform
that changes against its own fundamental (a ramp that turns around in time,
one class of recorded instances after another), which the invariant part
cannot tell apart at all, and like it takes no wandering phase for a change
(``benchmarks/results/phase_wander.md``).  Without its level, a drift of the
level is the marginal part's alone, which the test's trend rule already
weighs.  Neither map is best on every series (``benchmarks/results/real.md``).

So both are segmented -- two data passes over the windows, two searches --
and each split is tested at half the call's level ``alpha``: a series
without change gets a change-point from either with probability at most
``alpha`` in all (Bonferroni), as from one map at ``alpha``.  The answer is
the one with more change-points (the invariant one on a tie): each set is
significant at that level, and the larger one holds more of the changes.
Only the test's rule (``pen="auto"``, the default) tries both; ``n_bkps``
and a penalty keep the invariant map.  So does a series with gaps: a window
of its valid samples that holds a gap joins two pieces of the cycle at a
phase that is no whole number of cycles apart, a waveform of its own.

A short series of one channel (at most
:data:`~kcpstream.selection.neighbours.NEIGHBOUR_SAMPLES` samples) is also
tested by its samples' nearest neighbours
(:mod:`kcpstream.selection.neighbours`): its every subsequence of a window's
length, not its few whole windows.  The level is then shared three ways,
each part tested at a third of ``alpha``, and the answer is the part's with
the most change-points (the invariant, the canonical, the neighbours' on a
tie, in that order).  The neighbours' change-points have the samples'
resolution; the answer's gains and costs are the invariant map's, between
the window edges nearest them, and its p-values the neighbours' test's.

A short series of one channel without a cycle, segmented sample by sample,
is tested by its subsequences' nearest neighbours too when its samples
depend on each other (:func:`~kcpstream.selection.neighbours.serial_dependence`:
a shape over several samples, which the samples' law alone does not show),
in subsequences as long as that dependence (:func:`with_neighbours`): two
parts, each at half of ``alpha``, the samples' own test answering on a tie.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np

from kcpstream.engine.fitting import TWIN_FIT, FitRecord, fit_reads, fitted_map, seed_of
from kcpstream.engine.headroom import check_before_pass
from kcpstream.engine.plan import Job, Settings, consecutive_groups, searched_in_memory
from kcpstream.engine.results import costs_between, segment_times
from kcpstream.engine.stored import open_checkpoint, stored_fit
from kcpstream.features import DEFAULT_FEATURES, FeatureMap, Temporal
from kcpstream.passes.cache import SampleCache, caches_reachable
from kcpstream.passes.data import add_on_samples, fit_samples
from kcpstream.progress import note
from kcpstream.result import DataReads, Segmentation, count
from kcpstream.selection.choose import Rule, local_gains
from kcpstream.selection.neighbours import (
    NEIGHBOUR_SAMPLES,
    SMALLEST_PVALUE,
    NeighbourAnswer,
    neighbour_changes,
)
from kcpstream.tasks.graph import TaskBatch
from kcpstream.tasks.threads import each_in_threads

__all__ = [
    "SHAPE",
    "answer_of_pair",
    "answer_of_parts",
    "fundamental_cycles",
    "level_share",
    "neighbour_answers",
    "pair_up",
    "shape_twin",
    "with_neighbours",
]

#: The shape part of the twin (see the module docstring).
SHAPE = "canonical"


def shape_twin(job: Job, period: float, st: Settings, cache: SampleCache) -> Job:
    """The job of ``job``'s windows (of a cycle of ``period`` samples) with the
    canonical shape part, fitted on the same windows (read through ``cache``),
    on the same grid; both are marked ``paired`` (``job.auto``)."""
    window = job.window
    fmap = Temporal(
        DEFAULT_FEATURES,
        window=window,
        seed=0 if st.seed is None else st.seed,
        shape=SHAPE,
        cycles=fundamental_cycles(window, period),
        level=False,
    )
    record = stored_fit(job.original, TWIN_FIT, st, twin=True)
    fit_chunks = len(cache.fit_chunks)
    fitted = None
    if record is not None and record.window == window:  # (the same windows, read before)
        kept = FeatureMap.from_json(record.fmap)
        if kept.get_params() == fmap.get_params():
            fitted = kept
    if fitted is None:
        fit = fitted_map(fmap, job.signal, None, cache, st.sample_size, True)
        fitted = fit.fmap
        reads = fit_reads(job.original.n, False, st.sample_size, window, fit.wide)
        record = FitRecord(
            TWIN_FIT,
            st.sample_size,
            seed_of(st.seed),
            job.original.d,
            period,
            None,
            window,
            False,
            tuple(reads),
            fitted.to_json(),
        )
    fitted = fitted.holding(job.signal.n)
    check_before_pass(job.signal, fitted, st.tile, job.block_size)
    twin = Job(
        job.signal,
        fitted,
        job.block_size,
        job.d_max,
        cache,
        job.min_size,
        job.windows,
        job.original,
    )
    twin.params = {**job.params, "features": _spec(fitted)}
    twin.in_memory = searched_in_memory(job.signal.n, fitted.n_features_out_, st)
    twin.reads.fit_chunks = len(cache.fit_chunks) - fit_chunks
    twin.stored.fit = record  # kept with its statistics: a later version may fit alike
    if st.checkpoint is not None:  # its statistics kept under a key of their own
        open_checkpoint(twin, st.checkpoint, st.tile)
    return twin


def fundamental_cycles(window: int, period: float) -> int:
    """Cycles of ``period`` samples in a window of ``window`` (whole cycles, as
    ``features="auto"`` takes them), within what ``Temporal`` accepts."""
    return min(max(1, round(window / period)), window // 2)


def pair_up(job: Job, alpha: float) -> None:
    """Mark ``job`` and its twin ``paired``, with the parts that share the level
    ``alpha``: the two shape parts, and the nearest neighbours' test where the
    series is short and of one channel (and its share of ``alpha`` is one its
    permutations can reach)."""
    parts = 3 if _neighbours_can_test(job, alpha / 3) else 2
    job.auto.parts = job.auto.twin.auto.parts = parts


def with_neighbours(job: Job, alpha: float) -> None:
    """Mark a job segmented sample by sample, whose samples depend on each other
    (``job.auto.dependence``, :func:`~kcpstream.selection.neighbours.serial_dependence`),
    for the nearest neighbours' test of its subsequences as long as that
    dependence, where it is short and of one channel: two parts share the
    level ``alpha`` (not where half of it is below what the permutations can
    reach)."""
    if job.auto.dependence is not None and _neighbours_can_test(job, alpha / 2):
        job.auto.parts = 2


def _neighbours_can_test(job: Job, share: float) -> bool:
    """Whether the nearest neighbours' test is a part of ``job`` at the level
    ``share``: a series of one channel, short enough for its ``O(n^2)`` work,
    and a level its permutations' smallest p-value reaches."""
    segmented = job.segmented
    short = segmented.d == 1 and segmented.n <= NEIGHBOUR_SAMPLES
    return short and share >= SMALLEST_PVALUE


def level_share(rule: Rule, parts: int) -> Rule:
    """The test's rule at its level divided among ``parts`` (Bonferroni)."""
    return dataclasses.replace(rule, alpha=rule.alpha / parts)


#: Samples read at once for the nearest neighbours' tests of a batch (bytes).
NEIGHBOUR_READ_BYTES = 1 << 27


def neighbour_answers(jobs: list[Job], st: Settings) -> dict[int, NeighbourAnswer | None]:
    """The nearest neighbours' test of each paired job's samples, at its share
    of the level (None where the job has no such part), by ``id(job)``.

    The samples are read again, and kept nowhere (the jobs' caches hold their
    windows): a batch's in groups of at most :data:`NEIGHBOUR_READ_BYTES`,
    each group in one graph whose tasks test each series where its samples
    were read (the kernels release the GIL; on a distributed cluster the
    tests run on the workers, and only their answers come back)."""
    tested = [job for job in jobs if job.auto.parts >= 3 or job.auto.subsequence is not None]
    out: dict[int, NeighbourAnswer | None] = {id(job): None for job in jobs}
    if not tested:
        return out
    t0 = time.perf_counter()
    signals = [job.segmented for job in tested]
    tests = [
        functools.partial(
            _test_samples,
            window=job.auto.subsequence or job.window,
            alpha=st.choice.alpha / job.auto.parts,
            min_size=job.min_size * job.window,
            max_changes=job.d_max - 1,
            seed=0 if st.seed is None else int(st.seed),
        )
        for job in tested
    ]
    for group in consecutive_groups([8 * s.n for s in signals], NEIGHBOUR_READ_BYTES):
        reads = [(signals[i], [(0, signals[i].n)], SampleCache(1, max_bytes=0)) for i in group]
        if caches_reachable():
            batch = TaskBatch("neighbours")
            for i, read in zip(group, reads, strict=True):
                add_on_samples(batch, *read, tests[i])
            answers = batch.compute(st.progress)
        else:  # (a pool of processes: the samples come here)
            samples = fit_samples(reads)
            answers = each_in_threads(
                lambda k, samples=samples, group=group: tests[group[k]](samples[k]),
                range(len(group)),
                least=2,
            )
        for i, answer in zip(group, answers, strict=True):
            out[id(tested[i])] = answer
    found = sum(len(out[id(job)].changepoints) for job in tested)
    note(
        "nearest neighbours: %s in %d short series (%.1f s)",
        count(found, "change-point"),
        len(tested),
        time.perf_counter() - t0,
    )
    return out


def _test_samples(samples: np.ndarray, **test) -> NeighbourAnswer:
    """:func:`~kcpstream.selection.neighbours.neighbour_changes` of a series'
    samples (n, 1), a task of :func:`neighbour_answers`."""
    return neighbour_changes(samples[:, 0], **test)


def answer_of_parts(
    job: Job,
    invariant: Segmentation,
    twin: Segmentation | None,
    neighbours: NeighbourAnswer | None,
) -> Segmentation:
    """The answer of a series' parts: the pair's (:func:`answer_of_pair`; the
    samples' own test's without a ``twin``), or the nearest neighbours' where
    they found more change-points."""
    pair = invariant if twin is None else answer_of_pair(invariant, twin)
    if neighbours is None:
        return pair
    # (a series segmented sample by sample says that the part ran, and how)
    pair = dataclasses.replace(pair, params={**pair.params, **_subsequence(job)})
    segmented = job.segmented
    reads = pair.diagnostics.reads
    reads = dataclasses.replace(reads, samples_read_again=reads.samples_read_again + segmented.n)
    pair = dataclasses.replace(pair, diagnostics=dataclasses.replace(pair.diagnostics, reads=reads))
    if len(neighbours.changepoints) <= pair.n_changepoints:
        return pair
    return _neighbours_result(job, pair, neighbours)


def _neighbours_result(job: Job, pair: Segmentation, found: NeighbourAnswer) -> Segmentation:
    """The pair's answer with the neighbours' change-points (see the module
    docstring for its gains and costs)."""
    stats, window = job.stats, job.window
    changepoints = found.changepoints
    edges = np.clip(np.rint(changepoints / window).astype(np.int64), 1, stats.n - 1)
    segment_costs = costs_between(stats, edges)
    segmented = job.segmented
    times = segment_times(segmented, np.array([0, *changepoints, segmented.n], dtype=np.int64))
    selection = dataclasses.replace(pair.selection, n_segments=len(changepoints) + 1)
    return dataclasses.replace(
        pair,
        changepoints=changepoints,
        gains=local_gains(stats, edges) if len(edges) else np.zeros(0),
        order=found.order,
        cost=float(segment_costs.sum()),
        segment_costs=segment_costs,
        selection=selection,
        times=times,
        pvalues=found.pvalues,
        params={**pair.params, "shape": "neighbours", **_subsequence(job)},
    )


def _subsequence(job: Job) -> dict:
    """``{"subsequence": length}`` for a series segmented sample by sample (its
    windows say it otherwise)."""
    return {} if job.auto.subsequence is None else {"subsequence": job.auto.subsequence}


def answer_of_pair(invariant: Segmentation, twin: Segmentation) -> Segmentation:
    """The answer of a pair of segmentations of the same windows: the one with
    more change-points (``invariant`` on a tie), with ``params["shape"]``
    saying which and the reads of both in its diagnostics (its checkpoint's
    state is the invariant job's)."""
    chosen = twin if twin.n_changepoints > invariant.n_changepoints else invariant
    a, b = invariant.diagnostics.reads, twin.diagnostics.reads
    featurized = a.samples_featurized + b.samples_featurized
    per_pass = a.samples_featurized / a.passes if a.passes else 0.0
    reads = DataReads(
        samples_featurized=featurized,
        passes=featurized / per_pass if per_pass else b.passes,
        samples_featurized_pass=a.samples_featurized_pass + b.samples_featurized_pass,
        samples_read_again=a.samples_read_again + b.samples_read_again,
        n_chunks=a.n_chunks,
        chunks_read=a.chunks_read + b.chunks_read,
        chunks_reused=a.chunks_reused,
        fit_chunks_read=a.fit_chunks_read + b.fit_chunks_read,
        pass_tasks=a.pass_tasks + b.pass_tasks,
    )
    diagnostics = dataclasses.replace(
        invariant.diagnostics, reads=reads, search=chosen.diagnostics.search
    )
    shape = SHAPE if chosen is twin else "invariant"
    params = {**chosen.params, "shape": shape}
    return dataclasses.replace(chosen, diagnostics=diagnostics, params=params)


def _spec(fmap) -> str:
    """A feature map as the call that makes it (its parameters, not its fit)."""
    args = ", ".join(f"{k}={getattr(fmap, k, None)!r}" for k in type(fmap)._param_names)
    return f"{type(fmap).__name__}({args})"
