"""Gaps benchmark: a store with missing samples against the same store without, in one run.

Signal: n samples (default 1e8), d = 1, 20 change-points of the distribution,
float32 in zarr stores on local disk (chunks of 2**20).  The gapped store
holds the same samples with 5 % of them NaN: 4 % in 40 outages of equal
length at random places, 1 % dropped one by one.  Each store is segmented
(``segment(store, n_bkps=20, features="rff:64")``) in a fresh process, the
two alternating, ``--repeat`` times; each process reports its wall time and
peak RSS.  Prints one JSON object: ``ratio`` = gapped / gap-free median time
(target: <= 1.2), ``rss_ratio`` the same for peak memory (target: <= 1.1),
and the change-points' Hausdorff distance to the truth (for the gapped
store, counted in valid samples).

Usage: python benchmarks/bench_gaps.py [--n 100000000] [--repeat 3] [--out result.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import zarr
from _report import machine, peak_rss_mib, report

import kcpstream
from kcpstream import datasets

#: Missing share in outages and in dropped samples.
OUTAGES, OUTAGE_SHARE, DROPPED_SHARE = 40, 0.04, 0.01


def gap_mask(n: int, seed: int = 1) -> np.ndarray:
    """Which samples the gapped store leaves out (True: missing)."""
    rng = np.random.default_rng(seed)
    miss = np.zeros(n, bool)
    width = int(n * OUTAGE_SHARE / OUTAGES)
    for start in rng.choice(n - width, OUTAGES, replace=False):
        miss[start : start + width] = True
    miss[rng.choice(n, int(n * DROPPED_SHARE), replace=False)] = True
    return miss


def child(path: str, n_bkps: int, features: int) -> None:
    """Segment one store; print seconds, peak RSS and the change-points (JSON)."""
    t0 = time.perf_counter()
    res = kcpstream.segment(path, n_bkps=n_bkps, features=f"rff:{features}")
    seconds = time.perf_counter() - t0
    d = res.diagnostics
    print(
        json.dumps(
            {
                "seconds": seconds,
                "rss_mib": peak_rss_mib(),
                "changepoints": res.changepoints.tolist(),
                "passes": d.passes,
                "n_missing": d.n_missing,
                "seconds_data_pass": d.seconds_data_pass,
            }
        )
    )


def run_child(path: str, args) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", path, "--n-bkps", str(args.n_bkps),
         "--features", str(args.features)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=100_000_000)
    ap.add_argument("--n-bkps", type=int, default=20)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--chunk", type=int, default=2**20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.n_bkps, args.features)
        return

    sig = datasets.changing_distribution(args.n, args.n_bkps, seed=0)
    x = np.asarray(sig.x, dtype=np.float32)
    miss = gap_mask(args.n)
    with tempfile.TemporaryDirectory(prefix="kcpstream-bench-") as tmp:
        clean, gapped = os.path.join(tmp, "clean.zarr"), os.path.join(tmp, "gapped.zarr")
        datasets.write_zarr(x, clean, chunks=args.chunk)
        x[miss] = np.nan
        datasets.write_zarr(x, gapped, chunks=args.chunk)
        del x
        run_child(clean, args)  # warm-up: numba's cache, the page cache
        run_child(gapped, args)
        runs: dict[str, list[dict]] = {"clean": [], "gapped": []}
        for _ in range(args.repeat):
            runs["clean"].append(run_child(clean, args))
            runs["gapped"].append(run_child(gapped, args))

    def med(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[kind])

    # distances counted in valid samples (a change next to an outage may be
    # placed on either side of it: that is the data, not the search)
    valid = np.flatnonzero(~miss)
    true = np.searchsorted(valid, sig.changepoints)
    found = np.searchsorted(valid, np.asarray(runs["gapped"][-1]["changepoints"]))
    dist = np.abs(found[:, None] - true[None, :])
    clean = np.asarray(runs["clean"][-1]["changepoints"])
    clean_dist = np.abs(clean[:, None] - np.asarray(sig.changepoints)[None, :])
    result = {
        "benchmark": "gaps",
        "n": args.n,
        "missing": int(miss.sum()),
        "n_bkps": args.n_bkps,
        "n_features": args.features,
        "chunk": args.chunk,
        "repeat": args.repeat,
        "clean_seconds": med("clean", "seconds"),
        "gapped_seconds": med("gapped", "seconds"),
        "ratio": med("gapped", "seconds") / med("clean", "seconds"),
        "target_ratio": 1.2,
        "clean_rss_mib": med("clean", "rss_mib"),
        "gapped_rss_mib": med("gapped", "rss_mib"),
        "rss_ratio": med("gapped", "rss_mib") / med("clean", "rss_mib"),
        "target_rss_ratio": 1.1,
        "passes": {"clean": med("clean", "passes"), "gapped": med("gapped", "passes")},
        "hausdorff_valid_samples": int(max(dist.min(axis=0).max(), dist.min(axis=1).max())),
        "hausdorff_clean": int(max(clean_dist.min(axis=0).max(), clean_dist.min(axis=1).max())),
        "runs": runs,
        "machine": machine(),
        "versions": {"kcpstream": kcpstream.__version__, "zarr": zarr.__version__},
    }
    report(result, args.out, None)


if __name__ == "__main__":
    main()
