"""Checkpoints: block statistics and exact refinement results kept in a zarr group.

A checkpoint directory holds one zarr group per *fingerprint* of

* the input: its kind, path and variable, shape and dtype, and a hash of the
  samples of the fit sample's windows (a content sample);
* the fitted feature map (its JSON);
* the block size.

The chunking is deliberately not part of it: the statistics are exact
integer sums, bit-identical for every chunking.  A second run on the same
input with another ``pen``, ``n_bkps`` or ``method`` loads the statistics
(no data pass) and the segments already evaluated exactly (no refinement
read it has made before).  A changed input or parameter gives another
fingerprint: a stale checkpoint is never used.  A change of the data outside
the sampled windows, with the same shape, is not detected; delete the
checkpoint after rewriting an archive in place.

Writes are atomic: the group is written under a temporary name in the same
directory and then renamed, so a killed run leaves the previous checkpoint
(or none), never half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from typing import Any

import numpy as np

from .search import SegmentSplit
from .stats import BlockStats

__all__ = ["fingerprint", "load", "save", "FORMAT"]

#: Bumped whenever the stored layout changes (older checkpoints are then not used).
FORMAT = 1


def fingerprint(source: dict[str, Any], sample: np.ndarray, fmap_json: str, block_size: int) -> str:
    """A stable hash of what the statistics depend on."""
    ident = {
        k: v
        for k, v in source.items()
        if k in ("kind", "path", "variable", "name", "shape", "dtype")
    }
    h = hashlib.sha256()
    h.update(
        json.dumps(
            {"format": FORMAT, "source": ident, "block_size": block_size}, sort_keys=True
        ).encode()
    )
    h.update(np.ascontiguousarray(sample, dtype=np.float64).tobytes())
    h.update(fmap_json.encode())
    return h.hexdigest()[:32]


def _local_dir(path: str | os.PathLike) -> str:
    path = os.fspath(path)
    if "://" in path:
        raise ValueError(
            f"checkpoint={path!r}: checkpoints are written atomically to a local directory; "
            "give a local path"
        )
    return path


def load(
    path: str | os.PathLike, key: str, min_size: int
) -> tuple[BlockStats, dict[tuple[int, int], SegmentSplit]] | None:
    """The statistics and exact segments stored under ``key``, or None.

    A segment's best split depends on ``min_size`` (the splits it admits),
    which the key does not hold: the segments are returned only when they
    were stored for the same ``min_size`` (none otherwise; the statistics
    hold for every ``min_size``)."""
    import zarr

    where = os.path.join(_local_dir(path), key)
    if not os.path.isdir(where):
        return None
    group = zarr.open_group(where, mode="r")
    if group.attrs.get("format") != FORMAT or group.attrs.get("fingerprint") != key:
        return None
    arrays = {name: np.asarray(group[name][...]) for name in group.array_keys()}
    stats = BlockStats.from_arrays({k: v for k, v in arrays.items() if not k.startswith("seg_")})
    known: dict[tuple[int, int], SegmentSplit] = {}
    if group.attrs.get("min_size") != min_size:
        return stats, known
    for row, piece in zip(arrays["seg_bounds"], arrays["seg_piece"], strict=True):
        start, end, split = (int(v) for v in row[:3])
        seg = SegmentSplit(start, end, split=split)
        seg.gain = seg.upper = float(arrays["seg_gain"][len(known)])
        if piece[0] >= 0:
            seg.piece = (int(piece[0]), int(piece[1]))
            seg.left = stats._pieces.get((seg.piece[0], split))
            seg.right = stats._pieces.get((split, seg.piece[1]))
        known[(start, end)] = seg
    return stats, known


def save(
    path: str | os.PathLike,
    key: str,
    stats: BlockStats,
    known: dict[tuple[int, int], SegmentSplit],
    attrs: dict[str, Any],
) -> None:
    """Write the statistics and the exact segments under ``key``, atomically
    (``attrs["min_size"]``: the ``min_size`` the segments were found with)."""
    import zarr

    root = _local_dir(path)
    os.makedirs(root, exist_ok=True)
    final = os.path.join(root, key)
    tmp = os.path.join(root, f".{key}.tmp-{uuid.uuid4().hex}")
    exact = [seg for seg in known.values() if seg.exact]
    arrays = stats.to_arrays()
    arrays["seg_bounds"] = np.array([(s.start, s.end, s.split) for s in exact], np.int64).reshape(
        -1, 3
    )
    arrays["seg_gain"] = np.array([s.gain for s in exact], np.float64)
    arrays["seg_piece"] = np.array(
        [s.piece if s.piece is not None else (-1, -1) for s in exact], np.int64
    ).reshape(-1, 2)
    try:
        group = zarr.open_group(tmp, mode="w")
        for name, value in arrays.items():
            group.create_array(name, data=np.ascontiguousarray(value))
        group.attrs.update({**attrs, "format": FORMAT, "fingerprint": key})
        if os.path.isdir(final):
            old = f"{final}.old-{uuid.uuid4().hex}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
