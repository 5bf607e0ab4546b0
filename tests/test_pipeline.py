"""Scheduled jobs: resumable, idempotent, atomic; the repository's job runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import kcpstream
from kcpstream import datasets

REPO = Path(__file__).resolve().parents[1]


def _kcpstream(*args, cwd=None):
    exe = Path(sys.executable).parent / "kcpstream"
    return subprocess.run(
        [str(exe), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def _archive(path, broken_sensor=None):
    sigs = [datasets.piecewise_constant(20_000, 3, jump=3.0, seed=s) for s in range(4)]
    data = np.stack([s.x for s in sigs], axis=1)
    if broken_sensor is not None:
        data[5_000, broken_sensor] = np.nan
    ds = xr.Dataset(
        {"v": (("time", "sensor"), data)},
        coords={
            "time": pd.date_range("2026-01-01", periods=20_000, freq="s"),
            "sensor": ["a", "b", "c", "d"],
        },
    )
    ds.chunk({"time": 5_000}).to_zarr(path, mode="w")


def _job(folder: Path, output="out", extra=""):
    text = f"""
[input]
store = "archive.zarr"
variables = ["v"]
batch_dims = ["sensor"]

[features]
map = "rff"
n_features = 32

[selection]
n_bkps = 3

[output]
store = "{output}"
group_size = 2
{extra}
"""
    path = folder / "job.toml"
    path.write_text(text)
    return path


def _results(folder: Path):
    out = {}
    for f in sorted((folder / "series").glob("*.json")):
        res = kcpstream.Segmentation.from_json(f.read_text())
        out[f.name] = (res.changepoints.tolist(), res.gains.tolist())
    return out


def test_a_failing_series_then_a_rerun_finishes_without_touching_finished_ones(tmp_path):
    _archive(tmp_path / "archive.zarr", broken_sensor=2)
    job = _job(tmp_path)
    first = _kcpstream("run", job)
    assert first.returncode == 1
    assert "sensor=c" in first.stderr and "NaN" in first.stderr and "Traceback" not in first.stderr
    series = tmp_path / "out" / "series"
    done = {f.name: f.stat().st_mtime_ns for f in series.glob("*.json")}
    assert sorted(done) == ["sensor=a.json", "sensor=b.json", "sensor=d.json"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (
        manifest["series"]["sensor=c"] == "failed"
        and manifest["kcpstream"] == kcpstream.__version__
    )
    assert not [p for p in series.iterdir() if p.name.startswith(".tmp")]

    # the broken value is repaired in place (same shape): the re-run does sensor c only
    _archive(tmp_path / "archive.zarr")
    second = _kcpstream("run", job, "--json")
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert report["done"] == 1 and report["skipped"] == 3 and report["failed"] == {}
    for name, mtime in done.items():
        assert (series / name).stat().st_mtime_ns == mtime
    # the same results as an uninterrupted run
    clean = tmp_path / "clean"
    clean.mkdir()
    shutil.copytree(tmp_path / "archive.zarr", clean / "archive.zarr")
    assert _kcpstream("run", _job(clean)).returncode == 0
    assert _results(tmp_path / "out") == _results(clean / "out")
    # idempotent: a third run does nothing
    third = json.loads(_kcpstream("run", job, "--json").stdout)
    assert third["done"] == 0 and third["skipped"] == 4


def test_job_errors_are_one_line(tmp_path):
    _archive(tmp_path / "archive.zarr")
    bad = _job(tmp_path, extra="colour = 'red'")
    res = _kcpstream("run", bad)
    assert res.returncode == 1
    assert "unknown key 'colour' in [output]" in res.stderr and "Traceback" not in res.stderr
    missing = tmp_path / "missing.toml"
    missing.write_text('[input]\nstore = "nowhere.zarr"\n[output]\nstore = "o"\n')
    res = _kcpstream("run", missing)
    assert (
        res.returncode == 1
        and "does not exist" in res.stderr
        and len(res.stderr.strip().splitlines()) == 1
    )


def test_another_job_into_the_same_output_is_refused(tmp_path):
    _archive(tmp_path / "archive.zarr")
    assert _kcpstream("run", _job(tmp_path)).returncode == 0
    text = _job(tmp_path).read_text().replace("n_bkps = 3", "n_bkps = 2")
    (tmp_path / "job.toml").write_text(text)
    res = _kcpstream("run", tmp_path / "job.toml")
    assert res.returncode == 1 and "another job or input" in res.stderr


def test_the_repository_sensor_archive_job_runs(tmp_path):
    shutil.copy(REPO / "pipelines" / "sensor_archive.toml", tmp_path / "sensor_archive.toml")
    make = subprocess.run(
        [sys.executable, str(REPO / "pipelines" / "make_sensor_archive.py"), "--n", "30000",
         "--sensors", "3", "--out", str(tmp_path / "data" / "sensor_archive.zarr")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert make.returncode == 0, make.stderr
    res = _kcpstream("run", tmp_path / "sensor_archive.toml", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["done"] == 3
    out = tmp_path / "output" / "sensor_archive"
    truth = json.loads(
        xr.open_zarr(tmp_path / "data" / "sensor_archive.zarr")["vibration"].attrs["changepoints"]
    )
    for sensor, cps in truth.items():
        res = kcpstream.Segmentation.from_json(
            (out / "series" / f"sensor={sensor}.json").read_text()
        )
        assert res.changepoint_times.dtype.kind == "M"
        assert len(res.changepoints) >= 1 and min(abs(res.changepoints[0] - np.array(cps))) < 200
    assert os.path.isdir(out / "checkpoint")


def test_slurm_without_dask_jobqueue_is_a_clear_error(tmp_path):
    try:  # dask-jobqueue is not a dependency; without it the error names the fix
        import dask_jobqueue  # noqa: F401

        pytest.skip("dask-jobqueue is installed here")
    except ImportError:
        pass
    _archive(tmp_path / "archive.zarr")
    job = _job(tmp_path, extra='[cluster]\nscheduler = "slurm"')
    res = _kcpstream("run", job)
    assert res.returncode == 1 and "pip install dask-jobqueue" in res.stderr
