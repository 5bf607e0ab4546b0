"""Scale: time, peak memory and bytes read against the limit baseline, per n.

For each n (default 1e6, 1e7, 1e8): a float32 signal with 20 distribution
changes is written to a zarr store on disk (chunks of 2^20 samples); then,
each in a fresh subprocess (so that peak resident memory is the run's own):

* the limit baseline: read every chunk and compute the same 64 RFF features
  on all threads, nothing else;
* kcpstream: ``segment(store, n_bkps=20, features="rff:64")`` reading
  through a store wrapper that counts the bytes it returns.

Prints JSON: seconds, ratio to the baseline, peak RSS, bytes read / store
size, and the growth exponent of kcpstream's time over the n measured.

Usage: python benchmarks/bench_scale.py [--n 1000000 10000000 100000000] [--out scale.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from _report import report, store_bytes

CHILD = r"""
import json, os, resource, sys, threading, time
import numpy as np, zarr
from zarr.storage import LocalStore, WrapperStore

class Counting(WrapperStore):
    def __init__(self, store):
        super().__init__(store.with_read_only(True) if not store.read_only else store)
        self.bytes_read = 0
        self._lock = threading.Lock()
    async def get(self, key, prototype, byte_range=None):
        buf = await self._store.get(key, prototype, byte_range)
        if buf is not None and "/c" in key:
            with self._lock:
                self.bytes_read += len(buf)
        return buf

mode, path = sys.argv[1], sys.argv[2]
store = Counting(LocalStore(path))
arr = zarr.open_group(store, mode="r")["x"]
if mode == "baseline":
    from concurrent.futures import ThreadPoolExecutor
    import kcpstream
    fmap = kcpstream.RFF(64).fit(np.asarray(arr[:2048], dtype=np.float64))  # setup, untimed
    fmap._featurize_tile(np.zeros((16, 1)), fmap._tile_buffer(16))
    store.bytes_read = 0
    t0 = time.perf_counter()
    chunk = arr.chunks[0]
    def work(s):
        x = arr[s:s + chunk][:, None]
        buf = fmap._tile_buffer(4096)
        for lo in range(0, len(x), 4096):
            hi = min(len(x), lo + 4096)
            fmap._featurize_tile(x[lo:hi], buf if hi - lo == 4096 else fmap._tile_buffer(hi - lo))
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(work, range(0, arr.shape[0], chunk)))
    extra = {}
else:
    import dask, kcpstream
    with dask.config.set(scheduler="threads"):
        # load the compiled kernels before timing
        kcpstream.segment(np.arange(1000) % 7 * 1.0, n_bkps=1, features="rff:64")
        t0 = time.perf_counter()
        res = kcpstream.segment(arr, n_bkps=20, features="rff:64")
    extra = {"passes": res.diagnostics.passes, "rounds": res.diagnostics.rounds}
seconds = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "peak_rss": rss, "bytes_read": store.bytes_read, **extra}))
"""


def run(mode: str, path: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, path], capture_output=True, text=True, timeout=3600
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, nargs="+", default=[1_000_000, 10_000_000, 100_000_000])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    from kcpstream import datasets

    rows = []
    with tempfile.TemporaryDirectory(prefix="kcpstream-scale-") as tmp:
        for n in args.n:
            path = os.path.join(tmp, f"s{n}.zarr")
            datasets.write_zarr(datasets.changing_distribution(n, 20, seed=0).x, path, chunks=2**20)
            size = store_bytes(path, metadata=False)
            base = min(
                (run("baseline", path) for _ in range(args.repeat)), key=lambda r: r["seconds"]
            )
            kcp = min(
                (run("kcpstream", path) for _ in range(args.repeat)), key=lambda r: r["seconds"]
            )
            rows.append({
                "n": n,
                "store_bytes": size,
                "baseline_seconds": base["seconds"],
                "kcpstream_seconds": kcp["seconds"],
                "ratio": kcp["seconds"] / base["seconds"],
                "peak_rss_mib": kcp["peak_rss"] / 2**20,
                "bytes_read_over_store": kcp["bytes_read"] / size,
                "baseline_bytes_read_over_store": base["bytes_read"] / size,
                "passes": kcp["passes"],
                "rounds": kcp["rounds"],
            })  # fmt: skip
            print(json.dumps(rows[-1]), file=sys.stderr)
    ns = np.array([r["n"] for r in rows], dtype=float)
    ts = np.array([r["kcpstream_seconds"] for r in rows])
    growth = float(np.polyfit(np.log(ns), np.log(ts), 1)[0]) if len(rows) > 1 else None
    result = {"benchmark": "scale", "rows": rows, "growth_exponent": growth, "repeat": args.repeat}
    report(result, args.out, None)


if __name__ == "__main__":
    main()
