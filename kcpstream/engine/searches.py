"""Every job's search driven against the data: binary segmentation's path
(or the DP's exact positions) in lockstep rounds, a group of series at a time
when their samples do not fit in the cache together."""

from __future__ import annotations

import time

from kcpstream.engine.plan import Job, Settings
from kcpstream.passes.drive import drive_many
from kcpstream.progress import note
from kcpstream.search.binseg import (
    SearchLog,
    binseg_steps,
    dense_binseg_steps,
    scans_from_prefix,
)
from kcpstream.search.dynp import refine_steps
from kcpstream.selection.choose import Choice
from kcpstream.tasks.graph import in_process_scheduler


def search_groups(jobs: list[Job], st: Settings) -> list:
    """Every job's search (:func:`path_steps`), in lockstep rounds; a group of
    jobs at a time when their samples do not fit in ``cache_bytes`` together
    but a group's would (:func:`cache_groups`).

    A batch's series each get a share of the budget (:func:`~kcpstream.engine.run.cache_share`):
    a thousand series of a few MB in 256 MiB keep none of their chunks, and
    every round of refinement decodes each chunk again
    (``benchmarks/results/design.md``).  A group's series share the budget instead: the first round
    reads each chunk once and keeps it, the later ones scan it in memory.
    The results are the same; only where samples come from changes."""
    groups = cache_groups(jobs, st)
    if groups is None:
        return drive(jobs, lambda job: path_steps(job, st), st.tile, "search")
    orders: list = [None] * len(jobs)
    for ids in groups:
        group = [jobs[i] for i in ids]
        held = sum(_series_bytes(j) for j in group)
        for job in group:  # shares in proportion to the samples
            job.cache.resize(st.cache_bytes * _series_bytes(job) // held)
        what = f"search, series {ids[0] + 1}-{ids[-1] + 1} of {len(jobs)}"
        try:
            found = drive(group, lambda job: path_steps(job, st), st.tile, what)
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


def path_steps(job: Job, st: Settings):
    """The search of one job: binary segmentation's path (or, for a numeric
    ``pen`` with binseg, its splits while the gain beats ``pen``)."""
    kw = {"min_size": job.min_size, "log": job.search.log}
    search = dense_binseg_steps if job.in_memory else binseg_steps
    if not job.in_memory:
        kw["known"], kw["hints"] = job.search.known, job.search.hints
    if st.choice.kind == "pen" and st.choice.method == "binseg":
        return search(job.stats, pen=st.choice.pen, **kw)
    return search(job.stats, n_bkps=job.d_max - 1, allow_fewer=True, **kw)  # a path


def refinement(job: Job, chosen: Choice):
    """The exact positions of the DP's change-points chosen on its grid."""
    if job.in_memory:  # every position is a grid point: no data read, no round
        steps = refine_steps(job.stats, chosen.changepoints, chosen.grid, log=SearchLog())
        return scans_from_prefix(steps, job.stats, job.min_size)
    return refine_steps(job.stats, chosen.changepoints, chosen.grid, log=job.search.log)


def drive(jobs: list[Job], make_steps, tile: int, what: str) -> list:
    """:func:`drive_many` over every job, the jobs of one ``min_size`` in lockstep."""
    outcomes: list = [None] * len(jobs)
    t0 = said = time.perf_counter()
    rounds = scanned = alone = 0

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
        for i, out in zip(ids, drive_many(runs, size, tile, on_round), strict=True):
            outcomes[i] = out
    seconds = time.perf_counter() - t0
    if alone:
        note(
            "%s: %d rounds, %d pieces scanned (%d by series searched on their own) (%.1f s)",
            what, rounds, scanned, alone, seconds,
        )  # fmt: skip
    else:
        note("%s: %d rounds, %d pieces scanned (%.1f s)", what, rounds, scanned, seconds)
    return outcomes


#: Fewest seconds between two progress lines of the rounds of one search.
ROUND_LINE_SECONDS = 2.0
