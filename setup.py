"""Build step: ship kcpstream's kernels compiled.

numba compiles kcpstream's kernels on first use (about 20 s for all of them
on 2 cores) and caches them next to their sources.  A wheel built here runs
:func:`kcpstream.warm_up` on the built package, so the wheel carries that
cache (``__pycache__/*.nbi``, ``*.nbc``) and an installed environment's first
call loads the kernels instead of compiling them.  numba keys its cache on
the source's content, its own version and the CPU, so the cache is used
where those match (a wheel built by ``pip install .`` on the machine it is
installed on) and is ignored, and the kernels compiled as usual, elsewhere.

``KCPSTREAM_PRECOMPILE=0`` builds without it (for a wheel meant for other
machines).  An editable install uses the source tree's own cache.  A failed
compile leaves the wheel without the cache and says so; it never fails the
build.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

_WARM_UP = "import kcpstream; w = kcpstream.warm_up(); print(w.compiled, round(w.seconds, 1))"


def ship_kernels(build_lib: str | os.PathLike) -> str:
    """Compile the kernels of the package built in ``build_lib`` into its own
    ``__pycache__`` folders (numba's files only); a line saying what was done."""
    package = Path(build_lib) / "kcpstream"
    # a build directory left by an earlier build may hold caches of other sources
    for cache in package.rglob("__pycache__"):
        shutil.rmtree(cache)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(build_lib).resolve()), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", _WARM_UP], cwd=build_lib, env=env, capture_output=True, text=True
    )
    if done.returncode:
        for cache in package.rglob("__pycache__"):
            shutil.rmtree(cache)
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"kcpstream: kernels not shipped compiled ({last})"
    # only numba's files: Python writes its own bytecode at install
    for pyc in package.rglob("__pycache__/*.pyc"):
        pyc.unlink()
    compiled, seconds = done.stdout.split()[-2:]
    return f"kcpstream: {compiled} kernel functions compiled in {seconds} s for the wheel"


class BuildWithKernels(build_py):
    """``build_py``, then the kernels compiled into the built package's caches."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False) or os.environ.get("KCPSTREAM_PRECOMPILE") == "0":
            return
        print(ship_kernels(self.build_lib), file=sys.stderr)


if __name__ == "__main__":  # as setuptools runs it (tests import ship_kernels)
    setup(cmdclass={"build_py": BuildWithKernels})
