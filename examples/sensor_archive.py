"""An xarray archive of several sensors on zarr: each sensor segmented on its own,
in one data pass, with times in the results.

    python examples/sensor_archive.py [--n 500000] [--sensors 4] [--out examples/output]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np
import pandas as pd
import xarray as xr

from kcpstream import datasets


def write_archive(path: str, n: int, sensors: int) -> dict[str, np.ndarray]:
    sigs = [datasets.changing_distribution(n, 3 + s, seed=10 + s) for s in range(sensors)]
    names = [f"S{i}" for i in range(sensors)]
    ds = xr.Dataset(
        {"vibration": (("time", "sensor"), np.stack([s.x for s in sigs], axis=1))},
        coords={"time": pd.date_range("2026-05-01", periods=n, freq="5ms"), "sensor": names},
    )
    ds.chunk({"time": 100_000, "sensor": 1}).to_zarr(path, mode="w")
    return {name: s.changepoints for name, s in zip(names, sigs, strict=True)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500_000)
    ap.add_argument("--sensors", type=int, default=4)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "output"))
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "archive.zarr")
        truth = write_archive(store, args.n, args.sensors)
        ds = xr.open_zarr(store)
        batch = ds["vibration"].kcp.segment(dim="time", batch_dims="sensor")
        print(batch)
        print(batch.to_dataframe().head(12))
        for name, res in batch:
            found = res.changepoints
            print(name["sensor"], "found", found.tolist(), "true", truth[name["sensor"]].tolist())

        import matplotlib

        matplotlib.use("Agg")
        os.makedirs(args.out, exist_ok=True)
        first = ds["vibration"].isel(sensor=0)
        ax = batch["S0"].plot(first, true_changepoints=truth["S0"])
        ax.figure.savefig(os.path.join(args.out, "sensor_archive_S0.png"), dpi=100)
        print("plot written to", args.out)


if __name__ == "__main__":
    main()
