"""Every registered feature map: determinism, JSON, chunk invariance, norms, error rates."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from scipy.spatial.distance import cdist
from scipy.special import gamma as gamma_fn
from scipy.special import kv

import kcpstream
from kcpstream.features import FEATURE_MAPS, FeatureMap, make_feature_map


def _gaussian(x, y, s):
    return np.exp(-cdist(x, y, "sqeuclidean") / (2 * s**2))


def _matern(nu):
    def k(x, y, s):
        r = np.sqrt(2 * nu) * cdist(x, y) / s
        with np.errstate(invalid="ignore"):
            out = 2 ** (1 - nu) / gamma_fn(nu) * r**nu * kv(nu, r)
        return np.where(r == 0, 1.0, out)

    return k


#: name -> (factory(p, seed), exact kernel or None, stochastic?)
KERNEL_MAPS = {
    "rff": (lambda p, s: kcpstream.RFF(p, bandwidth=1.0, seed=s), _gaussian, True),
    "orf": (lambda p, s: kcpstream.features.ORF(p, bandwidth=1.0, seed=s), _gaussian, True),
    "matern": (
        lambda p, s: kcpstream.features.MaternRFF(p, nu=1.5, bandwidth=1.0, seed=s),
        _matern(1.5),
        True,
    ),
    "quadrature": (
        lambda p, s: kcpstream.features.QuadratureFF(p, bandwidth=1.0),
        _gaussian,
        False,
    ),
    "nystrom": (lambda p, s: kcpstream.Nystrom(p, bandwidth=1.0, seed=s), _gaussian, True),
    "sketched_nystrom": (
        lambda p, s: kcpstream.features.SketchedNystrom(p, density=0.1, bandwidth=1.0, seed=s),
        _gaussian,
        True,
    ),
}


def test_every_registered_map_is_covered():
    assert set(FEATURE_MAPS) == set(KERNEL_MAPS) | {"linear", "brownian", "window", "temporal"}


@pytest.mark.parametrize("K", [8, 32, 128])
def test_brownian_features_give_the_distribution_function_kernel(K):
    """<phi(x), phi(y)> = share of thresholds below min(x, y), i.e. F(min(x, y))
    for the fit sample's distribution function F, within 1/K."""
    rng = np.random.default_rng(5)
    sample = rng.gamma(2.0, size=4_000)
    fmap = kcpstream.features.BrownianThreshold(K).fit(sample)
    x = rng.gamma(2.0, size=(200, 1))
    F = np.searchsorted(np.sort(sample), np.minimum(x, x.T), side="right") / len(sample)
    err = np.abs(fmap.gram(x) - F).max()
    assert err <= 1.0 / K + 2e-3
    assert ((fmap.transform(x).astype(np.float64) ** 2).sum(axis=1) <= 1.0 + 1e-6).all()


@pytest.mark.parametrize("name", sorted(FEATURE_MAPS))
def test_determinism_json_and_chunk_invariance(name):
    rng = np.random.default_rng(1)
    x = np.r_[rng.normal(0, 1, 3_000), rng.normal(0, 3, 3_000), rng.normal(4, 1, 3_000)]
    w = make_feature_map(name).window_samples  # window maps are fitted on window rows
    rows = x[: len(x) // w * w].reshape(-1, w) if w > 1 else x
    a = make_feature_map(name, seed=3).fit(rows)
    b = make_feature_map(name, seed=3).fit(rows)
    assert a == b
    back = FeatureMap.from_json(a.to_json())
    assert back == a and np.array_equal(back.transform(rows[:100]), a.transform(rows[:100]))
    one = kcpstream.segment(x, features=a, n_bkps=2, chunks=len(x))
    many = kcpstream.segment(da.from_array(x, chunks=1_111), features=a, n_bkps=2)
    assert one.changepoints.tolist() == many.changepoints.tolist()
    assert one.gains.tolist() == many.gains.tolist()
    if name != "linear":
        assert np.abs(one.changepoints - [3_000, 6_000]).max() < 150


@pytest.mark.parametrize("name", sorted(KERNEL_MAPS))
@pytest.mark.parametrize("d", [1, 2])
def test_feature_norm_is_at_most_the_kernel_diagonal(name, d):
    factory, _, _ = KERNEL_MAPS[name]
    x = np.random.default_rng(2).normal(size=(2_000, d)) * 3
    z = factory(64, 0).fit(x[:500]).transform(x).astype(np.float64)
    assert ((z**2).sum(axis=1) <= 1.0 + 1e-5).all()  # k(x, x) = 1 for these kernels


def _error(name, p, x, seeds=4):
    factory, exact, _ = KERNEL_MAPS[name]
    truth = exact(x, x, 1.0)
    return np.mean([np.abs(factory(p, s).fit(x).gram(x) - truth).mean() for s in range(seeds)])


@pytest.mark.parametrize("name", [n for n, v in KERNEL_MAPS.items() if v[2] and "nystrom" not in n])
def test_random_feature_error_falls_like_one_over_sqrt_p(name):
    x = np.random.default_rng(3).normal(size=(300, 2))
    e16, e256 = _error(name, 16, x), _error(name, 256, x)
    assert 2.5 < e16 / e256 < 6.5  # 16x the features: about 4x smaller


@pytest.mark.parametrize("name", ["nystrom", "sketched_nystrom"])
def test_nystrom_error_falls_at_least_as_fast(name):
    x = np.random.default_rng(3).normal(size=(300, 2))
    assert _error(name, 16, x) / _error(name, 256, x) > 4


def test_quadrature_error_is_far_below_random_features_in_one_dimension():
    x = np.random.default_rng(4).normal(size=(400, 1))
    assert _error("quadrature", 32, x, seeds=1) < 1e-5
    assert _error("rff", 32, x) > 1e-2
    assert (
        _error("quadrature", 8, x, seeds=1)
        > _error("quadrature", 16, x, seeds=1)
        > _error("quadrature", 32, x, seeds=1)
    )


def test_quadrature_refuses_high_dimension():
    with pytest.raises(ValueError, match="d <= 3"):
        kcpstream.features.QuadratureFF(16).fit(np.zeros((10, 4)) + np.arange(10)[:, None])


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("scale", [1e-9, 1e13])
def test_quadrature_rule_is_the_same_at_every_scale(d, scale):
    # the merged rule is drawn at unit bandwidth: a signal in other units gets the
    # same nodes, divided by its bandwidth, and all of them (none rounded away)
    x = np.random.default_rng(5).normal(size=(200, d))
    unit = kcpstream.features.QuadratureFF(32).fit(x)
    scaled = kcpstream.features.QuadratureFF(32).fit(x * scale)
    assert scaled.n_features_out_ == unit.n_features_out_
    np.testing.assert_allclose(scaled.weights_ * scale, unit.weights_, rtol=1e-6)
    np.testing.assert_array_equal(scaled.amplitudes_, unit.amplitudes_)
    np.testing.assert_allclose(scaled.gram(x * scale), unit.gram(x), atol=1e-5)
