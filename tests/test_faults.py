"""Faults in the input and in checkpoints: a clear error or the right answer,
never another answer.

Every case is a real zarr store on disk, damaged the way an archive gets
damaged (a chunk file deleted, truncated, rewritten in place, the array
grown), and is compared with a run from scratch on the data as it now is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import zarr
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kcpstream
from kcpstream.errors import InputError
from kcpstream.inputs.signal import as_signal
from kcpstream.jobs.cli import main
from kcpstream.persist import checkpoint

from .helpers import assert_same_segmentation

N, CHUNK = 60_000, 5_000


def _signal(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, N)
    x[20_000:35_000] *= 3
    return x.astype(np.float32)


def _store(path, x: np.ndarray, chunk: int = CHUNK) -> str:
    z = zarr.create_array(store=str(path), shape=x.shape, chunks=(chunk,), dtype=x.dtype)
    z[:] = x
    return str(path)


# -- the input ---------------------------------------------------------------


def test_a_deleted_chunk_is_an_error_naming_its_samples(tmp_path):
    store = _store(tmp_path / "s.zarr", _signal())
    os.remove(os.path.join(store, "c", "4"))
    with pytest.raises(InputError, match=r"no chunk for samples \[20000, 25000\)"):
        kcpstream.segment(store)
    with pytest.raises(InputError, match="missing='fill'"):
        kcpstream.segment(zarr.open_array(store))


def test_missing_fill_reads_the_fill_value_as_asked(tmp_path):
    x = _signal()
    store = _store(tmp_path / "s.zarr", x)
    os.remove(os.path.join(store, "c", "4"))
    zeros = x.copy()
    zeros[20_000:25_000] = 0
    got = kcpstream.segment(store, missing="fill", n_bkps=3)
    assert_same_segmentation(got, kcpstream.segment(zeros, n_bkps=3))


def test_a_chunk_of_fill_values_zarr_left_out_needs_missing_fill(tmp_path):
    # zarr does not write a chunk equal to the fill value: the listing cannot
    # tell it from a lost one, so the error says how to read it as written
    x = _signal()
    x[10_000:15_000] = 0
    store = _store(tmp_path / "s.zarr", x)
    assert not os.path.exists(os.path.join(store, "c", "2"))
    with pytest.raises(InputError, match=r"samples \[10000, 15000\).*missing='fill'"):
        kcpstream.segment(store)
    assert_same_segmentation(
        kcpstream.segment(store, missing="fill", n_bkps=2), kcpstream.segment(x, n_bkps=2)
    )


def test_a_deleted_chunk_of_a_store_opened_with_xarray(tmp_path):
    xr = pytest.importorskip("xarray")
    ds = xr.Dataset({"v": ("time", _signal())})
    ds.encoding = {}
    ds.to_zarr(tmp_path / "x.zarr", encoding={"v": {"chunks": (CHUNK,), "fill_value": 0.0}})
    os.remove(tmp_path / "x.zarr" / "v" / "c" / "3")
    for opened in (
        xr.open_zarr(tmp_path / "x.zarr", consolidated=False, mask_and_scale=False),
        xr.open_zarr(tmp_path / "x.zarr", consolidated=False, mask_and_scale=False, chunks=None),
    ):
        with pytest.raises(InputError, match="no chunk"):
            kcpstream.segment(opened["v"])


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_a_chunk_that_fails_to_decode_is_an_error_naming_it(tmp_path, damage):
    store = _store(tmp_path / "s.zarr", _signal())
    path = os.path.join(store, "c", "7")
    with open(path, "r+b") as fh:
        if damage == "truncate":
            fh.truncate(os.path.getsize(path) // 3)
        else:
            fh.write(b"\xff" * 64)
    with pytest.raises(InputError, match=r"cannot read samples \[35000, 40000\) .* chunk c/7 "):
        kcpstream.segment(store)


def test_the_cli_reports_a_deleted_or_damaged_chunk_in_one_line(tmp_path):
    store = _store(tmp_path / "s.zarr", _signal())
    os.remove(os.path.join(store, "c", "4"))
    res = CliRunner().invoke(main, ["segment", store])
    assert res.exit_code == 1
    assert "no chunk for samples [20000, 25000)" in res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert CliRunner().invoke(main, ["segment", store, "--missing", "fill"]).exit_code == 0
    with open(os.path.join(store, "c", "5"), "r+b") as fh:
        fh.truncate(10)
    res = CliRunner().invoke(main, ["segment", store, "--missing", "fill"])
    assert res.exit_code == 1 and "cannot read samples" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_missing_takes_error_skip_or_fill():
    with pytest.raises(InputError, match="missing='zero' is not one of error, skip, fill"):
        kcpstream.segment(np.zeros(100), missing="zero")


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    chunk=st.integers(0, N // CHUNK - 1),
    how=st.sampled_from(["delete", "truncate", "flip", "garbage", "empty"]),
    at=st.floats(0, 1),
)
def test_a_damaged_input_chunk_gives_a_clear_error_or_the_answer_for_what_it_holds(
    tmp_path_factory, chunk, how, at
):
    store = _store(tmp_path_factory.mktemp("in") / "s.zarr", _signal())
    path = os.path.join(store, "c", str(chunk))
    raw = open(path, "rb").read()
    if how == "delete":
        os.remove(path)
    else:
        i = min(int(at * len(raw)), len(raw) - 1)
        raw = {
            "truncate": raw[:i],
            "flip": raw[:i] + bytes([raw[i] ^ 0x10]) + raw[i + 1 :],
            "garbage": raw[:i] + b"\x00" * (len(raw) - i),
            "empty": b"",
        }[how]
        open(path, "wb").write(raw)
    try:
        got = kcpstream.segment(store, n_bkps=3)
    except InputError as exc:
        # an absent chunk, a chunk that fails to decode, or one that decodes to an
        # infinity (one that decodes to NaN is a gap: the samples the store holds now)
        kinds = ("no chunk for samples", "damaged", "infinity")
        assert any(k in str(exc) for k in kinds), str(exc)
        return
    # read without error: the answer for the samples the store holds now
    assert how != "delete"
    assert_same_segmentation(
        got, kcpstream.segment(np.asarray(zarr.open_array(store)[:]), n_bkps=3)
    )


# -- identity: checkpoints never served for other data -------------------------


def test_a_chunk_rewritten_in_place_is_not_served_from_the_checkpoint(tmp_path):
    x = _signal()
    store = _store(tmp_path / "s.zarr", x)
    ck = tmp_path / "ck"
    first = kcpstream.segment(store, checkpoint=ck)
    assert first.diagnostics.checkpoint == "written"
    z = zarr.open_array(store, mode="r+")
    z[40_000:50_000] = z[40_000:50_000] * 4  # same shape and dtype: another signal
    again = kcpstream.segment(store, checkpoint=ck)
    assert again.diagnostics.checkpoint == "written"
    assert_same_segmentation(again, kcpstream.segment(store))
    for edge in (40_000, 50_000):  # the rewritten stretch is found
        assert np.abs(again.changepoints - edge).min() <= 50


@pytest.mark.parametrize("encoded", [False, True], ids=["values", "cf"])
def test_a_path_down_to_an_array_is_not_served_from_a_stale_checkpoint(tmp_path, encoded):
    # the array's group is read with it (its time coordinate, its CF decoding):
    # a rewrite of the array's chunk is still seen through that route
    xr = pytest.importorskip("xarray")
    x = _signal().astype(np.float64)
    encoding = {"v": {"dtype": "int16", "scale_factor": 0.001, "_FillValue": -32768}}
    ds = xr.Dataset({"v": ("time", np.round(x, 3))})
    ds.to_zarr(tmp_path / "g.zarr", encoding=encoding if encoded else None)
    path, ck = str(tmp_path / "g.zarr" / "v"), tmp_path / "ck"
    assert kcpstream.segment(path, checkpoint=ck).diagnostics.checkpoint == "written"
    assert kcpstream.segment(path, checkpoint=ck).diagnostics.checkpoint == "loaded"
    z = zarr.open_group(tmp_path / "g.zarr", mode="r+")["v"]
    z[40_000:50_000] = z[40_000:50_000] // 4 if encoded else z[40_000:50_000] * 4
    again = kcpstream.segment(path, checkpoint=ck)
    assert again.diagnostics.checkpoint != "loaded"
    assert_same_segmentation(again, kcpstream.segment(path))
    for edge in (40_000, 50_000):  # the rewritten stretch is found
        assert np.abs(again.changepoints - edge).min() <= 50


def test_an_append_is_not_served_from_the_checkpoint(tmp_path):
    x = _signal()
    store = _store(tmp_path / "s.zarr", x)
    ck = tmp_path / "ck"
    kcpstream.segment(store, checkpoint=ck, n_bkps=2)
    z = zarr.open_array(store, mode="r+")
    z.append(np.random.default_rng(1).normal(5, 1, 10_000).astype(np.float32))
    again = kcpstream.segment(store, checkpoint=ck, n_bkps=3)
    assert again.diagnostics.checkpoint == "written"
    assert_same_segmentation(again, kcpstream.segment(store, n_bkps=3))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    chunk=st.integers(0, N // CHUNK - 1),
    start=st.integers(0, CHUNK - 1),
    length=st.integers(1, CHUNK),
    scale=st.sampled_from([0.5, 2.0, -1.0]),
)
def test_every_rewrite_of_a_chunk_changes_the_identity(tmp_path_factory, chunk, start, length,
                                                       scale):  # fmt: skip
    store = _store(tmp_path_factory.mktemp("r") / "s.zarr", _signal())
    before = as_signal(store).identity
    assert as_signal(store).identity == before  # the same data: the same identity
    z = zarr.open_array(store, mode="r+")
    a = chunk * CHUNK + start
    b = min(a + length, (chunk + 1) * CHUNK)
    z[a:b] = z[a:b] * scale
    assert as_signal(store).identity != before


def test_two_arrays_that_agree_on_the_fit_sample_do_not_share_a_checkpoint(tmp_path):
    x = _signal()
    y = x.copy()
    y[30_500:31_000] += 50  # between the fit sample's windows
    ck = tmp_path / "ck"
    assert kcpstream.segment(x, checkpoint=ck).diagnostics.checkpoint == "written"
    other = kcpstream.segment(y, checkpoint=ck)
    assert other.diagnostics.checkpoint == "written"
    assert_same_segmentation(other, kcpstream.segment(y))
    assert kcpstream.segment(x, checkpoint=ck).diagnostics.checkpoint == "loaded"


def test_variables_of_two_stores_do_not_share_a_checkpoint(tmp_path):
    xr = pytest.importorskip("xarray")
    x = _signal()
    y = x.copy()
    y[30_500:31_000] += 50
    for name, v in (("raw", x), ("clean", y)):
        xr.Dataset({"v": ("time", v)}).to_zarr(tmp_path / f"{name}.zarr")
    ck = tmp_path / "ck"
    first = kcpstream.segment(xr.open_zarr(tmp_path / "raw.zarr")["v"], checkpoint=ck)
    second = kcpstream.segment(xr.open_zarr(tmp_path / "clean.zarr")["v"], checkpoint=ck)
    assert first.diagnostics.checkpoint == second.diagnostics.checkpoint == "written"
    assert_same_segmentation(second, kcpstream.segment(y))


def test_a_checkpoint_needs_an_input_it_can_identify(tmp_path):
    da = pytest.importorskip("dask.array")
    x = da.random.default_rng(0).normal(size=20_000, chunks=5_000)
    with pytest.raises(InputError, match="checkpoint= cannot tell whether"):
        kcpstream.segment(x, checkpoint=tmp_path / "ck")
    # arithmetic on an array it can identify is identified through the graph
    y = da.from_array(_signal(), chunks=CHUNK) * 2
    assert kcpstream.segment(y, checkpoint=tmp_path / "ck").diagnostics.checkpoint == "written"


# -- damaged checkpoints --------------------------------------------------------


def _checkpoint_files(ck) -> list[str]:
    out = []
    for dirpath, _, files in os.walk(ck):
        out += [os.path.join(dirpath, f) for f in files]
    return sorted(out)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), how=st.sampled_from(["delete", "truncate", "flip", "empty"]))
def test_a_damaged_checkpoint_is_recomputed_never_used(tmp_path_factory, data, how):
    root = tmp_path_factory.mktemp("ck")
    store = _store(root / "s.zarr", _signal())
    ck = root / "ck"
    kwargs = {"block_size": 64}  # the block grid: statistics and exact segments stored
    fresh = kcpstream.segment(store, checkpoint=ck, **kwargs)
    files = _checkpoint_files(ck)
    victim = data.draw(st.sampled_from(files))
    if how == "delete":
        os.remove(victim)
    else:
        raw = open(victim, "rb").read()
        if how == "truncate":
            raw = raw[: len(raw) // 2]
        elif how == "flip":
            # (a position drawn independently of the file's size, which holds paths
            # that differ between examples: replays must draw the same)
            at = data.draw(st.integers(0, 2**20)) % max(1, len(raw))
            raw = raw[:at] + bytes([raw[at] ^ 0x55]) + raw[at + 1 :] if raw else b"x"
        else:
            raw = b""
        open(victim, "wb").write(raw)
    again = kcpstream.segment(store, checkpoint=ck, **kwargs)
    assert_same_segmentation(again, fresh)
    # every array and the attributes are checksummed: a flip is a miss, or (in
    # the padding of an array's header, if its parser passes over it) the very
    # same group
    assert again.diagnostics.checkpoint in ("recomputed", "loaded")
    # written again: the next run loads it
    assert kcpstream.segment(store, checkpoint=ck, **kwargs).diagnostics.checkpoint == "loaded"


def test_a_deleted_statistics_chunk_is_reported_as_recomputed(tmp_path):
    store = _store(tmp_path / "s.zarr", _signal())
    ck = tmp_path / "ck"
    fresh = kcpstream.segment(store, checkpoint=ck, block_size=64, pen="auto")
    (key,) = [d for d in os.listdir(ck) if not d.startswith(".")]
    os.remove(ck / key / "prefix.0.npy")
    again = kcpstream.segment(store, checkpoint=ck, block_size=64, pen="auto")
    assert again.diagnostics.checkpoint == "recomputed"
    assert_same_segmentation(again, fresh)


def test_a_killed_save_leaves_a_folder_the_next_save_removes(tmp_path):
    store = _store(tmp_path / "s.zarr", _signal())
    ck = tmp_path / "ck"
    kcpstream.segment(store, checkpoint=ck)
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead = int(done.stdout)  # a process that has exited
    import socket

    left = ck / f".{'a' * 32}.tmp-{socket.gethostname()}-{dead}-{'0' * 32}"
    left.mkdir(parents=True)
    live = ck / f".{'b' * 32}.tmp-{socket.gethostname()}-{os.getpid()}-{'0' * 32}"
    live.mkdir()
    kcpstream.segment(store, checkpoint=ck, n_bkps=2, block_size=64)
    assert not left.exists()
    assert live.exists()  # a save still running (this process) is left alone


def test_concurrent_saves_and_loads_never_give_a_partial_checkpoint(tmp_path):
    x = _signal()
    ck = tmp_path / "ck"
    res = kcpstream.segment(x, checkpoint=ck, block_size=64, n_bkps=3)
    (key,) = [d for d in os.listdir(ck) if not d.startswith(".")]
    found = checkpoint.load(ck, key, res.min_size, N, 64)
    stats, known = found.stats, found.known
    errors: list[BaseException] = []
    outcomes: list = []

    def writer():
        try:
            for _ in range(15):
                checkpoint.save(ck, key, stats, known, {"min_size": res.min_size})
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reader():
        try:
            for _ in range(40):
                outcomes.append(checkpoint.load(ck, key, res.min_size, N, 64))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for got in outcomes:
        # loaded whole, or missed (None, Damaged): never a partial group
        assert got is None or isinstance(got, checkpoint.Loaded | checkpoint.Damaged)
        if isinstance(got, checkpoint.Loaded):
            np.testing.assert_array_equal(got.stats.prefix, stats.prefix)
            assert set(got.known) == set(known)


# -- one-line errors for common mistakes ------------------------------------------


def test_channels_first_is_refused_with_the_fix():
    x = np.random.default_rng(0).normal(size=(8, 200_000))
    with pytest.raises(InputError, match=r"shape \(8, 200000\).*transpose it \(x\.T\)"):
        kcpstream.segment(x)
    with pytest.raises(InputError, match="more channels than samples"):
        kcpstream.segment(x, n_bkps=2)
    assert kcpstream.segment(x.T[:20_000], n_bkps=1).n_samples == 20_000


def test_float16_is_read_as_float32(tmp_path):
    x = _signal().astype(np.float16)
    want = kcpstream.segment(x.astype(np.float32), n_bkps=2)
    assert_same_segmentation(kcpstream.segment(x, n_bkps=2), want)
    store = _store(tmp_path / "h.zarr", x)
    assert_same_segmentation(kcpstream.segment(store, n_bkps=2), want)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"chunks": 0}, "chunks must be a positive number"),
        ({"chunks": -5}, "chunks must be a positive number"),
        ({"features": "rff:"}, "an empty part"),
        ({"d_max": 10**9}, r"d_max=1000000000 is more than the 1000"),
    ],
)
def test_bad_parameters_are_input_errors(kwargs, match):
    with pytest.raises(InputError, match=match):
        kcpstream.segment(np.random.default_rng(0).normal(size=2_000), **kwargs)


def test_cli_errors_are_one_line_and_come_before_the_work(tmp_path):
    store = _store(tmp_path / "s.zarr", _signal())
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cases = [
        (["--scheduler", "local:0"], "local:N needs N >= 1"),
        (["--out", str(blocker / "r.json")], f"the file {blocker / 'r.json'} cannot be written"),
        (["--checkpoint", str(blocker / "ck")], f"checkpoint='{blocker / 'ck'}' cannot be written"),
        (["--features", "rff:"], "an empty part"),
    ]
    for extra, match in cases:
        res = CliRunner().invoke(main, ["segment", store, *extra])
        assert res.exit_code == 1, (extra, res.output)
        assert match in res.output and len(res.output.strip().splitlines()) == 1


#: A worker preload that logs each worker process that starts and kills the
#: first ``KCP_DIE_STARTS`` of them while they start (as a node's OOM killer or a
#: crash would).  distributed may run a preload file more than once per process.
_DYING_WORKER = """
import os
log = os.environ["KCP_START_LOG"]
with open(log, "a") as f:
    f.write(f"{os.getpid()}\\n")
with open(log) as f:
    starts = len(set(f.read().split()))
if starts <= int(os.environ["KCP_DIE_STARTS"]):
    os._exit(3)
"""


@pytest.mark.parametrize("deaths", [1, 2])
def test_a_worker_dying_while_the_cluster_starts_is_retried_once(tmp_path, deaths):
    store = _store(tmp_path / "s.zarr", _signal())
    (tmp_path / "dying.py").write_text(_DYING_WORKER)
    log = tmp_path / "starts.log"
    env = {
        **os.environ,
        "DASK_DISTRIBUTED__WORKER__PRELOAD": f'["{tmp_path / "dying.py"}"]',
        "KCP_START_LOG": str(log),
        "KCP_DIE_STARTS": str(deaths),
    }
    exe = os.path.join(os.path.dirname(sys.executable), "kcpstream")
    res = subprocess.run(
        [exe, "segment", store, "--scheduler", "local:1"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert len(set(log.read_text().split())) == 2  # started again once, not more
    if deaths == 1:  # the second start holds: the same answer as without a cluster
        assert res.returncode == 0, res.stderr
        expected = kcpstream.segment(store).changepoints
        lines = res.stdout.strip().split("\n")[1:]  # a line per change-point: it, its p-value
        assert [line.split()[0] for line in lines] == [f"{c:,}" for c in expected]
    else:
        assert res.returncode == 1
        expected = "Error: cannot start a local dask cluster: Nanny failed to start."
        assert res.stderr.strip() == expected


def test_a_scheduler_address_that_does_not_answer_is_an_error_in_time():
    pytest.importorskip("distributed")
    from kcpstream.jobs.scheduling import scheduler_context

    with pytest.raises(
        InputError, match="cannot connect to the dask scheduler at tcp://127.0.0.1:9"
    ):
        with scheduler_context("tcp://127.0.0.1:9", timeout=2):  # the discard port: nothing
            pass  # pragma: no cover - never connected


def test_a_worker_stuck_while_the_cluster_starts_is_an_error_in_time(tmp_path):
    dask = pytest.importorskip("dask")
    from kcpstream.jobs.scheduling import scheduler_context

    (tmp_path / "stuck.py").write_text("import time\ntime.sleep(10**6)\n")
    with dask.config.set({"distributed.worker.preload": [str(tmp_path / "stuck.py")]}):
        with pytest.raises(InputError, match="cannot start a local dask cluster"):
            with scheduler_context("local:1", timeout=3):
                pass  # pragma: no cover - the cluster never starts


def test_cli_messages_carry_no_stray_quotes_or_warnings(tmp_path):
    xr = pytest.importorskip("xarray")
    xr.Dataset({"v": ("time", _signal())}).to_zarr(tmp_path / "x.zarr", consolidated=False)
    res = CliRunner().invoke(main, ["segment", str(tmp_path / "x.zarr"), "--variable", "w"])
    assert res.exit_code == 1
    assert res.output.startswith("Error: the store") and "Warning" not in res.output
    assert len(res.output.strip().splitlines()) == 1
    # a store without consolidated metadata opened through xarray (a batch of
    # series): xarray warns about it, the command line does not pass that on
    data = np.stack([_signal(0), _signal(1)], axis=1)
    xr.Dataset({"v": (("time", "sensor"), data)}, coords={"sensor": ["a", "b"]}).to_zarr(
        tmp_path / "b.zarr", consolidated=False
    )
    exe = os.path.join(os.path.dirname(sys.executable), "kcpstream")
    cmd = [exe, "segment", str(tmp_path / "b.zarr"), "--batch-dim", "sensor", "--n-bkps", "1"]
    env = {**os.environ, "PYTHONWARNINGS": "default"}  # what a shell shows
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr
    assert "consolidated" not in run.stderr and "Warning" not in run.stderr + run.stdout


def test_an_unwritable_checkpoint_is_refused_before_the_work(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(InputError, match="cannot be written"):
        kcpstream.segment(_signal(), checkpoint=blocker / "ck")
    with pytest.raises(InputError, match="local directory"):
        kcpstream.segment(_signal(), checkpoint="s3://bucket/ck")


def test_a_cf_fill_value_is_never_read_as_a_sample(tmp_path):
    # int16 with a scale factor and a fill value: the stored -32768 marks missing
    # samples; read by path it would be a run of outliers, decoded it is NaN
    xr = pytest.importorskip("xarray")
    x = _signal().astype(np.float64)
    x[1_000:1_100] = np.nan
    encoding = {"v": {"dtype": "int16", "scale_factor": 0.001, "_FillValue": -32768}}
    xr.Dataset({"v": ("time", x)}).to_zarr(tmp_path / "cf.zarr", encoding=encoding)
    assert zarr.open_group(tmp_path / "cf.zarr")["v"][1_000] == -32768
    # decoded, the stand-ins are missing samples (a gap), never samples
    gapped = kcpstream.segment(str(tmp_path / "cf.zarr"), variable="v", n_bkps=2)
    assert gapped.diagnostics.n_missing == 100 and gapped.diagnostics.longest_gap == 100
    decoded = xr.open_zarr(tmp_path / "cf.zarr")["v"].values
    valid = np.flatnonzero(~np.isnan(decoded))
    alone = kcpstream.segment(decoded[valid], n_bkps=2)
    assert gapped.changepoints.tolist() == valid[alone.changepoints].tolist()
    x[1_000:1_100] = 0.0
    xr.Dataset({"v": ("time", x)}).to_zarr(tmp_path / "ok.zarr", encoding=encoding)
    by_path = kcpstream.segment(str(tmp_path / "ok.zarr"), variable="v", n_bkps=2)
    assert_same_segmentation(
        by_path, kcpstream.segment(xr.open_zarr(tmp_path / "ok.zarr")["v"], n_bkps=2)
    )


def test_a_path_down_to_an_array_is_its_groups_array(tmp_path):
    # "store.zarr/v" is the group's array v: its fill value decoded as a gap
    # (read raw, the stand-ins were a run of outliers: two change-points around
    # them) and its time coordinate the group's, decoded
    xr = pytest.importorskip("xarray")
    x = _signal().astype(np.float64)
    x[1_000:1_100] = np.nan
    encoding = {"v": {"dtype": "int16", "scale_factor": 0.001, "_FillValue": -32768}}
    times = np.datetime64("2024-01-01") + np.arange(x.size) * np.timedelta64(1, "m")
    ds = xr.Dataset({"v": ("time", x)}, coords={"time": times})
    ds.to_zarr(tmp_path / "cf.zarr", encoding=encoding)
    by_group = kcpstream.segment(str(tmp_path / "cf.zarr"), variable="v", n_bkps=2)
    by_array = kcpstream.segment(str(tmp_path / "cf.zarr" / "v"), n_bkps=2)
    assert by_array.diagnostics.n_missing == 100
    assert by_array.changepoints.tolist() == by_group.changepoints.tolist()
    assert by_array.changepoint_times.tolist() == by_group.changepoint_times.tolist()
    assert by_array.changepoint_times.dtype.kind == "M"
    # a store that is one CF-encoded array: its chunks decoded as they are read
    single = zarr.create_array(tmp_path / "one.zarr", shape=x.shape, chunks=(4096,), dtype="i2")
    single[:] = np.where(np.isnan(x), -32768, np.rint(np.nan_to_num(x) / 0.001)).astype("i2")
    single.attrs.update({"scale_factor": 0.001, "_FillValue": -32768})
    alone = kcpstream.segment(str(tmp_path / "one.zarr"), n_bkps=2)
    assert alone.diagnostics.n_missing == 100
    assert alone.changepoints.tolist() == by_group.changepoints.tolist()


def _save_and_load(args) -> list[str]:
    """One process's share of the concurrency test: alternate saves and loads."""
    ck, key, min_size, n, rounds = args
    for _ in range(1000):  # another process may be replacing it just now
        got = checkpoint.load(ck, key, min_size, n, 64)
        if isinstance(got, checkpoint.Loaded):
            break
        time.sleep(0.001)
    else:
        raise AssertionError(f"the checkpoint was never there whole: {got!r}")
    stats, known = got.stats, got.known
    seen = []
    for i in range(rounds):
        if i % 2:
            checkpoint.save(ck, key, stats, known, {"min_size": min_size})
        got = checkpoint.load(ck, key, min_size, n, 64)
        if isinstance(got, checkpoint.Loaded):
            ok = np.array_equal(got.stats.prefix, stats.prefix) and set(got.known) == set(known)
            seen.append("loaded" if ok else "WRONG")
        else:
            seen.append("damaged" if isinstance(got, checkpoint.Damaged) else str(got))
    return seen


def test_processes_saving_and_loading_one_checkpoint_never_see_a_partial_one(tmp_path):
    import multiprocessing

    ck = tmp_path / "ck"
    res = kcpstream.segment(_signal(), checkpoint=ck, block_size=64, n_bkps=3)
    (key,) = [d for d in os.listdir(ck) if not d.startswith(".")]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(3) as pool:
        seen = pool.map(_save_and_load, [(str(ck), key, res.min_size, N, 40)] * 3)
    flat = [s for part in seen for s in part]
    assert "WRONG" not in flat
    assert flat.count("loaded") > 0 and set(flat) <= {"loaded", "None", "damaged"}
    assert not [d for d in os.listdir(ck) if ".tmp-" in d or ".old-" in d]


def _fsync_spy(monkeypatch) -> list[str]:
    """Every path ``os.fsync`` is called on (the real call is made)."""
    synced: list[str] = []
    real = os.fsync

    def spy(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return synced


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names open files through /proc")
def test_results_and_checkpoints_reach_the_disk_before_they_are_published(tmp_path, monkeypatch):
    from kcpstream.persist.files import write_atomic

    synced = _fsync_spy(monkeypatch)
    write_atomic(tmp_path / "r.json", "{}")
    # the file under its temporary name, then the folder holding the rename
    assert any(os.path.dirname(p) == str(tmp_path) and p != str(tmp_path) for p in synced)
    assert synced[-1] == str(tmp_path)
    synced.clear()
    kcpstream.segment(_signal(), n_bkps=2, block_size=100, checkpoint=tmp_path / "ck")
    (group,) = [g for g in os.listdir(tmp_path / "ck") if not g.startswith(".")]
    published = {
        os.path.relpath(os.path.join(d, f), tmp_path / "ck" / group)
        for d, _, files in os.walk(tmp_path / "ck" / group)
        for f in files
    }
    # each file was flushed under the temporary folder the group was renamed from
    flushed = {p.split(os.sep + ".", 1)[-1].split(os.sep, 1)[-1] for p in synced}
    assert published and published <= flushed
    assert str(tmp_path / "ck") in synced  # and the rename itself


# -- sharded stores ----------------------------------------------------------------


def _sharded(path, x: np.ndarray, hole: tuple[int, int] | None = None):
    """``x`` as variable ``v`` (along ``time``) of a group, in chunks of 1000 in
    shards of 5000, with the chunk ``hole`` left out of its shard (its values
    are the fill value: zarr leaves such a chunk out)."""
    import zarr

    y = x.copy()
    if hole is not None:
        y[hole[0] : hole[1]] = 0.0
    group = zarr.open_group(str(path), mode="w")
    z = group.create_array("v", shape=y.shape, chunks=(1000,), shards=(5000,), dtype=y.dtype,
                           fill_value=0.0, dimension_names=("time",))  # fmt: skip
    z[:] = y


def test_a_chunk_missing_from_a_shard_is_an_absent_chunk_on_every_route(tmp_path):
    import xarray as xr
    import zarr

    x = _signal()[:20_000].astype(np.float32)
    path = tmp_path / "s.zarr"
    _sharded(path, x, hole=(6000, 7000))
    y = x.copy()
    y[6000:7000] = 0.0  # what zarr reads there: the fill value
    routes = {
        "path": lambda **kw: kcpstream.segment(str(path), variable="v", **kw),
        "file URL": lambda **kw: kcpstream.segment(path.as_uri(), variable="v", **kw),
        "zarr array": lambda **kw: kcpstream.segment(zarr.open_group(str(path))["v"], **kw),
        "xarray": lambda **kw: kcpstream.segment(xr.open_zarr(path, chunks=None)["v"], **kw),
    }
    for route, call in routes.items():
        with pytest.raises(InputError, match=r"no chunk for samples \[6000, 7000\)") as info:
            call(n_bkps=1)
        assert "\n" not in str(info.value), route
        assert_same_segmentation(call(n_bkps=1, missing="fill"), kcpstream.segment(y, n_bkps=1))
    res = CliRunner().invoke(main, ["segment", str(path), "--variable", "v"])
    assert res.exit_code == 1 and "no chunk for samples [6000, 7000)" in res.output
    with pytest.raises(InputError, match=r"no chunk \(1,\) of shard c/1 "):  # dask-backed
        kcpstream.segment(xr.open_zarr(path, chunks={}, consolidated=False)["v"], n_bkps=1)


def test_a_sharded_store_without_holes_reads_as_the_samples(tmp_path):
    x = _signal()[:20_000].astype(np.float32)
    _sharded(tmp_path / "s.zarr", x)
    got = kcpstream.segment(str(tmp_path / "s.zarr"), variable="v", n_bkps=1)
    assert_same_segmentation(got, kcpstream.segment(x, n_bkps=1))


# -- a store changed while it is read --------------------------------------------


def _xarray_store(path, x: np.ndarray, chunk: int = CHUNK) -> None:
    xr = pytest.importorskip("xarray")
    xr.Dataset({"v": ("time", x)}).chunk(time=chunk).to_zarr(path, mode="w")


def _change_after_the_listing(monkeypatch, change) -> None:
    """Make ``change()`` happen right after the store is listed, before any read."""
    from kcpstream.inputs import provenance as pv

    listed = pv.open_origin

    def then_changed(*args, **kwargs):
        origin = listed(*args, **kwargs)
        change()
        return origin

    monkeypatch.setattr(pv, "open_origin", then_changed)


@pytest.mark.parametrize("how", ["delete", "same-bytes"])
@pytest.mark.parametrize("route", ["path", "xarray-dask", "xarray-lazy"])
def test_a_chunk_changed_after_the_listing_is_an_error_on_every_route(
    tmp_path, monkeypatch, how, route
):
    # an xarray object reads a removed chunk as fill values (NaN: a gap, once gaps
    # are skipped); the listing after the reads says the store changed under them
    xr = pytest.importorskip("xarray")
    path = tmp_path / "s.zarr"
    _xarray_store(path, _signal())
    chunk = path / "v" / "c" / "3"

    def change():
        if how == "delete":
            chunk.unlink()
        else:  # re-uploaded with the same bytes: a new version of the object
            raw = chunk.read_bytes()
            chunk.unlink()
            chunk.write_bytes(raw)

    data = {
        "path": str(path),
        "xarray-dask": xr.open_zarr(path)["v"],
        "xarray-lazy": xr.open_zarr(path, chunks=None)["v"],
    }[route]
    kw = {"variable": "v"} if route == "path" else {}
    _change_after_the_listing(monkeypatch, change)
    with pytest.raises(InputError, match=r"c/3.*(changed while it was read|removed after)"):
        kcpstream.segment(data, n_bkps=1, features="rff:16", **kw)


def test_samples_appended_after_the_listing_leave_the_rows_read_alone(tmp_path, monkeypatch):
    # a live archive: chunks written after the listing, beyond the rows read
    path = tmp_path / "s.zarr"
    x = _signal()
    z = zarr.create_array(store=str(path), shape=x.shape, chunks=(CHUNK,), dtype=x.dtype)
    z[:] = x

    def append():
        grown = zarr.open_array(str(path), mode="a")
        grown.resize((N + CHUNK,))
        grown[N:] = np.ones(CHUNK, np.float32)

    _change_after_the_listing(monkeypatch, append)
    res = kcpstream.segment(str(path), n_bkps=1, features="rff:16", seed=0)
    assert res.n_samples == N
    monkeypatch.undo()
    assert_same_segmentation(res, kcpstream.segment(x, n_bkps=1, features="rff:16", seed=0))


def _objects_of_whole_grid(stored):
    """Every stored object of the array, filtered to those the selection reads:
    what :func:`~kcpstream.inputs.provenance._objects` yields, walked the slow way."""
    from kcpstream.inputs.provenance import _grid, _selected_objects

    size, counts = _grid(stored.array)
    ax, allowed = stored.axis, _selected_objects(stored, size)
    first = 0 if ax is None else stored.rows[0] // stored.step
    last = None if ax is None else -(-stored.rows[1] // stored.step)
    for coords in np.ndindex(*counts):
        if ax is not None and not first <= coords[ax] < last:
            continue
        if allowed is None or all(coords[i] in ok for i, ok in allowed.items()):
            yield coords, stored.array.metadata.encode_chunk_key(coords)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_objects_a_selection_reads_are_those_of_the_whole_grid_it_selects(data):
    # a batch's series walk only their own objects (ten thousand series of one
    # object each walked every series' before), the same keys in the same order
    from kcpstream.inputs.provenance import StoredArray, _objects

    shape = tuple(data.draw(st.integers(1, 12)) for _ in range(3))
    chunks = tuple(data.draw(st.integers(1, s)) for s in shape)
    array = zarr.create_array(zarr.storage.MemoryStore(), shape=shape, chunks=chunks, dtype="f4")
    axis = data.draw(st.sampled_from([None, 0]))
    a = data.draw(st.integers(0, shape[0] - 1))
    rows = (a, data.draw(st.integers(a + 1, shape[0])))
    select = []
    for n in shape[1:]:
        kind = data.draw(st.sampled_from("sia"))
        if kind == "s":
            lo = data.draw(st.integers(0, n - 1))
            select.append(("s", lo, data.draw(st.integers(lo + 1, n))))
        elif kind == "i":
            select.append(("i", data.draw(st.integers(0, n - 1))))
        else:
            select.append(("a", data.draw(st.lists(st.integers(0, n - 1), min_size=1))))
    stored = StoredArray(array, axis, rows if axis is not None else (0, 0), tuple(select))
    assert list(_objects(stored)) == list(_objects_of_whole_grid(stored))
