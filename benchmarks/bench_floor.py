"""What every small call must do, part by part: the floor under ``segment`` at 10³ and 10⁴.

The peers' targets at small n ask for a whole call within a thirtieth of
ruptures' time (``suite.md``).  This script times, on the peers' signals
(scenario 1 with 64 quadrature features, 8 channels with 64 random Fourier
features; 20 change-points; in memory), the parts of ``segment(x,
n_bkps=20)`` that no call can skip, each alone: the median heuristic on the
fit sample (the bandwidth), featurizing every sample, the exact prefix sums
and binary segmentation to 40 splits over them, and the whole call (the
synchronous scheduler, so no thread pool is counted).  Median of
``--repeat`` calls after a warm-up.  ``kernels`` is the sum of the parts: a
call cannot take less with these kernels.

Usage: python benchmarks/bench_floor.py [--repeat 200] [--out floor.json]
"""

from __future__ import annotations

import argparse
import statistics
import time

import dask
import numpy as np
from _report import machine, report

import kcpstream
from kcpstream import datasets
from kcpstream._kernels.dense import dense_binseg, sample_prefix_sums
from kcpstream.features.bandwidth import median_distance
from kcpstream.inputs.signal import as_signal


def _ms(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def _signal(kind: str, n: int) -> np.ndarray:
    if kind == "scenario1":
        return datasets.scenario1(n, 20, seed=0).x.reshape(-1, 1).astype(np.float64)
    return datasets.multivariate(n, 20, d=8, seed=0).x


def _row(kind: str, n: int, repeat: int) -> dict:
    x = _signal(kind, n)
    with dask.config.set(scheduler="sync"):
        fmap = kcpstream.segment(x, n_bkps=20).features
        sample = as_signal(x).sample()  # the fit sample segment() takes
        z = fmap.tile_buffer(n)
        scale = float(2.0**fmap.quantum_exponent_)
        bound = float(fmap.quantized_norm_bound_)
        fmap.featurize_tile(x, z)
        prefix = sample_prefix_sums(z, scale, bound)[0]
        parts = {
            "median_heuristic": _ms(lambda: median_distance(sample), repeat),
            "featurize": _ms(lambda: fmap.featurize_tile(x, z), repeat),
            "prefix_sums": _ms(lambda: sample_prefix_sums(z, scale, bound), repeat),
            "binseg_40_splits": _ms(lambda: dense_binseg(prefix, 40, -np.inf, 2), repeat),
        }
        call = _ms(lambda: kcpstream.segment(x, n_bkps=20), max(10, repeat // 2))
    return {
        "signal": kind, "n": n, "features": type(fmap).__name__,
        "ms": parts, "kernels_ms": sum(parts.values()), "call_ms": call,
    }  # fmt: skip


def measure(repeat: int) -> dict:
    rows = [
        _row(kind, n, repeat) for kind in ("scenario1", "multivariate8") for n in (1_000, 10_000)
    ]
    return {"benchmark": "floor", "repeat": repeat, "machine": machine(), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    report(measure(args.repeat), args.out, None)


if __name__ == "__main__":
    main()
