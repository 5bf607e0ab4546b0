"""BlockStats: exact prefix sums of quantized features over a grid of blocks.

The grid has boundaries at ``0, B, 2B, ..., n``.  Refinements insert exact
split points inside blocks: their prefix sums and the statistics of the two
pieces they cut a block (or piece) into are kept, so later queries at those
positions are exact too.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from numba import njit

from kcpstream._kernels.blockstats import piece_stats


@njit(nogil=True, cache=True)
def _prefix_columns(S):
    """Exact prefix sums of the rows of ``S`` (int64, (nb, p)), feature-major
    ``(p, nb + 1)`` with a leading zero column (in tiles of 64 rows, so that
    both the reads and the transposed writes stay in cache)."""
    nb, p = S.shape
    out = np.zeros((p, nb + 1), np.int64)
    run = np.zeros(p, np.int64)
    tile = np.empty((64, p), np.int64)
    for i0 in range(0, nb, 64):
        rows = min(64, nb - i0)
        for r in range(rows):
            for j in range(p):
                run[j] += S[i0 + r, j]
                tile[r, j] = run[j]
        for j in range(p):
            for r in range(rows):
                out[j, i0 + r + 1] = tile[r, j]
    return out


def prefix_columns(S: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
    """Exact prefix sums of the rows of the block sums ``S`` (int64, (nb, p)),
    feature-major ``(p, nb + 1)``, from ``start`` (the sums before the first
    row, (p,); zero by default) in the first column."""
    out = _prefix_columns(np.ascontiguousarray(S, dtype=np.int64))
    if start is not None:
        out += np.asarray(start, np.int64)[:, None]
    return out


def _prefix_sums(q: np.ndarray) -> np.ndarray:
    """``[0, q0, q0 + q1, ...]`` in float64: one cumulative sum, so statistics
    rebuilt from the same block sums have the same bits."""
    out = np.zeros(len(q) + 1, dtype=np.float64)
    np.cumsum(q, out=out[1:])
    return out


class PieceStats(NamedTuple):
    """Statistics of a run of consecutive samples (quantized units).

    (A named tuple: a search records two for each split it makes, a batch's
    series a hundred each, and a tuple is made several times faster than a
    frozen dataclass.)"""

    count: int
    S: np.ndarray  # int64 (p,)
    Q: float
    M2: float
    R: float


def split_piece(z: np.ndarray, scale: float, cut: int, every: int) -> tuple[PieceStats, PieceStats]:
    """Statistics of the features ``z`` (k, L, m) of a piece before and after
    ``cut`` (its bridge evaluated every ``every`` samples): the halves a split
    inside the piece leaves, as a scan of the piece makes them."""
    p = z.shape[0] * z.shape[2]
    S = np.empty((2, p), np.int64)
    Q, M2, R = np.empty(2), np.empty(2), np.empty(2)
    cnt = np.empty(2, np.int64)
    bounds = np.array([0, cut, z.shape[1]], np.int64)
    piece_stats(z, scale, bounds, S, Q, M2, R, cnt, -1.0, every)
    left, right = (
        PieceStats(count=int(cnt[i]), S=S[i], Q=float(Q[i]), M2=float(M2[i]), R=float(R[i]))
        for i in (0, 1)
    )
    return left, right


class BlockStats:
    """Prefix sums over the block grid, answering range sums in O(p).

    Parameters
    ----------
    n : int
        Number of samples.
    block_size : int
        Grid step B.
    quantum_exponent : int
        Features are integers ``q = rint(z * 2**quantum_exponent)``.
    S, Q, M2, R : arrays with one row per block
        Block sums of q (int64, (nb, p)), of ||q||^2, maxima of ||q||^2,
        bridge-excursion bounds.
    """

    def __init__(
        self,
        n: int,
        block_size: int,
        quantum_exponent: int,
        S: np.ndarray,
        Q: np.ndarray,
        M2: np.ndarray,
        R: np.ndarray,
    ) -> None:
        self.n = int(n)
        self.block_size = int(block_size)
        self.quantum_exponent = int(quantum_exponent)
        nb = S.shape[0]
        if nb != -(-self.n // self.block_size):
            raise ValueError("block statistics do not cover the signal")
        #: exact prefix sums, feature-major (p, nb + 1)
        self.prefix = _prefix_columns(np.ascontiguousarray(S, dtype=np.int64))
        #: block sums of ||q||^2 as computed (their prefix sums are rounded)
        self.block_q = np.ascontiguousarray(Q, dtype=np.float64)
        self.prefix_q = _prefix_sums(self.block_q)
        self.max_norm2 = np.ascontiguousarray(M2, dtype=np.float64)
        self.bridge = np.ascontiguousarray(R, dtype=np.float64)
        self._points: dict[int, tuple[np.ndarray, float]] = {}
        self._pieces: dict[tuple[int, int], PieceStats] = {}

    @classmethod
    def from_prefix(
        cls,
        n: int,
        block_size: int,
        quantum_exponent: int,
        prefix: np.ndarray,
        Q: np.ndarray,
        M2: np.ndarray,
        R: np.ndarray,
    ) -> BlockStats:
        """The statistics whose block sums have the exact prefix sums ``prefix``
        (feature-major ``(p, nb + 1)``, a leading zero column), as
        ``BlockStats(n, block_size, quantum_exponent, S, Q, M2, R)`` would
        compute them from the block sums ``S``."""
        obj = cls.__new__(cls)
        obj.n, obj.block_size, obj.quantum_exponent = int(n), int(block_size), int(quantum_exponent)
        nb = -(-obj.n // obj.block_size)
        obj.prefix = np.ascontiguousarray(prefix, dtype=np.int64)
        if obj.prefix.shape[1] != nb + 1 or len(Q) != nb:
            raise ValueError("block statistics do not cover the signal")
        obj.block_q = np.ascontiguousarray(Q, dtype=np.float64)
        obj.prefix_q = _prefix_sums(obj.block_q)
        obj.max_norm2 = np.ascontiguousarray(M2, dtype=np.float64)
        obj.bridge = np.ascontiguousarray(R, dtype=np.float64)
        obj._points = {}
        obj._pieces = {}
        return obj

    @classmethod
    def from_samples(
        cls, quantum_exponent: int, prefix: np.ndarray, Q: np.ndarray, M2: np.ndarray
    ) -> BlockStats:
        """Statistics with one block per sample (``block_size = 1``) from the exact
        prefix sums of every sample (:func:`~kcpstream._kernels.dense.sample_prefix_sums`)."""
        n = int(Q.shape[0])
        obj = cls.__new__(cls)
        obj.n, obj.block_size, obj.quantum_exponent = n, 1, int(quantum_exponent)
        obj.prefix = np.ascontiguousarray(prefix, dtype=np.int64)
        if obj.prefix.shape[1] != n + 1:
            raise ValueError("prefix sums do not cover the signal")
        obj.block_q = np.ascontiguousarray(Q, dtype=np.float64)
        obj.prefix_q = _prefix_sums(obj.block_q)
        obj.max_norm2 = np.ascontiguousarray(M2, dtype=np.float64)
        obj.bridge = np.zeros(n)  # a block of one sample has no interior split
        obj._points = {}
        obj._pieces = {}
        return obj

    def windows(self, edges: np.ndarray) -> BlockStats:
        """Statistics with one sample per window of whole blocks, the ``k``-th
        from block ``edges[k]`` to ``edges[k + 1]`` (increasing, from 0): the
        window's feature is the sum of its samples' features less ``c`` per
        sample (quantized units, exact), ``c`` the features' mean over the
        whole blocks rounded to a unit.  A segmentation of the windows is one
        of the samples at window resolution with the kernel of the windows'
        mean features.  Windows of unequal length (one that follows a cycle of
        a fractional number of blocks) would otherwise differ by the mean
        feature times their length difference; centred, by what the few
        samples more hold of the cycle at its edges, and those parts cancel
        in any run of consecutive windows but its first and last."""
        edges = np.asarray(edges, dtype=np.int64)
        full = self.n // self.block_size
        if edges[0] != 0 or np.any(np.diff(edges) < 1) or edges[-1] > full:
            raise ValueError("window edges must increase from 0 within the whole blocks")
        mean = np.rint(self.prefix[:, full] / float(full * self.block_size)).astype(np.int64)
        prefix = self.prefix[:, edges] - np.outer(mean, edges * self.block_size)
        prefix = np.ascontiguousarray(prefix)
        sums = np.diff(prefix, axis=1).astype(np.float64)
        q = (sums * sums).sum(axis=0)
        return BlockStats.from_samples(self.quantum_exponent, prefix, q, q)

    def block_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The per-block statistics this object was built from, ``(S, Q, M2, R)``
        (``S`` block-major, exact): ``BlockStats(n, B, k, *block_arrays())``
        is this object again, bit for bit."""
        S = np.ascontiguousarray(np.diff(self.prefix, axis=1).T)
        return S, self.block_q.copy(), self.max_norm2.copy(), self.bridge.copy()

    # -- sizes ------------------------------------------------------------
    @property
    def n_blocks(self) -> int:
        return int(self.bridge.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.prefix.shape[0])

    @property
    def unit(self) -> float:
        """Feature units per quantized unit squared: ``2**(-2k)`` (exact)."""
        return math.ldexp(1.0, -2 * self.quantum_exponent)

    @property
    def nbytes(self) -> int:
        return int(
            self.prefix.nbytes
            + self.prefix_q.nbytes
            + self.block_q.nbytes
            + self.max_norm2.nbytes
            + self.bridge.nbytes
        )

    @functools.cached_property
    def global_max_norm2(self) -> float:
        # cached: max_norm2 is set once, by the constructors, and every p-value's
        # gain_rounding asks for it
        return float(self.max_norm2.max()) if self.n_blocks else 0.0

    def gain_rounding(self, length: int) -> float:
        """Float rounding, in quantized units, of a gain computed from the exact
        sums over a segment of ``length`` samples: gains this close are equal."""
        return length * self.n_features * max(self.global_max_norm2, 1.0) * 2.0**-44

    # -- positions --------------------------------------------------------
    def is_grid_point(self, pos: int) -> bool:
        return pos % self.block_size == 0 or pos == self.n

    def knows(self, pos: int) -> bool:
        """Whether the sums up to ``pos`` are known: a grid point or a refined split."""
        return self.is_grid_point(pos) or pos in self._points

    def grid_index(self, pos: int) -> int:
        return -(-pos // self.block_size) if pos == self.n else pos // self.block_size

    def prefix_at(self, pos: int) -> tuple[np.ndarray, float]:
        """Exact sum of q and sum of ||q||^2 over samples ``[0, pos)``."""
        if self.is_grid_point(pos):
            j = self.grid_index(pos)
            return np.ascontiguousarray(self.prefix[:, j]), float(self.prefix_q[j])
        try:
            return self._points[pos]
        except KeyError:
            raise KeyError(f"position {pos} is neither a grid point nor a refined split") from None

    def prefix_rows(self, positions: np.ndarray) -> np.ndarray:
        """:meth:`prefix_at`'s sums of q at many positions, one row each ``(m, p)``."""
        pos = np.asarray(positions, dtype=np.int64)
        B = self.block_size
        on_grid = (pos % B == 0) | (pos == self.n)
        columns = np.where(pos == self.n, -(-self.n // B), pos // B)
        rows = np.ascontiguousarray(self.prefix[:, columns[on_grid]].T)
        out = np.empty((len(pos), self.prefix.shape[0]), dtype=self.prefix.dtype)
        out[on_grid] = rows
        for k in np.flatnonzero(~on_grid):
            out[k] = self.prefix_at(int(pos[k]))[0]
        return out

    def piece_bridge(self, start: int, end: int) -> float:
        """Bridge bound of the piece ``[start, end)`` (a block or a refined piece)."""
        j = start // self.block_size
        if start % self.block_size == 0 and end == min(start + self.block_size, self.n):
            return float(self.bridge[j])
        return self._pieces[(start, end)].R

    @property
    def n_points(self) -> int:
        """Exact splits inside blocks held: positions and the pieces they cut."""
        return len(self._points) + len(self._pieces)

    def add_split(
        self, pos: int, piece_start: int, piece_end: int, left: PieceStats, right: PieceStats
    ) -> None:
        """Record an exact split at ``pos`` inside the piece ``[piece_start, piece_end)``."""
        if self.is_grid_point(pos):
            return
        s0, q0 = self.prefix_at(piece_start)
        self._points[pos] = (s0 + left.S, q0 + left.Q)
        self._pieces[(piece_start, pos)] = left
        self._pieces[(pos, piece_end)] = right

    # -- range queries ----------------------------------------------------
    def range_sum(self, start: int, end: int) -> tuple[np.ndarray, float]:
        """Exact sum of q (int64) and sum of ||q||^2 over ``[start, end)``."""
        s1, q1 = self.prefix_at(end)
        s0, q0 = self.prefix_at(start)
        return s1 - s0, q1 - q0

    def cost(self, start: int, end: int) -> float:
        """Segment cost ``Q - ||S||^2 / N`` over ``[start, end)``, in feature units."""
        s, q = self.range_sum(start, end)
        sf = s.astype(np.float64)
        return (q - float(sf @ sf) / (end - start)) * self.unit

    # -- persistence ------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Everything needed to rebuild this object exactly, as named arrays."""
        p = self.n_features
        points = sorted(self._points)
        pieces = sorted(self._pieces)
        return {
            "meta": np.array([self.n, self.block_size, self.quantum_exponent], np.int64),
            "prefix": self.prefix,
            "block_q": self.block_q,
            "max_norm2": self.max_norm2,
            "bridge": self.bridge,
            "point_pos": np.array(points, np.int64),
            "point_S": np.array([self._points[k][0] for k in points], np.int64).reshape(-1, p),
            "point_Q": np.array([self._points[k][1] for k in points], np.float64),
            "piece_bounds": np.array(pieces, np.int64).reshape(-1, 2),
            "piece_count": np.array([self._pieces[k].count for k in pieces], np.int64),
            "piece_S": np.array([self._pieces[k].S for k in pieces], np.int64).reshape(-1, p),
            "piece_QMR": np.array(
                [(self._pieces[k].Q, self._pieces[k].M2, self._pieces[k].R) for k in pieces],
                np.float64,
            ).reshape(-1, 3),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> BlockStats:
        """Rebuild from :meth:`to_arrays` output."""
        n, block_size, k = (int(v) for v in arrays["meta"])
        obj = cls.__new__(cls)
        obj.n, obj.block_size, obj.quantum_exponent = n, block_size, k
        obj.prefix = np.ascontiguousarray(arrays["prefix"], dtype=np.int64)
        obj.block_q = np.ascontiguousarray(arrays["block_q"], dtype=np.float64)
        obj.prefix_q = _prefix_sums(obj.block_q)
        obj.max_norm2 = np.asarray(arrays["max_norm2"], dtype=np.float64)
        obj.bridge = np.asarray(arrays["bridge"], dtype=np.float64)
        obj._points = {
            int(pos): (np.asarray(s, np.int64), float(q))
            for pos, s, q in zip(
                arrays["point_pos"], arrays["point_S"], arrays["point_Q"], strict=True
            )
        }
        rows = zip(
            arrays["piece_bounds"],
            arrays["piece_count"],
            arrays["piece_S"],
            arrays["piece_QMR"],
            strict=True,
        )
        obj._pieces = {
            (int(a), int(b)): PieceStats(int(c), np.asarray(s, np.int64), *map(float, qmr))
            for (a, b), c, s, qmr in rows
        }
        return obj
