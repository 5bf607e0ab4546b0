"""Small signals: the in-memory search against the block-grid search, in one run.

A series with ``n * p <= kcpstream.engine.plan.DENSE_MAX_VALUES`` is read whole,
featurized once, and binary segmentation runs over the exact prefix sum of
every position in one compiled loop.  Larger series use the block grid
(statistics of blocks of 64 or more samples, pruned exact scans, refinement
reads).  Both return the same change-points; this script measures which is
faster at each n, to place the threshold.

Signals: the thesis's scenario 1 (d = 1, 64 quadrature features) and an
8-channel signal (64 random Fourier features), 20 change-points, in memory
(numpy).  For each n, kcpstream ``segment(x, n_bkps=20)`` and ``segment(x)``
(``pen="auto"``: a path to 100 segments) run both ways: the block grid with
``block_size=64`` and the in-memory search (forced above the threshold by
raising ``DENSE_MAX_VALUES`` for the measurement).  Median of ``--repeat``
calls after one warm-up; ``ratio`` = block grid / in memory (above 1: the
in-memory search is faster).  The script asserts the two return the same
change-points.

Usage: python benchmarks/bench_small.py [--repeat 7] [--out small.json]
       [--markdown benchmarks/results/small_results.md]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _report import machine, report

import kcpstream
import kcpstream.engine.plan
from kcpstream import datasets

SIZES = (1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000)


def signal(kind: str, n: int) -> np.ndarray:
    if kind == "scenario1":
        return datasets.scenario1(n, 20, seed=0).x
    return datasets.multivariate(n, 20, d=8, seed=0).x


def timed(x: np.ndarray, repeat: int, **kw) -> tuple[float, kcpstream.Segmentation]:
    result = kcpstream.segment(x, **kw)  # warm-up (compilation, caches)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        kcpstream.segment(x, **kw)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    threshold = kcpstream.engine.plan.DENSE_MAX_VALUES
    rows = []
    for kind in ("scenario1", "multivariate8"):
        for n in args.sizes:
            x = signal(kind, n)
            for rule, kw in (("n_bkps=20", {"n_bkps": 20}), ("auto", {})):
                t_grid, grid = timed(x, args.repeat, block_size=64, **kw)
                kcpstream.engine.plan.DENSE_MAX_VALUES = 2**62  # in memory at every n
                try:
                    t_mem, mem = timed(x, args.repeat, **kw)
                finally:
                    kcpstream.engine.plan.DENSE_MAX_VALUES = threshold
                assert mem.diagnostics.in_memory and not grid.diagnostics.in_memory
                assert np.array_equal(mem.changepoints, grid.changepoints), (kind, n, rule)
                p = mem.features.n_features_out_
                rows.append({
                    "signal": kind, "n": n, "p": p, "rule": rule,
                    "seconds_block_grid": t_grid, "seconds_in_memory": t_mem,
                    "ratio": t_grid / t_mem, "in_memory_by_default": n * p <= threshold,
                })  # fmt: skip
                print(f"{kind} n={n} {rule}: grid {t_grid * 1e3:.2f} ms, "
                      f"in memory {t_mem * 1e3:.2f} ms", flush=True)  # fmt: skip
    result = {
        "benchmark": "small",
        "dense_max_values": threshold,
        "repeat": args.repeat,
        "machine": machine(),
        "rows": rows,
    }
    report(result, args.out, args.markdown, markdown)


def markdown(result: dict) -> str:
    lines = [
        "| signal | n | rule | block grid (ms) | in memory (ms) | ratio | default |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['signal']} | {r['n']} | {r['rule']} | {r['seconds_block_grid'] * 1e3:.2f} | "
            f"{r['seconds_in_memory'] * 1e3:.2f} | {r['ratio']:.2f} | "
            f"{'in memory' if r['in_memory_by_default'] else 'block grid'} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
