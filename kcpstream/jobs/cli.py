"""The ``kcpstream`` command line.

Exit codes: 0 success; 1 the input or a parameter cannot be used (one line
saying why, no traceback); 2 wrong usage (unknown option, missing argument).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import tempfile
import time
import warnings

import click

from kcpstream.engine.plan import MAX_D_MAX
from kcpstream.errors import one_line
from kcpstream.inputs.provenance import MISSING_CHOICES
from kcpstream.jobs.scheduling import scheduler_context
from kcpstream.persist.files import check_writable, write_atomic
from kcpstream.progress import lines_on_stderr
from kcpstream.result import count, pvalue_text, time_texts
from kcpstream.selection.choose import METHODS
from kcpstream.selection.significance import DEFAULT_ALPHA

#: Errors that are the user's input or parameters, reported in one line (not
#: TypeError: the CLI hands typed values on, so one is a bug and keeps its traceback).
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, KeyError, FileNotFoundError)


def parse_storage_options(items: tuple[str, ...] | list[str]) -> dict | None:
    """``KEY=VALUE`` pairs as a dict; a value that reads as JSON (``true``,
    ``3``, ``{"region_name": "eu"}``) is taken as such, any other as text."""
    if not items:
        return None
    out: dict = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise click.BadParameter(
                f"{item!r} is not KEY=VALUE (e.g. endpoint_url=http://localhost:9000)",
                param_hint="--storage-option",
            )
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def _duration(text: str | None):
    """A --min-duration value: a number for numeric coordinates, else the text."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return text


#: The library's advice in Python's spelling, as this command line spells it.
CLI_SPELLINGS = (
    (re.compile(r"\bmissing='(skip|fill|error)'"), r"--missing \1"),
    (re.compile(r"\bgive n_bkps or pen\b"), "give --n-bkps or --pen"),
    (re.compile(r"\ba smaller min_size\b"), "a smaller --min-size"),
    (re.compile(r"\ba larger d_max\b"), "a larger --d-max"),
    (re.compile(r"\braise d_max\b"), "raise --d-max"),
    (
        re.compile(r"\bd_max=(\d+) segments cannot hold n_bkps=(\d+)"),
        r"--d-max \1 cannot hold --n-bkps \2",
    ),
    (
        re.compile(r"\bgive d_max >= (\d+), or leave d_max out\b"),
        r"give --d-max >= \1, or leave --d-max out",
    ),
    (re.compile(r"\bskipna=False\b"), "--no-skipna"),
)


def cli_spelling(message: str) -> str:
    """``message`` with the advice it gives in Python's spelling (``missing='skip'``,
    ``give n_bkps or pen``) in the command line's (``--missing skip``, ``give
    --n-bkps or --pen``); the rest unchanged."""
    for pattern, spelled in CLI_SPELLINGS:
        message = pattern.sub(spelled, message)
    return message


def _pvalues_json(res) -> list[float | None]:
    """A result's p-values for JSON: an untested one (NaN) as null."""
    return [None if p != p else float(p) for p in res.pvalues]


def _summary(res) -> dict:
    from kcpstream.result import BatchSegmentation

    if isinstance(res, BatchSegmentation):
        return {
            "series": [
                {"labels": {k: str(v) for k, v in labels.items()}, **_summary(r)}
                for labels, r in res
            ]
        }
    d = res.diagnostics
    return {
        "changepoints": res.changepoints.tolist(),
        "times": None if res.times is None else time_texts(res.changepoint_times),
        "pvalues": _pvalues_json(res),
        "n_segments": res.selection.n_segments,
        "rule": res.selection.rule,
        "min_size": res.min_size,
        "cost": res.cost,
        "passes": d.passes,
        "seconds": d.seconds,
        "checkpoint": d.checkpoint,
        "n_missing": d.n_missing,
        "longest_gap": d.longest_gap,
        **({"earliest": res.earliest.tolist()} if d.n_missing else {}),
        "features": (res.params or {}).get("features"),
        "window": (res.params or {}).get("window"),
        "period": (res.params or {}).get("period"),
    }


def _quiet_unraisable(unraisable) -> None:
    """Drop one known message at exit, pass every other on.

    When an object store cannot be reached, zarr gives up on requests that
    s3fs (aiobotocore) still holds; Python finalizes those coroutines at exit
    and aiobotocore then fails to reset a context variable, printing a long
    "was created in a different Context" traceback after the command's own
    one-line error.  The request had already failed and been reported."""
    exc = unraisable.exc_value
    if isinstance(exc, ValueError) and "was created in a different Context" in str(exc):
        return
    sys.__unraisablehook__(unraisable)


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line on stderr (not the source line Python shows under it)."""
    click.echo(f"Warning: {message}", err=True)


@click.group()
@click.version_option(package_name="kcpstream")
def main() -> None:
    """kcpstream: kernel change-point detection for very long signals."""
    sys.unraisablehook = _quiet_unraisable
    warnings.showwarning = _warning_line


@main.command()
@click.argument("store")
@click.option(
    "--variable",
    "-v",
    multiple=True,
    help="Array or variable in the store; repeated, variables segmented together "
    "as channels of one signal.",
)
@click.option(
    "--variables",
    multiple=True,
    help="Variables segmented together as channels of one signal (repeatable).",
)
@click.option("--dim", default=None, help="Time dimension (xarray stores).")
@click.option(
    "--batch-dim", "batch_dims", multiple=True, help="Dimension of independent series (repeatable)."
)
@click.option("--n-bkps", type=int, default=None, help="Number of change-points.")
@click.option(
    "--d-max", type=int, default=None, help=f"Most segments on the path (at most {MAX_D_MAX})."
)
@click.option(
    "--pen", default=None, help="Penalty per change-point, 'auto' (default: the test) or 'slope'."
)
@click.option(
    "--alpha",
    type=float,
    default=DEFAULT_ALPHA,
    show_default=True,
    help="Level of each split's test.",
)
@click.option(
    "--window",
    type=int,
    default=None,
    help="Segment windows of this many samples with temporal features (shape, frequency).",
)
@click.option("--method", type=click.Choice(METHODS), default="binseg", show_default=True)
@click.option(
    "--features", default="auto", show_default=True, help="Feature map, e.g. rff:64 or brownian:32."
)
@click.option(
    "--min-size",
    type=int,
    default=None,
    help=(
        "Shortest segment (default: n / 10^4, at least 10 samples or 2 windows; a tenth "
        "of a series shorter than 100)."
    ),
)
@click.option(
    "--min-duration",
    default=None,
    help="Shortest segment as a duration of the time coordinate, e.g. 10min (instead of "
    "--min-size).",
)
@click.option("--seed", type=int, default=None, help="Seed of the feature map.")
@click.option(
    "--missing",
    type=click.Choice(MISSING_CHOICES),
    default="error",
    show_default=True,
    help="An absent chunk of the store: an error, missing samples (skip: a gap), or the fill "
    "value (stores that leave out chunks of fill values).",
)
@click.option(
    "--skipna/--no-skipna",
    default=True,
    show_default=True,
    help="A sample with NaN is missing: left out as a gap, or (--no-skipna) an error.",
)
@click.option(
    "--storage-option",
    "storage_option",
    multiple=True,
    metavar="KEY=VALUE",
    help="Option of the object store a URL opens (repeat): endpoint_url=..., anon=true, ...",
)
@click.option(
    "--checkpoint", type=click.Path(file_okay=False), default=None, help="Checkpoint directory."
)
@click.option(
    "--out", type=click.Path(dir_okay=False), default=None, help="Write the result as JSON."
)
@click.option(
    "--scheduler",
    default="threads",
    show_default=True,
    help="threads, processes, sync, local[:N] or an address.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress bar on stderr (default: on a terminal).",
)
def segment(
    store,
    variable,
    variables,
    dim,
    batch_dims,
    n_bkps,
    d_max,
    pen,
    alpha,
    window,
    method,
    features,
    min_size,
    min_duration,
    seed,
    missing,
    skipna,
    storage_option,
    checkpoint,
    out,
    scheduler,
    as_json,
    progress,
) -> None:
    """Segment the signal in a zarr STORE."""
    from kcpstream import segment as run_segment

    if pen is not None and pen not in ("auto", "slope"):
        try:
            pen = float(pen)
        except ValueError:
            raise click.BadParameter(
                f"--pen must be a number, 'auto' or 'slope', got {pen!r}"
            ) from None
    variable, variables = _variables(variable, variables)
    show = sys.stderr.isatty() if progress is None else progress
    options = parse_storage_options(storage_option)
    from kcpstream.inputs.stores import open_store

    try:
        if out:  # before any work (segment() checks the checkpoint's folder)
            check_writable(out)
        data, var = open_store(
            store, variable, dim, options, batch=bool(batch_dims), variables=list(variables)
        )
        if isinstance(data, str) and options:
            extra = {"storage_options": options}
        else:
            extra = {}
        with scheduler_context(scheduler):
            res = run_segment(
                data,
                variable=var,
                dim=dim,
                batch_dims=list(batch_dims) or None,
                n_bkps=n_bkps,
                d_max=d_max,
                pen=pen,
                alpha=alpha,
                window=window,
                method=method,
                features=features,
                min_size=min_size,
                min_duration=_duration(min_duration),
                seed=seed,
                missing=missing,
                skipna=skipna,
                checkpoint=checkpoint,
                progress=show,
                **extra,
            )
    except USER_ERRORS as exc:
        raise click.ClickException(cli_spelling(one_line(exc))) from None
    if out:
        write_atomic(out, res.to_json())
    _echo_result(res, as_json)


def _variables(given: tuple, variables: tuple) -> tuple[str | None, tuple]:
    """``(variable, variables)`` from the options: ``-v a -v b`` is ``variables``
    a and b, segmented together (as the API's ``variables=["a", "b"]``)."""
    if len(given) > 1:
        if variables:
            raise click.ClickException(
                "give one variable (--variable), or several (--variable repeated or "
                "--variables), not both"
            )
        return None, given
    return (given[0] if given else None), variables


def _echo_result(res, as_json: bool) -> None:
    """A result on stdout: its JSON summary, or its repr and a line per change-point."""
    summary = _summary(res)
    if as_json:
        click.echo(json.dumps(summary))
        return
    batch = "series" in summary
    click.echo(
        f"<BatchSegmentation over {res.batch_dims}: {len(res)} series>" if batch else repr(res)
    )
    for labels, one in res if batch else [({}, res)]:
        times = time_texts(one.changepoint_times) if one.times is not None else None
        if batch:
            click.echo(", ".join(f"{k}={v}" for k, v in labels.items()) + f": {one!r}")
        for i, c in enumerate(one.changepoints):
            when = f"  {times[i]}" if times is not None else ""
            gap = ""
            if one.earliest.size and one.earliest[i] < c:  # the change lies in the gap before
                gap = f"  (after a gap: from {one.earliest[i]:,})"
            click.echo(f"{c:>14,}{when}  p={pvalue_text(one._pvalues()[i])}{gap}")


def _job_progress(command):
    """``--progress/--no-progress`` (``-q``) of the commands that run jobs, on by
    default (``--quiet``, hidden, is ``--no-progress`` too)."""
    command = click.option("--quiet", "quiet", is_flag=True, hidden=True)(command)
    return click.option(
        "--progress/--no-progress",
        "-p/-q",
        default=True,
        show_default=True,
        help="Progress lines on stderr (-q, --quiet: --no-progress).",
    )(command)


@main.command()
@click.argument("job", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--scheduler",
    default=None,
    help="Override the job's cluster: threads, processes, local[:N] or an address.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@click.option(
    "--dry-run", is_flag=True, help="Check the job and show the plan; compute and write nothing."
)
@_job_progress
def run(
    job: str, scheduler: str | None, as_json: bool, dry_run: bool, progress: bool, quiet: bool
) -> None:
    """Run a pipeline JOB (a TOML file; see pipelines/README.md).

    A line on stderr says how many series are left, and another after each
    group of series is written, so that a job's log shows how far it got."""
    from kcpstream.errors import JobError
    from kcpstream.jobs.pipeline import run_job

    try:
        with lines_on_stderr(progress and not quiet):
            report = run_job(job, scheduler=scheduler, dry_run=dry_run)
    except (JobError, *USER_ERRORS) as exc:
        raise click.ClickException(one_line(exc)) from None
    if dry_run:
        if as_json:
            click.echo(json.dumps(report))
            return
        click.echo(f"job:        {report['job']}")
        click.echo(f"input:      {report['input']['store']} {report['input']['variables']}")
        click.echo(f"output:     {report['output']}")
        click.echo(f"checkpoint: {report['checkpoint'] or '-'}")
        click.echo(f"scheduler:  {report['scheduler']}")
        click.echo(
            f"series:     {report['series']} ({len(report['would_run'])} to segment, "
            f"{len(report['would_skip'])} already done)"
        )
        return
    if as_json:
        click.echo(json.dumps(report))
    else:
        click.echo(
            f"{report['done']} series segmented, {report['skipped']} already done; "
            f"outputs in {report['output']}"
        )
    if report["failed"]:
        for name, msg in report["failed"].items():
            click.echo(f"failed: {name}: {msg}", err=True)
        sys.exit(1)


@main.command()
@click.argument("job", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--every", default="1h", show_default=True, help="Interval between runs: 30s, 5min, 1h, ..."
)
@click.option("--runs", type=click.IntRange(min=1), default=None, help="Stop after this many runs.")
@click.option("--scheduler", default=None, help="Override the job's cluster (as for run).")
@click.option("--json", "as_json", is_flag=True, help="A JSON line per run on stdout.")
@_job_progress
def watch(
    job: str,
    every: str,
    runs: int | None,
    scheduler: str | None,
    as_json: bool,
    progress: bool,
    quiet: bool,
) -> None:
    """Run a pipeline JOB again every --every until stopped (Ctrl-C, SIGTERM).

    Each run is `kcpstream run JOB`: unchanged series are skipped, series of a
    grown or rewritten input are updated from the job's checkpoint. A line per
    run says what it did; a run's error is reported and the next run tried
    (the first run's error ends the command). Exit code 1 when a run failed."""
    import signal

    from kcpstream.errors import JobError
    from kcpstream.jobs.pipeline import run_job
    from kcpstream.jobs.watch import parse_every
    from kcpstream.jobs.watch import watch as watch_job

    def stamp() -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S")

    def on_report(i: int, report: dict) -> None:
        if as_json:
            click.echo(json.dumps({"run": i, "time": stamp(), **report}))
        else:
            click.echo(
                f"{stamp()} run {i}: {report['done']} series segmented, "
                f"{report['skipped']} unchanged"
            )
        for name, msg in report["failed"].items():
            click.echo(f"failed: {name}: {msg}", err=True)

    def on_error(i: int, exc: BaseException) -> None:
        click.echo(f"{stamp()} run {i} failed: {one_line(exc)}", err=True)

    def stop(signum, frame) -> None:
        raise KeyboardInterrupt

    try:
        seconds = parse_every(every)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    previous = signal.signal(signal.SIGTERM, stop)
    failed = 0
    try:
        with lines_on_stderr(progress and not quiet):
            failed = watch_job(
                lambda: run_job(job, scheduler=scheduler),
                seconds,
                runs,
                on_report=on_report,
                on_error=on_error,
                errors=(JobError, *USER_ERRORS),
            )
    except (JobError, *USER_ERRORS) as exc:
        raise click.ClickException(one_line(exc)) from None
    except KeyboardInterrupt:
        # the run stopped may leave reads pending on zarr's I/O loop: at exit
        # asyncio would print each dropped task ("Task was destroyed but it is
        # pending!") with the traceback of its exception
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        click.echo(f"{stamp()} watch stopped", err=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if failed:
        sys.exit(1)


@main.command()
@click.option(
    "--n",
    "n",
    type=click.IntRange(min=1),
    default=10_000_000,
    show_default=True,
    help="Samples in the synthetic signal.",
)
@click.option(
    "--n-bkps",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Changes of distribution in the signal (the segmentation is not told).",
)
@click.option("--features", default="auto", show_default=True, help="Feature map spec.")
@click.option(
    "--chunk",
    type=click.IntRange(min=1),
    default=2**20,
    show_default=True,
    help="zarr chunk length.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the signal and the features.",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Draw the signal, the segments and the true change-points to this PNG (matplotlib).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def demo(
    n: int, n_bkps: int, features: str, chunk: int, seed: int, plot_path: str | None, as_json: bool
) -> None:
    """Segment a synthetic signal with known change-points stored in a temporary
    zarr store: the number of change-points is chosen automatically, each with
    its p-value."""
    from kcpstream import datasets, metrics
    from kcpstream import segment as run_segment
    from kcpstream.warmup import warm_up

    if plot_path is not None:
        _check_plot_target(plot_path)
    try:
        sig = datasets.changing_distribution(n, n_bkps, seed=seed)
    except ValueError as exc:
        if "do not fit" not in str(exc):
            raise
        raise click.UsageError(f"{exc}: ask for a larger --n or a smaller --n-bkps") from None
    # compiled apart, so that the time printed is the segmentation's, not numba's
    # first compile of the kernels (once per environment; benchmarks/results/first.md)
    kernels = warm_up()
    with tempfile.TemporaryDirectory(prefix="kcpstream-demo-") as tmp:
        store = os.path.join(tmp, "signal.zarr")
        t0 = time.perf_counter()
        datasets.write_zarr(sig.x, store, chunks=chunk)
        t_write = time.perf_counter() - t0
        try:
            res = run_segment(store, variable="x", features=features, seed=seed)
        except USER_ERRORS as exc:
            raise click.ClickException(one_line(exc)) from None
        if plot_path is not None:  # the store is read again for the picture
            _save_plot(res, sig.changepoints, plot_path)
    found, true = res.changepoints, sig.changepoints
    hausdorff = int(metrics.hausdorff(true, found)) if len(found) and len(true) else None
    nearest = [int(true[abs(true - f).argmin()]) if len(true) else None for f in found]
    d = res.diagnostics
    outcome = {
        "n": n,
        "true": true.tolist(),
        "found": found.tolist(),
        "pvalues": _pvalues_json(res),
        "selection": res.selection.rule,
        "alpha": res.selection.alpha,
        "hausdorff": hausdorff,
        "seconds_write": round(t_write, 3),
        "seconds_compile": round(kernels.seconds, 3),
        "functions_compiled": kernels.compiled,
        "seconds_segment": round(d.seconds, 3),
        "passes": round(d.passes, 4),
        "block_size": d.block_size,
        "plot": plot_path,
    }
    if as_json:
        click.echo(json.dumps(outcome))
        return
    click.echo(
        f"signal: {n:,} samples with {count(n_bkps, 'change')} of distribution, zarr chunks "
        f"of {chunk:,} (written in {t_write:.2f} s)"
    )
    click.echo(_kernels_line(kernels))
    click.echo(f"features: {res.features!r}")
    click.echo(
        f"number of change-points chosen automatically ({res.selection.rule}, "
        f"alpha={res.selection.alpha}): {len(found)} found for {len(true)} true"
    )
    click.echo(f"{'found':>12} {'p-value':>9} {'nearest true':>13} {'offset':>8}")
    for f, p, t in zip(found, res.pvalues, nearest, strict=True):
        truth = ("", "") if t is None else (f"{t:,}", f"{int(f) - t}")
        click.echo(f"{f:>12,} {pvalue_text(p):>9} {truth[0]:>13} {truth[1]:>8}")
    if hausdorff is not None:
        click.echo(f"Hausdorff distance: {hausdorff} samples ({hausdorff / n:.2e} of n)")
    click.echo(
        f"segmented in {d.seconds:.2f} s (data pass {d.seconds_data_pass:.2f} s); "
        f"samples featurized = {d.passes:.4f} x n; {d.rounds} refinement rounds"
    )
    if plot_path is not None:
        click.echo(f"picture: {plot_path}")


def _check_plot_target(path: str) -> None:
    """matplotlib importable and ``path`` writable, before any work is done."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise click.ClickException("--plot needs matplotlib: pip install matplotlib") from None
    try:
        check_writable(path, label=f"the picture {path}")
    except USER_ERRORS as exc:
        raise click.ClickException(one_line(exc)) from None


def _save_plot(res, true, path: str) -> None:
    """``res.plot()`` with the true change-points dashed, written to ``path`` as a
    PNG in one piece (no pyplot: no window, no display needed)."""
    import io

    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 3.5))
    res.plot(true_changepoints=true, ax=fig.subplots())
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    write_atomic(path, buf.getvalue())


def _kernels_line(kernels) -> str:
    if kernels.compiled:
        return (
            f"kernels: {kernels.compiled} functions compiled in {kernels.seconds:.1f} s "
            "(once per environment: cached for the next calls)"
        )
    return f"kernels: loaded from numba's cache in {kernels.seconds:.1f} s"


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def warmup(as_json: bool) -> None:
    """Compile kcpstream's kernels into numba's cache (run once where an
    environment or a worker image is built, so that no job's first call
    compiles them)."""
    from kcpstream.warmup import warm_up

    kernels = warm_up()
    if as_json:
        click.echo(json.dumps({"seconds": round(kernels.seconds, 3), "compiled": kernels.compiled}))
    else:
        click.echo(_kernels_line(kernels))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
