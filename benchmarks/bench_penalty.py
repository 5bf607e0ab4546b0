"""How often could any multiple of the calibrated penalty find the true number of changes?

``pen="slope"`` picks D minimising ``C(D) + pen(D)`` with ``pen`` twice the
minimal penalty the slope heuristic fits on the path.  This benchmark asks
whether the share of runs with the exact number of change-points is limited
by that constant or by the data: on the thesis's scenario 1 (n = 1000, K = 10,
``--reps`` runs), for each configuration it segments once with
``pen="slope"`` and then re-selects D on the same path with ``alpha / 2``
times the calibrated penalty, for every alpha in ``ALPHAS`` (alpha = 2 is
``pen="slope"`` itself).  The best alpha is an oracle: no rule that scales the
penalty can beat it.

Configurations: the exact Gaussian kernel (Nyström with every sample, DP)
and RFF with 64 features (binary segmentation, kcpstream's default), at the
median-heuristic bandwidth sigma and at sigma / 2 (kcpstream's default), sigma / 4,
sigma / 8 and sigma / 16.

Two wider bounds on each path, for the penalty family itself: "some
constants" is the share of runs in which *some* ``c1, c2 >= 0`` (chosen per
run, knowing the truth) make ``C(D) + c1 log binom(n-1, D-1) + c2 D`` smallest
at the true D (a linear feasibility problem per run); "shared constants" is
the best single pair for all runs, on costs relative to the run's ``C(1)``
(a grid of pairs).  A calibration that reads each run's path can land
anywhere between the two.

``--variants`` also re-runs the slope heuristic's own choices at kcpstream's
default bandwidth: ``d_max`` in 50, 100, 200 and the fitted share of the
path in 0.2 .. 0.8, each with its multiple oracle.

Usage: python benchmarks/bench_penalty.py [--reps 40] [--min-gap 90] [--variants]
       [--out penalty.json] [--markdown benchmarks/results/penalty_results.md]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _report import report
from scipy.optimize import linprog

import kcpstream
from kcpstream import datasets
from kcpstream.features.bandwidth import median_distance
from kcpstream.selection.rules import log_binomial_shape, slope_heuristic

ALPHAS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0)
#: Grid of shared constants (on costs relative to C(1)) for the "shared constants" bound.
SHARED_C1 = np.concatenate([[0.0], np.geomspace(1e-6, 1e-1, 51)])
SHARED_C2 = np.concatenate([[0.0], np.geomspace(1e-5, 1e-1, 41)])
D_MAXES = (50, 100, 200)
FIT_FRACTIONS = (0.2, 0.4, 0.6, 0.8)
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


def _signal(rep: int, n: int, k: int, min_gap: int | None, feat: str, scale: float):
    x = datasets.scenario1(n, k, seed=1000 + 100 * k + rep, min_gap=min_gap).x
    sigma = median_distance(x) * scale
    if feat == "exact":
        return x, kcpstream.Nystrom(n, bandwidth=sigma, rcond=1e-12)
    return x, kcpstream.RFF(64, bandwidth=sigma, seed=rep)


def alpha_hits(costs: np.ndarray, calibrated: np.ndarray, target: int) -> np.ndarray:
    """For each alpha of ``ALPHAS``, whether ``C(D) + alpha / 2 * calibrated(D)``
    is smallest at ``D = target`` (``calibrated`` is ``pen="slope"``'s penalty)."""
    return np.array([int(np.argmin(costs + a / 2 * calibrated)) + 1 == target for a in ALPHAS])


def some_constants_select(costs: np.ndarray, n: int, target: int) -> bool:
    """Whether some ``c1, c2 >= 0`` make ``costs[D-1] + c1 L(D) + c2 D`` smallest
    at ``D = target`` alone: maximise the margin ``m`` of the linear
    constraints ``C(t) - C(D) + c1 (L(t) - L(D)) + c2 (t - D) + m <= 0``."""
    d = np.arange(1, len(costs) + 1, dtype=float)
    shape = log_binomial_shape(n, d)
    y = costs / costs[0]
    t = target - 1
    rows = np.delete(np.arange(len(d)), t)
    a_ub = np.column_stack([shape[t] - shape[rows], d[t] - d[rows], np.ones(len(rows))])
    fit = linprog([0.0, 0.0, -1.0], A_ub=a_ub, b_ub=y[rows] - y[t],
                  bounds=[(0, None), (0, None), (None, 1.0)])  # fmt: skip
    return bool(fit.status == 0 and -fit.fun > 1e-12)


def shared_constants_rate(paths: list[np.ndarray], n: int, target: int) -> float:
    """Best share of runs selecting ``target`` with one pair ``(c1, c2)`` for all,
    on costs relative to ``C(1)``, over the grid ``SHARED_C1 x SHARED_C2``."""
    best = 0
    d_max = max(len(c) for c in paths)
    d = np.arange(1, d_max + 1, dtype=float)
    shape = log_binomial_shape(n, d)
    y = np.full((len(paths), d_max), np.inf)  # a shorter path never selects past its end
    for i, costs in enumerate(paths):
        y[i, : len(costs)] = costs / costs[0]
    for c1 in SHARED_C1:
        crit = y[:, None, :] + c1 * shape + SHARED_C2[:, None] * d  # (runs, c2, D)
        hits = (np.argmin(crit, axis=2) == target - 1).sum(axis=0)
        best = max(best, int(hits.max()))
    return best / len(paths)


def run(reps: int, n: int = 1000, k: int = 10, min_gap: int | None = None) -> dict:
    rows = []
    for feat, scale, method in CONFIGS:
        hits = np.zeros(len(ALPHAS))
        reachable = 0
        paths = []
        for rep in range(reps):
            x, fmap = _signal(rep, n, k, min_gap, feat, scale)
            res = kcpstream.segment(x, features=fmap, method=method, pen="slope")
            costs = np.asarray(res.path_costs, dtype=float)
            calibrated = res.selection.penalty(n, np.arange(1, len(costs) + 1))  # alpha = 2
            hits += alpha_hits(costs, calibrated, k + 1)
            reachable += some_constants_select(costs, n, k + 1)
            paths.append(costs)
        rates = hits / reps
        rows.append({
            "features": feat, "bandwidth_over_median": scale, "method": method,
            "exact_k_rate": dict(zip(map(str, ALPHAS), rates.tolist(), strict=True)),
            "auto": float(rates[ALPHAS.index(2.0)]),
            "best_alpha": ALPHAS[int(np.argmax(rates))], "best": float(rates.max()),
            "shared_constants": shared_constants_rate(paths, n, k + 1),
            "some_constants": reachable / reps,
        })  # fmt: skip
    return {
        "benchmark": "penalty",
        "n": n,
        "n_changepoints": k,
        "min_gap": min_gap,
        "reps": reps,
        "rows": rows,
    }


def variants(reps: int, n: int = 1000, k: int = 10, min_gap: int | None = None) -> list[dict]:
    """The slope heuristic with other path lengths and fit ranges, each with
    its oracle multiple, at kcpstream's default bandwidth (sigma / 2)."""
    rows = []
    for feat, method in (("exact", "dynp"), ("RFF", "binseg")):
        for d_max in D_MAXES:
            hits = np.zeros((len(FIT_FRACTIONS), len(ALPHAS)))
            for rep in range(reps):
                x, fmap = _signal(rep, n, k, min_gap, feat, 0.5)
                res = kcpstream.segment(x, features=fmap, method=method, d_max=d_max, pen="slope")
                costs = np.asarray(res.path_costs, dtype=float)
                d = np.arange(1, len(costs) + 1)
                for f, fraction in enumerate(FIT_FRACTIONS):
                    sel = slope_heuristic(costs, n, fit_fraction=fraction)
                    hits[f] += alpha_hits(costs, sel.penalty(n, d), k + 1)
            for f, fraction in enumerate(FIT_FRACTIONS):
                rates = hits[f] / reps
                rows.append({
                    "features": feat, "method": method, "d_max": d_max, "fit_fraction": fraction,
                    "auto": float(rates[ALPHAS.index(2.0)]), "best": float(rates.max()),
                    "best_alpha": ALPHAS[int(np.argmax(rates))],
                })  # fmt: skip
    return rows


def markdown(result: dict) -> str:
    head = " | ".join(f"α={a}" for a in ALPHAS)
    lines = [
        f"| features | σ / median | method | {head} | best α | shared constants | some constants |",
        "|---|---|---|" + "---|" * len(ALPHAS) + "---|---|---|",
    ]
    for r in result["rows"]:
        cells = " | ".join(f"{v:.2f}" for v in r["exact_k_rate"].values())
        lines.append(
            f"| {r['features']} | {r['bandwidth_over_median']} | {r['method']} | {cells} | "
            f"{r['best']:.2f} | {r['shared_constants']:.2f} | {r['some_constants']:.2f} |"
        )
    if result.get("variants"):
        lines += [
            "",
            "| features | method | d_max | fit fraction | α=2 (auto) | best α | rate at best α |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in result["variants"]:
            lines.append(
                f"| {r['features']} | {r['method']} | {r['d_max']} | {r['fit_fraction']} | "
                f"{r['auto']:.2f} | {r['best_alpha']} | {r['best']:.2f} |"
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
    ap.add_argument(
        "--variants", action="store_true",
        help="also the slope heuristic with d_max in 50/100/200 and fit fractions 0.2-0.8",
    )  # fmt: skip
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    result = run(args.reps, min_gap=args.min_gap)
    if args.variants:
        result["variants"] = variants(args.reps, min_gap=args.min_gap)
    result["seconds"] = time.perf_counter() - t0
    report(result, args.out, args.markdown, markdown)


if __name__ == "__main__":
    main()
