"""Scheduled jobs: resumable, idempotent, atomic; the repository's job runs."""

from __future__ import annotations

import hashlib
import json
import os
import re
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
        data[5_000, broken_sensor] = np.inf  # (a NaN would be a gap)
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
    assert "sensor=c" in first.stderr and "infinity" in first.stderr
    assert "Traceback" not in first.stderr
    series = tmp_path / "out" / "series"
    done = {f.name: f.stat().st_mtime_ns for f in series.glob("*.json")}
    assert sorted(done) == ["sensor=a.json", "sensor=b.json", "sensor=d.json"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["series"]["sensor=c"]["status"] == "failed"
    assert "infinity" in manifest["series"]["sensor=c"]["error"]
    assert manifest["kcpstream"] == kcpstream.__version__
    assert not [p for p in series.iterdir() if p.name.startswith(".tmp")]

    # the same input again: the failing series is tried again, the others are untouched
    again = _kcpstream("run", job, "--json")
    assert again.returncode == 1
    report = json.loads(again.stdout)
    assert report["done"] == 0 and report["skipped"] == 3 and list(report["failed"]) == ["sensor=c"]
    for name, mtime in done.items():
        assert (series / name).stat().st_mtime_ns == mtime

    # the input repaired in place (same shape): every series is segmented again,
    # none is kept from the old input
    _archive(tmp_path / "archive.zarr")
    second = _kcpstream("run", job, "--json")
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert report["done"] == 4 and report["skipped"] == 0 and report["failed"] == {}
    # the same results as an uninterrupted run
    clean = tmp_path / "clean"
    clean.mkdir()
    shutil.copytree(tmp_path / "archive.zarr", clean / "archive.zarr")
    assert _kcpstream("run", _job(clean)).returncode == 0
    assert _results(tmp_path / "out") == _results(clean / "out")
    # idempotent: a third run does nothing and touches nothing
    done = {f.name: f.stat().st_mtime_ns for f in series.glob("*.json")}
    third = json.loads(_kcpstream("run", job, "--json").stdout)
    assert third["done"] == 0 and third["skipped"] == 4
    assert {f.name: f.stat().st_mtime_ns for f in series.glob("*.json")} == done


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
    # progress on stderr: what is left, then a line per group written (one here)
    assert "3 series to segment, 0 up to date" in res.stderr
    assert "3/3 series segmented (0 failed)" in res.stderr
    again = _kcpstream("run", tmp_path / "sensor_archive.toml", "--json", "--quiet")
    assert json.loads(again.stdout)["skipped"] == 3 and "series" not in again.stderr
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


def _kcpstream_env(*args, env):
    exe = Path(sys.executable).parent / "kcpstream"
    return subprocess.run(
        [str(exe), *map(str, args)], capture_output=True, text=True, timeout=600,
        env={**os.environ, **env},
    )  # fmt: skip


def test_slurm_without_dask_jobqueue_is_a_clear_error(tmp_path):
    # a package on the path ahead of site-packages that fails to import, as an
    # environment without dask-jobqueue does
    hide = tmp_path / "hide" / "dask_jobqueue"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text('raise ImportError("No module named dask_jobqueue")\n')
    _archive(tmp_path / "archive.zarr")
    job = _job(tmp_path, extra='[cluster]\nscheduler = "slurm"')
    res = _kcpstream_env("run", job, env={"PYTHONPATH": str(tmp_path / "hide")})
    assert res.returncode == 1 and "pip install dask-jobqueue" in res.stderr
    assert "Traceback" not in res.stderr


def test_slurm_queue_that_never_starts_workers_times_out(tmp_path):
    """dask-jobqueue submits through ``sbatch``; a queue that accepts the job and
    never runs it (here an ``sbatch`` that answers and does nothing) ends the job
    with one line after ``[cluster] timeout`` seconds, no series marked done."""
    pytest.importorskip("dask_jobqueue")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.log"
    for name, reply in [("sbatch", "Submitted batch job 4242"), ("scancel", ""), ("squeue", "")]:
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\necho "{reply}"\n')
        script.chmod(0o755)
    _archive(tmp_path / "archive.zarr")
    job = _job(
        tmp_path,
        extra='[cluster]\nscheduler = "slurm"\ntimeout = 3\n'
        '[cluster.slurm]\ncores = 1\nmemory = "1GB"\n',
    )
    res = _kcpstream_env("run", job, env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert res.returncode == 1, res.stderr
    assert "no SLURM worker started within 3 s" in res.stderr
    assert "Traceback" not in res.stderr
    assert "sbatch" in calls.read_text()  # the job was really submitted to the queue
    assert not list((tmp_path / "out").glob("series/*.json"))


# -- never a lost result -----------------------------------------------------------


def _labelled_archive(path, labels, n=6_000, chunks=None):
    rng = np.random.default_rng(0)
    data = rng.normal(size=(n, len(labels)))
    data[n // 2 :] *= 3
    ds = xr.Dataset({"v": (("time", "sensor"), data)}, coords={"sensor": labels})
    ds.chunk(chunks or {"time": 2_000}).to_zarr(path, mode="w")


def _run(tmp_path, extra=""):
    from kcpstream.jobs.pipeline import run_job

    return run_job(_job(tmp_path, extra=extra))


def test_labels_that_need_escaping_get_their_own_bounded_files(tmp_path):
    long = "x" * 300
    _labelled_archive(tmp_path / "archive.zarr", ["A/B", "A_B", ".hidden", long])
    report = _run(tmp_path)
    assert report["done"] == 4 and report["failed"] == {}
    files = sorted(p.name for p in (tmp_path / "out" / "series").iterdir())
    assert len(files) == 4 and "sensor=A_B.json" in files
    assert all(len(f) < 120 and not f.startswith(".") for f in files)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    labels = sorted(e["labels"]["sensor"] for e in manifest["series"].values())
    assert labels == sorted(["A/B", "A_B", ".hidden", long])
    assert _run(tmp_path)["skipped"] == 4


@pytest.mark.parametrize("labels", [["S1", "S1"], [np.nan, np.nan, 1.0]])
def test_duplicate_labels_are_refused_before_anything_runs(tmp_path, labels):
    from kcpstream.errors import JobError

    _labelled_archive(tmp_path / "archive.zarr", labels)
    with pytest.raises(JobError, match="have the same labels"):
        _run(tmp_path)
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.parametrize("damage", [b"", b'{"changepoints": [1, '])
def test_a_damaged_result_file_is_computed_again(tmp_path, damage):
    _labelled_archive(tmp_path / "archive.zarr", ["a", "b"])
    assert _run(tmp_path)["done"] == 2
    target = tmp_path / "out" / "series" / "sensor=a.json"
    good = kcpstream.Segmentation.from_json(target.read_text())
    target.write_bytes(damage)
    report = _run(tmp_path)
    assert report["done"] == 1 and report["skipped"] == 1
    again = kcpstream.Segmentation.from_json(target.read_text())
    np.testing.assert_array_equal(again.changepoints, good.changepoints)
    np.testing.assert_array_equal(again.gains, good.gains)


def test_an_append_segments_every_series_again(tmp_path):
    _labelled_archive(tmp_path / "archive.zarr", ["a", "b"])
    _run(tmp_path)
    extra = xr.Dataset(
        {"v": (("time", "sensor"), np.random.default_rng(1).normal(8, 1, (2_000, 2)))},
        coords={"sensor": ["a", "b"]},
    )
    extra.to_zarr(tmp_path / "archive.zarr", append_dim="time")
    report = _run(tmp_path)
    assert report["done"] == 2 and report["skipped"] == 0
    for sensor in "ab":
        res = kcpstream.Segmentation.from_json(
            (tmp_path / "out" / "series" / f"sensor={sensor}.json").read_text()
        )
        assert res.n_samples == 8_000
        fresh = kcpstream.segment(
            xr.open_zarr(tmp_path / "archive.zarr")["v"].sel(sensor=sensor),
            features=kcpstream.RFF(n_features=32), n_bkps=3,
        )  # fmt: skip
        np.testing.assert_array_equal(res.changepoints, fresh.changepoints)


def test_a_nightly_append_reads_only_the_new_chunks_of_each_series(tmp_path):
    """A job with a checkpoint on a long archive (past the epoch's 2**21 samples):
    after a 1 % append every series is segmented again from its checkpoint,
    reading the chunks that changed, with the answer a fresh call gives."""
    n = 2**21 + 50_000
    rng = np.random.default_rng(0)
    data = rng.normal(size=(n, 2)).astype("f4")
    data[n // 2 :] *= 2
    ds = xr.Dataset({"v": (("time", "sensor"), data)}, coords={"sensor": ["a", "b"]})
    ds.chunk({"time": 2**16}).to_zarr(tmp_path / "archive.zarr", mode="w")
    job = _job(tmp_path, extra='checkpoint = "ck"')
    text = job.read_text().replace('[features]\nmap = "rff"\nn_features = 32\n', "")
    job.write_text(text.replace("n_bkps = 3", 'pen = "auto"'))
    from kcpstream.jobs.pipeline import run_job

    assert run_job(job)["done"] == 2
    extra = rng.normal(size=(n // 100, 2)).astype("f4") + 3
    more = xr.Dataset({"v": (("time", "sensor"), extra)}, coords={"sensor": ["a", "b"]})
    more.chunk({"time": 2**16}).to_zarr(tmp_path / "archive.zarr", append_dim="time")
    assert run_job(job)["done"] == 2
    for sensor in "ab":
        res = kcpstream.Segmentation.from_json(
            (tmp_path / "out" / "series" / f"sensor={sensor}.json").read_text()
        )
        d = res.diagnostics
        assert res.n_samples == n + n // 100
        assert d.checkpoint == "updated" and d.chunks_read == 2 and d.chunks_reused == 32
        fresh = kcpstream.segment(xr.open_zarr(tmp_path / "archive.zarr")["v"].sel(sensor=sensor))
        np.testing.assert_array_equal(res.changepoints, fresh.changepoints)
        assert min(abs(res.changepoints - n)) < 100  # the appended shift is found


def test_one_corrupt_series_fails_alone(tmp_path):
    _labelled_archive(
        tmp_path / "archive.zarr", ["a", "b", "c"], chunks={"time": 2_000, "sensor": 1}
    )
    chunk = tmp_path / "archive.zarr" / "v" / "c" / "1" / "1"
    with open(chunk, "r+b") as fh:
        fh.truncate(20)
    report = _run(tmp_path)
    assert report["done"] == 2 and list(report["failed"]) == ["sensor=b"]
    assert "chunk c/1/1" in report["failed"]["sensor=b"]


@pytest.mark.parametrize("size", [0, -1, "2"])
def test_group_size_must_be_a_positive_integer(tmp_path, size):
    from kcpstream.errors import JobError

    _labelled_archive(tmp_path / "archive.zarr", ["a"])
    text = _job(tmp_path).read_text().replace("group_size = 2", f"group_size = {size!r}")
    (tmp_path / "job.toml").write_text(text.replace("'", '"'))
    from kcpstream.jobs.pipeline import run_job

    with pytest.raises(JobError, match="group_size must be an integer >= 1"):
        run_job(tmp_path / "job.toml")


def test_a_second_copy_of_a_running_job_is_refused(tmp_path):
    import fcntl

    from kcpstream.errors import JobError

    _labelled_archive(tmp_path / "archive.zarr", ["a"])
    (tmp_path / "out").mkdir()
    with open(tmp_path / "out" / ".lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(JobError, match="another run of a job is writing"):
            _run(tmp_path)
    assert _run(tmp_path)["done"] == 1


def test_a_job_that_failed_every_series_does_not_lock_its_folder(tmp_path):
    _labelled_archive(tmp_path / "archive.zarr", ["a", "b"])
    bad = _job(tmp_path).read_text().replace("n_bkps = 3", "n_bkps = 3\nmin_size = 5000")
    (tmp_path / "job.toml").write_text(bad)
    from kcpstream.jobs.pipeline import run_job

    report = run_job(tmp_path / "job.toml")
    assert report["done"] == 0 and len(report["failed"]) == 2
    assert _run(tmp_path)["done"] == 2  # the corrected job may use the folder


@pytest.mark.parametrize(
    ("output", "extra", "match"),
    [
        ("out", '[cluster]\nscheduler = "local:0"', "local:N needs N >= 1 worker processes"),
        (
            "out",
            '[cluster]\nscheduler = "bogus"',
            "'bogus' is none of threads, .*slurm, local:N.*host:8786",
        ),
        ("out", 'checkpoint = "blocker/ck"', "cannot be written: Not a directory"),
        ("blocker/out", "", r"\[output\] cannot create .*blocker/out: Not a directory"),
    ],
)
def test_what_would_fail_every_series_is_one_line_before_anything_is_written(
    tmp_path, output, extra, match
):
    _archive(tmp_path / "archive.zarr")
    (tmp_path / "blocker").write_text("")  # a file where a folder would have to be
    res = _kcpstream("run", _job(tmp_path, output=output, extra=extra))
    assert res.returncode == 1
    last = res.stderr.strip().splitlines()[-1]
    assert re.match("Error: .*" + match, last), res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()
    if "scheduler" in extra:  # the plan is checked as the run is
        dry = _kcpstream("run", _job(tmp_path, output=output, extra=extra), "--dry-run")
        assert dry.returncode == 1 and re.match("Error: .*" + match, dry.stderr.strip())


def test_results_are_readable_by_the_group(tmp_path):
    _labelled_archive(tmp_path / "archive.zarr", ["a"])
    old = os.umask(0o022)
    try:
        _run(tmp_path)
    finally:
        os.umask(old)
    for name in ("series/sensor=a.json", "manifest.json"):
        assert (tmp_path / "out" / name).stat().st_mode & 0o777 == 0o644


# -- job files are validated, not trusted ----------------------------------------------


@pytest.mark.parametrize(
    ("section", "line", "match"),
    [
        ("output", "store = 42", r"\[output\] store must be a non-empty string, got 42"),
        ("features", "bandwidth = [1, 2]", r"bandwidth must be a number > 0 or one of"),
        ("input", 'variables = "v"', r"variables must be a non-empty list of strings"),
        ("selection", "alpha = 1.5", r"alpha must be a number > 0 and < 1"),
        ("selection", "d_max = 5000", r"d_max must be an integer >= 1 and <= 1000"),
        ("input", 'missing = "zero"', r"missing must be one of 'error', 'skip', 'fill'"),
        ("output", 'store = "../../elsewhere"', r"leaves the job file's folder"),
        ("output", 'checkpoint = "../ck"', r"leaves the job file's folder"),
    ],
)
def test_job_keys_are_typed_and_checked(tmp_path, section, line, match):
    from kcpstream.errors import JobError
    from kcpstream.jobs.jobfile import load_job

    key = line.split("=")[0].strip()
    text, current = [], None
    for ln in _job(tmp_path).read_text().splitlines():
        if ln.startswith("["):
            current = ln.strip("[]")
            text.append(ln)
            if current == section:
                text.append(line)
        elif not (current == section and ln.startswith(f"{key} =")):
            text.append(ln)
    text = "\n".join(text)
    (tmp_path / "job.toml").write_text(text)
    with pytest.raises(JobError, match=match):
        load_job(tmp_path / "job.toml")


def test_an_array_of_tables_is_refused(tmp_path):
    from kcpstream.errors import JobError
    from kcpstream.jobs.jobfile import load_job

    (tmp_path / "job.toml").write_text('[[input]]\nstore = "a"\n[output]\nstore = "o"\n')
    with pytest.raises(JobError, match=r"\[input\] must be a table"):
        load_job(tmp_path / "job.toml")


def test_slurm_keys_are_an_allow_list_and_shell_needs_consent(tmp_path):
    from kcpstream.errors import JobError
    from kcpstream.jobs.jobfile import load_job

    base = _job(tmp_path).read_text()
    cases = [
        ('[cluster.slurm]\njob_script_prologue = ["curl x | sh"]', "set \\[cluster\\] allow_shell"),
        ('[cluster.slurm]\npython = "rm -rf /"', "runs shell commands"),
        ("[cluster.slurm]\nnonsense = 1", "unknown key 'nonsense'"),
        ('[cluster.slurm]\nqueue = "a\\nb"', "a string on one line"),
        ('[cluster.slurm]\ncores = "4"', "cores must be an integer"),
    ]
    for extra, match in cases:
        (tmp_path / "job.toml").write_text(
            base + "\n[cluster]\n" + extra.replace("[cluster.slurm]", "[cluster.slurm]", 1)
        )
        with pytest.raises(JobError, match=match):
            load_job(tmp_path / "job.toml")
    allowed = base + '\n[cluster]\nallow_shell = true\n[cluster.slurm]\npython = "/opt/py"\n'
    (tmp_path / "job.toml").write_text(allowed)
    assert load_job(tmp_path / "job.toml")["cluster"]["slurm"]["python"] == "/opt/py"


def test_dry_run_shows_the_plan_and_writes_nothing(tmp_path):
    _labelled_archive(tmp_path / "archive.zarr", ["a", "b"])
    job = _job(tmp_path, extra='checkpoint = "ck"')
    res = _kcpstream("run", job, "--dry-run", "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["output"] == str(tmp_path / "out") and plan["would_run"] == ["sensor=a", "sensor=b"]
    assert plan["checkpoint"] == str(tmp_path / "ck") and not (tmp_path / "ck").exists()
    assert not (tmp_path / "out").exists()
    _run(tmp_path)
    plan = json.loads(_kcpstream("run", job, "--dry-run", "--json").stdout)
    assert plan["would_run"] == [] and plan["would_skip"] == ["sensor=a", "sensor=b"]


def test_a_job_without_features_uses_the_library_default_and_records_its_settings(tmp_path):
    _labelled_archive(tmp_path / "archive.zarr", ["a"])
    text = _job(tmp_path).read_text()
    text = text.replace('[features]\nmap = "rff"\nn_features = 32\n', "")
    (tmp_path / "job.toml").write_text(text)
    from kcpstream.jobs.pipeline import run_job

    assert run_job(tmp_path / "job.toml")["done"] == 1
    res = kcpstream.Segmentation.from_json(
        (tmp_path / "out" / "series" / "sensor=a.json").read_text()
    )
    direct = kcpstream.segment(xr.open_zarr(tmp_path / "archive.zarr")["v"].sel(sensor="a"),
                               n_bkps=3)  # fmt: skip
    np.testing.assert_array_equal(res.changepoints, direct.changepoints)
    assert res.params["features"].startswith("QuadratureFF(")
    assert res.params["n_bkps"] == 3 and res.params["method"] == "binseg"


def test_a_job_writes_one_segment_table_of_every_series(tmp_path):
    _labelled_archive(tmp_path / "archive.zarr", ["a", "b"])
    _run(tmp_path)
    table = pd.read_csv(tmp_path / "out" / "segments.csv")
    assert sorted(set(table["sensor"])) == ["a", "b"]
    for sensor in "ab":
        res = kcpstream.Segmentation.from_json(
            (tmp_path / "out" / "series" / f"sensor={sensor}.json").read_text()
        )
        rows = table[table["sensor"] == sensor]
        assert rows["start"].tolist()[1:] == res.changepoints.tolist()
        assert rows["end"].iloc[-1] == res.n_samples


def test_a_batch_shows_each_series_change_points():
    _ = pytest.importorskip("xarray")
    rng = np.random.default_rng(0)
    data = rng.normal(size=(6_000, 2))
    data[3_000:] *= 3
    da = xr.DataArray(data, dims=("time", "sensor"), coords={"sensor": ["a", "b"]})
    batch = kcpstream.segment(da, batch_dims="sensor", n_bkps=1)
    text = repr(batch)
    for labels, res in batch:
        shown = f"sensor={labels['sensor']}: 1 change-point [{res.changepoints[0]} (p="
        assert shown in text


def test_no_output_of_an_earlier_input_outlives_a_run(tmp_path):
    # a series that fails now, or is gone from the input, leaves no file (nor a
    # row of the table) of what the input held before among the results; the
    # one that failed keeps its last result apart, the one gone keeps none
    _labelled_archive(tmp_path / "archive.zarr", ["a", "b", "c"])
    assert _run(tmp_path)["done"] == 3
    series = tmp_path / "out" / "series"
    ds = xr.open_zarr(tmp_path / "archive.zarr")
    broken = ds.copy(deep=True).load()
    broken["v"][100, 0] = np.inf  # sensor a
    broken = broken.sel(sensor=["a", "b"])  # sensor c removed
    broken.chunk({"time": 2_000}).to_zarr(tmp_path / "archive.zarr", mode="w")
    report = _run(tmp_path)
    assert set(report["failed"]) == {"sensor=a"} and report["done"] == 1
    assert sorted(p.name for p in series.glob("*.json")) == ["sensor=b.json"]
    assert sorted(p.name for p in (series / "previous").iterdir()) == ["sensor=a.json"]
    table = pd.read_csv(tmp_path / "out" / "segments.csv")
    assert set(table["sensor"]) == {"b"}
    # every series failing: no table at all, rather than the last run's
    broken["v"][100, :] = np.inf
    broken.chunk({"time": 2_000}).to_zarr(tmp_path / "archive.zarr", mode="w")
    assert _run(tmp_path)["done"] == 0
    assert not list(series.glob("*.json")) and not (tmp_path / "out" / "segments.csv").exists()
    kept = sorted(p.name for p in (series / "previous").iterdir())
    assert kept == ["sensor=a.json", "sensor=b.json"]


@pytest.mark.parametrize("text", ["[]", "3", '{"series": null}', '{"series": []}'])
def test_a_manifest_of_another_shape_is_a_damaged_one(tmp_path, text):
    _labelled_archive(tmp_path / "archive.zarr", ["a", "b"])
    _run(tmp_path)
    (tmp_path / "out" / "manifest.json").write_text(text)
    assert _run(tmp_path)["done"] == 2


@pytest.mark.parametrize(
    ("selection", "cluster", "match"),
    [
        ('min_duration = "abc"', "", "is not a positive duration"),
        ('min_duration = "-5min"', "", "is not a positive duration"),
        ("min_duration = 600", "", "has no unit"),
        ("", '[cluster]\nscheduler = "nowhere"', "'nowhere' is none of"),
        ("", '[cluster]\nscheduler = "tcp://127.0.0.1:9"', "cannot connect"),
    ],
)
def test_what_fails_every_series_writes_no_output(tmp_path, selection, cluster, match):
    from kcpstream.errors import JobError
    from kcpstream.jobs.pipeline import run_job

    _archive(tmp_path / "archive.zarr")
    job = _job(tmp_path, extra=cluster)
    job.write_text(job.read_text().replace("n_bkps = 3\n", f"n_bkps = 3\n{selection}\n"))
    with pytest.raises((JobError, kcpstream.InputError), match=match):
        run_job(job)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_time_dimension_the_input_lacks_is_one_error(tmp_path):
    from kcpstream.errors import JobError
    from kcpstream.jobs.pipeline import run_job

    _archive(tmp_path / "archive.zarr")
    job = _job(tmp_path)
    dims = 'batch_dims = ["sensor"]'
    text = job.read_text().replace(dims, f'{dims}\ndim = "tim"')
    job.write_text(text)
    with pytest.raises(JobError, match="dim = 'tim' is not a dimension"):
        run_job(job)
    assert not (tmp_path / "out").exists()


def test_outputs_inside_the_input_store_are_refused(tmp_path):
    from kcpstream.errors import JobError
    from kcpstream.jobs.pipeline import run_job

    _archive(tmp_path / "archive.zarr")
    job = _job(tmp_path, output="archive.zarr/out")
    with pytest.raises(JobError, match="lies inside the input store"):
        run_job(job)
    assert not (tmp_path / "archive.zarr" / "out").exists()


def test_a_parameter_the_feature_map_lacks_is_named_with_those_it_takes(tmp_path):
    from kcpstream.errors import JobError
    from kcpstream.jobs.pipeline import run_job

    _archive(tmp_path / "archive.zarr")
    job = _job(tmp_path)
    text = job.read_text().replace('map = "rff"', 'map = "quadrature"\nkernel = "laplacian"')
    job.write_text(text)
    with pytest.raises(JobError, match="'quadrature' takes no 'kernel'; its parameters are n_"):
        run_job(job)
    assert not (tmp_path / "out").exists()


def test_a_series_that_fails_after_an_append_keeps_its_last_result_apart(tmp_path):
    # the run after an append removed every series' file before segmenting it:
    # one that then failed lost its last valid result
    _archive(tmp_path / "archive.zarr")
    first = _run(tmp_path)
    assert first["done"] == 4
    folder = tmp_path / "out" / "series"
    kept_bytes = (folder / "sensor=b.json").read_bytes()
    rng = np.random.default_rng(5)
    more = rng.normal(0, 1, (2_000, 4))
    more[100, 1] = np.inf  # sensor b: an error, not a gap
    extra = xr.Dataset(
        {"v": (("time", "sensor"), more)},
        coords={
            "time": pd.date_range("2026-01-01 05:33:20", periods=2_000, freq="s"),
            "sensor": ["a", "b", "c", "d"],
        },
    )
    extra.to_zarr(tmp_path / "archive.zarr", append_dim="time")
    second = _run(tmp_path)
    assert second["done"] == 3 and list(second["failed"]) == ["sensor=b"]
    assert not (folder / "sensor=b.json").exists()  # not passed off as the new input's
    assert (folder / "previous" / "sensor=b.json").read_bytes() == kept_bytes
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    entry = manifest["series"]["sensor=b"]
    assert entry["status"] == "failed" and entry["previous"]["file"] == os.path.join(
        "series", "previous", "sensor=b.json"
    )
    assert entry["previous"]["sha256"] == hashlib.sha256(kept_bytes).hexdigest()
    table = pd.read_csv(tmp_path / "out" / "segments.csv")
    assert "b" not in set(table["sensor"])
    # still failing: the kept result stays; once it succeeds, it goes
    assert list(_run(tmp_path)["failed"]) == ["sensor=b"]
    assert (folder / "previous" / "sensor=b.json").read_bytes() == kept_bytes
    whole = xr.open_zarr(tmp_path / "archive.zarr").load()
    whole["v"][:] = np.nan_to_num(whole["v"].values, posinf=0.0)
    whole.chunk({"time": 5_000}).to_zarr(tmp_path / "archive.zarr", mode="w")
    third = _run(tmp_path)
    assert third["done"] == 4 and third["failed"] == {}
    assert (folder / "sensor=b.json").exists()
    assert not (folder / "previous").exists() or not any((folder / "previous").iterdir())


def test_the_segment_table_writes_times_at_midnight_with_their_time_of_day(tmp_path):
    from kcpstream.jobs.pipeline import _write_table

    x = np.random.default_rng(0).normal(size=400)
    x[200:] += 3
    time = np.arange(400).astype("datetime64[D]").astype("datetime64[ns]")
    res = kcpstream.segment(xr.DataArray(x, dims="time", coords={"time": time}), n_bkps=1)
    (tmp_path / "series").mkdir()
    (tmp_path / "series" / "s.json").write_text(res.to_json())
    _write_table(str(tmp_path), {"series": {"s": {"status": "done", "labels": {"id": "s"}}}})
    text = (tmp_path / "segments.csv").read_text()
    assert "1970-07-20T00:00:00" in text  # the change's day, at midnight, said so
