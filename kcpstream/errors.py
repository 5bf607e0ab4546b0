"""The exceptions and warnings kcpstream raises (imports nothing)."""

from __future__ import annotations

__all__ = [
    "KcpError",
    "InputError",
    "NotEnoughSplitsError",
    "NotFittedError",
    "JobError",
    "SchedulerWarning",
    "MissingSamplesWarning",
    "one_line",
]


class KcpError(Exception):
    """Every error kcpstream raises: ``except kcpstream.KcpError`` catches them all.

    Each is also the builtin type it refines (an :class:`InputError` is a
    ``ValueError``), so code written against those keeps working."""


class InputError(KcpError, ValueError):
    """The input cannot be segmented as given; the message says why and what to do."""


class NotEnoughSplitsError(KcpError, ValueError):
    """Binary segmentation ran out of admissible splits before ``n_bkps``."""


class NotFittedError(KcpError, RuntimeError):
    """Raised when a feature map is used before :meth:`FeatureMap.fit`."""


class JobError(KcpError, ValueError):
    """The job file or its output directory cannot be used as they are."""


class SchedulerWarning(UserWarning):
    """The active dask scheduler runs kcpstream slower than another would; the
    message says which."""


class MissingSamplesWarning(UserWarning):
    """Most samples of a series are missing: it was segmented from the few valid ones."""


def one_line(exc: BaseException, *, typed: bool = False) -> str:
    """An exception as the one line a user is shown: its message's first line
    (a KeyError's without the quotes ``str()`` puts around it; a line that
    ends in a colon with the next, which says what failed, as botocore's
    "Parameter validation failed:"), or its type when the message is empty.
    ``typed``: the type first (an error of another library, whose text alone,
    ``FileNotFoundError('bucket/x.zarr')``, says little)."""
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()] or [""]
    first = lines[0]
    if first.endswith(":") and len(lines) > 1:
        first = f"{first} {lines[1]}"
    name = type(exc).__name__
    if not first:
        return name
    return f"{name}: {first}" if typed else first
