"""Binary segmentation of a series whose features are all in memory, in one call.

:func:`~kcpstream.search.binseg.binseg_steps` finds each segment's best split
from the block statistics and the pieces whose bounds reach it, which it asks
to be read and scanned; it replays the sequential order of splits round after
round until every segment it takes is exact.  When the features of every
sample are at hand, each of those scans can be made at once: the whole search
is one compiled loop, each segment made exact as soon as it is formed, with
no rounds and no replay.

It computes what the block-grid search computes, with its kernels:
:func:`~kcpstream._kernels.blockstats.segment_pending` for the boundaries and
the pieces that could beat the best of them, and
:func:`~kcpstream._kernels.blockstats.scan_piece` for each such piece, in
the order of their bounds until the best split found rules out the rest.
The best split of a segment is exact whichever pieces are scanned (a bound
only spares a scan), so the splits, their order and their gains are those of
:func:`~kcpstream.search.binseg.binseg_steps`, bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from kcpstream._kernels.blockstats import piece_stats, scan_run, segment_pending
from kcpstream._kernels.dense import next_split
from kcpstream._kernels.featurize import rff_tile


@njit(nogil=True, cache=True)
def _ensure(Z, block_size, a, e, lazy, counts):
    """Features of every block of ``[a, e)`` in ``Z``, from ``lazy = (have, x,
    center, weights, amplitudes)``: ``have`` marks the blocks whose features
    ``Z`` holds; a block it lacks is featurized from the samples ``x`` by
    :func:`~kcpstream._kernels.featurize.rff_tile` (a Fourier map's features,
    the same bits wherever a sample sits in a tile).  ``counts[3]`` adds the
    samples featurized.

    Each run of blocks it lacks is featurized into a contiguous buffer and
    copied: written in place, a block is a strided slice of ``Z``, on which
    the tile's loops do not vectorize (``benchmarks/results/throughput.md``)."""
    have, x, center, weights, amplitudes = lazy
    n = Z.shape[1]
    b, last = a // block_size, (e - 1) // block_size
    while b <= last:
        if have[b]:
            b += 1
            continue
        first = b
        while b <= last and not have[b]:
            have[b] = True
            b += 1
        lo, hi = first * block_size, min(n, b * block_size)
        buf = np.empty((Z.shape[0], hi - lo, Z.shape[2]), np.float32)
        rff_tile(x[lo:hi], center, weights, amplitudes, buf)
        Z[:, lo:hi, :] = buf
        counts[3] += hi - lo


@njit(nogil=True, cache=True)
def _piece_bridge(bridge, block_size, n, a, e):
    """A whole block's bridge bound; ``inf`` for a piece a split cut from a
    block (its bound then comes from the distance to the segment's ends only,
    and it is scanned more often, never wrongly skipped)."""
    if a % block_size == 0 and e == min(a + block_size, n):
        return bridge[a // block_size]
    return np.inf


@njit(nogil=True, cache=True)
def segment_best(
    Z, scale, prefix, bridge, block_size, n, start, end, s_start, s_end, min_size, qmax2,
    slack_scale, most, lazy, counts,
):  # fmt: skip
    """The exact best split ``(gain, position)`` of ``[start, end)`` (``-1.0, -1``
    when it has no admissible split), from the segment's exact sums at its
    ends ``s_start``, ``s_end``: its boundaries' gains and bounds as
    :func:`~kcpstream.search.binseg.bound_segment` computes them, then its
    pending pieces scanned from ``Z`` in decreasing order of their bounds
    while a bound reaches the best gain (``>=``: a tie at a smaller position
    must be found).  ``counts`` adds the pieces and samples scanned (and
    ``lazy``, see :func:`_ensure`, featurizes what ``Z`` lacks)."""
    n_seg = end - start
    if n_seg < 2 * min_size:
        return -1.0, -1
    p = prefix.shape[0]
    j0 = start // block_size + 1
    j1 = (end - 1) // block_size
    if j0 > j1:
        head, tail = _piece_bridge(bridge, block_size, n, start, end), 0.0
    else:
        head = _piece_bridge(bridge, block_size, n, start, j0 * block_size)
        tail = _piece_bridge(bridge, block_size, n, j1 * block_size, end)
    max_norm = math.sqrt(qmax2)
    gain, split, _, firsts, ends, grids, bounds = segment_pending(
        prefix, bridge, block_size, j0, j1, start, end, s_start, s_end, head, tail, min_size,
        max_norm, n_seg * math.sqrt(qmax2 * p) * 2.0**-48, slack_scale,
        n_seg * p * qmax2 * 2.0**-44, most,
    )  # fmt: skip
    if firsts.shape[0] == 0:
        return gain, split
    total = s_end - s_start
    left = np.empty(p, np.int64)
    for r in np.argsort(-bounds, kind="mergesort"):
        if split >= 0 and bounds[r] < gain:
            break  # this bound and every later one are below the best split found
        a, e = firsts[r], ends[r]
        if a == start:
            left[:] = 0
        else:  # a grid point
            for f in range(p):
                left[f] = prefix[f, a // block_size] - s_start[f]
        _ensure(Z, block_size, a, e, lazy, counts)
        g, pos = scan_run(Z, a, e, scale, a, start, end, left, total, min_size, grids[r])
        counts[1] += (e - 1) // block_size - a // block_size + 1
        counts[2] += e - a
        if pos >= 0 and (split < 0 or g > gain or (g == gain and pos < split)):
            gain, split = g, pos
    return gain, split


@njit(nogil=True, cache=True)
def _segment_halves(Z, scale, block_size, a, e, c, lazy, counts, every, cut, row):
    """The halves of the piece of ``[a, e)`` holding its split ``c`` (its block,
    cut at the segment's ends) into ``row = (S, Q, M2, R, cnt)`` (rows of two), as
    :func:`held_binseg` makes them for a split it makes; nothing for a split
    on the grid or none."""
    if c < 0 or c % block_size == 0:
        return
    _ensure(Z, block_size, c - 1, c, lazy, counts)
    lo, hi = max(a, c - c % block_size), min(e, c - c % block_size + block_size)
    cut[0], cut[1], cut[2] = 0, c - lo, hi - lo
    S, Q, M2, R, cnt = row
    piece_stats(Z[:, lo:hi, :], scale, cut, S, Q, M2, R, cnt, -1.0, every)


@njit(nogil=True, cache=True)
def held_binseg(
    Z,
    scale,
    prefix,
    bridge,
    block_size,
    max_splits,
    min_size,
    qmax2,
    slack,
    most,
    lazy,
    every,
    every_segment=False,
):
    """Sequential binary segmentation of a series of ``Z.shape[1]`` samples
    over its block statistics (``prefix``, ``bridge``), every piece scanned
    from ``Z``: split the segment of the largest gain (ties: the smallest
    position), at most ``max_splits`` times, while some segment has an
    admissible split.

    Returns ``(starts, ends, splits, gains, counts, halves)``: the splits in
    the order made; the segments evaluated, pieces scanned, samples scanned
    and samples featurized; and ``halves = (S, Q, M2, R, count)``, for each
    split off the block grid, the statistics of the two halves it leaves of
    its piece (its block cut at its segment's ends), as
    :func:`~kcpstream.search.stats.split_piece` makes them from ``Z`` with a
    bridge evaluated every ``every`` samples (``count`` 0 for a split on the
    grid).  With ``lazy`` (:func:`_ensure`) a block is
    featurized when it is first scanned: a long series' search featurizes
    the blocks it scans, not all of them; with every block marked in
    ``lazy[0]``, ``Z`` holds every sample's features and the rest of
    ``lazy`` is not used.

    With ``every_segment``, also ``segments = (bounds, gains, halves)``: every
    segment evaluated (start, end and best split; ``-1`` when it has none),
    its gain, and the halves of its best split's piece as above (count 0 on
    the grid), what the block-grid search keeps of the segments it made
    exact (a checkpoint stores them); empty arrays without it.
    """
    n = Z.shape[1]
    p = prefix.shape[0]
    cap = 2 * max_splits + 1
    seg = np.empty((cap, 3), np.int64)  # start, end, split
    seg_gain = np.empty(cap)
    sums = np.empty((cap, 2, p), np.int64)  # exact sums at each segment's start and end
    open_ = np.zeros(cap, np.bool_)
    out = np.empty((max_splits, 3), np.int64)
    out_gain = np.empty(max_splits)
    half_S = np.zeros((max_splits, 2, p), np.int64)
    half_Q = np.zeros((max_splits, 2))
    half_M2 = np.zeros((max_splits, 2))
    half_R = np.zeros((max_splits, 2))
    half_count = np.zeros((max_splits, 2), np.int64)
    cut = np.empty(3, np.int64)
    counts = np.zeros(4, np.int64)
    rows = cap if every_segment else 0
    seg_S = np.zeros((rows, 2, p), np.int64)
    seg_Q = np.zeros((rows, 2))
    seg_M2 = np.zeros((rows, 2))
    seg_R = np.zeros((rows, 2))
    seg_count = np.zeros((rows, 2), np.int64)
    sums[0, 0, :] = 0
    sums[0, 1, :] = prefix[:, prefix.shape[1] - 1]
    seg[0, 0], seg[0, 1] = 0, n
    seg_gain[0], seg[0, 2] = segment_best(
        Z, scale, prefix, bridge, block_size, n, 0, n, sums[0, 0], sums[0, 1], min_size, qmax2,
        slack, most, lazy, counts,
    )  # fmt: skip
    open_[0] = True
    if every_segment:
        row = (seg_S[0], seg_Q[0], seg_M2[0], seg_R[0], seg_count[0])
        _segment_halves(Z, scale, block_size, 0, n, seg[0, 2], lazy, counts, every, cut, row)
    count, made = 1, 0
    while made < max_splits:
        best = next_split(open_, seg_gain, seg[:, 2], count)
        if best < 0:
            break
        open_[best] = False
        a, e, c = seg[best, 0], seg[best, 1], seg[best, 2]
        out[made, 0], out[made, 1], out[made, 2] = a, e, c
        out_gain[made] = seg_gain[best]
        at_c = np.empty(p, np.int64)  # the exact sums of the samples before c
        if c % block_size:
            # the halves of its piece: the block holding it, cut at the segment's ends
            row = (half_S[made], half_Q[made], half_M2[made], half_R[made], half_count[made])
            _segment_halves(Z, scale, block_size, a, e, c, lazy, counts, every, cut, row)
            # the sums at the piece's start (the segment's, or a grid column) and
            # its first half (integers: exact)
            lo = max(a, c - c % block_size)
            at_lo = sums[best, 0] if lo == a else prefix[:, lo // block_size]
            at_c[:] = at_lo + half_S[made, 0]
        else:  # a grid point (a split lies strictly inside its segment: never n)
            at_c[:] = prefix[:, c // block_size]
        made += 1
        for lo, hi in ((a, c), (c, e)):
            seg[count, 0], seg[count, 1] = lo, hi
            sums[count, 0] = sums[best, 0] if lo == a else at_c
            sums[count, 1] = at_c if lo == a else sums[best, 1]
            seg_gain[count], seg[count, 2] = segment_best(
                Z, scale, prefix, bridge, block_size, n, lo, hi, sums[count, 0],
                sums[count, 1], min_size, qmax2, slack, most, lazy, counts,
            )  # fmt: skip
            if every_segment:
                row = (seg_S[count], seg_Q[count], seg_M2[count], seg_R[count], seg_count[count])
                _segment_halves(
                    Z, scale, block_size, lo, hi, seg[count, 2], lazy, counts, every, cut, row
                )
            open_[count] = True
            count += 1
    counts[0] = count
    halves = (half_S[:made], half_Q[:made], half_M2[:made], half_R[:made], half_count[:made])
    kept = min(count, rows)
    segments = (
        seg[:kept],
        seg_gain[:kept],
        (seg_S[:kept], seg_Q[:kept], seg_M2[:kept], seg_R[:kept], seg_count[:kept]),
    )
    return out[:made, 0], out[:made, 1], out[:made, 2], out_gain[:made], counts, halves, segments
