"""Samples per second: one long series against many series in one call, in one run.

Every workload reads float32 from a zarr store on disk, in a fresh process after
``kcpstream.warm_up()``, with the defaults (``pen="auto"``); its seconds, peak
RSS and samples per second are measured in the same run, so the ratios do not
depend on the machine:

* ``one 1e9``: one series of ``--scale`` x 10^9 samples (chunks of 2^20,
  ``datasets.changing_distribution(n, 20)``), ``segment(xr.open_zarr(...)["x"])``;
* ``1000 x 1e6`` and ``10000 x 1e5``: ``--scale`` x 1000 series of 10^6 and
  ``--scale`` x 10 000 series of 10^5 samples (bench_batch's store: one chunk
  per sensor, 3 changes each), ``segment(da, dim="time", batch_dims="sensor")``;
* ``128 x 1e5`` and its baseline ``one 1.28e7`` (not scaled).

Targets (issue "many series"): ``1000 x 1e6`` within 2x the time of ``one 1e9``
(the same samples), ``128 x 1e5`` within 3x of ``one 1.28e7``, peak RSS at most
1.5 GiB.  With ``--scale`` below 1 the first ratio compares the scaled
workloads (the same number of samples on each side).

With ``--repeat K`` the workloads run K rounds, one after the other in each
(a ratio is compared within a round: this machine's speed drifts between
runs by more than the targets' margins); each row is its median run, and the
128 x 1e5 ratio of each round is listed too.

Usage: python benchmarks/bench_throughput.py [--scale 1.0] [--dir /tmp/kcp-throughput]
       [--only NAME ...] [--repeat 1] [--out throughput.json] [--markdown results/throughput.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from _report import PEAK_RSS_CODE, machine, report
from bench_batch import store as batch_store

CHILD = (
    PEAK_RSS_CODE
    + r"""
import json, sys, time
import xarray as xr
import kcpstream

path, variable, batch = sys.argv[1], sys.argv[2], sys.argv[3] == "batch"
kcpstream.warm_up()
da = xr.open_zarr(path, chunks=None)[variable]
t = time.perf_counter()
if batch:
    found = [len(r.changepoints) for _, r in kcpstream.segment(da, dim="time", batch_dims="sensor")]
else:
    found = [len(kcpstream.segment(da, dim="time").changepoints)]
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "peak_rss_mib": peak_rss_mib(), "changepoints": sum(found)}))
"""
)


def one_store(n: int, root: str) -> str:
    """A store of one series of ``n`` samples with 20 changes, written if absent."""
    from kcpstream import datasets

    path = os.path.join(root, f"one-n{n}.zarr")
    if not os.path.exists(path):
        os.makedirs(root, exist_ok=True)
        datasets.write_zarr(datasets.changing_distribution(n, 20, seed=0).x, path + ".tmp")
        os.rename(path + ".tmp", path)
    return path


def workloads(scale: float) -> list[tuple[str, int, int]]:
    """``(name, series, samples per series)`` of every workload."""
    return [
        ("one 1e9", 1, int(scale * 10**9)),
        ("1000 x 1e6", max(1, round(scale * 1000)), 10**6),
        ("10000 x 1e5", max(1, round(scale * 10_000)), 10**5),
        ("128 x 1e5", 128, 10**5),
        ("one 1.28e7", 1, 128 * 10**5),
    ]


def measure(name: str, series: int, n: int, root: str) -> dict:
    if series == 1:
        path, variable, mode = one_store(n, root), "x", "single"
    else:
        path, variable, mode = batch_store(series, n, root), "v", "batch"
    res = subprocess.run([sys.executable, "-c", CHILD, path, variable, mode],
                         capture_output=True, text=True, check=True)  # fmt: skip
    out = json.loads(res.stdout.splitlines()[-1])
    samples = series * n
    return {"name": name, "series": series, "n": n, "samples": samples,
            "samples_per_second": samples / out["seconds"], **out}  # fmt: skip


def run(scale: float, root: str, only: list[str] | None, repeat: int = 1) -> dict:
    chosen = [w for w in workloads(scale) if not only or w[0] in only]
    # rounds of every workload in turn: a ratio is taken within a round (the
    # machine's speed drifts by more than the ratio's margin between runs)
    rounds = [[measure(name, s, n, root) for name, s, n in chosen] for _ in range(repeat)]
    rows = []
    for k in range(len(chosen)):
        runs = [r[k] for r in rounds]
        seconds = [r["seconds"] for r in runs]
        row = dict(sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2])  # the median run
        if repeat > 1:
            row["runs_seconds"] = seconds
        rows.append(row)
    by = {r["name"]: r for r in rows}

    def ratio(a: str, b: str) -> float | None:
        if a in by and b in by:
            return by[a]["seconds"] / by[b]["seconds"]
        return None

    def each_round(a: str, b: str) -> list[float] | None:
        names = [name for name, _, _ in chosen]
        if repeat < 2 or a not in names or b not in names:
            return None
        i, j = names.index(a), names.index(b)
        return [r[i]["seconds"] / r[j]["seconds"] for r in rounds]

    return {
        "scale": scale,
        "repeat": repeat,
        "rows": rows,
        "ratio_1000x1e6_to_one_1e9": ratio("1000 x 1e6", "one 1e9"),
        "ratio_128x1e5_to_one_1.28e7": ratio("128 x 1e5", "one 1.28e7"),
        "ratios_128x1e5_each_round": each_round("128 x 1e5", "one 1.28e7"),
        "targets": {"ratio_1000x1e6": 2.0, "ratio_128x1e5": 3.0, "peak_rss_mib": 1536},
        "machine": machine(),
    }


def markdown(r: dict) -> str:
    lines = [
        "# Throughput: one long series against many series in one call",
        "",
        f"`python benchmarks/bench_throughput.py --scale {r['scale']} --repeat {r['repeat']}`; "
        "float32 from zarr, defaults, a fresh process per workload after "
        "`kcpstream.warm_up()`; each row the median of its runs.",
        "",
        "| workload | series | samples | seconds | samples / s | peak RSS (MiB) | change-points |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in r["rows"]:
        lines.append(
            f"| {row['name']} | {row['series']} | {row['samples']:.3g} | {row['seconds']:.1f} | "
            f"{row['samples_per_second']:.3g} | {row['peak_rss_mib']:.0f} | "
            f"{row['changepoints']} |"
        )
    for key, target in (("ratio_1000x1e6_to_one_1e9", 2.0), ("ratio_128x1e5_to_one_1.28e7", 3.0)):
        if r[key] is not None:
            lines += ["", f"{key}: **{r[key]:.2f}** (target <= {target})"]
    if r.get("ratios_128x1e5_each_round"):
        each = ", ".join(f"{v:.2f}" for v in r["ratios_128x1e5_each_round"])
        lines += ["", f"128 x 1e5 to one 1.28e7, each round: {each}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--dir", default="/tmp/kcp-throughput")
    ap.add_argument("--only", nargs="*", help="workloads to run, by name (all by default)")
    ap.add_argument(
        "--repeat", type=int, default=1,
        help="rounds of the workloads; each row is its median run, ratios of medians",
    )  # fmt: skip
    ap.add_argument("--out")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    report(run(args.scale, args.dir, args.only, args.repeat), args.out, args.markdown, markdown)
