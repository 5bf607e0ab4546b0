"""Trust on real signals: TSSB covering, false alarms on stationary noise, the thesis scenarios.

Three parts, every call with kcpstream's defaults (``segment(x)``) unless said:

* ``tssb``: the Time Series Segmentation Benchmark (75 annotated real series,
  ``--tssb DIR`` with ``desc.txt``, the series and ``published_covering.csv``):
  mean covering of the defaults, of ``window=`` the benchmark's hint, and of a
  detector that always answers "no change-point", beside the published
  columns (ClaSP, PELT, BinSeg, ...), per series and on average.
* ``null``: stationary series without change -- iid normal, AR(1) with
  phi = 0.5, 0.9, 0.95, ARMA(2, 1), Student t with 3 degrees of freedom, and a
  fixed seasonal cycle (20 periods, random phase) plus noise -- at
  n = 10^2 ... 10^6: the share of series given any change-point (target 5 %);
  and, apart, drifting series without a change (a linear trend, the cycle on
  a trend, a random walk), which should get none either, and stationary
  series with clustered volatility (GARCH(1, 1), alpha 0.05, beta 0.94) or
  long memory (ARFIMA(0, d, 0), d = 0.2 and 0.4), which a test of
  short-memory noise takes for changes (no target: how often it does).
  ``--families`` runs some of the families only (by name, comma-separated).
* ``onechange``: one change at a uniform place in the middle 60 % of the
  series (a mean shift of 0.7, a spread 1.5 times larger, a 0/1 flag's rate
  from 5 % to 25 %) at n = 10^4 ... 10^7: the share of draws given exactly
  one change-point within 1 % of n of it, and the extras by kind (at an end,
  next to the change, far).
* ``scenarios``: the thesis's scenarios 1 and 2 (n = 1000, 10 changes, 40
  draws): F1 with a margin of 1 % of n and how often the count is right; and
  scenario 1 at n = 10^4, how often exactly the true count is found.
* ``shapes``: the TSSB series whose defaults take windows of a cycle (the
  invariant and the canonical shape part without its level, each at half the
  level), segmented also with each shape part alone at the full level
  (``Temporal(shape=...)`` on the same windows), and with the invariant part
  paired with the canonical part with its level or with the aligned part
  (``_pair.paired``: each at half the level, the answer with more
  change-points): mean covering over all 75 series (a series without windows
  keeps its defaults' answer in every column).
* ``neighbours``: the nearest neighbours' test of short series
  (``kcpstream.selection.neighbours``) alone, at the full level 0.01 (the
  defaults test it at a third of it), on stationary series without change:
  the null families above with subsequences of 20 samples, and cycles
  (the seasonal family, a cycle whose period jitters by 5 % or 20 % or whose
  rate wanders as an AR(0.99), a cycle on AR(0.6) noise and a drift) with
  windows of their cycle, at n = 1000, 3000, 10^4: the share of series
  given any change-point (its false-alarm rate; the level is 0.01).
* ``cyclenull``: the defaults on the same cycles (n = 1000, 3000, 10^4): the
  share of series given any change-point, segmented in windows, and
  answered by the nearest neighbours' part.
* ``classes``: generated series of recorded instances, one class of
  waveform after another (each class a random smooth cycle of 20-80
  samples, each instance of its own amplitude and phase, with noise; 1-3
  changes, 8-30 cycles a segment, a class may come back): mean covering
  and the share with the true count, the defaults against the same call
  without the nearest neighbours' part (``--reps`` series).
* ``gaps``: the TSSB series with gaps made in them (three outages of 1 % of
  the series each at random places, and 1 % of the samples dropped one by
  one; seeded by the series' position): mean covering of the defaults on the
  series with its gaps skipped, and of the same series filled forward and
  linearly interpolated before segmenting, beside the series without gaps.

Prints JSON and writes a markdown table (``--markdown``).

Usage: python benchmarks/bench_real.py --tssb ../shared/data/tssb
       [--parts tssb,null,onechange,scenarios] [--reps 40] [--max-n 1000000]
       [--out real.json] [--markdown results/real.md]
"""

from __future__ import annotations

import argparse
import csv
import os
import time

import numpy as np
from _pair import cycles_of, paired
from _report import report
from scipy.signal import fftconvolve, lfilter

import kcpstream
from kcpstream import datasets, metrics
from kcpstream.features import Temporal

# -- TSSB ------------------------------------------------------------------


def _tssb_rows(root: str) -> list[tuple[str, int, list[int]]]:
    rows = []
    with open(os.path.join(root, "desc.txt")) as fh:
        for line in fh:
            parts = line.strip().split(",")
            if len(parts) >= 2:
                rows.append((parts[0], int(parts[1]), [int(c) for c in parts[2:]]))
    return rows


def _published(root: str) -> dict[str, dict[str, float]]:
    path = os.path.join(root, "published_covering.csv")
    if not os.path.exists(path):
        return {}
    with open(path) as fh:
        return {r["dataset"]: {k: float(v) for k, v in r.items() if k != "dataset"}
                for r in csv.DictReader(fh)}  # fmt: skip


def run_tssb(root: str) -> dict:
    published = _published(root)
    series = []
    t0 = time.perf_counter()
    for name, window, true in _tssb_rows(root):
        x = np.loadtxt(os.path.join(root, f"{name}.txt"))
        n = len(x)
        row = {"name": name, "n": n, "true": len(true), "window": window}
        for label, kw in (("default", {}), ("window", {"window": max(2, window)})):
            res = kcpstream.segment(x, **kw)
            row[label] = metrics.covering(true, res.changepoints, n)
            row[f"{label}_found"] = int(res.n_changepoints)
        row["none"] = metrics.covering(true, [], n)
        row["published"] = published.get(name, {})
        series.append(row)
    columns = sorted({k for r in series for k in r["published"]})
    mean = {k: float(np.mean([r[k] for r in series])) for k in ("default", "window", "none")}
    for k in columns:
        mean[k] = float(np.mean([r["published"][k] for r in series if k in r["published"]]))
    return {"series": series, "mean": mean, "seconds": time.perf_counter() - t0}


#: Shape parts measured alone (the map's other parameters beside ``window``).
SHAPES = {
    "invariant": {},
    "canonical": {"shape": "canonical", "level": False},
    "canonical with level": {"shape": "canonical"},
    "aligned": {"shape": "aligned"},
}
#: Shape parts measured paired with the invariant part (beside the defaults' pair).
PAIRS = ("canonical with level", "aligned")


def run_shapes(root: str) -> dict:
    """The ``shapes`` part: the defaults (the invariant and the canonical part
    without its level, paired), each shape part alone, and the invariant part
    paired with others."""
    series = []
    t0 = time.perf_counter()
    for name, _, true in _tssb_rows(root):
        x = np.loadtxt(os.path.join(root, f"{name}.txt"))
        n = len(x)
        row = {"name": name, "n": n, "true": len(true)}
        whole = kcpstream.segment(x)
        window, period = whole.params["window"], whole.params.get("period")
        row["default"] = metrics.covering(true, whole.changepoints, n)
        for key in (*SHAPES, *(f"{k} paired" for k in PAIRS)):
            row[key] = row["default"]
        if window is None or period is None:
            series.append(row)
            continue
        row["window"] = window
        row["default answered"] = whole.params["shape"]
        for key, params in SHAPES.items():
            cycles = cycles_of(window, period) if params else 1
            alone = kcpstream.segment(x, features=Temporal(window=window, cycles=cycles, **params))
            row[key] = metrics.covering(true, alone.changepoints, n)
        for key in PAIRS:
            params = SHAPES[key]
            res, by = paired(x, params["shape"], whole=whole, level=params.get("level", True))
            row[f"{key} paired"] = metrics.covering(true, res.changepoints, n)
            row[f"{key} answered"] = by == params["shape"]
        series.append(row)
    keys = ("default", *SHAPES, *(f"{k} paired" for k in PAIRS))
    mean = {k: float(np.mean([r[k] for r in series])) for k in keys}
    answered = {k: int(sum(r.get(f"{k} answered", False) for r in series)) for k in PAIRS}
    answered["default"] = int(sum(r.get("default answered") == "canonical" for r in series))
    return {"series": series, "mean": mean, "answered": answered,
            "seconds": time.perf_counter() - t0}  # fmt: skip


def with_gaps(x: np.ndarray, seed: int) -> np.ndarray:
    """``x`` with three outages of 1 % of its length and 1 % of it dropped (NaN)."""
    rng = np.random.default_rng(seed)
    n = len(x)
    out = np.array(x, dtype=np.float64, copy=True)
    width = max(1, n // 100)
    for start in rng.choice(n - width, 3, replace=False):
        out[start : start + width] = np.nan
    out[rng.choice(n, max(1, n // 100), replace=False)] = np.nan
    return out


def run_gaps(root: str) -> dict:
    """Covering on TSSB series with gaps: skipped, filled forward, interpolated."""
    series = []
    t0 = time.perf_counter()
    for k, (name, _, true) in enumerate(_tssb_rows(root)):
        x = np.loadtxt(os.path.join(root, f"{name}.txt"))
        n = len(x)
        gapped = with_gaps(x, k)
        known = np.flatnonzero(~np.isnan(gapped))
        filled = {
            "clean": x,
            "skipped": gapped,
            "ffill": gapped[np.maximum.accumulate(np.where(np.isnan(gapped), 0, np.arange(n)))],
            "interpolated": np.interp(np.arange(n), known, gapped[known]),
        }
        if np.isnan(filled["ffill"][0]):  # a gap at the start: back-filled
            filled["ffill"][: known[0]] = gapped[known[0]]
        row = {"name": name, "n": n, "true": len(true)}
        for label, series_x in filled.items():
            res = kcpstream.segment(series_x)
            row[label] = metrics.covering(true, res.changepoints, n)
            row[f"{label}_found"] = int(res.n_changepoints)
        series.append(row)
    labels = ("clean", "skipped", "ffill", "interpolated")
    mean = {k: float(np.mean([r[k] for r in series])) for k in labels}
    found = {k: float(np.mean([r[f"{k}_found"] for r in series])) for k in labels}
    return {"series": series, "mean": mean, "mean_found": found,
            "seconds": time.perf_counter() - t0}  # fmt: skip


# -- null families ---------------------------------------------------------


def _ar(phi, theta=()):
    def draw(n, rng):
        e = rng.standard_normal(n + 1000)
        return lfilter([1.0, *theta], [1.0, *(-np.asarray(phi))], e)[1000:]

    return draw


NULLS = {
    "iid normal": lambda n, rng: rng.standard_normal(n),
    "AR(1) 0.5": _ar([0.5]),
    "AR(1) 0.9": _ar([0.9]),
    "AR(1) 0.95": _ar([0.95]),
    "ARMA(2,1)": _ar([1.2, -0.4], [0.5]),
    "t3": lambda n, rng: rng.standard_t(3, n),
    # discrete and skewed: short runs of ones and single large values
    "flag 5 %": lambda n, rng: (rng.random(n) < 0.05).astype(np.float64),
    "flag 0.5 %": lambda n, rng: (rng.random(n) < 0.005).astype(np.float64),
    "Gamma(0.5)": lambda n, rng: rng.gamma(0.5, 1.0, n),
    "seasonal": lambda n, rng: (
        np.sin(2 * np.pi * 20 * np.arange(n) / n + rng.uniform(0, 2 * np.pi))
        + 0.5 * rng.standard_normal(n)
    ),
}


#: Series without a change that are not stationary: a steady drift is no
#: change-point either (reported apart from the 5 % target).
DRIFTS = {
    "linear trend": lambda n, rng: 3.0 * np.arange(n) / n + rng.standard_normal(n),
    "seasonal + trend": lambda n, rng: NULLS["seasonal"](n, rng) + 2.0 * np.arange(n) / n,
    "random walk": lambda n, rng: np.cumsum(rng.standard_normal(n)),
}


def _found(x: np.ndarray) -> list[int]:
    """The change-points of ``x`` with defaults; none for a constant series (a
    flag of 100 samples can be all zeros), which kcpstream refuses to fit."""
    if np.ptp(x) == 0:
        return []
    return kcpstream.segment(x).changepoints.tolist()


def shorter_sides(found: list[int], n: int) -> list[int]:
    """The shorter of the two segments beside each change-point of ``found``."""
    bounds = [0, *found, n]
    return [
        min(c - a, e - c) for a, c, e in zip(bounds[:-2], bounds[1:-1], bounds[2:], strict=True)
    ]


#: The short sides a false alarm is counted by (shorter side below each bound).
SIDE_BOUNDS = (16, 64, 256)


def _noisy_level(phi: float):
    """A level wandering as an AR(1) of unit variance, measured with white noise
    of the same variance (an ARMA(1, 1) whose MA part nearly cancels)."""

    def draw(n, rng):
        level = _ar([phi])(n, rng) * np.sqrt(1.0 - phi * phi)
        return level + rng.standard_normal(n)

    return draw


#: Stationary series whose dependence hides under white noise: a single
#: doubling of the batches grows the noise estimate too little to see it.
NOISY_LEVELS = {
    "AR(1) 0.95 level + noise": _noisy_level(0.95),
    "AR(1) 0.99 level + noise": _noisy_level(0.99),
}


def _garch(omega: float, alpha: float, beta: float):
    """A GARCH(1, 1) series: volatility that clusters, stationary (alpha + beta < 1)."""

    def draw(n, rng):
        z = rng.standard_normal(n + 1000)
        out = np.empty_like(z)
        var, e = omega / (1.0 - alpha - beta), 0.0
        for t in range(z.size):
            var = omega + alpha * e * e + beta * var
            e = out[t] = np.sqrt(var) * z[t]
        return out[1000:]

    return draw


def _arfima(d: float):
    """An ARFIMA(0, d, 0) series (long memory for 0 < d < 1/2): white noise through
    the fractional integration's weights, each sample from as many innovations
    as the series is long and 1000 more."""

    def draw(n, rng):
        m = n + 1000
        k = np.arange(1, m)
        weights = np.concatenate([[1.0], np.cumprod((k - 1 + d) / k)])
        e = rng.standard_normal(2 * m)
        return fftconvolve(e, weights)[m : m + n]

    return draw


#: Stationary series that a test of short-memory noise sees changes in: volatility
#: that clusters, and long memory (reported apart: what kcpstream takes them for).
CLUSTERED = {
    "GARCH alpha 0.05 beta 0.94": _garch(0.01, 0.05, 0.94),
    "ARFIMA d = 0.2": _arfima(0.2),
    "ARFIMA d = 0.4": _arfima(0.4),
}


def run_null(reps: int, max_n: int, families: list[str] | None = None) -> dict:
    sizes = [n for n in (100, 1_000, 10_000, 100_000, 1_000_000) if n <= max_n]
    out = {}
    every = {**NULLS, **NOISY_LEVELS, **CLUSTERED, **DRIFTS}
    for family, draw in every.items():
        if families and family not in families:
            continue
        for n in sizes:
            r = reps if n <= 10_000 else max(5, reps // 4) if n <= 100_000 else max(5, reps // 8)
            found = [_found(draw(n, np.random.default_rng(seed))) for seed in range(r)]
            counts = [len(f) for f in found]
            out[f"{family} | {n}"] = {
                "family": family,
                "n": n,
                "draws": r,
                "any": float(np.mean(np.array(counts) > 0)),
                "mean_count": float(np.mean(counts)),
                "short_sides": sorted(s for f in found for s in shorter_sides(f, n)),
            }
    return out


# -- the nearest neighbours' test alone on stationary series -------------------


def _wandering(n: int, rng, jitter: float = 0.0, rho: float = 0.0) -> np.ndarray:
    # a cycle of 50 samples whose period jitters from cycle to cycle (jitter) or
    # whose rate wanders as an AR(rho) (benchmarks/bench_phase_wander.py)
    z = rng.standard_normal(n)
    if rho:
        z = lfilter([0.02], [1.0, -rho], z)
    phase = np.cumsum(2 * np.pi / 50 * (1 + (jitter * z if jitter else z))) + rng.uniform(0, 6)
    return np.sin(phase) + 0.3 * rng.standard_normal(n)


def _cycle_on_noise(n: int, rng) -> np.ndarray:
    # a cycle of 37.3 samples on AR(0.6) noise and a drift (bench_cycles' series)
    t = np.arange(n)
    noise = lfilter([1.0], [1.0, -0.6], rng.standard_normal(n)) * 0.4
    drift = rng.uniform(-1, 1) * t / n
    return 3 * np.sin(2 * np.pi * t / 37.3 + rng.uniform(0, 6)) + noise + drift


#: Stationary series with a cycle and the window of their cycle (``n -> window``).
CYCLES = {
    "seasonal": (NULLS["seasonal"], lambda n: n // 20),
    "jitter 5 %": (lambda n, rng: _wandering(n, rng, jitter=0.05), lambda n: 50),
    "jitter 20 %": (lambda n, rng: _wandering(n, rng, jitter=0.2), lambda n: 50),
    "AR(0.99) rate": (lambda n, rng: _wandering(n, rng, rho=0.99), lambda n: 50),
    "cycle, AR(0.6) noise, drift": (_cycle_on_noise, lambda n: 37),
}


def run_neighbours(reps: int, max_n: int) -> dict:
    from kcpstream.selection.neighbours import neighbour_changes

    sizes = [n for n in (1_000, 3_000, 10_000) if n <= max_n]
    cells = {f"{k} (window 20)": (draw, lambda n: 20) for k, draw in NULLS.items()}
    cells.update({f"{k} (its cycle)": v for k, v in CYCLES.items()})
    out = {}
    for label, (draw, window) in cells.items():
        for n in sizes:
            counts = []
            for seed in range(reps):
                x = draw(n, np.random.default_rng([31, n, seed]))
                counts.append(len(neighbour_changes(x, window(n), 0.01).changepoints))
            out[f"{label} | {n}"] = {
                "family": label,
                "n": n,
                "draws": reps,
                "any": float(np.mean(np.array(counts) > 0)),
                "mean_count": float(np.mean(counts)),
            }
    return out


def _instances(rng) -> tuple[np.ndarray, list[int]]:
    """A series of recorded instances of a few classes of waveform, and where
    the class changes."""
    period = int(rng.integers(20, 81))
    t = np.arange(period) / period
    classes = []
    for _ in range(3):
        h = np.arange(1, 4)[:, None]
        wave = rng.normal(size=(3, 1)) / h * np.sin(2 * np.pi * h * t + rng.uniform(0, 6, (3, 1)))
        classes.append(wave.sum(axis=0) / wave.sum(axis=0).std())
    k = int(rng.integers(1, 4))
    labels = [0]
    for _ in range(k):
        labels.append(int(rng.choice([c for c in range(3) if c != labels[-1]])))
    noise = rng.choice([0.2, 0.5])
    pieces, true = [], []
    for label in labels:
        for _ in range(int(rng.integers(8, 31))):
            shift = int(rng.integers(-period // 20, period // 20 + 1))
            pieces.append(rng.uniform(0.7, 1.3) * np.roll(classes[label], shift))
        true.append(sum(p.size for p in pieces))
    x = np.concatenate(pieces)
    return x + noise * rng.standard_normal(x.size), true[:-1]


def run_classes(reps: int) -> dict:
    return _part_on_off(reps, lambda seed: _instances(np.random.default_rng([41, seed])))


def _part_on_off(reps: int, draw, null=None) -> dict:
    """The defaults with and without the nearest neighbours' part (the
    engine's cap at 0) on ``draw(seed)``'s ``(x, true change-points)``:
    covering and exact count, and with ``null(seed)`` (a series without
    change) the share of those given any change-point."""
    import kcpstream.engine.pair as pair

    cap = pair.NEIGHBOUR_SAMPLES
    out: dict = {}
    for label, limit in (("without the neighbours' part", 0), ("defaults", cap)):
        pair.NEIGHBOUR_SAMPLES = limit
        try:
            covers, counts, nulls = [], [], []
            for seed in range(reps):
                x, true = draw(seed)
                found = kcpstream.segment(x).changepoints.tolist()
                covers.append(metrics.covering(true, found, x.size))
                counts.append(len(found) == len(true))
                if null is not None:
                    nulls.append(kcpstream.segment(null(seed)).n_changepoints > 0)
        finally:
            pair.NEIGHBOUR_SAMPLES = cap
        out[label] = {
            "draws": reps,
            "covering": float(np.mean(covers)),
            "true_count": float(np.mean(counts)),
        }
        if null is not None:
            out[label]["null_any"] = float(np.mean(nulls))
    return out


def _irregular(rng, changes: int) -> tuple[np.ndarray, list[int]]:
    """A series of recorded shapes of random length (no cycle): each class a
    random smooth waveform, each instance stretched to 15-60 samples and
    scaled, ``changes`` changes of class, 6-30 instances a segment."""
    t = np.linspace(0.0, 1.0, 256)
    classes = []
    for _ in range(3):
        h = np.arange(1, 4)[:, None]
        wave = rng.normal(size=(3, 1)) / h * np.sin(np.pi * h * t + rng.uniform(0, 6, (3, 1)))
        wave = wave.sum(axis=0)
        classes.append((wave - wave.mean()) / wave.std())
    labels = [0]
    for _ in range(changes):
        labels.append(int(rng.choice([c for c in range(3) if c != labels[-1]])))
    pieces, true = [], []
    for label in labels:
        for _ in range(int(rng.integers(6, 31))):
            length = int(rng.integers(15, 61))
            shape = np.interp(np.linspace(0, 255, length), np.arange(256), classes[label])
            pieces.append(rng.uniform(0.7, 1.3) * shape)
        true.append(sum(p.size for p in pieces))
    x = np.concatenate(pieces)
    return x + rng.choice([0.2, 0.5]) * rng.standard_normal(x.size), true[:-1]


def run_irregular(reps: int) -> dict:
    """Recorded shapes of random length (no cycle), generated: series with
    1-3 changes of class, and series of one class (:func:`_part_on_off`)."""

    def draw(seed: int):
        rng = np.random.default_rng([43, seed])
        return _irregular(rng, int(rng.integers(1, 4)))

    return _part_on_off(
        reps, draw, null=lambda seed: _irregular(np.random.default_rng([47, seed]), 0)[0]
    )


def run_cycle_nulls(reps: int, max_n: int) -> dict:
    sizes = [n for n in (1_000, 3_000, 10_000) if n <= max_n]
    out = {}
    for label, (draw, _) in CYCLES.items():
        for n in sizes:
            found = [
                kcpstream.segment(draw(n, np.random.default_rng([37, n, s]))) for s in range(reps)
            ]
            out[f"{label} | {n}"] = {
                "family": label,
                "n": n,
                "draws": reps,
                "any": float(np.mean([r.n_changepoints > 0 for r in found])),
                "windowed": float(np.mean([bool(r.params.get("window")) for r in found])),
                "by_neighbours": float(
                    np.mean([r.params.get("shape") == "neighbours" for r in found])
                ),
            }
    return out


# -- one change ----------------------------------------------------------------


def _normal(m: int, rng) -> np.ndarray:
    return rng.standard_normal(m)


def _flag(rate: float):
    return lambda m, rng: (rng.random(m) < rate).astype(np.float64)


#: One change at a uniform place in [0.2 n, 0.8 n): (before, after), each
#: ``(m, rng) -> m samples``.
ONE_CHANGE = {
    "mean + 0.7": (_normal, lambda m, rng: _normal(m, rng) + 0.7),
    "spread x 1.5": (_normal, lambda m, rng: 1.5 * _normal(m, rng)),
    "flag 5 % -> 25 %": (_flag(0.05), _flag(0.25)),
}

#: A change-point within this share of n of the true change finds it; an extra
#: one within it of a series' end is an "edge" extra, within 5 times it of the
#: true change a "next to the change" extra, else "far".
ONE_MARGIN = 0.01


def one_change_kinds(found: list[int], true: int, n: int) -> dict[str, int]:
    """How the change-points ``found`` of a series with one change at ``true``
    classify: whether one finds it, and the extras by kind."""
    margin = ONE_MARGIN * n
    hits = [c for c in found if abs(c - true) <= margin]
    hit = min(hits, key=lambda c: abs(c - true)) if hits else None
    kinds = {"found": int(hit is not None), "edge": 0, "next": 0, "far": 0}
    for c in found:
        if c == hit:
            continue
        if min(c, n - c) <= margin:
            kinds["edge"] += 1
        elif abs(c - true) <= 5 * margin:
            kinds["next"] += 1
        else:
            kinds["far"] += 1
    return kinds


def run_one_change(
    reps: int, max_n: int, seed_prefix: int = 20_261_127, sizes: list[int] | None = None
) -> dict:
    """The one-change table; ``sizes`` (given) are each drawn ``reps`` times,
    else 10^4 .. ``max_n``, with a quarter of the draws at 10^7."""
    given = sizes is not None
    if sizes is None:
        sizes = [n for n in (10_000, 100_000, 1_000_000, 10_000_000) if n <= max_n]
    out = {}
    for family, (before, after) in ONE_CHANGE.items():
        for n in sizes:
            r = reps if given or n <= 1_000_000 else max(5, reps // 4)
            rows = []
            for seed in range(r):
                rng = np.random.default_rng([seed_prefix, n, seed])
                true = int(rng.integers(n // 5, 4 * n // 5))
                x = np.concatenate([before(true, rng), after(n - true, rng)])
                found = kcpstream.segment(x).changepoints.tolist()
                kinds = one_change_kinds(found, true, n)
                kinds["exact"] = int(kinds["found"] and len(found) == 1)
                rows.append(kinds)
            out[f"{family} | {n}"] = {
                "family": family,
                "n": n,
                "draws": r,
                **{k: float(np.mean([row[k] for row in rows])) for k in rows[0]},
            }
    return out


# -- thesis scenarios --------------------------------------------------------


#: (label, generator, n): scenarios 1 and 2 at the thesis's size, scenario 1 at 10^4.
SCENARIOS = (
    ("scenario 1", datasets.scenario1, 1_000),
    ("scenario 2", datasets.scenario2, 1_000),
    ("scenario 1", datasets.scenario1, 10_000),
)


def run_scenarios(reps: int) -> dict:
    out = {}
    for name, gen, n in SCENARIOS:
        f1, exact = [], []
        for seed in range(reps):
            sig = gen(n, 10, seed=seed)
            res = kcpstream.segment(sig.x)
            f1.append(metrics.f1_score(sig.changepoints, res.changepoints, margin=n // 100))
            exact.append(res.n_changepoints == 10)
        out[f"{name} | {n}"] = {"f1": float(np.mean(f1)), "exact_count": float(np.mean(exact))}
    return out


# -- report ------------------------------------------------------------------


def markdown(result: dict) -> str:
    lines = ["# Real signals: TSSB, stationary noise, the thesis scenarios", ""]
    lines.append(f"`python benchmarks/bench_real.py {result['args']}`; defaults only.")
    lines.append("")
    if "tssb" in result:
        t = result["tssb"]
        lines += [
            "## TSSB: mean covering (75 series)",
            "",
            "| method | mean covering |",
            "|---|---|",
        ]
        for k, v in sorted(t["mean"].items(), key=lambda kv: -kv[1]):
            label = {"default": "**kcpstream, defaults**", "window": "kcpstream, `window=` hint",
                     "none": "no change-point"}.get(k, k)  # fmt: skip
            lines.append(f"| {label} | {v:.3f} |")
        lines += ["", "| series | n | true | found | covering | window= found | covering "
                  "| ClaSP | BinSeg |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in t["series"]:
            pub = r["published"]
            lines.append(
                f"| {r['name']} | {r['n']} | {r['true']} | {r['default_found']} | "
                f"{r['default']:.3f} | {r['window_found']} | {r['window']:.3f} | "
                f"{pub.get('ClaSP', float('nan')):.3f} | {pub.get('BinSeg', float('nan')):.3f} |"
            )
        lines.append("")
    if "null" in result:
        rows = list(result["null"].values())
        sizes = sorted({r["n"] for r in rows})
        for title, families in (
            ("Stationary series: share given any change-point (target 5 %)", NULLS),
            ("A wandering level measured with noise (stationary; target 5 %)", NOISY_LEVELS),
            ("Clustered volatility and long memory (stationary; no target)", CLUSTERED),
            ("Drifting series without a change (no target): share given any", DRIFTS),
        ):
            lines += _null_table(title, families, rows, sizes)
        lines += _side_table(rows)
    if "onechange" in result:
        lines += [
            "## One change: share of draws exactly right (one change-point within 1 % of n)",
            "",
            "Extras per draw by kind: at a series' end (within 1 % of n), next to the change "
            "(within 5 %), far; missed: no change-point within 1 % of the change.",
            "",
            "| family | n | draws | exactly right | missed | edge | next to it | far |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in result["onechange"].values():
            lines.append(
                f"| {r['family']} | {r['n']} | {r['draws']} | {r['exact']:.3f} | "
                f"{1 - r['found']:.3f} | {r['edge']:.3f} | {r['next']:.3f} | {r['far']:.3f} |"
            )
        lines.append("")
    if "classes" in result:
        lines += ["## Generated series of recorded instances: mean covering", "",
                  "| answer | draws | mean covering | true count |",
                  "|---|---|---|---|"]  # fmt: skip
        for k, v in result["classes"].items():
            lines.append(f"| {k} | {v['draws']} | {v['covering']:.3f} | {v['true_count']:.2f} |")
        lines.append("")
    if "cyclenull" in result:
        lines += ["## Stationary series with a cycle, defaults: share given any", "",
                  "(share of the series segmented in windows; share answered by the nearest "
                  "neighbours' part)", "",
                  "| family | n | any | in windows | by the neighbours |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for r in result["cyclenull"].values():
            lines.append(
                f"| {r['family']} | {r['n']} | {r['any']:.2f} ({r['draws']}) | "
                f"{r['windowed']:.2f} | {r['by_neighbours']:.2f} |"
            )
        lines.append("")
    if "neighbours" in result:
        rows = result["neighbours"].values()
        sizes = sorted({r["n"] for r in rows})
        lines += ["## The nearest neighbours' test alone, level 0.01: share given any", "",
                  "| series | " + " | ".join(f"n = {n}" for n in sizes) + " |",
                  "|---|" + "---|" * len(sizes)]  # fmt: skip
        for family in dict.fromkeys(r["family"] for r in rows):
            lines.append(_null_row(family, rows, sizes))
        lines.append("")
    if "gaps" in result:
        g = result["gaps"]
        lines += ["## TSSB with gaps: mean covering (3 outages of 1 % and 1 % dropped)", "",
                  "| series given to `segment(x)` | mean covering | mean change-points found |",
                  "|---|---|---|"]  # fmt: skip
        names = {"clean": "without gaps", "skipped": "**with gaps, skipped (default)**",
                 "ffill": "gaps filled forward", "interpolated": "gaps interpolated"}  # fmt: skip
        for k, label in names.items():
            lines.append(f"| {label} | {g['mean'][k]:.3f} | {g['mean_found'][k]:.2f} |")
        lines.append("")
    if "shapes" in result:
        a = result["shapes"]
        windowed = sum("window" in r for r in a["series"])
        title = f"## TSSB: shape parts ({windowed} of {len(a['series'])} series in windows)"
        lines += [title, "", "| answer | mean covering |", "|---|---|"]
        names = {"default": "defaults: invariant and canonical (no level), each at `alpha=0.005`",
                 "invariant": "invariant part alone, `alpha=0.01`",
                 "canonical": "canonical part without level alone, `alpha=0.01`",
                 "canonical with level": "canonical part with level alone, `alpha=0.01`",
                 "aligned": "aligned part alone, `alpha=0.01`",
                 "canonical with level paired":
                     "invariant and canonical with level, each at `alpha=0.005`",
                 "aligned paired": "invariant and aligned, each at `alpha=0.005`"}  # fmt: skip
        for k, label in names.items():
            lines.append(f"| {label} | {a['mean'][k]:.3f} |")
        won = a["answered"]
        lines += ["", f"The second part answered on {won['default']} series (defaults), "
                  f"{won['canonical with level']} (canonical with level) and {won['aligned']} "
                  "(aligned).", ""]  # fmt: skip
    if "scenarios" in result:
        lines += ["## Thesis scenarios, automatic count", "", "| scenario, n | F1 (1 % margin) "
                  "| exact count |", "|---|---|---|"]  # fmt: skip
        for k, v in result["scenarios"].items():
            lines.append(f"| {k} | {v['f1']:.3f} | {v['exact_count']:.2f} |")
        lines.append("")
    return "\n".join(lines)


def _side_table(rows) -> list[str]:
    """The stationary families' false change-points per draw by their shorter side."""
    bins = [0, *SIDE_BOUNDS, np.inf]
    heads = [f"< {SIDE_BOUNDS[0]}"]
    heads += [f"{a}-{b - 1}" for a, b in zip(SIDE_BOUNDS[:-1], SIDE_BOUNDS[1:], strict=True)]
    heads += [f">= {SIDE_BOUNDS[-1]}"]
    lines = ["## Stationary series: false change-points by their shorter side", "",
             "Change-points per draw, all sizes together, by the length of the shorter of "
             "their two segments (samples).", "",
             "| family | draws | " + " | ".join(heads) + " |",
             "|---|---|" + "---|" * len(heads)]  # fmt: skip
    for family in NULLS:
        mine = [r for r in rows if r["family"] == family]
        draws = sum(r["draws"] for r in mine)
        if not draws:  # (a family not run: --families)
            continue
        sides = [s for r in mine for s in r.get("short_sides", [])]
        counts, _ = np.histogram(sides, bins=bins)
        lines.append(
            f"| {family} | {draws} | " + " | ".join(f"{c / draws:.3f}" for c in counts) + " |"
        )
    return [*lines, ""]


def _null_table(title: str, families, rows, sizes) -> list[str]:
    """A section of the null tables: the rows of ``families`` measured (none: no section)."""
    present = [f for f in families if any(r["family"] == f for r in rows)]
    if not present:
        return []
    lines = [f"## {title}", "", "| family | " + " | ".join(f"n = {n}" for n in sizes) + " |"]
    lines.append("|---|" + "---|" * len(sizes))
    return [*lines, *(_null_row(f, rows, sizes) for f in present), ""]


def _null_row(family: str, rows, sizes) -> str:
    cells = [
        f"{r['any']:.2f} ({r['draws']})"
        for n in sizes
        for r in rows
        if r["family"] == family and r["n"] == n
    ]
    return f"| {family} | " + " | ".join(cells) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tssb", default=None, help="TSSB folder (desc.txt and the series)")
    ap.add_argument("--parts", default="tssb,null,scenarios")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--max-n", type=int, default=1_000_000)
    ap.add_argument(
        "--seed-prefix", type=int, default=20_261_127, help="first seed of the one-change draws"
    )
    ap.add_argument(
        "--sizes",
        type=lambda v: [int(float(x)) for x in v.split(",")],
        default=None,
        help="one-change lengths, each drawn --reps times (e.g. 1e7)",
    )
    ap.add_argument("--families", default=None, help="null families to run (comma-separated)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    shown = {k: v for k, v in vars(args).items() if v is not None and k not in ("out", "markdown")}
    result: dict = {"args": " ".join(f"--{k.replace('_', '-')} {v}" for k, v in shown.items())}
    if "tssb" in parts:
        if args.tssb is None:
            ap.error("the tssb part needs --tssb DIR")
        result["tssb"] = run_tssb(args.tssb)
    if "null" in parts:
        families = args.families.split(",") if args.families else None
        result["null"] = run_null(args.reps, args.max_n, families)
    if "onechange" in parts:
        result["onechange"] = run_one_change(args.reps, args.max_n, args.seed_prefix, args.sizes)
    if "scenarios" in parts:
        result["scenarios"] = run_scenarios(args.reps)
    if "neighbours" in parts:
        result["neighbours"] = run_neighbours(args.reps, args.max_n)
    if "cyclenull" in parts:
        result["cyclenull"] = run_cycle_nulls(args.reps, args.max_n)
    if "classes" in parts:
        result["classes"] = run_classes(args.reps)
    if "irregular" in parts:
        result["irregular"] = run_irregular(args.reps)
    if "shapes" in parts:
        if args.tssb is None:
            ap.error("the shapes part needs --tssb DIR")
        result["shapes"] = run_shapes(args.tssb)
    if "gaps" in parts:
        if args.tssb is None:
            ap.error("the gaps part needs --tssb DIR")
        result["gaps"] = run_gaps(args.tssb)
    report(result, args.out, args.markdown, markdown)


if __name__ == "__main__":
    main()
