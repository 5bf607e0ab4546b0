"""A range of samples featurized tile by tile, into buffers each thread keeps.

Shared by the data pass (:mod:`kcpstream.passes.data`) and refinement's scans
(:mod:`kcpstream.passes.scan`).
"""

from __future__ import annotations

import threading

import numpy as np

from kcpstream.features.base import FeatureMap


def as_2d(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x[:, None] if x.ndim == 1 else x


#: Largest feature buffer a thread keeps for refinement scans (bytes): a
#: piece's features are written into it instead of a fresh allocation.
MAX_SCRATCH_BYTES = 8 * 2**20


_SCRATCH = threading.local()


def scratch_features(fmap: FeatureMap, length: int, slot: str = "features") -> np.ndarray:
    """A float32 (k, length, m) buffer: this thread's scratch ``slot`` when it
    fits in :data:`MAX_SCRATCH_BYTES` (valid until the thread's next call for
    that slot), else new.  ``"features"`` holds a range's features,
    ``"tile"`` one tile's, consumed before the next tile is featurized.
    Reuse matters where the allocator hands large blocks back to the system
    at once (distributed's workers set ``MALLOC_TRIM_THRESHOLD_``): every
    fresh buffer then costs a page fault per 4 KiB written."""
    k, m = fmap.tile_groups_
    size = k * length * m
    if 4 * size > MAX_SCRATCH_BYTES:
        return fmap.tile_buffer(length)
    flat = getattr(_SCRATCH, slot, None)
    if flat is None or flat.size < size:
        grown = min(max(size, 2 * (0 if flat is None else flat.size)), MAX_SCRATCH_BYTES // 4)
        flat = np.empty(grown, np.float32)
        setattr(_SCRATCH, slot, flat)
    return flat[:size].reshape(k, length, m)


def featurize_range(
    fmap: FeatureMap, x: np.ndarray, tile: int, out: np.ndarray | None = None
) -> np.ndarray:
    """Raw float32 features (k, L, m) of every sample of ``x``, tile by tile
    (into ``out`` when given)."""
    x = as_2d(x)
    length = x.shape[0]
    out = fmap.tile_buffer(length) if out is None else out
    if length <= tile:
        fmap.featurize_tile(x, out)
        return out
    buf = scratch_features(fmap, tile, "tile")
    for lo in range(0, length, tile):
        hi = min(length, lo + tile)
        z = buf if hi - lo == tile else scratch_features(fmap, hi - lo, "tile")
        fmap.featurize_tile(x[lo:hi], z)
        out[:, lo:hi] = z
    return out
