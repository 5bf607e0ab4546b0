"""Many short series with a checkpoint: the first call, and the next one on
unchanged data, against the same call without a checkpoint, in one run.

A float32 zarr store of ``--sensors`` series of ``--n`` samples (one chunk per
series; every other series with a mean shift at its middle) is segmented in
one process after ``kcpstream.warm_up()``, with ``batch_dims="sensor"`` and
the defaults: without a checkpoint (the baseline), with a new checkpoint
(``written``) and again with it (``loaded``: a scheduled job on data that did
not change).  The change-points of the three calls must be the same.

Target (issue: many series): a loaded call costs about what the call without
a checkpoint costs (its ratio to it near 1), at any number of series.

Usage: python benchmarks/bench_checkpoint_batch.py [--sensors 800] [--n 5000]
       [--dir /tmp/kcp-checkpoint-batch] [--out checkpoint_batch.json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import time

import numpy as np
from _report import machine, report


def store(sensors: int, n: int, root: str) -> str:
    """The store of ``sensors`` series of ``n`` samples, written if absent."""
    import xarray as xr

    path = os.path.join(root, f"s{sensors}-n{n}.zarr")
    if not os.path.exists(path):
        x = np.random.default_rng(0).normal(size=(n, sensors)).astype(np.float32)
        x[n // 2 :, ::2] += 1.0
        ds = xr.Dataset({"v": (("time", "sensor"), x)})
        ds.to_zarr(path, encoding={"v": {"chunks": (n, 1)}})
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sensors", type=int, default=800)
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--dir", default="/tmp/kcp-checkpoint-batch")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    path = store(args.sensors, args.n, args.dir)

    import xarray as xr

    import kcpstream

    kcpstream.warm_up()
    da = xr.open_zarr(path, chunks=None)["v"]
    ck = os.path.join(args.dir, "checkpoint")
    shutil.rmtree(ck, ignore_errors=True)
    rows, found = {}, {}
    for name, kw in (("none", {}), ("written", {"checkpoint": ck}), ("loaded", {"checkpoint": ck})):
        t = time.perf_counter()
        results = kcpstream.segment(da, dim="time", batch_dims="sensor", **kw)
        seconds = time.perf_counter() - t
        states = sorted({r.diagnostics.checkpoint or "none" for _, r in results})
        found[name] = [r.changepoints.tolist() for _, r in results]
        rows[name] = {"seconds": seconds, "states": states}
    report(
        {
            "sensors": args.sensors,
            "n": args.n,
            "rows": rows,
            "ratio_written_to_none": rows["written"]["seconds"] / rows["none"]["seconds"],
            "ratio_loaded_to_none": rows["loaded"]["seconds"] / rows["none"]["seconds"],
            "same_changepoints": found["none"] == found["written"] == found["loaded"],
            "machine": machine(),
        },
        args.out,
        None,
    )


if __name__ == "__main__":
    main()
