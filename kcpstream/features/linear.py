"""Identity features: the linear kernel, i.e. the classical mean-change cost."""

from __future__ import annotations

from typing import Self

import numpy as np

from kcpstream._kernels.featurize import linear_tile
from kcpstream.errors import InputError
from kcpstream.features.base import FeatureMap, as_sample, exponent_for_amplitude

__all__ = ["Linear"]


class Linear(FeatureMap):
    """``phi(x) = x - c`` with ``c`` the sample median (the cost does not depend on c).

    The segment cost is then the least-squares cost of a change in the mean
    (ruptures' ``"l2"``).  The output dimension is the input dimension d.

    Parameters
    ----------
    n_features : int or None
        Must be None or equal to d (kept for a uniform interface).
    """

    name = "linear"
    _param_names = ("n_features",)
    _fitted_names = ("center_", "quantum_exponent_")

    def __init__(self, n_features: int | None = None) -> None:
        if n_features is not None and (
            not isinstance(n_features, int | np.integer) or n_features < 1
        ):
            raise InputError(
                f"Linear n_features must be None or the input dimension, got {n_features!r}"
            )
        self.n_features = None if n_features is None else int(n_features)

    @property
    def n_features_out_(self) -> int:
        return self.n_features_in_

    def fit(self, sample: np.ndarray) -> Self:
        x = as_sample(sample)
        if self.n_features is not None and self.n_features != x.shape[1]:
            raise InputError(
                f"Linear features have the input's dimension d={x.shape[1]}, "
                f"not n_features={self.n_features}; leave n_features unset"
            )
        self.center_ = np.median(x, axis=0)
        amplitude = float(np.max(np.abs(x - self.center_))) if x.size else 0.0
        self.quantum_exponent_ = exponent_for_amplitude(amplitude)
        return self

    def featurize_tile(self, x: np.ndarray, out: np.ndarray) -> None:
        linear_tile(x, self.center_, out)
