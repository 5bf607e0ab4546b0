"""Where computations run: the scheduler a command line or a job names.

The library itself never creates a dask client; :func:`scheduler_context` is
what the command line and jobs use to honour ``--scheduler`` and
``[cluster] scheduler``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from kcpstream.errors import InputError, one_line

#: Seconds a local cluster's scheduler and each of its workers may take to
#: start (and a client to connect to a scheduler address) before it is an error.
START_TIMEOUT = 60


#: dask's own schedulers, by their names.
DASK_SCHEDULERS = ("threads", "processes", "sync", "synchronous", "single-threaded")
#: The schedulers named by a word (any other is a running scheduler's address).
SCHEDULER_NAMES = (*DASK_SCHEDULERS, "local")


#: distributed starts worker processes with this variable (its default value
#: below): every allocation above 128 kB is then a fresh memory mapping.
_TRIM_KEY = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
_DISTRIBUTED_TRIM_DEFAULT = 65536


@contextlib.contextmanager
def scheduler_context(spec: str | None, timeout: float = START_TIMEOUT) -> Iterator[None]:
    """Run the enclosed computations on the scheduler ``spec``.

    ``threads`` (default), ``processes``, ``sync``; ``local`` or ``local:N``
    starts a ``distributed.LocalCluster`` (N worker processes) for the
    duration, its workers started without distributed's default
    ``MALLOC_TRIM_THRESHOLD_`` (unless configured otherwise); any other
    value is the address of a running distributed scheduler
    (``tcp://host:8786``).

    Every wait is bounded by ``timeout`` seconds: a worker that does not
    start in time (or dies while starting) has the cluster started again
    once, then an :class:`~kcpstream.errors.InputError`; so does a scheduler
    address that does not answer.
    """
    import dask

    spec = (spec or "threads").strip()
    with contextlib.ExitStack() as stack:
        if spec in DASK_SCHEDULERS:
            stack.enter_context(dask.config.set(scheduler=spec))
        elif spec == "local" or spec.startswith("local:"):
            from distributed import Client

            workers = check_scheduler(spec)
            if dask.config.get(_TRIM_KEY, None) == _DISTRIBUTED_TRIM_DEFAULT:
                # workers that run kcpstream read zarr chunks about twice as fast
                # without it (docs/guide/clusters.md); a value the user set is kept
                stack.enter_context(dask.config.set({_TRIM_KEY: None}))
            cluster = stack.enter_context(_start_local(workers, timeout))
            stack.enter_context(Client(cluster, timeout=f"{timeout}s"))
        else:
            from distributed import Client

            try:
                stack.enter_context(Client(spec, timeout=f"{min(timeout, 10)}s"))
            except (OSError, TimeoutError, ValueError) as exc:
                msg = f"cannot connect to the dask scheduler at {spec}: {one_line(exc)}"
                raise InputError(msg) from None
        yield


def check_scheduler(spec: str | None, also: tuple[str, ...] = ()) -> int | None:
    """Raise :class:`~kcpstream.errors.InputError` for a scheduler that is none
    of :data:`SCHEDULER_NAMES` (and ``also``, the names a caller takes on top),
    ``local:N`` or an address with a port (``tcp://host:8786``,
    ``host:8786``), and for a ``local:N`` that names no worker (before any
    work: ``local:0`` would wait forever); the worker count of ``local:N``
    (None otherwise)."""
    spec = (spec or "").strip()
    names = (*SCHEDULER_NAMES, *also)
    if not spec or spec in names:
        return None
    if not spec.startswith("local:"):
        host, colon, port = spec.split("://", 1)[-1].rpartition(":")
        if not (host and colon and port.isdigit()):
            raise InputError(
                f"scheduler {spec!r} is none of {', '.join(names)}, local:N, nor the "
                "address of a running dask scheduler with its port (tcp://host:8786)"
            )
        return None
    text = spec.split(":", 1)[1]
    if not text.isdigit() or int(text) < 1:
        raise InputError(
            f"scheduler {spec!r}: local:N needs N >= 1 worker processes (or plain 'local')"
        )
    return int(text)


def _start_local(workers: int | None, timeout: float):
    """A LocalCluster, started again once if a worker dies while it starts or
    takes more than ``timeout`` seconds to (a nanny's ``death_timeout``: without
    it a worker stuck in its start-up is waited for forever; distributed before
    2026.8 waits for that worker to exit even so, hence the floor in the
    package's requirements); a one-line error if that fails too."""
    import logging

    from distributed import LocalCluster

    last: BaseException | None = None
    for _ in range(2):
        quiet = logging.getLogger("distributed")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)  # the retry, or the one line below, says it
        try:
            return LocalCluster(
                n_workers=workers, processes=True, dashboard_address=None, death_timeout=timeout
            )
        except Exception as exc:  # a worker that died while starting, a timeout
            last = exc
        finally:
            quiet.setLevel(level)
    raise InputError(f"cannot start a local dask cluster: {one_line(last)}")
