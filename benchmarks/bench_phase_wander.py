"""A cycle whose phase wanders: stationary series that no defaults should segment.

``sin(phi_t) + 0.3 e_t`` with ``phi`` advancing by ``2 pi / 50`` per sample
times ``1 + j z_t`` (``z`` iid normal: the phase is a random walk about the
cycle, a period that jitters from cycle to cycle) or times ``1 + f_t`` with
``f`` an AR(1) of coefficient 0.99 (a rate that wanders and comes back), at
n = 10^4 and 10^5, 20 draws each: the share of series given any
change-point and the mean count, with the defaults.

``--pair SHAPE``: the defaults' answer replaced by ``_pair.paired(x, SHAPE)``
(the defaults' map and ``Temporal(shape=SHAPE)`` on a cycle's windows, each at
half the level).

Usage: python benchmarks/bench_phase_wander.py [--draws 20] [--pair canonical] [--out F]
"""

from __future__ import annotations

import argparse

import numpy as np
from _pair import paired
from _report import report

import kcpstream

PERIOD = 50


def jittered(n: int, jitter: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    step = 2 * np.pi / PERIOD * (1 + jitter * rng.standard_normal(n))
    phase = np.cumsum(step) + rng.uniform(0, 2 * np.pi)
    return np.sin(phase) + 0.3 * rng.standard_normal(n)


def wandering_rate(n: int, seed: int, rho: float = 0.99) -> np.ndarray:
    rng = np.random.default_rng(seed)
    e = 0.02 * rng.standard_normal(n)
    f = np.empty(n)
    f[0] = 0.0
    for i in range(1, n):
        f[i] = rho * f[i - 1] + e[i]
    phase = np.cumsum(2 * np.pi / PERIOD * (1 + f)) + rng.uniform(0, 2 * np.pi)
    return np.sin(phase) + 0.3 * rng.standard_normal(n)


FAMILIES = {
    "jitter 5 %": lambda n, s: jittered(n, 0.05, s),
    "jitter 20 %": lambda n, s: jittered(n, 0.2, s),
    "AR(0.99) rate": wandering_rate,
}


def _segment(x: np.ndarray, pair: str | None):
    return kcpstream.segment(x) if pair is None else paired(x, pair)[0]


def run(draws: int, pair: str | None = None) -> dict:
    out = {}
    for name, make in FAMILIES.items():
        for n in (10_000, 100_000):
            counts = [_segment(make(n, seed), pair).n_changepoints for seed in range(draws)]
            out[f"{name} | {n}"] = {
                "draws": draws,
                "any": float(np.mean([c > 0 for c in counts])),
                "mean_count": float(np.mean(counts)),
            }
    return out


def markdown(result: dict) -> str:
    lines = ["# A cycle whose phase wanders", "", f"`python benchmarks/bench_phase_wander.py "
             f"{result['args']}`", "", "| family | n | draws | any change-point | mean count |",
             "|---|---|---|---|---|"]  # fmt: skip
    for k, v in result["wander"].items():
        lines.append(f"| {k} | {v['draws']} | {v['any']:.2f} | {v['mean_count']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--pair", default=None, help="a shape part paired with the defaults'")
    args = ap.parse_args()
    shown = f"--draws {args.draws}" + (f" --pair {args.pair}" if args.pair else "")
    result = {"args": shown, "wander": run(args.draws, args.pair)}
    report(result, args.out, args.markdown, markdown)


if __name__ == "__main__":
    main()
