"""The exceptions kcpstream raises for input it cannot use (imports nothing)."""

from __future__ import annotations

__all__ = ["InputError", "one_line"]


class InputError(ValueError):
    """The input cannot be segmented as given; the message says why and what to do."""


def one_line(exc: BaseException) -> str:
    """An exception as the one line a user is shown: its message's first line
    (a KeyError's without the quotes ``str()`` puts around it), or its type."""
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return (text.strip().splitlines() or [type(exc).__name__])[0]
