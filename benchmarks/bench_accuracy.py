"""Accuracy: low-rank features against the exact Gaussian kernel (the thesis's experiments).

For scenarios 1 and 2 (``kcpstream.datasets``), n = 1000, 10 and 19
change-points, ``--reps`` repetitions each: every method is given the true
number of change-points and segments by dynamic programming; we report the
Hausdorff and Frobenius distances to the truth.

* exact: ruptures ``KernelCPD(kernel="rbf")`` (dynamic programming) with
  ``gamma = 1 / (2 sigma^2)``, sigma kcpstream's default bandwidth (half the
  median distance between samples) -- the same kernel as kcpstream's features
  (ruptures clips ``gamma d^2`` into [0.01, 100]).
* exact (kcpstream): Nyström with every sample as a landmark, DP on every sample.
* RFF and Nyström with p in {5, 10, 50, 100, 300} features, same sigma
  (RFF needs an even p: 6 stands in for 5).

Also, for ``pen="slope"`` (the slope heuristic) with RFF(64) (binseg and dynp): how often the chosen
number of change-points is the true one, and the distances.

Prints a JSON summary and writes a markdown table (``--markdown``).

Usage: python benchmarks/bench_accuracy.py [--reps 100] [--out acc.json]
       [--markdown benchmarks/results/accuracy_results.md]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np
import ruptures as rpt
from _report import report

import kcpstream
from kcpstream import datasets, metrics
from kcpstream.features.bandwidth import AUTO_FRACTION, median_distance

P_VALUES = (5, 10, 50, 100, 300)


def _distances(true, found, n):
    return metrics.hausdorff(true, found), metrics.frobenius(true, found, n)


def run(reps: int, n: int) -> dict:
    rows: dict[tuple, list] = defaultdict(list)
    for scenario in (1, 2):
        gen = datasets.scenario1 if scenario == 1 else datasets.scenario2
        for k in (10, 19):
            for rep in range(reps):
                sig = gen(n, k, seed=1000 * scenario + 100 * k + rep)
                x, true = sig.x, sig.changepoints
                sigma = AUTO_FRACTION * median_distance(x)
                if not sigma > 0:
                    sigma = 1.0
                gamma = 1.0 / (2.0 * sigma**2)
                ex = rpt.KernelCPD(kernel="rbf", params={"gamma": gamma}, min_size=2)
                exact = np.array(ex.fit(x).predict(n_bkps=k)[:-1])
                rows[(scenario, k, "exact (ruptures)", n)].append(_distances(true, exact, n))
                full = kcpstream.Nystrom(n, bandwidth=sigma, rcond=1e-12)
                ours = kcpstream.segment(x, features=full, n_bkps=k, method="dynp").changepoints
                rows[(scenario, k, "exact (kcpstream)", n)].append(_distances(true, ours, n))
                rows[(scenario, k, "agreement exact", n)].append(
                    (float(np.array_equal(ours, exact)), metrics.frobenius(exact, ours, n))
                )
                for p in P_VALUES:
                    for name, fmap in (
                        ("RFF", kcpstream.RFF(p + p % 2, bandwidth=sigma, seed=rep)),
                        ("Nystrom", kcpstream.Nystrom(p, bandwidth=sigma, seed=rep)),
                    ):
                        found = kcpstream.segment(x, features=fmap, n_bkps=k, method="dynp")
                        rows[(scenario, k, name, p)].append(
                            (*_distances(true, found.changepoints, n),
                             metrics.frobenius(exact, found.changepoints, n))
                        )  # fmt: skip
                for method in ("binseg", "dynp"):
                    res = kcpstream.segment(
                        x, features=kcpstream.RFF(64, seed=rep), method=method, pen="slope"
                    )
                    rows[(scenario, k, f"slope {method}", 64)].append(
                        (*_distances(true, res.changepoints, n), float(res.n_changepoints == k))
                    )
    summary = []
    for (scenario, k, method, p), values in sorted(rows.items()):
        v = np.asarray(values, dtype=float)
        row = {"scenario": scenario, "n_changepoints": k, "method": method, "p": p, "reps": len(v)}
        if method == "agreement exact":
            row.update(
                same_changepoints=float(v[:, 0].mean()), frobenius_between=float(v[:, 1].mean())
            )
        else:
            with np.errstate(invalid="ignore"):  # inf when a run found no change-point
                row.update(
                    hausdorff=float(v[:, 0].mean()),
                    hausdorff_sd=float(v[:, 0].std()),
                    frobenius=float(v[:, 1].mean()),
                    frobenius_sd=float(v[:, 1].std()),
                )
            if method in ("RFF", "Nystrom"):
                row["frobenius_to_exact"] = float(v[:, 2].mean())
            if method.startswith("slope"):
                row["exact_count_rate"] = float(v[:, 2].mean())
        summary.append(row)
    return {"benchmark": "accuracy", "n": n, "reps": reps, "rows": summary}


def markdown(result: dict) -> str:
    lines = [
        "| scenario | K | method | p | Hausdorff | Frobenius | Frobenius to exact | exact K |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        if r["method"] == "agreement exact":
            continue
        lines.append(
            f"| {r['scenario']} | {r['n_changepoints']} | {r['method']} | {r['p']} | "
            f"{r['hausdorff']:.1f} ± {r['hausdorff_sd']:.1f} | "
            f"{r['frobenius']:.3f} ± {r['frobenius_sd']:.3f} | "
            f"{r.get('frobenius_to_exact', float('nan')):.3f} | "
            f"{r.get('exact_count_rate', float('nan')):.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    result = run(args.reps, args.n)
    result["seconds"] = time.perf_counter() - t0
    report(result, args.out, args.markdown, markdown)


if __name__ == "__main__":
    main()
