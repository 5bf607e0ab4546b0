"""Every job's search driven against the data: binary segmentation's path
(or the DP's exact positions) in lockstep rounds, a group of series at a time
when their samples do not fit in the cache together."""

from __future__ import annotations

import time

import numpy as np

from kcpstream._kernels.blockstats import snapshot_every
from kcpstream.engine.plan import Job, Settings, consecutive_groups
from kcpstream.features.rff import FourierFeatures
from kcpstream.passes.drive import drive_many
from kcpstream.passes.ranges import as_2d, featurize_range
from kcpstream.passes.sliced import whole_length
from kcpstream.progress import note
from kcpstream.search.binseg import (
    SearchLog,
    binseg_steps,
    dense_binseg_steps,
    scans_from_prefix,
)
from kcpstream.search.dynp import refine_steps
from kcpstream.search.held import (
    HELD_MAX_SAMPLE_BYTES,
    HELD_MAX_VALUES,
    HELD_MAX_VALUES_FOURIER,
    held_binseg_steps,
)
from kcpstream.selection.choose import Choice
from kcpstream.tasks.graph import in_process_scheduler


def search_groups(jobs: list[Job], st: Settings, then=None) -> list:
    """Every job's search (:func:`path_steps`), in lockstep rounds; a group of
    jobs at a time when their samples do not fit in ``cache_bytes`` together
    but a group's would (:func:`cache_groups`).

    A batch's series each get a share of the budget (:func:`~kcpstream.engine.run.cache_share`):
    a thousand series of a few MB in 256 MiB keep none of their chunks, and
    every round of refinement decodes each chunk again
    (``benchmarks/results/design.md``).  A group's series share the budget instead: the first round
    reads each chunk once and keeps it, the later ones scan it in memory.
    The results are the same; only where samples come from changes.

    With ``then``, each job's outcome is ``then(job, order)``, made as soon as
    its search ends (:func:`drive`)."""
    groups = cache_groups(jobs, st)
    if groups is None:
        return drive(jobs, lambda job: path_steps(job, st), st.tile, "search", then)
    # each group's series are read whole: one read of a series searched in one
    # call, or the first round of the grid's (:func:`_held_or_grid`)
    outcomes: list = [None] * len(jobs)
    for ids in groups:
        group = [jobs[i] for i in ids]
        held = sum(_series_bytes(j) for j in group)
        for job in group:  # shares in proportion to the samples
            job.cache.resize(st.cache_bytes * _series_bytes(job) // held)
        what = f"search, series {ids[0] + 1}-{ids[-1] + 1} of {len(jobs)}"
        try:
            found = drive(group, lambda job: path_steps(job, st, True), st.tile, what, then)
        finally:  # the group's samples go before the next group's come
            for job in group:
                job.cache.resize(0)
        for i, outcome in zip(ids, found, strict=True):
            outcomes[i] = outcome
    return outcomes


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
    return consecutive_groups(sizes, st.cache_bytes)


def path_steps(job: Job, st: Settings, read_again: bool = False):
    """The search of one job: binary segmentation's path (or, for a numeric
    ``pen`` with binseg, its splits while the gain beats ``pen``).  With
    ``read_again``, a series searched in one call that the cache no longer
    holds is read again whole (:func:`_held_or_grid`)."""
    kw = {"min_size": job.min_size, "log": job.search.log}
    search = dense_binseg_steps if job.in_memory else binseg_steps
    if not job.in_memory:
        kw["known"], kw["hints"] = job.search.known, job.search.hints
    if st.choice.kind == "pen" and st.choice.method == "binseg":
        return search(job.stats, pen=st.choice.pen, **kw)
    if holds_its_search(job):
        return _held_or_grid(job, st, kw, read_again)
    return search(job.stats, n_bkps=job.d_max - 1, allow_fewer=True, **kw)  # a path


def holds_its_search(job: Job) -> bool:
    """Whether a job's path may be searched in one call over its features
    (:func:`~kcpstream.search.held.held_binseg_steps`): a series on the block
    grid whose statistics this call's data pass made, of at most
    :data:`~kcpstream.search.held.HELD_MAX_VALUES` feature values
    (:data:`~kcpstream.search.held.HELD_MAX_VALUES_FOURIER` for a Fourier
    map, whose blocks are featurized as the search scans them) and
    :data:`~kcpstream.search.held.HELD_MAX_SAMPLE_BYTES` of samples, one sample per
    feature vector, blocks no longer than a scan featurizes whole, searched
    in this process.  Not for an update from a checkpoint (its search reads
    only the pieces that changed), nor a later search over segments already
    evaluated (a loaded checkpoint's, a :class:`~kcpstream.Segmenter`'s later
    choices).  With a checkpoint it records every segment it evaluates, which
    the checkpoint keeps (:func:`_held_or_grid`)."""
    limit = HELD_MAX_VALUES_FOURIER if _fourier(job.fmap) else HELD_MAX_VALUES
    return (
        not job.in_memory
        and not job.reads.loaded
        and job.stored.reuse is None
        and not job.search.known
        and job.windows.width == 1
        and job.windows.cuts is None
        and job.fmap.window_samples == 1
        and job.signal.n * job.fmap.n_features_out_ <= limit
        and job.signal.n * job.signal.d * 8 <= HELD_MAX_SAMPLE_BYTES
        and job.block_size <= whole_length(job.fmap)
        and in_process_scheduler()
    )


def _held_or_grid(job: Job, st: Settings, kw: dict, read_again: bool):
    """The path from the series' features (the same splits and sums as the
    grid's search, which scans a piece at a time what it cannot rule out):
    its samples from the sample cache, or, with ``read_again``, read again
    once when the cache no longer holds them all (a group of a batch larger
    than the cache, whose first round on the grid reads every chunk its
    pieces touch: most of a short series').  Else on the grid, whose rounds
    read the chunks their pieces need and keep those the cache has room for
    (a single series larger than the cache), as when its reader cannot read
    alone (chunks persisted on a cluster)."""
    x = job.cache.get(0, job.signal.n)
    if x is None and read_again and job.signal.reader.self_contained:
        reader = job.signal.reader
        x = reader.run(0, reader.n_chunks - 1).read()
        job.cache.samples_read_again += job.signal.n
    if x is None:
        return (yield from binseg_steps(job.stats, n_bkps=job.d_max - 1, allow_fewer=True, **kw))
    fmap, lazy = job.fmap, None
    if _fourier(fmap):  # featurized a block at a time, as the search scans it
        # (rff_tile takes each sample as float64)
        x = np.ascontiguousarray(fmap.ordered(as_2d(x)), np.float64)
        lazy = (x, np.asarray(fmap.center_, np.float64), fmap.weights_, fmap.amplitudes_)
        z = fmap.tile_buffer(job.signal.n)
    else:
        z = featurize_range(fmap, x, st.tile)
    every = snapshot_every(fmap.window_samples)
    # a checkpoint keeps every segment evaluated, exact (a later deeper search's)
    known = job.search.known if job.stored.key is not None else None
    return (
        yield from held_binseg_steps(
            job.stats, z, every, min_size=job.min_size, n_bkps=job.d_max - 1,
            log=job.search.log, allow_fewer=True, lazy=lazy, known=known,
        )
    )  # fmt: skip


def _fourier(fmap) -> bool:
    """A map whose features :func:`~kcpstream._kernels.featurize.rff_tile` makes."""
    return isinstance(fmap, FourierFeatures) and (
        type(fmap).featurize_tile is FourierFeatures.featurize_tile
    )


def refinement(job: Job, chosen: Choice):
    """The exact positions of the DP's change-points chosen on its grid."""
    if job.in_memory:  # every position is a grid point: no data read, no round
        steps = refine_steps(job.stats, chosen.changepoints, chosen.grid, log=SearchLog())
        return scans_from_prefix(steps, job.stats, job.min_size)
    return refine_steps(job.stats, chosen.changepoints, chosen.grid, log=job.search.log)


def drive(jobs: list[Job], make_steps, tile: int, what: str, then=None) -> list:
    """:func:`drive_many` over every job, the jobs of one ``min_size`` in lockstep;
    with ``then``, a job's outcome is ``then(job, outcome)``, made in the thread
    its search ended in."""
    outcomes: list = [None] * len(jobs)
    t0 = said = time.perf_counter()
    rounds = scanned = alone = 0
    held_before = sum(j.search.log.held_searches for j in jobs)

    def on_round(pieces: int, shared: bool) -> None:
        nonlocal rounds, scanned, alone, said
        rounds += shared
        scanned += pieces
        alone += 0 if shared else pieces
        now = time.perf_counter()
        if shared and now - said >= ROUND_LINE_SECONDS:  # long rounds: a line each, at most
            said = now
            note("%s, round %d: %d pieces scanned (%.1f s)", what, rounds, pieces, now - t0)

    for size in sorted({j.min_size for j in jobs}):
        ids = [i for i, j in enumerate(jobs) if j.min_size == size]
        runs = [(make_steps(jobs[i]), jobs[i].signal, jobs[i].fmap, jobs[i].cache) for i in ids]
        after = None if then is None else (lambda k, out, ids=ids: then(jobs[ids[k]], out))
        for i, out in zip(ids, drive_many(runs, size, tile, on_round, after), strict=True):
            outcomes[i] = out
    seconds = time.perf_counter() - t0
    held = sum(j.search.log.held_searches for j in jobs) - held_before
    whole = f", {held} series searched whole from their features" if held else ""
    if alone:
        note(
            "%s: %d rounds, %d pieces scanned (%d by series searched on their own)%s (%.1f s)",
            what, rounds, scanned, alone, whole, seconds,
        )  # fmt: skip
    else:
        note("%s: %d rounds, %d pieces scanned%s (%.1f s)", what, rounds, scanned, whole, seconds)
    return outcomes


#: Fewest seconds between two progress lines of the rounds of one search.
ROUND_LINE_SECONDS = 2.0
