"""Job files: read a TOML job and check every key against a schema.

A job file is trusted like code: it names the stores read and written and
the cluster that runs the work.  Even so, every key is typed and
range-checked here, with a one-line :class:`JobError` naming the section, the
key and what it takes, so a typo never runs a different job, and the keys of
``[cluster.slurm]`` that reach a shell (a prologue, the worker's Python, its
extra arguments) are refused unless ``[cluster] allow_shell = true``.
Relative paths are resolved against the job file's folder, and a relative
output path may not leave it.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Callable
from typing import Any

from kcpstream.engine.plan import MAX_D_MAX
from kcpstream.errors import JobError
from kcpstream.inputs.provenance import MISSING_CHOICES
from kcpstream.selection.choose import METHODS

Check = Callable[[Any], str | None]  # None when the value is fine, else what it takes


def _text(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return "a non-empty string"
    if any(ch in value for ch in "\n\r\x00"):
        return "a string on one line"
    return None


def _integer(lo: int, hi: int | None = None) -> Check:
    def check(value: Any) -> str | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= lo
        ok = ok and (hi is None or value <= hi)
        return None if ok else f"an integer >= {lo}" + ("" if hi is None else f" and <= {hi}")

    return check


def _number(lo: float, hi: float | None = None, open_lo: bool = False) -> Check:
    def check(value: Any) -> str | None:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        ok = ok and math.isfinite(value) and (value > lo if open_lo else value >= lo)
        ok = ok and (hi is None or value < hi)
        bound = f"> {lo}" if open_lo else f">= {lo}"
        return None if ok else f"a number {bound}" + ("" if hi is None else f" and < {hi}")

    return check


def _choice(*options: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in options else "one of " + ", ".join(map(repr, options))

    return check


def _either(*checks: Check) -> Check:
    def check(value: Any) -> str | None:
        errors = [c(value) for c in checks]
        return None if None in errors else " or ".join(e for e in errors if e)

    return check


def _strings(value: Any) -> str | None:
    if not isinstance(value, list) or not value or any(_text(v) is not None for v in value):
        return 'a non-empty list of strings, e.g. ["a", "b"]'
    return None


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "true or false"


SCHEMA: dict[str, dict[str, Check]] = {
    "input": {
        "store": _text,
        "variable": _text,
        "variables": _strings,
        "dim": _text,
        "batch_dims": _strings,
        "missing": _choice(*MISSING_CHOICES),
        "skipna": _flag,
        "storage_options": lambda v: None if isinstance(v, dict) else "a table of options",
    },
    "features": {
        "map": _text,
        "n_features": _integer(1, 2**16),
        "seed": _integer(0),
        "bandwidth": _either(_number(0, open_lo=True), _choice("auto", "median")),
        "kernel": _text,
        "window": _integer(2),
        "n_bins": _integer(2),
    },
    "selection": {
        "method": _choice(*METHODS),
        "n_bkps": _integer(0),
        "pen": _either(_number(0), _choice("auto", "slope")),
        "alpha": _number(0, 1, open_lo=True),
        "min_size": _integer(1),
        "min_duration": _either(_text, _number(0, open_lo=True)),
        "d_max": _integer(1, MAX_D_MAX),
    },
    "output": {"store": _text, "checkpoint": _text, "group_size": _integer(1)},
    "cluster": {
        "scheduler": _text,
        "slurm": lambda v: None if isinstance(v, dict) else "a table [cluster.slurm]",
        "allow_shell": _flag,
        "timeout": _integer(1),
    },
}

#: ``[cluster.slurm]`` keys passed to ``dask_jobqueue.SLURMCluster`` (and ``jobs``).
SLURM_KEYS: dict[str, Check] = {
    "jobs": _integer(1),
    "cores": _integer(1),
    "processes": _integer(1),
    "memory": _text,
    "queue": _text,
    "account": _text,
    "walltime": _text,
    "job_name": _text,
    "job_cpu": _integer(1),
    "job_mem": _text,
    "interface": _text,
    "local_directory": _text,
    "log_directory": _text,
    "job_extra_directives": _strings,
    "death_timeout": _number(0, open_lo=True),
}

#: Keys that reach the batch script's shell: only with ``allow_shell = true``.
SLURM_SHELL_KEYS: dict[str, Check] = {
    "job_script_prologue": _strings,
    "python": _text,
    "worker_extra_args": _strings,
}


def _check_table(path: str, section: str, table: dict[str, Any], schema: dict[str, Check]) -> None:
    for key, value in table.items():
        if key not in schema:
            raise JobError(
                f"{path}: unknown key {key!r} in [{section}]; "
                f"known keys: {', '.join(sorted(schema))}"
            )
        wrong = schema[key](value)
        if wrong is not None:
            raise JobError(f"{path}: [{section}] {key} must be {wrong}, got {value!r}")


def _resolve(base: str, section: str, key: str, value: str, confine: bool) -> str:
    if "://" in value or os.path.isabs(value):
        return value
    resolved = os.path.normpath(os.path.join(base, value))
    if confine and os.path.commonpath([base, resolved]) != base:
        raise JobError(
            f"[{section}] {key} = {value!r} leaves the job file's folder {base}; give an "
            "absolute path to write elsewhere"
        )
    return resolved


def load_job(path: str | os.PathLike) -> dict[str, Any]:
    """Read and check a job file; relative paths are resolved against its folder."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            job = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise JobError(f"{path} is not valid TOML: {exc}") from None
    except OSError as exc:
        raise JobError(f"cannot read the job file {path}: {exc.strerror}") from None
    for section, table in job.items():
        if section not in SCHEMA:
            raise JobError(f"{path}: unknown section [{section}]; sections are {', '.join(SCHEMA)}")
        if not isinstance(table, dict):
            raise JobError(f"{path}: [{section}] must be a table (one [{section}] header)")
        _check_table(path, section, table, SCHEMA[section])
    cluster = job.get("cluster", {})
    slurm = cluster.get("slurm", {})
    shell = SLURM_SHELL_KEYS if cluster.get("allow_shell", False) else {}
    for key in slurm:
        if key in SLURM_SHELL_KEYS and not shell:
            raise JobError(
                f"{path}: [cluster.slurm] {key} runs shell commands on the cluster; "
                "set [cluster] allow_shell = true to allow it"
            )
    _check_table(path, "cluster.slurm", slurm, {**SLURM_KEYS, **shell})
    inp = job.get("input", {})
    if "variable" in inp and "variables" in inp:
        raise JobError(f"{path}: [input] give variable or variables, not both")
    selection = job.get("selection", {})
    for one, other in (("n_bkps", "pen"), ("min_size", "min_duration")):
        if one in selection and other in selection:
            raise JobError(f"{path}: [selection] give {one} or {other}, not both")
    for section, key in (("input", "store"), ("output", "store")):
        if key not in job.get(section, {}):
            raise JobError(f"{path}: [{section}] needs {key} = ...")
    base = os.path.dirname(os.path.abspath(path))
    for section, key in (("input", "store"), ("output", "store"), ("output", "checkpoint")):
        value = job.get(section, {}).get(key)
        if value is not None:
            job[section][key] = _resolve(base, section, key, value, confine=section == "output")
    return job
