"""Binary segmentation of a series whose features are all in memory.

:func:`held_binseg_steps` gives what :func:`~kcpstream.search.binseg.binseg_steps`
gives on the same block statistics (the same splits, order and gains, and the
same exact sums at each split), from one compiled call
(:func:`~kcpstream._kernels.held.held_binseg`) instead of rounds of scans and
their replay: a short series' search is then not its Python bookkeeping, and
the searches of a batch's series run side by side in threads.
"""

from __future__ import annotations

import numpy as np

from kcpstream._kernels.held import held_binseg
from kcpstream.search.binseg import (
    _REL_SLACK,
    MAX_RUN_SAMPLES,
    SearchLog,
    SegmentSplit,
    Steps,
    check_enough_splits,
)
from kcpstream.search.stats import BlockStats, PieceStats


def held_binseg_steps(
    stats: BlockStats,
    Z: np.ndarray,
    every: int,
    *,
    min_size: int,
    n_bkps: int,
    log: SearchLog | None = None,
    allow_fewer: bool = False,
    lazy: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
    known: dict | None = None,
) -> Steps:
    """:func:`~kcpstream.search.binseg.binseg_steps` with ``n_bkps`` over ``stats``,
    whose series' raw features are ``Z`` (k, n, m): a generator that asks for
    no scan and returns the splits in the order made.

    With ``lazy``, ``(x, center, weights, amplitudes)`` of a Fourier map
    (:func:`~kcpstream._kernels.featurize.rff_tile`'s arguments, ``x`` the
    samples as float64 (n, d)), ``Z`` may hold anything on entry: a block is
    featurized into it when the search first scans it.

    Each split inside a block is added to ``stats`` (:meth:`BlockStats.add_split`,
    its piece's halves summed with ``every`` samples between bridge
    evaluations) as the block-grid search adds it, so later queries at the
    splits (costs, the choice, the dynamic programme) are exact and the same.

    With ``known`` (a dict by ``(start, end)``), every segment the search
    evaluated is put in it, exact, with its best split's halves added to
    ``stats`` as the block-grid search adds those of the segments it makes
    exact: what a checkpoint keeps for a later, deeper search (which then
    splits them as the grid's search would, from the same statistics).
    """
    log = log if log is not None else SearchLog()
    B = stats.block_size
    scale = float(2.0**stats.quantum_exponent)
    qmax2 = max(stats.global_max_norm2, 1.0)
    if lazy is None:  # every block's features are in Z
        unused = np.zeros((1, 1)), np.zeros(1), np.zeros((1, 1), np.float32)
        lazy_blocks = (np.ones(stats.n_blocks, np.bool_), *unused, np.zeros(1, np.float32))
    else:
        lazy_blocks = (np.zeros(stats.n_blocks, np.bool_), *lazy)
    starts, ends, splits, gains, counts, halves, segments = held_binseg(
        Z,
        scale,
        stats.prefix,
        stats.bridge,
        B,
        n_bkps,
        min_size,
        qmax2,
        1 + _REL_SLACK,
        max(1, MAX_RUN_SAMPLES // B),
        lazy_blocks,
        every,
        known is not None,
    )
    log.segments_evaluated += int(counts[0])
    log.pieces_scanned += int(counts[1])
    log.samples_scanned += int(counts[2])
    log.samples_featurized += Z.shape[1] if lazy is None else int(counts[3])
    log.held_searches += 1
    made = zip(starts.tolist(), ends.tolist(), splits.tolist(), gains.tolist(), strict=True)
    if known is not None:  # (every segment recorded, these among them)
        _record(stats, segments, known)
        order = [known[(a, e)] for a, e, _, _ in made]
    else:
        order = [_exact(stats, a, e, c, g, halves, k) for k, (a, e, c, g) in enumerate(made)]
    check_enough_splits(len(order), n_bkps, min_size, allow_fewer)
    return order
    yield  # a generator that asks for no scan  # pragma: no cover


def _exact(stats: BlockStats, a: int, e: int, c: int, g: float, halves, k: int) -> SegmentSplit:
    """The exact segment ``[a, e)`` with its best split ``c`` of gain ``g``; a
    split inside a block gets its piece (its block, cut at the segment's
    ends) and the halves the kernel summed of it (row ``k`` of ``halves``,
    split_piece's), added to ``stats``."""
    seg = SegmentSplit(a, e, g, c, g)
    if c >= 0 and not stats.is_grid_point(c):
        B = stats.block_size
        S, Q, M2, R, count = halves
        seg.piece = (max(a, c - c % B), min(e, c - c % B + B))
        seg.left, seg.right = (
            PieceStats(int(count[k, i]), S[k, i], float(Q[k, i]), float(M2[k, i]), float(R[k, i]))
            for i in (0, 1)
        )
        stats.add_split(c, *seg.piece, seg.left, seg.right)
    return seg


def _record(stats: BlockStats, segments, known: dict) -> None:
    """Every segment :func:`~kcpstream._kernels.held.held_binseg` evaluated,
    exact, into ``known`` (:func:`_exact`)."""
    bounds, gains, halves = segments
    for i, ((a, e, c), g) in enumerate(zip(bounds.tolist(), gains.tolist(), strict=True)):
        known[(a, e)] = _exact(stats, a, e, c, g, halves, i)


#: Most raw features (``n`` samples times ``p`` features, float32: 64 MiB) a
#: series' search computes and holds at once to be searched in one call
#: (:func:`held_binseg_steps`); a longer series is searched on its block grid,
#: reading only the pieces it needs.
HELD_MAX_VALUES = 2**24

#: :data:`HELD_MAX_VALUES` for a Fourier map, whose features are made a block
#: at a time as the search scans it (``lazy``): the buffer is reserved whole
#: (256 MiB) but holds only the blocks scanned, about a quarter of a series
#: of 10^6 samples' (``benchmarks/results/throughput.md``).
HELD_MAX_VALUES_FOURIER = 2**26

#: Most bytes of a series' samples (as float64) such a search holds: its
#: samples in one array, from the sample cache or read again.
HELD_MAX_SAMPLE_BYTES = 2**26
