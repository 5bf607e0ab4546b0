"""The second shape part ``features="auto"`` tries on windows of a cycle.

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
"""

from __future__ import annotations

import dataclasses

from kcpstream.engine.fitting import TWIN_FIT, FitRecord, fit_reads, fitted_map, seed_of
from kcpstream.engine.headroom import check_before_pass
from kcpstream.engine.plan import Job, Settings, searched_in_memory
from kcpstream.engine.stored import open_checkpoint, stored_fit
from kcpstream.features import DEFAULT_FEATURES, FeatureMap, Temporal
from kcpstream.passes.cache import SampleCache
from kcpstream.result import DataReads, Segmentation
from kcpstream.selection.choose import Rule

__all__ = ["SHAPE", "answer_of_pair", "fundamental_cycles", "halved", "shape_twin"]

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
    twin.auto.paired = job.auto.paired = True
    if st.checkpoint is not None:  # its statistics kept under a key of their own
        open_checkpoint(twin, st.checkpoint, st.tile)
    return twin


def fundamental_cycles(window: int, period: float) -> int:
    """Cycles of ``period`` samples in a window of ``window`` (whole cycles, as
    ``features="auto"`` takes them), within what ``Temporal`` accepts."""
    return min(max(1, round(window / period)), window // 2)


def halved(rule: Rule) -> Rule:
    """The test's rule at half its level (each map of a pair)."""
    return dataclasses.replace(rule, alpha=rule.alpha / 2.0)


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
