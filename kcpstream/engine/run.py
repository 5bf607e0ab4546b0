"""Running a segmentation: each series' job prepared (fit, grid, checkpoint),
then every phase for all series at once (one data pass, the searches in
lockstep, the choice of the number of change-points, the results).

:func:`kcpstream.segment` checks its arguments and calls :func:`prepare` and
:func:`run`; the choices are :mod:`kcpstream.engine.plan`'s, the passes
:mod:`kcpstream.passes.data`', the search :mod:`kcpstream.search.binseg`'s.
"""

from __future__ import annotations

import copy
import json
import math
import time
import warnings

import numpy as np

from kcpstream._version import __version__
from kcpstream.engine.autofeatures import auto_features, block_cycle
from kcpstream.engine.fitting import FitRecord, fit_reads, still_fits
from kcpstream.engine.plan import (
    Job,
    Settings,
    block_size_of,
    d_max_of,
    is_auto,
    limit_in_memory,
    min_size_of,
    searched_in_memory,
)
from kcpstream.errors import InputError, SchedulerWarning
from kcpstream.features import FeatureMap, make_feature_map
from kcpstream.inputs.signal import Signal, check_finite_index, window_signal
from kcpstream.passes.cache import SampleCache, release_worker_caches
from kcpstream.passes.data import data_passes, fit_sample, in_memory_passes, pass_task_count
from kcpstream.passes.drive import drive_many
from kcpstream.persist import checkpoint
from kcpstream.persist.reuse import kept_pieces, plan_reuse
from kcpstream.progress import note
from kcpstream.result import Diagnostics, Segmentation
from kcpstream.search.binseg import (
    SearchLog,
    binseg_steps,
    dense_binseg_steps,
    scans_from_prefix,
)
from kcpstream.search.dynp import refine_steps
from kcpstream.selection.choose import Choice, Memo, choose, local_pvalues
from kcpstream.tasks.graph import in_process_scheduler, pool_of_processes

__all__ = ["prepare", "run", "reselect", "statistics"]


def prepare(signal: Signal, features, st: Settings) -> Job:
    """Checks that depend on the series, the fitted feature map, the block size."""
    given = features
    cache = sample = period = None
    fit_chunks = 0  # chunks read for the fit
    record = _stored_fit(signal, features, st)
    kept = record is not None
    if kept:  # the fit of an earlier version, on the same samples
        fmap, auto = FeatureMap.from_json(record.fmap), record.auto
    else:
        if is_auto(features):
            # the stretches are read whole-chunk through the cache the pointwise
            # search would use, which keeps them for the data pass and the fit
            cache = SampleCache(block_size_of(signal.n, st), max_bytes=_cache_share(st))
            features, sample, period = auto_features(signal, st.sample_size, st.seed, cache)
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
        cache = SampleCache(B, max_bytes=_cache_share(st))
    if not kept:
        needs_fit, before = not fmap.is_fitted, len(cache.fit_chunks)
        fmap = _fitted(fmap, signal, sample, cache, st)
        fit_chunks += len(cache.fit_chunks) - before
        if isinstance(given, str) and needs_fit:
            reads = fit_reads(original.n, is_auto(given), st.sample_size, window)
            record = FitRecord(given, st.sample_size, _seed(st), original.d, period, window,
                               auto, tuple(reads), fmap.to_json())  # fmt: skip
    job = Job(signal, fmap, B, d_max, cache, min_size, window=window, original=original)
    job.auto = auto
    job.fit, job.fit_chunks_read = record, fit_chunks
    job.params = _params(job, st)
    job.in_memory = searched_in_memory(signal.n, fmap.n_features_out_, st)
    if st.checkpoint is not None:
        _open_checkpoint(job, st.checkpoint, st.tile)
    return job


def _stored_fit(signal: Signal, features, st: Settings) -> FitRecord | None:
    """The fit a checkpoint kept for an earlier version of this stored array
    that is this version's fit too (:func:`kcpstream.engine.fitting.still_fits`), or None."""
    layout = _stored_layout(signal)
    if st.checkpoint is None or not isinstance(features, str) or layout is None:
        return None
    lineage, row0, step, slabs = layout
    for data, old_step, old in checkpoint.stored_fits(st.checkpoint, lineage):
        try:
            record = FitRecord.from_dict(data)
        except (TypeError, KeyError, ValueError):  # another layout: not a record
            continue
        same = (row0, step, old, slabs)
        if old_step == step and still_fits(
            record, features, signal.n, signal.d, st.sample_size, _seed(st), same
        ):
            return record
    return None


def _stored_layout(signal: Signal) -> tuple[str, int, int, dict[int, str]] | None:
    """``(lineage, row0, step, slabs)`` of a signal read directly from one
    stored array that keeps versions (:attr:`kcpstream.inputs.provenance.Origin.lineage`:
    sample ``i`` is its row ``row0 + i``, and ``slabs`` maps each run of
    ``step`` rows to its objects' versions), or None: no later version of
    it can be told apart from another input."""
    origin = signal.origin
    lineage = None if origin is None else origin.lineage
    if lineage is None:
        return None
    step, slabs = origin.slab_versions
    return lineage, origin.stores[0][0].rows[0], step, slabs


def _seed(st: Settings) -> int | None:
    """The seed as a fit record keeps it (a numpy integer as an int)."""
    return None if st.seed is None else int(st.seed)


def reselect(fitted: Job, st: Settings, known: dict[int, dict]) -> Job:
    """A job on the statistics ``fitted`` holds (no data pass) for the selection
    settings of ``st``: ``min_size``, ``d_max``, the rule.  ``known``: for each
    ``min_size``, the segments evaluated exactly so far, shared by the jobs that
    search the same statistics with it (a segment's best split depends on the
    splits ``min_size`` admits; updated in place)."""
    original = fitted.original
    min_size = min_size_of(st, original, fitted.signal.n, fitted.window)
    d_max = _check_segments(fitted.signal, min_size, st)
    job = Job(fitted.signal, fitted.fmap, fitted.block_size, d_max, fitted.cache, min_size,
              window=fitted.window, original=original)  # fmt: skip
    job.stats, job.in_memory, job.auto = fitted.stats, fitted.in_memory, fitted.auto
    job.loaded = True  # no data pass: diagnostics count none
    job.known = known.setdefault(min_size, {})
    job.params = _params(job, st)
    return job


def _check_segments(signal: Signal, min_size: int, st: Settings) -> int:
    """``d_max`` for a series of ``signal.n`` samples (windows), once the segments
    asked for are known to fit."""
    n = signal.n
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


def _fitted(fmap: FeatureMap, signal: Signal, sample, cache: SampleCache, st: Settings):
    """The feature map fitted on the series' fit sample (a copy: the caller's map
    stays unfitted), or the caller's fitted map once it matches the channels."""
    if fmap.is_fitted:
        if fmap.n_features_in_ != signal.d:
            raise InputError(
                f"the fitted feature map expects d={fmap.n_features_in_} channels but "
                f"{signal.description} has d={signal.d}; pass an unfitted map to refit"
            )
        return fmap
    fmap = copy.deepcopy(fmap)
    if sample is None:
        sample = fit_sample(signal, signal.fit_windows(st.sample_size), cache)
    if not np.isfinite(sample).all():
        check_finite_index(signal.first_nonfinite(), signal.description)
    fmap.fit(sample)
    return fmap


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
    }


def _open_checkpoint(job: Job, path, tile: int) -> None:
    """The job's statistics from the checkpoint at ``path`` when it holds them for
    this very input, or what an earlier version of the input left (``job.reuse``)."""
    identity = job.signal.identity
    if identity is None:
        raise InputError(
            f"checkpoint= cannot tell whether {job.signal.description} changed since a "
            "checkpoint was written (its samples do not come straight from a zarr store "
            "on a file system or object store, or from a numpy array); pass the store or "
            "the array itself, or omit checkpoint"
        )
    B = job.block_size
    chunk = _pass_chunk(job.signal) if B > 1 else None  # (its blocks' bits)
    job.key = checkpoint.fingerprint(
        identity, job.signal.source, job.fmap.to_json(), B, _tile_key(B, tile), chunk
    )
    found = checkpoint.load(path, job.key, job.min_size, job.signal.n, B, with_attrs=True)
    if found == "damaged":
        job.damaged = True
    elif found is not None:
        job.stats, job.known, attrs = found
        job.tail = _tail_of(attrs)  # written again with the group
        job.like = (job.key, job.stats.prefix, attrs.get("checksums"))
        job.loaded = True
        # the key holds for both searches: search as the stored statistics allow
        job.in_memory = job.stats.block_size == 1
    if not job.loaded and not job.in_memory:
        _find_reuse(job, path, tile)


def _tile_key(block_size: int, tile: int) -> int | None:
    """``tile`` where the statistics depend on it: blocks longer than a tile
    merge their sums of squares from its pieces (one rounding apart for
    another tile); None where they do not."""
    return tile if block_size > tile else None


def _find_reuse(job: Job, path, tile: int) -> None:
    """Keep the statistics of an earlier version of the same stored array
    (appended to, or rewritten in place) where its samples did not change:
    ``job.reuse`` (see :mod:`kcpstream.persist.reuse`)."""
    layout = _stored_layout(job.signal)
    if layout is None:
        return
    lineage, row0, step, slabs = layout
    base = checkpoint.load_base(path, lineage, job.fmap.to_json(), job.block_size, job.min_size)
    if base is None:
        return
    if base.key == job.key:  # this very input's group, found damaged: recomputed whole
        return
    job.like = (base.key, base.stats.prefix, base.attrs.get("checksums"))
    job.base_known = base.known
    # where the segments that end at the series' end split before it grew
    job.hints = {
        seg.start: seg
        for seg in base.known.values()
        if seg.end == base.stats.n and seg.exact and seg.split >= 0
    }
    # a block cut by a chunk boundary sums its squared norms in two parts, one
    # rounding apart from a block read whole: the same chunking, the same bits
    attrs = base.attrs
    if attrs.get("slab_step") != step or attrs.get("pass_chunk") != _pass_chunk(job.signal):
        return
    if attrs.get("tile_key") != _tile_key(job.block_size, tile):  # (its blocks' bits)
        return
    # an earlier version under the same settings: replaced by this run's statistics
    # once they are written (a group of other settings stays: it serves them)
    job.base_key = base.key
    job.base_tail = _tail_of(attrs)
    job.reuse = plan_reuse(
        base.stats, job.signal.n, job.signal.chunk_starts, step, row0, base.slabs, slabs,
        job.base_tail,
    )  # fmt: skip
    if job.reuse is not None:  # samples refinement scanned that this version still holds
        for (a, b), x in job.reuse.still_held(base.kept).items():
            job.cache.add_piece(a, b, x)


def _kept_tail(job: Job) -> tuple[int, int, str] | None:
    """The base's digest of its last chunk when this version has the same last
    chunk, not read again (a rewrite elsewhere): still its digest."""
    reuse = job.reuse
    tail = job.base_tail
    if reuse is None or tail is None or reuse.base.n != job.signal.n:
        return None
    starts = job.signal.chunk_starts
    i = int(np.searchsorted(starts, tail[0]))
    same = i < len(starts) - 1 and starts[i] == tail[0] and starts[i + 1] == tail[1]
    return tail if same and i not in set(reuse.chunks.tolist()) else None


def _tail_of(attrs: dict) -> tuple[int, int, str] | None:
    """The digest of its last chunk a checkpoint group keeps (``"tail"``), or None."""
    tail = attrs.get("tail")
    if not (isinstance(tail, list) and len(tail) == 3):
        return None
    a, v, digest = tail
    if type(a) is not int or type(v) is not int or not isinstance(digest, str) or not a < v:
        return None
    return a, v, digest


def _pass_chunk(signal: Signal) -> int:
    """The data pass's chunk length (all chunks but the last have it)."""
    return int(signal.data.chunks[0][0])


def _long_cycle(job: Job, st: Settings) -> Job | None:
    """The job at windows of a cycle the period check could not see, or None.

    For ``features="auto"`` segmented sample by sample: a cycle longer than
    the period check's reach (:data:`~kcpstream.engine.autofeatures.PERIOD_WIDTH`
    / 8 samples) that shows in the features' block sums
    (:func:`~kcpstream.engine.autofeatures.block_cycle`) is segmented as windows of
    whole blocks holding one cycle, each the mean of its samples' features:
    from the statistics of the data pass alone, in memory, at window
    resolution (the cycle's phase is no change).
    """
    stats = job.stats
    if not job.auto or job.window != 1:
        return None
    full = stats.n // stats.block_size
    steps = block_cycle(stats.prefix[:, : full + 1], stats.block_size)
    if steps is None:
        return None
    window = steps * stats.block_size
    windows = stats.windows(steps)
    m = windows.n
    min_size = min_size_of(st, job.signal, m, window)
    if m < 2 * min_size or (st.choice.n_bkps is not None and st.choice.n_bkps > m // min_size - 1):
        return None  # the windows cannot hold the segments asked for: sample by sample
    d_max = d_max_of(st, m, min_size)
    out = Job(job.signal, job.fmap, 1, d_max, job.cache, min_size, window=window)
    out.original, out.stats, out.in_memory, out.loaded = job.signal, windows, True, job.loaded
    out.reuse, out.fit_chunks_read = job.reuse, job.fit_chunks_read
    out.samples_per_pass = stats.n
    out.params = {**job.params, "d_max": d_max, "min_size": min_size * window, "window": window}
    return out


def _spec(fmap: FeatureMap) -> str:
    """A feature map as the call that makes it (its parameters, not its fit)."""
    args = ", ".join(f"{k}={getattr(fmap, k, None)!r}" for k in type(fmap)._param_names)
    return f"{type(fmap).__name__}({args})"


def _cache_share(st: Settings) -> int:
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
    note("fit: feature maps of %d series fitted (%.1f s)", len(jobs), t_pass - t0)
    statistics(jobs, st)
    seconds_pass = time.perf_counter() - t_pass
    note("data pass: %d samples of %d series (%.1f s)", sum(j.stats.n * j.window for j in jobs),
         len(jobs), seconds_pass)  # fmt: skip
    stored = jobs  # the checkpoint keeps the data pass's statistics
    jobs = [_long_cycle(job, st) or job for job in jobs]
    orders = search_groups(jobs, st)
    t_choose = time.perf_counter()
    chosen = [_choose(job, order, st) for job, order in zip(jobs, orders, strict=True)]
    found = sum(len(c.changepoints) for c in chosen)
    note("choice: %d change-points in %d series (%.1f s)", found, len(jobs),
         time.perf_counter() - t_choose)  # fmt: skip
    if st.choice.method == "dynp":
        of_job = {id(j): c for j, c in zip(jobs, chosen, strict=True)}
        refined = _drive(jobs, lambda j: _refinement(j, of_job[id(j)]), st.tile, "exact positions")
        chosen = [c.refined(cps) for c, cps in zip(chosen, refined, strict=True)]
    if st.checkpoint is not None:
        _save_checkpoints(stored, st.checkpoint, st.tile)
    return [_build_result(j, c, st, t0, seconds_pass) for j, c in zip(jobs, chosen, strict=True)]


def _choose(job: Job, order, st: Settings) -> Choice:
    """:func:`~kcpstream.selection.choose.choose` on the job's statistics."""
    memo = Memo(job.stats, job.min_size, job.window == 1, job.signal.description)
    return choose(memo, order, st.choice, job.d_max)


def search_groups(jobs: list[Job], st: Settings) -> list:
    """Every job's search (:func:`_path_steps`), in lockstep rounds; a group of
    jobs at a time when their samples do not fit in ``cache_bytes`` together
    but a group's would (:func:`cache_groups`).

    A batch's series each get a share of the budget (:func:`_cache_share`):
    1000 series of 4 MB in 256 MiB keep none of their chunks, and every round
    of refinement decodes each chunk again (21 times per series of 10^6
    samples).  A group's series share the budget instead: the first round
    reads each chunk once and keeps it, the later ones scan it in memory.
    The results are the same; only where samples come from changes."""
    groups = cache_groups(jobs, st)
    if groups is None:
        return _drive(jobs, lambda job: _path_steps(job, st), st.tile, "search")
    orders: list = [None] * len(jobs)
    for ids in groups:
        group = [jobs[i] for i in ids]
        held = sum(_series_bytes(j) for j in group)
        for job in group:  # shares in proportion to the samples
            job.cache.resize(st.cache_bytes * _series_bytes(job) // held)
        what = f"search, series {ids[0] + 1}-{ids[-1] + 1} of {len(jobs)}"
        try:
            found = _drive(group, lambda job: _path_steps(job, st), st.tile, what)
        finally:  # the group's samples go before the next group's come
            for job in group:
                job.cache.resize(0)
        for i, order in zip(ids, found, strict=True):
            orders[i] = order
    return orders


def _series_bytes(job: Job) -> int:
    return job.signal.n * job.signal.row_bytes


def cache_groups(jobs: list[Job], st: Settings) -> list[list[int]] | None:
    """Consecutive jobs in groups whose samples fit in ``cache_bytes`` together,
    or None to search all at once: when they all fit, when one series takes
    more than half the budget (it would be a group alone, and a batch of long
    series keeps its rounds shared), or when the caches are not in this
    process (a distributed worker keeps its own, sized when it is made)."""
    if len(jobs) < 2 or not in_process_scheduler():
        return None
    sizes = [_series_bytes(j) for j in jobs]
    if sum(sizes) <= st.cache_bytes or max(sizes) > st.cache_bytes // 2:
        return None
    groups: list[list[int]] = [[]]
    held = 0
    for i, size in enumerate(sizes):
        if groups[-1] and held + size > st.cache_bytes:
            groups.append([])
            held = 0
        groups[-1].append(i)
        held += size
    return groups


def statistics(jobs: list[Job], st: Settings) -> None:
    """``job.stats`` of every job not loaded from a checkpoint: the small series
    in memory, the others in one data pass."""
    todo = [j for j in jobs if not j.loaded and not j.in_memory]
    small = [j for j in jobs if not j.loaded and j.in_memory]
    if small:
        found = in_memory_passes([(j.signal, j.fmap, j.cache) for j in small], st.tile, st.progress)
        for job, stats in zip(small, found, strict=True):
            job.stats = stats
    for job in todo:
        job.pass_series = len(todo)
    # the digest of the last chunk, which the next version's append rewrites
    tails = [st.checkpoint is not None and _stored_layout(j.signal) is not None for j in todo]
    for job, passed in zip(
        todo,
        data_passes(
            [(j.signal, j.fmap, j.block_size, j.cache) for j in todo], st.tile, st.progress,
            [j.reuse for j in todo], tails,
        ),
        strict=True,
    ):  # fmt: skip
        job.stats, job.reuse = passed.stats, passed.reuse
        job.featurized, job.tail = passed.featurized, passed.tail or _kept_tail(job)
        if job.reuse is not None:  # the exact splits refined before the first change
            job.known = job.reuse.carry(job.stats, job.base_known)
    for job in jobs:
        _check_statistics(job.stats, job.signal)


def _path_steps(job: Job, st: Settings):
    """The search of one job: binary segmentation's path (or, for a numeric
    ``pen`` with binseg, its splits while the gain beats ``pen``)."""
    kw = {"min_size": job.min_size, "log": job.log}
    search = dense_binseg_steps if job.in_memory else binseg_steps
    if not job.in_memory:
        kw["known"], kw["hints"] = job.known, job.hints
    if st.choice.kind == "pen" and st.choice.method == "binseg":
        return search(job.stats, pen=st.choice.pen, **kw)
    return search(job.stats, n_bkps=job.d_max - 1, allow_fewer=True, **kw)  # a path


def _refinement(job: Job, chosen: Choice):
    """The exact positions of the DP's change-points chosen on its grid."""
    if job.in_memory:  # every position is a grid point: no data read, no round
        steps = refine_steps(job.stats, chosen.changepoints, chosen.grid, log=SearchLog())
        return scans_from_prefix(steps, job.stats, job.min_size)
    return refine_steps(job.stats, chosen.changepoints, chosen.grid, log=job.log)


def _save_checkpoints(jobs: list[Job], path, tile: int) -> None:
    """Each job's statistics and exact splits, under its key; the earlier version's
    statistics it was updated from removed."""
    for job in jobs:
        attrs = {
            "kcpstream": __version__,
            "features": job.fmap.to_json(),
            "source": json.dumps(job.signal.source, default=str),
            "min_size": job.min_size,
            "block_size": job.block_size,
            "tile_key": _tile_key(job.block_size, tile),
            **_versions_of(job.signal),
        }
        if job.tail is not None and "lineage" in attrs:  # what the next append's pass checks
            attrs["tail"] = list(job.tail)
        if job.fit is not None and "lineage" in attrs:  # what a later version's fit may keep
            attrs["fit"] = job.fit.to_dict()
        checkpoint.save(
            path, job.key, job.stats, job.known, attrs, _kept_samples(job), like=job.like
        )
        if job.base_key is not None and job.base_key != job.key:
            # the earlier version's statistics describe samples the store no longer holds
            checkpoint.remove(path, job.base_key)
        if "lineage" in attrs:  # groups of an earlier layout: never used again
            checkpoint.remove_outdated(path, attrs["lineage"])
    note("checkpoint: statistics of %d series written to %s", len(jobs), path)


def _kept_samples(job: Job) -> dict:
    """The samples of :func:`~kcpstream.persist.reuse.kept_pieces` that the job's cache
    holds (none for a series searched in memory, or with no lineage: no later
    version can use them)."""
    if job.in_memory or _stored_layout(job.signal) is None:
        return {}
    pieces = (
        (a, b, job.cache.get(a, b)) for a, b in kept_pieces(job.stats, job.known, job.min_size)
    )
    return {(a, b): x for a, b, x in pieces if x is not None}


def _checkpoint_state(job: Job, st: Settings) -> str:
    """``diagnostics.checkpoint`` (see :class:`~kcpstream.result.Diagnostics`)."""
    if st.checkpoint is None:
        return ""
    if job.reuse is not None:
        return "updated"
    return "loaded" if job.loaded else "recomputed" if job.damaged else "written"


def _versions_of(signal: Signal) -> dict:
    """What a later run needs to reuse these statistics for a changed version
    of the same stored array (:func:`_find_reuse`): nothing when it cannot."""
    layout = _stored_layout(signal)
    if layout is None:
        return {}
    lineage, _, step, slabs = layout
    return {
        "lineage": lineage,
        "slab_step": step,
        "pass_chunk": _pass_chunk(signal),
        "slabs": slabs,  # stored as checksummed arrays (checkpoint.save)
    }


def _drive(jobs: list[Job], make_steps, tile: int, what: str) -> list:
    """:func:`drive_many` over every job, the jobs of one ``min_size`` in lockstep."""
    outcomes: list = [None] * len(jobs)
    t0 = said = time.perf_counter()
    rounds = scanned = 0

    def on_round(pieces: int) -> None:
        nonlocal rounds, scanned, said
        rounds += 1
        scanned += pieces
        now = time.perf_counter()
        if now - said >= ROUND_LINE_SECONDS:  # long rounds: one line each, at most
            said = now
            note("%s, round %d: %d pieces scanned (%.1f s)", what, rounds, pieces, now - t0)

    for size in sorted({j.min_size for j in jobs}):
        ids = [i for i, j in enumerate(jobs) if j.min_size == size]
        runs = [(make_steps(jobs[i]), jobs[i].signal, jobs[i].fmap, jobs[i].cache) for i in ids]
        for i, out in zip(ids, drive_many(runs, size, tile, on_round), strict=True):
            outcomes[i] = out
    note("%s: %d rounds, %d pieces scanned (%.1f s)", what, rounds, scanned,
         time.perf_counter() - t0)  # fmt: skip
    return outcomes


#: Fewest seconds between two progress lines of the rounds of one search.
ROUND_LINE_SECONDS = 2.0


def _check_statistics(stats, signal: Signal) -> None:
    qmax = math.sqrt(stats.global_max_norm2)
    # block sums are exact integers held in float64 only below 2**53, prefix sums in int64
    if qmax * stats.block_size >= 2.0**52 or qmax * stats.n >= 2.0**62:
        raise InputError(
            f"{signal.description} has values far outside the range of the fit sample "
            f"(feature norm up to {qmax * 2.0**-stats.quantum_exponent:.3g}); the exact integer "
            "sums would overflow. Standardise the signal, or fit the feature map on a sample "
            "that covers its range and pass it as features="
        )
    s_total, q_total = stats.range_sum(0, stats.n)
    sf = s_total.astype(np.float64)
    spread = q_total - float(sf @ sf) / stats.n
    if spread <= 1e-12 * max(q_total, 1.0):
        raise InputError(
            f"{signal.description} is constant in feature space (every sample has the same "
            "features): there is no change to find. If the signal varies, the bandwidth may be "
            "far too large for its scale; pass an explicit bandwidth"
        )


def _build_result(
    job: Job, chosen: Choice, st: Settings, t0: float, seconds_pass: float
) -> Segmentation:
    """The :class:`Segmentation` of one job and its choice."""
    stats, signal, fmap, log = job.stats, job.signal, job.fmap, job.log
    changepoints, order = chosen.changepoints, chosen.order
    bounds = np.array([0, *map(int, changepoints), stats.n], dtype=np.int64)
    segment_costs = np.array(
        [stats.cost(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    )
    cost = float(segment_costs.sum())
    w = job.window  # positions of feature vectors -> samples
    n_samples = job.original.n if job.original is not None else stats.n
    positions = np.asarray(changepoints, dtype=np.int64)
    changepoints = positions * w
    order = np.asarray(order, dtype=np.int64) * w
    sample_bounds = np.array([0, *changepoints, n_samples], dtype=np.int64)
    time_axis = job.original.time if job.original is not None else signal.time
    times = None
    if time_axis is not None:
        times = {
            "dim": time_axis.dim,
            "start": time_axis.at(sample_bounds[:-1]),
            "end": time_axis.at(sample_bounds[1:] - 1),
        }
    per_pass = stats.n if job.samples_per_pass is None else job.samples_per_pass
    starts = signal.chunk_starts
    n_chunks = len(starts) - 1
    if job.loaded:
        passed, read = 0, 0
    elif job.reuse is not None:
        read = len(job.reuse.chunks)
        passed = job.featurized
    else:
        passed, read = per_pass, n_chunks
    featurized = passed + log.samples_scanned
    diagnostics = Diagnostics(
        samples_featurized=int(featurized),
        passes=featurized / per_pass,
        seconds=time.perf_counter() - t0,
        seconds_data_pass=seconds_pass,
        n_blocks=stats.n_blocks,
        block_size=stats.block_size,
        n_chunks=n_chunks,
        chunks_read=read,
        chunks_reused=0 if job.reuse is None else job.reuse.chunks_reused,
        rounds=log.rounds,
        pieces_scanned=log.pieces_scanned,
        samples_scanned=log.samples_scanned,
        samples_featurized_pass=passed,
        checkpoint=_checkpoint_state(job, st),
        samples_read_again=job.cache.samples_read_again,
        pass_tasks=0
        if job.loaded or job.in_memory
        else pass_task_count(
            signal,
            job.params["block_size"],
            None if job.reuse is None else job.reuse.chunks,
            job.pass_series,
        ),
        in_memory=job.in_memory,
        fit_chunks_read=job.fit_chunks_read,
    )
    return Segmentation(
        changepoints=np.asarray(changepoints, dtype=np.int64),
        gains=np.asarray(chosen.gains, dtype=np.float64),
        order=np.asarray(order, dtype=np.int64),
        path_costs=np.asarray(chosen.costs, dtype=np.float64),
        cost=cost,
        method=st.choice.method,
        selection=chosen.selection,
        n_samples=n_samples,
        min_size=job.min_size * job.window,  # in samples
        features=fmap,
        diagnostics=diagnostics,
        segment_costs=segment_costs,
        times=times,
        params={"source": signal.source, **job.params},
        pvalues=local_pvalues(chosen.memo, positions),
    )
