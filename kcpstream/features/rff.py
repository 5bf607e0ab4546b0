"""Fourier features: random (Rahimi & Recht) and their variants, with cos/sin pairs.

Every map here is ``phi(x) = [a * cos(W^T (x - c)), a * sin(W^T (x - c))]``
for ``m`` frequencies ``W`` (d, m) and amplitudes ``a`` (m,) with
``sum(a^2) = 1``, so that ``||phi(x)|| = 1`` exactly and
``<phi(x), phi(y)> = sum_i a_i^2 cos(w_i^T (x - y))`` approximates a
shift-invariant kernel whose spectral law the ``(w_i, a_i^2)`` stand for.
Subclasses say how the frequencies and amplitudes are drawn.
"""

from __future__ import annotations

from typing import Literal, Self

import numpy as np

from kcpstream._kernels.featurize import rff_tile
from kcpstream.errors import InputError
from kcpstream.features.bandwidth import resolve_bandwidth
from kcpstream.features.base import FeatureMap, as_sample, exponent_for_amplitude

__all__ = ["FourierFeatures", "RFF", "resolve_seed"]


def resolve_seed(seed: int | None) -> int:
    """The seed to use: ``seed`` itself, or fresh entropy when it is None."""
    if seed is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError(f"seed must be a non-negative integer or None, got {seed!r}")
    return int(seed)


def _check_even(name: str, n_features) -> int:
    if not isinstance(n_features, int | np.integer) or n_features < 2 or n_features % 2:
        raise InputError(
            f"{name} needs an even n_features >= 2 (cos/sin pairs), got {n_features!r}; "
            "for example n_features=64"
        )
    return int(n_features)


class FourierFeatures(FeatureMap):
    """Base of the cos/sin feature maps; see the module docstring.

    Fitted attributes: ``center_`` (the sample median, which keeps the
    float32 arguments small and does not change a shift-invariant kernel),
    ``bandwidth_``, ``weights_`` (d, m) float32 frequencies, ``amplitudes_``
    (m,) float32, ``quantum_exponent_``, ``seed_``, ``order_`` (the order
    the channels are taken in, for ``center_`` and the rows of ``weights_``;
    None: as given).
    """

    _fitted_names = (
        "center_",
        "bandwidth_",
        "weights_",
        "amplitudes_",
        "quantum_exponent_",
        "seed_",
        "order_",
    )
    #: the channels' order the frequencies' rows follow (None: as given);
    #: maps saved before it existed have none
    order_: np.ndarray | None = None
    #: metric of the median heuristic for this map's kernel
    _metric = "euclidean"

    @property
    def n_features_out_(self) -> int:
        self._check_fitted()
        return 2 * int(self.weights_.shape[1])

    @property
    def tile_groups_(self) -> tuple[int, int]:
        return 2, self.n_features_out_ // 2

    @property
    def quantized_norm_bound_(self) -> float:
        """``||phi|| = sqrt(sum a^2) = 1``; float32 trigonometry and products add at
        most a few ulps per value (``1e-5`` covers them) and rounding onto the grid at
        most ``0.5`` per coordinate."""
        self._check_fitted()
        norm = float(np.sqrt(np.sum(self.amplitudes_.astype(np.float64) ** 2)))
        return 2.0**self.quantum_exponent_ * norm * (1 + 1e-5) + 0.5 * np.sqrt(self.n_features_out_)

    @property
    def quantized_amplitude_bound_(self) -> float:
        """A coordinate is its amplitude times a cosine or a sine (the same ulps
        as the norm), plus at most ``0.5`` of rounding onto the grid."""
        self._check_fitted()
        largest = float(np.max(self.amplitudes_.astype(np.float64)))
        return 2.0**self.quantum_exponent_ * largest * (1 + 1e-5) + 0.5

    def _draw(
        self, rng: np.random.Generator, d: int, sigma: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Frequencies (d, m) and amplitudes (m,) with sum of squares 1."""
        raise NotImplementedError

    def fit(self, sample: np.ndarray) -> Self:
        x = as_sample(sample)
        scaled = getattr(self, "scaled", False) and x.shape[1] > 1
        if scaled:
            scales, order, z = channel_scales(x, self._metric)
            sigma = resolve_bandwidth(self.bandwidth, z[:, order], self._metric)
        else:
            sigma = resolve_bandwidth(self.bandwidth, x, self._metric)
        seed = resolve_seed(getattr(self, "seed", None))
        w, amp = self._draw(np.random.default_rng(seed), x.shape[1], sigma)
        self.center_ = np.median(x, axis=0)
        self.order_ = None
        if scaled:
            # the channels are taken in the canonical order (also by the
            # projection's float sums), each divided by its scale: the kernel of
            # the standardised channels, bit for bit the same whatever order
            # they come in
            w = w / scales[order, None]
            self.center_, self.order_ = self.center_[order], order
        self.bandwidth_ = float(sigma)
        self.weights_ = np.ascontiguousarray(w, dtype=np.float32)
        self.amplitudes_ = np.ascontiguousarray(amp, dtype=np.float32)
        self.quantum_exponent_ = exponent_for_amplitude(float(np.max(self.amplitudes_)))
        self.seed_ = seed
        return self

    def ordered(self, x: np.ndarray) -> np.ndarray:
        """The samples ``x`` (m, d) with their channels in the order the fitted
        weights take them (:func:`~kcpstream._kernels.featurize.rff_tile`'s)."""
        return x if self.order_ is None else x[:, self.order_]

    def featurize_tile(self, x: np.ndarray, out: np.ndarray) -> None:
        rff_tile(self.ordered(x), self.center_, self.weights_, self.amplitudes_, out)


def channel_scales(x: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each channel's scale, a canonical order of the channels and the sample
    standardised (less its medians, over the scales), from the sample ``x``
    (m, d): ``(scales, order, z)``.

    A channel's scale is its median heuristic on its own (the median distance
    between its values, or between its different values when most are equal;
    1 for a constant channel).  The order sorts the channels by scale, then
    by median, then by their standardised values: it depends on what the
    channels hold, not on where they come in ``x``."""
    d = x.shape[1]
    scales = np.ones(d)
    for j in range(d):
        try:
            scales[j] = resolve_bandwidth("median", x[:, j : j + 1], metric)
        except InputError:  # constant in the sample: no scale of its own
            pass
    medians = np.median(x, axis=0)
    z = (x - medians) / scales

    def key(j: int) -> tuple:
        return (float(scales[j]), float(medians[j]), tuple(z[:, j].tolist()))

    return scales, np.array(sorted(range(d), key=key), dtype=np.intp), z


class RFF(FourierFeatures):
    """Random Fourier features for a shift-invariant kernel.

    ``n_features / 2`` frequencies drawn from the kernel's spectral law, all
    with amplitude ``sqrt(1 / m)``: ``<phi(x), phi(y)>`` is an unbiased
    estimate of ``k(x, y)``.

    Parameters
    ----------
    n_features : int
        Output dimension p (even).
    kernel : {"gaussian", "laplacian"}
        ``"gaussian"``: ``k(x, y) = exp(-||x - y||^2 / (2 sigma^2))``, normal
        frequencies.  ``"laplacian"``: ``k(x, y) = exp(-||x - y||_1 / sigma)``,
        Cauchy frequencies.
    bandwidth : float, "auto" or "median"
        sigma; ``"auto"`` (default) is half the median pairwise distance of
        the fit sample, ``"median"`` the median distance itself (Euclidean for
        the Gaussian kernel, L1 for the Laplacian).
    seed : int or None
        Seed of the frequencies (None: fresh entropy, recorded in ``seed_``).
    scaled : bool
        Standardise each channel by its own scale (its median heuristic on the
        fit sample) before the kernel, and draw the frequencies for the
        channels in an order of what they hold (:func:`channel_scales`): the
        features then do not depend on the channels' units or their order
        (permuted channels give permuted frequencies, the same features).
        ``bandwidth`` is then in standardised units.  The default map for
        several channels is scaled; without it, the channel of the largest
        spread dominates the kernel.
    """

    name = "rff"
    _param_names = ("n_features", "kernel", "bandwidth", "seed", "scaled")

    def __init__(
        self,
        n_features: int = 64,
        *,
        kernel: Literal["gaussian", "laplacian"] = "gaussian",
        bandwidth: float | str = "auto",
        seed: int | None = 0,
        scaled: bool = False,
    ) -> None:
        self.n_features = _check_even("RFF", n_features)
        if kernel not in ("gaussian", "laplacian"):
            raise InputError(f"RFF kernel must be 'gaussian' or 'laplacian', got {kernel!r}")
        if not isinstance(scaled, bool | np.bool_):
            raise InputError(f"RFF scaled must be True or False, got {scaled!r}")
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.seed = seed
        self.scaled = bool(scaled)

    @property
    def _metric(self) -> str:  # type: ignore[override]
        return "euclidean" if self.kernel == "gaussian" else "cityblock"

    def _draw(self, rng, d, sigma):
        m = self.n_features // 2
        if self.kernel == "gaussian":
            w = rng.standard_normal((d, m)) / sigma
        else:
            w = rng.standard_cauchy((d, m)) / sigma
        return w, np.full(m, np.sqrt(1.0 / m))
