"""The package as installed: its build ships the kernels compiled."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: A first call in a fresh process, counting what numba compiles.
FIRST_CALL = """
import json
import numpy as np
from numba.core import event
import kcpstream

class Count(event.Listener):
    n = 0
    def on_start(self, ev):
        Count.n += 1
    def on_end(self, ev):
        pass

event.register("numba:compile", Count())
x = np.random.default_rng(0).standard_normal(10_000)
x[5_000:] += 2.0
r = kcpstream.segment(x)
print(json.dumps({"changepoints": r.changepoints.tolist(), "compiled": Count.n,
                  "file": kcpstream.__file__}))
"""


def test_the_build_can_import_what_it_compiles():
    """The build compiles by running kcpstream (setup.py): it needs every
    runtime dependency, or the wheel ships without its kernels."""
    toml = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert set(toml["project"]["dependencies"]) <= set(toml["build-system"]["requires"])


def test_kernels_compiled_at_build_are_loaded_where_the_package_is_installed(tmp_path):
    spec = importlib.util.spec_from_file_location("kcpstream_setup", ROOT / "setup.py")
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)
    build = tmp_path / "build"
    shutil.copytree(ROOT / "kcpstream", build / "kcpstream")
    line = setup.ship_kernels(build)
    assert "kernel functions compiled" in line, line
    caches = list((build / "kcpstream").rglob("__pycache__/*.nbi"))
    assert caches and not list((build / "kcpstream").rglob("*.pyc"))
    # installed elsewhere (pip copies the built files): nothing is compiled again
    site = tmp_path / "site"
    shutil.copytree(build, site)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run(
        [sys.executable, "-c", FIRST_CALL], cwd=tmp_path, env=env,
        capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    first = json.loads(out.stdout.splitlines()[-1])
    assert first["file"].startswith(str(site))
    assert first["compiled"] == 0
    assert first["changepoints"] == [5_000]
