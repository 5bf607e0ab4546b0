"""Statistics of a changed archive from those of its previous version.

An archive grows (chunks appended) and is rewritten in place (late data,
corrections).  A checkpoint of the previous version keeps the block
statistics and, for each run of stored objects along time (a *slab*: every
chunk holding those rows, all channels), a hash of their versions
(:attr:`kcpstream.inputs.provenance.Origin.units`).  A block whose samples
lie in slabs with the same versions, and that spans the same samples as
before, holds the same samples and, for the same fitted feature map and
block grid, the same statistics: the sums are exact integers and every block
is summed alike whatever the chunking.  Only the chunks holding the other
blocks are read; the result is bit-identical to a data pass from scratch.

The checkpoint also keeps the samples refinement scanned for the segments
that end at the series' last sample (:func:`kept_pieces`): an append makes
those segments longer, and their best splits are scanned again from these
samples where their blocks are kept (:meth:`Reuse.still_held`), not read
from the store.

I/O-free: it plans and keeps arrays; :func:`kcpstream.passes.data.data_passes`
reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kcpstream.search.binseg import bound_segment
from kcpstream.search.stats import BlockStats


@dataclass(frozen=True)
class Reuse:
    """What a data pass keeps from an earlier version's statistics.

    Attributes
    ----------
    base : BlockStats
        The earlier version's statistics (same block size and feature map).
    keep : numpy.ndarray of bool
        Per block of the new grid: taken from ``base``.
    chunks : numpy.ndarray of int
        Indices of the signal's chunks to read: every chunk holding a block
        not kept.
    n_chunks : int
        Chunks of the signal.
    head : tuple of (int, int, str) or None
        ``(start, end, digest)`` of the samples the base held in what was its
        last chunk, one of ``chunks`` (an append rewrote it): the data pass
        keeps that chunk's blocks inside them when the samples it reads there
        have the same digest (:func:`kcpstream.passes.data.head_skip`).
    """

    base: BlockStats
    keep: np.ndarray
    chunks: np.ndarray
    n_chunks: int
    head: tuple[int, int, str] | None = None

    @property
    def chunks_reused(self) -> int:
        return self.n_chunks - len(self.chunks)

    @property
    def prefix_end(self) -> int:
        """Samples before the first block not kept: every sum from the start to
        a position before it is the base's."""
        redo = np.flatnonzero(~self.keep)
        B = self.base.block_size
        return int(redo[0]) * B if len(redo) else min(self.base.n, len(self.keep) * B)

    def carry(self, stats: BlockStats, known: dict) -> dict:
        """Give ``stats`` (the new version's) the exact splits the base had
        refined before :attr:`prefix_end`; returns the segments of ``known``
        (the base's exact segments) that end there or before: their data, and
        so their best splits, are the same."""
        end = min(self.prefix_end, stats.n)  # (a shrunk series ends before the base)
        for pos, sums in self.base._points.items():
            if pos < end:
                stats._points[pos] = sums
        for (a, b), piece in self.base._pieces.items():
            if b <= end:
                stats._pieces[(a, b)] = piece
        return {key: seg for key, seg in known.items() if key[1] <= end}

    def still_held(self, kept: dict[tuple[int, int], np.ndarray]) -> dict:
        """The pieces of ``kept`` (samples of the base's version, by ``[a, b)``)
        whose blocks are all kept: the same samples in this version."""
        B = self.base.block_size
        out = {}
        for (a, b), x in kept.items():
            blocks = self.keep[a // B : (b - 1) // B + 1]
            if len(blocks) == (b - 1) // B + 1 - a // B and blocks.all():
                out[(a, b)] = x
        return out


def kept_pieces(stats: BlockStats, known: dict, min_size: int) -> list[tuple[int, int]]:
    """The pieces ``[a, b)`` refinement scanned for the exact segments of
    ``known`` that end at the series' last sample, or at the split of one of
    those.

    An append makes each segment ending at the last sample a new, longer
    segment with the same start, whose best split is almost always where it
    was: keeping these samples with the statistics lets the next version
    scan them again without reading the store.  When that split does move
    (the last regime grew, and the best position of its boundary moved by a
    few samples), the segments ending at it are new too, and their best
    splits are where they were: their pieces are kept as well.  They are the
    pieces the segment's bounds could not rule out
    (:func:`~kcpstream.search.binseg.bound_segment`: those refinement scanned, or
    recomputed for a segment refined by an earlier run; the same statistics
    give the same pieces).
    """
    exact = [seg for seg in known.values() if seg.exact and seg.split >= 0]
    ends = {stats.n} | {seg.split for seg in exact if seg.end == stats.n}
    ranges: list[tuple[int, int]] = []
    for seg in exact:
        if seg.end not in ends:
            continue
        if seg.scanned is not None:
            ranges.extend(seg.scanned)
            continue
        for req in bound_segment(stats, seg.start, seg.end, min_size).pending:
            ranges.append((req.piece_start, req.piece_end))
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):  # overlapping ones (a run and a piece of it) kept once
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def plan_reuse(
    base: BlockStats,
    n: int,
    starts: np.ndarray,
    changed: list[tuple[int, int]],
    tail: tuple[int, int, str] | None = None,
) -> Reuse | None:
    """The blocks of a series of ``n`` samples (chunk starts ``starts``, on
    ``base``'s block grid) that ``base`` still holds, or None when none does.

    ``changed``: the samples ``[a, b)`` that may differ from the base's
    (:meth:`kcpstream.inputs.provenance.Units.changed`: the runs of stored
    objects whose versions changed).  A block is kept when it spans the same
    samples in both grids (not the last, partial block of either unless both
    have the same length) and none of its samples is in ``changed``.
    ``tail``: ``(start, end, digest)`` of the base's last chunk (its
    :attr:`kcpstream.passes.data.Passed.tail`); when that chunk is read again, its
    samples there are checked against it (:attr:`Reuse.head`).
    """
    B = base.block_size
    nb = -(-n // B)
    ends = np.arange(1, nb + 1, dtype=np.int64) * B
    keep = np.minimum(ends, n) == np.minimum(ends, base.n)
    for a, b in changed:
        a, b = max(a, 0), min(b, n)
        if a < b:
            keep[a // B : (b - 1) // B + 1] = False
    if not keep.any():
        return None
    redo = np.flatnonzero(~keep)
    lo = redo * B
    hi = np.minimum((redo + 1) * B, n)
    # the chunks that hold any sample of a block not kept
    first = np.searchsorted(starts, lo, side="right") - 1
    last = np.searchsorted(starts, hi - 1, side="right") - 1
    cover = np.zeros(len(starts), np.int64)
    np.add.at(cover, first, 1)
    np.add.at(cover, last + 1, -1)
    chunks = np.flatnonzero(np.cumsum(cover)[:-1] > 0)
    head = None
    if tail is not None:
        a, v, _ = tail
        i = int(np.searchsorted(starts, a))
        # the same chunk start, read again, holding at least what the base had there
        if i < len(starts) - 1 and starts[i] == a and v == base.n and starts[i + 1] >= v:
            head = tuple(tail) if i in set(chunks.tolist()) else None
    return Reuse(base, keep, chunks.astype(np.int64), len(starts) - 1, head)
