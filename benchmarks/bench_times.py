"""Time stamps at scale: a datetime-indexed store through every entry point.

Writes one zarr store of ``--n`` float32 samples (chunks of 2**20) with a
datetime ``time`` coordinate laid out as xarray writes it (int64 seconds
with CF units, zarr 3 ``dimension_names``), and a copy of the samples with
no coordinate.  Each entry point then runs in its own process (peak RSS of
that process, wall time of the call):

* ``path, no coordinate``: ``segment(plain, variable="v")`` (the baseline);
* ``path``: ``segment(store, variable="v")``, times read at the change-points;
* ``cli``: ``kcpstream segment store --json`` (the whole command);
* ``xarray, lazy index``: ``xr.open_zarr(store, create_default_indexes=False)``;
* ``xarray, default``: ``xr.open_zarr(store)``, which loads the index whole.

Ratios are to the baseline measured in the same run.

Usage: python benchmarks/bench_times.py [--n 100000000] [--dir /tmp/kcp-times]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from _report import PEAK_RSS_CODE, machine, report, segment_in_child

CHUNK = 2**20

RUNS = {
    "path, no coordinate": "kcpstream.segment({plain!r}, variable='v')",
    "path": "kcpstream.segment({store!r}, variable='v')",
    "xarray, lazy index": (
        "kcpstream.segment(xr.open_zarr({store!r}, create_default_indexes=False)['v'])"
    ),
    "xarray, default": "kcpstream.segment(xr.open_zarr({store!r})['v'])",
}


def _write(store: str, plain: str, n: int) -> None:
    import zarr

    rng = np.random.default_rng(0)
    root = zarr.open_group(store, mode="w")
    bare = zarr.open_group(plain, mode="w")
    kw = {"shape": (n,), "chunks": (CHUNK,), "dimension_names": ["time"]}
    v = root.create_array("v", dtype="f4", **kw)
    w = bare.create_array("v", dtype="f4", **kw)
    t = root.create_array("time", dtype="i8", **kw)
    t.attrs.update(
        {"units": "seconds since 2020-01-01 00:00:00", "calendar": "proleptic_gregorian"}
    )
    cps = np.linspace(0, n, 12)[1:-1].astype(np.int64)  # the spread alternates 1, 3, 1, ...
    for a in range(0, n, 16 * CHUNK):
        b = min(n, a + 16 * CHUNK)
        segment = np.searchsorted(cps, np.arange(a, b), side="right")
        x = rng.normal(size=b - a).astype(np.float32) * np.where(segment % 2, 3, 1)
        v[a:b] = x
        w[a:b] = x
        t[a:b] = np.arange(a, b, dtype=np.int64)


def _cli(store: str) -> dict:
    """``kcpstream segment STORE --json`` in a fresh process: the wall time of the
    whole process, the peak RSS the command's own process reports."""
    script = PEAK_RSS_CODE + (
        "import contextlib, io, json, sys\n"
        "from kcpstream.jobs.cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        f"    main(['segment', {store!r}, '--json'], standalone_mode=False)\n"
        "out = json.loads(buf.getvalue())\n"
        "out['rss_mib'] = peak_rss_mib()\n"
        "print(json.dumps(out))\n"
    )
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if out.returncode:
        raise RuntimeError(out.stderr)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "seconds": seconds,  # the whole command: start-up and compilation included
        "changepoints": res["changepoints"],
        "times": res["times"],
        "rss_mib": res["rss_mib"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000_000)
    ap.add_argument("--dir", default="/tmp/kcp-times")
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    store = os.path.join(args.dir, f"timed-{args.n}.zarr")
    plain = os.path.join(args.dir, f"plain-{args.n}.zarr")
    if not (os.path.isdir(store) and os.path.isdir(plain)):
        _write(store, plain, args.n)
    rows = {
        name: segment_in_child(code.format(store=store, plain=plain)) for name, code in RUNS.items()
    }
    rows["cli"] = _cli(store)
    base = rows["path, no coordinate"]
    for row in rows.values():
        row["rss_ratio"] = round(row["rss_mib"] / base["rss_mib"], 3)
        row["time_ratio"] = round(row["seconds"] / base["seconds"], 3)
    same = {name: row["changepoints"] == base["changepoints"] for name, row in rows.items()}
    timed = [r["times"] for name, r in rows.items() if name != "path, no coordinate"]
    result = {
        "n": args.n,
        "machine": machine(),
        "rows": {
            k: {kk: vv for kk, vv in v.items() if kk != "changepoints"} for k, v in rows.items()
        },  # fmt: skip
        "same_changepoints": same,
        "same_times": all(t == timed[0] for t in timed),
    }
    report(result, args.out, args.markdown, _markdown)


def _markdown(result: dict) -> str:
    lines = [
        f"# Time stamps at n = {result['n']:,}",
        "",
        "| entry point | seconds | peak RSS MiB | × RSS of path without coordinate |",
        "|---|---|---|---|",
    ]
    for name, row in result["rows"].items():
        lines.append(
            f"| {name} | {row['seconds']:.2f} | {row['rss_mib']:.0f} | {row['rss_ratio']:.2f} |"
        )
    lines += [
        "",
        f"Same change-points everywhere: {all(result['same_changepoints'].values())}; "
        f"same times through every timed entry point: {result['same_times']}.",
        "The CLI row is the whole command (interpreter start-up, imports, compilation).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
