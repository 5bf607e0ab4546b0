"""Core benchmark: kcpstream end to end against the least work possible, in one run.

Signal: n samples (default 1e7), d = 1, 20 change-points of the distribution,
float32 in a zarr store on local disk (chunks of 2**20).  kcpstream
(``segment(store, n_bkps=20, features="rff:64")``) is timed end to end;
the baseline reads the same store and featurizes every sample with the
same float32 tiles (projection, cos, sin) on the same number of threads, and
does nothing else.  Prints one JSON object; ``ratio`` = kcpstream / baseline
(target: <= 2.0).

Usage: python benchmarks/bench_core.py [--n 10000000] [--repeat 3] [--out result.json]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import dask
import numpy as np
import zarr
from _report import machine, report, store_bytes

import kcpstream
from kcpstream import datasets
from kcpstream.features import RFF


def baseline_pass(path: str, fmap: RFF, tile: int, threads: int) -> float:
    """Read every chunk and featurize it in float32 tiles; nothing else."""
    arr = zarr.open_group(path, mode="r")["x"]
    chunk = arr.chunks[0]
    starts = range(0, arr.shape[0], chunk)

    def work(start: int) -> float:
        x = arr[start : start + chunk][:, None]
        buf = fmap.tile_buffer(tile)
        checksum = 0.0
        for lo in range(0, x.shape[0], tile):
            hi = min(x.shape[0], lo + tile)
            out = buf if hi - lo == tile else fmap.tile_buffer(hi - lo)
            fmap.featurize_tile(x[lo:hi], out)
            checksum += float(out[0, 0, 0])  # keep the work observable
        return checksum

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, starts))
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--n-bkps", type=int, default=20)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--chunk", type=int, default=2**20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    threads = os.cpu_count() or 1

    sig = datasets.changing_distribution(args.n, args.n_bkps, seed=0)
    with tempfile.TemporaryDirectory(prefix="kcpstream-bench-") as tmp:
        path = os.path.join(tmp, "signal.zarr")
        datasets.write_zarr(sig.x, path, chunks=args.chunk)
        size = store_bytes(path)
        with dask.config.set(scheduler="threads", num_workers=threads):
            # warm-up: compiles the kernels, fills the page cache
            res = kcpstream.segment(path, n_bkps=args.n_bkps, features=f"rff:{args.features}")
            fmap = res.features
            baseline_pass(path, fmap, 4096, threads)
            times_kcp, times_base, passes = [], [], []
            for _ in range(args.repeat):
                times_base.append(baseline_pass(path, fmap, 4096, threads))
                t0 = time.perf_counter()
                res = kcpstream.segment(path, n_bkps=args.n_bkps, features=f"rff:{args.features}")
                times_kcp.append(time.perf_counter() - t0)
                passes.append(res.diagnostics.passes)

    found, true = res.changepoints, sig.changepoints
    dist = np.abs(found[:, None] - true[None, :])
    result = {
        "benchmark": "core",
        "n": args.n,
        "d": 1,
        "n_features": args.features,
        "n_bkps": args.n_bkps,
        "chunk": args.chunk,
        "store_bytes": size,
        "threads": threads,
        "repeat": args.repeat,
        "kcpstream_seconds": statistics.median(times_kcp),
        "kcpstream_seconds_all": times_kcp,
        "baseline_seconds": statistics.median(times_base),
        "baseline_seconds_all": times_base,
        "ratio": statistics.median(times_kcp) / statistics.median(times_base),
        "target_ratio": 2.0,
        "passes": statistics.median(passes),
        "block_size": res.diagnostics.block_size,
        "seconds_data_pass": res.diagnostics.seconds_data_pass,
        "hausdorff": int(max(dist.min(axis=0).max(), dist.min(axis=1).max())),
        "machine": {**machine(), "platform": platform.platform(), "threads": threads},
        "versions": {
            "kcpstream": kcpstream.__version__,
            "numpy": np.__version__,
            "zarr": zarr.__version__,
        },
    }
    report(result, args.out, None)


if __name__ == "__main__":
    main()
