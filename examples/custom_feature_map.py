"""A feature map of your own: the first two moments of a robustly scaled sample.

``phi(x) = (z, z^2) / 8`` with ``z = (x - median) / (1.4826 MAD)`` clipped to
[-8, 8]: the linear kernel on it sees changes of the mean and of the spread.
Registered under a name, it is used like a built-in map (by instance or by
its spec string, saved with the results and read back).

    python examples/custom_feature_map.py [--n 200000]
"""

from __future__ import annotations

import argparse
from typing import Self

import numpy as np

import kcpstream
from kcpstream.features import FeatureMap, register_feature_map
from kcpstream.features.base import as_sample, exponent_for_amplitude

CLIP = 8.0


@register_feature_map
class Moments(FeatureMap):
    """The first two moments of the robustly scaled samples (one channel)."""

    name = "moments"
    _param_names = ("clip",)
    _fitted_names = ("center_", "scale_", "quantum_exponent_")

    def __init__(self, clip: float = CLIP) -> None:
        self.clip = float(clip)

    @property
    def n_features_out_(self) -> int:
        return 2 * self.n_features_in_

    def fit(self, sample: np.ndarray) -> Self:
        x = as_sample(sample)
        self.center_ = np.median(x, axis=0)
        mad = np.median(np.abs(x - self.center_), axis=0)
        self.scale_ = np.where(mad > 0, 1.4826 * mad, 1.0)
        self.quantum_exponent_ = exponent_for_amplitude(1.0)  # every feature is in [-1, 1]
        return self

    def featurize_tile(self, x: np.ndarray, out: np.ndarray) -> None:
        # out is (1, L, 2 d): the tile's samples by rows, the features by columns
        z = np.clip((np.asarray(x, np.float64) - self.center_) / self.scale_, -self.clip, self.clip)
        d = z.shape[1]
        out[0, :, :d] = z / self.clip
        out[0, :, d:] = z * z / self.clip**2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    q = args.n // 4
    x = np.concatenate([rng.normal(0, 1, q), rng.normal(1, 1, q), rng.normal(1, 3, q),
                        rng.normal(1, 1, args.n - 3 * q)])  # fmt: skip
    res = kcpstream.segment(x, features="moments")
    print(res)
    print("true:", [q, 2 * q, 3 * q], "found:", res.changepoints.tolist())
    again = kcpstream.Segmentation.from_json(res.to_json())  # the map is read back by its name
    print("read back:", again.features)


if __name__ == "__main__":
    main()
