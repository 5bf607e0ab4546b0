"""Segment one series several ways from one data pass: :class:`Segmenter`.

:func:`kcpstream.segment` is one call: data pass, search, choice.  A
:class:`Segmenter` keeps the block statistics of its data pass in memory
(no checkpoint directory), so each :meth:`~Segmenter.predict` with another
number of change-points, penalty, level or ``min_size`` only searches them
again, reading nothing but the few blocks refinement scans; the segments
already evaluated exactly are kept between calls.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import numpy as np

from kcpstream.engine.arguments import names_of
from kcpstream.engine.plan import Job, Settings, settings_of
from kcpstream.engine.run import fitted_statistics, reselect, run
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
    in :meth:`predict`.  As in scikit-learn, the parameters are attributes
    (:meth:`get_params`, :meth:`set_params`), checked by :meth:`fit`.

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
    >>> kcpstream.Segmenter(method="dynp").fit_predict(x, n_bkps=1).changepoints
    array([500])
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
        self.features = features
        self.method = method
        self.window = window
        self.block_size = block_size
        self.seed = seed
        self.sample_size = sample_size
        self.tile = tile
        self.cache_bytes = cache_bytes
        self.progress = progress
        self._job: Job | None = None
        self._fitted_with: dict[str, Any] = {}  # the parameters the statistics were made with
        self._known: dict[int, dict] = {}  # min_size -> segments evaluated exactly

    @classmethod
    def _param_names(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The parameters, by name (``deep`` is accepted for scikit-learn's
        ``clone``; a Segmenter holds no estimators)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Segmenter:
        """Set parameters by name; the statistics of an earlier :meth:`fit` no
        longer apply to them (:meth:`predict` says so until the next fit)."""
        names = self._param_names()
        for name, value in params.items():
            if name not in names:
                raise ValueError(
                    f"Segmenter has no parameter {name!r}; its parameters are {', '.join(names)}"
                )
            setattr(self, name, value)
        return self

    def _settings(self, params: dict[str, Any], **selection: Any) -> tuple[Settings, Any]:
        defaults = inspect.signature(Segmenter.predict).parameters
        chosen = {k: p.default for k, p in defaults.items() if k != "self"} | selection
        return settings_of(**params, **chosen, checkpoint=None)

    def fit(
        self,
        data: Any,
        *,
        variable: str | None = None,
        variables: list[str] | None = None,
        dim: str | None = None,
        chunks: int | None = None,
        missing: str = "error",
        skipna: bool = True,
        storage_options: dict | None = None,
    ) -> Segmenter:
        """Check the parameters, read the series once and keep its block statistics.

        Parameters
        ----------
        data, variable, variables, dim, chunks, missing, skipna, storage_options
            The series, as :func:`~kcpstream.segment` takes it (one series:
            a batch is segmented with ``segment(..., batch_dims=...)``).

        Returns
        -------
        Segmenter
            ``self``, fitted.
        """
        given = locals()  # the input's arguments, as kcpstream.engine.arguments declares them
        reading = {k: given[k] for k in names_of("input") if k not in ("data", "batch_dims")}
        params = self.get_params()
        settings, features = self._settings(params)
        with lines_on_stderr(settings.progress):
            signal = as_signal(data, **reading)
            job = None
            try:
                job = fitted_statistics(signal, features, settings)
            finally:  # predict reads what it needs; workers keep nothing meanwhile
                if job is not None:
                    release_worker_caches([job.cache])
        self._job, self._fitted_with, self._known = job, params, {}
        self._input = (data, reading)  # what its results draw (Segmentation.plot)
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
        given = locals()  # the selection's arguments (method is the Segmenter's own)
        selection = {k: given[k] for k in names_of("selection") if k != "method"}
        fitted = self._fitted()
        t0 = time.perf_counter()
        settings, _ = self._settings(self._fitted_with, **selection)
        with lines_on_stderr(settings.progress):
            res = run([reselect(fitted, settings, self._known)], settings, t0)[0]
        return res.keep_input(*self._input)

    def fit_predict(self, data: Any, **kwargs: Any) -> Segmentation:
        """:meth:`fit` then :meth:`predict`: ``kwargs`` are either's keywords."""
        chosen = inspect.signature(self.predict).parameters
        selection = {k: v for k, v in kwargs.items() if k in chosen}
        reading = {k: v for k, v in kwargs.items() if k not in chosen}
        return self.fit(data, **reading).predict(**selection)

    def path(self, *, min_size: int | None = None, min_duration: Any = None) -> np.ndarray:
        """The cost of the best segmentation with 0, 1, 2, ... change-points among
        binary segmentation's path (``Segmentation.path_costs`` of :meth:`predict`).
        """
        return self.predict(min_size=min_size, min_duration=min_duration).path_costs

    def _fitted(self) -> Job:
        if self._job is None:
            raise NotFittedError("this Segmenter is not fitted yet: call .fit(data) first")
        before = self._fitted_with
        changed = [k for k, v in self.get_params().items() if v is not before[k] and v != before[k]]
        if changed:
            raise NotFittedError(
                f"the Segmenter's {', '.join(changed)} changed since it was fitted: call "
                ".fit(data) again"
            )
        return self._job

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items() if v is not None)
        state = "unfitted" if self._job is None else f"fitted on {self._job.signal.description}"
        return f"<Segmenter({args}): {state}>"
