"""The headroom of the exact integer sums: checked before the data pass from
the series' length and the fitted map, and after it from the features measured.

Features are integers on the map's grid and their sums are int64 (see
:mod:`kcpstream._kernels.blockstats`).  A map that bounds every coordinate
(:attr:`~kcpstream.features.base.FeatureMap.quantized_amplitude_bound_`) is
put on a grid that holds the series before anything is read
(:meth:`~kcpstream.features.base.FeatureMap.holding`), so its sums cannot
overflow.  A map whose features depend on the data is checked after the pass
against the norms it measured: a signal far outside the range of the fit
sample is named, with the sample where its features are largest.

The input's dtype adds nothing that could be checked before the pass: a
bounded map is bounded whatever the samples are, and for a map whose
features depend on the data a dtype's range (an integer store's) can only
show the sums safe, never that they overflow, since the samples need not
reach the ends of the range.  A real range violation can only be known from
the samples, and is named after the pass.
"""

from __future__ import annotations

import numpy as np

from kcpstream.errors import InputError
from kcpstream.features import FeatureMap
from kcpstream.features.base import SUM_BITS
from kcpstream.inputs.signal import Signal
from kcpstream.passes import sliced


def float_summed(tile: int, block_size: int) -> int:
    """The most samples whose features are summed in float64: a piece of a
    tile in the data pass (a tile is cut at block boundaries), or a piece a
    refinement scans whole (longer ones are scanned in slices)."""
    return max(min(tile, block_size), sliced.LONG_PIECE)


def check_before_pass(signal: Signal, fmap: FeatureMap, tile: int, block_size: int) -> None:
    """Before any read: a map not on a grid that holds the series is a defect,
    and the pieces of a tile that the float64 arithmetic of the data pass could
    not sum exactly are an :class:`InputError` (a refinement's scans take
    pieces short enough, :func:`~kcpstream.passes.sliced.whole_length`)."""
    bound = fmap.quantized_amplitude_bound_
    if bound <= 0:  # the map's features are measured by the data pass
        return
    if signal.n > fmap.capacity_:
        raise RuntimeError(  # FeatureMap.holding gives every bounded map the grid of n
            f"{type(fmap).__name__} on a grid of 2**-{fmap.quantum_exponent_} holds "
            f"{fmap.capacity_} samples, not {signal.n}"
        )
    if bound * min(tile, block_size) >= 2.0**sliced.FLOAT_SUM_BITS:
        raise InputError(
            f"tile={tile} is too large for the exact sums of {type(fmap).__name__} "
            "features over a tile; use a smaller tile"
        )


def check_after_pass(stats, signal: Signal, fmap: FeatureMap, tile: int, locate) -> None:
    """After the data pass, for a map whose features depend on the data: the
    sums of absolute features its measured norms bound must stay below
    ``2**SUM_BITS`` (no int64 sum could have wrapped), and those of
    ``float_summed(tile, block_size)`` samples below ``2**52``; otherwise the signal is far
    outside the fit sample's range, and the error names the sample whose
    features are largest (``locate(a, b)`` describes it among samples ``a`` to
    ``b``, or None to name the block's range)."""
    if fmap.quantized_amplitude_bound_ > 0 or stats.n_blocks == 0:
        return  # bounded by the map, on a grid that holds the series
    norms = np.sqrt(stats.max_norm2)
    counts = np.full(stats.n_blocks, float(stats.block_size))
    counts[-1] = stats.n - (stats.n_blocks - 1) * stats.block_size
    reach = float(norms @ counts)  # bounds the sum of |q_j| over any range
    largest = float(norms.max())
    if (
        reach < 2.0**SUM_BITS
        and largest * float_summed(tile, stats.block_size) < 2.0**sliced.FLOAT_SUM_BITS
    ):
        return
    block = int(np.argmax(norms))
    a, b = block * stats.block_size, min(stats.n, (block + 1) * stats.block_size)
    at = locate(a, b) or f"samples {a} to {b - 1}"
    ratio = largest / 2.0**fmap.quantum_exponent_
    raise InputError(
        f"{signal.description} has values far outside the range of the fit sample: "
        f"its features reach a norm of {ratio:.3g} (at {at}), beyond what the exact "
        f"integer sums of {stats.n} samples on the grid fitted for that sample hold. "
        "Fit the feature map on a sample that covers the signal's range and pass it "
        "as features=, or standardise the signal"
    )
