"""The command line, run as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import dask
import pytest
from distributed import get_client

from kcpstream.jobs.scheduling import scheduler_context


def _kcpstream():
    exe = shutil.which("kcpstream", path=str(__import__("pathlib").Path(sys.executable).parent))
    assert exe, "the kcpstream console script is not installed next to this python"
    return exe


def test_demo_json():
    out = subprocess.run(
        [_kcpstream(), "demo", "--n", "2000000", "--n-bkps", "5", "--json"],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    result = json.loads(out.stdout)
    # the number is the test's choice: the demo does not pass n_bkps on
    assert result["selection"] == "auto"
    assert len(result["found"]) == len(result["true"]) == len(result["pvalues"]) == 5
    assert max(result["pvalues"]) <= result["alpha"]
    assert result["hausdorff"] < 2_000_000 * 0.01
    assert result["passes"] < 1.3  # about one pass over the store


@pytest.mark.parametrize(
    "args, match",
    [
        (["--n", "10"], "do not fit in 10 samples: ask for a larger --n"),
        (["--n", "0"], "Invalid value for '--n'"),
        (["--n", "5000", "--chunk", "0"], "Invalid value for '--chunk'"),
        (["--n", "5000", "--seed", "-1"], "Invalid value for '--seed'"),
    ],
)
def test_demo_options_that_cannot_work_are_one_line_errors(args, match):
    out = subprocess.run([_kcpstream(), "demo", *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and match in out.stderr
    assert "Traceback" not in out.stderr


def test_demo_text_and_picture(tmp_path):
    picture = tmp_path / "demo.png"
    out = subprocess.run(
        [_kcpstream(), "demo", "--n", "100000", "--n-bkps", "3", "--plot", str(picture)],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    assert "chosen automatically" in out.stdout and "p-value" in out.stdout
    assert "Hausdorff distance" in out.stdout and "segmented in" in out.stdout
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a picture that cannot be written is one line, before any work
    blocked = tmp_path / "file"
    blocked.write_text("")
    out = subprocess.run(
        [_kcpstream(), "demo", "--n", "100000", "--plot", str(blocked / "demo.png")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "the picture" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_version():
    out = subprocess.run([_kcpstream(), "--version"], capture_output=True, text=True, check=True)
    assert "version" in out.stdout


def _store(tmp_path):
    import numpy as np
    import pandas as pd
    import xarray as xr

    from kcpstream import datasets

    sig = datasets.piecewise_constant(10_000, 3, jump=3.0, seed=1)
    ds = xr.Dataset(
        {"p": ("time", sig.x)},
        coords={"time": pd.date_range("2026-01-01", periods=10_000, freq="s")},
    )
    ds.to_zarr(tmp_path / "s.zarr", mode="w")
    return tmp_path / "s.zarr", sig, np


def test_segment_command_json_and_out(tmp_path):
    store, sig, np = _store(tmp_path)
    out = tmp_path / "res" / "result.json"
    args = ["segment", str(store), "--variable", "p", "--n-bkps", "3", "--json", "--out", str(out)]
    res = subprocess.run([_kcpstream(), *args], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert np.abs(np.array(summary["changepoints"]) - sig.changepoints).max() < 10
    assert summary["times"][0].startswith("2026-01-01")
    # to the second the coordinate holds, not to the nanosecond
    assert all(len(t) == len("2026-01-01T00:00:00") for t in summary["times"])
    text = subprocess.run(
        [_kcpstream(), "segment", str(store), "--variable", "p", "--n-bkps", "3"],
        capture_output=True, text=True, timeout=300, check=True,
    ).stdout  # fmt: skip
    assert "2026-01-01T" in text and ".000000000" not in text
    import kcpstream

    loaded = kcpstream.Segmentation.from_json(out.read_text())
    assert loaded.changepoints.tolist() == summary["changepoints"]


def test_a_pool_of_processes_is_one_warning_line(tmp_path):
    store, sig, np = _store(tmp_path)
    args = ["segment", str(store), "--variable", "p", "--n-bkps", "3", "--json",
            "--scheduler", "processes"]  # fmt: skip
    res = subprocess.run([_kcpstream(), *args], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Warning: dask's 'processes' scheduler")
    assert "use threads" in lines[0]
    assert len(json.loads(res.stdout)["changepoints"]) == 3


def test_a_variable_without_dimension_names_is_read_by_path(tmp_path):
    # a zarr group written without xarray: the variable has no dimension names,
    # which xarray requires; the CLI reads it as a plain zarr array
    import numpy as np
    import zarr

    t = np.arange(60_000)
    x = np.where(t < 30_000, np.sin(2 * np.pi * t / 50), np.sign(np.sin(2 * np.pi * t / 50)))
    x = x + 0.3 * np.random.default_rng(0).standard_normal(t.size)
    group = zarr.open_group(tmp_path / "g.zarr", mode="w")
    group.create_array("x", data=x.astype("f4"), chunks=(10_000,))
    args = ["segment", str(tmp_path / "g.zarr"), "--variable", "x", "--json"]
    res = subprocess.run([_kcpstream(), *args], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["changepoints"] == [30_000]


def test_segment_command_errors_are_one_line(tmp_path):
    store, _, _ = _store(tmp_path)
    cases = [
        (["segment", str(tmp_path / "nope.zarr")], 1, "no zarr store at"),
        (["segment", str(store), "--variable", "wind"], 1, "no variable 'wind'"),
        (["segment", str(store), "--pen", "lots"], 2, "--pen must be a number"),
        (["segment", str(store), "--method", "magic"], 2, "Invalid value for '--method'"),
        (["segment", str(store), "--n-bkps", "100000"], 1, "cannot fit"),
        (["segment", str(store), "--alpha", "2"], 1, "alpha must be a number in (0, 1)"),
        (
            ["segment", str(store), "--n-bkps", "5", "--d-max", "3"],
            1,
            "--d-max 3 cannot hold --n-bkps 5 change-points; give --d-max >= 6",
        ),
        (["segment", str(store), "--window", "1"], 1, "window must be an integer >= 2"),
        (
            ["segment", str(store), "--window", "8", "--features", "rff"],
            1,
            "give window or features, not both",
        ),
    ]
    # (the commands at once: each is mostly its interpreter's start)
    runs = [
        subprocess.Popen([_kcpstream(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
        for args, _, _ in cases
    ]  # fmt: skip
    for (args, code, message), run in zip(cases, runs, strict=True):
        _, stderr = run.communicate(timeout=300)
        assert run.returncode == code, (args, stderr)
        assert message in stderr and "Traceback" not in stderr
        if code == 1:
            assert len(stderr.strip().splitlines()) == 1


def test_segment_on_a_local_cluster_with_progress(tmp_path):
    store, sig, np = _store(tmp_path)
    args = ["segment", str(store), "--variable", "p", "--n-bkps", "3", "--json"]
    res = subprocess.run(
        [_kcpstream(), *args, "--scheduler", "local:1", "--progress"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert np.abs(np.array(json.loads(res.stdout)["changepoints"]) - sig.changepoints).max() < 10
    assert "100%" in res.stderr  # distributed's progress bar, on stderr
    threaded = subprocess.run([_kcpstream(), *args, "--progress"], capture_output=True, text=True)
    assert json.loads(threaded.stdout)["changepoints"] == json.loads(res.stdout)["changepoints"]
    assert "100%" in threaded.stderr  # dask's progress bar


def _trim_threshold():
    return os.environ.get("MALLOC_TRIM_THRESHOLD_")


@pytest.mark.parametrize("configured", [None, "131072"])
def test_local_cluster_workers_start_without_the_trim_threshold(configured, monkeypatch):
    # distributed's default (65536) makes zarr reads about twice as slow; a value
    # the user configured is kept.  distributed also writes the variable into this
    # process's environment (which its workers then inherit, whatever the
    # config): start from an environment without it, restored afterwards.
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    key = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
    with dask.config.set({key: configured} if configured else {}):
        with scheduler_context("local:1"):
            seen = list(get_client().run(_trim_threshold).values())
        assert dask.config.get(key) == (configured or 65536)  # restored after the run
    assert seen == [configured]


def test_progress_lines_name_every_phase(tmp_path, capfd, caplog):
    import logging

    import numpy as np

    import kcpstream

    x = np.random.default_rng(0).normal(size=600_000)
    x[300_000:] += 0.5
    kcpstream.segment(x, progress=True)
    err = capfd.readouterr().err
    for phase in ("fit: ", "data pass: 600000 samples", "search: ", "choice: 1 change-point "):
        assert phase in err, err
    # without progress=True: nothing on stderr, the same lines on the logger
    with caplog.at_level(logging.INFO, logger="kcpstream.progress"):
        kcpstream.segment(x, checkpoint=tmp_path / "ck")
    assert "search: " not in capfd.readouterr().err
    said = [r.getMessage() for r in caplog.records if r.name == "kcpstream.progress"]
    assert [m.split(":")[0] for m in said] == ["fit", "data pass", "search", "choice", "checkpoint"]


def test_the_data_pass_line_says_what_a_checkpoint_held(tmp_path, caplog):
    import logging

    import numpy as np
    import zarr

    import kcpstream

    x = np.random.default_rng(0).normal(size=400_000).astype("f4")
    x[200_000:] += 0.5
    z = zarr.create_array(str(tmp_path / "s.zarr"), shape=(400_000,), chunks=(50_000,), dtype="f4")
    z[:] = x

    def pass_line() -> str:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="kcpstream.progress"):
            kcpstream.segment(str(tmp_path / "s.zarr"), checkpoint=tmp_path / "ck")
        return next(r.getMessage() for r in caplog.records if "data pass" in r.getMessage())

    assert pass_line().startswith("data pass: 400000 samples of 1 series (")
    assert pass_line().startswith("data pass: 1 series loaded from the checkpoint (")
    z.resize((450_000,))
    z[400_000:] = x[:50_000]
    assert pass_line().startswith(
        "data pass: 1 series updated from the checkpoint (the chunks that changed read) ("
    )


def test_a_boolean_variable_is_segmented_as_zeros_and_ones(tmp_path):
    import numpy as np
    import xarray as xr

    import kcpstream

    rng = np.random.default_rng(0)
    flag = np.r_[rng.random(20_000) < 0.05, rng.random(20_000) < 0.25]
    xr.Dataset({"flag": ("time", flag)}).to_zarr(tmp_path / "f.zarr")
    args = ["segment", str(tmp_path / "f.zarr"), "--variable", "flag", "--json"]
    res = subprocess.run([_kcpstream(), *args], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    want = kcpstream.segment(flag.astype(np.uint8))
    assert json.loads(res.stdout)["changepoints"] == want.changepoints.tolist()
    assert want.changepoints.tolist() == pytest.approx([20_000], abs=400)
