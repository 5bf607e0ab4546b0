"""What the short-side test costs: the time a default call spends bounding short pieces.

A split that leaves a short piece at a segment's end, in a series searched
sample by sample, is bounded by its samples' own law
(:func:`kcpstream.selection.edges.short_tail`).  For each family and n, the
script times ``segment(x)`` (defaults) and, in the same calls, the time
spent in ``short_tail`` (counted by wrapping it); ``ratio`` is the call's
time over the call's time without that part (the baseline: the same call
less the bound).  Median of ``--repeat`` draws after one warm-up call.

``--power DRAWS`` also measures what the bound costs in power: the share of
draws of 10^4 samples in which a short change is found (a change-point
within a fifth of its length, at least 10 samples, of either of its ends),
with short sides up to ``--edge-samples`` (default
:data:`~kcpstream.selection.edges.EDGE_SAMPLES`).

Usage: python benchmarks/bench_edges.py [--repeat 9] [--power 40]
       [--edge-samples 64] [--out edges.json]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _report import report

import kcpstream
from kcpstream.selection import choose, edges

FAMILIES = {
    "iid normal": lambda n, rng: rng.standard_normal(n),
    "flag 5 %": lambda n, rng: (rng.random(n) < 0.05).astype(np.float64),
    "two mean changes": lambda n, rng: (
        rng.standard_normal(n)
        + 0.7 * ((np.arange(n) >= n // 3).astype(float) - 2 * (np.arange(n) >= 2 * n // 3))
    ),
}


def run(repeat: int) -> dict:
    spent = [0.0, 0]
    real = choose.short_tail

    def timed(*args):
        t0 = time.perf_counter()
        try:
            return real(*args)
        finally:
            spent[0] += time.perf_counter() - t0
            spent[1] += 1

    choose.short_tail = timed
    out = {}
    try:
        for family, draw in FAMILIES.items():
            for n in (1_000, 10_000, 65_536):
                kcpstream.segment(draw(n, np.random.default_rng(0)))  # warm-up
                calls, bounds, counts = [], [], []
                for seed in range(1, repeat + 1):
                    x = draw(n, np.random.default_rng(seed))
                    spent[:] = [0.0, 0]
                    t0 = time.perf_counter()
                    kcpstream.segment(x)
                    calls.append(time.perf_counter() - t0)
                    bounds.append(spent[0])
                    counts.append(spent[1])
                call, bound = statistics.median(calls), statistics.median(bounds)
                out[f"{family} | {n}"] = {
                    "call_s": call,
                    "bound_s": bound,
                    "bounds_per_call": statistics.median(counts),
                    "ratio": call / (call - bound),
                }
    finally:
        choose.short_tail = real
    return out


#: Short changes in 10^4 samples: (start, length, draw of the series from a generator).
SHORT_CHANGES = {
    "mean +2 over 30": (6000, 30, lambda rng: _bump(rng.standard_normal(10_000), 6000, 30, 2.0)),
    "mean +0.8 over 200": (
        6000,
        200,
        lambda rng: _bump(rng.standard_normal(10_000), 6000, 200, 0.8),
    ),
    "flag 5 % -> 15 % over 200": (
        6000,
        200,
        lambda rng: np.r_[
            rng.random(6000) < 0.05, rng.random(200) < 0.15, rng.random(3800) < 0.05
        ].astype(np.float64),
    ),
    "mean +0.6 over the last 300": (
        9700,
        300,
        lambda rng: _bump(rng.standard_normal(10_000), 9700, 300, 0.6),
    ),
}


def _bump(x: np.ndarray, at: int, length: int, height: float) -> np.ndarray:
    x[at : at + length] += height
    return x


def power(draws: int) -> dict:
    out = {}
    for name, (at, length, draw) in SHORT_CHANGES.items():
        ends = np.array([at, at + length]) if at + length < 10_000 else np.array([at])
        hits = 0
        for seed in range(draws):
            found = kcpstream.segment(draw(np.random.default_rng([99, seed]))).changepoints
            hits += bool(np.any(np.abs(found[:, None] - ends) <= max(10, length // 5)))
        out[name] = hits / draws
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--power", type=int, default=0, help="draws per short change (0: none)")
    ap.add_argument("--edge-samples", type=int, default=edges.EDGE_SAMPLES)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    edges.EDGE_SAMPLES = args.edge_samples
    result = {
        "args": f"--repeat {args.repeat} --power {args.power} --edge-samples {args.edge_samples}",
        "edges": run(args.repeat),
    }
    if args.power:
        result["power"] = power(args.power)
    report(result, args.out, None)


if __name__ == "__main__":
    main()
