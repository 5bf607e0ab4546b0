"""Scheduled jobs: a TOML job file segments every series of an archive.

A job (see ``pipelines/README.md`` for the format and ``pipelines/*.toml``
for examples) names the input store, the series (``batch_dims``), the
feature map, the selection rule, the output directory and the cluster.
:func:`run_job` is idempotent and resumable:

* each series' result is written to its own JSON file atomically
  (temporary name, then rename), so a file is either complete or absent;
* a series whose result exists, computed with the same parameters, is
  skipped (its file is not touched);
* a run that dies halfway leaves the finished series in place, and the next
  run does the rest; output written with *other* parameters is refused
  rather than mixed with new results;
* ``manifest.json`` records the input (store, variables, shape), the
  parameters, the kcpstream version and the state of every series.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import tomllib
from typing import Any

from ._io import write_atomic

__all__ = ["JobError", "load_job", "run_job"]

#: Series segmented together (one data-pass graph) before their results are written.
DEFAULT_GROUP = 8


class JobError(ValueError):
    """The job file or its output directory cannot be used as they are."""


_SECTIONS = {
    "input": {"store", "variable", "variables", "dim", "batch_dims", "missing"},
    "features": {"map", "n_features", "seed", "bandwidth", "kernel", "window", "n_bins"},
    "selection": {"method", "n_bkps", "pen", "alpha", "min_size", "d_max"},
    "output": {"store", "checkpoint", "group_size"},
    "cluster": {"scheduler", "slurm"},
}


def load_job(path: str | os.PathLike) -> dict[str, Any]:
    """Read and check a job file; relative paths are resolved against its folder."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            job = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise JobError(f"{path} is not valid TOML: {exc}") from None
    for section, keys in job.items():
        if section not in _SECTIONS:
            raise JobError(
                f"{path}: unknown section [{section}]; sections are {', '.join(_SECTIONS)}"
            )
        unknown = set(keys) - _SECTIONS[section]
        if unknown:
            raise JobError(
                f"{path}: unknown key {sorted(unknown)[0]!r} in [{section}]; "
                f"known keys: {', '.join(sorted(_SECTIONS[section]))}"
            )
    for required in (("input", "store"), ("output", "store")):
        if required[1] not in job.get(required[0], {}):
            raise JobError(f"{path}: [{required[0]}] needs {required[1]} = ...")
    base = os.path.dirname(os.path.abspath(path))
    for section, key in (("input", "store"), ("output", "store"), ("output", "checkpoint")):
        value = job.get(section, {}).get(key)
        if value is not None and "://" not in value and not os.path.isabs(value):
            job[section][key] = os.path.join(base, value)
    return job


def _segment_kwargs(job: dict[str, Any]) -> dict[str, Any]:
    from .features import get_feature_map_class

    feats = dict(job.get("features", {}))
    name = feats.pop("map", "rff")
    try:
        fmap = get_feature_map_class(name)(**feats)
    except TypeError as exc:
        raise JobError(f"[features]: {exc}") from None
    sel = dict(job.get("selection", {}))
    out = job.get("output", {})
    kwargs = {"features": fmap, **sel}
    if "missing" in job.get("input", {}):
        kwargs["missing"] = job["input"]["missing"]
    if out.get("checkpoint"):
        kwargs["checkpoint"] = out["checkpoint"]
    return kwargs


def _params_hash(job: dict[str, Any]) -> str:
    keep = {k: job.get(k, {}) for k in ("input", "features", "selection")}
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _series_name(labels: dict[str, Any]) -> str:
    if not labels:
        return "series"
    return "__".join(f"{k}={v}" for k, v in labels.items()).replace(os.sep, "_")


def _open_input(job: dict[str, Any]):
    import xarray as xr

    inp = job["input"]
    store = inp["store"]
    if "://" not in store and not os.path.exists(store):
        raise JobError(f"[input] store {store!r} does not exist")
    try:
        ds = xr.open_zarr(store, consolidated=None)
    except Exception as exc:
        raise JobError(f"[input] cannot open {store!r} as an xarray zarr store: {exc}") from None
    names = inp.get("variables") or ([inp["variable"]] if "variable" in inp else None)
    if names:
        missing = [v for v in names if v not in ds.data_vars]
        if missing:
            raise JobError(
                f"[input] the store has no variable {missing[0]!r}; "
                f"its variables are {', '.join(map(str, ds.data_vars))}"
            )
        ds = ds[names]
    return ds


def run_job(path: str | os.PathLike, scheduler: str | None = None) -> dict[str, Any]:
    """Run a job file; returns a report (series done, skipped, failed, output folder)."""
    from .labeled import split_batches

    job = load_job(path)
    inp, out = job["input"], job["output"]
    ds = _open_input(job)
    batch_dims = list(inp.get("batch_dims", []))
    series = split_batches(ds, batch_dims) if batch_dims else [({}, ds)]
    params = _params_hash(job)
    folder = out["store"]
    os.makedirs(os.path.join(folder, "series"), exist_ok=True)
    manifest_path = os.path.join(folder, "manifest.json")
    from . import __version__

    identity = {"store": inp["store"], "variables": list(ds.data_vars), "sizes": dict(ds.sizes)}
    if os.path.exists(manifest_path):
        with open(manifest_path) as fh:
            previous = json.load(fh)
        if previous.get("params_hash") != params or previous.get("input") != identity:
            raise JobError(
                f"{folder} holds results of another job or input (parameters or input changed); "
                "use another [output] store, or delete that folder to start over"
            )
    manifest = {
        "kcpstream": __version__,
        "job": os.path.abspath(os.fspath(path)),
        "input": identity,
        "params": {k: job.get(k, {}) for k in ("input", "features", "selection")},
        "params_hash": params,
        "series": {},
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    todo, skipped = [], []
    for position, (labels, sub) in enumerate(series):
        name = _series_name(labels)
        target = os.path.join(folder, "series", f"{name}.json")
        if os.path.exists(target):
            skipped.append(name)
            manifest["series"][name] = "done"
        else:
            todo.append((name, position, sub, target))
    write_atomic(manifest_path, json.dumps(manifest, indent=2, default=str))

    kwargs = _segment_kwargs(job)
    group = int(out.get("group_size", DEFAULT_GROUP))
    failed: dict[str, str] = {}
    done = 0
    cluster = job.get("cluster", {})
    spec = scheduler or cluster.get("scheduler", "threads")
    with _cluster(spec, cluster.get("slurm")):
        for start in range(0, len(todo), group):
            chunk = todo[start : start + group]
            failed.update(_run_group(chunk, ds, inp, kwargs, batch_dims))
            for name, *_ in chunk:
                manifest["series"][name] = "failed" if name in failed else "done"
                done += name not in failed
            manifest["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            write_atomic(manifest_path, json.dumps(manifest, indent=2, default=str))
    return {
        "output": folder,
        "done": done,
        "skipped": len(skipped),
        "failed": failed,
        "series": len(series),
    }


def _run_group(chunk, ds, inp, kwargs, batch_dims) -> dict[str, str]:
    """Segment a group of series; write each result. Returns the failures by series.

    With one batch dimension the group is segmented in one batched call (one
    data-pass graph); if that fails, or with several batch dimensions, the
    series are segmented one by one so that a bad series fails alone.
    """
    from . import segment
    from .signal import InputError

    dim = inp.get("dim")
    results = None
    if len(batch_dims) == 1 and len(chunk) > 1:
        b = batch_dims[0]
        try:
            batch = segment(
                ds.isel({b: [item[1] for item in chunk]}), dim=dim, batch_dims=[b], **kwargs
            )
            results = list(batch.results)
        except (InputError, ValueError):
            results = None
    failures: dict[str, str] = {}
    if results is None:
        results = []
        for name, _, sub, _ in chunk:
            try:
                results.append(segment(sub, dim=dim, **kwargs))
            except (InputError, ValueError) as exc:
                failures[name] = str(exc).strip().splitlines()[0]
                results.append(None)
    for (_, _, _, target), res in zip(chunk, results, strict=True):
        if res is not None:
            write_atomic(target, res.to_json())
    return failures


def _cluster(spec: str, slurm: dict[str, Any] | None):
    """The scheduler context of a job: threads/processes/local/address, or SLURM."""
    from .cli import scheduler_context

    if spec != "slurm":
        return scheduler_context(spec)
    try:
        from dask_jobqueue import SLURMCluster
    except ImportError:
        raise JobError(
            "[cluster] scheduler = 'slurm' needs dask-jobqueue: pip install dask-jobqueue"
        ) from None
    import contextlib

    from distributed import Client

    @contextlib.contextmanager
    def ctx():
        opts = dict(slurm or {})
        jobs = int(opts.pop("jobs", 1))
        with SLURMCluster(**opts) as cluster, Client(cluster):
            cluster.scale(jobs=jobs)
            yield

    return ctx()
