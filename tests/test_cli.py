"""The command line, run as a user runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys


def _kcpstream():
    exe = shutil.which("kcpstream", path=str(__import__("pathlib").Path(sys.executable).parent))
    assert exe, "the kcpstream console script is not installed next to this python"
    return exe


def test_demo_json():
    out = subprocess.run(
        [_kcpstream(), "demo", "--n", "200000", "--n-bkps", "5", "--json"],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    result = json.loads(out.stdout)
    assert len(result["found"]) == len(result["true"]) == 5
    assert result["hausdorff"] < 200_000 * 0.01
    assert result["passes"] < 1.3


def test_demo_text():
    out = subprocess.run(
        [_kcpstream(), "demo", "--n", "100000", "--n-bkps", "3"],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    assert "Hausdorff distance" in out.stdout and "segmented in" in out.stdout


def test_version():
    out = subprocess.run([_kcpstream(), "--version"], capture_output=True, text=True, check=True)
    assert "version" in out.stdout
