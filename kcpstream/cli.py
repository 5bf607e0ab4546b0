"""The ``kcpstream`` command line."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import click
import numpy as np

__all__ = ["main"]


@click.group()
@click.version_option(package_name="kcpstream")
def main() -> None:
    """kcpstream: kernel change-point detection for very long signals."""


@main.command()
@click.option(
    "--n", "n", default=10_000_000, show_default=True, help="Samples in the synthetic signal."
)
@click.option("--n-bkps", default=10, show_default=True, help="True (and requested) change-points.")
@click.option("--features", default="rff:64", show_default=True, help="Feature map spec.")
@click.option("--chunk", default=2**20, show_default=True, help="zarr chunk length.")
@click.option("--seed", default=0, show_default=True, help="Seed of the signal and the features.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def demo(n: int, n_bkps: int, features: str, chunk: int, seed: int, as_json: bool) -> None:
    """Segment a synthetic signal with known change-points stored in a temporary zarr store."""
    from . import datasets, segment
    from .signal import InputError

    sig = datasets.changing_distribution(n, n_bkps, seed=seed)
    with tempfile.TemporaryDirectory(prefix="kcpstream-demo-") as tmp:
        store = os.path.join(tmp, "signal.zarr")
        t0 = time.perf_counter()
        datasets.write_zarr(sig.x, store, chunks=chunk)
        t_write = time.perf_counter() - t0
        try:
            res = segment(store, variable="x", n_bkps=n_bkps, features=features, seed=seed)
        except InputError as exc:
            raise click.ClickException(str(exc)) from None
    found = res.changepoints
    true = sig.changepoints
    dist = np.abs(found[:, None] - true[None, :])
    hausdorff = (
        int(max(dist.min(axis=0).max(), dist.min(axis=1).max())) if len(found) and len(true) else 0
    )
    d = res.diagnostics
    outcome = {
        "n": n,
        "true": true.tolist(),
        "found": found.tolist(),
        "hausdorff": hausdorff,
        "seconds_write": round(t_write, 3),
        "seconds_segment": round(d.seconds, 3),
        "passes": round(d.passes, 4),
        "block_size": d.block_size,
    }
    if as_json:
        click.echo(json.dumps(outcome))
        return
    click.echo(
        f"signal: {n:,} samples, {n_bkps} change-points, zarr chunks of {chunk:,} "
        f"(written in {t_write:.2f} s)"
    )
    click.echo(f"features: {res.features!r}")
    click.echo(f"{'true':>12} {'found':>12} {'offset':>8}")
    for t, f in zip(true, found, strict=False):
        click.echo(f"{t:>12,} {f:>12,} {int(f) - int(t):>8}")
    click.echo(f"Hausdorff distance: {hausdorff} samples ({hausdorff / n:.2e} of n)")
    click.echo(
        f"segmented in {d.seconds:.2f} s (data pass {d.seconds_data_pass:.2f} s); "
        f"samples featurized = {d.passes:.4f} x n; {d.rounds} refinement rounds"
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
