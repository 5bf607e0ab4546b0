"""The exceptions kcpstream raises for input it cannot use (imports nothing)."""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(ValueError):
    """The input cannot be segmented as given; the message says why and what to do."""
