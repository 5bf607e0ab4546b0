""":func:`kcpstream.segment`'s arguments, declared once.

Each argument belongs to one part of a call: ``"input"`` (which series, and
how it is read: :func:`~kcpstream.inputs.signal.as_signal`), ``"statistics"``
(what the data pass computes, once, and where it is kept), ``"selection"``
(how many change-points, chosen from the statistics without reading the data
again: :meth:`kcpstream.Segmenter.predict`'s) or ``"run"`` (how the call
shows its progress).  Each names the option of
``kcpstream segment`` and the key of a job file that give it, or says why
only Python does.  The defaults are :func:`kcpstream.segment`'s signature;
``tests/test_arguments.py`` holds the command line, the job-file schema and
:class:`~kcpstream.Segmenter` to this table.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The parts of a call an argument can belong to.
PARTS = ("input", "statistics", "selection", "run")


@dataclass(frozen=True)
class Argument:
    """One argument of :func:`kcpstream.segment`.

    Attributes
    ----------
    name : str
        Its name.
    part : str
        One of :data:`PARTS`.
    option : str or None
        The ``kcpstream segment`` option (or argument) that gives it.
    key : str or None
        ``"section.key"`` of a job file that gives it.
    python_only : str
        Why the command line or a job file does not take it (empty when both do).
    """

    name: str
    part: str
    option: str | None
    key: str | None
    python_only: str = ""


_TUNING = "tunes memory and speed, not the answer: Python only"

ARGUMENTS: tuple[Argument, ...] = (
    Argument("data", "input", "STORE", "input.store"),
    Argument("features", "statistics", "--features", "features.map"),
    Argument("n_bkps", "selection", "--n-bkps", "selection.n_bkps"),
    Argument("pen", "selection", "--pen", "selection.pen"),
    Argument("method", "selection", "--method", "selection.method"),
    Argument("d_max", "selection", "--d-max", "selection.d_max"),
    Argument("min_size", "selection", "--min-size", "selection.min_size"),
    Argument("min_duration", "selection", "--min-duration", "selection.min_duration"),
    Argument("alpha", "selection", "--alpha", "selection.alpha"),
    Argument(
        "window", "statistics", "--window", None,
        "a job file names its map: [features] map = 'temporal' with its window",
    ),
    Argument(
        "block_size", "statistics", None, None,
        "the automatic grid is what checkpoints, updates and batches are planned for; "
        "a fixed grid is for experiments in Python",
    ),
    Argument("variable", "input", "--variable", "input.variable"),
    Argument("variables", "input", "--variables", "input.variables"),
    Argument("dim", "input", "--dim", "input.dim"),
    Argument("batch_dims", "input", "--batch-dim", "input.batch_dims"),
    Argument(
        "chunks", "input", None, None,
        "the command line and jobs read a store as it is chunked; rechunk it to change that",
    ),
    Argument("missing", "input", "--missing", "input.missing"),
    Argument("skipna", "input", "--skipna", "input.skipna"),
    Argument("storage_options", "input", "--storage-option", "input.storage_options"),
    Argument("seed", "statistics", "--seed", "features.seed"),
    Argument("sample_size", "statistics", None, None, _TUNING),
    Argument("tile", "statistics", None, None, _TUNING),
    Argument("cache_bytes", "statistics", None, None, _TUNING),
    Argument("checkpoint", "statistics", "--checkpoint", "output.checkpoint"),
    Argument(
        "progress", "run", "--progress", None,
        "a job always logs its progress (kcpstream run --quiet hides it)",
    ),
)  # fmt: skip


def names_of(part: str) -> tuple[str, ...]:
    """The names of the arguments of one part of a call, in :data:`ARGUMENTS`' order."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, got {part!r}")
    return tuple(a.name for a in ARGUMENTS if a.part == part)
