"""The public contract of a feature map: a map written outside the package, from
its documented hooks only, works everywhere a built-in one does."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import kcpstream
from kcpstream.features import (
    FEATURE_MAPS,
    FeatureMap,
    make_feature_map,
    register_feature_map,
)
from kcpstream.features.base import as_sample, exponent_for_amplitude


class Moments(FeatureMap):
    """(z, z^2) / 8 of z = the robustly scaled sample, clipped to [-8, 8]."""

    name = "test-moments"
    _param_names = ("clip",)
    _fitted_names = ("center_", "scale_", "quantum_exponent_")

    def __init__(self, clip: float = 8.0) -> None:
        self.clip = float(clip)

    @property
    def n_features_out_(self) -> int:
        return 2 * self.n_features_in_

    def fit(self, sample):
        x = as_sample(sample)
        self.center_ = np.median(x, axis=0)
        mad = np.median(np.abs(x - self.center_), axis=0)
        self.scale_ = np.where(mad > 0, 1.4826 * mad, 1.0)
        self.quantum_exponent_ = exponent_for_amplitude(1.0)
        return self

    def featurize_tile(self, x, out) -> None:
        z = np.clip((np.asarray(x, np.float64) - self.center_) / self.scale_, -self.clip, self.clip)
        d = z.shape[1]
        out[0, :, :d] = z / self.clip
        out[0, :, d:] = z * z / self.clip**2


@pytest.fixture
def registered():
    register_feature_map(Moments)
    yield Moments
    FEATURE_MAPS.pop(Moments.name)


def _signal(n: int = 120_000) -> np.ndarray:
    rng = np.random.default_rng(3)
    q = n // 4
    return np.concatenate([rng.normal(0, 1, q), rng.normal(1, 1, q), rng.normal(1, 3, q),
                           rng.normal(1, 1, n - 3 * q)])  # fmt: skip


def test_a_map_without_a_required_hook_cannot_be_made():
    class NoTiles(FeatureMap):
        name = "no-tiles"

        @property
        def n_features_out_(self) -> int:
            return 1

        def fit(self, sample):
            return self

    with pytest.raises(TypeError, match="featurize_tile"):
        NoTiles()


def test_a_registered_map_is_used_by_name_saved_and_read_back(registered):
    x = _signal()
    res = kcpstream.segment(x, features="test-moments")
    assert isinstance(res.features, Moments)
    assert np.abs(res.changepoints - [30_000, 60_000, 90_000]).max() <= 20
    again = kcpstream.Segmentation.from_json(res.to_json())
    assert again.features == res.features
    assert make_feature_map("test-moments").get_params() == {"clip": 8.0}


@pytest.mark.parametrize("chunks", [7_001, 30_000, 120_000])
def test_a_maps_statistics_do_not_depend_on_the_chunking(registered, chunks):
    # the block grid (not the in-memory search) over dask chunks of any length:
    # the same exact sums, so the same change-points, gains and costs
    x = _signal()
    fmap = Moments().fit(x[:5_000])
    ref = kcpstream.segment(x, features=fmap, n_bkps=3, block_size=64)
    res = kcpstream.segment(da.from_array(x, chunks=chunks), features=fmap, n_bkps=3,
                            block_size=64)  # fmt: skip
    assert res.changepoints.tolist() == ref.changepoints.tolist()
    assert res.gains.tolist() == ref.gains.tolist()
    assert res.path_costs.tolist() == ref.path_costs.tolist()
    # and the features summed are transform()'s, the public featurizer
    z = fmap.transform(x[:1000])
    assert z.shape == (1000, 2) and np.abs(z).max() <= 1.0


def test_every_error_is_kcpstreams_own_and_a_bad_parameter_an_input_error():
    from kcpstream import errors

    for name in ("InputError", "NotEnoughSplitsError", "NotFittedError", "JobError",
                 "SchedulerWarning"):  # fmt: skip
        assert getattr(kcpstream, name) is getattr(errors, name)
    # one base for every error, each still the builtin type it refines
    raised = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, Exception)]
    raised = [c for c in raised if not issubclass(c, Warning)]
    assert len(raised) == 5
    assert all(issubclass(c, kcpstream.KcpError) for c in raised)
    assert issubclass(kcpstream.InputError, ValueError)
    with pytest.raises(kcpstream.KcpError):
        kcpstream.segment(np.zeros(3))
    with pytest.raises(kcpstream.InputError, match="spec string"):
        kcpstream.segment(np.arange(1000.0), features=64)
    with pytest.raises(kcpstream.InputError, match="n_features"):
        kcpstream.RFF(n_features=0)
    with pytest.raises(kcpstream.InputError, match="bandwidth"):
        kcpstream.segment(np.arange(1000.0), features=kcpstream.RFF(16, bandwidth="wide"))
    with pytest.raises(kcpstream.NotFittedError, match="not fitted"):
        kcpstream.RFF(16).transform(np.zeros(10))
