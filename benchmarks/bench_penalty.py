"""How often could any multiple of the calibrated penalty find the true number of changes?

``pen="auto"`` picks D minimising ``C(D) + pen(D)`` with ``pen`` twice the
minimal penalty the slope heuristic fits on the path.  This benchmark asks
whether the share of runs with the exact number of change-points is limited
by that constant or by the data: on the thesis's scenario 1 (n = 1000, K = 10,
``--reps`` runs), for each configuration it segments once with
``pen="auto"`` and then re-selects D on the same path with ``alpha / 2``
times the calibrated penalty, for every alpha in ``ALPHAS`` (alpha = 2 is
``pen="auto"`` itself).  The best alpha is an oracle: no rule that scales the
penalty can beat it.

Configurations: the exact Gaussian kernel (Nyström with every sample, DP)
and RFF with 64 features (binary segmentation, kcpstream's default), at the
median-heuristic bandwidth sigma and at sigma / 2 (kcpstream's default), sigma / 4,
sigma / 8 and sigma / 16.

Usage: python benchmarks/bench_penalty.py [--reps 40] [--min-gap 90] [--out penalty.json]
       [--markdown penalty.md]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _report import report

import kcpstream
from kcpstream import datasets
from kcpstream.features.bandwidth import median_distance
from kcpstream.select import log_binomial_shape

ALPHAS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0)
CONFIGS = (  # (features, bandwidth / median heuristic, method)
    ("exact", 1.0, "dynp"),
    ("exact", 0.5, "dynp"),
    ("exact", 0.25, "dynp"),
    ("exact", 0.125, "dynp"),
    ("exact", 0.0625, "dynp"),
    ("RFF", 1.0, "binseg"),
    ("RFF", 0.5, "binseg"),
    ("RFF", 0.25, "binseg"),
    ("RFF", 0.125, "binseg"),
    ("RFF", 0.0625, "binseg"),
)


def run(reps: int, n: int = 1000, k: int = 10, min_gap: int | None = None) -> dict:
    rows = []
    for feat, scale, method in CONFIGS:
        hits = np.zeros(len(ALPHAS))
        for rep in range(reps):
            x = datasets.scenario1(n, k, seed=1000 + 100 * k + rep, min_gap=min_gap).x
            sigma = median_distance(x) * scale
            if feat == "exact":
                fmap = kcpstream.Nystrom(n, bandwidth=sigma, rcond=1e-12)
            else:
                fmap = kcpstream.RFF(64, bandwidth=sigma, seed=rep)
            res = kcpstream.segment(x, features=fmap, method=method)
            sel, costs = res.selection, res.path_costs
            d = np.arange(1, len(costs) + 1)
            calibrated = sel.c1 * log_binomial_shape(n, d) + sel.c2 * d  # alpha = 2
            for i, alpha in enumerate(ALPHAS):
                hits[i] += d[int(np.argmin(costs + alpha / 2 * calibrated))] == k + 1
        rates = hits / reps
        rows.append({
            "features": feat, "bandwidth_over_median": scale, "method": method,
            "exact_k_rate": dict(zip(map(str, ALPHAS), rates.tolist(), strict=True)),
            "auto": float(rates[ALPHAS.index(2.0)]),
            "best_alpha": ALPHAS[int(np.argmax(rates))], "best": float(rates.max()),
        })  # fmt: skip
    return {
        "benchmark": "penalty",
        "n": n,
        "n_changepoints": k,
        "min_gap": min_gap,
        "reps": reps,
        "rows": rows,
    }


def markdown(result: dict) -> str:
    head = " | ".join(f"α={a}" for a in ALPHAS)
    lines = [
        f"| features | σ / median | method | {head} | best |",
        "|---|---|---|" + "---|" * len(ALPHAS) + "---|",
    ]
    for r in result["rows"]:
        cells = " | ".join(f"{v:.2f}" for v in r["exact_k_rate"].values())
        lines.append(
            f"| {r['features']} | {r['bandwidth_over_median']} | {r['method']} | {cells} | "
            f"{r['best']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument(
        "--min-gap", type=int, default=None,
        help="samples between change-points (scenario 1's default: n / (2 (K + 1)); "
        "90 makes the 11 segments 90 to 100 samples long)",
    )  # fmt: skip
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    result = run(args.reps, min_gap=args.min_gap)
    result["seconds"] = time.perf_counter() - t0
    report(result, args.out, args.markdown, markdown)


if __name__ == "__main__":
    main()
