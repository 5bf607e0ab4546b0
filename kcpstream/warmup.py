"""Compile kcpstream's kernels before a first call needs them.

kcpstream's kernels are compiled by numba on first use and cached on disk
(``cache=True``: next to the package, or where ``NUMBA_CACHE_DIR`` points);
a process that finds them cached loads them in well under a second.  A fresh
environment compiles them on its first calls instead, a few seconds per kind
of call (``benchmarks/results/design.md``).  :func:`warm_up` (``kcpstream warmup``)
runs a small call of each kind -- pointwise and windowed maps, one and
several channels, in memory and on the block grid, float64, float32 and
integer samples -- so that this happens once, where it is convenient: when
an image or a cluster's environment is built, not in a job's first run.
Workers that share the file system (a ``LocalCluster``) share the cache.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numba.core import event

from kcpstream.api import segment
from kcpstream.segmenter import Segmenter

__all__ = ["WarmUp", "warm_up"]


@dataclass(frozen=True)
class WarmUp:
    """What :func:`warm_up` did.

    Attributes
    ----------
    seconds : float
        Time taken, compiling or loading from the cache.
    compiled : int
        Functions numba compiled (0: every kernel came from the cache).
    """

    seconds: float
    compiled: int


class _Counter(event.Listener):
    """Counts numba's compilations (loads from its cache are not compilations)."""

    def __init__(self) -> None:
        self.count = 0

    def on_start(self, ev: event.Event) -> None:
        self.count += 1

    def on_end(self, ev: event.Event) -> None:
        pass


def _calls() -> tuple[list[tuple[np.ndarray, dict]], np.ndarray]:
    """One small call of each kind whose kernels differ, and the series on the
    block grid among them (for a later choice on its statistics)."""
    rng = np.random.default_rng(0)
    step = np.repeat([0.0, 2.0], 5_000)
    t = np.arange(200_000)
    cycle = np.sin(2 * np.pi * t / 50) * np.where(t < 100_000, 1.0, 2.0)
    grid = np.repeat([0.0, 1.0], 100_000) + rng.standard_normal(200_000)
    channels = rng.standard_normal((50_000, 3))
    channels[25_000:, 1] += 1.0
    counts = rng.poisson(np.repeat([0.2, 0.5], 5_000))
    calls = [
        (step + rng.standard_normal(step.size), {}),  # in memory, float64
        ((step + rng.standard_normal(step.size)).astype(np.float32), {}),  # float32
        (counts, {}),  # integer samples
        (grid, {}),  # the block grid: data pass, refinement scans
        (grid.astype(np.float32), {"n_bkps": 1, "method": "dynp"}),
        (cycle + 0.1 * rng.standard_normal(t.size), {}),  # windows of one period
        (channels, {}),  # several channels: RFF
    ]
    return calls, grid


def warm_up() -> WarmUp:
    """Compile (or load from numba's cache) the kernels kcpstream's calls use.

    Returns
    -------
    WarmUp
        The time taken and how many functions were compiled: a few hundred
        in a fresh environment (``benchmarks/results/design.md`` has the
        time), none once cached.
    """
    counter = _Counter()
    t0 = time.perf_counter()
    with event.install_listener("numba:compile", counter):
        calls, grid = _calls()
        for x, kwargs in calls:
            segment(x, **kwargs)
        # a later choice on statistics already made: searched on the block grid,
        # the pieces it needs scanned as read (a call's own data pass leaves its
        # samples held, and a short series is then searched in one call)
        Segmenter().fit(grid).predict(n_bkps=3)
    return WarmUp(seconds=time.perf_counter() - t0, compiled=counter.count)
