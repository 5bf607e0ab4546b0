"""Object storage: zarr stores in S3, read from a real S3-compatible server.

The server is moto's, started on localhost for the session (an HTTP server
speaking the S3 protocol, not a patched client); s3fs reads it the way it
reads AWS.
"""

from __future__ import annotations

import json
import socket
import uuid

import numpy as np
import pytest
import s3fs
import xarray as xr
import zarr
from click.testing import CliRunner
from moto.server import ThreadedMotoServer

import kcpstream
from kcpstream.errors import InputError
from kcpstream.jobs.cli import main

from .helpers import assert_same_segmentation

N, CHUNK = 60_000, 5_000


@pytest.fixture(scope="session")
def s3_endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_endpoint):
    """A fresh bucket and the storage options that reach it."""
    opts = {"endpoint_url": s3_endpoint, "key": "testing", "secret": "testing"}
    name = f"kcp-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(**opts).mkdir(name)
    return name, opts


def _signal() -> np.ndarray:
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, N)
    x[20_000:35_000] *= 3
    return x.astype(np.float32)


def _put(url: str, opts: dict, x: np.ndarray) -> zarr.Array:
    z = zarr.create_array(
        store=url, shape=x.shape, chunks=(CHUNK,), dtype=x.dtype, storage_options=opts
    )
    z[:] = x
    return z


def test_a_store_in_s3_segments_like_the_same_samples_in_memory(bucket):
    name, opts = bucket
    x = _signal()
    url = f"s3://{name}/x.zarr"
    _put(url, opts, x)
    got = kcpstream.segment(url, storage_options=opts)
    assert_same_segmentation(got, kcpstream.segment(x))
    assert len(got.changepoints) == 2


def test_the_cli_takes_storage_options(bucket):
    name, opts = bucket
    x = _signal()
    url = f"s3://{name}/x.zarr"
    _put(url, opts, x)
    args = ["segment", url, "--json", "--n-bkps", "2"]
    for key, value in opts.items():
        args += ["--storage-option", f"{key}={value}"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    want = kcpstream.segment(x, n_bkps=2).changepoints.tolist()
    assert json.loads(res.output)["changepoints"] == want
    bad = CliRunner().invoke(main, ["segment", url, "--storage-option", "novalue"])
    assert bad.exit_code == 2 and "is not KEY=VALUE" in bad.output


def test_a_checkpoint_of_an_s3_store_follows_its_etags(bucket, tmp_path):
    name, opts = bucket
    url = f"s3://{name}/x.zarr"
    z = _put(url, opts, _signal())
    ck = tmp_path / "ck"
    assert kcpstream.segment(url, storage_options=opts, checkpoint=ck).diagnostics.checkpoint == (
        "written"
    )
    same = kcpstream.segment(url, storage_options=opts, checkpoint=ck, n_bkps=1)
    assert same.diagnostics.checkpoint == "loaded"
    z[45_000:50_000] = z[45_000:50_000] * 4  # one object rewritten: another ETag
    again = kcpstream.segment(url, storage_options=opts, checkpoint=ck)
    assert again.diagnostics.checkpoint == "written"
    assert_same_segmentation(again, kcpstream.segment(np.asarray(z[:])))
    # on the block grid, the statistics of the objects whose ETag held are kept
    kw = {"storage_options": opts, "checkpoint": ck, "block_size": 250}
    kcpstream.segment(url, **kw)
    z[10_000:15_000] = z[10_000:15_000] * 3
    updated = kcpstream.segment(url, **kw)
    assert updated.diagnostics.checkpoint == "updated" and updated.diagnostics.chunks_read == 1
    assert_same_segmentation(updated, kcpstream.segment(np.asarray(z[:]), block_size=250))


def test_an_append_to_an_s3_store_keeps_the_fit_and_reads_the_new_objects(bucket, tmp_path):
    # past 2**21 samples the fit's windows hold while the archive grows: their
    # objects' ETags did not change, so the fit is the checkpoint's (the period
    # check's last stretch ends 8192 samples past 2**21: the object holding it
    # is not the last, which the append rewrites)
    name, opts = bucket
    url = f"s3://{name}/long.zarr"
    rng = np.random.default_rng(2)
    n = 2**21 + 300_000
    x = rng.normal(size=n).astype(np.float32)
    x[900_000:] += 1.0
    z = zarr.create_array(store=url, shape=(n,), chunks=(2**17,), dtype=x.dtype,
                          storage_options=opts)  # fmt: skip
    z[:] = x
    ck = tmp_path / "ck"
    first = kcpstream.segment(url, storage_options=opts, checkpoint=ck)
    assert first.diagnostics.fit_chunks_read > 0
    z.resize((n + 30_000,))
    z[n:] = rng.normal(size=30_000).astype(np.float32) - 1.0
    grown = kcpstream.segment(url, storage_options=opts, checkpoint=ck)
    d = grown.diagnostics
    assert d.checkpoint == "updated" and d.fit_chunks_read == 0 and d.chunks_read == 1
    assert_same_segmentation(grown, kcpstream.segment(np.asarray(z[:])))


def test_an_append_by_another_writer_is_read_in_the_same_process(bucket, tmp_path):
    # s3fs keeps a listing per file system, and one per process: an append made
    # by another client after a first call was missing from that listing, and
    # the new objects were read as fill values (and so checkpointed)
    name, opts = bucket
    url = f"s3://{name}/x.zarr"
    x = _signal()
    _put(url, opts, x)
    ck = tmp_path / "ck"
    kcpstream.segment(url, storage_options=opts, n_bkps=2, checkpoint=ck)
    other = s3fs.S3FileSystem(skip_instance_cache=True, asynchronous=True, **opts)
    writer = zarr.open_array(zarr.storage.FsspecStore(other, path=f"{name}/x.zarr"), mode="r+")
    extra = np.random.default_rng(5).normal(0, 1, 20_000).astype(np.float32)
    writer.resize((N + 20_000,))
    writer[N:] = extra
    grown = np.concatenate([x, extra])
    for checkpoint in (ck, None):
        got = kcpstream.segment(url, storage_options=opts, n_bkps=2, checkpoint=checkpoint)
        assert_same_segmentation(got, kcpstream.segment(grown, n_bkps=2))


def test_an_object_missing_from_the_bucket_is_an_error(bucket):
    name, opts = bucket
    url = f"s3://{name}/x.zarr"
    _put(url, opts, _signal())
    s3fs.S3FileSystem(**opts).rm(f"{name}/x.zarr/c/3")
    with pytest.raises(InputError, match=r"no chunk for samples \[15000, 20000\)"):
        kcpstream.segment(url, storage_options=opts)


def test_unreachable_or_absent_stores_are_one_line_errors(bucket):
    name, opts = bucket
    _put(f"s3://{name}/x.zarr", opts, _signal())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens there once closed
    cases = [
        (f"s3://{name}/absent.zarr", opts),
        (f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/x.zarr", opts),
        (f"s3://{name}/x.zarr", {**opts, "endpoint_url": f"http://127.0.0.1:{closed}"}),
    ]
    for url, options in cases:
        with pytest.raises(InputError, match="cannot open") as info:
            kcpstream.segment(url, storage_options=options)
        assert "\n" not in str(info.value)


def test_storage_options_need_a_url(tmp_path):
    with pytest.raises(InputError, match="storage_options apply to URLs"):
        kcpstream.segment(str(tmp_path / "x.zarr"), storage_options={"anon": True})


def test_a_job_reads_its_input_from_s3(bucket, tmp_path):
    from kcpstream.jobs.pipeline import run_job

    name, opts = bucket
    rng = np.random.default_rng(0)
    data = rng.normal(size=(8_000, 2))
    data[4_000:] *= 3
    ds = xr.Dataset({"v": (("time", "sensor"), data)}, coords={"sensor": ["a", "b"]})
    ds.chunk({"time": 2_000}).to_zarr(f"s3://{name}/a.zarr", storage_options=opts)
    options = ", ".join(f'{k} = "{v}"' for k, v in opts.items())
    (tmp_path / "job.toml").write_text(
        f'[input]\nstore = "s3://{name}/a.zarr"\nvariables = ["v"]\nbatch_dims = ["sensor"]\n'
        f"storage_options = {{ {options} }}\n"
        '[selection]\nn_bkps = 1\n[output]\nstore = "out"\n'
    )
    report = run_job(tmp_path / "job.toml")
    assert report["done"] == 2 and report["failed"] == {}
    res = kcpstream.Segmentation.from_json((tmp_path / "out/series/sensor=a.json").read_text())
    assert abs(int(res.changepoints[0]) - 4_000) < 50
    assert run_job(tmp_path / "job.toml")["skipped"] == 2  # same ETags: nothing to redo


def test_the_cli_reports_an_unreachable_store_in_one_line():
    import subprocess
    import sys
    from pathlib import Path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    exe = Path(sys.executable).parent / "kcpstream"
    res = subprocess.run(
        [str(exe), "segment", "s3://kcp-absent/x.zarr",
         "--storage-option", f"endpoint_url=http://127.0.0.1:{closed}",
         "--storage-option", "key=k", "--storage-option", "secret=s"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 1
    assert res.stderr.startswith("Error: cannot open") and len(res.stderr.strip().splitlines()) == 1


def test_an_unreachable_store_leaves_no_traceback_behind():
    # the error is one line, and nothing follows it: zarr's open of a store it
    # could not reach left requests pending, whose clean-up at exit printed
    # "Exception ignored" tracebacks after it
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    code = (
        "import kcpstream\n"
        "try:\n"
        f"    kcpstream.segment('s3://kcp-absent/x.zarr', storage_options={{'endpoint_url': "
        f"'http://127.0.0.1:{closed}', 'key': 'k', 'secret': 's'}})\n"
        "except kcpstream.InputError as exc:\n"
        "    print(exc)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "cannot be reached" in res.stdout and len(res.stdout.strip().splitlines()) == 1
    assert "Traceback" not in res.stderr and "Exception ignored" not in res.stderr


class _FlakyProxy:
    """An HTTP proxy in front of the S3 server that answers 503 (Slow Down, as S3
    does under load) to the first request for each chunk object, and forwards
    everything else: transient server errors, on the wire."""

    def __init__(self, upstream: str, refuse: bool = False):
        """``refuse``: every chunk request is answered 403 (Access Denied), not
        only the first 503."""
        import http.client
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import urlsplit

        target = urlsplit(upstream)
        self.failed: list[str] = []
        seen: set[str] = set()
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0]
                with lock:
                    chunk = self.command == "GET" and "/c/" in path
                    fail = chunk and (refuse or path not in seen)
                    seen.add(path)
                if fail:
                    outer.failed.append(path)
                    code, status = ("AccessDenied", 403) if refuse else ("SlowDown", 503)
                    payload = f"<Error><Code>{code}</Code><Message>{code}</Message></Error>"
                    payload = payload.encode()
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
                conn.request(self.command, self.path, body=body, headers=dict(self.headers))
                reply = conn.getresponse()
                data = reply.read()
                self.send_response(reply.status)
                for key, value in reply.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_transient_server_errors_are_retried(bucket):
    name, opts = bucket
    x = _signal()
    url = f"s3://{name}/x.zarr"
    _put(url, opts, x)
    proxy = _FlakyProxy(opts["endpoint_url"])
    try:
        got = kcpstream.segment(url, storage_options={**opts, "endpoint_url": proxy.url})
    finally:
        proxy.close()
    assert len(proxy.failed) >= N // CHUNK  # every chunk object failed once
    assert_same_segmentation(got, kcpstream.segment(x))


def test_refused_chunk_reads_are_an_access_error_not_damage(bucket):
    # an expired token or a policy on the chunks' prefix: the listing and the
    # metadata read, the chunks refused; nothing to restore in the store
    name, opts = bucket
    url = f"s3://{name}/x.zarr"
    _put(url, opts, _signal())
    proxy = _FlakyProxy(opts["endpoint_url"], refuse=True)
    try:
        with pytest.raises(InputError, match="PermissionError.*check access to the store") as got:
            kcpstream.segment(url, storage_options={**opts, "endpoint_url": proxy.url})
    finally:
        proxy.close()
    assert "damaged" not in str(got.value) and len(str(got.value).splitlines()) == 1


# -- bounded waits ------------------------------------------------------------


@pytest.fixture
def silent_endpoint():
    """An endpoint that accepts connections and never answers."""
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()
    for conn in held:
        conn.close()


@pytest.fixture
def slow_endpoint(s3_endpoint):
    """The S3 server behind a proxy that holds every response for 0.3 s."""
    import threading
    import time
    from urllib.parse import urlparse

    target = urlparse(s3_endpoint)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)

    def pump(src, dst, delay: float) -> None:
        try:
            while data := src.recv(1 << 16):
                if delay:
                    time.sleep(delay)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def accept() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection((target.hostname, target.port))
            threading.Thread(target=pump, args=(client, upstream, 0.0), daemon=True).start()
            threading.Thread(target=pump, args=(upstream, client, 0.3), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_object_stores_get_bounded_waits_the_caller_can_change():
    from kcpstream.inputs.stores import CONNECT_TIMEOUT, READ_TIMEOUT, bounded

    got = bounded("s3://b/x.zarr", {"anon": True})
    assert got["anon"] is True
    assert got["config_kwargs"] == {
        "connect_timeout": CONNECT_TIMEOUT,
        "read_timeout": READ_TIMEOUT,
        "retries": {"max_attempts": 1},
    }
    assert CONNECT_TIMEOUT + READ_TIMEOUT <= 60  # a silent endpoint fails within a minute
    mine = bounded("s3://b/x.zarr", {"config_kwargs": {"read_timeout": 300}})
    assert mine["config_kwargs"]["read_timeout"] == 300
    assert mine["config_kwargs"]["connect_timeout"] == CONNECT_TIMEOUT
    assert bounded("gs://b/x.zarr", {"token": "anon"}) == {"token": "anon"}


def test_an_endpoint_that_never_answers_is_one_line_within_its_timeouts(silent_endpoint):
    opts = {
        "endpoint_url": silent_endpoint, "key": "k", "secret": "s",
        "config_kwargs": {"connect_timeout": 1, "read_timeout": 1},
    }  # fmt: skip
    with pytest.raises(InputError, match="did not answer within 2 s") as info:
        kcpstream.segment("s3://bucket/x.zarr", storage_options=opts)
    assert silent_endpoint in str(info.value) and "\n" not in str(info.value)
    args = ["segment", "s3://bucket/x.zarr", "--storage-option",
            "config_kwargs=" + json.dumps(opts["config_kwargs"])]  # fmt: skip
    for key in ("endpoint_url", "key", "secret"):
        args += ["--storage-option", f"{key}={opts[key]}"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and "did not answer within 2 s" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_a_slow_store_that_answers_is_not_cut_off(bucket, slow_endpoint):
    name, opts = bucket
    x = _signal()[:20_000]
    x[10_000:] *= 3
    url = f"s3://{name}/slow.zarr"
    _put(url, opts, x)
    slow = {**opts, "endpoint_url": slow_endpoint, "config_kwargs": {"read_timeout": 2}}
    got = kcpstream.segment(url, storage_options=slow, n_bkps=1)
    assert_same_segmentation(got, kcpstream.segment(x, n_bkps=1))
