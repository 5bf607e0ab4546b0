"""A job's :class:`~kcpstream.Segmentation`: its chosen change-points in
samples, their times, costs and p-values, and the diagnostics of the run."""

from __future__ import annotations

import time

import numpy as np

from kcpstream.engine.plan import Job, Settings
from kcpstream.engine.stored import checkpoint_state
from kcpstream.passes.data import pass_task_count
from kcpstream.result import DataReads, Diagnostics, Gaps, Missing, SearchWork, Segmentation
from kcpstream.selection.choose import Choice, local_pvalues


def build_result(
    job: Job, chosen: Choice, st: Settings, t0: float, seconds_pass: float
) -> Segmentation:
    """The :class:`Segmentation` of one job and its choice."""
    stats, signal, fmap, log = job.stats, job.signal, job.fmap, job.search.log
    changepoints, order = chosen.changepoints, chosen.order
    segment_costs = costs_between(stats, changepoints)
    cost = float(segment_costs.sum())
    segmented = job.segmented
    n_samples = segmented.n
    positions = np.asarray(changepoints, dtype=np.int64)
    changepoints = job.windows.samples(positions)  # feature vectors' -> samples'
    order = job.windows.samples(order)
    sample_bounds = np.array([0, *changepoints, n_samples], dtype=np.int64)
    time_axis = segmented.time
    times = segment_times(segmented, sample_bounds)
    valid = segmented.valid  # the series' valid samples were segmented: the input's positions
    gaps, missing = Gaps(), Missing()
    if valid is not None:
        changepoints, order, gaps, missing = _in_input(valid, changepoints, order, sample_bounds)
        n_samples = valid.gaps.n
        if times is not None:
            times["earliest"] = time_axis.coord.at_input(gaps.earliest)
    reads = _reads(job)
    work = SearchWork(
        n_blocks=stats.n_blocks,
        block_size=stats.block_size,
        rounds=log.rounds,
        pieces_scanned=log.pieces_scanned,
        samples_scanned=log.samples_scanned,
        in_memory=job.in_memory,
    )
    seconds = time.perf_counter() - t0
    diagnostics = Diagnostics(
        reads, work, seconds, seconds_pass, checkpoint_state(job, st), missing
    )
    return Segmentation(
        changepoints=np.asarray(changepoints, dtype=np.int64),
        gains=np.asarray(chosen.gains, dtype=np.float64),
        order=np.asarray(order, dtype=np.int64),
        path_costs=np.asarray(chosen.costs, dtype=np.float64),
        cost=cost,
        selection=chosen.selection,
        n_samples=n_samples,
        min_size=job.min_size * job.window,  # in samples
        features=fmap,
        diagnostics=diagnostics,
        segment_costs=segment_costs,
        times=times,
        # the grid searched: 1 when the series was searched in memory
        params={"source": signal.source, **job.params, "block_size": int(stats.block_size)},
        pvalues=local_pvalues(chosen.memo, positions),
        gaps=gaps,
    )


def costs_between(stats, changepoints) -> np.ndarray:
    """The cost of each segment between ``changepoints`` (feature vectors')."""
    bounds = [0, *map(int, changepoints), stats.n]
    return np.array([stats.cost(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)])


def segment_times(segmented, sample_bounds: np.ndarray) -> dict | None:
    """The time coordinate at each segment's first and last sample (the
    :attr:`~kcpstream.Segmentation.times` of a labelled series), or None."""
    axis = segmented.time
    if axis is None:
        return None
    return {
        "dim": axis.dim,
        "start": axis.at(sample_bounds[:-1]),
        "end": axis.at(sample_bounds[1:] - 1),
    }


def _reads(job: Job) -> DataReads:
    """What the job read of its data (the :class:`DataReads` of its result)."""
    stats, signal, log = job.stats, job.signal, job.search.log
    per_pass = stats.n if job.reads.samples_per_pass is None else job.reads.samples_per_pass
    starts = signal.chunk_starts
    n_chunks = len(starts) - 1
    if job.reads.loaded:
        passed, read = 0, 0
    elif job.stored.reuse is not None:
        read = len(job.stored.reuse.chunks)
        passed = job.reads.featurized
    else:
        passed, read = per_pass, n_chunks
    featurized = passed + log.samples_featurized
    reads = DataReads(
        samples_featurized=int(featurized),
        passes=featurized / per_pass,
        samples_featurized_pass=passed,
        samples_read_again=job.cache.samples_read_again,
        n_chunks=n_chunks,
        chunks_read=read,
        chunks_reused=0 if job.stored.reuse is None else job.stored.reuse.chunks_reused,
        fit_chunks_read=job.reads.fit_chunks,
        pass_tasks=0 if job.reads.loaded or job.in_memory else _pass_tasks(job),
    )
    return reads


def _in_input(valid, changepoints, order, bounds):
    """Change-points and order among a series' valid samples as indices of the
    input, with where the gap before each began and each segment's valid
    samples (``bounds``: the segments' among the valid samples), and the counts
    of missing samples: ``(changepoints, order, Gaps, Missing)``."""
    gaps = valid.gaps
    where = Gaps(valid.earliest(changepoints), np.diff(bounds))
    missing = Missing(gaps.n_missing, gaps.longest_gap, gaps.n_missing / gaps.n, gaps.chunks_read)
    return valid.original(changepoints), valid.original(order), where, missing


def _pass_tasks(job: Job) -> int:
    """The tasks of the job's data pass (:func:`~kcpstream.passes.data.pass_task_count`)."""
    reuse = job.stored.reuse
    only = None if reuse is None else reuse.chunks
    whole = None if reuse is None or reuse.head is None else reuse.head[0]
    return pass_task_count(job.signal, job.params["block_size"], only, job.reads.series, whole)
