"""kcpstream: kernel change-point detection for signals too long for memory.

The one entry point is :func:`segment`; feature maps live in
:mod:`kcpstream.features`, synthetic signals with ground truth in
:mod:`kcpstream.datasets`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from . import (
    accessor,  # noqa: F401  (registers the obj.kcp accessor)
    datasets,
    features,
    metrics,
)
from .api import segment
from .features import RFF, FeatureMap, Linear, Nystrom
from .result import BatchSegmentation, Diagnostics, Segmentation
from .search import NotEnoughSplitsError
from .signal import InputError

try:
    __version__ = version("kcpstream")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = [
    "segment",
    "Segmentation",
    "BatchSegmentation",
    "Diagnostics",
    "FeatureMap",
    "RFF",
    "Nystrom",
    "Linear",
    "InputError",
    "NotEnoughSplitsError",
    "features",
    "datasets",
    "metrics",
    "__version__",
]
