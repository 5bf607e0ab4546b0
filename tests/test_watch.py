"""kcpstream watch: a job run again on a schedule, on a real archive that grows."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import kcpstream
from kcpstream.errors import InputError
from kcpstream.jobs.watch import parse_every, watch

from .test_pipeline import _archive, _job, _kcpstream


class _Clock:
    """A clock that advances by what a run takes and by what the loop sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_runs_start_every_interval_after_the_previous_start():
    clock = _Clock()
    durations = iter([2.0, 7.0, 1.0])
    reports = []

    def run():
        clock.now += next(durations)
        return {"done": 1, "skipped": 0, "failed": {}}

    failed = watch(
        run, 5.0, 3, on_report=lambda i, r: reports.append(i), on_error=None,
        sleep=clock.sleep, clock=lambda: clock.now,
    )  # fmt: skip
    assert failed == 0 and reports == [1, 2, 3]
    # 2 s into a 5 s interval: 3 s left; a 7 s run is followed at once
    assert clock.slept == [3.0, 0.0]


def test_a_later_runs_error_is_reported_and_the_next_run_tried():
    clock = _Clock()
    outcomes = iter([{"failed": {}}, OSError("store unreachable"), {"failed": {"s": "NaN"}}])

    def run():
        out = next(outcomes)
        if isinstance(out, BaseException):
            raise out
        return out

    errors = []
    failed = watch(
        run, 1.0, 3, on_report=lambda i, r: None, on_error=lambda i, e: errors.append((i, str(e))),
        errors=(OSError,), sleep=clock.sleep, clock=lambda: clock.now,
    )  # fmt: skip
    assert errors == [(2, "store unreachable")] and failed == 2  # the error and the series


def test_the_first_runs_error_ends_the_watch():
    def run():
        raise FileNotFoundError("no such store")

    with pytest.raises(FileNotFoundError):
        watch(run, 1.0, None, on_report=None, on_error=None, errors=(FileNotFoundError,))


@pytest.mark.parametrize("text", ["soon", "-5min", ""])
def test_an_interval_that_is_not_a_duration_is_refused(text):
    with pytest.raises(InputError, match="--every must be a duration"):
        parse_every(text)
    assert parse_every("5min") == 300.0 and parse_every("0s") == 0.0


@pytest.mark.parametrize("text", ["300", "1.5"])
def test_an_interval_without_a_unit_is_refused(text):
    # pandas reads a bare number as nanoseconds: runs back to back
    with pytest.raises(InputError, match="has no unit"):
        parse_every(text)


def test_watch_runs_a_job_and_skips_what_did_not_change(tmp_path):
    _archive(tmp_path / "archive.zarr")
    job = _job(tmp_path)
    res = _kcpstream("watch", job, "--every", "0s", "--runs", "2", "--json", "--quiet")
    assert res.returncode == 0, res.stderr
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(r["run"], r["done"], r["skipped"]) for r in lines] == [(1, 4, 0), (2, 0, 4)]
    assert "Traceback" not in res.stderr


def test_watch_errors_are_one_line(tmp_path):
    job = _job(tmp_path)  # its store does not exist
    res = _kcpstream("watch", job, "--every", "0s", "--runs", "3")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "archive.zarr" in res.stderr
    res = _kcpstream("watch", job, "--every", "soon")
    assert res.returncode == 2 and "--every must be a duration" in res.stderr


@contextlib.contextmanager
def _watching(job, *args: str):
    """``kcpstream watch JOB ARGS`` running, killed on the way out if still alive."""
    exe = Path(sys.executable).parent / "kcpstream"
    proc = subprocess.Popen(
        [str(exe), "watch", str(job), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()


def _fresh(folder: Path, sensor: str) -> kcpstream.Segmentation:
    """The job's segmentation of ``sensor``, from scratch on the archive as it is."""
    return kcpstream.segment(
        xr.open_zarr(folder / "archive.zarr")["v"].sel(sensor=sensor),
        features=kcpstream.RFF(n_features=32), n_bkps=3,
    )  # fmt: skip


def _saved(folder: Path) -> kcpstream.Segmentation:
    path = folder / "out" / "series" / "sensor=a.json"
    return kcpstream.Segmentation.from_json(path.read_text())


def test_watch_updates_a_growing_archive_until_stopped(tmp_path):
    _archive(tmp_path / "archive.zarr")
    job = _job(tmp_path, extra='checkpoint = "ck"')
    with _watching(job, "--every", "1s", "--json", "--quiet") as proc:
        first = json.loads(proc.stdout.readline())
        assert (first["run"], first["done"]) == (1, 4)
        more = xr.Dataset(
            {"v": (("time", "sensor"), np.random.default_rng(1).normal(9, 1, (2_000, 4)))},
            coords={
                "time": pd.date_range("2026-01-01 05:33:20", periods=2_000, freq="s"),
                "sensor": ["a", "b", "c", "d"],
            },
        )
        more.to_zarr(tmp_path / "archive.zarr", append_dim="time")
        # a run that starts while the append is being written segments what it
        # reads and records that identity; the next run segments the rest
        deadline, grown = time.monotonic() + 120, False
        while not grown and time.monotonic() < deadline:
            report = json.loads(proc.stdout.readline())
            grown = report["done"] == 4 and _saved(tmp_path).n_samples == 22_000
        assert grown
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "watch stopped" in err and "Traceback" not in err
    saved = _saved(tmp_path)
    fresh = _fresh(tmp_path, "a")
    assert saved.n_samples == 22_000
    np.testing.assert_array_equal(saved.changepoints, fresh.changepoints)


def test_a_watch_stopped_during_a_run_leaves_a_folder_the_next_run_finishes(tmp_path):
    _archive(tmp_path / "archive.zarr")
    job = _job(tmp_path)
    with _watching(job, "--every", "1h") as proc:
        proc.stderr.readline()  # the run's first progress line: it has started
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "watch stopped" in err and "Traceback" not in err
    res = _kcpstream("run", job, "--json", "--quiet")  # not locked, nothing half-written
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["done"] + report["skipped"] == 4 and not report["failed"]
    for sensor in "abcd":
        path = tmp_path / "out" / "series" / f"sensor={sensor}.json"
        saved = kcpstream.Segmentation.from_json(path.read_text())
        np.testing.assert_array_equal(saved.changepoints, _fresh(tmp_path, sensor).changepoints)
