"""Warm start: kcpstream's kernels compiled once, loaded from numba's cache after,
by this process's next calls, a fresh process's and a cluster's workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kcpstream.jobs.cli import main


def _python(code: str, cache: Path) -> str:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, timeout=600, capture_output=True,
        text=True,
    )  # fmt: skip
    return out.stdout


def _cached(cache: Path) -> set[str]:
    return {str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory) -> Path:
    """A numba cache that ``warm_up`` filled, from nothing."""
    cache = tmp_path_factory.mktemp("numba-cache")
    out = _python("import kcpstream; print(kcpstream.warm_up().compiled)", cache)
    assert int(out) > 0  # a fresh cache: the kernels were compiled
    return cache


def test_a_warm_cache_compiles_nothing_again(warm_cache):
    # a fresh process: warm_up again, then the calls of a first session, each
    # kind of input once; numba's compile event fires on compilations only
    code = """
import numpy as np
import zarr, tempfile, os
from numba.core import event
import kcpstream

print(kcpstream.warm_up().compiled)
rec = []
class Count(event.Listener):
    def on_start(self, ev): rec.append(ev.data["dispatcher"].py_func.__name__)
    def on_end(self, ev): pass
rng = np.random.default_rng(1)
with event.install_listener("numba:compile", Count()):
    x = rng.normal(size=10_000)
    x[5_000:] += 2
    kcpstream.segment(x)
    kcpstream.segment(x.astype(np.float32), n_bkps=1)
    path = os.path.join(tempfile.mkdtemp(), "a.zarr")
    z = zarr.create_array(path, shape=(1_000_000,), chunks=(2**17,), dtype="f4")
    z[:] = np.r_[rng.normal(size=500_000), 2 * rng.normal(size=500_000)].astype("f4")
    kcpstream.segment(path)
print(len(rec), rec)
"""
    lines = _python(code, warm_cache).splitlines()
    assert lines[0] == "0"
    assert lines[1] == "0 []"


def test_a_clusters_workers_load_the_kernels_from_the_cache(warm_cache):
    # the workers of a LocalCluster share the cache: a segmentation run on them
    # adds no compiled function to it
    before = _cached(warm_cache)
    code = """
import numpy as np
from distributed import Client, LocalCluster
import kcpstream

rng = np.random.default_rng(2)
x = np.r_[rng.normal(size=300_000), 2 + rng.normal(size=300_000)]
with LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster, \\
        Client(cluster):
    print(kcpstream.segment(x).n_changepoints)
"""
    assert _python(code, warm_cache).split() == ["1"]
    assert _cached(warm_cache) == before


def test_the_warmup_command_reports_what_it_did():
    res = CliRunner().invoke(main, ["warmup", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["compiled"] >= 0 and out["seconds"] > 0
    res = CliRunner().invoke(main, ["warmup"])
    assert res.exit_code == 0 and res.output.startswith("kernels: ")
