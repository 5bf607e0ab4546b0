"""Run a job again and again on a growing archive: ``kcpstream watch``.

Each run is :func:`kcpstream.jobs.pipeline.run_job`: the series whose input did
not change are skipped, the others updated from the job's checkpoint (only
the chunks appended or rewritten are read) and their outputs replaced
atomically.  A run starts every ``every`` seconds after the previous one
started; one that takes longer is followed at once by the next.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kcpstream.errors import InputError


def parse_every(text: str) -> float:
    """Seconds in an interval such as ``"5min"``, ``"1h"``, ``"30s"`` or ``"0s"``."""
    import pandas as pd

    from kcpstream.engine.plan import unitless

    if unitless(text):
        raise InputError(f"--every {text!r} has no unit; give one such as 300s, 5min or 1h")
    try:
        seconds = pd.Timedelta(text).total_seconds()
    except (ValueError, TypeError):
        seconds = float("nan")
    if not seconds >= 0:
        raise InputError(f"--every must be a duration such as 5min, 1h or 30s, got {text!r}")
    return float(seconds)


def watch(
    run: Callable[[], dict[str, Any]],
    every: float,
    runs: int | None = None,
    *,
    on_report: Callable[[int, dict[str, Any]], None],
    on_error: Callable[[int, BaseException], None],
    errors: tuple[type[BaseException], ...] = (),
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Call ``run`` every ``every`` seconds, ``runs`` times (None: until
    interrupted); returns how many runs failed (an error, or a series).

    ``on_report(i, report)`` gets each run's report, ``on_error(i, exc)``
    each error of ``errors`` a run raised: the first run's is raised again
    (a job that cannot start is not watched), a later one's (a store briefly
    unreachable) is reported and the next run tried.
    """
    failed = 0
    i = 0
    while runs is None or i < runs:
        i += 1
        started = clock()
        try:
            report = run()
        except errors as exc:
            if i == 1:
                raise
            failed += 1
            on_error(i, exc)
        else:
            failed += bool(report.get("failed"))
            on_report(i, report)
        if runs is not None and i >= runs:
            break
        sleep(max(0.0, started + every - clock()))
    return failed
