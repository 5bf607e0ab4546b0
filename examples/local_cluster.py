"""The sensor-archive job on a local dask cluster with worker processes.

kcpstream hands its task graphs to whatever dask scheduler is active: here a
distributed.LocalCluster. The result equals the threaded scheduler's.

    python examples/local_cluster.py [--n 500000] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import dask
import xarray as xr
from distributed import Client, LocalCluster
from sensor_archive import write_archive


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500_000)
    ap.add_argument("--sensors", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "archive.zarr")  # on disk: worker processes can read it
        write_archive(store, args.n, args.sensors)
        vib = xr.open_zarr(store)["vibration"]
        with (
            LocalCluster(
                n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            print(client)
            on_cluster = vib.kcp.segment(batch_dims="sensor", n_bkps=5)
        with dask.config.set(scheduler="threads"):
            threaded = vib.kcp.segment(batch_dims="sensor", n_bkps=5)
        for (labels, a), (_, b) in zip(on_cluster, threaded, strict=True):
            same = a.changepoints.tolist() == b.changepoints.tolist()
            print(labels["sensor"], a.changepoints.tolist(), "same as threaded:", same)
            assert same


if __name__ == "__main__":
    main()
