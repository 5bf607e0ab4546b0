"""Temporal features: what a window holds and the shapes it traces.

The signal is cut into windows of ``window`` consecutive samples (typically
one period of the signal's dominant cycle, see :mod:`kcpstream.features.period`); each
window ``W`` gets one feature vector, the concatenation of

* the **mean of the pointwise Gaussian-kernel features** of its samples
  (quadrature features for up to 3 values, random Fourier features beyond):
  the kernel mean embedding of the window's empirical distribution.  Summed
  over a segment it is the pointwise features' sum divided by ``window``, so
  this part sees every change of the marginal distribution the pointwise
  kernel sees; a cycle of one window's length averages out within each
  window instead of making the sequence dependent;
* the **group-invariant shape features** of
  :class:`~kcpstream.features.InvariantWindow` (the distribution over cyclic
  shifts of the window's projections on random templates): changes of
  waveform and frequency that leave the marginal distribution alone.

With ``delay > 0`` both parts see the window as its *delay vectors*
``(x[t], x[t + delay], x[t + 2 delay])`` (3 d channels), indices modulo the
window (a window of one period is one turn of the cycle): their
distribution is how the samples follow one another -- slopes, curvature --
as well as their values.  It is an option, not the default's: on the TSSB
series it moved the default's covering by less than the spread between its
variants, at almost twice the cost (``benchmarks/results/real.md``).

With ``shape="aligned"`` the shape part is instead the **window as a
vector**: random Fourier features of a Gaussian kernel on the ``window * d``
values themselves (bandwidth: the median distance between the fit sample's
windows).  It sees *where in the window* a waveform changes, which the
invariant part discards by design.  That is what a series of windows of whole
cycles, each starting at the same phase, is best told apart by (a daily load
curve whose morning peak moves; one class of recorded instances after
another).  But a cycle whose phase wanders (a rate that jitters from cycle to
cycle) moves through the windows, more slowly than the test's long-run noise
reaches, and the aligned part takes that for changes
(``benchmarks/results/phase_wander.md``).

With ``shape="canonical"`` the window is first turned to a **canonical
phase**: shifted (cyclically, by a fraction of a sample where need be) so
that its component at ``cycles`` cycles per window -- the cycle's
fundamental, for a window of that many whole cycles -- has phase 0, then
seen as a vector as above.  A window that is a shifted copy of another gets
the same features (so a phase that wanders is no change), and the Gaussian
kernel on the turned windows still sees every change of the waveform's shape
against its own fundamental (``benchmarks/results/phase_wander.md``).  With
``level=True`` (the parameter's default) the turned windows keep their level,
so a drift of the level is a change of them too (``benchmarks/results/real.md``);
with ``level=False`` each window is taken less its mean, and the level is the
marginal part's alone.  ``features="auto"`` segments a cycle's windows with the
invariant part and with ``shape="canonical", level=False``, each at half the
level (:mod:`kcpstream.engine.pair`).

The kernel between two windows is ``(1 - s) k_marginal + s k_shape`` with
``s = shape_share``.  Change-points have window resolution.

The features are centred on their mean over the fit sample (``offset_``): a
constant shift changes no gain, and windows of a steady cycle have features
far from 0 but close to each other, so centred features make the search's
bounds (which use the features' norms) tight.
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np

from kcpstream._kernels.featurize import rff_tile, threshold_shares, window_means
from kcpstream.errors import InputError
from kcpstream.features.bandwidth import resolve_bandwidth
from kcpstream.features.base import as_sample, exponent_for_amplitude
from kcpstream.features.quadrature import MAX_DIM, QuadratureFF
from kcpstream.features.rff import RFF, resolve_seed
from kcpstream.features.window import InvariantWindow, check_window_and_bins

__all__ = ["Temporal"]

#: Samples featurized together by the pointwise part (bounds its scratch memory).
_SUB_TILE = 1 << 15
#: The shape parts a :class:`Temporal` map can have.
SHAPES = ("invariant", "aligned", "canonical")
#: Most pairs of fit windows the aligned part's bandwidth is the median distance of.
_BANDWIDTH_PAIRS = 4096


class Temporal(InvariantWindow):
    """Marginal and shape features of windows; see the module docstring.

    Parameters
    ----------
    n_features : int
        Output dimension: half for the shape part (a multiple of ``n_bins``),
        the rest (even) for the marginal part.
    window : int
        Samples per window (the resolution of the change-points).
    shape_share : float
        Weight ``s`` of the shape kernel, in [0, 1].
    shape : {"invariant", "aligned", "canonical"}
        The shape part: invariant to the waveform's place in the window
        (``"invariant"``), the window as a vector (``"aligned"``: for
        windows that each start at the same phase of a cycle), or the window
        turned to the canonical phase of its fundamental, as a vector
        (``"canonical"``).
    cycles : int
        Cycles a window holds: the component whose phase ``"canonical"``
        turns to 0 (unused by the other shapes).
    level : bool
        Whether a shape part that sees the window as a vector
        (``"aligned"``, ``"canonical"``) sees its level too; with False each
        window is taken less its mean (per channel), and only the marginal
        part sees the level (unused by ``"invariant"``).
    n_bins : int
        Thresholds per template of the shape part.
    delay : int
        Lag of the delay vectors the window is seen as, in ``[0, window)``; 0
        for the samples themselves.
    bandwidth : float, "auto" or "median"
        Bandwidth of the pointwise Gaussian kernel (see
        :func:`~kcpstream.features.bandwidth.resolve_bandwidth`).
    seed : int or None
        Seed of the shape templates (and of the frequencies beyond 3 channels).
    """

    name = "temporal"
    _param_names = (
        "n_features",
        "window",
        "shape_share",
        "shape",
        "cycles",
        "level",
        "n_bins",
        "bandwidth",
        "seed",
        "delay",
    )
    _fitted_names = (
        "templates_",
        "thresholds_",
        "center_",
        "bandwidth_",
        "weights_",
        "amplitudes_",
        "offset_",
        "quantum_exponent_",
        "seed_",
    )

    def __init__(
        self,
        n_features: int = 64,
        *,
        window: int = 64,
        shape_share: float = 0.5,
        shape: str = "invariant",
        cycles: int = 1,
        level: bool = True,
        n_bins: int = 8,
        bandwidth: float | str = "auto",
        seed: int | None = 0,
        delay: int = 0,
    ) -> None:
        check_window_and_bins(window, n_bins)
        if (
            isinstance(delay, bool)
            or not isinstance(delay, int | np.integer)
            or not 0 <= delay < window
        ):
            raise InputError(f"delay must be an integer in [0, window={window}), got {delay!r}")
        if (
            not isinstance(n_features, int | np.integer)
            or n_features % 2
            or n_features // 2 < n_bins
            or n_features - (n_features // 2) // n_bins * n_bins < 2
        ):
            raise InputError(
                f"n_features={n_features!r} must be even and at least {2 * n_bins} (a shape "
                f"part of whole templates of n_bins={n_bins} thresholds and a marginal part)"
            )
        if (
            isinstance(shape_share, bool)
            or not isinstance(shape_share, int | float | np.number)
            or not 0.0 <= float(shape_share) <= 1.0
        ):
            raise InputError(f"shape_share must be a number in [0, 1], got {shape_share!r}")
        if shape not in SHAPES:
            raise InputError(f"shape must be one of {', '.join(map(repr, SHAPES))}, got {shape!r}")
        if (
            isinstance(cycles, bool)
            or not isinstance(cycles, int | np.integer)
            or not 1 <= cycles <= window // 2
        ):
            raise InputError(
                f"cycles must be an integer in [1, window // 2 = {window // 2}], got {cycles!r}"
            )
        if not isinstance(level, bool | np.bool_):
            raise InputError(f"level must be True or False, got {level!r}")
        self.cycles = int(cycles)
        self.level = bool(level)
        self.n_features = int(n_features)
        self.shape = str(shape)
        self.window = int(window)
        self.n_bins = int(n_bins)
        self.shape_share = float(shape_share)
        self.bandwidth = bandwidth
        self.seed = seed
        self.delay = int(delay)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        # a map that sees the level describes itself as before ``level`` existed, so
        # that the statistics kept under its description stay found
        if self.level:
            del out["params"]["level"]
        return out

    @property
    def _n_shape(self) -> int:
        n = (self.n_features // 2) // self.n_bins * self.n_bins
        return n if self.shape == "invariant" else n // 2 * 2  # (cosines and sines)

    @property
    def n_features_out_(self) -> int:
        if not self.is_fitted:
            return self.n_features
        return self._n_shape + 2 * int(self.weights_.shape[1])

    @property
    def n_features_in_(self) -> int:
        n = super().n_features_in_  # the window rows the shape part sees
        return n // 3 if self.delay else n

    @property
    def quantized_norm_bound_(self) -> float:
        """-1: the centred features' norms are far below any bound known in
        advance, so the data pass measures them."""
        return -1.0

    @property
    def quantized_amplitude_bound_(self) -> float:
        """-1, as the norm: the data pass measures them."""
        return -1.0

    @property
    def tile_groups_(self) -> tuple[int, int]:
        return 1, self.n_features_out_

    def _weights(self) -> tuple[np.float32, np.float32]:
        """Scale of the marginal part and of each shape coordinate."""
        a = np.float32(np.sqrt(1.0 - self.shape_share))
        # an invariant coordinate is a share (at most 1), n_shape of them; a frequency
        # of the window as a vector (aligned, canonical) is a cosine and a sine
        # (their squares sum to 1), half as many
        terms = self._n_shape if self.shape == "invariant" else self._n_shape // 2
        b = np.float32(np.sqrt(self.shape_share) / np.sqrt(terms))
        return a, b

    def fit(self, sample: np.ndarray) -> Self:
        windows = as_sample(sample)
        # (a row of another length is refused by _check_rows, with its own message)
        rows = self._rows(windows) if windows.shape[1] % self.window == 0 else windows
        if self.shape == "invariant":
            self._fit_shape(rows, self._n_shape // self.n_bins)
        else:
            self._fit_aligned(rows)
        d = rows.shape[1] // self.window
        points = rows.reshape(-1, d)
        marginal = (QuadratureFF if d <= MAX_DIM else RFF)(
            self.n_features - self._n_shape, bandwidth=self.bandwidth, seed=self.seed
        )
        sigma = resolve_bandwidth(self.bandwidth, points, marginal._metric)
        weights, amplitudes = marginal._draw(np.random.default_rng(self.seed_), d, sigma)
        self.center_ = np.median(points, axis=0)
        self.bandwidth_ = float(sigma)
        self.weights_ = np.ascontiguousarray(weights, dtype=np.float32)
        self.amplitudes_ = np.ascontiguousarray(amplitudes, dtype=np.float32)
        a, b = self._weights()
        # centred, a coordinate is at most twice the largest raw one
        largest = max(float(a) * float(np.max(self.amplitudes_)), float(b))
        self.quantum_exponent_ = exponent_for_amplitude(2.0 * largest)
        # the quadrature rule may have fewer nodes than asked for (3 channels): the
        # size comes from the weights drawn (n_features_out_ reads it once fitted)
        size = self._n_shape + 2 * int(self.weights_.shape[1])
        self.offset_ = np.zeros(size, dtype=np.float32)
        raw = np.empty((1, windows.shape[0], size), dtype=np.float32)
        self.featurize_tile(windows, raw)
        self.offset_ = raw[0].mean(axis=0, dtype=np.float64).astype(np.float32)
        return self

    def _fit_aligned(self, rows: np.ndarray) -> None:
        """The aligned part's frequencies (as ``templates_``: ``(k, window, d)``,
        Gaussian with the inverse bandwidth as scale), center and seed from window rows."""
        self._check_rows(rows)
        w = self.window
        d = rows.shape[1] // w
        seed = resolve_seed(self.seed)
        rng = np.random.default_rng(seed)
        windows = np.asarray(rows, dtype=np.float64).reshape(-1, w, d)
        self.center_ = np.median(windows, axis=(0, 1))
        windows = self._vectors(windows)
        count = windows.shape[0]
        if count * (count - 1) // 2 <= _BANDWIDTH_PAIRS:  # every pair
            first, second = np.triu_indices(count, 1)
        else:  # pairs of two different windows, drawn
            first = rng.integers(0, count, _BANDWIDTH_PAIRS)
            second = rng.integers(0, count - 1, _BANDWIDTH_PAIRS)
            second += second >= first
        gaps = np.sqrt(((windows[first] - windows[second]) ** 2).sum(axis=(1, 2)))
        positive = gaps[gaps > 0]
        # windows all equal: any bandwidth (their features are equal too)
        bandwidth = float(np.median(positive)) if positive.size else 1.0
        k = self._n_shape // 2
        self.templates_ = rng.standard_normal((k, w, d)) / bandwidth
        self.thresholds_ = np.zeros((k, 0))
        self.seed_ = seed

    def _vectors(self, windows: np.ndarray) -> np.ndarray:
        """Windows ``(L, window, d)`` as the aligned or canonical shape part sees
        them: less the center, less their own mean without ``level``, turned
        with ``"canonical"``."""
        if self.shape == "canonical":
            return self._turned(windows)
        windows = windows - self.center_
        return windows if self.level else windows - windows.mean(axis=1, keepdims=True)

    def _turned(self, windows: np.ndarray) -> np.ndarray:
        """Windows ``(L, window, d)`` less the center (and without ``level``, with
        no component at 0 cycles: less their mean), each shifted cyclically so
        that the sum over its channels of its Fourier component at ``cycles``
        cycles per window has phase 0 (a window without that component is
        left as it is)."""
        spectra = np.fft.rfft(windows - self.center_, axis=1)  # (L, f, d)
        if not self.level:
            spectra[:, 0, :] = 0.0
        phase = np.angle(spectra[:, self.cycles, :].sum(axis=1))  # (L,)
        # a shift by tau samples turns component j by -2 pi j tau / window: the one
        # that turns component `cycles` by -phase
        turn = np.exp(-1j * np.outer(phase / self.cycles, np.arange(spectra.shape[1])))
        return np.fft.irfft(spectra * turn[:, :, None], n=self.window, axis=1)

    def _rows(self, rows: np.ndarray) -> np.ndarray:
        """Windows ``rows`` (k, window * d) as the features see them: themselves,
        or with ``delay`` the window's delay vectors (k, window * 3 d), sample
        indices modulo the window."""
        if not self.delay:
            return rows
        w = self.window
        cube = np.asarray(rows).reshape(rows.shape[0], w, -1)
        later = [np.roll(cube, -k * self.delay, axis=1) for k in (1, 2)]
        return np.concatenate([cube, *later], axis=2).reshape(rows.shape[0], -1)

    def featurize_tile(self, x: np.ndarray, out: np.ndarray) -> None:
        w = self.window
        n_windows = x.shape[0]
        m = self.weights_.shape[1]
        a, b = self._weights()
        x = self._rows(x)
        points = np.asarray(x).reshape(-1, x.shape[1] // w)
        per = max(1, _SUB_TILE // w)  # windows per sub-tile
        scratch = np.empty((2, per * w, m), dtype=np.float32)
        means = np.empty((2, per, m), dtype=np.float32)
        for lo in range(0, n_windows, per):
            hi = min(n_windows, lo + per)
            buf = scratch[:, : (hi - lo) * w]
            rff_tile(points[lo * w : hi * w], self.center_, self.weights_, self.amplitudes_, buf)
            window_means(buf, w, means)
            out[0, lo:hi, :m] = a * means[0, : hi - lo]
            out[0, lo:hi, m : 2 * m] = a * means[1, : hi - lo]
        if self.shape == "invariant":
            threshold_shares(self._correlations(x), self.thresholds_, b, out[0, :, 2 * m :])
        else:
            k = self.templates_.shape[0]
            windows = np.asarray(x, dtype=np.float64).reshape(n_windows, w, -1)
            windows = self._vectors(windows)
            z = windows.reshape(n_windows, -1) @ self.templates_.reshape(k, -1).T
            out[0, :, 2 * m : 2 * m + k] = b * np.cos(z)
            out[0, :, 2 * m + k :] = b * np.sin(z)
        out[0] -= self.offset_
