"""Scale: time, peak memory and bytes read against the limit baseline, per n.

For each n (default 1e6, 1e7, 1e8): a float32 signal with 20 distribution
changes is written to a zarr store on disk (chunks of ``--chunk`` samples,
default 2^20); then, each in a fresh subprocess (so that peak resident
memory is the run's own):

* the limit baseline: one tiled numpy pass on all threads that reads every
  chunk (at least 2^20 samples per read: small chunks are read many at a
  time) and computes the same 64 RFF features (projection, ``np.cos``,
  ``np.sin``, amplitudes, in float32) and their sums (sum of the features,
  sum of their squared norms), nothing else;
* featurize-only: kcpstream's own featurizer on every chunk, no statistics
  (a stricter floor: a faster featurizer than numpy's makes it lower);
* kcpstream: ``segment(store, n_bkps=20, features="rff:64")`` on the
  threaded scheduler, reading through a store wrapper that counts the bytes
  it returns;
* with ``--xarray``: the same call on ``xr.open_zarr(store)["x"]``, in the
  store's chunks and in dask chunks of 2^20 samples (``xarray-wide``);
* processes (at ``--cluster-n``): the same call, given the store's path,
  under dask's ``processes`` scheduler (a pool of 2 processes);
* cluster (at ``--cluster-n``): the same call from a ``LocalCluster`` of 2
  worker processes (1 thread each), given the store's path; time only.  Each
  worker loads the compiled kernels first, as the threaded run does.  Twice:
  with distributed's default worker environment, and with
  ``MALLOC_TRIM_THRESHOLD_`` unset (distributed sets it to 65536 in the
  workers it spawns, which makes every allocation above 128 kB a fresh
  memory mapping: zarr's chunk decoding then faults in about 10 MB of new
  pages per 4 MB chunk).

Modes are interleaved over ``--repeat`` rounds and each figure is the
median; ratios are between medians of the same run.

Prints JSON: seconds, ratio to the baseline, peak RSS, bytes read / store
size, and the growth exponent of kcpstream's time over the n measured.

Usage: python benchmarks/bench_scale.py [--n 1000000 10000000 100000000] [--repeat 3]
       [--chunk 1048576] [--xarray] [--cluster-n 100000000] [--out scale.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from _report import PEAK_RSS_CODE, report, store_bytes

CHILD = r"""
import json, os, sys, threading, time
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
chunk = arr.chunks[0] * max(1, 2**20 // arr.chunks[0])  # samples per read
extra = {}
if mode in ("baseline", "featurize-only"):
    from concurrent.futures import ThreadPoolExecutor
    import kcpstream
    fmap = kcpstream.RFF(64).fit(np.asarray(arr[:2048], dtype=np.float64))  # setup, untimed
    center = np.float32(fmap.center_[0])
    w, amp = fmap.weights_[0], fmap.amplitudes_
    fmap.featurize_tile(np.zeros((16, 1)), fmap.tile_buffer(16))
    store.bytes_read = 0
    t0 = time.perf_counter()
    if mode == "baseline":
        def work(s):  # the limit: numpy, tiled, the same features and their sums
            x = arr[s:s + chunk]
            total, sq = np.zeros((2, len(w)), np.float64), 0.0
            for lo in range(0, len(x), 4096):
                proj = (x[lo:lo + 4096, None] - center) * w
                z = np.stack([np.cos(proj), np.sin(proj)])
                z *= amp
                total += z.sum(axis=1)
                sq += float(np.einsum("gtj,gtj->", z, z))
            return total, sq
    else:
        def work(s):  # kcpstream's own featurizer alone, no statistics
            x = arr[s:s + chunk][:, None]
            buf = fmap.tile_buffer(4096)
            for lo in range(0, len(x), 4096):
                t = x[lo:lo + 4096]
                fmap.featurize_tile(t, buf if len(t) == 4096 else fmap.tile_buffer(len(t)))
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(work, range(0, arr.shape[0], chunk)))
elif mode.startswith("xarray"):  # the store through xarray, as stored or in wider dask chunks
    import dask, kcpstream, xarray as xr
    wide = {"chunks": {"time": 2**20}} if mode == "xarray-wide" else {}  # else xarray's default
    with dask.config.set(scheduler="threads"):
        kcpstream.segment(np.arange(1000) % 7 * 1.0, n_bkps=1, features="rff:64")
        t0 = time.perf_counter()
        ds = xr.open_zarr(store, consolidated=False, **wide)
        res = kcpstream.segment(ds["x"], n_bkps=20, features="rff:64")
    extra = {"passes": res.diagnostics.passes, "rounds": res.diagnostics.rounds,
             "pass_tasks": res.diagnostics.pass_tasks, "n_chunks": res.diagnostics.n_chunks}
elif mode == "processes":  # dask's pool of processes, given the store's path
    import warnings
    import dask, kcpstream
    warnings.simplefilter("ignore")  # the SchedulerWarning it is measured for
    kcpstream.segment(np.arange(1000) % 7 * 1.0, n_bkps=1, features="rff:64")
    with dask.config.set(scheduler="processes"):
        t0 = time.perf_counter()
        res = kcpstream.segment(path, n_bkps=20, features="rff:64")
    extra = {"passes": res.diagnostics.passes, "rounds": res.diagnostics.rounds,
             "pass_tasks": res.diagnostics.pass_tasks}
elif mode == "kcpstream":
    import dask, kcpstream
    with dask.config.set(scheduler="threads"):
        # load the compiled kernels before timing
        kcpstream.segment(np.arange(1000) % 7 * 1.0, n_bkps=1, features="rff:64")
        t0 = time.perf_counter()
        res = kcpstream.segment(arr, n_bkps=20, features="rff:64")
    extra = {"passes": res.diagnostics.passes, "rounds": res.diagnostics.rounds,
             "pass_tasks": res.diagnostics.pass_tasks}
else:  # a LocalCluster of 2 worker processes reading the store by path
    import dask, kcpstream
    from distributed import Client, LocalCluster

    def warm():  # each worker loads the compiled kernels, as the threaded run does
        import dask, numpy as np, kcpstream
        with dask.config.set(scheduler="sync"):
            kcpstream.segment(np.arange(1000) % 7 * 1.0, n_bkps=1, features="rff:64")

    environ = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
    with dask.config.set({environ: None} if mode == "cluster-untrimmed" else {}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True)
    with cluster, Client(cluster) as client:
        client.run(warm)
        kcpstream.segment(np.arange(1000) % 7 * 1.0, n_bkps=1, features="rff:64")
        t0 = time.perf_counter()
        res = kcpstream.segment(path, n_bkps=20, features="rff:64")
        seconds = time.perf_counter() - t0
    extra = {"passes": res.diagnostics.passes, "rounds": res.diagnostics.rounds,
             "pass_tasks": res.diagnostics.pass_tasks}
if not mode.startswith("cluster"):
    seconds = time.perf_counter() - t0
rss = peak_rss_mib() * 2**20
print(json.dumps({"seconds": seconds, "peak_rss": rss, "bytes_read": store.bytes_read, **extra}))
"""


def run(mode: str, path: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PEAK_RSS_CODE + CHILD, mode, path],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(
    ns: list[int],
    repeat: int = 3,
    cluster_n: tuple[int, ...] = (),
    chunk: int = 2**20,
    xarray: bool = False,
) -> dict:
    """Every mode at every n (see the module's docstring); the result as a dict."""
    from kcpstream import datasets

    modes = ["baseline", "featurize-only", "kcpstream"]
    modes += ["xarray", "xarray-wide"] if xarray else []
    rows = []
    with tempfile.TemporaryDirectory(prefix="kcpstream-scale-") as tmp:
        for n in ns:
            path = os.path.join(tmp, f"s{n}.zarr")
            datasets.write_zarr(datasets.changing_distribution(n, 20, seed=0).x, path, chunks=chunk)
            size = store_bytes(path, metadata=False)
            clusters = ["cluster", "cluster-untrimmed", "processes"] if n in cluster_n else []
            runs: dict[str, list[dict]] = {m: [] for m in modes + clusters}
            for _ in range(repeat):  # interleaved, so that drift hits every mode alike
                for mode in modes + clusters:
                    runs[mode].append(run(mode, path))
            med = {m: float(np.median([r["seconds"] for r in rs])) for m, rs in runs.items() if rs}
            kcp = max(runs["kcpstream"], key=lambda r: r["peak_rss"])
            row = {
                "n": n,
                "chunk": chunk,
                "store_bytes": size,
                "baseline_seconds": med["baseline"],
                "featurize_only_seconds": med["featurize-only"],
                "kcpstream_seconds": med["kcpstream"],
                "ratio": med["kcpstream"] / med["baseline"],
                "ratio_to_featurize_only": med["kcpstream"] / med["featurize-only"],
                "peak_rss_mib": kcp["peak_rss"] / 2**20,
                "bytes_read_over_store": max(r["bytes_read"] for r in runs["kcpstream"]) / size,
                "baseline_bytes_read_over_store": runs["baseline"][0]["bytes_read"] / size,
                "passes": kcp["passes"],
                "rounds": kcp["rounds"],
                "pass_tasks": kcp["pass_tasks"],
                "all_seconds": {m: [r["seconds"] for r in rs] for m, rs in runs.items() if rs},
            }
            if "xarray" in med:
                row["xarray_seconds"] = med["xarray"]
                row["xarray_wide_seconds"] = med["xarray-wide"]
                row["xarray_dask_chunks"] = runs["xarray"][0]["n_chunks"]
                row["xarray_wide_dask_chunks"] = runs["xarray-wide"][0]["n_chunks"]
            if "cluster" in med:
                row["cluster_seconds"] = med["cluster"]
                row["cluster_over_threads"] = med["cluster"] / med["kcpstream"]
                row["cluster_untrimmed_seconds"] = med["cluster-untrimmed"]
                row["cluster_untrimmed_over_threads"] = med["cluster-untrimmed"] / med["kcpstream"]
                row["processes_seconds"] = med["processes"]
                row["processes_over_threads"] = med["processes"] / med["kcpstream"]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    ns = np.array([r["n"] for r in rows], dtype=float)
    ts = np.array([r["kcpstream_seconds"] for r in rows])
    growth = float(np.polyfit(np.log(ns), np.log(ts), 1)[0]) if len(rows) > 1 else None
    return {
        "benchmark": "scale",
        "rows": rows,
        "growth_exponent": growth,
        "repeat": repeat,
        "chunk": chunk,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, nargs="+", default=[1_000_000, 10_000_000, 100_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--cluster-n", type=int, nargs="*", default=[100_000_000],
        help="n at which a LocalCluster of 2 worker processes and dask's processes pool "
        "are timed too",
    )  # fmt: skip
    ap.add_argument("--chunk", type=int, default=2**20, help="samples per zarr chunk")
    ap.add_argument(
        "--xarray", action="store_true",
        help="also time segment(xr.open_zarr(store)['x']), as stored and in dask chunks of 2^20",
    )  # fmt: skip
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    result = measure(args.n, args.repeat, tuple(args.cluster_n), args.chunk, args.xarray)
    report(result, args.out, None)


if __name__ == "__main__":
    main()
