"""A fresh environment's first day: ``pip install .``, then the first
``kcpstream demo`` and the first ``segment()`` of a new process.

Two new virtual environments are made from this checkout, one after the
other: one installed as a user installs it (the wheel ships the kernels
compiled, ``setup.py``), the baseline with ``KCPSTREAM_PRECOMPILE=0`` (the
kernels compiled on first use, as before).  In each: the wall time of
``pip install .`` (pip's own download cache is shared and warm), of a new
process importing kcpstream and segmenting 10⁴ samples (defaults), and of
the first ``kcpstream demo`` (10⁷ samples), each from numba's cache as the
install left it (what the first process added is removed before the demo).  ``NUMBA_CACHE_DIR`` is
unset: numba keeps its cache next to the installed package.

Targets: the first demo ≤ 8 s, the first ``segment()`` of 10⁴ samples ≤ 3 s
(import included).

Usage: python benchmarks/bench_install.py [--out install.json] [--markdown install.md]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import machine, report

ROOT = Path(__file__).resolve().parents[1]

FIRST_SEGMENT = (
    "import numpy as np, kcpstream; "
    "kcpstream.segment(np.random.default_rng(0).standard_normal(10_000))"
)


def _timed(cmd: list[str], env: dict, cwd: str) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t


def environment(folder: str, precompile: bool) -> dict:
    venv = os.path.join(folder, "venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    bin_ = os.path.join(venv, "bin")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "PYTHON"))}
    env["PATH"] = bin_ + os.pathsep + env["PATH"]
    env["KCPSTREAM_PRECOMPILE"] = "1" if precompile else "0"
    pip = [os.path.join(bin_, "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--upgrade", "pip"], env=env, check=True, capture_output=True)
    build = os.path.join(ROOT, "build")  # a build folder of an earlier build is not reused
    subprocess.run(["rm", "-rf", build], check=True)
    out = {"precompiled": precompile, "seconds_install": _timed([*pip, str(ROOT)], env, folder)}
    installed = _numba_files(venv)
    out["seconds_first_segment"] = _timed(
        [os.path.join(bin_, "python"), "-c", FIRST_SEGMENT], env, folder
    )
    _restore(venv, installed)  # the demo starts from the cache as installed, too
    out["seconds_first_demo"] = _timed([os.path.join(bin_, "kcpstream"), "demo"], env, folder)
    return out


def _numba_files(venv: str) -> dict[Path, bytes]:
    """numba's cache files in the installed package, with their bytes."""
    site = next(Path(venv, "lib").glob("python*/site-packages/kcpstream"))
    return {p: p.read_bytes() for p in site.rglob("__pycache__/*.nb[ic]")}


def _restore(venv: str, files: dict[Path, bytes]) -> None:
    """numba's cache as it was: files written since removed, files changed put back."""
    for path in _numba_files(venv):
        if path not in files:
            path.unlink()
    for path, data in files.items():
        path.write_bytes(data)


def run() -> dict:
    out = {}
    for name, precompile in (("baseline", False), ("shipped", True)):
        with tempfile.TemporaryDirectory(prefix="kcp-install-") as folder:
            out[name] = environment(folder, precompile)
    base, new = out["baseline"], out["shipped"]
    return {
        **out,
        "ratio_first_demo": new["seconds_first_demo"] / base["seconds_first_demo"],
        "ratio_first_segment": new["seconds_first_segment"] / base["seconds_first_segment"],
        "ratio_install": new["seconds_install"] / base["seconds_install"],
        "target_first_demo_seconds": 8.0,
        "target_first_segment_seconds": 3.0,
        "met": new["seconds_first_demo"] <= 8.0 and new["seconds_first_segment"] <= 3.0,
        "machine": machine(),
    }


def markdown(r: dict) -> str:
    rows = [
        f"| {name} | {e['seconds_install']:.1f} s | {e['seconds_first_demo']:.1f} s | "
        f"{e['seconds_first_segment']:.2f} s |"
        for name, e in (("kernels compiled on first use (`KCPSTREAM_PRECOMPILE=0`)",
                         r["baseline"]), ("kernels shipped compiled (default)", r["shipped"]))
    ]  # fmt: skip
    return "\n".join([
        "# A fresh environment's first day",
        "",
        f"Machine: {r['machine']['cpus']} cores ({r['machine']['cpu']}), Python "
        f"{r['machine']['python']}.",
        "",
        "`python benchmarks/bench_install.py`: a new virtual environment each, "
        "`pip install .` from the checkout (pip's download cache warm), then a new "
        "process's first `segment()` of 10⁴ samples (import included) and the first "
        "`kcpstream demo` (10⁷ samples), each starting from numba's cache as the install "
        "left it.",
        "",
        "| environment | `pip install .` | first demo | first segment() |",
        "|---|---|---|---|",
        *rows,
        "",
        f"Ratios (shipped / baseline): demo {r['ratio_first_demo']:.2f}, first segment "
        f"{r['ratio_first_segment']:.2f}, install {r['ratio_install']:.2f}. Targets: first "
        f"demo ≤ 8 s and first segment ≤ 3 s: {'met' if r['met'] else 'not met'}.",
        "",
    ])  # fmt: skip


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    report(run(), args.out, args.markdown, markdown)
