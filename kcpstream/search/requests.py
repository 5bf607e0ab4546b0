"""What a search asks the data for, and what it is told: the messages between
the I/O-free search (:mod:`~kcpstream.search.binseg`, :mod:`~kcpstream.search.dynp`)
and refinement's reads (:mod:`kcpstream.passes.scan`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kcpstream.search.stats import PieceStats


@dataclass(frozen=True)
class ScanRequest:
    """Scan every split strictly inside ``[piece_start, piece_end)`` of a segment."""

    segment: tuple[int, int]
    piece_start: int
    piece_end: int
    left_at_piece: np.ndarray  # exact sum of the segment's samples before piece_start
    total: np.ndarray  # exact sum of the segment
    #: 0: one piece; else a run of consecutive pieces of a block grid of this
    #: size, scanned strictly inside each piece (one request, not one per piece)
    grid: int = 0

    @property
    def pieces(self) -> int:
        """How many pieces the request scans."""
        return len(pieces_of(self))


@dataclass(frozen=True)
class ScanResult:
    """The best split ``pos`` (``-1``: none) of a scanned piece and its ``gain``;
    ``left``/``right`` are the statistics of the piece's two halves (given for
    the split that wins among the scanned pieces of its segment)."""

    request: ScanRequest
    gain: float
    pos: int
    left: PieceStats | None
    right: PieceStats | None

    @property
    def piece(self) -> tuple[int, int]:
        """The piece holding ``pos`` (of a run, the one of its grid), whose halves
        ``left`` and ``right`` are."""
        return piece_of(self.request, self.pos)


def pieces_of(req: ScanRequest) -> list[tuple[int, int]]:
    """The pieces a request scans: itself, or the pieces of its run."""
    if not req.grid:
        return [(req.piece_start, req.piece_end)]
    g = req.grid
    inner = range((req.piece_start // g + 1) * g, req.piece_end, g)
    edges = [req.piece_start, *inner, req.piece_end]
    return list(zip(edges[:-1], edges[1:], strict=True))


def piece_of(req: ScanRequest, pos: int) -> tuple[int, int]:
    if not req.grid or pos < 0:
        return req.piece_start, req.piece_end
    block = pos - pos % req.grid
    return max(req.piece_start, block), min(req.piece_end, block + req.grid)
