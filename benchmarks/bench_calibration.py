"""Calibration of the split test: how often a p-value is at most the level
when there is no change.

Two parts, each measured with the three-cumulant law the test uses and with
Satterthwaite's two-moment law (``tail_scale`` ignored) in the same run:

* ``formula``: the largest gain over the splits of ``m`` independent
  Gaussian vectors whose covariance has the eigenvalues given (a
  weighted sum of squared bridges, the law the test approximates), with the
  exact covariance: the share of draws whose p-value is at most 0.01 and 0.05;
* ``series``: ``kcpstream.segment(x, n_bkps=1)`` on stationary series (iid
  normal, a 5 % flag, AR(1) 0.5) of ``n`` samples, the first split's
  p-value with the noise estimated from the series, as the test gets it.

Prints JSON; ``ratio`` is a share divided by its level (1 is exact, above 1
too many false alarms).

Usage: python benchmarks/bench_calibration.py [--draws 4000] [--series 400] [--n 6000]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import numpy as np
from scipy.signal import lfilter

import kcpstream
from kcpstream.selection import significance
from kcpstream.selection.permutation import best_gains
from kcpstream.selection.significance import LongRunNoise, split_pvalue

LEVELS = (0.01, 0.05)

#: Eigenvalue spectra of the features' covariance.
SPECTRA = {
    "equal (4)": np.ones(4),
    "decaying 0.6^k (8)": 0.6 ** np.arange(8),
    "decaying 0.7^k (64)": 0.7 ** np.arange(64),
    "one large, 15 at 0.05": np.r_[1.0, np.full(15, 0.05)],
    "one large, 63 at 0.05": np.r_[1.0, np.full(63, 0.05)],
}


def weighted_maxima(weights: np.ndarray, m: int, trim: int, reps: int, seed: int) -> np.ndarray:
    """The largest gain over the splits of ``m`` independent N(0, diag(weights))
    vectors leaving ``trim`` on each side, ``reps`` times (200 at a time)."""
    rng = np.random.default_rng(seed)
    draws = (min(200, reps - first) for first in range(0, reps, 200))
    scale = np.sqrt(weights)
    return np.concatenate(
        [best_gains(rng.standard_normal((k, m, len(weights))) * scale, trim) for k in draws]
    )


def shares(p: np.ndarray) -> dict:
    out = {}
    for level in LEVELS:
        share = float(np.mean(p <= level))
        out[f"{level}"] = {"share": share, "ratio": share / level}
    return out


def run_formula(draws: int, m: int = 600, trim: int = 2) -> dict:
    out = {}
    for name, w in SPECTRA.items():
        maxima = weighted_maxima(w, m, trim, draws, seed=3)
        c1, c2, c3 = (float((w**k).sum()) for k in (1, 2, 3))
        two = LongRunNoise(trace=c1, scale=c2 / c1, dof=c1 * c1 / c2, batch=1, n_batches=m)
        three = replace(two, tail_scale=c3 / c2)
        out[name] = {
            law: shares(np.array([split_pvalue(g, m, trim, noise, steps=m) for g in maxima]))
            for law, noise in (("three cumulants", three), ("two moments", two))
        }
    return out


def _series(family: str, n: int, rng) -> np.ndarray:
    if family == "iid normal":
        return rng.standard_normal(n)
    if family == "flag 5 %":
        return (rng.random(n) < 0.05).astype(float)
    return lfilter([1.0], [1.0, -0.5], rng.standard_normal(n + 500))[500:]  # AR(1) 0.5


def run_series(count: int, n: int) -> dict:
    three = significance.tail_scale
    out = {}
    for family in ("iid normal", "flag 5 %", "AR(1) 0.5"):
        out[family] = {}
        for law, rule in (("three cumulants", three), ("two moments", lambda noise: noise.scale)):
            significance.tail_scale = rule
            try:
                p = [
                    kcpstream.segment(
                        _series(family, n, np.random.default_rng([77, n, s])), n_bkps=1
                    ).pvalues[0]
                    for s in range(count)
                ]
            finally:
                significance.tail_scale = three
            out[family][law] = shares(np.asarray(p))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--series", type=int, default=400)
    ap.add_argument("--n", type=int, default=6000)
    args = ap.parse_args()
    out = {
        "args": vars(args),
        "formula": run_formula(args.draws),
        "series": run_series(args.series, args.n),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
