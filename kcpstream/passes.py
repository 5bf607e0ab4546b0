"""The dask graphs: the data pass and the refinement reads.

The tasks here call the pure kernels of :mod:`kcpstream._kernels`; the graphs
are computed with :func:`dask.compute`, so the active scheduler (threads,
processes, a ``distributed.Client``) runs them.  Nothing here creates a
client.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import numpy as np
from numba import njit

from ._kernels.blockstats import merge_piece_into, piece_stats, scan_piece
from .features.base import FeatureMap
from .signal import Signal, check_finite_index
from .stats import BlockStats, PieceStats

__all__ = ["data_pass", "scan_pieces", "ScanRequest", "ScanResult", "featurize_range"]


@njit(nogil=True, cache=True)
def _merge_pieces_into_blocks(block_ids, p_cnt, p_S, p_Q, p_M2, p_R, cnt, S, Q, M2, R):
    for i in range(block_ids.shape[0]):
        b = block_ids[i]
        c, q, m2, r = merge_piece_into(
            cnt[b], S[b], Q[b], M2[b], R[b], p_cnt[i], p_S[i], p_Q[i], p_M2[i], p_R[i]
        )
        cnt[b] = c
        Q[b] = q
        M2[b] = m2
        R[b] = r


def _as_2d(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x[:, None] if x.ndim == 1 else x


def _first_nonfinite_row(x: np.ndarray) -> int:
    """Index of the first row with a non-finite value, or -1."""
    if x.dtype.kind != "f":
        return -1
    ok = np.isfinite(x).all(axis=1)
    return -1 if ok.all() else int(np.argmin(ok))


def chunk_block_stats(
    x: np.ndarray, start: int, fmap: FeatureMap, block_size: int, tile: int
) -> dict:
    """Block statistics of one chunk ``x`` (samples ``start ..``).

    Tiles of at most ``max(tile, ...)`` samples are featurized in float32 and
    cut at block boundaries; blocks larger than a tile are accumulated from
    several tiles and merged.  Returns the statistics of the blocks the chunk
    touches (the first and last may be partial), or the first non-finite index.
    """
    x = _as_2d(x)
    n_c = x.shape[0]
    end = start + n_c
    B = block_size
    jb0 = start // B
    nbc = (end - 1) // B - jb0 + 1
    p = fmap.n_features_out_
    scale = float(2.0**fmap.quantum_exponent_)
    cnt = np.zeros(nbc, np.int64)
    S = np.zeros((nbc, p), np.int64)
    Q = np.zeros(nbc)
    M2 = np.zeros(nbc)
    R = np.zeros(nbc)
    tile_len = (tile // B) * B if B <= tile else tile
    buf = np.empty((p, max(tile_len, 1) + B), np.float32)
    pos = start
    while pos < end:
        if B <= tile:
            t_end = min(end, (pos // B) * B + tile_len)
        else:
            t_end = min(end, pos + tile, (pos // B + 1) * B)
        xt = x[pos - start : t_end - start]
        bad = _first_nonfinite_row(xt)
        if bad >= 0:
            return {"first_bad": pos + bad}
        z = buf[:, : t_end - pos]
        if not z.flags.c_contiguous:
            z = np.empty((p, t_end - pos), np.float32)
        fmap._featurize_tile(xt, z)
        first_cut = (pos // B + 1) * B
        cuts = np.concatenate(([pos], np.arange(first_cut, t_end, B), [t_end])).astype(np.int64)
        k = len(cuts) - 1
        p_cnt = np.empty(k, np.int64)
        p_S = np.empty((k, p), np.int64)
        p_Q = np.empty(k)
        p_M2 = np.empty(k)
        p_R = np.empty(k)
        piece_stats(z, scale, cuts - pos, p_S, p_Q, p_M2, p_R, p_cnt)
        _merge_pieces_into_blocks(
            cuts[:-1] // B - jb0, p_cnt, p_S, p_Q, p_M2, p_R, cnt, S, Q, M2, R
        )
        pos = t_end
    return {"first_bad": -1, "first_block": jb0, "counts": cnt, "S": S, "Q": Q, "M2": M2, "R": R}


def featurize_range(fmap: FeatureMap, x: np.ndarray, tile: int) -> np.ndarray:
    """Raw float32 features (p, L) of every sample of ``x``, tile by tile."""
    x = _as_2d(x)
    length = x.shape[0]
    p = fmap.n_features_out_
    out = np.empty((p, length), np.float32)
    buf = np.empty((p, min(tile, max(length, 1))), np.float32)
    for lo in range(0, length, tile):
        hi = min(length, lo + tile)
        z = buf[:, : hi - lo] if hi - lo == buf.shape[1] else np.empty((p, hi - lo), np.float32)
        fmap._featurize_tile(x[lo:hi], z)
        out[:, lo:hi] = z
    return out


def _piece_of(z: np.ndarray, scale: float, lo: int, hi: int) -> PieceStats:
    p = z.shape[0]
    S = np.empty((1, p), np.int64)
    Q = np.empty(1)
    M2 = np.empty(1)
    R = np.empty(1)
    cnt = np.empty(1, np.int64)
    piece_stats(
        np.ascontiguousarray(z[:, lo:hi]), scale, np.array([0, hi - lo], np.int64), S, Q, M2, R, cnt
    )
    return PieceStats(count=int(cnt[0]), S=S[0], Q=float(Q[0]), M2=float(M2[0]), R=float(R[0]))


@dataclass(frozen=True)
class ScanRequest:
    """Scan every split strictly inside ``[piece_start, piece_end)`` of a segment."""

    segment: tuple[int, int]
    piece_start: int
    piece_end: int
    left_at_piece: np.ndarray  # exact sum of the segment's samples before piece_start
    total: np.ndarray  # exact sum of the segment


@dataclass(frozen=True)
class ScanResult:
    request: ScanRequest
    gain: float
    pos: int
    left: PieceStats | None
    right: PieceStats | None


def scan_piece_task(
    x: np.ndarray, fmap: FeatureMap, req: ScanRequest, min_size: int, tile: int
) -> ScanResult:
    """Featurize one piece and scan it sample by sample (a dask task)."""
    z = featurize_range(fmap, x, tile)
    scale = float(2.0**fmap.quantum_exponent_)
    a, e = req.segment
    gain, pos = scan_piece(z, scale, req.piece_start, a, e, req.left_at_piece, req.total, min_size)
    left = right = None
    if pos >= 0:
        cut = pos - req.piece_start
        left = _piece_of(z, scale, 0, cut)
        right = _piece_of(z, scale, cut, z.shape[1])
    return ScanResult(req, float(gain), int(pos), left, right)


def data_pass(signal: Signal, fmap: FeatureMap, block_size: int, tile: int) -> BlockStats:
    """One pass over the data: block statistics of every chunk, merged on the client.

    Raises the NaN/inf input error naming the first non-finite sample.
    """
    starts = signal.chunk_starts
    fm = dask.delayed(fmap, pure=True)
    blocks = signal.data.to_delayed().ravel()
    tasks = [
        dask.delayed(chunk_block_stats, pure=True)(blk, int(s), fm, block_size, tile)
        for blk, s in zip(blocks, starts[:-1], strict=True)
    ]
    results = dask.compute(*tasks)
    bad = [r["first_bad"] for r in results if r["first_bad"] >= 0]
    check_finite_index(min(bad) if bad else None, signal.description)

    n = signal.n
    nb = -(-n // block_size)
    p = fmap.n_features_out_
    cnt = np.zeros(nb, np.int64)
    S = np.zeros((nb, p), np.int64)
    Q = np.zeros(nb)
    M2 = np.zeros(nb)
    R = np.zeros(nb)
    for r in results:  # chunks are in time order, so shared edge blocks merge in order
        j0 = r["first_block"]
        k = len(r["counts"])
        ids = np.arange(j0, j0 + k, dtype=np.int64)
        _merge_pieces_into_blocks(
            ids, r["counts"], r["S"], r["Q"], r["M2"], r["R"], cnt, S, Q, M2, R
        )
    expected = np.full(nb, block_size, np.int64)
    expected[-1] = n - (nb - 1) * block_size
    if not np.array_equal(cnt, expected):  # pragma: no cover - internal consistency
        raise RuntimeError("internal error: the data pass did not cover every sample exactly once")
    return BlockStats(n, block_size, fmap.quantum_exponent_, S, Q, M2, R)


def scan_pieces(
    signal: Signal, fmap: FeatureMap, requests: list[ScanRequest], min_size: int, tile: int
) -> list[ScanResult]:
    """Read and scan all requested pieces in one :func:`dask.compute`."""
    if not requests:
        return []
    fm = dask.delayed(fmap, pure=True)
    tasks = [
        dask.delayed(scan_piece_task, pure=True)(
            signal.data[r.piece_start : r.piece_end], fm, r, min_size, tile
        )
        for r in requests
    ]
    return list(dask.compute(*tasks))
