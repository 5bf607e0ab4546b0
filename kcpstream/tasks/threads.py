"""Work spread over this process's threads: the series of a batch searched and
chosen side by side.  Their compiled kernels and numpy's products release the
GIL, and each series' work touches only its own statistics, so the results do
not depend on which thread did what, or in which order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dask
from dask.system import CPU_COUNT


def worker_threads() -> int:
    """Threads for work in this process: dask's ``num_workers`` if set, else its CPU count."""
    return max(1, int(dask.config.get("num_workers", None) or CPU_COUNT))


#: Fewest items worth a pool of threads (a pool costs about a millisecond).
MIN_THREAD_ITEMS = 4


def each_in_threads(
    func: Callable[[Any], Any],
    items: Sequence,
    least: int = MIN_THREAD_ITEMS,
    most: int | None = None,
) -> list:
    """``[func(item) for item in items]``, in :func:`worker_threads` threads (at
    most ``most``) when there are at least ``least`` items (fewer are not worth
    a pool).  The first exception, in the items' order, is raised."""
    workers = min(worker_threads(), len(items), most or len(items))
    if workers <= 1 or len(items) < least:
        return [func(item) for item in items]
    with ThreadPoolExecutor(workers, thread_name_prefix="kcpstream") as pool:
        return list(pool.map(func, items))
