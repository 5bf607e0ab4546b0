"""Random Fourier features for the Matérn kernel (Student-t spectral law)."""

from __future__ import annotations

import numpy as np

from kcpstream.errors import InputError
from kcpstream.features.rff import FourierFeatures, _check_even

__all__ = ["MaternRFF"]


class MaternRFF(FourierFeatures):
    """Random Fourier features of the Matérn kernel of smoothness ``nu``.

    ``k(x, y) = 2^(1-nu) / Gamma(nu) (sqrt(2 nu) r / sigma)^nu K_nu(sqrt(2 nu) r / sigma)``
    with ``r = ||x - y||``; its spectral law is a multivariate Student-t with
    ``2 nu`` degrees of freedom: ``w = z sqrt(2 nu / u) / sigma`` with
    ``z ~ N(0, I)``, ``u ~ chi2(2 nu)``.  ``nu = 0.5`` is the exponential
    kernel ``exp(-r / sigma)``; ``nu -> inf`` the Gaussian.

    Parameters
    ----------
    n_features : int
        Output dimension p (even).
    nu : float
        Smoothness (> 0); 0.5, 1.5 and 2.5 are the usual choices.
    bandwidth : float, "auto" or "median"
        The length-scale sigma; ``"auto"`` (default) is half the median
        pairwise distance of the fit sample, ``"median"`` the median distance.
    seed : int or None
    """

    name = "matern"
    _param_names = ("n_features", "nu", "bandwidth", "seed")

    def __init__(
        self,
        n_features: int = 64,
        *,
        nu: float = 1.5,
        bandwidth: float | str = "auto",
        seed: int | None = 0,
    ):
        self.n_features = _check_even("MaternRFF", n_features)
        if not (isinstance(nu, int | float) and nu > 0):
            raise InputError(f"nu must be a positive number (e.g. 0.5, 1.5, 2.5), got {nu!r}")
        self.nu = float(nu)
        self.bandwidth = bandwidth
        self.seed = seed

    def _draw(self, rng, d, sigma):
        m = self.n_features // 2
        z = rng.standard_normal((d, m))
        u = rng.chisquare(2.0 * self.nu, size=m)
        w = z * np.sqrt(2.0 * self.nu / u)[None, :] / sigma
        return w, np.full(m, np.sqrt(1.0 / m))
