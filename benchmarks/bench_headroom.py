"""Headroom: one series of 10^10 samples in one call, and the grid that holds it.

Two parts:

* ``grid``: what coarsening the fixed-point grid costs.  For the default
  maps of one channel (quadrature) and three channels (scaled RFF) and for
  ``rff:32``, fitted on N(0, 1) samples, the largest difference between the
  approximate kernels ``<phi(x), phi(y)>`` on the grid of the fit (28 bits
  below the largest feature) and on the grids ``FeatureMap.holding`` gives
  a series of 10^10, 10^11 and 10^12 samples, against the largest difference
  between the approximate kernel and the exact one (the kernel approximation
  the grid serves).  Also the change-points and gains of one 10^6-sample
  signal segmented on the grid of the fit and on the grid of 10^12.
* ``scale``: a generated input (a dask array made chunk by chunk, N(0, 1)
  float32 with three mean shifts, chunks of 2^22 samples, nothing stored),
  ``segment(x, n_bkps=3, features=F)`` in a fresh process on the threaded
  scheduler, for ``F = "rff:32"`` and the default map at 10^9 and 10^10
  samples, and 3 channels (the default map) at 3.4e8 and 3.4e9 samples:
  seconds, peak RSS, samples per second, the change-points' largest distance
  to the true ones as a share of n, and each long run's time over the
  shorter run of the same configuration (the issue's target: at most 11).

Usage: python benchmarks/bench_headroom.py [--parts grid,scale] [--long 1e10]
       [--configs rff:32/1,auto/1,auto/3] [--out headroom.json] [--markdown results/headroom.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np
from _report import PEAK_RSS_CODE, machine, report

CHILD = (
    PEAK_RSS_CODE
    + r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import dask.array as da
import numpy as np
import kcpstream

n, d, features = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
CHUNK = 2**22
cuts = [int(n * f) for f in (0.2, 0.5, 0.8)]
levels = [0.0, 0.5, -0.5, 0.5]

def block(block_info=None):
    (lo, hi), = block_info[None]["array-location"][:1]
    rng = np.random.default_rng([7, lo])
    x = rng.standard_normal((hi - lo, d), dtype=np.float32)
    pos = np.arange(lo, hi)
    x += np.asarray(levels, np.float32)[np.searchsorted(cuts, pos, side="right")][:, None]
    return x if d > 1 else x[:, 0]

shape, chunks = ((n,), (CHUNK,)) if d == 1 else ((n, d), (CHUNK, d))
x = da.map_blocks(block, dtype=np.float32, chunks=da.core.normalize_chunks(chunks, shape))
kcpstream.segment(np.random.default_rng(0).normal(size=(5000, d)), features=features)  # compile
t = time.perf_counter()
res = kcpstream.segment(x, n_bkps=3, features=features)
s = time.perf_counter() - t
cps = sorted(res.changepoints.tolist())
print(json.dumps({
    "seconds": s, "rss_mib": peak_rss_mib(), "changepoints": cps, "true": cuts,
    "worst_share": max(abs(a - b) for a, b in zip(cps, cuts)) / n if len(cps) == 3 else None,
    "grid_shift": res.features.grid_shift_, "features": type(res.features).__name__,
    "passes": res.diagnostics.passes,
    **{k: getattr(res.diagnostics, k) for k in (
        "seconds_data_pass", "samples_read_again", "rounds", "pieces_scanned",
        "samples_scanned", "n_blocks", "block_size")},
}))
"""
)


def _child(n: int, d: int, features: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(n), str(d), features], capture_output=True, text=True
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def scale(long: int, configs: list[str]) -> list[dict]:
    rows = []
    short = long // 10
    for spec in configs:
        features, d = spec.rsplit("/", 1)
        d = int(d)
        n0 = short if d == 1 else short * 34 // 100  # 3 channels: 3.4e9 samples at 1e10 values
        pair = {}
        for n in (n0, n0 * 10):
            r = _child(n, d, features)
            r.update(n=n, d=d, spec=features, samples_per_second=n / r["seconds"])
            print(json.dumps(r), file=sys.stderr, flush=True)
            pair[n] = r
            rows.append(r)
        pair[n0 * 10]["time_ratio_to_short"] = pair[n0 * 10]["seconds"] / pair[n0]["seconds"]
    return rows


def _kernel_errors(fmap, x: np.ndarray, exact: np.ndarray) -> dict:
    base = fmap.transform(x).astype(np.float64)
    approx = base @ base.T
    out = {"kernel_approximation": float(np.abs(approx - exact).max())}
    for n in (10**10, 10**11, 10**12):
        held = fmap.holding(n)
        z = held.transform(x).astype(np.float64)
        out[f"grid_bits_{n:.0e}"] = 28 - held.grid_shift_
        out[f"grid_rounding_{n:.0e}"] = float(np.abs(z @ z.T - approx).max())
    return out


def grid() -> dict:
    from kcpstream import segment
    from kcpstream.features import make_feature_map

    rng = np.random.default_rng(0)
    out = {}
    for name, d in (("quadrature", 1), ("rff:32", 1), ("rff:32", 3)):
        x = rng.normal(size=(1500, d))
        fmap = make_feature_map(name, seed=0, d=d)
        fmap.scaled = d > 1  # the default map of several channels
        fmap.fit(x)
        if d == 1:  # the Gaussian kernel of the fitted bandwidth
            exact = np.exp(-((x - x.T) ** 2) / (2 * fmap.bandwidth_**2))
        else:  # the scaled channels' kernel, as 4096 features of the same fit give it
            big = make_feature_map("rff:4096", seed=1, d=d)
            big.scaled = True
            z = big.fit(x).transform(x).astype(np.float64)
            exact = z @ z.T
        out[f"{name}/{d}"] = _kernel_errors(fmap, x, exact)
    # one signal on the grid of the fit and on the grid of 10^12
    x = rng.normal(size=1_000_000).astype(np.float32)
    x[300_000:] += 0.3
    x[700_000:] -= 0.6
    fmap = make_feature_map("quadrature", seed=0, d=1).fit(x[:4096, None].astype(np.float64))
    fine = segment(x, features=fmap, n_bkps=2)
    coarse = segment(x, features=fmap.holding(10**12), n_bkps=2)
    out["segment_1e6"] = {
        "changepoints_fine": fine.changepoints.tolist(),
        "changepoints_1e12_grid": coarse.changepoints.tolist(),
        "largest_relative_gain_difference": float(
            np.max(np.abs(coarse.gains - fine.gains) / np.abs(fine.gains))
        ),
    }
    return out


def markdown(result: dict) -> str:
    text = json.dumps(result, indent=1)
    return "\n".join(["# Headroom: one series of 10^10 samples", "", "```", text, "```"]) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="grid,scale")
    ap.add_argument("--long", type=float, default=1e10)
    ap.add_argument("--configs", default="rff:32/1,auto/1,auto/3", help="map/channels, ...")
    ap.add_argument("--out")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    parts = args.parts.split(",")
    result: dict = {"machine": machine()}
    if "grid" in parts:
        result["grid"] = grid()
    if "scale" in parts:
        result["scale"] = scale(int(args.long), args.configs.split(","))
    report(result, args.out, args.markdown, markdown)


if __name__ == "__main__":
    main()
