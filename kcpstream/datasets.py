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


def write_zarr(
    x: np.ndarray,
    path: str | os.PathLike,
    *,
    name: str = "x",
    chunks: int = 2**20,
    overwrite: bool = False,
):
    """Write ``x`` (time first) as array ``name`` of a zarr group at ``path``; returns the array."""
    import zarr

    group = zarr.open_group(os.fspath(path), mode="w" if overwrite else "a")
    arr = group.create_array(
        name,
        shape=x.shape,
        dtype=x.dtype,
        chunks=(min(chunks, x.shape[0]),) + x.shape[1:],
        overwrite=overwrite,
    )
    arr[...] = x
    return arr
