"""Peers: kcpstream beside the change-point tools people would otherwise use.

Two signals, each at n in {1e3, 1e4, 1e5, 1e6, 1e7}:

* ``scenario1``: the thesis's scenario 1, univariate, 20 change-points
  (seed 7);
* ``multivariate8``: 8 Gaussian channels whose correlation changes, 20
  change-points (seed 7).

Every (method, signal, n) runs in a fresh subprocess with a 300 s timeout and
a 20 GiB address-space limit; a method is not run at larger n on a signal
once it has failed there (timeout, memory or error).  Each child first runs
its method on a 500-sample signal (untimed: imports and JIT compilation),
then times a call on the signal, which was generated before the clock
starts; a call under 1 s is timed :data:`SHORT_REPEATS` times in all and the
median kept.  Reported: seconds, the child's peak resident memory, and F1 with
a margin of 1 % of n (``kcpstream.metrics.f1_score``).  One signal's F1 moves
by 0.05 with one change-point found or missed, so where a call is short (at
most :data:`F1_BUDGET` seconds for all of them) the child also segments
:data:`F1_DRAWS` - 1 more draws of the signal (seeds 8, 9, ...) and the table
shows the mean F1 over the :data:`F1_DRAWS` draws (``f1_mean``; ``f1`` stays
the first draw's).

Methods and their settings (a method given the true count gets 20):

* kcpstream ``segment(x, n_bkps=20)``, ``segment(x)`` (``pen="auto"``) and
  ``segment(x, n_bkps=20, method="dynp")`` (exact dynamic programming on a
  grid of at most 2048 points, then exact local refinement);
* ruptures ``KernelCPD(kernel="rbf")``, Dynp (``n_bkps=20``) and Pelt
  (``pen = 0.5 log n``, chosen on scenario 1 at n = 4000 with another seed),
  ``gamma = 1 / (2 sigma^2)`` with sigma kcpstream's default bandwidth (half
  the median distance between samples: the same kernel kcpstream's features
  approximate), passed explicitly so that ruptures need not build the Gram
  matrix for its own median;
* ruptures ``Binseg(model="rbf")`` and ``Binseg(model="l2")``, ``n_bkps=20``,
  ruptures' defaults otherwise (rbf: its own median heuristic, Gram matrix);
* skchange ``PELT`` and ``SeededBinarySegmentation`` with ``GaussianCost`` and
  ``EDFCost`` (default penalties);
* changeforest ``changeforest(x, "random_forest", "bs")``.

Prints JSON and writes a markdown table with ``--markdown``.  With ``--log``,
every row is appended to a JSON-lines file as soon as it is measured, and rows
already there are not measured again: the suite takes about an hour (most of
it peers running into the 300 s limit), and an interrupted run resumes.

Usage: python benchmarks/bench_peers.py [--n 1000 ... 10000000] [--signals scenario1 multivariate8]
       [--methods NAME ...] [--timeout 300] [--log rows.jsonl] [--out peers.json]
       [--markdown peers.md]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from _report import peak_rss_mib, report

N_VALUES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
SIGNALS = ("scenario1", "multivariate8")
N_CHANGES = 20
SEED = 7
MEMORY_LIMIT = 20 * 2**30
SHORT_REPEATS = 5  # calls timed when the first takes under 1 s
F1_DRAWS = 10  # draws of the signal the F1 is averaged over, where affordable
F1_BUDGET = 60.0  # seconds the extra draws may take in all

METHODS = (
    "kcpstream n_bkps",
    "kcpstream auto",
    "kcpstream dynp",
    "ruptures KernelCPD rbf Dynp",
    "ruptures KernelCPD rbf Pelt",
    "ruptures Binseg rbf",
    "ruptures Binseg l2",
    "skchange PELT Gaussian",
    "skchange PELT EDF",
    "skchange SeededBinseg Gaussian",
    "skchange SeededBinseg EDF",
    "changeforest random_forest bs",
)


def make_signal(name: str, n: int, seed: int = SEED):
    from kcpstream import datasets

    if name == "scenario1":
        sig = datasets.scenario1(n, N_CHANGES, seed=seed)
        return sig.x.reshape(n, 1).astype(float), sig.changepoints
    if name == "multivariate8":
        sig = datasets.multivariate(n, N_CHANGES, d=8, seed=seed)
        return sig.x, sig.changepoints
    raise ValueError(f"unknown signal {name!r}")


def detector(method: str, x):
    """A function of the signal returning the change-points (sorted, no ``n``)."""
    import numpy as np

    if method.startswith("kcpstream"):
        import dask

        import kcpstream

        kw = {
            "kcpstream n_bkps": {"n_bkps": N_CHANGES},
            "kcpstream auto": {},
            "kcpstream dynp": {"n_bkps": N_CHANGES, "method": "dynp"},
        }[method]

        def run(x):
            with dask.config.set(scheduler="threads"):
                return kcpstream.segment(x, **kw).changepoints

        return run
    if method.startswith("ruptures"):
        import ruptures as rpt

        from kcpstream.features.bandwidth import AUTO_FRACTION, median_distance

        if method.startswith("ruptures KernelCPD"):
            sigma = AUTO_FRACTION * median_distance(x[:: max(1, len(x) // 2048)])
            params = {"gamma": 1.0 / (2.0 * sigma**2)}
            if method.endswith("Dynp"):
                return lambda x: rpt.KernelCPD("rbf", params=params).fit(x).predict(n_bkps=20)[:-1]
            pen = 0.5 * np.log(len(x))
            return lambda x: rpt.KernelCPD("rbf", params=params).fit(x).predict(pen=pen)[:-1]
        model = method.split()[-1]
        return lambda x: rpt.Binseg(model=model).fit(x).predict(n_bkps=N_CHANGES)[:-1]
    if method.startswith("skchange"):
        from skchange.detectors import PELT, SeededBinarySegmentation
        from skchange.interval_scorers import CostChangeScore, EDFCost, GaussianCost

        cost = {"Gaussian": GaussianCost, "EDF": EDFCost}[method.split()[-1]]()
        if "PELT" in method:
            det = PELT(cost=cost)
        else:
            det = SeededBinarySegmentation(change_score=CostChangeScore(cost))
        return lambda x: det.fit(x).predict(x)
    if method.startswith("changeforest"):
        from changeforest import changeforest

        return lambda x: changeforest(x, "random_forest", "bs").split_points()
    raise ValueError(f"unknown method {method!r}")


def child(method: str, signal: str, n: int) -> None:
    import numpy as np

    from kcpstream import metrics

    small, _ = make_signal(signal, 500)
    detector(method, small)(small)  # imports and compilation, untimed
    x, _ = make_signal(signal, n)
    run = detector(method, x)
    t0 = time.perf_counter()
    cps = run(x)
    times = [time.perf_counter() - t0]
    while times[0] < 1.0 and len(times) < SHORT_REPEATS:  # a short call: its median
        t0 = time.perf_counter()
        run(x)
        times.append(time.perf_counter() - t0)
    seconds = float(np.median(times))
    rss = peak_rss_mib() * 2**20
    cps = np.asarray(cps, dtype=np.int64).ravel().tolist()
    f1_draws = []
    if seconds * (F1_DRAWS - 1) <= F1_BUDGET:  # short enough: more draws for the F1
        for seed in range(SEED + 1, SEED + F1_DRAWS):
            x, true = make_signal(signal, n, seed)
            found = np.asarray(detector(method, x)(x), dtype=np.int64).ravel()
            f1_draws.append(metrics.f1_score(true, found, max(1, n // 100)))
    out = {"seconds": seconds, "peak_rss": rss, "changepoints": cps, "f1_draws": f1_draws}
    print(json.dumps(out))


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_one(method: str, signal: str, n: int, timeout: float) -> dict:
    """One run in a subprocess: its figures, or ``status`` timeout / memory / error."""
    cmd = [sys.executable, __file__, "--child", method, signal, str(n)]
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=_limit_memory
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout"}
    if out.returncode:
        err = out.stderr.strip().splitlines()
        memory = "MemoryError" in out.stderr or "bad_alloc" in out.stderr or out.returncode < 0
        return {"status": "memory" if memory else "error", "message": err[-1] if err else ""}
    return {"status": "ok", **json.loads(out.stdout.strip().splitlines()[-1])}


def markdown(result: dict) -> str:
    ns = sorted({r["n"] for r in result["rows"]})
    lines = []
    for signal in result["signals"]:
        lines += [
            f"### {signal}: seconds (F1, margin 1 % of n: mean over {F1_DRAWS} draws of the "
            "signal, or * the first draw only)",
            "",
            "| method | " + " | ".join(f"n = {n:.0e}" for n in ns) + " |",
            "|---|" + "---|" * len(ns),
        ]
        for method in result["methods"]:
            cells = []
            for n in ns:
                row = [r for r in result["rows"] if (r["method"], r["signal"], r["n"]) ==
                       (method, signal, n)]  # fmt: skip
                if not row:
                    cells.append("not run")
                elif row[0]["status"] != "ok":
                    cells.append(row[0]["status"])
                else:
                    r = row[0]
                    mark = "" if r.get("f1_draws", 1) > 1 else "*"
                    cells.append(f"{r['seconds']:.3g} s ({r.get('f1_mean', r['f1']):.2f}{mark})")
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append(
        "A method is not run at larger n once it has failed (timeout "
        f"{result['timeout']:.0f} s, or memory over 20 GiB)."
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--child", nargs=3, metavar=("METHOD", "SIGNAL", "N"), help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, nargs="+", default=list(N_VALUES))
    ap.add_argument("--signals", nargs="+", default=list(SIGNALS), choices=SIGNALS)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--log", default=None, help="JSON-lines log of rows; reused when resuming")
    args = ap.parse_args()
    if args.child:
        method, signal, n = args.child
        child(method, signal, int(n))
        return
    result = measure(args.n, args.signals, args.methods, args.timeout, args.log)
    report(result, args.out, args.markdown, markdown)


def measure(
    ns: list[int],
    signals: tuple[str, ...] | list[str] = SIGNALS,
    methods: tuple[str, ...] | list[str] = METHODS,
    timeout: float = 300.0,
    log: str | None = None,
) -> dict:
    """Every method on every signal, n ascending, stopping a method at its first
    failure.  Each row is appended to ``log`` (JSON lines) as it is measured; rows
    already in ``log`` are reused, so an interrupted suite resumes where it stopped."""
    from kcpstream import metrics

    done: dict[tuple, dict] = {}
    if log and os.path.exists(log):
        with open(log) as fh:
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    done[(row["method"], row["signal"], row["n"])] = row
    rows = []
    for signal in signals:
        for method in methods:
            for n in sorted(ns):
                row = done.get((method, signal, n))
                if row is None:
                    _, true = make_signal(signal, n)
                    res = run_one(method, signal, n, timeout)
                    row = {"method": method, "signal": signal, "n": n, **res}
                    if res["status"] == "ok":
                        cps = row.pop("changepoints")
                        row["f1"] = metrics.f1_score(true, cps, max(1, n // 100))
                        row["n_changepoints"] = len(cps)
                        draws = [row["f1"], *row.pop("f1_draws")]
                        row["f1_mean"] = sum(draws) / len(draws)
                        row["f1_draws"] = len(draws)
                    if log:
                        with open(log, "a") as fh:
                            fh.write(json.dumps(row) + "\n")
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
                if row["status"] != "ok":
                    break
    return {
        "benchmark": "peers",
        "signals": list(signals),
        "methods": list(methods),
        "timeout": timeout,
        "memory_limit_bytes": MEMORY_LIMIT,
        "rows": rows,
    }


if __name__ == "__main__":
    main()
