"""Work spread over this process's threads: the series of a batch searched and
chosen side by side.  Their compiled kernels and numpy's products release the
GIL, and each series' work touches only its own statistics, so the results do
not depend on which thread did what, or in which order."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
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


@contextlib.contextmanager
def one_blas_thread(active: bool = True) -> Iterator[None]:
    """Within the block, BLAS and LAPACK (numpy's products and eigenvalues) use
    one thread each, when ``active``: while this process's threads each work on
    a series, a product that spreads over every core as well makes more
    threads than cores, and OpenBLAS's threads wait for work by spinning, which
    takes the cores the other series' compiled kernels need (a batch's choices
    beside its searches took twice as long).  The products of one series are
    small, and their bits do not depend on the threads (checked on whole
    batches).  The limit is the process's, restored on leaving."""
    if not active:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield
