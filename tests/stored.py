"""Stores and checkpoints for the update tests: a zarr store written whole, and
the statistics a checkpoint group holds, compared array by array."""

from __future__ import annotations

import os

import numpy as np
import zarr

from kcpstream.persist import checkpoint


def write_store(path, x, chunk, fill=0.0):
    """A store of ``x`` in chunks of ``chunk``; with a NaN ``fill``, a chunk all
    NaN is not written."""
    z = zarr.create_array(
        path, shape=x.shape, chunks=(chunk,), dtype=x.dtype, overwrite=True, fill_value=fill
    )
    z[:] = x
    return z


def stats_of(ck):
    """The statistics arrays of the one checkpoint group in ``ck`` (the prefix
    sums in their slabs; the folder of gap records is not a group)."""
    (key,) = [k for k in os.listdir(ck) if not k.startswith(".") and k != "gaps"]
    where = os.path.join(ck, key)
    names = checkpoint.read_attrs(where)["checksums"]
    return {
        name: checkpoint.read_array(where, name)
        for name in names
        if name in ("meta", "block_q", "max_norm2", "bridge") or name.startswith("prefix.")
    }


def assert_same_stats(ck, fresh):
    """The checkpoint ``ck`` holds, bit for bit, the statistics of ``fresh``
    (a first run's checkpoint)."""
    held = stats_of(ck)
    for name, value in stats_of(fresh).items():
        np.testing.assert_array_equal(held[name], value, err_msg=name)
