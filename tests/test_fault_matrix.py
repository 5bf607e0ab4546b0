"""Lost data is never a gap: every route that reads a store, every way an
archive loses or damages a chunk, with gaps skipped (the default), with
``missing="skip"`` and with ``skipna=False``.

The answer is either the one for the data as it is now or one line naming
the chunk.  Each fault is also read with ``missing="fill"`` (a reader that
fills): where the matrix expects an error, that reader gives an answer, so
the error the matrix sees is kcpstream's check, not an accident of the
fault.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr
from click.testing import CliRunner

import kcpstream
from kcpstream.errors import InputError
from kcpstream.jobs.cli import main
from kcpstream.jobs.pipeline import run_job

from .helpers import assert_same_segmentation
from .test_s3 import s3_endpoint  # noqa: F401  (the local S3 server, a fixture)

# (the fixture is used by name below)

N, CHUNK = 60_000, 5_000
LOST = (15_000, 20_000)  # the samples of chunk 3
KW = {"n_bkps": 1, "features": "rff:16", "seed": 0}


def _signal() -> np.ndarray:
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1, N)
    x[35_000:] *= 3
    return x.astype(np.float32)


def _write(path: Path) -> None:
    """``v`` along ``time`` (with times), and ``w`` of two sensors, in chunks of
    CHUNK samples."""
    x = _signal()
    ds = xr.Dataset(
        {"v": ("time", x), "w": (("time", "sensor"), np.stack([x, x[::-1]], axis=1))},
        coords={"time": pd.date_range("2026-01-01", periods=N, freq="s"), "sensor": [1, 2]},
    )
    ds.chunk(time=CHUNK, sensor=2).to_zarr(path, mode="w")


# -- routes: each reads variable v (w for the batch) of the store at `path` ----------


def _job(path: Path, mode: dict) -> dict:
    folder = path.parent
    lines = ["[input]", f'store = "{path.name}"', 'variables = ["v"]']
    lines += [f"{k} = {json.dumps(v)}" for k, v in mode.items()]
    lines += ["[features]", 'map = "rff"', "n_features = 16", "[selection]", "n_bkps = 1"]
    lines += ["[output]", 'store = "out"']
    (folder / "job.toml").write_text("\n".join(lines) + "\n")
    report = run_job(str(folder / "job.toml"))
    if report["failed"]:
        raise InputError(next(iter(report["failed"].values())))
    (out,) = (folder / "out" / "series").glob("*.json")
    return kcpstream.Segmentation.from_json(out.read_text())


def _cli(path: Path, mode: dict):
    args = ["segment", str(path), "-v", "v", "--n-bkps", "1", "--features", "rff:16"]
    args += ["--seed", "0", "--out", str(path) + ".json"]
    if "missing" in mode:
        args += ["--missing", mode["missing"]]
    if mode.get("skipna") is False:
        args += ["--no-skipna"]
    res = CliRunner().invoke(main, args)
    if res.exit_code:
        assert len(res.output.strip().splitlines()) == 1, res.output  # one line
        raise InputError(res.output.strip())
    return kcpstream.Segmentation.from_json(Path(str(path) + ".json").read_text())


def _batch(path: Path, mode: dict):
    res = kcpstream.segment(xr.open_zarr(path)["w"], batch_dims="sensor", **KW, **mode)
    return next(iter(res))[1]  # sensor a: the signal v holds


ROUTES = {
    "path": lambda p, m: kcpstream.segment(str(p), variable="v", **KW, **m),
    "file URL": lambda p, m: kcpstream.segment(p.as_uri(), variable="v", **KW, **m),
    "zarr array": lambda p, m: kcpstream.segment(zarr.open_group(str(p))["v"], **KW, **m),
    "xarray": lambda p, m: kcpstream.segment(xr.open_zarr(p, chunks=None)["v"], **KW, **m),
    "xarray dask": lambda p, m: kcpstream.segment(xr.open_zarr(p)["v"], **KW, **m),
    "batch": _batch,
    "cli": _cli,
    "job": _job,
}
MODES = {
    "default": {},
    "skip": {"missing": "skip"},
    "strict": {"skipna": False},
}


# -- faults: each damages the store at `path` ----------------------------------------


def _chunk_file(path: Path, var: str = "v", k: int = 3) -> Path:
    return path / var / "c" / str(k) if var == "v" else path / var / "c" / str(k) / "0"


def _absent(path: Path) -> None:
    _chunk_file(path).unlink()


def _truncated(path: Path) -> None:
    f = _chunk_file(path)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _corrupt(path: Path) -> None:
    f = _chunk_file(path)
    raw = bytearray(f.read_bytes())
    raw[len(raw) // 2 :] = bytes(len(raw) - len(raw) // 2)
    f.write_bytes(bytes(raw))


FAULTS = {"absent chunk": _absent, "truncated chunk": _truncated, "corrupt chunk": _corrupt}


def _damage(path: Path, fault: str, route: str) -> None:
    FAULTS[fault](path)
    if route == "batch":  # the batch reads w: the same chunk of it
        f = _chunk_file(path, "w")
        if fault == "absent chunk":
            f.unlink()
        else:
            f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("route", ROUTES)
def test_a_lost_or_damaged_chunk_is_an_error_or_a_reported_gap(tmp_path, route, fault, mode):
    path = tmp_path / "s.zarr"
    _write(path)
    _damage(path, fault, route)
    call = ROUTES[route]
    if fault == "absent chunk" and mode == "skip":
        # asked for: the absent chunk is a gap, reported as such
        res = call(path, MODES[mode])
        assert res.diagnostics.n_missing == LOST[1] - LOST[0]
        want = _signal()
        want[LOST[0] : LOST[1]] = np.nan
        assert_same_segmentation(res, kcpstream.segment(want, **KW))
        return
    with pytest.raises(InputError) as info:
        call(path, MODES[mode])
    message = str(info.value)
    assert "\n" not in message.strip()
    # the chunk is named: by its samples, or by its key in the store
    assert "[15000, 20000)" in message or "c/3" in message or "15000" in message, message


@pytest.mark.parametrize("route", ["path", "file URL", "zarr array", "xarray", "xarray dask"])
def test_a_reader_that_fills_would_not_have_raised(tmp_path, route):
    # the control of the matrix: with the fill value read as samples, an absent
    # chunk gives an answer (NaN fill values: a silent gap); the errors above
    # are kcpstream's checks, not an accident of the fault
    path = tmp_path / "s.zarr"
    _write(path)
    _absent(path)
    res = ROUTES[route](path, {"missing": "fill"})
    assert res.diagnostics.n_missing == LOST[1] - LOST[0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("route", ROUTES)
def test_a_chunk_deleted_after_the_listing_is_an_error_in_every_mode(
    tmp_path, monkeypatch, route, mode
):
    # listed, then gone before it was read: an xarray object reads it as fill
    # values, a gap once gaps are skipped; even missing="skip" (a chunk the
    # listing did not have is a gap) must not take it for one
    from kcpstream.inputs import provenance as pv

    path = tmp_path / "s.zarr"
    _write(path)
    listed = pv.open_origin

    def then_deleted(*args, **kwargs):
        origin = listed(*args, **kwargs)
        for f in (_chunk_file(path), _chunk_file(path, "w")):
            f.unlink(missing_ok=True)
        return origin

    monkeypatch.setattr(pv, "open_origin", then_deleted)
    with pytest.raises(InputError, match=r"c/3.*(changed while it was read|removed after)|15000"):
        ROUTES[route](path, MODES[mode])


def _sharded(path: Path) -> np.ndarray:
    """``v`` in chunks of 1000 in shards of 5000, with chunk 6 left out of its
    shard (zarr leaves out a chunk of fill values); the samples it holds."""
    x = _signal()[:20_000].copy()
    x[6000:7000] = 0.0
    group = zarr.open_group(str(path), mode="w")
    z = group.create_array("v", shape=x.shape, chunks=(1000,), shards=(5000,), dtype=x.dtype,
                           fill_value=0.0, dimension_names=("time",))  # fmt: skip
    z[:] = x
    return x


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "route", ["path", "file URL", "zarr array", "xarray", "xarray dask", "cli"]
)
def test_a_chunk_missing_from_its_shard_is_an_absent_chunk(tmp_path, route, mode):
    path = tmp_path / "s.zarr"
    x = _sharded(path)
    call = ROUTES[route]
    if mode == "skip" and route in ("xarray", "xarray dask"):
        # xarray reads the absent chunk as the fill value, 0.0: samples it would
        # invent (read as data before), refused with the route that can skip it
        with pytest.raises(InputError, match=r"no chunk .*fill value \(0\.0\).*by path"):
            call(path, MODES[mode])
        return
    if mode == "skip" and route != "cli":
        res = call(path, MODES[mode])
        assert res.diagnostics.n_missing == 1000
        want = x.copy()
        want[6000:7000] = np.nan
        assert_same_segmentation(res, kcpstream.segment(want, **KW))
        return
    if mode == "skip":  # the command line's --missing skip, the same answer
        res = call(path, MODES[mode])
        assert res.diagnostics.n_missing == 1000
        return
    with pytest.raises(InputError, match=r"\[6000, 7000\)|chunk \(1,\) of shard c/1"):
        call(path, MODES[mode])


def test_an_object_store_on_every_fault(s3_endpoint, monkeypatch):  # noqa: F811
    # the same faults behind an S3 endpoint (a local S3 server): an object
    # absent, one truncated, in every mode; one deleted, or re-uploaded with
    # the same bytes, between the listing and the reads; the time
    # coordinate's object lost
    import s3fs

    from kcpstream.inputs import provenance as pv

    from .test_s3 import bucket as _bucket

    name, opts = _bucket.__wrapped__(s3_endpoint)
    fs = s3fs.S3FileSystem(**opts)
    local = Path(os.environ.get("TMPDIR", "/tmp")) / f"{name}.zarr"
    _write(local)
    url = f"s3://{name}/s.zarr"
    fs.put(str(local), url, recursive=True)
    key = f"{name}/s.zarr/v/c/3"
    raw = fs.cat(key)
    for damage in ("absent", "truncated"):
        if damage == "absent":
            fs.rm(key)
        else:
            fs.pipe(key, raw[: len(raw) // 2])
        for mode in MODES.values():
            if damage == "absent" and mode == {"missing": "skip"}:
                res = kcpstream.segment(url, variable="v", storage_options=opts, **KW, **mode)
                assert res.diagnostics.n_missing == LOST[1] - LOST[0]
                continue
            with pytest.raises(InputError, match=r"15000|c/3"):
                kcpstream.segment(url, variable="v", storage_options=opts, **KW, **mode)
        fs.pipe(key, raw)
    ok = kcpstream.segment(url, variable="v", storage_options=opts, **KW)
    assert_same_segmentation(ok, kcpstream.segment(_signal(), **KW))
    listed = pv.open_origin
    for how, change in (("deleted", lambda: fs.rm(key)), ("same bytes", lambda: fs.pipe(key, raw))):

        def then_changed(*args, change=change, **kwargs):
            origin = listed(*args, **kwargs)
            change()
            return origin

        monkeypatch.setattr(pv, "open_origin", then_changed)
        for mode in MODES.values():
            try:
                res = kcpstream.segment(url, variable="v", storage_options=opts, **KW, **mode)
            except InputError as exc:
                assert re.search(r"c/3.*(changed while it was read|removed)|15000", str(exc))
            else:  # the same bytes: the answer for them, or an error, never another
                assert how == "same bytes"
                assert_same_segmentation(res, ok)
            fs.pipe(key, raw)
        monkeypatch.undo()
    fs.rm(f"{name}/s.zarr/time/c/0")
    with pytest.raises(InputError, match=r"'time' coordinate has no chunk for positions \[0, "):
        kcpstream.segment(url, variable="v", storage_options=opts, **KW)


@pytest.mark.parametrize("route", [r for r in ROUTES if r != "zarr array"])  # (no times)
def test_a_lost_chunk_of_the_time_coordinate_is_named(tmp_path, route):
    path = tmp_path / "s.zarr"
    _write(path)
    (time_chunk,) = [p for p in (path / "time" / "c").iterdir() if p.name == "0"]
    time_chunk.unlink()
    with pytest.raises(InputError, match=r"'time' coordinate has no chunk for positions \[0, "):
        ROUTES[route](path, {})


@pytest.mark.parametrize("route", ROUTES)
def test_a_chunk_rewritten_in_place_with_its_size_and_time_is_read_as_it_is_now(tmp_path, route):
    # a checkpoint of the first version must not answer for the second
    path = tmp_path / "s.zarr"
    _write(path)
    ck = {} if route in ("cli", "job") else {"checkpoint": str(tmp_path / "ck")}
    first = ROUTES[route](path, ck)
    var = "w" if route == "batch" else "v"
    f = _chunk_file(path, var)
    stat = f.stat()
    other = _signal()
    other[LOST[0] : LOST[1]] = other[LOST[0] : LOST[1]][::-1] * 4
    z = zarr.open_group(str(path))[var]
    if var == "v":
        z[LOST[0] : LOST[1]] = other[LOST[0] : LOST[1]]
    else:  # sensor 1 holds v; the rewrite keeps the chunk's other sensor
        z[LOST[0] : LOST[1], 0] = other[LOST[0] : LOST[1]]
    os.utime(f, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    again = ROUTES[route](path, ck)
    assert_same_segmentation(again, kcpstream.segment(other, **KW))
    assert first.n_samples == again.n_samples


def test_kcpstream_watch_reports_a_lost_chunk_in_one_line_and_keeps_watching(tmp_path):
    # the watch runs the job on a schedule: a lost chunk fails the series in
    # every run's report, naming it, and never becomes a gap
    import signal

    from .test_watch import _watching

    path = tmp_path / "s.zarr"
    _write(path)
    _absent(path)
    (tmp_path / "job.toml").write_text(
        '[input]\nstore = "s.zarr"\nvariables = ["v"]\n[selection]\nn_bkps = 1\n'
        '[output]\nstore = "out"\n'
    )
    with _watching(tmp_path / "job.toml", "--every", "1s", "--json", "--quiet") as proc:
        for _ in range(2):  # two runs: the same failure each time
            report = json.loads(proc.stdout.readline())
            assert report["done"] == 0 and len(report["failed"]) == 1
            (message,) = report["failed"].values()
            assert "[15000, 20000)" in message and "\n" not in message
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err
    assert not list((tmp_path / "out" / "series").glob("*.json"))
