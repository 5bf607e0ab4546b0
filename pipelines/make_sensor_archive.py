"""Write a synthetic multi-sensor archive (the input of sensor_archive.toml).

Eight vibration sensors sampled at 100 Hz on a shared time axis; each sensor's
signal changes distribution at its own times (stored in the variable's
attributes as ``changepoints``).  Usage:

    python pipelines/make_sensor_archive.py [--n 200000] [--out pipelines/data/sensor_archive.zarr]
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import pandas as pd
import xarray as xr

from kcpstream import datasets


def make(n: int, sensors: int, seed: int = 0) -> xr.Dataset:
    sigs = [datasets.changing_distribution(n, 4 + s % 4, seed=seed + s) for s in range(sensors)]
    time = pd.date_range("2026-01-01", periods=n, freq="10ms")
    data = np.stack([s.x for s in sigs], axis=1).astype(np.float32)
    ds = xr.Dataset(
        {"vibration": (("time", "sensor"), data)},
        coords={"time": time, "sensor": [f"S{i:02d}" for i in range(sensors)]},
    )
    ds["vibration"].attrs["changepoints"] = json.dumps(
        {f"S{i:02d}": s.changepoints.tolist() for i, s in enumerate(sigs)}
    )
    return ds


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--sensors", type=int, default=8)
    ap.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "data", "sensor_archive.zarr")
    )
    args = ap.parse_args()
    ds = make(args.n, args.sensors)
    ds.chunk({"time": 50_000, "sensor": 1}).to_zarr(args.out, mode="w")
    print(f"wrote {args.out}: {args.sensors} sensors x {args.n} samples")


if __name__ == "__main__":
    main()
