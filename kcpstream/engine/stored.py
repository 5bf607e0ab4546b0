"""A job's checkpoint: its statistics loaded when the checkpoint holds them for
this very input, an earlier version's kept where the archive did not change
(:mod:`kcpstream.persist.reuse`), and what a run writes back for the next.

:mod:`kcpstream.persist.checkpoint` reads and writes the groups; this module
decides which group a job uses and what goes into its attributes.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from kcpstream._version import __version__
from kcpstream.engine.fitting import TWIN_FIT, FitRecord, seed_of, still_fits
from kcpstream.engine.plan import Job, Settings
from kcpstream.errors import InputError
from kcpstream.inputs.provenance import Units
from kcpstream.inputs.signal import Signal
from kcpstream.persist import checkpoint
from kcpstream.persist.reuse import kept_pieces, plan_reuse
from kcpstream.progress import note


def stored_fit(signal: Signal, features, st: Settings, twin: bool = False) -> FitRecord | None:
    """The fit a checkpoint kept for an earlier version of this stored array
    that is this version's fit too (:func:`kcpstream.engine.fitting.still_fits`), or None.
    ``twin``: the fit of the second map of a cycle's windows
    (:data:`kcpstream.engine.fitting.TWIN_FIT`), which no ``features=`` finds."""
    layout = stored_layout(signal)
    if st.checkpoint is None or not isinstance(features, str) or layout is None:
        return None
    if (features == TWIN_FIT) != twin:
        return None
    lineage, units = layout
    for data, old_step, old in checkpoint.stored_fits(st.checkpoint, lineage):
        try:
            record = FitRecord.from_dict(data)
        except (TypeError, KeyError, ValueError):  # another layout: not a record
            continue
        changed = units.changed(old)
        if old_step == units.step and still_fits(
            record, features, signal.n, signal.d, st.sample_size, seed_of(st.seed), changed
        ):
            return record
    return None


def stored_layout(signal: Signal) -> tuple[str, Units] | None:
    """``(lineage, units)`` of a signal read directly from one stored array
    that keeps versions, or of the valid samples of one
    (:attr:`kcpstream.inputs.provenance.Origin.lineage`, and its runs of samples
    with their objects' versions, :class:`~kcpstream.inputs.provenance.Units`),
    or None: no later version of it can be told apart from another input."""
    origin = signal.origin
    lineage = None if origin is None else origin.lineage
    if lineage is None:
        return None
    units = origin.units
    return None if units is None else (lineage, units)


def open_checkpoint(job: Job, path, tile: int) -> None:
    """The job's statistics from the checkpoint at ``path`` when it holds them for
    this very input, or what an earlier version of the input left (``job.stored.reuse``)."""
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
    job.stored.key = checkpoint.fingerprint(
        identity, job.signal.source, job.fmap.to_json(), B, _tile_key(B, tile), chunk
    )
    found = checkpoint.load(path, job.stored.key, job.min_size, job.signal.n, B)
    if isinstance(found, checkpoint.Damaged):
        job.stored.damaged = True
    elif found is not None:
        job.stats, job.search.known = found.stats, found.known
        job.stored.tail = _tail_of(found.attrs)  # written again with the group
        job.stored.like = (job.stored.key, job.stats.prefix, found.attrs.get("checksums"))
        job.reads.loaded = True
        job.stored.loaded = (found.attrs, _held(job))
        _learn_positions(job, found.attrs, [])
        # the key holds for both searches: search as the stored statistics allow
        job.in_memory = job.stats.block_size == 1
    # a series searched in memory has statistics of one feature vector a block,
    # those of its data pass to the bit: kept, they are searched on the block grid
    if not job.reads.loaded and (not job.in_memory or job.block_size == 1):
        _find_reuse(job, path, tile)
        if job.stored.reuse is not None:
            job.in_memory = False


def _tile_key(block_size: int, tile: int) -> int | None:
    """``tile`` where the statistics depend on it: blocks longer than a tile
    merge their sums of squares from its pieces (one rounding apart for
    another tile); None where they do not."""
    return tile if block_size > tile else None


def _find_reuse(job: Job, path, tile: int) -> None:
    """Keep the statistics of an earlier version of the same stored array
    (appended to, or rewritten in place) where its samples did not change:
    ``job.stored.reuse`` (see :mod:`kcpstream.persist.reuse`)."""
    layout = stored_layout(job.signal)
    if layout is None:
        return
    lineage, units = layout
    base = checkpoint.load_base(path, lineage, job.fmap.to_json(), job.block_size, job.min_size)
    if base is None:
        return
    if base.key == job.stored.key:  # this very input's group, found damaged: recomputed whole
        return
    job.stored.like = (base.key, base.stats.prefix, base.attrs.get("checksums"))
    job.stored.base_known = base.known
    changed = units.changed(base.slabs)
    if base.attrs.get("slab_step") == units.step:
        _learn_positions(job, base.attrs, changed)
    # where the segments that end at the series' end split before it grew
    job.search.hints = {
        seg.start: seg
        for seg in base.known.values()
        if seg.end == base.stats.n and seg.exact and seg.split >= 0
    }
    # a block cut by a chunk boundary sums its squared norms in two parts, one
    # rounding apart from a block read whole: the same chunking, the same bits
    attrs = base.attrs
    if attrs.get("slab_step") != units.step or attrs.get("pass_chunk") != _pass_chunk(job.signal):
        return
    if attrs.get("tile_key") != _tile_key(job.block_size, tile):  # (its blocks' bits)
        return
    # an earlier version under the same settings: replaced by this run's statistics
    # once they are written (a group of other settings stays: it serves them)
    job.stored.base_key = base.key
    job.stored.base_tail = _tail_of(attrs)
    job.stored.reuse = plan_reuse(
        base.stats,
        job.signal.n,
        job.signal.chunk_starts,
        changed,
        job.stored.base_tail,
    )
    if job.stored.reuse is not None:  # samples refinement scanned that this version still holds
        for (a, b), x in job.stored.reuse.still_held(base.kept).items():
            job.cache.add_piece(a, b, x)


def _learn_positions(job: Job, attrs: dict, changed: list[tuple[int, int]]) -> None:
    """Give the job's map of valid positions (a series with gaps) the input
    indices a checkpoint kept for positions outside ``changed``: their chunk
    holds the same samples, after as many valid samples as then, so a result
    there is mapped back without reading the chunk again."""
    valid, pairs = job.signal.valid, attrs.get("mapped")
    if valid is None or not isinstance(pairs, list):
        return
    try:
        kept = [(int(p), int(i)) for p, i in pairs]
    except (TypeError, ValueError):  # another layout: mapped again by reading
        return
    valid.learn([(p, i) for p, i in kept if not any(a <= p < b for a, b in changed)])


def kept_tail(job: Job) -> tuple[int, int, str] | None:
    """The base's digest of its last chunk when this version has the same last
    chunk, not read again (a rewrite elsewhere): still its digest."""
    reuse = job.stored.reuse
    tail = job.stored.base_tail
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
    """The data pass's chunk length (all chunks but the last have it); for
    the signal of a series' valid samples, the series' (its chunks are those
    less their gaps, and its :class:`~kcpstream.inputs.provenance.Units`
    change where the valid samples of one do)."""
    compacted = None if signal.origin is None else signal.origin.compacted
    if compacted is not None:
        starts = compacted[1]
        return int(starts[1] - starts[0])
    return int(signal.data.chunks[0][0])


#: Groups a batch's checkpoint writes at once.
SAVE_THREADS = 8


def save_checkpoints(jobs: list[Job], path, tile: int) -> None:
    """Each job's statistics and exact splits, under its key; the earlier version's
    statistics it was updated from removed.  A group loaded and used as it was
    is left as it is (:func:`_as_loaded`)."""
    checkpoint.tidy(path)  # (whether or not a group is written)
    unchanged = 0
    writes: list[tuple[Job, dict]] = []
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
        if job.stored.tail is not None and "lineage" in attrs:  # what the next append's pass checks
            attrs["tail"] = list(job.stored.tail)
        if job.stored.fit is not None and "lineage" in attrs:  # what a later version's fit may keep
            attrs["fit"] = job.stored.fit.to_dict()
        if job.signal.valid is not None:  # the positions its results mapped back
            attrs["mapped"] = job.signal.valid.mapped()
        if _as_loaded(job, attrs):
            checkpoint.touch(path, job.stored.key)
            unchanged += 1
            continue
        writes.append((job, attrs))

    def write(item: tuple[Job, dict]) -> None:
        job, attrs = item
        kept = _kept_samples(job)
        checkpoint.save(
            path, job.stored.key, job.stats, job.search.known, attrs, kept, like=job.stored.like
        )

    # each save ends in flushes to disk, which wait on the device: a batch's
    # groups are written several at once (``benchmarks/results/throughput.md``)
    if len(writes) > 1:
        with ThreadPoolExecutor(min(SAVE_THREADS, len(writes))) as pool:
            list(pool.map(write, writes))
    elif writes:
        write(writes[0])
    saved = {job.stored.key for job, _ in writes}
    for job, attrs in writes:
        base = job.stored.base_key
        if base is not None and base not in saved:
            # the earlier version's statistics describe samples the store no longer holds
            checkpoint.remove(path, base)
        if "lineage" in attrs:  # groups of an earlier layout: never used again
            checkpoint.remove_outdated(path, attrs["lineage"])
    kept = f" ({unchanged} loaded and left as they were)" if unchanged else ""
    note("checkpoint: statistics of %d series written to %s%s", len(jobs) - unchanged, path, kept)


def _held(job: Job) -> tuple[int, int]:
    """How much a job's checkpoint would hold: its exact segments and the
    exact splits inside blocks of its statistics.  Both only grow during a
    call (a segment made exact stays so, a split once added is kept), so
    the same counts are the same content."""
    return sum(seg.exact for seg in job.search.known.values()), job.stats.n_points


def _as_loaded(job: Job, attrs: dict) -> bool:
    """Whether the job's group, loaded whole, would be written again as it is:
    the search evaluated no segment and refined no split it did not hold, and
    its attributes are those stored.  It is then left as it is: writing a
    thousand unchanged groups again cost more than the call without a
    checkpoint (``benchmarks/results/throughput.md``), and would drop the
    samples it keeps for the next version (this run read none)."""
    if job.stored.loaded is None or job.stored.reuse is not None:
        return False
    stored, held = job.stored.loaded
    if _held(job) != held:
        return False
    # (the versions of its slabs, stored as arrays, are those of the objects the
    # key's identity hashed: the same key, the same slabs)
    written = checkpoint.as_written({k: v for k, v in attrs.items() if k != "slabs"})
    return all(stored.get(k) == v for k, v in written.items())


def _kept_samples(job: Job) -> dict:
    """The samples of :func:`~kcpstream.persist.reuse.kept_pieces` that the job's cache
    holds (none for a series searched in memory, or with no lineage: no later
    version can use them)."""
    if job.in_memory or stored_layout(job.signal) is None:
        return {}
    pieces = (
        (a, b, job.cache.get(a, b))
        for a, b in kept_pieces(job.stats, job.search.known, job.min_size)
    )
    return {(a, b): x for a, b, x in pieces if x is not None}


def checkpoint_state(job: Job, st: Settings) -> str:
    """``diagnostics.checkpoint`` (see :class:`~kcpstream.result.Diagnostics`)."""
    if st.checkpoint is None:
        return ""
    if job.stored.reuse is not None:
        return "updated"
    return "loaded" if job.reads.loaded else "recomputed" if job.stored.damaged else "written"


def _versions_of(signal: Signal) -> dict:
    """What a later run needs to reuse these statistics for a changed version
    of the same stored array (:func:`_find_reuse`): nothing when it cannot."""
    layout = stored_layout(signal)
    if layout is None:
        return {}
    lineage, units = layout
    out = {
        "lineage": lineage,
        "slab_step": units.step,
        "pass_chunk": _pass_chunk(signal),
        "slabs": units.versions,  # stored as checksummed arrays (checkpoint.save)
    }
    windows = signal.origin.windows
    if windows is not None:  # the series' fit is found from the series (stored_fit)
        out["series_lineage"] = windows[0].lineage
    return out
