"""Sketched Nyström features with a p-sparsified sketch (El Ahmad, Laforgue & d'Alché-Buc)."""

from __future__ import annotations

from typing import Literal, Self

import numpy as np

from kcpstream.errors import InputError
from kcpstream.features.nystrom import Nystrom

__all__ = ["SketchedNystrom"]


class SketchedNystrom(Nystrom):
    """``phi(x) = k(x, L) S^T (S K_LL S^T)^{-1/2}`` with a sparse sketch ``S``.

    ``m = n_landmarks`` landmarks are drawn from the fit sample; the sketch
    ``S`` (``n_features x m``) has entries ``Bernoulli(density) x Rademacher``,
    so each output coordinate combines about ``density * m`` landmarks and
    only the landmarks some row uses are evaluated.  It is the projection
    onto the span of the sketched combinations, so ``||phi(x)||^2 <= k(x, x)``.
    Small eigenvalues of ``S K_LL S^T`` are truncated as in :class:`Nystrom`.

    Parameters
    ----------
    n_features : int
        Sketch size s (the output dimension before truncation).
    n_landmarks : int, optional
        Landmarks m (default ``4 * n_features``).
    density : float
        Probability that an entry of ``S`` is non-zero.
    kernel, bandwidth, rcond, seed
        As for :class:`Nystrom`.
    """

    name = "sketched_nystrom"
    _param_names = ("n_features", "n_landmarks", "density", "kernel", "bandwidth", "rcond", "seed")

    def __init__(
        self,
        n_features: int = 64,
        *,
        n_landmarks: int | None = None,
        density: float = 0.1,
        kernel: Literal["gaussian", "laplacian"] = "gaussian",
        bandwidth: float | str = "auto",
        rcond: float = 1e-6,
        seed: int | None = 0,
    ) -> None:
        super().__init__(n_features, kernel=kernel, bandwidth=bandwidth, rcond=rcond, seed=seed)
        if n_landmarks is not None and (
            not isinstance(n_landmarks, int | np.integer) or n_landmarks < 1
        ):
            raise InputError(f"n_landmarks must be a positive integer, got {n_landmarks!r}")
        if not 0 < density <= 1:
            raise InputError(f"density must lie in (0, 1], got {density!r}")
        self.n_landmarks = None if n_landmarks is None else int(n_landmarks)
        self.density = float(density)

    def fit(self, sample: np.ndarray) -> Self:
        rng, landmarks, seed = self._start_fit(sample, self.n_landmarks or 4 * self.n_features)
        s, m = self.n_features, len(landmarks)
        sketch = (rng.random((s, m)) < self.density) * rng.choice([-1.0, 1.0], (s, m))
        empty = ~sketch.any(axis=1)  # every row combines at least one landmark
        sketch[empty, rng.integers(m, size=int(empty.sum()))] = 1.0
        used = sketch.any(axis=0)  # only these landmarks are ever evaluated
        sketch, landmarks = sketch[:, used], landmarks[used]
        evals, evecs = np.linalg.eigh(sketch @ self._gram(landmarks) @ sketch.T)
        keep = evals > self.rcond * evals[-1]
        whiten = evecs[:, keep] / np.sqrt(evals[keep])
        return self._finish_fit(landmarks, sketch.T @ whiten, seed)
