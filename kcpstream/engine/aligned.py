"""The second shape part ``features="auto"`` tries on windows of a cycle.

A series with a cycle is segmented as windows of whole cycles
(:mod:`kcpstream.engine.autofeatures`).  Two window maps see different
changes there: :class:`~kcpstream.features.Temporal`'s default shape part is
invariant to where a waveform sits in its window, which keeps the test's
noise low on a cycle whose phase wanders (a heart rate that varies); its
``shape="aligned"`` part is the window as a vector, which sees a waveform
that changes at one phase of the cycle (a load curve whose peak moves, one
class of recorded instances after another) and which the invariant part
cannot tell apart at all.  Neither is best on every series
(``benchmarks/results/real.md``).

So both are segmented -- two data passes over the windows, two searches --
and each split is tested at half the call's level ``alpha``: a series
without change gets a change-point from either with probability at most
``alpha`` in all (Bonferroni), as from one map at ``alpha``.  The answer is
the one with more change-points (the invariant one on a tie): each set is
significant at that level, and the larger one holds more of the changes.
Only the test's rule (``pen="auto"``, the default) tries both; ``n_bkps``
and a penalty keep the invariant map.  So does a series with gaps: its valid
samples' windows change phase at every gap that is no whole number of
cycles, which the aligned part would take for a change.
"""

from __future__ import annotations

import dataclasses

from kcpstream.engine.fitting import fitted_map
from kcpstream.engine.headroom import check_before_pass
from kcpstream.engine.plan import Job, Settings, searched_in_memory
from kcpstream.engine.stored import open_checkpoint
from kcpstream.features import DEFAULT_FEATURES, Temporal
from kcpstream.passes.cache import SampleCache
from kcpstream.result import DataReads, Segmentation
from kcpstream.selection.choose import Rule

__all__ = ["aligned_twin", "halved", "answer_of_pair"]


def aligned_twin(job: Job, st: Settings, cache: SampleCache) -> Job:
    """The job of ``job``'s windows with the aligned shape part, fitted on the
    same windows (read through ``cache``), on the same grid; both are marked
    ``paired`` (``job.auto``)."""
    fmap = Temporal(
        DEFAULT_FEATURES,
        window=job.window,
        seed=0 if st.seed is None else st.seed,
        shape="aligned",
    )
    fitted = fitted_map(fmap, job.signal, None, cache, st.sample_size, True).fmap
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
    twin.reads.fit_chunks = len(cache.fit_chunks)
    twin.auto.paired = job.auto.paired = True
    if st.checkpoint is not None:  # its statistics kept under a key of their own
        open_checkpoint(twin, st.checkpoint, st.tile)
    return twin


def halved(rule: Rule) -> Rule:
    """The test's rule at half its level (each map of a pair)."""
    return dataclasses.replace(rule, alpha=rule.alpha / 2.0)


def answer_of_pair(invariant: Segmentation, aligned: Segmentation) -> Segmentation:
    """The answer of a pair of segmentations of the same windows: the one with
    more change-points (``invariant`` on a tie), with ``params["shape"]``
    saying which and the reads of both in its diagnostics (its checkpoint's
    state is the invariant job's)."""
    chosen = aligned if aligned.n_changepoints > invariant.n_changepoints else invariant
    a, b = invariant.diagnostics.reads, aligned.diagnostics.reads
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
    shape = "aligned" if chosen is aligned else "invariant"
    params = {**chosen.params, "shape": shape}
    return dataclasses.replace(chosen, diagnostics=diagnostics, params=params)


def _spec(fmap) -> str:
    """A feature map as the call that makes it (its parameters, not its fit)."""
    args = ", ".join(f"{k}={getattr(fmap, k, None)!r}" for k in type(fmap)._param_names)
    return f"{type(fmap).__name__}({args})"
