"""Synthetic signals with known change-points, and a writer to zarr."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

__all__ = [
    "SyntheticSignal",
    "random_changepoints",
    "piecewise_constant",
    "changing_distribution",
    "write_zarr",
]


@dataclass(frozen=True)
class SyntheticSignal:
    """A generated signal and its true change-points."""

    x: np.ndarray
    changepoints: np.ndarray

    @property
    def n(self) -> int:
        return int(self.x.shape[0])


def random_changepoints(
    n: int, n_changepoints: int, rng: np.random.Generator, min_gap: int | None = None
) -> np.ndarray:
    """Sorted change-points in ``(0, n)`` at least ``min_gap`` apart (and from the ends)."""
    if min_gap is None:
        min_gap = max(1, n // (4 * (n_changepoints + 1)))
    slack = n - min_gap * (n_changepoints + 1)
    if slack < 0:
        raise ValueError(
            f"{n_changepoints} change-points {min_gap} apart do not fit in {n} samples"
        )
    extra = np.sort(rng.integers(0, slack + 1, size=n_changepoints))
    return (np.arange(1, n_changepoints + 1) * min_gap + extra).astype(np.int64)


def _segments(n: int, cps: np.ndarray):
    bounds = np.concatenate(([0], cps, [n]))
    return zip(bounds[:-1], bounds[1:], strict=True)


def piecewise_constant(
    n: int, n_changepoints: int, *, d: int = 1, jump: float = 1.0, noise: float = 1.0, seed: int = 0
) -> SyntheticSignal:
    """Gaussian noise around a piecewise-constant mean (a mean change of ``jump`` per channel)."""
    rng = np.random.default_rng(seed)
    cps = random_changepoints(n, n_changepoints, rng)
    x = rng.normal(0.0, noise, size=(n, d))
    level = np.zeros(d)
    for a, b in _segments(n, cps):
        x[a:b] += level
        level = level + jump * rng.choice([-1.0, 1.0], size=d)
    return SyntheticSignal(x[:, 0] if d == 1 else x, cps)


def changing_distribution(
    n: int, n_changepoints: int, *, seed: int = 0, dtype=np.float32
) -> SyntheticSignal:
    """A univariate signal whose law changes at each change-point.

    Consecutive segments differ in mean, in scale or in shape (normal,
    uniform, Laplace, exponential with matched moments), never in nothing.
    """
    rng = np.random.default_rng(seed)
    cps = random_changepoints(n, n_changepoints, rng)
    x = np.empty(n, dtype=dtype)
    prev = None
    for a, b in _segments(n, cps):
        while True:
            law = (
                int(rng.integers(4)),
                float(rng.choice([-1.0, 0.0, 1.0])),
                float(rng.choice([0.5, 1.0, 2.0])),
            )
            if law != prev:
                break
        prev = law
        shape, mean, sd = law
        m = b - a
        if shape == 0:
            seg = rng.normal(0.0, 1.0, m)
        elif shape == 1:
            seg = rng.uniform(-np.sqrt(3.0), np.sqrt(3.0), m)
        elif shape == 2:
            seg = rng.laplace(0.0, 1.0 / np.sqrt(2.0), m)
        else:
            seg = rng.exponential(1.0, m) - 1.0
        x[a:b] = mean + sd * seg
    return SyntheticSignal(x, cps)


def _draw_pareto(rng: np.random.Generator, size: int) -> np.ndarray:
    """Pareto of shape 3 and scale 1.5 (numpy's ``pareto`` is the Lomax law: add 1)."""
    return 1.5 * (1.0 + rng.pareto(3.0, size))


#: The laws of the thesis's scenario 1 (name, sampler).
SCENARIO1_LAWS = (
    ("Binomial(10, 0.2)", lambda rng, m: rng.binomial(10, 0.2, m).astype(float)),
    ("NegativeBinomial(3, 0.7)", lambda rng, m: rng.negative_binomial(3, 0.7, m).astype(float)),
    # 10 white and 5 black balls, 2 drawn (R's rhyper(m=10, n=5, k=2))
    ("Hypergeometric(10, 5, 2)", lambda rng, m: rng.hypergeometric(10, 5, 2, m).astype(float)),
    ("Normal(2.5, sd 0.5)", lambda rng, m: rng.normal(2.5, 0.5, m)),
    ("Gamma(0.5, scale 5)", lambda rng, m: rng.gamma(0.5, 5.0, m)),
    ("Weibull(2) x 5", lambda rng, m: 5.0 * rng.weibull(2.0, m)),
    ("Pareto(3) x 1.5", _draw_pareto),
)

#: The laws of the thesis's scenario 2: mean 0.5 and variance 0.25 for all three.
SCENARIO2_LAWS = (
    ("Bernoulli(0.5)", lambda rng, m: rng.binomial(1, 0.5, m).astype(float)),
    ("Normal(0.5, sd 0.5)", lambda rng, m: rng.normal(0.5, 0.5, m)),
    ("Exponential(mean 0.5)", lambda rng, m: rng.exponential(0.5, m)),
)


def _scenario(laws, n: int, n_changepoints: int, seed: int, min_gap: int | None) -> SyntheticSignal:
    rng = np.random.default_rng(seed)
    if min_gap is None:
        min_gap = max(1, n // (2 * (n_changepoints + 1)))
    cps = random_changepoints(n, n_changepoints, rng, min_gap=min_gap)
    x = np.empty(n)
    prev = -1
    for a, b in _segments(n, cps):
        if prev < 0:
            law = int(rng.integers(len(laws)))
        else:  # uniform among the laws other than the previous one
            law = int(rng.integers(len(laws) - 1))
            law += law >= prev
        prev = law
        x[a:b] = laws[law][1](rng, b - a)
    return SyntheticSignal(x, cps)


def scenario1(
    n: int = 1000, n_changepoints: int = 10, *, seed: int = 0, min_gap: int | None = None
) -> SyntheticSignal:
    """The thesis's scenario 1: each segment's law is drawn among
    :data:`SCENARIO1_LAWS` (never the law of the previous segment).

    Change-points are uniform subject to a minimum gap (default
    ``n / (2 (K + 1))``) between them and from the ends.
    """
    return _scenario(SCENARIO1_LAWS, n, n_changepoints, seed, min_gap)


def scenario2(
    n: int = 1000, n_changepoints: int = 10, *, seed: int = 0, min_gap: int | None = None
) -> SyntheticSignal:
    """The thesis's scenario 2: Bernoulli(0.5), Normal(0.5, sd 0.5) or
    Exponential(mean 0.5) per segment -- same mean and variance, only the
    shape of the law changes (never the same law twice in a row)."""
    return _scenario(SCENARIO2_LAWS, n, n_changepoints, seed, min_gap)


def multivariate(
    n: int = 1000, n_changepoints: int = 10, *, d: int = 3, rho: float = 0.8, seed: int = 0
) -> SyntheticSignal:
    """A d-channel Gaussian signal whose correlation structure changes.

    Every channel is N(0, 1) in every segment; segments alternate between
    independent channels and channels with pairwise correlation ``+rho`` or
    ``-rho / (d - 1)`` (positive definite), so only the joint law changes.
    """
    if d < 2:
        raise ValueError("the multivariate scenario needs d >= 2 channels")
    rng = np.random.default_rng(seed)
    cps = random_changepoints(
        n, n_changepoints, rng, min_gap=max(1, n // (2 * (n_changepoints + 1)))
    )
    structures = [0.0, rho, -rho / (d - 1)]
    x = np.empty((n, d))
    prev = -1
    for a, b in _segments(n, cps):
        if prev < 0:
            choice = int(rng.integers(len(structures)))
        else:
            choice = int(rng.integers(len(structures) - 1))
            choice += choice >= prev
        prev = choice
        r = structures[choice]
        cov = np.full((d, d), r) + (1.0 - r) * np.eye(d)
        x[a:b] = rng.multivariate_normal(np.zeros(d), cov, size=b - a)
    return SyntheticSignal(x, cps)


def write_zarr(
    x: np.ndarray,
    path: str | os.PathLike,
    *,
    name: str = "x",
    chunks: int = 2**20,
    overwrite: bool = False,
    changepoints: np.ndarray | None = None,
):
    """Write ``x`` (time first) as array ``name`` of a zarr group at ``path``; returns the array.

    With ``changepoints``, the ground truth is stored in the array's
    attributes (``changepoints``).  Any generator's output can be written at
    any n: ``write_zarr(scenario1(10**7, 50).x, ...)``.  The dimensions are
    named ``time`` (and ``channel``), so ``xarray.open_zarr`` reads the store.
    """
    import zarr

    group = zarr.open_group(os.fspath(path), mode="w" if overwrite else "a")
    arr = group.create_array(
        name,
        shape=x.shape,
        dtype=x.dtype,
        chunks=(min(chunks, x.shape[0]),) + x.shape[1:],
        overwrite=overwrite,
        dimension_names=("time", "channel")[: x.ndim],
    )
    arr[...] = x
    if changepoints is not None:
        arr.attrs["changepoints"] = [int(c) for c in changepoints]
    return arr
