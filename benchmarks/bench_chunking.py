"""Any chunking: one store in chunks of 2^20 samples, of 2^24, and in one chunk.

The same float32 signal of ``--n`` samples with 20 distribution changes is
written to zarr stores (zarr's default codec, zstd) that differ only in their
chunk length; each call then runs in a fresh process (peak RSS of its own,
after a warm-up call that compiles):

* ``segment(store, n_bkps=20, features="rff:64")``;
* ``segment(store)``, the defaults.

A chunk much longer than a data-pass task is read once and featurized in
slices by several tasks; a chunk larger than the sample cache's budget is
kept beyond it while the job runs, so refinement does not decode it again.
Reported per store and call: median seconds over ``--repeat`` interleaved
rounds, peak RSS, samples read again after the data pass, the data pass's
tasks, and the ratio of seconds to the 2^20-chunk store in the same run
(target for one chunk: at most 1.5, RSS at most 1.5 GiB).

Usage: python benchmarks/bench_chunking.py [--n 100000000] [--repeat 3]
       [--dir /tmp/kcp-chunking] [--out chunking.json] [--markdown results/chunking.md]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

from _report import machine, segment_in_child, store_cli

CALLS = {
    "rff:64, n_bkps=20": "kcpstream.segment({path!r}, n_bkps=20, features='rff:64')",
    "defaults": "kcpstream.segment({path!r})",
}


def write_stores(n: int, root: str) -> dict[str, str]:
    """The stores, written by a child process: a child's peak RSS counts its
    parent's at the fork, so the parent never holds the signal."""
    os.makedirs(root, exist_ok=True)
    chunks = {"2^20": 2**20, "2^24": 2**24, "one chunk": n}
    stores = {label: os.path.join(root, f"n{n}-c{chunk}.zarr") for label, chunk in chunks.items()}
    missing = {stores[label]: chunk for label, chunk in chunks.items()
               if not os.path.isdir(stores[label])}  # fmt: skip
    if missing:
        script = (
            "from kcpstream import datasets\n"
            f"x = datasets.changing_distribution({n}, 20, seed=0).x\n"
            f"for path, chunk in {missing!r}.items():\n"
            "    datasets.write_zarr(x, path, chunks=chunk)\n"
        )
        subprocess.run([sys.executable, "-c", script], check=True)
    return stores


def run(n: int, repeat: int, root: str) -> dict:
    stores = write_stores(n, root)
    runs: dict[tuple[str, str], list[dict]] = {}
    for _ in range(repeat):  # interleaved, so that drift hits every mode alike
        for label, path in stores.items():
            zarr_path = os.path.join(path, "x")
            for call, template in CALLS.items():
                runs.setdefault((label, call), []).append(
                    segment_in_child(template.format(path=zarr_path))
                )
    rows = []
    for (label, call), results in runs.items():
        rows.append(
            {
                "store": label,
                "call": call,
                "seconds": statistics.median(r["seconds"] for r in results),
                "rss_mib": statistics.median(r["rss_mib"] for r in results),
                "read_again": results[0]["read_again"],
                "pass_tasks": results[0]["pass_tasks"],
                "changepoints": results[0]["changepoints"],
            }
        )
    base = {r["call"]: r for r in rows if r["store"] == "2^20"}
    for r in rows:
        r["ratio"] = r["seconds"] / base[r["call"]]["seconds"]
        r["same_changepoints"] = r["changepoints"] == base[r["call"]]["changepoints"]
    for r in rows:
        del r["changepoints"]
    return {"n": n, "repeat": repeat, "machine": machine(), "rows": rows}


def markdown(result: dict) -> str:
    lines = [
        "# Any chunking: the same store in chunks of 2^20, 2^24 and one chunk",
        "",
        f"`python benchmarks/bench_chunking.py --n {result['n']} --repeat {result['repeat']}`; "
        f"{result['machine'].get('cpus')} cores, float32 from zarr (zstd), median of "
        f"{result['repeat']} fresh processes.",
        "",
        "| store | call | seconds | ratio to 2^20 | peak RSS (MiB) | read again | pass tasks "
        "| same change-points |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['store']} | {r['call']} | {r['seconds']:.2f} | {r['ratio']:.2f} | "
            f"{r['rss_mib']:.0f} | {r['read_again']} | {r['pass_tasks']} | "
            f"{'yes' if r['same_changepoints'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    store_cli(__doc__, run, markdown, "/tmp/kcp-chunking")


if __name__ == "__main__":
    main()
