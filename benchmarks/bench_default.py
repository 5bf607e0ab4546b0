"""Cost of the default map at scale: the period check and the temporal map.

Two zarr stores of ``--n`` float32 samples (chunks of 2**20), 20 changes each:

* ``changes``: the law of the samples changes (mean, scale, shape) and there
  is no cycle: the default finds no period and segments samples one by one;
* ``cycle``: a cycle of 96 samples whose waveform and amplitude change: the
  default segments windows of the period with :class:`~kcpstream.features.Temporal`.

Each store is segmented with the defaults (``segment(store)``) and with the
pointwise map forced (``features="quadrature"``, the default before windows
of the period existed, the baseline), each call in a fresh process after a
warm-up (wall time of the call, passes, peak RSS of the process).  Ratios
are to that baseline in the same run.

Usage: python benchmarks/bench_default.py [--n 100000000] [--dir /tmp/kcp-default]
       [--out default.json] [--markdown results/default.md]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from _report import machine, report, segment_in_child

CHUNK = 2**20
PERIOD = 96
CHANGES = 20


def _write(path: str, n: int, kind: str) -> list[int]:
    import zarr

    rng = np.random.default_rng(1)
    cps = np.sort(rng.choice(np.arange(n // 50, n - n // 50), CHANGES, replace=False))
    bounds = np.r_[0, cps, n]
    arr = zarr.open_group(path, mode="w").create_array("x", shape=(n,), chunks=(CHUNK,), dtype="f4")
    step = 16 * CHUNK
    for a in range(0, n, step):
        b = min(n, a + step)
        t = np.arange(a, b)
        seg = np.searchsorted(bounds, t, side="right") - 1
        noise = rng.standard_normal(b - a)
        if kind == "changes":  # alternating mean and scale
            x = (seg % 2) * 1.0 + (1.0 + (seg % 3 == 1)) * noise
        else:  # a sine, or a square wave of the same period, with two amplitudes
            phase = 2 * np.pi * t / PERIOD
            wave = np.where(seg % 2 == 0, np.sin(phase), np.sign(np.sin(phase)))
            x = (1.0 + 0.5 * (seg % 3 == 2)) * wave + 0.3 * noise
        arr[a:b] = x.astype(np.float32)
    return cps.tolist()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000_000)
    ap.add_argument("--dir", default="/tmp/kcp-default")
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    result = {"n": args.n, "chunk": CHUNK, "machine": machine(), "stores": {}}
    for kind in ("changes", "cycle"):
        path = os.path.join(args.dir, f"{kind}.zarr")
        t0 = time.perf_counter()
        truth = _write(path, args.n, kind)
        row = {"seconds_write": time.perf_counter() - t0, "true": truth}
        for label, extra in (("pointwise (baseline)", ", features='quadrature'"), ("default", "")):
            out = segment_in_child(f"kcpstream.segment({path!r}, variable='x'{extra})")
            row[label] = out
        base = row["pointwise (baseline)"]["seconds"]
        row["ratio"] = row["default"]["seconds"] / base
        result["stores"][kind] = row
    report(result, args.out, args.markdown, markdown)


def _found(run: dict, truth: list[int], tol: int) -> str:
    hits = sum(any(abs(c - t) <= tol for c in run["changepoints"]) for t in truth)
    return f"{len(run['changepoints'])} ({hits}/{len(truth)} within {tol})"


def markdown(result: dict) -> str:
    n = result["n"]
    lines = [
        "# The default map at scale: period check and temporal windows",
        "",
        f"`python benchmarks/bench_default.py --n {n}`; float32 zarr, chunks of 2^20, "
        f"{CHANGES} changes; each call in a fresh process after a warm-up.",
        "",
        "| store | call | seconds | ratio | passes | peak RSS | change-points found |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, row in result["stores"].items():
        for label in ("pointwise (baseline)", "default"):
            run = row[label]
            ratio = run["seconds"] / row["pointwise (baseline)"]["seconds"]
            lines.append(
                f"| {kind} | {label} | {run['seconds']:.2f} | {ratio:.2f} | "
                f"{run['passes']:.3f} | {run['rss_mib']:.0f} MiB | "
                f"{_found(run, row['true'], 2 * PERIOD)} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
