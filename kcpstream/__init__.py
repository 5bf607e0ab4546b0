"""kcpstream: kernel change-point detection for signals too long for memory.

The one entry point is :func:`segment`; feature maps live in
:mod:`kcpstream.features`, synthetic signals with ground truth in
:mod:`kcpstream.datasets`.
"""

from __future__ import annotations

from . import (
    accessor,  # noqa: F401  (registers the obj.kcp accessor)
    datasets,
    features,
    metrics,
)
from ._version import __version__
from .api import segment
from .errors import (
    InputError,
    JobError,
    KcpError,
    NotEnoughSplitsError,
    NotFittedError,
    SchedulerWarning,
)
from .features import RFF, FeatureMap, Linear, Nystrom, QuadratureFF
from .result import BatchSegmentation, Diagnostics, Segmentation
from .segmenter import Segmenter
from .select import Selection
from .warmup import WarmUp, warm_up

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
    "SchedulerWarning",
    "NotEnoughSplitsError",
    "NotFittedError",
    "JobError",
    "features",
    "datasets",
    "metrics",
    "__version__",
]
