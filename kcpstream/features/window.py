"""Group-invariant window features (Mroueh, Voinea & Poggio).

The signal is cut into windows of ``window`` consecutive samples; each window
``W`` gets one feature vector.  For ``m`` random templates ``t_j`` and the
group of cyclic shifts ``g``, the feature is the empirical distribution
function of the projections ``<W, g . t_j>`` over the group, at ``n_bins``
thresholds:

``phi_jb(W) = (1 / window) #{g : <W, g . t_j> > theta_jb} / sqrt(m n_bins)``.

It does not depend on where a waveform sits in the window (its phase), so it
detects changes of frequency content or waveform shape where a pointwise
kernel sees nothing (a sine with random phase has the same marginal law at
every frequency).  The projections over all shifts are one cross-correlation,
computed with FFTs.  Thresholds are quantiles of the fit sample's
projections, per template.

:func:`kcpstream.segment` segments the sequence of windows (change-points have
window resolution) and reports change-points in samples; ``min_size`` and
``block_size`` count windows.
"""

from __future__ import annotations

from typing import Self

import numpy as np

from kcpstream._kernels.featurize import threshold_shares
from kcpstream.errors import InputError
from kcpstream.features.base import FeatureMap, as_sample, exponent_for_amplitude
from kcpstream.features.rff import resolve_seed

__all__ = ["InvariantWindow"]


def check_window_and_bins(window, n_bins) -> None:
    """A window of at least 2 samples and at least one threshold per template, or
    an :class:`InputError` naming the bad parameter."""
    if not isinstance(window, int | np.integer) or window < 2:
        raise InputError(f"window must be an integer >= 2 samples, got {window!r}")
    if not isinstance(n_bins, int | np.integer) or n_bins < 1:
        raise InputError(f"n_bins must be a positive integer, got {n_bins!r}")


class InvariantWindow(FeatureMap):
    """Group-invariant window features; see the module docstring.

    The map is fitted and applied on windows flattened to rows of
    ``window * d`` values (``segment`` does the reshaping).

    Parameters
    ----------
    n_features : int
        ``m * n_bins``: templates times thresholds (must be a multiple of ``n_bins``).
    window : int
        Samples per window (the resolution of the change-points).
    n_bins : int
        Thresholds per template.
    seed : int or None
        Seed of the templates.
    """

    name = "window"
    _param_names = ("n_features", "window", "n_bins", "seed")
    _fitted_names = ("templates_", "thresholds_", "center_", "quantum_exponent_", "seed_")

    def __init__(
        self, n_features: int = 64, *, window: int = 64, n_bins: int = 8, seed: int | None = 0
    ) -> None:
        check_window_and_bins(window, n_bins)
        if (
            not isinstance(n_features, int | np.integer)
            or n_features < n_bins
            or n_features % n_bins
        ):
            raise InputError(
                f"n_features={n_features!r} must be a positive multiple of n_bins={n_bins} "
                "(templates x thresholds)"
            )
        self.n_features = int(n_features)
        self.window = int(window)
        self.n_bins = int(n_bins)
        self.seed = seed

    @property
    def n_features_out_(self) -> int:
        return self.n_features

    @property
    def n_features_in_(self) -> int:
        self._check_fitted()
        return int(self.templates_.shape[1] * self.templates_.shape[2])

    @property
    def quantized_norm_bound_(self) -> float:
        """Every coordinate is at most ``1 / sqrt(n_features)``: the norm is at most 1."""
        return float(self.quantized_amplitude_bound_ * np.sqrt(self.n_features))

    @property
    def quantized_amplitude_bound_(self) -> float:
        self._check_fitted()
        amp = np.float64(np.float32(1.0 / np.sqrt(self.n_features)))
        return float(np.rint(amp * 2.0**self.quantum_exponent_))

    def _correlations(self, rows: np.ndarray) -> np.ndarray:
        """``<W, g . t_j>`` for every window row, template and cyclic shift: (L, m, window)."""
        m, w, d = self.templates_.shape
        windows = np.asarray(rows, dtype=np.float64).reshape(-1, w, d) - self.center_
        fw = np.fft.rfft(windows, axis=1)  # (L, f, d)
        ft = np.fft.rfft(self.templates_, axis=1)  # (m, f, d)
        if d == 1:  # a broadcast product: several times faster than einsum's loop
            spec = fw[:, None, :, 0] * np.conj(ft)[None, :, :, 0]
        else:
            spec = np.einsum("lfd,mfd->lmf", fw, np.conj(ft))
        return np.fft.irfft(spec, n=w, axis=2)

    def fit(self, sample: np.ndarray) -> Self:
        self._fit_shape(as_sample(sample), self.n_features // self.n_bins)
        self.quantum_exponent_ = exponent_for_amplitude(float(1.0 / np.sqrt(self.n_features)))
        return self

    def _check_rows(self, rows: np.ndarray) -> None:
        """An :class:`InputError` unless ``rows`` are windows flattened to rows of
        ``window * d`` values."""
        if rows.shape[1] % self.window:
            raise InputError(
                f"{type(self).__name__} is fitted on windows of {self.window} samples "
                f"flattened to rows; got rows of {rows.shape[1]} values (kcpstream.segment "
                "reshapes the signal)"
            )

    def _fit_shape(self, rows: np.ndarray, n_templates: int) -> None:
        """Templates, thresholds, center and seed from window rows (L, window * d)."""
        self._check_rows(rows)
        w = self.window
        d = rows.shape[1] // w
        seed = resolve_seed(self.seed)
        rng = np.random.default_rng(seed)
        t = rng.standard_normal((n_templates, w, d))
        self.templates_ = t / np.sqrt((t**2).sum(axis=(1, 2), keepdims=True))
        self.center_ = np.median(rows.reshape(-1, w, d), axis=(0, 1))
        corr = self._correlations(rows)  # (L, m, w)
        levels = (np.arange(self.n_bins) + 0.5) / self.n_bins
        per_template = corr.transpose(1, 0, 2).reshape(n_templates, -1)
        self.thresholds_ = np.ascontiguousarray(np.quantile(per_template, levels, axis=1).T)
        self.seed_ = seed

    def featurize_tile(self, x: np.ndarray, out: np.ndarray) -> None:
        amp = np.float32(1.0 / np.sqrt(self.n_features))
        threshold_shares(self._correlations(x), self.thresholds_, amp, out[0])
