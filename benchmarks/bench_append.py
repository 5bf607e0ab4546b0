"""A growing archive: append 1 % to a store and segment it again with its checkpoint.

A float32 store of ``--n`` samples with 20 distribution changes, in chunks of
2^20 (zarr's default codec), is segmented with the defaults and a checkpoint
(the full run); then 1 % more samples are appended (a shifted distribution)
and the call is made again with the same checkpoint (the update), and once
without it (a full run on the grown store: the change-points to match).
Then another 1 % of the same shifted distribution is appended (the next
hour of a live archive: no change at the end) and segmented again with the
checkpoint the update wrote (the second update) and without.
Each call runs in a fresh process after a warm-up call that compiles (a
cron job's ``kcpstream run``, less the imports).  The update, the next hour
and the full run are also measured in a process that has segmented another
store (2e6 samples, with a checkpoint) just before: one that has loaded the
block path's compiled kernels, the store's codecs and the thread pool, as
``kcpstream watch`` has after its first run.
Bytes read are counted twice: the process's ``rchar`` over the call (every
byte it read, from disk or page cache: the store's objects, the checkpoint,
anything else), and the bytes of the store's objects it opened (each opened
object's size, summed: zarr reads an object whole), told apart by a Python
audit hook on ``open``.

With ``--gaps`` the store has 5 % of its samples missing (NaN): 40 outages
of n/1000 samples and 1 % dropped one by one; each append has 1 % dropped
and one outage of a tenth of its length.

Target (issue: archives that live): the update reads at most 2 % of the
store's bytes, takes at most 5 % of the full run's time, and returns the
full run's change-points.

Usage: python benchmarks/bench_append.py [--n 100000000] [--repeat 3] [--gaps]
       [--dir /tmp/kcp-append] [--out append.json] [--markdown results/append.md]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys

from _report import PEAK_RSS_CODE, machine, store_bytes, store_cli

CHILD = (
    PEAK_RSS_CODE
    + """
import json, time, warnings
warnings.simplefilter('ignore')
import numpy as np, kcpstream

import os, sys

def rchar():
    with open('/proc/self/io') as fh:
        return next(int(ln.split()[1]) for ln in fh if ln.startswith('rchar'))

opened = []
def hook(event, args):
    if event == 'open' and isinstance(args[0], (str, os.PathLike)):
        name = os.fspath(args[0])
        if name.startswith({store!r}) and (args[1] is None or 'r' in str(args[1])):
            opened.append(name)

kcpstream.segment(np.random.default_rng(0).normal(size=5000))  # compile, warm
if {warm!r} is not None:  # a run on another store, as a long-lived process has made
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        kcpstream.segment({warm!r}, checkpoint=tmp)
sys.addaudithook(hook)
r0, t = rchar(), time.perf_counter()
res = kcpstream.segment({path!r}, checkpoint={checkpoint!r})
s, r1 = time.perf_counter() - t, rchar()
store_bytes = sum(os.path.getsize(f) for f in opened if os.path.isfile(f))
d = res.diagnostics
print(json.dumps({{'seconds': s, 'bytes_read': r1 - r0, 'store_bytes_read': store_bytes,
    'changepoints': res.changepoints.tolist(),
    'checkpoint': d.checkpoint, 'chunks_read': d.chunks_read, 'chunks_reused': d.chunks_reused,
    'fit_chunks_read': d.fit_chunks_read, 'gap_chunks_read': d.gap_chunks_read,
    'n_missing': d.n_missing,
    'samples_pass': d.samples_featurized_pass, 'read_again': d.samples_read_again,
    'rss_mib': peak_rss_mib()}}))
"""
)


def _child(path: str, checkpoint: str | None, warm: str | None = None) -> dict:
    """One call in a fresh process; ``warm``: a store segmented there first."""
    store = os.path.dirname(path)
    script = CHILD.format(path=path, checkpoint=checkpoint, store=store, warm=warm)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _script(code: str) -> None:
    """Run ``code`` in a child (the parent never holds the signal)."""
    subprocess.run([sys.executable, "-c", code], check=True)


#: Gaps of a store (``--gaps``) and of an append: a NaN share dropped one by
#: one, and outages (count, length as a share of the samples).
GAPS = (
    "def gaps(x, seed, outages, length):\n"
    "    rng = np.random.default_rng(seed)\n"
    "    x[rng.choice(len(x), len(x) // 100, replace=False)] = np.nan\n"
    "    size = max(1, int(len(x) * length))\n"
    "    for a in rng.choice(len(x) - size, outages, replace=False):\n"
    "        x[a : a + size] = np.nan\n"
    "    return x\n"
)


def _appended(path: str, start: int, extra: int, seed: int, gaps: bool) -> str:
    """The script appending ``extra`` samples (a shifted distribution) at ``start``."""
    body = f"np.random.default_rng({seed}).normal(size={extra}) * 2 + 1"
    if gaps:
        body = f"gaps({body}, {seed + 7}, 1, 0.1)"
    return (
        "import numpy as np, zarr\n" + GAPS + f"z = zarr.open_array({path!r}, mode='r+')\n"
        f"z.resize(({start + extra},))\n"
        f"z[{start}:] = ({body}).astype(z.dtype)\n"
    )


def run(n: int, repeat: int, root: str, gaps: bool = False) -> dict:
    os.makedirs(root, exist_ok=True)
    store = os.path.join(root, f"n{n}{'_gaps' if gaps else ''}.zarr")
    if not os.path.isdir(store):
        _script(
            "import numpy as np\n" + GAPS + "from kcpstream import datasets\n"
            f"x = datasets.changing_distribution({n}, 20, seed=0).x\n"
            + ("x = gaps(x, 0, 40, 0.001)\n" if gaps else "")
            + f"datasets.write_zarr(x, {store!r}, chunks=2**20)\n"
        )
    path = os.path.join(store, "x")
    other = os.path.join(root, "warm.zarr")
    if not os.path.isdir(other):
        _script(
            "from kcpstream import datasets\n"
            "x = datasets.changing_distribution(2_000_000, 4, seed=1).x\n"
            f"datasets.write_zarr(x, {other!r}, chunks=2**20)\n"
        )
    other = os.path.join(other, "x")
    extra = n // 100
    rounds = []
    for k in range(repeat):
        _script(f"import zarr; zarr.open_array({path!r}, mode='r+').resize(({n},))")
        ck = os.path.join(root, "ck")
        shutil.rmtree(ck, ignore_errors=True)
        shutil.rmtree(ck + "_warm", ignore_errors=True)
        warm_full = _child(path, ck + "_warm", other)  # a checkpoint written too
        full = _child(path, ck)
        size = store_bytes(store)
        _script(_appended(path, n, extra, k, gaps))
        # the same update twice, from a copy of the checkpoint: in a fresh process
        # and in a warm one
        shutil.rmtree(ck + "_copy", ignore_errors=True)
        shutil.copytree(ck, ck + "_copy")
        warm_update = _child(path, ck + "_copy", other)
        update = _child(path, ck)
        scratch = _child(path, None)
        # the next hour: another 1 % of the same regime (no change at the old end)
        _script(_appended(path, n + extra, extra, k + 100, gaps))
        shutil.rmtree(ck + "_copy", ignore_errors=True)
        shutil.copytree(ck, ck + "_copy")
        warm_second = _child(path, ck + "_copy", other)
        second = _child(path, ck)
        second_scratch = _child(path, None)
        assert warm_update["changepoints"] == update["changepoints"]
        assert warm_second["changepoints"] == second["changepoints"]
        rounds.append({"full": full, "update": update, "scratch": scratch, "store_bytes": size,
                       "second": second, "second_scratch": second_scratch,
                       "warm_full": warm_full, "warm_update": warm_update,
                       "warm_second": warm_second})  # fmt: skip

    def med(kind: str, key: str) -> float:
        return statistics.median(r[kind][key] for r in rounds)

    last = rounds[-1]
    return {
        "n": n,
        "gaps": gaps,
        "missing_share": last["full"]["n_missing"] / n,
        "gap_chunks_read": last["update"]["gap_chunks_read"],
        "second_gap_chunks_read": last["second"]["gap_chunks_read"],
        "appended": extra,
        "repeat": repeat,
        "machine": machine(),
        "full_seconds": med("full", "seconds"),
        "update_seconds": med("update", "seconds"),
        "scratch_seconds": med("scratch", "seconds"),
        "time_ratio": med("update", "seconds") / med("full", "seconds"),
        "store_bytes": last["store_bytes"],
        "update_bytes_read": med("update", "bytes_read"),
        "full_bytes_read": med("full", "bytes_read"),
        "bytes_ratio": med("update", "bytes_read") / last["store_bytes"],
        "update_store_bytes_read": med("update", "store_bytes_read"),
        "full_store_bytes_read": med("full", "store_bytes_read"),
        "store_bytes_ratio": med("update", "store_bytes_read") / last["store_bytes"],
        "fit_chunks_read": last["update"]["fit_chunks_read"],
        "update_rss_mib": med("update", "rss_mib"),
        "full_rss_mib": med("full", "rss_mib"),
        "checkpoint": last["update"]["checkpoint"],
        "chunks_read": last["update"]["chunks_read"],
        "chunks_reused": last["update"]["chunks_reused"],
        "samples_read_again": last["update"]["read_again"],
        "same_changepoints": all(
            r["update"]["changepoints"] == r["scratch"]["changepoints"] for r in rounds
        ),
        "warm_full_seconds": med("warm_full", "seconds"),
        "warm_update_seconds": med("warm_update", "seconds"),
        "warm_time_ratio": med("warm_update", "seconds") / med("warm_full", "seconds"),
        "warm_second_time_ratio": med("warm_second", "seconds") / med("warm_full", "seconds"),
        "second_seconds": med("second", "seconds"),
        "second_time_ratio": med("second", "seconds") / med("full", "seconds"),
        "second_store_bytes_ratio": med("second", "store_bytes_read") / last["store_bytes"],
        "second_read_again": last["second"]["read_again"],
        "second_same_changepoints": all(
            r["second"]["changepoints"] == r["second_scratch"]["changepoints"] for r in rounds
        ),
        "per_round": [  # each round's appends are other random samples: their work differs
            {
                "full_seconds": r["full"]["seconds"],
                "update_seconds": r["update"]["seconds"],
                "update_read_again": r["update"]["read_again"],
                "update_store_bytes_ratio": r["update"]["store_bytes_read"] / r["store_bytes"],
                "second_seconds": r["second"]["seconds"],
                "second_read_again": r["second"]["read_again"],
                "second_store_bytes_ratio": r["second"]["store_bytes_read"] / r["store_bytes"],
                "warm_full_seconds": r["warm_full"]["seconds"],
                "warm_update_seconds": r["warm_update"]["seconds"],
                "warm_second_seconds": r["warm_second"]["seconds"],
            }
            for r in rounds
        ],
    }


def markdown(r: dict) -> str:
    return "\n".join(
        [
            "# A growing archive: append 1 % and segment again with the checkpoint",
            "",
            f"`python benchmarks/bench_append.py --n {r['n']} --repeat {r['repeat']}"
            f"{' --gaps' if r.get('gaps') else ''}`; "
            f"{r['machine'].get('cpus')} cores, float32 from zarr (zstd, chunks of 2^20), "
            f"defaults, median of {r['repeat']} rounds (fresh processes, warm)"
            + (
                f"; {100 * r['missing_share']:.2f} % of the samples missing, the update "
                f"read {r['gap_chunks_read']} chunks to find gaps (the next hour "
                f"{r['second_gap_chunks_read']})"
                if r.get("gaps")
                else ""
            )
            + ".",
            "",
            "| run | seconds | store's objects read | all bytes read (rchar) | peak RSS (MiB) |",
            "|---|---|---|---|---|",
            f"| full run, {r['n']} samples, checkpoint written | {r['full_seconds']:.2f} | "
            f"{r['full_store_bytes_read'] / 2**20:.1f} MiB | "
            f"{r['full_bytes_read'] / 2**20:.0f} MiB | {r['full_rss_mib']:.0f} |",
            f"| update after appending {r['appended']} samples | {r['update_seconds']:.2f} | "
            f"{r['update_store_bytes_read'] / 2**20:.1f} MiB | "
            f"{r['update_bytes_read'] / 2**20:.1f} MiB | {r['update_rss_mib']:.0f} |",
            f"| full run on the grown store, no checkpoint | {r['scratch_seconds']:.2f} | | | |",
            "",
            f"- update / full run time: **{r['time_ratio']:.3f}** (target ≤ 0.05); in a "
            f"process that has segmented another store before: "
            f"**{r['warm_time_ratio']:.3f}** ({r['warm_update_seconds']:.2f} s against "
            f"{r['warm_full_seconds']:.2f} s), the next hour "
            f"{r['warm_second_time_ratio']:.3f}",
            f"- the store's bytes the update read / the store "
            f"({r['store_bytes'] / 2**20:.0f} MiB): **{r['store_bytes_ratio']:.4f}** "
            f"(target ≤ 0.02); all bytes it read (the checkpoint too) / the store: "
            f"{r['bytes_ratio']:.4f}",
            f"- checkpoint `{r['checkpoint']}`: {r['chunks_read']} chunks read by the data "
            f"pass, {r['chunks_reused']} reused, {r['fit_chunks_read']} read for the fit, "
            f"{r['samples_read_again']} samples read again by refinement",
            f"- change-points of the update = those of the full run on the grown store: "
            f"{'yes' if r['same_changepoints'] else 'no'}",
            f"- a second update, after another 1 % of the appended regime (no change at "
            f"the end this time): {r['second_seconds']:.2f} s, "
            f"**{r['second_time_ratio']:.3f}** of the full run, "
            f"**{r['second_store_bytes_ratio']:.4f}** of the store's bytes, "
            f"{r['second_read_again']} samples read again by refinement; change-points = "
            f"a full run's: {'yes' if r['second_same_changepoints'] else 'no'}",
            "",
            "| round | full run (s) | update (s) | read again | store's bytes | "
            "next hour (s) | read again | store's bytes | warm: full, update, next hour (s) |",
            "|---|---|---|---|---|---|---|---|---|",
            *(
                f"| {i} | {q['full_seconds']:.2f} | {q['update_seconds']:.2f} | "
                f"{q['update_read_again']} | {q['update_store_bytes_ratio']:.4f} | "
                f"{q['second_seconds']:.2f} | {q['second_read_again']} | "
                f"{q['second_store_bytes_ratio']:.4f} | {q['warm_full_seconds']:.2f}, "
                f"{q['warm_update_seconds']:.2f}, {q['warm_second_seconds']:.2f} |"
                for i, q in enumerate(r["per_round"])
            ),
            "",
        ]
    )


def main() -> None:
    store_cli(__doc__, run, markdown, "/tmp/kcp-append", (("gaps", "a store with gaps"),))


if __name__ == "__main__":
    main()
