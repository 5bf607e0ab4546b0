"""How far a call has got: a line per phase on the ``kcpstream`` logger.

Every phase of a call -- the fit, the data pass, each round of refinement,
the choice of the change-points, the nearest neighbours' test of short
series, the checkpoint -- logs one line at INFO on
``logging.getLogger("kcpstream.progress")`` (a job's series, on
``"kcpstream.pipeline"``).  They go wherever the application's logging
sends them; ``segment(..., progress=True)``, ``kcpstream segment`` on a
terminal (or with ``--progress``) and ``kcpstream run`` (unless
``--quiet``) print them on stderr with the time of day.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

__all__ = ["LOGGER", "note", "lines_on_stderr"]

LOGGER = logging.getLogger("kcpstream.progress")


def note(message: str, *args) -> None:
    """Log one progress line (``%``-style arguments, formatted only if shown)."""
    LOGGER.info(message, *args)


@contextlib.contextmanager
def lines_on_stderr(enabled: bool) -> Iterator[None]:
    """kcpstream's progress lines (the ``kcpstream`` loggers') on stderr while
    the block runs, and only then: a process may make several calls."""
    logger = logging.getLogger("kcpstream")
    if not enabled or any(getattr(h, "_kcpstream", False) for h in logger.handlers):
        yield  # off, or already on (a job's call inside a command)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    handler._kcpstream = True
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # not twice where the application logs to stderr too
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
