"""The first call of a fresh process: with numba's cache empty, and once it is warm.

Each figure comes from a new Python process (``NUMBA_CACHE_DIR`` a new
temporary folder, so the package's own cache is not used): it imports
kcpstream, then times ``segment(x)`` twice on the same n = 10⁴ series (one
change, defaults).

* ``cold``: the cache is empty; the first call compiles what it uses.
* ``warmup``: ``kcpstream.warm_up()`` in a new process on that cache (what
  ``kcpstream warmup`` does once per environment).
* ``warm``: a new process after that; its first call loads the kernels.

``ratio`` is the warm first call over the same process's second call (the
baseline: a call with everything loaded). The target is a warm first call
under 1.5 s.

Usage: python benchmarks/bench_first.py [--n 10000] [--out first.json] [--markdown first.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from _report import machine, report

CHILD = """
import json, time
t0 = time.perf_counter()
import numpy as np
import kcpstream
t1 = time.perf_counter()
x = np.random.default_rng(0).standard_normal({n})
x[{n} // 2:] += 2.0
out = {{"seconds_import": t1 - t0}}
if {warm_up}:
    w = kcpstream.warm_up()
    out.update(seconds_warm_up=w.seconds, compiled=w.compiled)
else:
    for key in ("seconds_first", "seconds_second"):
        t = time.perf_counter()
        r = kcpstream.segment(x)
        out[key] = time.perf_counter() - t
    out["changepoints"] = r.changepoints.tolist()
print(json.dumps(out))
"""


def child(n: int, cache: str, warm_up: bool = False) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    code = CHILD.format(n=n, warm_up=warm_up)
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True)  # fmt: skip
    return json.loads(out.stdout.splitlines()[-1])


def run(n: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="kcp-first-") as cache:
        cold = child(n, cache)
    with tempfile.TemporaryDirectory(prefix="kcp-first-") as cache:
        warm_up = child(n, cache, warm_up=True)
        warm = child(n, cache)
    return {
        "n": n,
        "cold": cold,
        "warmup": warm_up,
        "warm": warm,
        "ratio": warm["seconds_first"] / warm["seconds_second"],
        "target_first_call_seconds": 1.5,
        "met": warm["seconds_first"] < 1.5,
        "machine": machine(),
    }


def markdown(r: dict) -> str:
    c, u, w = r["cold"], r["warmup"], r["warm"]
    return "\n".join([
        "# The first call of a fresh process",
        "",
        f"`python benchmarks/bench_first.py --n {r['n']}`: n = {r['n']:,}, defaults, "
        "each row a new process with its own `NUMBA_CACHE_DIR`.",
        "",
        "| process | import | first call | second call |",
        "|---|---|---|---|",
        f"| empty cache | {c['seconds_import']:.2f} s | {c['seconds_first']:.2f} s | "
        f"{c['seconds_second']:.3f} s |",
        f"| `kcpstream.warm_up()` on an empty cache | {u['seconds_import']:.2f} s | "
        f"{u['seconds_warm_up']:.1f} s, {u['compiled']} functions compiled | |",
        f"| after it | {w['seconds_import']:.2f} s | {w['seconds_first']:.2f} s | "
        f"{w['seconds_second']:.3f} s |",
        "",
        f"Warm first call / second call: {r['ratio']:.1f}; target: a warm first call "
        f"under 1.5 s: {'met' if r['met'] else 'not met'}.",
        "",
    ])  # fmt: skip


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--out")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    report(run(args.n), args.out, args.markdown, markdown)
