"""Output of the benchmark scripts: JSON on stdout and in a file, a markdown table."""

from __future__ import annotations

import inspect
import json
import os
import platform
from collections.abc import Callable
from typing import Any


def report(result: dict[str, Any], out: str | None, markdown_path: str | None,
           markdown: Callable[[dict[str, Any]], str] | None = None) -> None:  # fmt: skip
    """Print ``result`` as JSON; write it to ``out`` and its table to ``markdown_path``."""
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if out:
        with open(out, "w") as fh:
            fh.write(text + "\n")
    if markdown_path and markdown is not None:
        with open(markdown_path, "w") as fh:
            fh.write(markdown(result))


def store_cli(
    doc: str,
    run: Callable[[int, int, str], dict[str, Any]],
    markdown: Callable[[dict[str, Any]], str],
    directory: str,
    flags: tuple[tuple[str, str], ...] = (),
) -> None:
    """The command line of a benchmark on stores it writes: ``--n``, ``--repeat``,
    ``--dir`` (where the stores are kept between runs), ``--out``, ``--markdown``
    and each ``(name, help)`` of ``flags`` (a switch, passed to ``run`` by
    name); runs ``run(n, repeat, dir, **flags)`` and reports its result."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=directory)
    ap.add_argument("--out")
    ap.add_argument("--markdown")
    for name, text in flags:
        ap.add_argument(f"--{name}", action="store_true", help=text)
    args = ap.parse_args()
    given = {name: getattr(args, name) for name, _ in flags}
    report(run(args.n, args.repeat, args.dir, **given), args.out, args.markdown, markdown)


def store_bytes(path: str, metadata: bool = True) -> int:
    """Bytes of a zarr store on disk (without its ``zarr.json`` files if not ``metadata``)."""
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, files in os.walk(path)
        for name in files
        if metadata or "zarr.json" not in name
    )


def peak_rss_mib() -> float:
    """This process's own peak resident memory, MiB.

    ``VmHWM`` belongs to the address space, which exec makes anew;
    ``ru_maxrss`` starts at the parent's peak at the fork (a benchmark that
    wrote its data first would inflate every child's figure)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


#: :func:`peak_rss_mib`'s source, for the scripts run in child processes.
PEAK_RSS_CODE = inspect.getsource(peak_rss_mib)


def segment_in_child(call: str, env: dict[str, str] | None = None) -> dict:
    """Evaluate ``call`` (an expression giving a Segmentation; ``np``, ``xr`` and
    ``kcpstream`` are imported) in a fresh process after a warm-up call that
    compiles: its seconds, change-points, time stamps, samples featurized / n,
    samples read again, data-pass tasks and the process's peak RSS.  ``env``:
    variables added to the child's environment."""
    import subprocess
    import sys

    script = PEAK_RSS_CODE + (
        "import json, time, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "import numpy as np, xarray as xr, kcpstream\n"
        "kcpstream.segment(np.random.default_rng(0).normal(size=5000))  # compile, warm\n"
        "t = time.perf_counter()\n"
        f"res = {call}\n"
        "s = time.perf_counter() - t\n"
        "times = [str(x) for x in res.changepoint_times] if res.times is not None else None\n"
        "print(json.dumps({'seconds': s, 'changepoints': res.changepoints.tolist(),"
        " 'times': times, 'passes': res.diagnostics.passes,"
        " 'read_again': res.diagnostics.samples_read_again,"
        " 'pass_tasks': res.diagnostics.pass_tasks,"
        " 'rss_mib': peak_rss_mib()}))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=None if env is None else {**os.environ, **env})  # fmt: skip
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine() -> dict:
    """The machine a benchmark ran on: Python, CPU count and model, memory."""
    info = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
    }
    try:
        with open("/proc/cpuinfo") as fh:
            info["cpu"] = next(ln.split(":", 1)[1].strip() for ln in fh if "model name" in ln)
        with open("/proc/meminfo") as fh:
            info["memory_gib"] = round(int(fh.readline().split()[1]) / 2**20, 1)
    except (OSError, StopIteration):
        pass
    return info
