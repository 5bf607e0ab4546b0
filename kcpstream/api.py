"""The one entry point: :func:`segment`."""

from __future__ import annotations

import copy
import math
import time
from typing import Any

import numpy as np

from .features import FeatureMap, make_feature_map
from .features.base import DEFAULT_TILE
from .passes import SampleCache, data_pass
from .result import Diagnostics, Segmentation
from .search import SearchLog, binary_segmentation
from .signal import InputError, Signal, as_signal, check_finite_index

__all__ = ["segment", "auto_block_size"]

#: Blocks the automatic grid aims at: enough for tight pruning bounds, few enough
#: that the prefix sums (``8 p`` bytes per block) and the per-segment boundary
#: scans stay small (16 MiB of prefix sums at p = 64).
TARGET_BLOCKS = 2**15
#: Smallest automatic block size.
MIN_AUTO_BLOCK = 16
#: Largest block size: a refinement read keeps one block's features in memory.
MAX_BLOCK = 2**18


def auto_block_size(n: int) -> int:
    """Block size B for ``n`` samples: about :data:`TARGET_BLOCKS` blocks, at least 16.

    Smaller blocks make the pruning bounds tighter (fewer samples read again)
    at the price of a larger grid (``8 * (2 p + 6)`` bytes per block) and
    longer boundary scans.
    """
    return int(min(MAX_BLOCK, max(MIN_AUTO_BLOCK, -(-n // TARGET_BLOCKS))))


def _check_positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def segment(
    data: Any,
    *,
    features: str | FeatureMap = "rff:64",
    n_bkps: int | None = None,
    pen: float | None = None,
    min_size: int = 2,
    block_size: int | None = None,
    variable: str | None = None,
    dim: str | None = None,
    chunks: int | None = None,
    seed: int | None = None,
    sample_size: int = 2048,
    tile: int = DEFAULT_TILE,
    cache_bytes: int = 256 * 2**20,
) -> Segmentation:
    """Find the change-points of a signal's distribution by kernel change-point detection.

    The signal is featurized with a low-rank kernel feature map, block
    statistics are accumulated in one dask pass over the data, and binary
    segmentation finds, at each step, exactly the split a full scan of every
    sample would find, reading again only the few blocks that could hold it.

    Parameters
    ----------
    data : array-like, dask array, zarr array, xarray.DataArray, str or path
        Samples along time, shape ``(n,)`` or ``(n, d)``; a path or URL opens
        a zarr store (``variable`` names the array in a group).
    features : FeatureMap or str, default "rff:64"
        Feature map, as an instance or a spec ``"name[:p]"``: ``"rff"``,
        ``"nystrom"``, ``"linear"``.  An unfitted map is fitted on a sample of
        ``sample_size`` points in 8 evenly spaced windows of consecutive
        samples (the same for every chunking); a fitted one is used as it is.
    n_bkps : int, optional
        Number of change-points to find.
    pen : float, optional
        Split while the best gain exceeds ``pen`` (feature units: gains are
        decreases of ``sum ||phi(x_i) - mean||^2``).  Give exactly one of
        ``n_bkps`` and ``pen``.
    min_size : int, default 2
        Every segment keeps at least ``min_size`` samples.
    block_size : int, optional
        Samples per block of the statistics grid (default: about 2**15
        blocks, at least 16 samples each).
    variable : str, optional
        Array name inside a zarr group.
    dim : str, optional
        Time dimension of a DataArray.
    chunks : int, optional
        Chunk length along time (in-memory input is wrapped without a copy).
    seed : int, optional
        Seed for a feature map given as a string (default: the map's own
        default, 0).
    sample_size : int, default 2048
        Points in the fit sample (bandwidth, landmarks).
    tile : int, default 4096
        Samples featurized together (memory ``4 * p * tile`` bytes per task;
        does not change the result).
    cache_bytes : int, default 256 MiB
        Raw samples kept in memory for the refinement reads: chunks the data
        pass read (only with a scheduler in this process, where keeping them
        costs no copy) and pieces read since.  0 disables it; the result
        does not depend on it.

    Returns
    -------
    Segmentation
        Change-points, gains, the cost path, the fitted feature map and
        diagnostics.

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
    """
    t0 = time.perf_counter()
    min_size = _check_positive_int("min_size", min_size)
    tile = _check_positive_int("tile", tile)
    cache_bytes = _check_positive_int("cache_bytes", cache_bytes, 0)
    sample_size = _check_positive_int("sample_size", sample_size, 2)
    if n_bkps is None and pen is None:
        raise InputError("give n_bkps=<number of change-points> or pen=<penalty per split>")
    if n_bkps is not None and pen is not None:
        raise InputError("give n_bkps or pen, not both")
    if n_bkps is not None:
        n_bkps = _check_positive_int("n_bkps", n_bkps, 0)
    if pen is not None:
        if isinstance(pen, bool) or not isinstance(pen, int | float | np.number):
            raise InputError(f"pen must be a number >= 0, got {pen!r}")
        pen = float(pen)
        if not (math.isfinite(pen) and pen >= 0):
            raise InputError(f"pen must be a finite number >= 0, got {pen!r}")

    signal = as_signal(data, variable=variable, dim=dim, chunks=chunks)
    n = signal.n
    if n < 2 * min_size:
        raise InputError(
            f"{signal.description} has {n} samples, fewer than 2*min_size={2 * min_size}: "
            "no split can leave min_size samples on both sides; use a smaller min_size "
            "or a longer signal"
        )
    if n_bkps is not None and n_bkps > n // min_size - 1:
        raise InputError(
            f"n_bkps={n_bkps} change-points cannot fit in {n} samples with min_size={min_size} "
            f"(at most {n // min_size - 1}); ask for fewer or lower min_size"
        )

    fmap = make_feature_map(features, seed=seed)
    if block_size is None:
        B = auto_block_size(n)
    else:
        B = _check_positive_int("block_size", block_size)
        if B > MAX_BLOCK:
            raise InputError(
                f"block_size={B} is larger than {MAX_BLOCK}: a refinement read keeps one "
                "block's features in memory; use a smaller block_size"
            )
    cache = SampleCache(B, max_bytes=cache_bytes)
    if not fmap.is_fitted:
        fmap = copy.deepcopy(fmap)  # the caller's map stays unfitted
        sample = signal.sample(max_points=sample_size, cache=cache)
        if not np.isfinite(sample).all():
            check_finite_index(signal.first_nonfinite(), signal.description)
        fmap.fit(sample)
    elif fmap.n_features_in_ != signal.d:
        raise InputError(
            f"the fitted feature map expects d={fmap.n_features_in_} channels but "
            f"{signal.description} has d={signal.d}; pass an unfitted map to refit"
        )

    t_pass = time.perf_counter()
    stats = data_pass(signal, fmap, B, tile, cache)
    seconds_pass = time.perf_counter() - t_pass
    _check_statistics(stats, signal)

    log = SearchLog()
    order = binary_segmentation(
        stats, signal, fmap, min_size=min_size, n_bkps=n_bkps, pen=pen, tile=tile, log=log,
        cache=cache,
    )  # fmt: skip
    return _build_result(stats, signal, fmap, order, log, min_size, n_bkps, pen, t0, seconds_pass)


def _check_statistics(stats, signal: Signal) -> None:
    qmax = math.sqrt(stats.global_max_norm2)
    # block sums are exact integers held in float64 only below 2**53, prefix sums in int64
    if qmax * stats.block_size >= 2.0**52 or qmax * stats.n >= 2.0**62:
        raise InputError(
            f"{signal.description} has values far outside the range of the fit sample "
            f"(feature norm up to {qmax * 2.0**-stats.quantum_exponent:.3g}); the exact integer "
            "sums would overflow. Standardise the signal, or fit the feature map on a sample "
            "that covers its range and pass it as features="
        )
    s_total, q_total = stats.range_sum(0, stats.n)
    sf = s_total.astype(np.float64)
    spread = q_total - float(sf @ sf) / stats.n
    if spread <= 1e-12 * max(q_total, 1.0):
        raise InputError(
            f"{signal.description} is constant in feature space (every sample has the same "
            "features): there is no change to find. If the signal varies, the bandwidth may be "
            "far too large for its scale; pass an explicit bandwidth"
        )


def _build_result(stats, signal, fmap, order, log, min_size, n_bkps, pen, t0, seconds_pass):
    path = np.array([seg.split for seg in order], dtype=np.int64)
    path_gains = np.array([seg.gain for seg in order], dtype=np.float64) * stats.unit
    costs = [stats.cost(0, stats.n)]
    for seg in order:  # each split replaces one segment's cost by its two halves'
        a, c, e = seg.start, seg.split, seg.end
        costs.append(costs[-1] - stats.cost(a, e) + stats.cost(a, c) + stats.cost(c, e))
    sort = np.argsort(path, kind="stable")
    featurized = stats.n + log.samples_scanned
    diagnostics = Diagnostics(
        samples_featurized=int(featurized),
        passes=featurized / stats.n,
        seconds=time.perf_counter() - t0,
        seconds_data_pass=seconds_pass,
        n_blocks=stats.n_blocks,
        block_size=stats.block_size,
        n_chunks=len(signal.data.chunks[0]),
        rounds=log.rounds,
        pieces_scanned=log.pieces_scanned,
        samples_scanned=log.samples_scanned,
    )
    return Segmentation(
        changepoints=path[sort],
        gains=path_gains[sort],
        order=path,
        path_costs=np.asarray(costs, dtype=np.float64),
        n_samples=stats.n,
        min_size=min_size,
        features=fmap,
        diagnostics=diagnostics,
        params={"n_bkps": n_bkps, "pen": pen, "method": "binseg", "source": signal.source},
    )
