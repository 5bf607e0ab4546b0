"""Peak memory at 10^8 and 10^9 samples: what grows with n, and what the budget bounds.

Two zarr stores of float32 samples (chunks of 2**20, 20 distribution changes,
``datasets.changing_distribution(n, 20, seed=0)``), ``segment(store, n_bkps=20,
features="rff:64")`` in a fresh process each (after a warm-up call), three ways:

* ``default``: the default ``cache_bytes`` (256 MiB of raw samples kept for
  refinement);
* ``cache 64 MiB``: ``cache_bytes=64 * 2**20``;
* ``fixed mmap threshold``: the default budget, the process started with
  ``MALLOC_MMAP_THRESHOLD_=1048576`` (glibc then returns every freed chunk
  buffer at once, instead of raising its threshold and keeping them in the heap).

For each, peak RSS at both n and their ratio (the target: RSS(10^9) within
1.1 x RSS(10^8), at most 1 GiB), seconds and samples read again.

Usage: python benchmarks/bench_memory.py [--dir /tmp/kcp-memory] [--out memory.json]
       [--markdown results/memory.md]
"""

from __future__ import annotations

import argparse
import os

from _report import machine, report, segment_in_child

SIZES = (100_000_000, 1_000_000_000)
MODES = {
    "default": ("", None),
    "cache 64 MiB": (", cache_bytes=64 * 2**20", None),
    "fixed mmap threshold": ("", {"MALLOC_MMAP_THRESHOLD_": "1048576"}),
}


def store(root: str, n: int) -> str:
    path = os.path.join(root, f"s{n}.zarr")
    if not os.path.exists(path):
        from kcpstream import datasets

        os.makedirs(root, exist_ok=True)
        datasets.write_zarr(datasets.changing_distribution(n, 20, seed=0).x, path, chunks=2**20)
    return path


def run(root: str) -> dict:
    paths = {n: store(root, n) for n in SIZES}
    rows = []
    for mode, (extra, env) in MODES.items():
        got = {}
        for n in SIZES:
            call = f"kcpstream.segment({paths[n]!r}, n_bkps=20, features='rff:64'{extra})"
            r = segment_in_child(call, env)
            got[n] = {k: r[k] for k in ("seconds", "rss_mib", "read_again")}
        rows.append({"mode": mode, **{str(n): got[n] for n in SIZES},
                     "rss_ratio": got[SIZES[1]]["rss_mib"] / got[SIZES[0]]["rss_mib"]})  # fmt: skip
    return {"machine": machine(), "rows": rows}


def markdown(res: dict) -> str:
    lines = [
        "# Peak memory at 10^8 and 10^9 samples",
        "",
        "`python benchmarks/bench_memory.py`; float32 zarr, chunks of 2^20, 20 changes, "
        '`segment(store, n_bkps=20, features="rff:64")`, a fresh process per call.',
        "",
        "| mode | RSS 10^8 (MiB) | RSS 10^9 (MiB) | ratio | s 10^8 | s 10^9 | read again 10^9 |",
        "|---|---|---|---|---|---|---|",
    ]
    a, b = (str(n) for n in SIZES)
    for r in res["rows"]:
        lines.append(
            f"| {r['mode']} | {r[a]['rss_mib']:.0f} | {r[b]['rss_mib']:.0f} | "
            f"{r['rss_ratio']:.3f} | {r[a]['seconds']:.2f} | {r[b]['seconds']:.2f} | "
            f"{r[b]['read_again']} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/kcp-memory")
    ap.add_argument("--out")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    report(run(args.dir), args.out, args.markdown, markdown)
