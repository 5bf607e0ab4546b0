"""Segment one series several ways from one data pass: :class:`Segmenter`.

:func:`kcpstream.segment` is one call: data pass, search, choice.  A
:class:`Segmenter` keeps the block statistics of its data pass in memory
(no checkpoint directory), so each :meth:`~Segmenter.predict` with another
number of change-points, penalty, level or ``min_size`` only searches them
again, reading nothing but the few blocks refinement scans; the segments
already evaluated exactly are kept between calls.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from kcpstream.engine.plan import Job, Settings, settings_of
from kcpstream.engine.run import prepare, reselect, run, statistics
from kcpstream.errors import NotFittedError
from kcpstream.features import FeatureMap
from kcpstream.features.base import DEFAULT_TILE
from kcpstream.inputs.signal import as_signal
from kcpstream.passes.cache import release_worker_caches
from kcpstream.progress import lines_on_stderr
from kcpstream.result import Segmentation
from kcpstream.selection.significance import DEFAULT_ALPHA

__all__ = ["Segmenter"]


class Segmenter:
    """Fit once, then choose the change-points any number of ways.

    ``fit`` reads the series once (the fit sample and the data pass) and
    keeps its block statistics; ``predict`` returns what
    :func:`kcpstream.segment` returns for the same arguments, bit for bit,
    without a data pass.  The arguments are :func:`~kcpstream.segment`'s:
    those that shape the statistics here, those that choose the change-points
    in :meth:`predict`.

    Parameters
    ----------
    features : FeatureMap or str, default "auto"
        The feature map (see :func:`~kcpstream.segment`).
    method : {"binseg", "dynp"}, default "binseg"
        The search (it also sets the block grid for ``"dynp"``).
    window : int, optional
        Windows of ``window`` samples with temporal features.
    block_size, seed, sample_size, tile, cache_bytes, progress
        As in :func:`~kcpstream.segment`.

    Examples
    --------
    >>> import numpy as np, kcpstream
    >>> rng = np.random.default_rng(0)
    >>> x = np.concatenate([rng.normal(0, 1, 500), rng.normal(0, 3, 500)])
    >>> seg = kcpstream.Segmenter().fit(x)
    >>> seg.predict().changepoints
    array([500])
    >>> seg.predict(n_bkps=2).diagnostics.samples_featurized_pass  # no data pass
    0
    """

    def __init__(
        self,
        features: str | FeatureMap = "auto",
        *,
        method: str = "binseg",
        window: int | None = None,
        block_size: int | None = None,
        seed: int | None = None,
        sample_size: int = 2048,
        tile: int = DEFAULT_TILE,
        cache_bytes: int = 256 * 2**20,
        progress: bool = False,
    ) -> None:
        self._fixed = {
            "features": features,
            "method": method,
            "window": window,
            "block_size": block_size,
            "seed": seed,
            "sample_size": sample_size,
            "tile": tile,
            "cache_bytes": cache_bytes,
            "progress": progress,
        }
        self._settings(None, None, None, None, None, DEFAULT_ALPHA)  # checked now, not at fit
        self._job: Job | None = None
        self._known: dict[int, dict] = {}  # min_size -> segments evaluated exactly

    def _settings(self, n_bkps, pen, d_max, min_size, min_duration, alpha) -> tuple[Settings, Any]:
        fixed = self._fixed
        return settings_of(
            features=fixed["features"],
            n_bkps=n_bkps,
            pen=pen,
            method=fixed["method"],
            d_max=d_max,
            min_size=min_size,
            min_duration=min_duration,
            alpha=alpha,
            window=fixed["window"],
            block_size=fixed["block_size"],
            seed=fixed["seed"],
            sample_size=fixed["sample_size"],
            tile=fixed["tile"],
            cache_bytes=fixed["cache_bytes"],
            checkpoint=None,
            progress=fixed["progress"],
        )

    def fit(
        self,
        data: Any,
        *,
        variable: str | None = None,
        variables: list[str] | None = None,
        dim: str | None = None,
        chunks: int | None = None,
        missing: str = "error",
        storage_options: dict | None = None,
    ) -> Segmenter:
        """Read the series once and keep its block statistics.

        Parameters
        ----------
        data, variable, variables, dim, chunks, missing, storage_options
            The series, as :func:`~kcpstream.segment` takes it (one series:
            a batch is segmented with ``segment(..., batch_dims=...)``).

        Returns
        -------
        Segmenter
            ``self``, fitted.
        """
        settings, features = self._settings(None, None, None, None, None, DEFAULT_ALPHA)
        with lines_on_stderr(settings.progress):
            signal = as_signal(
                data,
                variable=variable,
                variables=variables,
                dim=dim,
                chunks=chunks,
                missing=missing,
                storage_options=storage_options,
            )
            job = prepare(signal, features, settings)
            try:
                statistics([job], settings)
            finally:  # predict reads what it needs; workers keep nothing meanwhile
                release_worker_caches([job.cache])
        self._job, self._known = job, {}
        return self

    def predict(
        self,
        *,
        n_bkps: int | None = None,
        pen: float | str | None = None,
        d_max: int | None = None,
        min_size: int | None = None,
        min_duration: Any = None,
        alpha: float = DEFAULT_ALPHA,
    ) -> Segmentation:
        """The change-points chosen as :func:`~kcpstream.segment` would, from the
        statistics kept by :meth:`fit`.

        Parameters
        ----------
        n_bkps, pen, d_max, min_size, min_duration, alpha
            As in :func:`~kcpstream.segment` (default: the test, ``pen="auto"``).

        Returns
        -------
        Segmentation
            Its ``diagnostics`` count no data pass: only the samples
            refinement read (none when an earlier call evaluated the same
            segments).
        """
        fitted = self._fitted()
        t0 = time.perf_counter()
        settings, _ = self._settings(n_bkps, pen, d_max, min_size, min_duration, alpha)
        with lines_on_stderr(settings.progress):
            return run([reselect(fitted, settings, self._known)], settings, t0)[0]

    def path(self, *, min_size: int | None = None, min_duration: Any = None) -> np.ndarray:
        """The cost of the best segmentation with 0, 1, 2, ... change-points among
        binary segmentation's path (``Segmentation.path_costs`` of :meth:`predict`).
        """
        return self.predict(min_size=min_size, min_duration=min_duration).path_costs

    def _fitted(self) -> Job:
        if self._job is None:
            raise NotFittedError("this Segmenter is not fitted yet: call .fit(data) first")
        return self._job

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._fixed.items() if v is not None)
        state = "unfitted" if self._job is None else f"fitted on {self._job.signal.description}"
        return f"<Segmenter({args}): {state}>"
