"""Many short series: one batch call against a loop of single calls, in one run.

A zarr store holds ``--sensors`` series of ``--n`` float32 samples (an xarray
Dataset, dims ``time`` x ``sensor``, one chunk per sensor), each with 3
distribution changes.  Each mode runs in a fresh process after
``kcpstream.warm_up()``, on the store opened lazily
(``xr.open_zarr(chunks=None)``), defaults otherwise:

* ``batch``: ``segment(da, dim="time", batch_dims="sensor")``, one call;
* ``loop``: ``segment(da.isel(sensor=i), dim="time")`` for every sensor.

``speedup`` is loop seconds / batch seconds (target: at least 5); the
change-points of the two must be equal.

Usage: python benchmarks/bench_batch.py [--sensors 256] [--n 200000] [--dir /tmp/kcp-batch]
       [--out batch.json] [--markdown batch.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np
from _report import PEAK_RSS_CODE, machine, report

CHILD = (
    PEAK_RSS_CODE
    + r"""
import json, sys, time
import xarray as xr
import kcpstream

mode, path = sys.argv[1], sys.argv[2]
kcpstream.warm_up()
da = xr.open_zarr(path, chunks=None)["v"]
t = time.perf_counter()
if mode == "batch":
    batch = kcpstream.segment(da, dim="time", batch_dims="sensor")
    found = [r.changepoints.tolist() for _, r in batch]
else:
    found = [kcpstream.segment(da.isel(sensor=i), dim="time").changepoints.tolist()
             for i in range(da.sizes["sensor"])]
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "peak_rss_mib": peak_rss_mib(), "found": found}))
"""
)


def write_store(path: str, sensors: int, n: int) -> None:
    import xarray as xr

    from kcpstream import datasets

    x = np.empty((n, sensors), np.float32)
    for s in range(sensors):
        x[:, s] = datasets.changing_distribution(n, 3, seed=100 + s).x
    names = [f"S{i}" for i in range(sensors)]
    ds = xr.Dataset({"v": (("time", "sensor"), x)}, coords={"sensor": names})
    ds.chunk({"time": n, "sensor": 1}).to_zarr(path, mode="w")


def store(sensors: int, n: int, root: str) -> str:
    """The store of ``sensors`` series of ``n`` samples in ``root``, written if absent."""
    path = os.path.join(root, f"s{sensors}-n{n}.zarr")
    if not os.path.exists(path):
        os.makedirs(root, exist_ok=True)
        write_store(path, sensors, n)
    return path


def run(sensors: int, n: int, root: str) -> dict:
    path = store(sensors, n, root)
    out = {}
    for mode in ("batch", "loop"):
        res = subprocess.run([sys.executable, "-c", CHILD, mode, path],
                             capture_output=True, text=True, check=True)  # fmt: skip
        out[mode] = json.loads(res.stdout.splitlines()[-1])
    return {
        "sensors": sensors,
        "n": n,
        "batch_seconds": out["batch"]["seconds"],
        "loop_seconds": out["loop"]["seconds"],
        "speedup": out["loop"]["seconds"] / out["batch"]["seconds"],
        "batch_peak_rss_mib": out["batch"]["peak_rss_mib"],
        "loop_peak_rss_mib": out["loop"]["peak_rss_mib"],
        "same_changepoints": out["batch"]["found"] == out["loop"]["found"],
        "target_speedup": 5.0,
        "machine": machine(),
    }


def markdown(r: dict) -> str:
    return "\n".join([
        "# Many short series: one batch call against a loop of single calls",
        "",
        f"`python benchmarks/bench_batch.py --sensors {r['sensors']} --n {r['n']}`; "
        "float32 from zarr (xarray, one chunk per sensor), defaults, fresh processes "
        "after `kcpstream.warm_up()`.",
        "",
        "| mode | seconds | peak RSS (MiB) |",
        "|---|---|---|",
        f"| batch (`batch_dims=\"sensor\"`) | {r['batch_seconds']:.1f} | "
        f"{r['batch_peak_rss_mib']:.0f} |",
        f"| loop of single calls | {r['loop_seconds']:.1f} | {r['loop_peak_rss_mib']:.0f} |",
        "",
        f"Speed-up of the batch: **{r['speedup']:.2f}** (target >= 5); the same change-points: "
        f"{'yes' if r['same_changepoints'] else '**no**'}.",
        "",
    ])  # fmt: skip


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sensors", type=int, default=256)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--dir", default="/tmp/kcp-batch")
    ap.add_argument("--out")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    report(run(args.sensors, args.n, args.dir), args.out, args.markdown, markdown)
