"""Scheduled jobs: a TOML job file segments every series of an archive.

A job (see ``pipelines/README.md`` for the format and ``pipelines/*.toml``
for examples) names the input store, the series (``batch_dims``), the
feature map, the selection rule, the output directory and the cluster.
:func:`run_job` is idempotent and resumable, and never loses a result:

* each series' result is written to its own JSON file atomically
  (temporary name, flushed to disk, then renamed), so a file is either
  complete or absent; its name is the series' labels made safe for any file
  system, with a short hash when they had to be changed, and two series
  that would share a name are refused before anything runs;
* a series whose result exists, computed with the same parameters from the
  same input, and whose file still has the checksum the manifest recorded,
  is skipped (its file is not touched);
* when the input changed since the last run (a chunk rewritten, data
  appended: the identity of :mod:`kcpstream.inputs.provenance`), every series is
  segmented again and its file replaced; output written with *other*
  parameters is refused rather than mixed with new results;
* a series that fails, whatever the error, fails alone: the others are
  written, the failure is reported and the next run tries it again; its
  last result is not lost but kept apart, as the result of the earlier
  input, in ``series/previous/`` (the manifest's entry names it), until a
  run succeeds;
* one run at a time writes an output folder (an advisory lock);
* ``manifest.json`` records the input, its identity, the parameters, the
  kcpstream version and the state of every series.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import re
import time
from typing import Any

import numpy as np
import pandas as pd

from kcpstream.errors import JobError, KcpError, one_line
from kcpstream.jobs.jobfile import load_job
from kcpstream.jobs.scheduling import START_TIMEOUT, check_scheduler, scheduler_context
from kcpstream.persist.checkpoint import check_writable
from kcpstream.persist.files import write_atomic

__all__ = ["run_job"]

#: Series segmented together (one data-pass graph) before their results are written.
DEFAULT_GROUP = 8

#: A line per group written, on the ``kcpstream.pipeline`` logger (``kcpstream
#: run`` shows them on stderr): a long job says how far it got.
_LOG = logging.getLogger("kcpstream.pipeline")  # the name the docs give, not the module path


def _segment_kwargs(job: dict[str, Any]) -> dict[str, Any]:
    from kcpstream.features import get_feature_map_class

    feats = dict(job.get("features", {}))
    name = feats.pop("map", "auto" if not feats else "rff")
    fmap: Any = "auto"  # the library's default for the series' channels
    if name != "auto" or feats:
        try:
            cls = get_feature_map_class(name)
        except (TypeError, ValueError) as exc:
            raise JobError(f"[features]: {one_line(exc)}") from None
        known = list(getattr(cls, "_param_names", ()) or ())
        unknown = [k for k in feats if known and k not in known]
        if unknown:
            raise JobError(
                f"[features] map = {name!r} takes no {unknown[0]!r}; its parameters are "
                f"{', '.join(known)}"
            )
        try:
            fmap = cls(**feats)
        except (TypeError, ValueError) as exc:
            raise JobError(f"[features]: {one_line(exc)}") from None
    sel = dict(job.get("selection", {}))
    out = job.get("output", {})
    kwargs = {"features": fmap, **sel}
    for key in ("missing", "skipna"):
        if key in job.get("input", {}):
            kwargs[key] = job["input"][key]
    if out.get("checkpoint"):
        kwargs["checkpoint"] = out["checkpoint"]
    return kwargs


def _params_hash(job: dict[str, Any]) -> str:
    keep = {k: job.get(k, {}) for k in ("input", "features", "selection")}
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:16]


#: Longest readable part of a result file's name (a hash is added when cut).
MAX_NAME = 96

_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")


def _series_name(labels: dict[str, Any]) -> str:
    """A file name for a series: its labels as ``dim=value`` joined by ``__``,
    with a short hash of the labels appended when a character had to be
    replaced or the name cut, so different labels never share a file."""
    if not labels:
        return "series"
    plain = "__".join(f"{k}={v}" for k, v in labels.items())
    safe = _UNSAFE.sub("_", plain)
    if safe.startswith("."):
        safe = "_" + safe[1:]
    if safe == plain and len(plain) <= MAX_NAME:
        return plain
    digest = hashlib.sha256(plain.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{safe[:MAX_NAME]}~{digest}"


def _label_text(value: Any) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return str(value)


def _names(series: list[tuple[dict[str, Any], Any]]) -> list[str]:
    """One file name per series; two series with one name are an error."""
    names, seen = [], {}
    for position, (labels, _) in enumerate(series):
        name = _series_name({k: _label_text(v) for k, v in labels.items()})
        if name in seen:
            raise JobError(
                f"[input] series {seen[name]} and {position} have the same labels "
                f"({name}); give every series a unique label along the batch dimensions"
            )
        seen[name] = position
        names.append(name)
    return names


def _input_identity(job: dict[str, Any], ds) -> str | None:
    """An identity of what the job reads: the data variables and the
    coordinates (time stamps make ``min_duration`` and the result's times,
    labels name the series), their metadata and every stored chunk's version
    (a coordinate held in memory: a hash of its values); None when the store
    keeps no versions."""
    from kcpstream.inputs.provenance import (
        chunk_versions,
        content_identity,
        stored_array,
        zarr_identity,
    )

    h = hashlib.sha256()
    for name in sorted(map(str, ds.variables)):
        var = ds[name]
        stored = stored_array(var)
        if stored is None:
            from kcpstream.inputs.provenance import graph_sources

            data = var.variable._data  # .data would load a lazily opened variable
            if name in ds.coords and not hasattr(data, "dask"):
                values = getattr(data, "array", data)  # (xarray's index adapter)
                if isinstance(values, np.ndarray | pd.Index):
                    h.update(f"{name}:{content_identity(np.asarray(values))}\n".encode())
                    continue
            found = graph_sources(data) if hasattr(data, "dask") else ([], [])
            if len(found[0]) != 1:
                return None
            stored = found[0][0]
        ident = zarr_identity(stored, chunk_versions(stored.array)[1])
        if ident is None:
            return None
        h.update(f"{name}:{ident}\n".encode())
    return h.hexdigest()


def _file_sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


@contextlib.contextmanager
def _lock(folder: str):
    """Hold the output folder's advisory lock for the run, or refuse."""
    import fcntl

    try:
        fh = open(os.path.join(folder, ".lock"), "a+")  # noqa: SIM115 - held for the run
    except OSError as exc:
        raise JobError(f"[output] cannot write in {folder}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise JobError(
                f"another run of a job is writing {folder}; wait for it to finish "
                "(one run at a time writes an output folder)"
            ) from None
        yield
    finally:
        fh.close()


def _open_input(job: dict[str, Any]):
    from kcpstream.errors import InputError
    from kcpstream.inputs.stores import open_dataset

    inp = job["input"]
    names = inp.get("variables") or ([inp["variable"]] if "variable" in inp else None)
    try:
        return open_dataset(inp["store"], names, inp.get("storage_options"))
    except InputError as exc:
        raise JobError(f"[input] {exc}") from None


def run_job(
    path: str | os.PathLike, scheduler: str | None = None, dry_run: bool = False
) -> dict[str, Any]:
    """Run a job file; returns a report (series done, skipped, failed, output folder).

    With ``dry_run`` nothing is computed or written: the report is the plan
    (resolved paths, scheduler, the series that would run and be skipped)."""
    from kcpstream.inputs.labeled import split_batches

    job = load_job(path)
    inp, out = job["input"], job["output"]
    _check_outside_input(inp["store"], out)
    kwargs = _segment_kwargs(job)  # the feature map's parameters, checked before any work
    ds = _open_input(job)
    _check_selection(job, ds)
    batch_dims = list(inp.get("batch_dims", []))
    series = split_batches(ds, batch_dims) if batch_dims else [({}, ds)]
    names = _names(series)
    params = _params_hash(job)
    folder = out["store"]
    # what would fail every series is one error before anything is written
    check_scheduler(scheduler or job.get("cluster", {}).get("scheduler"), also=("slurm",))
    if dry_run:
        return _plan(job, path, ds, series, names, params, scheduler)
    if out.get("checkpoint"):
        check_writable(out["checkpoint"])
    try:
        os.makedirs(os.path.join(folder, "series"), exist_ok=True)
    except OSError as exc:
        raise JobError(f"[output] cannot create {folder}: {exc.strerror}") from None
    with _lock(folder):
        return _run_locked(
            job,
            path,
            ds,
            series,
            names=names,
            params=params,
            scheduler=scheduler,
            batch_dims=batch_dims,
            kwargs=kwargs,
        )


def _check_selection(job: dict[str, Any], ds) -> None:
    """What would fail every series, as one error before anything is written:
    a time dimension the input lacks, a ``min_duration`` that is no duration
    (or a number of no unit on time stamps)."""
    from kcpstream.engine.plan import unitless

    dim = job["input"].get("dim")
    if dim is not None and dim not in ds.dims:
        raise JobError(
            f"[input] dim = {dim!r} is not a dimension of the input; its dimensions are "
            f"{', '.join(map(str, ds.dims))}"
        )
    duration = job.get("selection", {}).get("min_duration")
    if duration is None:
        return
    time_dim = dim or ("time" if "time" in ds.dims else None)
    stamps = time_dim in ds.coords and ds[time_dim].dtype.kind in "mM"
    if isinstance(duration, str):
        try:
            wanted = None if unitless(duration) else pd.Timedelta(duration)
        except ValueError:
            wanted = None
        if wanted is None or pd.isna(wanted) or wanted <= pd.Timedelta(0):
            raise JobError(
                f"[selection] min_duration = {duration!r} is not a positive duration; give "
                "one like '10min'"
            )
    elif stamps:
        raise JobError(
            f"[selection] min_duration = {duration!r} has no unit, and the {time_dim!r} "
            "coordinate holds time stamps; give a duration such as '60s' or '10min'"
        )


def _check_outside_input(store: str, out: dict[str, Any]) -> None:
    """Outputs written inside the input store would change the input (and its
    identity) on every run, and mix kcpstream's files into the archive."""
    if "://" in store:
        return
    root = os.path.realpath(store)
    for key in ("store", "checkpoint"):
        where = out.get(key)
        if not where or "://" in str(where):
            continue
        real = os.path.realpath(where)
        if real == root or real.startswith(root + os.sep):
            raise JobError(
                f"[output] {key} = {where!r} lies inside the input store {store!r}; "
                "write the outputs to a folder outside it"
            )


def _previous(job, ds, params) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """The series of the last run that still hold (same parameters and input),
    what the manifest records as the input, and its identity."""
    inp, out = job["input"], job["output"]
    folder = out["store"]
    manifest_path = os.path.join(folder, "manifest.json")
    where = {"store": inp["store"], "variables": sorted(map(str, ds.data_vars))}
    identity = _input_identity(job, ds)
    previous = _read_manifest(manifest_path)
    if previous:
        held = [v for v in previous.get("series", {}).values() if _status(v) == "done"]
        if held and (previous.get("params_hash") != params or previous.get("input") != where):
            raise JobError(
                f"{folder} holds results of another job or input (parameters or input changed); "
                "use another [output] store, or delete that folder to start over"
            )
    # results of the same input only: when it changed (or cannot be told), all are redone
    same_input = identity is not None and previous.get("input_identity") == identity
    return (previous.get("series", {}) if same_input else {}), where, identity


#: Where a series' last result is kept while its new run has not succeeded.
PREVIOUS = "previous"


def _read_manifest(path: str) -> dict[str, Any]:
    """The manifest at ``path``; ``{}`` when there is none or it is damaged
    (nothing in it is trusted: everything is redone)."""
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as fh:
            previous = json.load(fh)
    except (OSError, ValueError):
        return {}
    if not isinstance(previous, dict) or not isinstance(previous.get("series", {}), dict):
        return {}  # valid JSON of another shape: damaged too
    return previous


def _keep_earlier(
    folder: str, names: list[str], last: dict[str, Any], manifest: dict[str, Any]
) -> dict[str, dict]:
    """Set apart the last result of each series about to be segmented again,
    so that a failure does not lose it: a file the last manifest recorded as
    done (its checksum unchanged) moves to ``series/previous/``; one kept
    there by an earlier failure stays; other kept files go.  The manifest
    records them (series ``pending``) before any moves, so a run killed
    meanwhile loses none.  Returns, per series, the kept file (relative to
    ``folder``) and its checksum."""
    keep_dir = os.path.join(folder, "series", PREVIOUS)
    kept: dict[str, dict] = {}
    moves = []
    for name in names:
        entry = last.get(name)
        current = os.path.join(folder, "series", f"{name}.json")
        earlier = os.path.join(keep_dir, f"{name}.json")
        if _holds(entry, current):
            moves.append((current, earlier))
            kept[name] = {"file": os.path.relpath(earlier, folder), "sha256": entry["sha256"]}
        elif isinstance(entry, dict) and isinstance(entry.get("previous"), dict):
            if entry["previous"].get("sha256") == _file_sha256(earlier):
                kept[name] = entry["previous"]
    for name, info in kept.items():
        manifest["series"][name] = {"status": "pending", "previous": info}
    _write_manifest(os.path.join(folder, "manifest.json"), manifest)
    for current, earlier in moves:
        os.makedirs(keep_dir, exist_ok=True)
        os.replace(current, earlier)
    if os.path.isdir(keep_dir):
        for e in os.scandir(keep_dir):
            if e.name.endswith(".json") and e.name[: -len(".json")] not in kept:
                os.remove(e.path)
    return kept


def _holds(entry: Any, target: str) -> bool:
    """Whether a series' result file is the one the manifest recorded."""
    return _status(entry) == "done" and entry.get("sha256") == _file_sha256(target)


def _plan(job, path, ds, series, names, params, scheduler) -> dict[str, Any]:
    before, where, identity = _previous(job, ds, params)
    folder = job["output"]["store"]
    todo, skip = [], []
    for name in names:
        target = os.path.join(folder, "series", f"{name}.json")
        (skip if _holds(before.get(name), target) else todo).append(name)
    cluster = job.get("cluster", {})
    return {
        "dry_run": True,
        "job": os.path.abspath(os.fspath(path)),
        "input": where,
        "input_identity": identity,
        "output": folder,
        "checkpoint": job["output"].get("checkpoint"),
        "scheduler": scheduler or cluster.get("scheduler", "threads"),
        "series": len(series),
        "would_run": todo,
        "would_skip": skip,
    }


def _run_locked(
    job, path, ds, series, *, names, params, scheduler, batch_dims, kwargs
) -> dict[str, Any]:
    from kcpstream import __version__

    folder = job["output"]["store"]
    manifest_path = os.path.join(folder, "manifest.json")
    before, where, identity = _previous(job, ds, params)
    last = _read_manifest(manifest_path).get("series", {})
    manifest = {
        "kcpstream": __version__,
        "job": os.path.abspath(os.fspath(path)),
        "input": where,
        "input_identity": identity,
        "params": {k: job.get(k, {}) for k in ("input", "features", "selection")},
        "params_hash": params,
        "series": {},
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    todo, skipped = [], []
    for position, ((labels, sub), name) in enumerate(zip(series, names, strict=True)):
        target = os.path.join(folder, "series", f"{name}.json")
        entry = before.get(name)
        if _holds(entry, target):
            skipped.append(name)
            manifest["series"][name] = entry
        else:
            todo.append((name, position, sub, target, labels))
    inp, out = job["input"], job["output"]
    group = out.get("group_size", DEFAULT_GROUP)
    failed: dict[str, str] = {}
    done = 0
    cluster = job.get("cluster", {})
    spec = scheduler or cluster.get("scheduler", "threads")
    _LOG.info("%d series to segment, %d up to date", len(todo), len(skipped))
    t0 = time.perf_counter()
    # the scheduler first: one that cannot start leaves the outputs as they were
    with _cluster(spec, cluster.get("slurm"), cluster.get("timeout")):
        kept = _keep_earlier(folder, [t[0] for t in todo], last, manifest)
        # what the manifest no longer lists as done goes: a series that failed, was
        # removed from the input, or is segmented again leaves no file of another
        # input behind, even if this run is killed, and the table is written anew
        _remove_stale(folder, {f"{name}.json" for name in skipped})
        for start in range(0, len(todo), group):
            chunk = todo[start : start + group]
            failures, digests = _run_group(chunk, ds, inp, kwargs, batch_dims)
            failed.update(failures)
            for name, _, _, _, labels in chunk:
                entry = {"labels": {k: _label_text(v) for k, v in labels.items()}}
                if name in failures:
                    entry.update(status="failed", error=failures[name])
                    if name in kept:  # the result of the earlier input, kept apart
                        entry["previous"] = kept[name]
                else:
                    entry.update(status="done", sha256=digests[name])
                    done += 1
                    _drop_earlier(folder, name)
                manifest["series"][name] = entry
            manifest["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            _write_manifest(manifest_path, manifest)
            _LOG.info(
                "%d/%d series segmented (%d failed), %.1f s",
                start + len(chunk),
                len(todo),
                len(failed),
                time.perf_counter() - t0,
            )
    _write_table(folder, manifest)
    return {
        "output": folder,
        "done": done,
        "skipped": len(skipped),
        "failed": failed,
        "series": len(series),
    }


def _drop_earlier(folder: str, name: str) -> None:
    """Remove a series' result kept apart, once it has a new one."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(folder, "series", PREVIOUS, f"{name}.json"))


def _remove_stale(folder: str, keep: set[str]) -> None:
    """Remove the series files not in ``keep``, and the table of all series."""
    table = os.path.join(folder, "segments.csv")
    stale = [
        e.path
        for e in os.scandir(os.path.join(folder, "series"))
        if e.name.endswith(".json") and e.name not in keep
    ]
    for path in [*stale, table]:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise JobError(f"[output] cannot remove {path}: {exc.strerror or exc}") from None


def _write_table(folder: str, manifest: dict[str, Any]) -> None:
    """``segments.csv``: every finished series' segment table, with a column
    per label, in one file (rewritten atomically after each run)."""
    import pandas as pd

    from kcpstream.result import Segmentation

    frames = []
    for name, entry in manifest["series"].items():
        if _status(entry) != "done":
            continue
        with open(os.path.join(folder, "series", f"{name}.json")) as fh:
            table = Segmentation.from_json(fh.read()).to_dataframe().reset_index()
        for key, value in reversed(list(entry.get("labels", {}).items())):
            table.insert(0, key, value)
        frames.append(table)
    if frames:  # (none finished: no table, rather than one of an earlier run)
        table = pd.concat(frames, ignore_index=True)
        for col in table.columns:  # ISO 8601 with the time of day, also at midnight
            if pd.api.types.is_datetime64_dtype(table[col]):
                values = table[col].to_numpy()
                whole = (values.astype("datetime64[s]") == values) | np.isnat(values)
                table[col] = np.datetime_as_string(values, unit="s" if whole.all() else "ns")
        text = table.to_csv(index=False)
        _write_output(os.path.join(folder, "segments.csv"), text)


def _status(entry: Any) -> str | None:
    return entry.get("status") if isinstance(entry, dict) else None


def _write_manifest(path: str, manifest: dict[str, Any]) -> None:
    _write_output(path, json.dumps(manifest, indent=2, default=str))


def _write_output(path: str, text: str) -> None:
    """Write a file of the output folder atomically; a failure is one line."""
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise JobError(
            f"[output] cannot write {path}: {exc.strerror or exc}; free space or fix the folder"
        ) from None


def _run_group(chunk, ds, inp, kwargs, batch_dims) -> tuple[dict[str, str], dict[str, str]]:
    """Segment a group of series; write each result. Returns the failures by
    series (one line each) and the SHA-256 of every result file written.

    With one batch dimension the group is segmented in one batched call (one
    data-pass graph); if that fails, or with several batch dimensions, the
    series are segmented one by one so that a bad series fails alone,
    whatever its error.
    """
    from kcpstream import segment

    dim = inp.get("dim")
    results = None
    if len(batch_dims) == 1 and len(chunk) > 1:
        b = batch_dims[0]
        try:
            batch = segment(
                ds.isel({b: [item[1] for item in chunk]}), dim=dim, batch_dims=[b], **kwargs
            )
            results = list(batch.results)
        except Exception:  # one series' error fails the batch: retried one by one below
            results = None
    failures: dict[str, str] = {}
    if results is None:
        results = []
        for name, _, sub, _, _ in chunk:
            try:
                results.append(segment(sub, dim=dim, **kwargs))
            except Exception as exc:  # any error fails this series alone
                failures[name] = one_line(exc, typed=not isinstance(exc, KcpError))
                results.append(None)
    digests: dict[str, str] = {}
    for (name, _, _, target, _), res in zip(chunk, results, strict=True):
        if res is None:
            continue
        text = res.to_json()
        try:
            write_atomic(target, text)
        except OSError as exc:
            failures[name] = f"cannot write {target}: {exc.strerror}"
            continue
        digests[name] = hashlib.sha256(text.encode()).hexdigest()
    return failures, digests


#: Seconds a job waits for its first SLURM worker (``[cluster] timeout``).
SLURM_TIMEOUT = 600


def _cluster(spec: str, slurm: dict[str, Any] | None, timeout: int | None = None):
    """The scheduler context of a job: threads/processes/local/address, or SLURM
    (``timeout``: ``[cluster] timeout``, each kind's default when None)."""
    if spec != "slurm":
        return scheduler_context(spec, START_TIMEOUT if timeout is None else timeout)
    timeout = SLURM_TIMEOUT if timeout is None else timeout
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
        with SLURMCluster(**opts) as cluster, Client(cluster) as client:
            cluster.scale(jobs=jobs)
            try:  # a queue that never starts the workers would wait forever
                client.wait_for_workers(1, timeout=timeout)
            except TimeoutError:
                raise JobError(
                    f"no SLURM worker started within {timeout} s; check the queue (squeue) "
                    "and [cluster.slurm], or raise [cluster] timeout"
                ) from None
            yield

    return ctx()
