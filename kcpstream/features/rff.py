"""Random Fourier features (Rahimi & Recht) with cos/sin pairs."""

from __future__ import annotations

from typing import Literal, Self

import numpy as np

from .._kernels.featurize import rff_tile
from .bandwidth import resolve_bandwidth
from .base import FeatureMap, as_sample, exponent_for_amplitude

__all__ = ["RFF"]


def resolve_seed(seed: int | None) -> int:
    """The seed to use: ``seed`` itself, or fresh entropy when it is None."""
    if seed is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
    return int(seed)


class RFF(FeatureMap):
    """Random Fourier features for a shift-invariant kernel.

    ``phi(x) = sqrt(1/m) [cos(W^T (x - c)), sin(W^T (x - c))]`` with ``m =
    n_features / 2`` frequencies, so ``||phi(x)|| = 1`` exactly and
    ``<phi(x), phi(y)>`` is an unbiased estimate of ``k(x, y)``.  Centring on
    the sample median ``c`` does not change the kernel and keeps the arguments
    of the float32 trigonometry small.

    Parameters
    ----------
    n_features : int
        Output dimension p (even).
    kernel : {"gaussian", "laplacian"}
        ``"gaussian"``: ``k(x, y) = exp(-||x - y||^2 / (2 sigma^2))``, normal
        frequencies.  ``"laplacian"``: ``k(x, y) = exp(-||x - y||_1 / sigma)``,
        Cauchy frequencies.
    bandwidth : float or "median"
        sigma, or the median pairwise distance of the fit sample (Euclidean
        for the Gaussian kernel, L1 for the Laplacian).
    seed : int or None
        Seed of the frequencies (None: fresh entropy, recorded in ``seed_``).
    """

    name = "rff"
    _param_names = ("n_features", "kernel", "bandwidth", "seed")
    _fitted_names = ("center_", "bandwidth_", "weights_", "quantum_exponent_", "seed_")

    def __init__(
        self,
        n_features: int = 64,
        *,
        kernel: Literal["gaussian", "laplacian"] = "gaussian",
        bandwidth: float | str = "median",
        seed: int | None = 0,
    ) -> None:
        if not isinstance(n_features, int | np.integer) or n_features < 2 or n_features % 2:
            raise ValueError(
                f"RFF needs an even n_features >= 2 (cos/sin pairs), got {n_features!r}; "
                "for example n_features=64"
            )
        if kernel not in ("gaussian", "laplacian"):
            raise ValueError(f"RFF kernel must be 'gaussian' or 'laplacian', got {kernel!r}")
        self.n_features = int(n_features)
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.seed = seed

    @property
    def n_features_out_(self) -> int:
        return self.n_features

    @property
    def tile_groups_(self) -> tuple[int, int]:
        return 2, self.n_features // 2

    @property
    def quantized_norm_bound_(self) -> float:
        """``||phi|| = 1`` exactly; float32 trigonometry and products add at most
        a few ulps per value (``1e-5`` covers them) and rounding onto the grid at
        most ``0.5`` per coordinate."""
        self._check_fitted()
        return 2.0**self.quantum_exponent_ * (1 + 1e-5) + 0.5 * np.sqrt(self.n_features)

    def fit(self, sample: np.ndarray) -> Self:
        x = as_sample(sample)
        metric = "euclidean" if self.kernel == "gaussian" else "cityblock"
        sigma = resolve_bandwidth(self.bandwidth, x, metric)
        seed = resolve_seed(self.seed)
        rng = np.random.default_rng(seed)
        m = self.n_features // 2
        d = x.shape[1]
        if self.kernel == "gaussian":
            w = rng.standard_normal((d, m)) / sigma
        else:
            w = rng.standard_cauchy((d, m)) / sigma
        self.center_ = np.median(x, axis=0)
        self.bandwidth_ = float(sigma)
        self.weights_ = w.astype(np.float32)
        self.quantum_exponent_ = exponent_for_amplitude(float(np.sqrt(1.0 / m)))
        self.seed_ = seed
        return self

    def _featurize_tile(self, x: np.ndarray, out: np.ndarray) -> None:
        m = self.n_features // 2
        rff_tile(x, self.center_, self.weights_, np.float32(np.sqrt(1.0 / m)), out)
