"""kcpstream: kernel change-point detection for signals too long for memory.

The one entry point is :func:`segment`; feature maps live in
:mod:`kcpstream.features`, synthetic signals with ground truth in
:mod:`kcpstream.datasets`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

from kcpstream import accessor, datasets, features, metrics  # noqa: F401  (registers the obj.kcp accessor)
from kcpstream._version import __version__
from kcpstream.api import segment
from kcpstream.errors import (
    InputError,
    JobError,
    KcpError,
    MissingSamplesWarning,
    NotEnoughSplitsError,
    NotFittedError,
    SchedulerWarning,
)
from kcpstream.features import RFF, FeatureMap, Linear, Nystrom, QuadratureFF
from kcpstream.result import BatchSegmentation, Diagnostics, Segmentation
from kcpstream.segmenter import Segmenter
from kcpstream.selection.rules import Selection
from kcpstream.warmup import WarmUp, warm_up

__all__ = [
    "segment",
    "Segmenter",
    "warm_up",
    "WarmUp",
    "Segmentation",
    "BatchSegmentation",
    "Diagnostics",
    "Selection",
    "FeatureMap",
    "RFF",
    "QuadratureFF",
    "Nystrom",
    "Linear",
    "KcpError",
    "InputError",
    "MissingSamplesWarning",
    "SchedulerWarning",
    "NotEnoughSplitsError",
    "NotFittedError",
    "JobError",
    "features",
    "datasets",
    "metrics",
    "__version__",
]


#: Modules the documentation named before the stages became subpackages: still
#: importable under the old name for one release, with a DeprecationWarning.
_MOVED = {
    "cli": "kcpstream.jobs.cli",
    "period": "kcpstream.features.period",
    "pipeline": "kcpstream.jobs.pipeline",
    "select": "kcpstream.selection.rules",
    "significance": "kcpstream.selection.significance",
    "trend": "kcpstream.selection.trend",
}


def _moved(name: str):
    new = _MOVED[name]
    warnings.warn(
        f"kcpstream.{name} is now {new}; the old name goes in the next release",
        DeprecationWarning,
        stacklevel=3,
    )
    return importlib.import_module(new)


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, name: str):
        self.name = name

    def create_module(self, spec):
        return _moved(self.name)

    def exec_module(self, module) -> None:
        pass


class _MovedFinder(importlib.abc.MetaPathFinder):
    """``import kcpstream.significance`` and the like: the module's new home."""

    def find_spec(self, fullname, path=None, target=None):
        parent, _, name = fullname.rpartition(".")
        if parent != "kcpstream" or name not in _MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedLoader(name))


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder())


def __getattr__(name: str):
    if name in _MOVED:
        return _moved(name)
    raise AttributeError(f"module 'kcpstream' has no attribute {name!r}")
