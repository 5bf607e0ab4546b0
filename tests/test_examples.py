"""The examples run as a newcomer runs them (small sizes), and write their plots."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize(
    "script, args, pngs",
    [
        (
            "quickstart.py",
            ["--n", "100000"],
            ["quickstart_signal.png", "quickstart_path.png", "quickstart_gain.png"],
        ),
        ("sensor_archive.py", ["--n", "60000", "--sensors", "3"], ["sensor_archive_S0.png"]),
        ("local_cluster.py", ["--n", "60000", "--sensors", "2"], []),
        ("custom_feature_map.py", ["--n", "40000"], []),
    ],
)
def test_example_runs(tmp_path, script, args, pngs):
    out = ["--out", str(tmp_path)] if pngs else []
    res = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args, *out],
        capture_output=True, text=True, timeout=600, cwd=EXAMPLES,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    for png in pngs:
        assert (tmp_path / png).stat().st_size > 5_000
