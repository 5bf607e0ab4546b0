"""The one entry point: :func:`segment`."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from kcpstream.engine.arguments import names_of
from kcpstream.engine.plan import settings_of
from kcpstream.engine.run import segment_signals
from kcpstream.features import FeatureMap
from kcpstream.features.base import DEFAULT_TILE
from kcpstream.inputs.signal import as_signal, batch_signals
from kcpstream.inputs.stores import opened_from, store_input
from kcpstream.persist.checkpoint import check_writable as check_checkpoint
from kcpstream.progress import lines_on_stderr
from kcpstream.result import BatchSegmentation, Segmentation
from kcpstream.selection.significance import DEFAULT_ALPHA

__all__ = ["segment"]

#: What settings_of() checks, and what reads the series (a batch's series are
#: read from an xarray object, so storage options are not theirs).
SETTINGS = names_of("statistics") + names_of("selection") + names_of("run")
READING = tuple(k for k in names_of("input") if k not in ("data", "batch_dims", "storage_options"))


def segment(
    data: Any,
    *,
    features: str | FeatureMap = "auto",
    n_bkps: int | None = None,
    pen: float | str | None = None,
    method: str = "binseg",
    d_max: int | None = None,
    min_size: int | None = None,
    min_duration: Any = None,
    alpha: float = DEFAULT_ALPHA,
    window: int | None = None,
    block_size: int | None = None,
    variable: str | None = None,
    variables: list[str] | None = None,
    dim: str | None = None,
    batch_dims: str | list[str] | None = None,
    chunks: int | None = None,
    missing: str = "error",
    skipna: bool = True,
    storage_options: dict | None = None,
    seed: int | None = None,
    sample_size: int = 2048,
    tile: int = DEFAULT_TILE,
    cache_bytes: int = 256 * 2**20,
    checkpoint: str | os.PathLike | None = None,
    progress: bool = False,
) -> Segmentation | BatchSegmentation:
    """Find the change-points of a signal's distribution by kernel change-point detection.

    The signal is featurized with a low-rank kernel feature map, block
    statistics are accumulated in one dask pass over the data, and binary
    segmentation finds each split exactly, reading again only the few blocks
    that could hold it (a series of at most ``2**22`` samples times features
    is searched in memory instead: the same result, ``diagnostics.in_memory``).
    The user guide (``docs/guide/``) says more on each argument.

    Parameters
    ----------
    data : array-like, dask array, zarr array, xarray.DataArray, str or path
        Samples along time, shape ``(n,)`` or ``(n, d)``; a path or URL opens
        a zarr store (``variable`` names the array in a group).
    features : FeatureMap or str, default "auto"
        A feature map, or its spec ``"name[:p]"`` (``"quadrature"``, ``"rff"``,
        ``"orf"``, ``"matern"``, ``"brownian"``, ``"window"``, ``"temporal"``,
        ``"nystrom"``, ``"sketched_nystrom"``, ``"linear"``).  ``"auto"``:
        windows of the dominant period with :class:`~kcpstream.features.Temporal`
        features when the series has a cycle (segmented with both shape parts,
        each at ``alpha / 2``, the answer with more change-points; see
        :mod:`kcpstream.engine.pair`), else 64 quadrature features of
        the Gaussian kernel (random Fourier features for several channels).
        An unfitted map is fitted on ``sample_size`` points in 8 evenly spaced
        windows (the same for every chunking).
    n_bkps : int, optional
        Number of change-points: the best ``n_bkps`` among the first
        ``d_max - 1`` splits of binary segmentation (an exact DP over them).
    pen : float, "auto" or "slope", optional
        How the number is chosen without ``n_bkps`` (None: ``"auto"``).  ``"auto"``: each split
        is tested against the features' long-run covariance (serial
        dependence is noise, not change; :mod:`kcpstream.selection.significance`) at
        level ``alpha``, with a p-value per change-point (``pvalues``).
        ``"slope"``: Arlot, Celisse & Harchaoui's penalty calibrated by the
        slope heuristic (independent samples).  A number: a penalty per
        change-point in feature units (binary segmentation splits while the
        gain exceeds it).
    method : {"binseg", "dynp"}, default "binseg"
        Binary segmentation with exact splits, or the optimal segmentation
        for every number of segments by dynamic programming on a grid of at
        most 2048 block boundaries holding binary segmentation's
        change-points, refined exactly (exact on up to 2048 samples).
    d_max : int, optional
        Largest number of segments on the path (default 100, at most
        ``n // min_size``; with ``n_bkps``, ``2 * n_bkps + 1`` within that).
    min_size : int, optional
        Fewest samples per segment (whole windows for a window map); default
        ``n // 10_000``, at least 10 samples (or 2 windows; see the guide).
    min_duration : str, timedelta or number, optional
        The shortest segment as a duration of the time coordinate (``"10min"``),
        turned into samples at the mean sampling interval; instead of ``min_size``.
    alpha : float, default 0.01
        Level of the test (``pen="auto"``): a series without change gets a
        change-point with probability about ``alpha``.
    window : int, optional
        Windows of ``window`` samples with ``Temporal`` features (their
        distribution and shapes): changes of shape and frequency, at window resolution.
    block_size : int, optional
        Samples per block of the statistics grid (default: about 2**15
        blocks of at least 64 samples; ``1``: in memory when small enough).
    variable, variables : str, list of str, optional
        The array in a zarr group; variables (of a Dataset, or of a store by
        path: all along time if neither) segmented as channels of one signal.
    dim : str, optional
        Time dimension of an xarray object (default ``"time"``, or its only one).
    batch_dims : str or list of str, optional
        Dimensions of an xarray object along which it holds independent series,
        all segmented in one data pass; returns a :class:`~kcpstream.BatchSegmentation`.
    chunks : int, optional
        Samples per task along time (rounded up to whole stored chunks).
    missing : {"error", "skip", "fill"}, default "error"
        A chunk absent from a zarr store is an :class:`~kcpstream.InputError`
        naming its samples (a lost chunk may be data loss), missing samples
        (``"skip"``: a gap, like NaN), or (``"fill"``) read as the fill value.
    skipna : bool, default True
        A sample with a NaN in any channel is missing: the series is segmented
        as its valid samples alone, exactly (sizes, costs and p-values count
        valid samples only), with positions mapped back to the input's; a
        change-point right after a gap is the first valid sample after it
        (``Segmentation.earliest``: where the gap began).  ``False``: a NaN is
        an :class:`~kcpstream.InputError` giving the count and the first one.
        An infinity is always an error.  See the guide's "Gaps and missing data".
    storage_options : dict, optional
        Options of the object store a URL opens, as fsspec takes them.
    seed, sample_size, tile : int, optional
        Seed of a feature map given as a string; points in the fit sample
        (2048); samples featurized together (4096: memory; see ``checkpoint``).
    cache_bytes : int, default 256 MiB
        Raw samples kept per process so that refinement rarely reads a chunk
        twice; shared by the series of a batch; does not change the result.
    checkpoint : str or path, optional
        A local directory keeping the block statistics under the identity of
        the input (every chunk's version), the fitted map, the block size (and
        ``tile``, for longer blocks): a later call loads them, and a store
        changed since is updated by reading its changed chunks; never stale.
    progress : bool, default False
        A line per phase on stderr and the data pass's progress bar
        (:mod:`kcpstream.progress` logs the lines either way).

    Returns
    -------
    Segmentation or BatchSegmentation
        Change-points, p-values, the cost path, how the number was chosen,
        the fitted map and diagnostics (one per series with ``batch_dims``).

    Raises
    ------
    kcpstream.InputError
        For input that cannot be segmented as given (inf, NaN with
        ``skipna=False``, too few valid samples,
        wrong shape or dtype, constant, ...), with the fix in the message.

    Examples
    --------
    >>> import numpy as np, kcpstream
    >>> rng = np.random.default_rng(0)
    >>> x = np.concatenate([rng.normal(0, 1, 500), rng.normal(0, 3, 500)])
    >>> kcpstream.segment(x, n_bkps=1).changepoints
    array([500])
    >>> kcpstream.segment(x).changepoints  # the number chosen by the test
    array([500])
    """
    given = locals()  # the arguments, by the parts kcpstream.engine.arguments declares
    t0 = time.perf_counter()
    settings, features = settings_of(**{k: given[k] for k in SETTINGS})
    if checkpoint is not None:
        check_checkpoint(checkpoint)
    reading = {k: given[k] for k in READING}
    with lines_on_stderr(settings.progress):
        data, storage_options = store_input(data, reading, bool(batch_dims), storage_options)
        if batch_dims:
            dims, labels, signals, parts = batch_signals(data, batch_dims, **reading)
            settings = dataclasses.replace(settings, n_series=len(signals))
            results = segment_signals(signals, features, settings, t0)
            kept = [r.keep_input(p, reading) for r, p in zip(results, parts, strict=True)]
            return BatchSegmentation(dims, labels, kept)
        signal = as_signal(data, storage_options=storage_options, **reading)
        res = segment_signals([signal], features, settings, t0)[0]
        path = opened_from(given["data"], variable, variables, dim)
        return res.keep_input(data, {**reading, "storage_options": storage_options}, path)
