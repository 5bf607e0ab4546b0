"""Threads against a LocalCluster, call after call, with the time split by phase.

``bench_scale`` times one call per fresh process; this one keeps a scheduler
(or cluster) alive and times ``--calls`` calls of ``segment(store, n_bkps=20,
features="rff:64")`` after a warm-up, so that the difference between
schedulers is not hidden by start-up costs (the first call of each process
is reported but left out of the medians).  Three schedulers, each in its own
subprocess: the threaded scheduler, a ``LocalCluster`` of 2 worker processes
(1 thread each) with distributed's default worker environment, and the same
cluster with ``MALLOC_TRIM_THRESHOLD_`` unset in the workers, interleaved
over ``--repeat`` rounds.  Each call
reports its seconds, the data pass's seconds (``diagnostics``), the
refinement rounds and the samples read again.

With ``--series S``, the store holds a batch of ``S`` series of ``--n``
samples each (a change of mean in each; chunks of 2^16 samples of one
series), segmented in one call with the defaults, ``segment(v, dim="time",
batch_dims="sensor")``; the samples read again are summed over the series.

Usage: python benchmarks/bench_cluster.py [--n 100000000] [--calls 3] [--repeat 2]
       [--series S] [--store PATH] [--out f.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from _report import report

CHILD = r"""
import json, sys, time
import dask, numpy as np, kcpstream

mode, path, calls, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "batch"

def warm():
    import dask, numpy as np, kcpstream
    with dask.config.set(scheduler="sync"):
        kcpstream.segment(np.arange(1000) % 7 * 1.0, n_bkps=1, features="rff:64")

def timed():
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        if batch:
            import xarray as xr
            v = xr.open_zarr(path, consolidated=False)["v"]
            results = kcpstream.segment(v, dim="time", batch_dims="sensor").results
        else:
            results = [kcpstream.segment(path, n_bkps=20, features="rff:64")]
        seconds = time.perf_counter() - t0
        ds = [r.diagnostics for r in results]
        out.append({"seconds": seconds, "data_pass": ds[0].seconds_data_pass,
                    "rounds": max(d.rounds for d in ds),
                    "samples_read_again": sum(d.samples_read_again for d in ds)})
    return out

if mode == "threads":
    with dask.config.set(scheduler="threads"):
        warm()
        rows = timed()
else:
    from distributed import Client, LocalCluster
    environ = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
    with dask.config.set({environ: None} if mode == "cluster-untrimmed" else {}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None)
    with cluster, Client(cluster) as client:
        client.run(warm)
        rows = timed()
print(json.dumps(rows))
"""

MODES = ("threads", "cluster", "cluster-untrimmed")


def measure(path: str, calls: int, repeat: int, batch: bool = False) -> dict:
    runs: dict[str, list[list[dict]]] = {mode: [] for mode in MODES}
    for _ in range(repeat):  # interleaved, so that drift hits every scheduler alike
        for mode in MODES:
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, mode, path, str(calls), "batch" if batch else "one"],
                capture_output=True, text=True, timeout=3600,
            )  # fmt: skip
            if proc.returncode:
                raise RuntimeError(proc.stderr[-2000:])
            runs[mode].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(mode, json.dumps(runs[mode][-1]), file=sys.stderr)
    # the first call of each process is left out of the medians (start-up costs)
    med = {
        mode: float(np.median([c["seconds"] for calls_ in rs for c in calls_[1:]]))
        for mode, rs in runs.items()
    }
    return {
        "benchmark": "cluster",
        "calls": calls,
        "repeat": repeat,
        "median_seconds": med,
        "cluster_over_threads": med["cluster"] / med["threads"],
        "cluster_untrimmed_over_threads": med["cluster-untrimmed"] / med["threads"],
        "runs": runs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=100_000_000)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--series", type=int, default=0, help="a batch of this many series")
    ap.add_argument("--store", default=None, help="an existing store (else one is written)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    batch = args.series > 0
    if args.store:
        report(measure(args.store, args.calls, args.repeat, batch), args.out, None)
        return
    from kcpstream import datasets

    with tempfile.TemporaryDirectory(prefix="kcpstream-cluster-") as tmp:
        path = os.path.join(tmp, "s.zarr")
        if batch:
            _write_batch(path, args.series, args.n)
        else:
            signal = datasets.changing_distribution(args.n, 20, seed=0)
            datasets.write_zarr(signal.x, path, chunks=2**20)
            del signal
        report(measure(path, args.calls, args.repeat, batch), args.out, None)


def _write_batch(path: str, series: int, n: int) -> None:
    """``series`` series of ``n`` float32 samples, a mean shift of 0.8 in each."""
    import xarray as xr

    rng = np.random.default_rng(0)
    x = rng.standard_normal((series, n)).astype("f4")
    for s in range(series):
        x[s, int(n * (0.2 + 0.6 * s / max(series, 1))) :] += 0.8
    data = xr.Dataset({"v": (("sensor", "time"), x)}).chunk({"sensor": 1, "time": 2**16})
    data.to_zarr(path, consolidated=False)


if __name__ == "__main__":
    main()
