"""Nyström features from landmarks drawn uniformly from a sample."""

from __future__ import annotations

from typing import Literal, Self

import numpy as np

from kcpstream._kernels.featurize import nystrom_tile
from kcpstream.errors import InputError
from kcpstream.features.bandwidth import resolve_bandwidth
from kcpstream.features.base import FeatureMap, as_sample, exponent_for_amplitude
from kcpstream.features.rff import resolve_seed

__all__ = ["Nystrom"]


class Nystrom(FeatureMap):
    """Nyström features ``phi(x) = k(x, L) U Lambda^{-1/2}``.

    ``L`` holds ``n_features`` landmarks drawn uniformly without replacement
    from the fit sample (all of it when the sample is smaller);
    ``K_LL = U Lambda U^T`` is eigendecomposed and eigenvalues below
    ``rcond * max(Lambda)`` are dropped, so the output dimension
    ``n_features_out_`` may be smaller than ``n_features``.  With every sample
    as a landmark and full rank, ``<phi(x_i), phi(x_j)> = k(x_i, x_j)``.

    Parameters
    ----------
    n_features : int
        Number of landmarks m (the output dimension before rank truncation).
    kernel : {"gaussian", "laplacian"}
        As for :class:`~kcpstream.features.RFF`.
    bandwidth : float, "auto" or "median"
        sigma; ``"auto"`` (default) is half the median pairwise distance of the
        fit sample, ``"median"`` the median distance itself.
    rcond : float
        Relative eigenvalue threshold of the rank truncation.
    seed : int or None
        Seed of the landmark draw.
    """

    name = "nystrom"
    _param_names = ("n_features", "kernel", "bandwidth", "rcond", "seed")
    _fitted_names = (
        "center_",
        "bandwidth_",
        "landmarks_",
        "projection_",
        "quantum_exponent_",
        "seed_",
    )

    def __init__(
        self,
        n_features: int = 64,
        *,
        kernel: Literal["gaussian", "laplacian"] = "gaussian",
        bandwidth: float | str = "auto",
        rcond: float = 1e-6,
        seed: int | None = 0,
    ) -> None:
        if not isinstance(n_features, int | np.integer) or n_features < 1:
            raise InputError(f"Nystrom needs n_features >= 1 landmarks, got {n_features!r}")
        if kernel not in ("gaussian", "laplacian"):
            raise InputError(f"Nystrom kernel must be 'gaussian' or 'laplacian', got {kernel!r}")
        if not 0 <= rcond < 1:
            raise InputError(f"rcond must lie in [0, 1), got {rcond!r}")
        self.n_features = int(n_features)
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.rcond = float(rcond)
        self.seed = seed

    @property
    def n_features_out_(self) -> int:
        self._check_fitted()
        return int(self.projection_.shape[1])

    def _scale(self) -> np.float32:
        if self.kernel == "gaussian":
            return np.float32(1.0 / (2.0 * self.bandwidth_**2))
        return np.float32(1.0 / self.bandwidth_)

    def _start_fit(self, sample: np.ndarray, n_landmarks: int):
        """Fit the centre and bandwidth and draw landmarks: (rng, float32 landmarks, seed)."""
        x = as_sample(sample)
        metric = "euclidean" if self.kernel == "gaussian" else "cityblock"
        sigma = resolve_bandwidth(self.bandwidth, x, metric)
        seed = resolve_seed(self.seed)
        rng = np.random.default_rng(seed)
        m = min(n_landmarks, x.shape[0])
        idx = np.sort(rng.choice(x.shape[0], size=m, replace=False))
        self.center_ = np.median(x, axis=0)
        self.bandwidth_ = float(sigma)
        return rng, (x[idx] - self.center_).astype(np.float32), seed

    def _gram(self, landmarks: np.ndarray) -> np.ndarray:
        """The kernel matrix of the landmarks (float64)."""
        lm = landmarks.astype(np.float64)
        diff = lm[:, None, :] - lm[None, :, :]
        if self.kernel == "gaussian":
            return np.exp(-(diff**2).sum(axis=2) / (2.0 * self.bandwidth_**2))
        return np.exp(-np.abs(diff).sum(axis=2) / self.bandwidth_)

    def _finish_fit(self, landmarks: np.ndarray, projection: np.ndarray, seed: int) -> Self:
        self.landmarks_ = np.ascontiguousarray(landmarks, dtype=np.float32)
        self.projection_ = np.ascontiguousarray(projection, dtype=np.float32)
        # ||phi(x)||^2 <= k(x, x) = 1, so every coordinate is at most 1 in magnitude
        self.quantum_exponent_ = exponent_for_amplitude(1.0)
        self.seed_ = seed
        return self

    def fit(self, sample: np.ndarray) -> Self:
        _, landmarks, seed = self._start_fit(sample, self.n_features)
        evals, evecs = np.linalg.eigh(self._gram(landmarks))
        keep = evals > self.rcond * evals[-1]
        evals, evecs = evals[keep][::-1], evecs[:, keep][:, ::-1]
        return self._finish_fit(landmarks, evecs / np.sqrt(evals), seed)

    def featurize_tile(self, x: np.ndarray, out: np.ndarray) -> None:
        nystrom_tile(
            x,
            self.center_,
            self.landmarks_,
            self._scale(),
            self.kernel == "laplacian",
            self.projection_,
            out,
        )
