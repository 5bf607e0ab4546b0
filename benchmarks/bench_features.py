"""Feature maps side by side: kernel error, cost, detection accuracy.

For each registered map:

* kernel approximation error against p (mean absolute error of the Gram
  matrix on 500 points of a univariate sample, 5 seeds) -- against the
  Gaussian kernel (RFF, ORF, quadrature, Nyström, sketched Nyström), the
  Matérn kernel (Matérn RFF) or F(min(x, y)) (Brownian thresholds);
* cost: nanoseconds per sample and feature of the data pass's chunk task
  (featurize + block statistics) on 2^20 samples, p = 64, one thread;
* detection at matched p = 64: dynamic programming given the true number of
  change-points, mean Hausdorff distance and F1 (margin 10 samples) on the
  thesis's scenarios 1 and 2 (n = 1000, K = 10) and on a frequency change
  (a sine with 2 then 5 cycles per 64-sample window, random phase per
  window; 3 changes in 25600 samples; margin 64).

Prints JSON and writes a markdown table.

Usage: python benchmarks/bench_features.py [--reps 30]
       [--markdown benchmarks/results/feature_results.md]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _report import report
from scipy.spatial.distance import cdist

import kcpstream
from kcpstream import datasets, metrics
from kcpstream.features import (
    ORF,
    RFF,
    BrownianThreshold,
    InvariantWindow,
    MaternRFF,
    Nystrom,
    QuadratureFF,
    SketchedNystrom,
)
from kcpstream.passes.data import chunk_block_stats

MAPS = {
    "rff": lambda p, s: RFF(p, seed=s),
    "orf": lambda p, s: ORF(p, seed=s),
    "matern": lambda p, s: MaternRFF(p, nu=1.5, seed=s),
    "quadrature": lambda p, s: QuadratureFF(p),
    "brownian": lambda p, s: BrownianThreshold(p),
    "nystrom": lambda p, s: Nystrom(p, seed=s),
    "sketched_nystrom": lambda p, s: SketchedNystrom(p, density=0.1, seed=s),
}


def _exact(name, fmap, x):
    if name == "brownian":
        return None  # compared with F(min(x, y)) below
    s = fmap.bandwidth_
    if name == "matern":
        r = np.sqrt(3.0) * cdist(x, x) / s
        return (1 + r) * np.exp(-r)  # Matérn 3/2
    return np.exp(-cdist(x, x, "sqeuclidean") / (2 * s**2))


def kernel_errors(p_values=(8, 16, 32, 64, 128)) -> dict:
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(size=250), rng.gamma(2.0, size=250)][:, None]
    out = {}
    for name, make in MAPS.items():
        out[name] = {}
        for p in p_values:
            errs = []
            for seed in range(5):
                fmap = make(p, seed).fit(x)
                if name == "brownian":
                    xs = np.sort(x[:, 0])
                    truth = np.searchsorted(xs, np.minimum(x, x.T), side="right") / len(xs)
                else:
                    truth = _exact(name, fmap, x)
                errs.append(float(np.abs(fmap.gram(x) - truth).mean()))
            out[name][p] = float(np.mean(errs))
    return out


def costs(p: int = 64) -> dict:
    x = np.random.default_rng(1).normal(size=2**20).astype(np.float32)
    out = {}
    for name, make in {**MAPS, "window": None}.items():
        if name == "window":
            fmap = InvariantWindow(p, window=64, n_bins=8).fit(x[: 64 * 256].reshape(-1, 64))
            data, n = x.reshape(-1, 64), 2**20 // 64
        else:
            fmap = make(p, 0).fit(x[:2048])
            data, n = x, 2**20
        chunk_block_stats(data[:4096], 0, fmap, 128, 4096)
        t = time.perf_counter()
        chunk_block_stats(data, 0, fmap, 128, 4096)
        dt = time.perf_counter() - t
        out[name] = dt / (n * fmap.n_features_out_) * 1e9
        if name == "window":
            out[name + " (per sample)"] = dt / (2**20 * fmap.n_features_out_) * 1e9
    return out


def frequency_scenario(seed: int, n_windows: int = 400, w: int = 64):
    rng = np.random.default_rng(seed)
    cps = np.sort(rng.choice(np.arange(40, n_windows - 40, 20), size=3, replace=False))
    t = np.arange(w)
    freq = np.repeat([2, 5, 2, 5], np.diff(np.r_[0, cps, n_windows]))
    rows = [np.sin(2 * np.pi * f * t / w + rng.uniform(0, 2 * np.pi)) for f in freq]
    x = np.concatenate(rows) + 0.1 * rng.normal(size=n_windows * w)
    return x, cps * w


def detection(reps: int, p: int = 64) -> dict:
    out = {}
    scen = {
        "scenario 1": lambda r: datasets.scenario1(1000, 10, seed=500 + r),
        "scenario 2": lambda r: datasets.scenario2(1000, 10, seed=700 + r),
    }
    names = [*MAPS, "window"]
    for label, gen in [*scen.items(), ("frequency", None)]:
        out[label] = {}
        for name in names:
            hs, fs = [], []
            for r in range(reps):
                if gen is None:
                    x, truth = frequency_scenario(r)
                    margin = 64
                else:
                    sig = gen(r)
                    x, truth, margin = sig.x, sig.changepoints, 10
                if name == "window":
                    if gen is not None:
                        break  # window features are for oscillating signals
                    fmap = InvariantWindow(p, window=64, n_bins=8, seed=r)
                else:
                    fmap = MAPS[name](p, r)
                res = kcpstream.segment(x, features=fmap, n_bkps=len(truth), method="dynp")
                hs.append(metrics.hausdorff(truth, res.changepoints))
                fs.append(metrics.f1_score(truth, res.changepoints, margin))
            if hs:
                out[label][name] = {"hausdorff": float(np.mean(hs)), "f1": float(np.mean(fs))}
    return out


def markdown(result: dict) -> str:
    ps = sorted(next(iter(result["kernel_error"].values())), key=int)
    lines = ["| map | " + " | ".join(f"error p={p}" for p in ps) + " | ns / sample·feature | "
             + " | ".join(f"{s}: H / F1" for s in result["detection"]) + " |"]  # fmt: skip
    lines.append("|" + "---|" * (2 + len(ps) + len(result["detection"])))
    for name in [*MAPS, "window"]:
        errs = result["kernel_error"].get(name)
        cells = [f"{errs[p]:.1e}" for p in ps] if errs else ["—"] * len(ps)
        cost = result["cost_ns"].get(name)
        det = []
        for scen in result["detection"].values():
            d = scen.get(name)
            det.append(f"{d['hausdorff']:.0f} / {d['f1']:.2f}" if d else "—")
        lines.append(
            f"| {name} | " + " | ".join(cells) + f" | {cost:.2f} | " + " | ".join(det) + " |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    result = {
        "kernel_error": kernel_errors(),
        "cost_ns": costs(),
        "detection": detection(args.reps),
    }
    result["reps"] = args.reps
    result["seconds"] = time.perf_counter() - t0
    report(result, args.out, args.markdown, markdown)


if __name__ == "__main__":
    main()
