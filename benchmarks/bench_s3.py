"""A store in S3 against the same store on disk.

Starts moto's S3 server (``python -m moto.server``) in its own process on
localhost, writes ``--n`` float32 samples (chunks of 2**20, ten changes of
spread) to a bucket there and to a local folder, and runs
``segment(url, storage_options=...)`` and ``segment(path)`` each in a fresh
process: wall time of the call (after a warm-up call that compiles) and the
process's peak RSS.  The ratio is S3 / disk, measured in the same run.  The
server shares the machine's cores with the client, so the ratio is an upper
bound for a remote object store with its own machines.

Usage: python benchmarks/bench_s3.py [--n 100000000] [--dir /tmp/kcp-s3]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

import numpy as np
from _report import machine, report, segment_in_child

CHUNK = 2**20
BUCKET = "kcp-bench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write(targets: list[tuple[str, dict | None]], n: int) -> None:
    import zarr

    rng = np.random.default_rng(0)
    arrays = [
        zarr.create_array(store=url, shape=(n,), chunks=(CHUNK,), dtype="f4", storage_options=opts)
        for url, opts in targets
    ]
    cps = np.linspace(0, n, 12)[1:-1].astype(np.int64)
    for a in range(0, n, 16 * CHUNK):
        b = min(n, a + 16 * CHUNK)
        segment = np.searchsorted(cps, np.arange(a, b), side="right")
        x = rng.normal(size=b - a).astype(np.float32) * np.where(segment % 2, 3, 1)
        for z in arrays:
            z[a:b] = x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000_000)
    ap.add_argument("--dir", default="/tmp/kcp-s3")
    ap.add_argument("--repeat", type=int, default=2, help="Runs of each; the fastest is kept.")
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        endpoint = f"http://127.0.0.1:{port}"
        opts = {"endpoint_url": endpoint, "key": "bench", "secret": "bench"}
        import s3fs

        for _ in range(100):  # the server takes a moment to listen
            try:
                s3fs.S3FileSystem(**opts).mkdir(BUCKET)
                break
            except Exception:
                time.sleep(0.1)
        url = f"s3://{BUCKET}/x-{args.n}.zarr"
        path = os.path.join(args.dir, f"x-{args.n}.zarr")
        t = time.perf_counter()
        _write([(url, opts), (path, None)], args.n)
        seconds_write = time.perf_counter() - t
        runs = {"disk": [], "s3": []}
        for _ in range(args.repeat):
            runs["disk"].append(segment_in_child(f"kcpstream.segment({path!r})"))
            runs["s3"].append(
                segment_in_child(f"kcpstream.segment({url!r}, storage_options={opts!r})")
            )
    finally:
        server.terminate()
        server.wait()
    best = {k: min(v, key=lambda r: r["seconds"]) for k, v in runs.items()}
    result = {
        "n": args.n,
        "machine": machine(),
        "seconds_write_both": round(seconds_write, 2),
        "disk": best["disk"],
        "s3": best["s3"],
        "time_ratio_s3_over_disk": round(best["s3"]["seconds"] / best["disk"]["seconds"], 3),
        "rss_ratio_s3_over_disk": round(best["s3"]["rss_mib"] / best["disk"]["rss_mib"], 3),
        "same_changepoints": best["s3"]["changepoints"] == best["disk"]["changepoints"],
    }
    report(result, args.out, args.markdown, _markdown)


def _markdown(result: dict) -> str:
    d, s = result["disk"], result["s3"]
    return "\n".join(
        [
            f"# A store in S3 (moto on localhost) against disk, n = {result['n']:,}",
            "",
            "| store | seconds | peak RSS MiB | samples featurized / n |",
            "|---|---|---|---|",
            f"| disk | {d['seconds']:.2f} | {d['rss_mib']:.0f} | {d['passes']:.3f} |",
            f"| S3 | {s['seconds']:.2f} | {s['rss_mib']:.0f} | {s['passes']:.3f} |",
            "",
            f"S3 / disk: {result['time_ratio_s3_over_disk']:.2f}× the time, "
            f"{result['rss_ratio_s3_over_disk']:.2f}× the memory; same change-points: "
            f"{result['same_changepoints']}. The S3 server runs on the same 2 cores.",
            "",
        ]
    )


if __name__ == "__main__":
    main()
