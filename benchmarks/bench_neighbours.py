"""What the nearest neighbours' part costs a short series, in one run.

A series of one channel and at most ``NEIGHBOUR_SAMPLES`` samples in which
``features="auto"`` finds a cycle, or whose samples depend on each other, is
also tested by its subsequences' nearest neighbours
(``kcpstream.selection.neighbours``), ``O(n^2)`` work.  This script times the
default call with the part and without it (the baseline: the same call with
the engine's cap set to 0 for the measurement, so that the other parts
answer alone), on ``sin(2 pi t / 40) + 0.4 e_t`` of 10^3, 10^4 and 2^15
samples, a batch of 128 series of 10^4 (``batch_dims``), and an AR(1) with
``phi = 0.9`` (no cycle, dependent samples) of 10^4 and 2^15.  Best of
``--repeat`` calls after one warm-up; ``ratio`` = with / without.

Usage: python benchmarks/bench_neighbours.py [--repeat 3] [--out neighbours.json]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import xarray as xr
from _report import report

import kcpstream
import kcpstream.engine.pair as pair

CAP = pair.NEIGHBOUR_SAMPLES


def _cycle(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return np.sin(2 * np.pi * t / 40 + rng.uniform(0, 6)) + 0.4 * rng.standard_normal(n)


def _ar(n: int, seed: int) -> np.ndarray:
    e = np.random.default_rng(seed).standard_normal(n)
    x = np.empty(n)
    x[0] = e[0]
    for i in range(1, n):
        x[i] = 0.9 * x[i - 1] + e[i]
    return x


def _best(call, repeat: int) -> float:
    call()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return min(times)


def _timed(call, repeat: int) -> dict:
    out = {}
    for label, cap in (("without", 0), ("with", CAP)):
        pair.NEIGHBOUR_SAMPLES = cap
        try:
            out[label] = _best(call, repeat)
        finally:
            pair.NEIGHBOUR_SAMPLES = CAP
    out["ratio"] = out["with"] / out["without"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    result: dict = {}
    for n in (1_000, 10_000, 1 << 15):
        x = _cycle(n, 1)
        result[f"one series of {n}"] = _timed(lambda x=x: kcpstream.segment(x), args.repeat)
    xs = xr.DataArray(np.stack([_cycle(10_000, s) for s in range(128)]), dims=("sensor", "time"))
    batch = lambda: kcpstream.segment(xs, dim="time", batch_dims="sensor")  # noqa: E731
    result["128 series of 10000"] = _timed(batch, args.repeat)
    for n in (10_000, 1 << 15):
        x = _ar(n, 2)
        result[f"AR(0.9), {n}"] = _timed(lambda x=x: kcpstream.segment(x), args.repeat)
    report(result, args.out, None)


if __name__ == "__main__":
    main()
