"""Plots cost what the segmentation costs: peak memory and time of ``plot()``
and ``plot_gain()`` against the segmentation's, out of core.

A float32 zarr store of ``--n`` samples (chunks of 2^20) with three changes
of distribution is written once; then, each in a fresh process (its own peak
RSS, after a warm-up call on a small series that compiles the kernels):

* ``segment``: ``res = kcpstream.segment(store)``;
* ``plot``: the same, then ``res.plot()`` (the store is read again: the
  min/max envelope over 4000 bins);
* ``plot_gain``: the same, then ``res.plot_gain(segment=k)`` for the longest
  segment ``k`` (read again twice: its features' total, then the gains).

Reported: seconds of the plot call alone, the process's peak RSS, and the
ratio of each peak to the segmentation's (target: at most 1).

Usage: python benchmarks/bench_plots.py [--n 10000000] [--dir /tmp/kcp-plots]
       [--out plots.json] [--markdown results/plots.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from _report import machine, report

WRITE = """
import numpy as np, zarr
n = {n}
rng = np.random.default_rng(0)
z = zarr.create_array({path!r}, shape=(n,), chunks=(2**20,), dtype="f4", overwrite=True)
for lo in range(0, n, 2**22):
    hi = min(n, lo + 2**22)
    t = np.arange(lo, hi)
    x = rng.standard_normal(hi - lo) * np.where(t >= int(0.62 * n), 2.0, 1.0)
    x += np.where(t >= int(0.21 * n), 1.0, 0.0) - np.where(t >= int(0.83 * n), 1.0, 0.0)
    z[lo:hi] = x.astype("f4")
"""

CHILD = """
import json, resource, time
import numpy as np
import matplotlib
matplotlib.use("Agg")
import kcpstream
kcpstream.segment(np.random.default_rng(0).standard_normal(300_000))  # compiles
res = kcpstream.segment({path!r})
what = {what!r}
t = time.perf_counter()
if what == "plot":
    res.plot()
elif what == "plot_gain":
    longest = int(np.argmax([e - a for a, e in res.segments]))
    res.plot_gain(segment=longest)
seconds = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"seconds": seconds, "rss_mib": rss,
                  "changepoints": res.changepoints.tolist(), "segments": res.segments}}))
"""


def run(n: int, folder: str) -> dict:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"plots{n}.zarr")
    if not os.path.exists(path):
        subprocess.run([sys.executable, "-c", WRITE.format(n=n, path=path)], check=True)
    out = {}
    for what in ("segment", "plot", "plot_gain"):
        done = subprocess.run(
            [sys.executable, "-c", CHILD.format(path=path, what=what)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        out[what] = json.loads(done.stdout.splitlines()[-1])
    base = out["segment"]["rss_mib"]
    return {
        "n": n,
        **out,
        "rss_ratio_plot": out["plot"]["rss_mib"] / base,
        "rss_ratio_plot_gain": out["plot_gain"]["rss_mib"] / base,
        "target_rss_ratio": 1.0,
        "machine": machine(),
    }


def markdown(r: dict) -> str:
    rows = [
        f"| {what} | {r[what]['seconds']:.2f} s | {r[what]['rss_mib']:.0f} MiB |"
        for what in ("segment", "plot", "plot_gain")
    ]
    return "\n".join([
        "# Plots out of core",
        "",
        f"`python benchmarks/bench_plots.py --n {r['n']}`: a fresh process each; "
        "seconds of the plot call alone (0 for the segmentation's row), peak RSS of the process.",
        "",
        "| process | plot call | peak RSS |",
        "|---|---|---|",
        *rows,
        "",
        f"Peak RSS over the segmentation's: plot {r['rss_ratio_plot']:.2f}, plot_gain "
        f"{r['rss_ratio_plot_gain']:.2f} (target: at most 1).",
        "",
    ])  # fmt: skip


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--dir", default="/tmp/kcp-plots")
    ap.add_argument("--out")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    report(run(args.n, args.dir), args.out, args.markdown, markdown)
