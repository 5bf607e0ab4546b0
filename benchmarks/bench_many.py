"""A thousand sensors in one call: ``--sensors`` series of ``--n`` samples from one store.

A zarr store holds ``--sensors`` series of ``--n`` float32 samples (an xarray
Dataset, dims ``time`` x ``sensor``, one chunk per sensor), each with 3
distribution changes (``datasets.changing_distribution(n, 3, seed=100 + s)``).
One call, ``segment(da, dim="time", batch_dims="sensor", progress=True)`` on the
store opened lazily, runs in a fresh process after ``kcpstream.warm_up()``:
its seconds, peak RSS, the progress lines it printed, and how many of the true
change-points were found within 1 % of n (and how many more were found).

Usage: python benchmarks/bench_many.py [--sensors 1000] [--n 1000000] [--dir /tmp/kcp-many]
       [--out many.json] [--markdown results/many.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np
from _report import PEAK_RSS_CODE, machine, report
from bench_batch import store

CHILD = (
    PEAK_RSS_CODE
    + r"""
import json, sys, time
import xarray as xr
import kcpstream

path = sys.argv[1]
kcpstream.warm_up()
da = xr.open_zarr(path, chunks=None)["v"]
t = time.perf_counter()
batch = kcpstream.segment(da, dim="time", batch_dims="sensor", progress=True)
seconds = time.perf_counter() - t
found = [r.changepoints.tolist() for _, r in batch]
print(json.dumps({"seconds": seconds, "peak_rss_mib": peak_rss_mib(), "found": found}))
"""
)


def truth(sensors: int, n: int) -> list[list[int]]:
    from kcpstream import datasets

    return [datasets.changing_distribution(n, 3, seed=100 + s).changepoints.tolist()
            for s in range(sensors)]  # fmt: skip


def run(sensors: int, n: int, root: str) -> dict:
    path = store(sensors, n, root)  # bench_batch's store: 3 changes per series
    res = subprocess.run([sys.executable, "-c", CHILD, path],
                         capture_output=True, text=True, check=True)  # fmt: skip
    out = json.loads(res.stdout.splitlines()[-1])
    margin = n // 100
    hit = extra = total = 0
    for true, got in zip(truth(sensors, n), out["found"], strict=True):
        got = np.asarray(got)
        matched = sum(bool(got.size) and np.abs(got - c).min() <= margin for c in true)
        hit, total, extra = hit + matched, total + len(true), extra + max(0, len(got) - matched)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    return {
        "sensors": sensors,
        "n": n,
        "seconds": out["seconds"],
        "peak_rss_mib": out["peak_rss_mib"],
        "true_found": hit,
        "true_total": total,
        "extra_found": extra,
        "progress_lines": [ln for ln in lines if "Completed" not in ln],
        "machine": machine(),
    }


def markdown(r: dict) -> str:
    progress = "\n".join(f"    {ln}" for ln in r["progress_lines"])
    return "\n".join([
        f"# {r['sensors']} series of {r['n']} samples in one call",
        "",
        f"`python benchmarks/bench_many.py --sensors {r['sensors']} --n {r['n']}`; float32 "
        "from zarr (xarray, one chunk per sensor, 3 changes per series), defaults, a fresh "
        "process after `kcpstream.warm_up()`.",
        "",
        "| seconds | peak RSS (MiB) | true change-points found (1 % of n) | others found |",
        "|---|---|---|---|",
        f"| {r['seconds']:.1f} | {r['peak_rss_mib']:.0f} | {r['true_found']} of "
        f"{r['true_total']} | {r['extra_found']} |",
        "",
        "Its progress lines (stderr; the data pass's bar left out):",
        "",
        progress,
        "",
    ])  # fmt: skip


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sensors", type=int, default=1000)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dir", default="/tmp/kcp-many")
    ap.add_argument("--out")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    report(run(args.sensors, args.n, args.dir), args.out, args.markdown, markdown)
