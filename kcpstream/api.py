"""The one entry point: :func:`segment`."""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from . import checkpoint
from .engine import prepare, run
from .errors import InputError
from .features import FeatureMap
from .features.base import DEFAULT_TILE
from .plan import (
    auto_block_size,
    default_min_size,
    settings_of,
)
from .progress import lines_on_stderr
from .result import Segmentation
from .signal import as_signal
from .significance import DEFAULT_ALPHA

__all__ = ["segment", "auto_block_size", "default_min_size"]


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
    storage_options: dict | None = None,
    seed: int | None = None,
    sample_size: int = 2048,
    tile: int = DEFAULT_TILE,
    cache_bytes: int = 256 * 2**20,
    checkpoint: str | os.PathLike | None = None,
    progress: bool = False,
) -> Segmentation:
    """Find the change-points of a signal's distribution by kernel change-point detection.

    The signal is featurized with a low-rank kernel feature map, block
    statistics are accumulated in one dask pass over the data, and binary
    segmentation finds, at each step, exactly the split a full scan of every
    sample would find, reading again only the few blocks that could hold it.
    A series of at most ``DENSE_MAX_VALUES`` (``2**22``) samples times
    features is featurized whole in one task instead and searched in memory
    over the exact prefix sum of every position: the same result, without
    the block grid's refinement rounds (``diagnostics.in_memory``; in a
    batch, as long as those series hold at most ``DENSE_BATCH_BYTES``, 1 GiB,
    of prefix sums together).

    Parameters
    ----------
    data : array-like, dask array, zarr array, xarray.DataArray, str or path
        Samples along time, shape ``(n,)`` or ``(n, d)``; a path or URL opens
        a zarr store (``variable`` names the array in a group).
    features : FeatureMap or str, default "auto"
        Feature map, as an instance or a spec ``"name[:p]"`` (``"rff"``,
        ``"orf"``, ``"matern"``, ``"quadrature"``, ``"brownian"``, ``"window"``,
        ``"nystrom"``, ``"sketched_nystrom"``, ``"linear"``).  ``"auto"``: 64
        Gauss-Hermite quadrature features of the Gaussian kernel for a
        univariate signal (the exact kernel to float32 precision), 64 random
        Fourier features otherwise.  An unfitted map is fitted on a sample of
        ``sample_size`` points in 8 evenly spaced windows of consecutive
        samples (the same for every chunking); a fitted one is used as it is.
    n_bkps : int, optional
        Number of change-points to find: the best ``n_bkps`` (least total
        cost) among the first ``d_max - 1`` splits of binary segmentation's
        path, by an exact DP over them (default: twice ``n_bkps`` candidates;
        ``d_max=n_bkps + 1`` returns binary segmentation's own first splits).
    pen : float, "auto" or "slope", default "auto"
        How to choose the number of change-points when ``n_bkps`` is not
        given.  ``"auto"`` (the default): binary segmentation's splits are
        tested top down, each against the features' long-run covariance
        estimated from the block statistics (serial dependence and heavy
        tails count as noise, not as change; a cycle only where the batch
        means reach its scale, see the README's measured limits and
        :mod:`kcpstream.significance`); a split counts when its
        p-value is at most ``alpha`` and the split above it counted, and the
        best segmentation with that many change-points among the path's is
        returned once each of its change-points is significant between its
        neighbours (a larger one when all of its change-points are, at
        ``alpha`` corrected for where their neighbours could lie: a short
        segment inside a long one), with a p-value per change-point
        (``pvalues``).
        ``"slope"``: the penalty ``c1 log binom(n-1, D-1) + c2 D`` of Arlot,
        Celisse & Harchaoui, calibrated on the path by the slope heuristic
        (:mod:`kcpstream.select`), which assumes independent samples.  A number: a
        linear penalty per change-point (feature units: gains are decreases
        of ``sum ||phi(x_i) - mean||^2``); binary segmentation splits while
        the best gain exceeds it (ruptures' ``Binseg`` with ``pen``), dynamic
        programming minimises cost + pen * K.
    method : {"binseg", "dynp"}, default "binseg"
        ``"binseg"``: binary segmentation, each split exact; its path's
        change-points are the candidates ``n_bkps`` and ``"auto"`` choose
        among (never a higher cost than its own first splits).  ``"dynp"``:
        the optimal segmentation for every number of segments by dynamic
        programming on a grid of at most 2048 block boundaries that contains
        binary segmentation's change-points (so never worse than it), then
        exact local refinement of the chosen change-points.  Exact kernel
        change-point detection on signals of up to 2048 samples.
    d_max : int, optional
        Largest number of segments on the path: binary segmentation makes
        ``d_max - 1`` splits (fewer if no segment can be split).  Default:
        100 (at most ``n // min_size``) for ``pen="auto"``; with ``n_bkps``,
        ``2 * n_bkps + 1`` within that (at least ``n_bkps + 1``).  Unused
        with a numeric ``pen``.
    min_size : int, optional
        Every segment keeps at least ``min_size`` samples (for a window map,
        the whole windows that hold them: ``ceil(min_size / window)``).
        Default: ``max(2, n // 10_000)`` samples, or windows for a window map
        (:data:`MIN_SEGMENT_SHARE` of the series): on a long signal no
        segment of a few samples, whose gain is the few samples' own noise.
        ``Segmentation.min_size`` is the minimum applied, in samples.
    min_duration : str, timedelta or number, optional
        The shortest segment as a duration of the time coordinate, instead
        of ``min_size``: ``"10min"``, ``pandas.Timedelta`` or
        ``datetime.timedelta`` for datetimes, a number in the coordinate's
        units otherwise.  It becomes ``min_size`` samples at the mean
        sampling interval ``(t[n-1] - t[0]) / (n - 1)`` (two values of the
        coordinate are read); ``Segmentation.min_size`` says how many.
    alpha : float, default 0.01
        Level of the test of each split (``pen="auto"``): a series without
        change gets a change-point with probability about ``alpha``, serial
        dependence accounted for (see :mod:`kcpstream.significance`).
    window : int, optional
        A hint, in samples, of the length of the temporal patterns (a period,
        a waveform): the signal is segmented as a sequence of windows of
        ``window`` samples with :class:`~kcpstream.features.Temporal`
        features (each window's distribution and the shapes it traces), which
        see changes of shape and frequency that a pointwise kernel does not;
        change-points then have window resolution.  By default
        (``features="auto"``) the window is the signal's dominant
        period when it has one (:func:`kcpstream.period.dominant_period` on
        up to 8 disjoint stretches of 8192 samples spread over the series,
        every channel: periods up to 1024 samples), at most ``n // 16`` samples so that the
        test has enough windows; without a significant period the samples
        are segmented one by one.  Give ``window`` for longer cycles.
    block_size : int, optional
        Samples per block of the statistics grid (default: one per sample for
        a series searched in memory; otherwise about 2**15 blocks, at least
        64 samples each, and in a batch of more than 32 series 2**20 blocks
        shared among them).  Given, it selects the block grid (``1``: in
        memory when the series is small enough).
    variable : str, optional
        Array name inside a zarr group.
    variables : list of str, optional
        Variables of a Dataset segmented jointly, as channels of one signal
        (default: every variable with the time dimension).
    dim : str, optional
        Time dimension of an xarray object (default ``"time"``, or its only
        dimension).  Other dimensions are channels; the result's
        change-points carry the time coordinate (``changepoint_times``,
        ``to_xarray()``, ``to_dataframe()``).
    batch_dims : str or list of str, optional
        Dimensions of an xarray object along which it holds independent
        series (one per sensor, say): each is segmented on its own (its own
        fitted features), all in one data-pass graph with their refinement
        reads batched in the same rounds.  Returns a
        :class:`~kcpstream.BatchSegmentation`.
    chunks : int, optional
        Chunk length along time of the tasks (in-memory input is wrapped
        without a copy).  For a zarr store it is rounded up to whole stored
        chunks: a store decodes whole chunks, so a task on part of one would
        decode all of it.  A stored chunk much longer than a task is read once
        and featurized in slices by several tasks (one task per chunk under a
        pool of processes, which would copy it to each).
    missing : {"error", "fill"}, default "error"
        A chunk absent from a zarr store (zarr reads it as the fill value) is
        an :class:`~kcpstream.InputError` naming its samples; ``"fill"`` reads
        it as the fill value, for stores that leave out chunks that are all
        fill values (zarr's default when writing).
    storage_options : dict, optional
        Options of the object store a URL opens, as fsspec takes them (for
        S3: ``endpoint_url``, ``key``, ``secret``, ``anon``,
        ``client_kwargs``, ...).
    seed : int, optional
        Seed for a feature map given as a string (default: the map's own
        default, 0).
    sample_size : int, default 2048
        Points in the fit sample (bandwidth, landmarks).
    tile : int, default 4096
        Samples featurized together (memory ``4 * p * tile`` bytes per task;
        does not change the result).
    cache_bytes : int, default 256 MiB
        Raw samples kept in memory so that no chunk is read twice: the chunks
        the fit sample read (until the data pass has them), the chunks the
        data pass read that are most likely to be read again by refinement,
        and pieces read since (copies of pieces, so that a piece does not
        keep the chunk it was read from).  The budget is the call's, shared
        by the series of a batch, and per process: the client's under the
        threaded or synchronous scheduler,
        each worker's under a ``distributed`` client (the data pass and
        refinement are sent to the worker that read the chunk; workers drop
        these samples when the call returns).  0 disables it; the result does
        not depend on it.  ``diagnostics.samples_read_again`` counts the
        samples read a second time.
    checkpoint : str or path, optional
        A local directory where the block statistics and the segments
        evaluated are kept, keyed by the identity of the input, the fitted
        feature map and the block size.  The identity of a zarr store is its
        array's metadata and the version of every chunk (size and
        modification time on a file system, the ETag on an object store), so
        a chunk rewritten in place, an append or a changed codec gives
        another key; an in-memory array's identity is a hash of its bytes.
        A later call on the same data loads them (no data pass) and reads
        only what it has not read before.  Writes are atomic; a damaged or
        partial checkpoint is recomputed, never used (see
        :mod:`kcpstream.checkpoint`).  An input whose origin cannot be
        followed (a dask array computed from other arrays) is refused.  When
        the store changed since (chunks rewritten, appended, cut off), the
        statistics of the unchanged chunks are kept and only the others read
        (``diagnostics.checkpoint == "updated"``; :mod:`kcpstream.reuse`).
    progress : bool, default False
        Show how far the call has got on stderr: a line per phase (the fit,
        the data pass, each round of refinement, the choice; see
        :mod:`kcpstream.progress`, which also logs them without this) and
        the data pass's progress bar (dask's, or distributed's under a
        client).

    Returns
    -------
    Segmentation or BatchSegmentation
        Change-points, gains, the cost path and how the number of
        change-points was chosen, the fitted feature map and diagnostics
        (one per series with ``batch_dims``).

    Raises
    ------
    kcpstream.signal.InputError
        For input that cannot be segmented as given (NaN/inf, too short,
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
    t0 = time.perf_counter()
    settings, features = settings_of(
        features=features, n_bkps=n_bkps, pen=pen, method=method, d_max=d_max,
        min_size=min_size, min_duration=min_duration, alpha=alpha, window=window,
        block_size=block_size, seed=seed, sample_size=sample_size, tile=tile,
        cache_bytes=cache_bytes, checkpoint=checkpoint, progress=progress,
    )  # fmt: skip
    if checkpoint is not None:
        _check_checkpoint(checkpoint)
    with lines_on_stderr(settings.progress):
        return _segment(data, features, settings, t0, variable=variable, variables=variables,
                        dim=dim, chunks=chunks, missing=missing, batch_dims=batch_dims,
                        storage_options=storage_options)  # fmt: skip


def _segment(data, features, settings, t0: float, *, variable, variables, dim, chunks, missing,
             batch_dims, storage_options):  # fmt: skip
    """:func:`segment` once its settings are checked: the series, their jobs, the run."""
    if batch_dims:
        from .labeled import split_batches
        from .result import BatchSegmentation
        from .signal import _is_labeled

        if not _is_labeled(data):
            raise InputError("batch_dims applies to xarray input (a DataArray or a Dataset)")
        batch_dims = [batch_dims] if isinstance(batch_dims, str) else list(batch_dims)
        parts = split_batches(data, batch_dims)
        listed: dict = {}  # each store is listed once for the whole batch
        signals = [
            as_signal(sub, variables=variables, dim=dim, chunks=chunks, missing=missing,
                      listed=listed)
            for _, sub in parts
        ]  # fmt: skip
        settings = dataclasses.replace(settings, n_series=len(signals))
        jobs = [prepare(sig, features, settings) for sig in signals]
        results = run(jobs, settings, t0)
        return BatchSegmentation(batch_dims, [labels for labels, _ in parts], results)
    if storage_options is not None and not isinstance(storage_options, dict):
        raise InputError(
            f"storage_options must be a dict of the object store's options, got "
            f"{type(storage_options).__name__}"
        )
    signal = as_signal(
        data, variable=variable, variables=variables, dim=dim, chunks=chunks, missing=missing,
        storage_options=storage_options,
    )  # fmt: skip
    return run([prepare(signal, features, settings)], settings, t0)[0]


def _check_checkpoint(path) -> None:
    try:
        checkpoint.check_writable(path)
    except ValueError as exc:  # a URL: the same one-line error type
        raise InputError(str(exc)) from None
