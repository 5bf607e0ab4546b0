"""Running a segmentation: each series' job prepared (fit, grid, checkpoint),
then every phase for all series at once (one data pass, the searches in
lockstep, the choice of the number of change-points, the results).

:func:`kcpstream.segment` checks its arguments and calls :func:`prepare` and
:func:`run`; the choices are :mod:`kcpstream.engine.plan`'s, the passes
:mod:`kcpstream.passes.data`', the search :mod:`kcpstream.search.binseg`'s.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import warnings

import numpy as np

from kcpstream.engine.autofeatures import auto_features, block_cycle, stretch_reads
from kcpstream.engine.fitting import FitRecord, fit_reads, fitted_map, seed_of
from kcpstream.engine.headroom import check_after_pass, check_before_pass
from kcpstream.engine.pair import (
    answer_of_parts,
    level_share,
    neighbour_answers,
    pair_up,
    shape_twin,
    with_neighbours,
)
from kcpstream.engine.plan import (
    Job,
    Settings,
    Windows,
    block_size_of,
    consecutive_groups,
    d_max_of,
    is_auto,
    limit_in_memory,
    min_size_of,
    searched_in_memory,
    state_groups,
)
from kcpstream.engine.results import build_result
from kcpstream.engine.searches import drive, refinement, search_groups
from kcpstream.engine.stored import (
    checkpoint_state,
    kept_tail,
    open_checkpoint,
    save_checkpoints,
    stored_fit,
    stored_layout,
)
from kcpstream.errors import (
    InputError,
    MissingSamplesWarning,
    SchedulerWarning,
)
from kcpstream.features import FeatureMap, make_feature_map
from kcpstream.inputs import provenance as pv
from kcpstream.inputs.gaps import GapMap, compact, kept_summaries
from kcpstream.inputs.signal import NonFiniteInput, Signal, window_signal
from kcpstream.passes.cache import SampleCache, release_worker_caches
from kcpstream.passes.data import data_passes, fit_sample, fit_samples, in_memory_passes
from kcpstream.passes.drive import MIN_THREAD_SEARCHES
from kcpstream.passes.gaps import find_gaps
from kcpstream.persist import checkpoint
from kcpstream.progress import note
from kcpstream.result import Segmentation, count
from kcpstream.selection.choose import Choice, Memo, choose
from kcpstream.tasks.graph import in_process_scheduler, pool_of_processes
from kcpstream.tasks.threads import MIN_THREAD_ITEMS, each_in_threads, one_blas_thread

#: Share of missing samples above which a series is said to be mostly missing.
MOSTLY_MISSING = 0.5


def prepare(signal: Signal, features, st: Settings, read: tuple | None = None) -> Job:
    """Checks that depend on the series, the fitted feature map, the block size
    (``read``: ``(cache, values)``, the samples ``features="auto"`` reads, read
    already through that cache; see :func:`_fitted`)."""
    given = features
    cache = sample = cycle = dependent = None
    fit_chunks = 0  # chunks read for the fit
    single_value = False  # the fit read the whole series: one value
    record = stored_fit(signal, features, st)
    kept = record is not None
    if kept:  # the fit of an earlier version, on the same samples
        fmap, auto = FeatureMap.from_json(record.fmap), record.auto
        dependent = record.subsequence
    else:
        if is_auto(features):
            # the stretches are read whole-chunk through the cache the pointwise
            # search would use, which keeps them for the data pass and the fit
            cache, values = read or (_job_cache(block_size_of(signal.n, st), st), None)
            features, sample, cycle, dependent = auto_features(
                signal, st.sample_size, st.seed, cache, values
            )
            fit_chunks = len(cache.fit_chunks)
            if sample is None:
                cache = None  # the windows are another signal, with a grid of their own
        auto = is_auto(features)  # "auto" still: sample by sample (no cycle seen)
        fmap = make_feature_map(features, seed=st.seed, d=signal.d)
    window = fmap.window_samples
    original = signal
    if window > 1:  # a window map segments the sequence of windows
        signal = window_signal(signal, window)
    min_size = min_size_of(st, original, signal.n, window)
    d_max = _check_segments(signal, min_size, st)
    B = block_size_of(signal.n, st, window)
    if cache is None:
        cache = _job_cache(B, st)
    if not kept:
        needs_fit, before = not fmap.is_fitted, len(cache.fit_chunks)
        answer = st.choice.kind in ("auto", "pen")  # rules that may choose none
        fit = fitted_map(fmap, signal, sample, cache, st.sample_size, answer)
        fmap, single_value = fit.fmap, fit.single_value
        fit_chunks += len(cache.fit_chunks) - before
        if isinstance(given, str) and needs_fit:
            reads = fit_reads(original.n, is_auto(given), st.sample_size, window, fit.wide)
            record = FitRecord(
                given,
                st.sample_size,
                seed_of(st.seed),
                original.d,
                None if cycle is None else cycle.period,
                None if cycle is None else cycle.error,
                window,
                auto,
                tuple(reads),
                fmap.to_json(),
                dependent,
            )
    fmap = fmap.holding(signal.n)  # a grid whose exact sums hold the series
    check_before_pass(signal, fmap, st.tile, B)
    job = Job(signal, fmap, B, d_max, cache, min_size, Windows(window), original)
    job.auto.pointwise, job.auto.dependence = auto, dependent
    job.stored.fit, job.reads.fit_chunks = record, fit_chunks
    job.reads.single_value = single_value
    job.params = _params(job, st)
    job.in_memory = searched_in_memory(signal.n, fmap.n_features_out_, st)
    period = job.params.get("period")
    paired = st.choice.kind == "auto" and original.valid is None
    if is_auto(given) and period is not None and paired:
        # the windows of a cycle, also with the canonical shape part (each part
        # tested at its share of the level; see kcpstream.engine.pair); not across
        # gaps, where a window of the valid samples joins two phases of the cycle
        job.auto.twin = shape_twin(job, period, st, _job_cache(B, st))
        pair_up(job, st.choice.alpha)
    elif dependent is not None and paired:
        # "auto" sample by sample, its samples dependent: also their
        # subsequences' nearest neighbours
        with_neighbours(job, st.choice.alpha)
    if st.checkpoint is not None:
        open_checkpoint(job, st.checkpoint, st.tile)
    return job


class SeriesWithGaps(Exception):
    """The data pass found NaN in these jobs' series (the others have their statistics)."""

    def __init__(self, jobs: list[Job], gaps: list) -> None:
        super().__init__(f"{len(jobs)} series hold NaN")
        self.jobs = jobs
        self.gaps = gaps  # each one's GapMap, found by the pass (None: to be read)


def segment_signals(signals: list[Signal], features, st: Settings, t0: float) -> list[Segmentation]:
    """Every series prepared and run.  A series found to hold NaN (by its fit
    sample or by the data pass) is segmented as its valid samples alone
    (:mod:`kcpstream.inputs.gaps`), or with ``signal.skipna`` False is an
    :class:`InputError` saying how many samples are missing and where."""
    if st.checkpoint is None:
        return _segment_signals(signals, features, st, t0)
    # every series looks up the groups of its lineage: the folder listed once
    with checkpoint.listed(st.checkpoint):
        return _segment_signals(signals, features, st, t0)


def _segment_signals(
    signals: list[Signal], features, st: Settings, t0: float
) -> list[Segmentation]:
    # each series' fit is its own (its reads, its checks, its map), mostly numpy
    # and compiled code: a batch's are made side by side
    known = _known_gaps(signals, st)
    jobs = _fitted(known, features, st)
    note("fit: feature maps of %d series fitted (%.1f s)", len(jobs), time.perf_counter() - t0)
    limit_in_memory(jobs)  # over the whole batch: a group's answers are the batch's
    groups = state_groups(jobs)
    results: list[Segmentation] = []
    for ids in groups:
        if len(groups) > 1:
            note("series %d-%d of %d", ids[0] + 1, ids[-1] + 1, len(jobs))
        group = [jobs[i] for i in ids]
        for i in ids:  # the group's statistics go with it, before the next group's pass
            jobs[i] = None
        if len(groups) > 1 and in_process_scheduler():
            for job in group:  # the group's series share the call's budget of samples
                job.cache.resize(st.cache_bytes // len(group))
        results += _segment_jobs(group, features, st, t0)
    return results


def _segment_jobs(jobs: list[Job], features, st: Settings, t0: float) -> list[Segmentation]:
    """:func:`run` on prepared jobs, the series found holding NaN run again as
    their valid samples (or refused)."""
    try:
        return run(jobs, st, t0)
    except SeriesWithGaps as found:
        redo, maps = found.jobs, found.gaps
    for job in redo:  # what they kept of the samples with gaps is no use any more
        job.cache.resize(0)
    # the series without NaN keep the statistics this pass gave them
    compacted = without_gaps([job.original for job in redo], st, maps)
    again = {}
    t_fit = time.perf_counter()
    for job, sig in zip(redo, compacted, strict=True):
        again[id(job)] = prepare(sig, features, st)
        # its place in the batch's in-memory budget is the one it was given over
        # the whole batch: a series of fewer samples never takes one a series
        # after it had (nor one that this group, run apart, would leave free)
        again[id(job)].in_memory &= job.in_memory
    note(
        "fit: feature maps of %d series with NaN fitted again, on their valid samples (%.1f s)",
        len(redo), time.perf_counter() - t_fit,
    )  # fmt: skip
    return run([again.get(id(job), job) for job in jobs], st, t0)


def _known_gaps(signals: list[Signal], st: Settings) -> list[Signal]:
    """Each signal of its valid samples when the checkpoint kept the gaps of
    these very samples (no read to find them again), or of an earlier
    version of the same stored array (only the chunks that changed are read
    to find theirs, those of every such series in one graph), else as it is."""
    out, later, kept = list(signals), [], []
    for k, signal in enumerate(signals):
        found = _gap_record(signal, st)
        if isinstance(found, GapMap):
            out[k] = compact(signal, found)
        elif found is not None:  # an earlier version's, of the chunks that did not change
            later.append(k)
            kept.append(found)
    if later:
        for k, sig in zip(later, without_gaps([out[k] for k in later], st, kept=kept), strict=True):
            out[k] = sig
    return out


def _gap_record(signal: Signal, st: Settings) -> GapMap | dict | None:
    """The :class:`GapMap` the checkpoint kept for this very input, or the
    summaries of the chunks an earlier version's record still tells
    (:func:`~kcpstream.inputs.gaps.kept_summaries`), or None."""
    if st.checkpoint is None or not signal.skipna or signal.identity is None:
        return None
    layout = stored_layout(signal)
    record = checkpoint.load_gaps(st.checkpoint, signal.identity, layout and layout[0])
    if record is None:
        return None
    try:
        gaps = GapMap.from_dict(record)
        old = {int(k): str(v) for k, v in record.get("slabs", {}).items()}
    except (KeyError, TypeError, ValueError, AttributeError):  # another layout: found again
        return None
    if record["identity"] != signal.identity:  # an earlier version of the array
        if layout is None or record.get("slab_step") != layout[1].step:
            return None
        return kept_summaries(gaps, signal.chunk_starts, layout[1].changed(old))
    if not np.array_equal(gaps.starts, signal.chunk_starts) or gaps.first_inf is not None:
        return None  # (read with other chunks)
    return gaps


def _fitted(signals: list[Signal], features, st: Settings) -> list[Job]:
    """Every series prepared (:func:`_prepare`), side by side in threads.

    In this process, the samples ``features="auto"`` reads of a batch's series
    are read first, together (:func:`~kcpstream.passes.data.fit_samples`),
    in groups of at most ``cache_bytes``: a read in a thread beside fits
    that hold the GIL waits for them at every hand-over between its threads.
    Not with a checkpoint, whose fit records may make those reads needless."""
    if not _reads_together(signals, features, st):
        with one_blas_thread(len(signals) >= MIN_THREAD_ITEMS):
            return each_in_threads(lambda sig: _prepare(sig, features, st), signals)
    windows = [stretch_reads(sig.n, st.sample_size) for sig in signals]
    # each group's samples (float64) at most cache_bytes together
    sizes = [8 * sig.d * sum(b - a for a, b in w) for sig, w in zip(signals, windows, strict=True)]
    jobs: list[Job] = []
    for group in consecutive_groups(sizes, st.cache_bytes):
        part = [signals[i] for i in group]
        caches = [_job_cache(block_size_of(sig.n, st), st) for sig in part]
        values = fit_samples(
            [(signals[i], windows[i], c) for i, c in zip(group, caches, strict=True)]
        )
        reads = list(zip(part, caches, values, strict=True))
        with one_blas_thread(len(part) >= MIN_THREAD_ITEMS):
            jobs += each_in_threads(lambda r: _prepare(r[0], features, st, r[1:]), reads)
    return jobs


def _reads_together(signals: list[Signal], features, st: Settings) -> bool:
    """Whether :func:`_fitted` reads the series' stretches together first."""
    return (
        is_auto(features)
        and st.checkpoint is None
        and len(signals) >= MIN_THREAD_ITEMS
        and in_process_scheduler()
    )


def _prepare(signal: Signal, features, st: Settings, read: tuple | None = None) -> Job:
    """:func:`prepare`, on the valid samples when the fit sample holds NaN."""
    try:
        return prepare(signal, features, st, read)
    except NonFiniteInput:
        pass  # (out of the handler: what the fit read is freed before the series is read)
    (signal,) = without_gaps([signal], st)
    return prepare(signal, features, st)


def without_gaps(
    signals: list[Signal], st: Settings, known: list | None = None, kept: list | None = None
) -> list[Signal]:
    """The signals of the valid samples of ``signals``, or the :class:`InputError`
    for an infinity, for a series with nothing valid, or for any NaN in a
    signal whose ``skipna`` is False.  ``known``: each one's
    :class:`~kcpstream.inputs.gaps.GapMap` when a data pass found it (None:
    the series are read once, together, to find them); ``kept``: for those
    read, the chunks whose gaps an earlier version's record still tells
    (:func:`~kcpstream.inputs.gaps.kept_summaries`), which are not read."""
    found = list(known) if known is not None else [None] * len(signals)
    kept = list(kept) if kept is not None else [None] * len(signals)
    todo = [k for k, g in enumerate(found) if g is None]
    if todo:
        note("gaps: finding the missing samples of %d series", len(todo))
        maps = find_gaps([signals[k] for k in todo], st.progress, [kept[k] for k in todo])
        for k, gaps in zip(todo, maps, strict=True):
            found[k] = gaps
    out = []
    for signal, gaps in zip(signals, found, strict=True):
        where = _where(signal, gaps.first_inf)
        if where is not None:
            raise InputError(
                f"{signal.description} holds an infinity at {where}; an infinity is no "
                "measurement: replace it (with NaN, to leave the sample out as missing)"
            )
        if gaps.n_missing and not signal.skipna:
            raise InputError(
                f"{signal.description} has {count(gaps.n_missing, 'missing sample')} (NaN) "
                f"of {gaps.n} ({100 * gaps.n_missing / gaps.n:.3g} %), the first at "
                f"{_where(signal, gaps.first_missing)}; with skipna=True (the default) they "
                "are left out as gaps, or fill them first"
            )
        if gaps.n_missing / gaps.n > MOSTLY_MISSING:
            warnings.warn(
                f"{signal.description}: {gaps.n_missing} of its {gaps.n} samples are missing "
                f"(longest gap {gaps.longest_gap}); it is segmented from the "
                f"{gaps.n_valid} valid ones",
                MissingSamplesWarning,
                stacklevel=4,
            )
        if st.checkpoint is not None and signal.identity is not None:
            layout = stored_layout(signal)  # (a later version keeps what did not change)
            lineage, units = (None, None) if layout is None else layout
            versions = None if units is None else (units.step, units.versions)
            checkpoint.save_gaps(st.checkpoint, signal.identity, gaps.to_dict(), lineage, versions)
        out.append(compact(signal, gaps))
    return out


def _where(signal: Signal, index: int | None) -> str | None:
    """``"index i"``, with the time coordinate there when the signal has one."""
    if index is None:
        return None
    if signal.time is None or signal.time.coord is None:
        return f"index {index}"
    try:
        when = signal.time.at([index])[0]
    except InputError:  # a coordinate that cannot be read there: the index says it
        return f"index {index}"
    return f"index {index} ({signal.time.dim} {when})"


def fitted_statistics(signal: Signal, features, st: Settings) -> Job:
    """The job of one series with its statistics (:func:`statistics`), of its
    valid samples when it holds NaN (as :func:`segment_signals` would)."""
    job = _prepare(signal, features, st)
    try:
        statistics(_with_twins([job]), st)
    except SeriesWithGaps as found:
        (signal,) = without_gaps([job.original], st, _originals(found, [job]).gaps)
        job = prepare(signal, features, st)
        statistics(_with_twins([job]), st)
    check_unchanged(_with_twins([job]))
    return job


def _with_twins(jobs: list[Job]) -> list[Job]:
    """The jobs and their twins (:mod:`kcpstream.engine.pair`)."""
    return jobs + [job.auto.twin for job in jobs if job.auto.twin is not None]


def _originals(found: SeriesWithGaps, jobs: list[Job]) -> SeriesWithGaps:
    """``found`` with each twin that found NaN (it reads its original's samples)
    as its original, once."""
    original = {id(job.auto.twin): job for job in jobs if job.auto.twin is not None}
    seen, redo, gaps = set(), [], []
    for job, gap in zip(found.jobs, found.gaps, strict=True):
        job = original.get(id(job), job)
        if id(job) not in seen:
            seen.add(id(job))
            redo.append(job)
            gaps.append(gap)
    return SeriesWithGaps(redo, gaps)


def reselect(fitted: Job, st: Settings, known: dict) -> Job:
    """A job on the statistics ``fitted`` holds (no data pass) for the selection
    settings of ``st``: ``min_size``, ``d_max``, the rule.  ``known``: for each
    ``min_size``, the segments evaluated exactly so far, shared by the jobs that
    search the same statistics with it (a segment's best split depends on the
    splits ``min_size`` admits; updated in place), and under ``"twin"`` the
    same for the twin's (:mod:`kcpstream.engine.pair`)."""
    original = fitted.original
    min_size = min_size_of(st, original, fitted.signal.n, fitted.window)
    d_max = _check_segments(fitted.signal, min_size, st)
    job = Job(
        fitted.signal,
        fitted.fmap,
        fitted.block_size,
        d_max,
        fitted.cache,
        min_size,
        fitted.windows,
        original,
    )
    job.stats, job.in_memory = fitted.stats, fitted.in_memory
    job.auto.pointwise, job.auto.dependence = fitted.auto.pointwise, fitted.auto.dependence
    job.reads.loaded = True  # no data pass: diagnostics count none
    job.search.known = known.setdefault(min_size, {})
    job.params = {**_params(job, st), "period": fitted.params.get("period")}
    twin = fitted.auto.twin
    if twin is not None and st.choice.kind == "auto":  # (only the test tries both)
        job.auto.twin = reselect(twin, st, known.setdefault("twin", {}))
        pair_up(job, st.choice.alpha)
    elif st.choice.kind == "auto" and original.valid is None:
        # (as prepare adds it: another level may reach what the first did not)
        with_neighbours(job, st.choice.alpha)
    return job


def _check_segments(signal: Signal, min_size: int, st: Settings) -> int:
    """``d_max`` for a series of ``signal.n`` samples (windows), once the segments
    asked for are known to fit."""
    n = signal.n
    if n < 2:
        raise InputError(
            f"{signal.description} has {count(n, 'sample')}: a change-point lies between "
            "two samples; give a longer signal"
        )
    if n < 2 * min_size:
        raise InputError(
            f"{signal.description} has {n} samples, fewer than 2*min_size={2 * min_size}: "
            "no split can leave min_size samples on both sides; use a smaller min_size "
            "or a longer signal"
        )
    if st.choice.n_bkps is not None and st.choice.n_bkps > n // min_size - 1:
        raise InputError(
            f"n_bkps={st.choice.n_bkps} change-points cannot fit in {n} samples with "
            f"min_size={min_size} (at most {n // min_size - 1}); ask for fewer or lower "
            "min_size"
        )
    d_max = d_max_of(st, n, min_size)
    if st.choice.kind == "slope" and d_max < 4:
        raise InputError(
            f"the automatic penalty needs a path of at least 4 segmentations; d_max={d_max} "
            f"(n={n}, min_size={min_size}); give n_bkps or pen, or a larger d_max"
        )
    return d_max


def _params(job: Job, st: Settings) -> dict:
    """What the result was made with, kept in its JSON (``Segmentation.params``)."""
    return {
        "method": st.choice.method,
        "rule": st.choice.kind,
        "n_bkps": st.choice.n_bkps,
        "pen": st.choice.pen,
        "alpha": st.choice.alpha if st.choice.kind == "auto" else None,
        "d_max": job.d_max,
        "min_size": job.min_size * job.window,  # samples (whole windows for a window map)
        "min_duration": None if st.min_duration is None else str(st.min_duration),
        "block_size": job.block_size,
        "seed": st.seed,
        "sample_size": st.sample_size,
        "features": _spec(job.fmap),
        "window": job.window if job.window > 1 else None,
        # the cycle the windows of features="auto" hold (samples), found by the
        # period check; a long cycle's is set by _long_cycle
        "period": _cycle_found(job),
    }


def _cycle_found(job: Job) -> float | None:
    """The period the period check found for a job it made windows for, or None."""
    fit = job.stored.fit
    if job.window > 1 and fit is not None and fit.period is not None:
        return float(fit.period)
    return None


def _long_cycle(job: Job, st: Settings) -> Job | None:
    """The job at windows of a cycle the period check could not see, or None.

    For ``features="auto"`` segmented sample by sample: a cycle longer than
    the period check's reach (:data:`~kcpstream.engine.autofeatures.PERIOD_WIDTH`
    / 8 samples) that shows in the features' block sums
    (:func:`~kcpstream.engine.autofeatures.block_cycle`) is segmented as windows
    that follow its period: the ``k``-th ends at the block edge nearest ``k``
    periods (a period to a fraction of a sample, so that the windows keep in
    phase with the cycle over the whole series), each the sum of its
    samples' centred features (:meth:`~kcpstream.search.stats.BlockStats.windows`):
    from the statistics of the data pass alone, in memory, at window
    resolution (the cycle's phase is no change).
    """
    stats = job.stats
    if not job.auto.pointwise or job.window != 1:
        return None
    full = stats.n // stats.block_size
    period = block_cycle(stats.prefix[:, : full + 1], stats.block_size)  # blocks
    if period is None:
        return None
    m = int(full // period)
    edges = np.rint(np.arange(m + 1) * period).astype(np.int64)
    windows = stats.windows(edges)
    width = int(round(period * stats.block_size))
    min_size = min_size_of(st, job.signal, m, width)
    if m < 2 * min_size or (st.choice.n_bkps is not None and st.choice.n_bkps > m // min_size - 1):
        return None  # the windows cannot hold the segments asked for: sample by sample
    d_max = d_max_of(st, m, min_size)
    cuts = edges * stats.block_size
    shape = Windows(width, cuts)
    out = Job(job.signal, job.fmap, 1, d_max, job.cache, min_size, shape, job.signal)
    out.stats, out.in_memory = windows, True
    out.stored = job.stored
    out.reads = dataclasses.replace(job.reads, samples_per_pass=stats.n)
    out.params = {
        **job.params,
        "d_max": d_max,
        "min_size": min_size * width,
        "window": width,
        "period": round(period * stats.block_size, 3),
    }
    return out


def _spec(fmap: FeatureMap) -> str:
    """A feature map as the call that makes it (its parameters, not its fit)."""
    args = ", ".join(f"{k}={getattr(fmap, k, None)!r}" for k in type(fmap)._param_names)
    return f"{type(fmap).__name__}({args})"


def _job_cache(block_size: int, st: Settings) -> SampleCache:
    """A job's sample cache: its share of the call's budget."""
    return SampleCache(block_size, max_bytes=cache_share(st), call_bytes=st.cache_bytes)


def cache_share(st: Settings) -> int:
    """Each series' share of ``cache_bytes``, the budget of the samples kept for
    refinement by all the series of a call together (a batch of 256 series
    would otherwise keep 256 budgets' worth)."""
    return st.cache_bytes // max(1, st.n_series)


def run(jobs: list[Job], st: Settings, t0: float) -> list[Segmentation]:
    """Every phase for all series at once: one data pass, searches in lockstep rounds."""
    if pool_of_processes():
        warnings.warn(
            "dask's 'processes' scheduler runs kcpstream slower than the default threads "
            "(every task's samples are copied between processes, and no process keeps "
            "them for refinement, which then reads in this process); kcpstream's kernels "
            "release the GIL: use threads, or a distributed cluster for several machines",
            SchedulerWarning,
            stacklevel=3,
        )
    limit_in_memory(jobs)
    try:
        return _run_phases(jobs, st, t0)
    finally:  # the samples workers kept for refinement are freed, whatever happened
        release_worker_caches([j.cache for j in jobs])


def _run_phases(jobs: list[Job], st: Settings, t0: float) -> list[Segmentation]:
    t_pass = time.perf_counter()
    twins = [job.auto.twin for job in jobs if job.auto.twin is not None]
    try:
        statistics(jobs + twins, st)
    except SeriesWithGaps as found:  # (redone from the original series)
        raise _originals(found, jobs) from None
    seconds_pass = time.perf_counter() - t_pass
    note("data pass: %s (%.1f s)", _pass_line(jobs, st), seconds_pass)
    stored = jobs  # the checkpoint keeps the data pass's statistics
    jobs = [_long_cycle(job, st) or job for job in jobs]
    singles = len(jobs)
    jobs = jobs + twins
    spent = []  # seconds of each series' choice, made as its search ends

    def choose_now(job: Job, order) -> Choice:
        t = time.perf_counter()
        chosen = _choose(job, order, st)
        spent.append(time.perf_counter() - t)
        return chosen

    with one_blas_thread(len(jobs) >= MIN_THREAD_SEARCHES):
        chosen = search_groups(jobs, st, then=choose_now)
    found = sum(len(c.changepoints) for c in chosen)
    note(
        "choice: %s in %d series (%.1f s, beside the searches)",
        count(found, "change-point"),
        len(jobs),
        sum(spent),
    )
    if st.choice.method == "dynp":
        of_job = {id(j): c for j, c in zip(jobs, chosen, strict=True)}
        refined = drive(jobs, lambda j: refinement(j, of_job[id(j)]), st.tile, "exact positions")
        chosen = [c.refined(cps) for c, cps in zip(chosen, refined, strict=True)]
    # the nearest neighbours' test of short series reads their samples once more
    tested = neighbour_answers(jobs[:singles], st)
    check_unchanged(stored + twins)  # (before a checkpoint keeps what was read)
    results = [build_result(j, c, st, t0, seconds_pass) for j, c in zip(jobs, chosen, strict=True)]
    of_twin = {id(twin): res for twin, res in zip(twins, results[singles:], strict=True)}
    results = [
        res
        if job.auto.twin is None and job.auto.subsequence is None
        else answer_of_parts(job, res, of_twin.get(id(job.auto.twin)), tested[id(job)])
        for job, res in zip(jobs[:singles], results[:singles], strict=True)
    ]
    if st.checkpoint is not None:  # (with the positions the results mapped back, see gaps)
        save_checkpoints(stored + twins, st.checkpoint, st.tile)
    return results


def _pass_line(jobs: list[Job], st: Settings) -> str:
    """What the data pass did, in words: the samples of the series it read, and
    the series a checkpoint held (loaded) or held an earlier version of (updated)."""
    states = [checkpoint_state(j, st) for j in jobs]
    read = [j for j, s in zip(jobs, states, strict=True) if s not in ("loaded", "updated")]
    parts = [f"{sum(j.stats.n * j.window for j in read)} samples of {len(read)} series"]
    if "loaded" in states:
        parts.append(f"{states.count('loaded')} series loaded from the checkpoint")
    if "updated" in states:
        parts.append(
            f"{states.count('updated')} series updated from the checkpoint (the chunks "
            "that changed read)"
        )
    return "; ".join(parts if read else parts[1:])


def check_unchanged(jobs: list[Job]) -> None:
    """An :class:`InputError` when a stored object a job read changed while it
    was read (rewritten, or removed: read as fill values by a route that does
    not refuse an absent chunk, an xarray object's), rather than a result of
    two versions of the data, or of fill values taken for samples or gaps.
    One listing of each store, after the last read of the data."""
    listed: dict = {}
    for job in jobs:
        signal = job.segmented
        if signal.origin is None:
            continue
        changed = pv.changed_objects(signal.origin, listed)
        if changed:
            more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
            raise InputError(
                f"{signal.description}: {changed[0]}{more} changed while it was read "
                "(rewritten, or removed, after the store was listed); the result would "
                "mix versions of the data: run again once the store is not being rewritten"
            )


def _choose(job: Job, order, st: Settings) -> Choice:
    """:func:`~kcpstream.selection.choose.choose` on the job's statistics."""
    memo = Memo(job.stats, job.min_size, job.window == 1, job.signal.description)
    memo.mixtures = job.windows.cuts is not None
    # the fit's span of the samples' dependence, whatever the rule or the level
    # (a stricter level that leaves the neighbours' part out must not shorten
    # the batches the samples' own test takes its noise from)
    memo.dependence = job.auto.dependence or 0
    rule = level_share(st.choice, job.auto.parts) if job.auto.paired else st.choice
    return choose(memo, order, rule, job.d_max)


def statistics(jobs: list[Job], st: Settings) -> None:
    """``job.stats`` of every job not loaded from a checkpoint: the small series
    in memory, the others in one data pass."""
    pending = [j for j in jobs if j.stats is None]  # (a series found holding NaN is redone)
    todo = [j for j in pending if not j.reads.loaded and not j.in_memory]
    small = [j for j in pending if not j.reads.loaded and j.in_memory]
    nonfinite: list[Job] = []
    found_gaps: dict = {}  # id(job) -> the GapMap its pass found, when it could tell
    if small:
        try:
            found = in_memory_passes(
                [(j.signal, j.fmap, j.cache) for j in small], st.tile, st.progress
            )
        except NonFiniteInput as exc:
            nonfinite += [small[k] for k in exc.series]
            for k, g in exc.gaps_of.items():
                found_gaps[id(small[k])] = _of_samples(small[k], g)
            found = exc.passed
        for job, stats in zip(small, found, strict=True):
            job.stats = stats
    for job in todo:
        job.reads.series = len(todo)
    # the digest of the last chunk, which the next version's append rewrites
    tails = [st.checkpoint is not None and stored_layout(j.signal) is not None for j in todo]
    try:
        passes = data_passes(
            [(j.signal, j.fmap, j.block_size, j.cache) for j in todo],
            st.tile,
            st.progress,
            [j.stored.reuse for j in todo],
            tails,
        )
    except NonFiniteInput as exc:
        nonfinite += [todo[k] for k in exc.series]
        for k, g in exc.gaps_of.items():
            found_gaps[id(todo[k])] = _of_samples(todo[k], g)
        passes = exc.passed
    for job, passed in zip(todo, passes, strict=True):
        if passed is None:
            continue
        job.stats, job.stored.reuse = passed.stats, passed.reuse
        job.reads.featurized, job.stored.tail = passed.featurized, passed.tail or kept_tail(job)
        if job.stored.reuse is not None:  # the exact splits refined before the first change
            job.search.known = job.stored.reuse.carry(job.stats, job.stored.base_known)
    if nonfinite:
        raise SeriesWithGaps(nonfinite, [found_gaps.get(id(j)) for j in nonfinite])
    for job in jobs:
        _check_statistics(job, st.tile)


def _of_samples(job: Job, gaps):
    """A data pass's gap map of a job's signal as the map of its series' samples,
    which the series is redone from: the map itself when the job reads the
    series sample by sample, None (the series is read again to find them) when
    it reads its windows, whose map counts windows."""
    return gaps if job.signal is job.original else None


def _largest_sample(job: Job, start: int, end: int) -> str | None:
    """Where the features of samples ``start`` to ``end`` have their largest norm
    (read again: only when the series is refused for it)."""
    best, at = -1.0, start
    try:
        for lo in range(start, end, LOCATE_ROWS):  # a block may be too large to featurize whole
            rows = fit_sample(job.signal, [(lo, min(end, lo + LOCATE_ROWS))], job.cache)
            q = job.fmap.transform(rows).astype(np.float64)
            norms = (q * q).sum(axis=1)
            if norms.max() > best:
                best, at = float(norms.max()), lo + int(np.argmax(norms))
    except Exception:  # the error names the block instead
        return None
    return _where(job.signal, at)


#: Samples featurized at a time to find the largest features of a block.
LOCATE_ROWS = 2**16


def _check_statistics(job: Job, tile: int) -> None:
    stats, signal = job.stats, job.signal
    locate = functools.partial(_largest_sample, job)
    check_after_pass(stats, signal, job.fmap, tile, locate)
    s_total, q_total = stats.range_sum(0, stats.n)
    sf = s_total.astype(np.float64)
    spread = q_total - float(sf @ sf) / stats.n
    if spread <= 1e-12 * max(q_total, 1.0) and not job.reads.single_value:
        # (a series of one value, read whole by the fit, has no change to find:
        # the search says so)
        raise InputError(
            f"{signal.description} is constant in feature space (every sample has the same "
            "features): there is no change to find. If the signal varies, the bandwidth may be "
            "far too large for its scale; give a smaller one"
        )
