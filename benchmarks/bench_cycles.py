"""Cyclic archives: daily cycles with changes, and several channels.

Generated series (seeds 1000 and up, apart from the tests'), every call with
kcpstream's defaults (``segment(x)``), beside the pointwise default map
(``features="quadrature"`` for one channel: samples one by one, the cycle
left to the test's long-run noise) measured in the same run:

* ``single``: one channel, a cycle of period P (1440 and 8640 samples, a day
  at one minute and at ten seconds, and 2345.6, no whole number of
  samples) with AR(1) noise (phi 0.6) and a linear drift, at n = 2e6 and 4e6,
  with 1 to 3 changes drawn among a level shift, a change of the cycle's
  amplitude and a change of the noise around it (positions at least 10 % of
  n apart and from the ends); and the same without change (the null);
* ``channels``: a temperature with a daily cycle, a pressure (AR noise) and a
  vibration of tiny scale, 5 changes each in one channel, every order of the
  channels and with an independent noise channel added;
* ``long``: the single-channel series at n = 1e7 (and 1e8 with
  ``--max-n 100000000``), fewer draws;
* ``periods``: the single-channel series at periods from 7.3 to 99 999.5
  samples (:data:`PERIODS`), none a whole number of samples.

For each configuration: the share of draws segmented exactly right (the
true count, each change-point within 1 % of n of a true one), the false
change-points per series (found beyond 1 % of n of every true one), the
change-points a null series got, and the seconds per call.

Prints JSON and writes a markdown table (``--markdown``).

Usage: python benchmarks/bench_cycles.py [--draws 20] [--max-n 10000000] [--parts periods]
       [--out cycles.json] [--markdown results/cycles.md]

``--pair SHAPE``: every defaults' call answered by ``_pair.paired(x, SHAPE)``
(the defaults' map and ``Temporal(shape=SHAPE)`` on a cycle's windows, each at
half the level), to measure that rule on the same draws.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
from _pair import paired
from _report import report
from scipy.signal import lfilter

import kcpstream

KINDS = ("level", "amplitude", "noise")
SIZES = {"level": 0.8, "amplitude": 1.5, "noise": 0.8}


def cyclic(n: int, period: float, rng: np.random.Generator, changes) -> np.ndarray:
    """A cycle of ``period`` samples, AR(1) noise (phi 0.6), a drift; ``changes``:
    ``(at, kind)`` with a random sign for the level and the amplitude."""
    t = np.arange(n)
    amp, sd, level = np.full(n, 3.0), np.full(n, 0.5), np.zeros(n)
    for at, kind in changes:
        sign = rng.choice([-1.0, 1.0]) if kind != "noise" else 1.0
        {"level": level, "amplitude": amp, "noise": sd}[kind][at:] += sign * SIZES[kind]
    noise = lfilter([1.0], [1.0, -0.6], rng.standard_normal(n)) * np.sqrt(1 - 0.36)
    phase = rng.uniform(0, 2 * np.pi)
    drift = rng.uniform(-1, 1) * t / n
    return (20 + amp * np.sin(2 * np.pi * t / period + phase) + sd * noise + level + drift).astype(
        "f4"
    )


def _positions(n: int, k: int, rng: np.random.Generator) -> list[int]:
    """``k`` change positions at least 10 % of n apart and from the ends."""
    while True:
        at = sorted(int(v) for v in rng.uniform(0.1, 0.9, k) * n)
        if all(b - a >= n // 10 for a, b in zip(at, at[1:], strict=False)):
            return at


def score(found, true, n: int) -> tuple[bool, int]:
    """``(exact, false)``: the true count with every change-point within 1 % of n
    of a true one, and the change-points not within 1 % of n of any."""
    margin = n // 100
    found = np.asarray(found, dtype=np.int64)
    near = [bool(true) and min(abs(int(c) - t) for t in true) <= margin for c in found]
    exact = (
        len(found) == len(true)
        and all(near)
        and all(min(abs(int(c) - t) for c in found) <= margin for t in true)
    )
    return exact, int(sum(not v for v in near))


def _row(runs) -> dict:
    return {
        "draws": len(runs),
        "exact": float(np.mean([r[0] for r in runs])),
        "false_per_series": float(np.mean([r[1] for r in runs])),
        "seconds": float(np.mean([r[2] for r in runs])),
    }


#: The ``periods`` part: periods from a few samples to 10⁵, none a whole number
#: of samples nor a multiple of the 64-sample blocks, each at a size holding
#: at least 100 cycles (a change-point is placed at a window's edge, and a
#: window holds at least a cycle: within the 1 % margin only from 100 cycles).
PERIODS = ((1_000_000, 7.3), (1_000_000, 24.3), (1_000_000, 100.5), (1_000_000, 333.25),
           (2_000_000, 12_345.6), (10_000_000, 99_999.5))  # fmt: skip


def _segment(x: np.ndarray, features: str, pair: str | None):
    """``segment(x, features=features)``; with ``pair`` (``--pair SHAPE``), the
    defaults' call answered by ``_pair.paired(x, pair)``."""
    if features == "auto" and pair is not None:
        return paired(x, pair)[0]
    return kcpstream.segment(x, features=features)


def run_single(
    draws: int, sizes: list[int], periods=(1440, 8640, 2345.6), pair: str | None = None
) -> dict:
    return run_cells(draws, list(itertools.product(sizes, periods)), pair)


def run_cells(draws: int, cells: list[tuple[int, float]], pair: str | None = None) -> dict:
    out: dict = {}
    for n, period in cells:
        rng = np.random.default_rng([1000, n, int(period * 10)])
        auto, pointwise, null_auto, null_point = [], [], [], []
        for _ in range(draws):
            k = int(rng.integers(1, 4))
            at = _positions(n, k, rng)
            x = cyclic(n, period, rng, [(a, str(rng.choice(KINDS))) for a in at])
            for runs, features in ((auto, "auto"), (pointwise, "quadrature")):
                t0 = time.perf_counter()
                res = _segment(x, features, pair)
                runs.append((*score(res.changepoints, at, n), time.perf_counter() - t0))
            x = cyclic(n, period, rng, [])
            for runs, features in ((null_auto, "auto"), (null_point, "quadrature")):
                t0 = time.perf_counter()
                res = _segment(x, features, pair)
                runs.append((res.n_changepoints == 0, res.n_changepoints, time.perf_counter() - t0))
        out[f"P={period} n={n}"] = {
            "defaults": _row(auto),
            "pointwise": _row(pointwise),
            "null defaults": _row(null_auto),
            "null pointwise": _row(null_point),
        }
        print(f"P={period} n={n}", out[f"P={period} n={n}"], flush=True)
    return out


def _channels(n: int, rng: np.random.Generator) -> tuple[dict, list[int]]:
    t = np.arange(n)
    cps = _positions(n, 5, rng)
    temp = 15 + 5 * np.sin(2 * np.pi * t / 1440 + rng.uniform(0, 6.3))
    temp = temp + lfilter([1], [1, -0.8], rng.standard_normal(n))
    pres = 1013 + lfilter([1], [1, -0.9], rng.standard_normal(n))
    vib = 0.01 * rng.standard_normal(n)
    where = rng.permutation(5)  # which change goes to which channel
    for i, c in enumerate(cps):
        kind = int(where[i])
        if kind in (0, 1):
            temp[c:] += rng.choice([-1.5, 1.5])
        elif kind in (2, 3):
            pres[c:] += rng.choice([-3.0, 3.0])
        else:
            vib[c:] *= 2.0
    chans = {"temperature": temp, "pressure": pres, "vibration": vib}
    chans["noise"] = rng.standard_normal(n)
    return {k: v.astype("f4") for k, v in chans.items()}, cps


def run_channels(draws: int, n: int) -> dict:
    rng = np.random.default_rng([1000, n, 3])
    names = ["temperature", "pressure", "vibration"]
    exact, false, same_order, noise_same, seconds = [], [], [], [], []
    for _ in range(draws):
        chans, cps = _channels(n, rng)
        answers = []
        for order in itertools.permutations(names):
            t0 = time.perf_counter()
            res = kcpstream.segment(np.stack([chans[k] for k in order], axis=1))
            seconds.append(time.perf_counter() - t0)
            answers.append(tuple(res.changepoints.tolist()))
            e, f = score(res.changepoints, cps, n)
            exact.append(e)
            false.append(f)
        same_order.append(len(set(answers)) == 1)
        noisy = kcpstream.segment(np.stack([chans[k] for k in [*names, "noise"]], axis=1))
        noise_same.append(noisy.n_changepoints == len(answers[0]))
    row = {
        "draws": draws,
        "exact": float(np.mean(exact)),
        "false_per_series": float(np.mean(false)),
        "same_for_every_order": float(np.mean(same_order)),
        "noise_channel_adds_none": float(np.mean(noise_same)),
        "seconds": float(np.mean(seconds)),
    }
    print("channels", row, flush=True)
    return {f"3 channels n={n}": row}


def markdown(result: dict) -> str:
    lines = ["# Cyclic archives", "", f"`python benchmarks/bench_cycles.py {result['args']}`", ""]
    lines += [
        "## One channel: share exactly right, false change-points per series",
        "",
        "| series | draws | defaults: exact | false | pointwise: exact | false "
        "| null, defaults: none | null, pointwise: none | s per call (defaults) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in result.get("single", {}).items():
        d, p, nd, npw = r["defaults"], r["pointwise"], r["null defaults"], r["null pointwise"]
        lines.append(
            f"| {name} | {d['draws']} | {d['exact']:.2f} | {d['false_per_series']:.2f} "
            f"| {p['exact']:.2f} | {p['false_per_series']:.2f} | {nd['exact']:.2f} "
            f"| {npw['exact']:.2f} | {d['seconds']:.2f} |"
        )
    lines += [
        "",
        "## Three channels (every order) and a noise channel",
        "",
        "| series | draws | exact | false per series | same for every order "
        "| noise channel adds none | s per call |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in result.get("channels", {}).items():
        lines.append(
            f"| {name} | {r['draws']} | {r['exact']:.2f} | {r['false_per_series']:.2f} "
            f"| {r['same_for_every_order']:.2f} | {r['noise_channel_adds_none']:.2f} "
            f"| {r['seconds']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--max-n", type=int, default=10_000_000)
    ap.add_argument("--parts", default="single,channels,long")
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--pair", default=None, help="a shape part paired with the defaults'")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    result: dict = {"args": f"--draws {args.draws} --max-n {args.max_n} --parts {args.parts}"}
    if args.pair is not None:
        result["args"] += f" --pair {args.pair}"
    if "single" in parts:
        result["single"] = run_single(args.draws, [2_000_000, 4_000_000], pair=args.pair)
    if "channels" in parts:
        result["channels"] = run_channels(max(1, args.draws // 4), 2_000_000)
    if "periods" in parts:
        result.setdefault("single", {}).update(run_cells(args.draws, list(PERIODS), args.pair))
    if "long" in parts:
        sizes = [n for n in (10_000_000, 100_000_000) if n <= args.max_n]
        long = run_single(max(1, args.draws // 10), sizes, pair=args.pair)
        result.setdefault("single", {}).update(long)
    report(result, args.out, args.markdown, markdown)


if __name__ == "__main__":
    main()
