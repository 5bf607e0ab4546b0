"""Which multiple of the median heuristic should the Gaussian bandwidth be?

The median heuristic sets sigma to the median distance between samples.
Conventions differ by constant factors (ruptures' ``gamma = 1 / median(d^2)``
is sigma = median / sqrt(2)), and kcpstream's default has to pick one.  For
every signal below, ``--reps`` draws at each n, and sigma = scale x median for
every scale in ``SCALES``, kcpstream segments with its default features (64
Gauss-Hermite quadrature features for one channel, 64 random Fourier features
seeded by the draw for several) and binary segmentation:

* given the true number K of change-points: F1 (margin 1 % of n) and the
  Hausdorff distance to the truth;
* with ``pen="slope"``: the share of draws in which the chosen number of
  change-points is exactly K.

Signals (``kcpstream.datasets``), K change-points each:

* ``scenario1`` / ``scenario2``: the thesis's scenarios (law / shape changes);
* ``mean``: Gaussian noise around a piecewise-constant mean, jumps of 1 sd;
* ``mean-d3``: the same in 3 channels, jumps of 0.5 sd per channel;
* ``mixed``: ``changing_distribution`` (mean, scale or shape changes);
* ``corr-d3`` / ``corr-d8``: Gaussian channels whose correlation changes.

``--features laplacian`` / ``matern`` repeat the study for those kernels
(the default bandwidth rule is the same for every kernel).

Usage: python benchmarks/bench_bandwidth.py [--reps 30] [--n 1000 10000] [--k 10]
       [--features default|laplacian|matern] [--out bw.json]
       [--markdown benchmarks/results/bandwidth_results.md]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _report import machine, report

import kcpstream
from kcpstream import datasets, metrics
from kcpstream.features import default_feature_map
from kcpstream.features.bandwidth import median_distance

SCALES = (1.0, 2**-0.5, 0.5, 2**-1.5, 0.25)
FEATURES = {
    "default": "kcpstream's default features (64; quadrature for one channel, RFF for several)",
    "laplacian": "RFF of the Laplacian kernel (64; L1 median distance)",
    "matern": "RFF of the Matérn 3/2 kernel (64)",
}
SIGNALS = ("scenario1", "scenario2", "mean", "mean-d3", "mixed", "corr-d3", "corr-d8")


def make_signal(name: str, n: int, k: int, seed: int) -> datasets.SyntheticSignal:
    if name == "scenario1":
        return datasets.scenario1(n, k, seed=seed)
    if name == "scenario2":
        return datasets.scenario2(n, k, seed=seed)
    if name == "mean":
        return datasets.piecewise_constant(n, k, seed=seed)
    if name == "mean-d3":
        return datasets.piecewise_constant(n, k, d=3, jump=0.5, seed=seed)
    if name == "mixed":
        return datasets.changing_distribution(n, k, seed=seed)
    if name == "corr-d3":
        return datasets.multivariate(n, k, d=3, seed=seed)
    if name == "corr-d8":
        return datasets.multivariate(n, k, d=8, seed=seed)
    raise ValueError(f"unknown signal {name!r}")


def _feature_map(name: str, d: int, seed: int) -> kcpstream.FeatureMap:
    if name == "default":
        return default_feature_map(d, seed=seed)
    if name == "laplacian":
        return kcpstream.RFF(64, kernel="laplacian", seed=seed)
    return kcpstream.features.MaternRFF(64, nu=1.5, seed=seed)


def _metric(name: str) -> str:
    return "cityblock" if name == "laplacian" else "euclidean"


def run(
    reps: int, n_values: list[int], k: int, signals: list[str], feature_map: str = "default"
) -> dict:
    rows = []
    for n in n_values:
        for name in signals:
            f1 = np.zeros((len(SCALES), reps))
            haus = np.zeros((len(SCALES), reps))
            hit = np.zeros((len(SCALES), reps))
            t0 = time.perf_counter()
            for rep in range(reps):
                sig = make_signal(name, n, k, seed=10_000 + rep)
                x, true = sig.x, sig.changepoints
                median = median_distance(x.reshape(n, -1), _metric(feature_map))
                default = _feature_map(feature_map, x.reshape(n, -1).shape[1], rep)
                for i, scale in enumerate(SCALES):
                    fmap = type(default)(**{**default.get_params(), "bandwidth": scale * median})
                    found = kcpstream.segment(x, n_bkps=k, features=fmap).changepoints
                    f1[i, rep] = metrics.f1_score(true, found, max(1, n // 100))
                    haus[i, rep] = metrics.hausdorff(true, found)
                    auto = kcpstream.segment(x, features=fmap, pen="slope")
                    hit[i, rep] = auto.n_changepoints == k
            for i, scale in enumerate(SCALES):
                rows.append(
                    {
                        "signal": name,
                        "n": n,
                        "scale": scale,
                        "f1": float(f1[i].mean()),
                        "f1_se": float(f1[i].std() / np.sqrt(reps)),
                        "hausdorff": float(haus[i].mean()),
                        "auto_exact_k": float(hit[i].mean()),
                    }
                )
            print(f"# {name} n={n}: {time.perf_counter() - t0:.1f} s", flush=True)
    return {
        "reps": reps,
        "k": k,
        "features": feature_map,
        "scales": list(SCALES),
        "rows": rows,
        "machine": machine(),
    }


def markdown(result: dict) -> str:
    scales = result["scales"]
    head = " | ".join(f"{s:.3g}" for s in scales)
    lines = [
        "# Bandwidth as a multiple of the median heuristic",
        "",
        f"{result['reps']} draws per cell, K = {result['k']} change-points, "
        f"{FEATURES[result['features']]}, binary segmentation. Columns: sigma / median distance. "
        "Each cell: F1 given K (margin 1 % of n) / share of draws where "
        '`pen="slope"` chose exactly K. Best F1 of a row in bold.',
        "",
        f"| signal | n | {head} |",
        "|---|---|" + "---|" * len(scales),
    ]
    keyed: dict[tuple, list] = {}
    for row in result["rows"]:
        keyed.setdefault((row["signal"], row["n"]), []).append(row)
    for (signal, n), cells in keyed.items():
        best = max(c["f1"] for c in cells)
        parts = []
        for c in cells:
            f1 = f"{c['f1']:.2f}"
            if c["f1"] == best:
                f1 = f"**{f1}**"
            parts.append(f"{f1} / {c['auto_exact_k']:.2f}")
        lines.append(f"| {signal} | {n} | " + " | ".join(parts) + " |")
    lines.append("")
    lines.append("Mean over the rows:")
    lines.append("")
    lines.append(f"| | {head} |")
    lines.append("|---|" + "---|" * len(scales))
    for key, label in (("f1", "F1 given K"), ("auto_exact_k", 'pen="slope": exactly K')):
        means = [np.mean([r[key] for r in result["rows"] if r["scale"] == s]) for s in scales]
        lines.append(f"| {label} | " + " | ".join(f"{m:.3f}" for m in means) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--signals", nargs="+", default=list(SIGNALS), choices=SIGNALS)
    ap.add_argument("--features", default="default", choices=sorted(FEATURES))
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    result = run(args.reps, args.n, args.k, args.signals, args.features)
    report(result, args.out, args.markdown, markdown)


if __name__ == "__main__":
    main()
