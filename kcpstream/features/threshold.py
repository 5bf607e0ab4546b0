"""Brownian threshold features: indicators of the signal above fitted quantiles."""

from __future__ import annotations

from typing import Self

import numpy as np

from kcpstream._kernels.blockstats import threshold_tile_stats
from kcpstream.errors import InputError
from kcpstream.features.base import FeatureMap, as_sample, exponent_for_amplitude

__all__ = ["BrownianThreshold"]


class BrownianThreshold(FeatureMap):
    """``phi(x) = [1{x_c > t_ck}]_{c, k} / sqrt(K)``: K thresholds per channel.

    The random-feature view of the Brownian-motion kernel ``min(x, y)``: with
    thresholds at quantiles of the law, ``<phi(x), phi(y)>`` is the share of
    thresholds below both ``x`` and ``y``, and the mean embedding of a segment
    is its empirical distribution function at the thresholds -- so the cost
    sees any change of a univariate law (a distribution-free, rank-like
    cost).  Thresholds are the quantiles ``(k + 1/2) / K`` of the fit sample,
    per channel; there is no bandwidth and no randomness.

    The block statistics are accumulated from per-block histograms of
    ``#{k: t_k < x}`` (one binary search per sample and channel), not from
    dense feature vectors.

    Parameters
    ----------
    n_features : int
        Thresholds K per channel; the output dimension is ``K * d``.
    seed : ignored (kept for a uniform interface)
    """

    name = "brownian"
    _param_names = ("n_features", "seed")
    _fitted_names = ("center_", "thresholds_", "quantum_exponent_")

    def __init__(self, n_features: int = 32, *, seed: int | None = 0) -> None:
        if not isinstance(n_features, int | np.integer) or n_features < 1:
            raise InputError(
                f"BrownianThreshold needs n_features >= 1 thresholds, got {n_features!r}"
            )
        self.n_features = int(n_features)
        self.seed = seed

    @property
    def n_features_out_(self) -> int:
        self._check_fitted()
        return int(self.thresholds_.size)

    @property
    def _amplitude(self) -> np.float32:
        return np.float32(1.0 / np.sqrt(self.thresholds_.shape[1]))

    @property
    def _qv(self) -> int:
        """The quantized value of one indicator: exactly what ``transform`` gives."""
        return int(np.rint(np.float64(self._amplitude) * 2.0**self.quantum_exponent_))

    @property
    def quantized_norm_bound_(self) -> float:
        """At most K indicators per channel are on."""
        self._check_fitted()
        return float(self._qv * np.sqrt(self.thresholds_.size))

    @property
    def quantized_amplitude_bound_(self) -> float:
        """An indicator is off or exactly one quantized value."""
        self._check_fitted()
        return float(self._qv)

    def fit(self, sample: np.ndarray) -> Self:
        x = as_sample(sample)
        K = self.n_features
        levels = (np.arange(K) + 0.5) / K
        self.thresholds_ = np.ascontiguousarray(np.quantile(x, levels, axis=0).T, dtype=np.float64)
        self.center_ = np.median(x, axis=0)
        self.quantum_exponent_ = exponent_for_amplitude(float(1.0 / np.sqrt(K)))
        return self

    def featurize_tile(self, x: np.ndarray, out: np.ndarray) -> None:
        x = np.asarray(x, dtype=np.float64)
        for c in range(self.thresholds_.shape[0]):
            K = self.thresholds_.shape[1]
            above = x[:, c : c + 1] > self.thresholds_[c][None, :]
            np.multiply(above, self._amplitude, out=out[0][:, c * K : (c + 1) * K])

    def accumulate_tile_stats(  # type: ignore[override]
        self, x, tile_start, block_size, first_block, cnt, S, Q, M2, R
    ) -> None:
        """Block statistics of a tile directly from histograms (see the class docstring)."""
        threshold_tile_stats(
            np.ascontiguousarray(x, dtype=np.float64),
            self.thresholds_,
            self._qv,
            tile_start,
            block_size,
            first_block,
            cnt,
            S,
            Q,
            M2,
            R,
        )
