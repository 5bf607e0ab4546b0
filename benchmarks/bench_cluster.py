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

Usage: python benchmarks/bench_cluster.py [--n 100000000] [--calls 3] [--repeat 2]
       [--store PATH] [--out f.json]
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

mode, path, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])

def warm():
    import dask, numpy as np, kcpstream
    with dask.config.set(scheduler="sync"):
        kcpstream.segment(np.arange(1000) % 7 * 1.0, n_bkps=1, features="rff:64")

def timed():
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        res = kcpstream.segment(path, n_bkps=20, features="rff:64")
        d = res.diagnostics
        out.append({"seconds": time.perf_counter() - t0, "data_pass": d.seconds_data_pass,
                    "rounds": d.rounds, "samples_read_again": d.samples_read_again})
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


def measure(path: str, calls: int, repeat: int) -> dict:
    runs: dict[str, list[list[dict]]] = {mode: [] for mode in MODES}
    for _ in range(repeat):  # interleaved, so that drift hits every scheduler alike
        for mode in MODES:
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, mode, path, str(calls)],
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
    ap.add_argument("--store", default=None, help="an existing store (else one is written)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.store:
        report(measure(args.store, args.calls, args.repeat), args.out, None)
        return
    from kcpstream import datasets

    with tempfile.TemporaryDirectory(prefix="kcpstream-cluster-") as tmp:
        path = os.path.join(tmp, "s.zarr")
        signal = datasets.changing_distribution(args.n, 20, seed=0)
        datasets.write_zarr(signal.x, path, chunks=2**20)
        del signal
        report(measure(path, args.calls, args.repeat), args.out, None)


if __name__ == "__main__":
    main()
