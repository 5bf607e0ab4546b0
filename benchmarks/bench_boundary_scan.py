"""The boundary scan of one segment: a feature's row at a time against tiles of 64 boundaries.

:func:`kcpstream._kernels.blockstats.segment_boundary_scan` sums, for every
block boundary of a segment, the squared differences of the two sides'
means over the features.  It reads the prefix sums a feature's row at a
time over every boundary; before, it went through the boundaries in tiles
of 64, every feature's row for each tile.  The baseline here is that
earlier loop (kept in this script, the same operations in the same order),
timed in the same run on the same segment; the best boundary of the two
is the same to the bit (``same_best``).  ``ratio`` is the whole kernel's
time over the baseline's, which times the sums alone (not the kernel's
bounds of the pieces besides): the new loop's share of it is smaller still.

Usage: python benchmarks/bench_boundary_scan.py [--repeat 50] [--out scan.json]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _report import report
from numba import njit

from kcpstream._kernels.blockstats import segment_boundary_scan


@njit(nogil=True, cache=True)
def tiled_sums(prefix, block_size, j0, n_inner, start, end, prefix_start, prefix_end):
    """The boundaries' sums over the features in tiles of 64 boundaries (the
    loop the kernel had before)."""
    p = prefix_start.shape[0]
    acc = np.zeros(n_inner)
    tile = 64
    inv_l = np.empty(tile)
    inv_r = np.empty(tile)
    a_loc = np.empty(tile)
    for b0 in range(0, n_inner, tile):
        nb = min(tile, n_inner - b0)
        for u in range(nb):
            pos = (j0 + b0 + u) * block_size
            inv_l[u] = 1.0 / float(pos - start)
            inv_r[u] = 1.0 / float(end - pos)
            a_loc[u] = 0.0
        for j in range(p):
            a = prefix_start[j]
            tot = prefix_end[j] - a
            row = prefix[j]
            for u in range(nb):
                sl = row[j0 + b0 + u] - a
                sr = tot - sl
                d = float(sl) * inv_l[u] - float(sr) * inv_r[u]
                a_loc[u] += d * d
        for u in range(nb):
            acc[b0 + u] = a_loc[u]
    return acc


def _best(acc, block_size, j0, start, end):
    """The best boundary of the tiled sums, as the kernel takes it (min_size 1)."""
    pos = (j0 + np.arange(acc.size)) * block_size
    fl, fr = (pos - start).astype(float), (end - pos).astype(float)
    gains = [float(fl[i] * fr[i] / (fl[i] + fr[i]) * acc[i]) for i in range(acc.size)]
    i = int(np.argmax(gains))
    return gains[i], int(pos[i])


def _time(f, repeat: int) -> float:
    f()
    t0 = time.perf_counter()
    for _ in range(repeat):
        f()
    return (time.perf_counter() - t0) / repeat


def run(repeat: int) -> dict:
    rows = []
    p, block = 64, 100
    for blocks in (2_000, 10_000, 32_768, 131_072):
        rng = np.random.default_rng(blocks)
        prefix = np.cumsum(rng.integers(-(2**20), 2**20, size=(p, blocks + 1)), axis=1)
        j0, j1, start, end = 1, blocks - 1, 0, blocks * block
        pa, pe = prefix[:, 0].copy(), prefix[:, blocks].copy()
        bridge = np.zeros(blocks + 1)
        args = (prefix, bridge, block, j0, j1, start, end, pa, pe, 0.0, 0.0, 1, 1.0, 0.0)
        gain, pos, _ = segment_boundary_scan(*args)
        old = (prefix, block, j0, j1 - j0 + 1, start, end, pa, pe)
        same = _best(tiled_sums(*old), block, j0, start, end) == (gain, pos)
        kernel = _time(lambda a=args: segment_boundary_scan(*a), repeat)
        tiled = _time(lambda a=old: tiled_sums(*a), repeat)
        rows.append({"blocks": blocks, "features": p, "kernel_ms": kernel * 1e3,
                     "tiled_sums_ms": tiled * 1e3, "ratio": kernel / tiled,
                     "same_best": same})  # fmt: skip
    return {"rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--out")
    args = ap.parse_args()
    report(run(args.repeat), args.out, None)


if __name__ == "__main__":
    main()
