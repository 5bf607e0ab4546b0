"""Feature maps: kernel approximation, exact norms, determinism, JSON, invariances."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import cdist, pdist

import kcpstream
from kcpstream import RFF, FeatureMap, InputError, Linear, Nystrom
from kcpstream._kernels.distances import order_statistic_pair
from kcpstream.features import (
    FEATURE_MAPS,
    ORF,
    MaternRFF,
    QuadratureFF,
    SketchedNystrom,
    make_feature_map,
)
from kcpstream.features.bandwidth import median_distance


@pytest.fixture(scope="module")
def sample():
    rng = np.random.default_rng(0)
    return np.r_[rng.normal(size=(300, 2)), rng.normal(3, 0.5, size=(300, 2))]


ALL_MAPS = [
    RFF(64, seed=3),
    RFF(32, kernel="laplacian", seed=3),
    Nystrom(40, seed=3),
    Nystrom(20, kernel="laplacian", seed=3),
    Linear(),
]


def test_registry_has_every_map():
    expected = {"rff", "orf", "matern", "quadrature", "brownian", "nystrom", "sketched_nystrom"}
    assert set(FEATURE_MAPS) == expected | {"linear", "window", "temporal"}


@pytest.mark.parametrize("fmap", ALL_MAPS, ids=repr)
def test_json_round_trip(fmap, sample):
    unfitted = FeatureMap.from_json(fmap.to_json())
    assert unfitted == fmap and not unfitted.is_fitted
    fitted = fmap.fit(sample)
    back = FeatureMap.from_json(fitted.to_json())
    assert back == fitted and type(back) is type(fitted)
    assert np.array_equal(back.transform(sample), fitted.transform(sample))


@pytest.mark.parametrize("fmap", ALL_MAPS, ids=repr)
def test_features_are_on_the_exact_grid_and_tile_invariant(fmap, sample):
    fmap.fit(sample)
    z = fmap.transform(sample)
    scaled = z.astype(np.float64) * 2.0**fmap.quantum_exponent_
    assert np.array_equal(scaled, np.rint(scaled))
    assert np.abs(scaled).max() <= 2.0**28 * 1.01
    # the features of a sample do not depend on the tile or its position in the array
    assert np.array_equal(fmap.transform(sample, tile=7), z)
    assert np.array_equal(fmap.transform(sample[123:401], tile=50), z[123:401])


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
@pytest.mark.parametrize("p", [2, 64, 512])
def test_rff_norm_is_one_and_within_the_declared_bound(kernel, p, sample):
    rng = np.random.default_rng(p)
    x = np.r_[sample, rng.normal(scale=50, size=(2000, 2))]  # large arguments too
    fmap = RFF(p, kernel=kernel).fit(sample)
    z = fmap.transform(x).astype(np.float64)
    np.testing.assert_allclose((z**2).sum(axis=1), 1.0, atol=1e-6)
    q_norm = np.sqrt(((z * 2.0**fmap.quantum_exponent_) ** 2).sum(axis=1))
    assert q_norm.max() <= fmap.quantized_norm_bound_


def test_rff_trigonometry_matches_float64_within_two_ulps_and_stays_bounded():
    """The one-pass sine/cosine against float64 trigonometry of the same float32 angles."""
    from kcpstream._kernels.featurize import rff_tile

    rng = np.random.default_rng(5)
    weights = rng.normal(size=(1, 48)).astype(np.float32)
    amplitudes = rng.uniform(0.1, 1.0, size=48).astype(np.float32)
    x = np.r_[rng.normal(scale=3, size=500), rng.uniform(-2000, 2000, size=500)][:, None]
    out = np.empty((2, len(x), 48), np.float32)
    rff_tile(x, np.zeros(1), weights, amplitudes, out)
    angle = (np.float32(x) * weights).astype(np.float64)  # the float32 projection, exactly
    ulp = np.spacing(amplitudes).astype(np.float64)
    # errors below two ulps of the amplitude, per frequency
    assert (np.abs(out[0] - amplitudes * np.cos(angle)) <= 2 * ulp).all()
    assert (np.abs(out[1] - amplitudes * np.sin(angle)) <= 2 * ulp).all()
    # huge angles: accuracy degrades but every feature stays within its amplitude
    huge = np.array([[1e6], [-3e9], [1e30], [-3e38]])
    out = np.empty((2, 4, 48), np.float32)
    rff_tile(huge, np.zeros(1), weights, amplitudes, out)
    assert np.isfinite(out).all()
    assert (np.abs(out) <= amplitudes * (1 + 1e-6)).all()


def _exact(kind, x, sigma):
    if kind == "gaussian":
        return np.exp(-cdist(x, x, "sqeuclidean") / (2 * sigma**2))
    return np.exp(-cdist(x, x, "cityblock") / sigma)


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
def test_rff_error_shrinks_like_one_over_sqrt_p(kernel, sample):
    x = sample[::4]
    errors = []
    for p in (16, 256, 4096):
        errs = []
        for seed in range(3):
            fmap = RFF(p, kernel=kernel, bandwidth=1.0, seed=seed).fit(x)
            errs.append(np.abs(fmap.gram(x) - _exact(kernel, x, 1.0)).mean())
        errors.append(np.mean(errs))
    # 16x more features: error about 4x smaller (1/sqrt(p)); allow a wide band
    assert 2.5 < errors[0] / errors[1] < 6.5
    assert 2.5 < errors[1] / errors[2] < 6.5


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
def test_nystrom_with_every_point_reproduces_the_kernel(kernel):
    x = np.random.default_rng(1).uniform(-2, 2, size=(50, 1))
    fmap = Nystrom(50, kernel=kernel, bandwidth=0.7, rcond=1e-10).fit(x)
    assert np.abs(fmap.gram(x) - _exact(kernel, x, 0.7)).max() < 1e-4


def test_nystrom_truncates_tiny_eigenvalues():
    x = np.repeat(np.arange(5.0), 10)[:, None]  # only 5 distinct points
    fmap = Nystrom(50, bandwidth=1.0).fit(x)
    assert fmap.n_features_out_ == 5


def test_median_heuristic(sample):
    assert median_distance(sample) == pytest.approx(np.median(pdist(sample)))
    l1 = np.median(pdist(sample, "cityblock"))
    assert median_distance(sample, "cityblock") == pytest.approx(l1)
    assert RFF(8, bandwidth="median").fit(sample).bandwidth_ == pytest.approx(
        np.median(pdist(sample))
    )


BANDWIDTH_MAPS = {
    "rff": (lambda **kw: RFF(8, **kw), "euclidean"),
    "rff-laplacian": (lambda **kw: RFF(8, kernel="laplacian", **kw), "cityblock"),
    "nystrom": (lambda **kw: Nystrom(8, **kw), "euclidean"),
    "nystrom-laplacian": (lambda **kw: Nystrom(8, kernel="laplacian", **kw), "cityblock"),
    "orf": (lambda **kw: ORF(8, **kw), "euclidean"),
    "quadrature": (lambda **kw: QuadratureFF(8, **kw), "euclidean"),
    "matern": (lambda **kw: MaternRFF(8, **kw), "euclidean"),
    "sketched": (lambda **kw: SketchedNystrom(8, **kw), "euclidean"),
}


@pytest.mark.parametrize("name", sorted(BANDWIDTH_MAPS))
def test_default_bandwidth_is_half_the_median_distance(sample, name):
    make, metric = BANDWIDTH_MAPS[name]
    median = np.median(pdist(sample, metric))
    default = make().fit(sample)
    assert default.bandwidth == "auto"
    assert default.bandwidth_ == pytest.approx(0.5 * median, rel=1e-12)
    assert make(bandwidth="median").fit(sample).bandwidth_ == pytest.approx(median, rel=1e-12)
    assert make(bandwidth=0.3).fit(sample).bandwidth_ == 0.3
    # a saved map keeps the rule (applied again on a refit) and its fitted value
    again = type(default).from_json(default.to_json())
    assert again.bandwidth == "auto" and again.bandwidth_ == default.bandwidth_


def test_a_rare_value_the_thinned_sample_misses_still_sets_the_scale():
    # 2 of 4096 samples differ: the median heuristic's evenly thinned 1024 hold
    # neither, and the distances between the sample's distinct values are the scale
    x = np.zeros((4096, 1))
    x[[1, 4093]] = [[2.0], [3.0]]
    assert QuadratureFF(8).fit(x).bandwidth_ == pytest.approx(0.5 * 2.0)
    with pytest.raises(ValueError, match="samples of the fit sample are equal"):
        QuadratureFF(8).fit(np.zeros((4096, 1)))


@pytest.mark.parametrize("bad", ["mean", "Median", "0.5"])
def test_unknown_bandwidth_rule_is_a_clear_error(sample, bad):
    with pytest.raises(ValueError, match=r"'auto' \(half the median distance.*'median'"):
        RFF(8, bandwidth=bad).fit(sample)


@pytest.mark.parametrize("m", [2, 3, 4, 50, 51, 1024, 3000])
@pytest.mark.parametrize("metric", ["euclidean", "cityblock"])
@pytest.mark.parametrize("d", [1, 3, 8])
def test_median_heuristic_is_exact(m, metric, d):
    x = np.random.default_rng(m).standard_normal((m, d)) * 3.0
    kept = x if m <= 1024 else x[np.linspace(0, m - 1, 1024).round().astype(np.int64)]
    expected = np.median(pdist(kept, metric))
    assert median_distance(x, metric) == expected
    if d == 1:
        assert median_distance(x[:, 0], metric) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, 0.1, 1e-300, -5e-324, 1e308, -1e308]),
            st.floats(-1e6, 1e6, allow_nan=False),
            st.floats(allow_nan=False, allow_infinity=False),
        ),
        min_size=2,
        max_size=120,
    ),
    st.sampled_from(["euclidean", "cityblock"]),
)
def test_one_channel_median_by_bisection_is_pdists_median(values, metric):
    # repeated values, signed zeros, subnormals, and differences that overflow
    x = np.array(values, dtype=np.float64)
    two = np.stack([x, x[::-1]], axis=1)
    with np.errstate(over="ignore"):  # numpy's median of two infinite distances
        expected, expected_two = np.median(pdist(x[:, None], metric)), np.median(pdist(two, metric))
    assert median_distance(x, metric) == expected
    assert median_distance(two, metric) == expected_two


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from([0.0, 1.0, 2.5, 1e-300, 5e-324, np.inf]),
            st.floats(0.0, 1e300, allow_nan=False),
        ),
        min_size=1,
        max_size=300,
    ),
    st.data(),
)
def test_order_statistic_pair_is_the_sorted_order_statistics(values, data):
    a = np.array(values, dtype=np.float64)
    k = data.draw(st.integers(0, a.size - 1))
    ordered = np.sort(a)
    expected = (ordered[k], ordered[min(k + 1, a.size - 1)])
    assert order_statistic_pair(a, k) == expected
    assert np.array_equal(a, np.array(values))  # the input is left as it was


@pytest.mark.parametrize("low_bits", [4, 12, 20, 28, 36, 44, 52])
def test_order_statistic_pair_of_values_sharing_their_leading_bits(low_bits):
    # the buckets of every round are decided among many candidates
    rng = np.random.default_rng(low_bits)
    noise = rng.integers(0, 2**low_bits, 20_000, dtype=np.uint64)
    a = (np.uint64(0x3FF0_0000_0000_0000) | noise).view(np.float64)  # in [1, 2)
    ordered = np.sort(a)
    for k in rng.integers(0, a.size - 1, 20):
        assert order_statistic_pair(a, int(k)) == (ordered[k], ordered[k + 1])


def test_order_statistic_pair_with_many_repeated_values():
    a = np.random.default_rng(0).integers(0, 7, 200_001).astype(np.float64) * 0.5
    ordered = np.sort(a)
    for k in (0, 1, 28_000, 28_570, 100_000, 199_999, 200_000):
        expected = (ordered[k], ordered[min(k + 1, a.size - 1)])
        assert order_statistic_pair(a, k) == expected


def test_order_statistic_pair_across_buckets():
    # two clusters far apart in bits: the ranks fall in different buckets
    a = np.concatenate([np.full(3000, 1e-300), np.linspace(1.0, 2.0, 3000), np.full(3000, 1e300)])
    a = np.random.default_rng(1).permutation(a)
    ordered = np.sort(a)
    for k in (2999, 3000, 5999, 6000, 8998):
        assert order_statistic_pair(a, k) == (ordered[k], ordered[k + 1])


@pytest.mark.parametrize("law", ["uniform", "lognormal", "few values", "sorted"])
def test_order_statistic_pair_through_a_sampled_window(law):
    # from 65536 values on, a strided sample narrows the candidates first
    rng = np.random.default_rng(7)
    n = 150_001
    a = {
        "uniform": rng.random(n),
        "lognormal": rng.lognormal(0.0, 4.0, n),
        "few values": rng.integers(0, 3, n) * 0.25,
        "sorted": np.sort(rng.random(n)),
    }[law]
    ordered = np.sort(a)
    for k in (0, 1, 1000, n // 2 - 1, n // 2, n - 1000, n - 2, n - 1):
        expected = (ordered[k], ordered[min(k + 1, n - 1)])
        assert order_statistic_pair(a, k) == expected


@pytest.mark.parametrize("adjacent", [False, True])
def test_radix_selection_of_one_rank_or_two_adjacent_ones(adjacent):
    # the sampled window's ends are single ranks; the pair, adjacent ones
    from kcpstream._kernels.distances import _radix_pair

    rng = np.random.default_rng(3)
    for a in (rng.random(5000), rng.integers(0, 9, 5000) * 0.5, rng.lognormal(0, 6, 5000)):
        bits, ordered = a.view(np.uint64), np.sort(a)
        for r in rng.integers(0, a.size - 1, 30):
            r2 = r + 1 if adjacent else r
            got = _radix_pair(bits, int(r), int(r2), bits.min(), bits.max()).view(np.float64)
            assert got.tolist() == [ordered[r], ordered[r2]]


def test_order_statistic_pair_when_the_sample_misleads():
    # every sampled value is 0 while most values are 1: the window misses the
    # median, and the selection runs on all the values
    n = 2**17
    a = np.ones(n)
    a[:: n // 4096] = 0.0
    a[5] = 0.5
    ordered = np.sort(a)
    for k in (n // 2, 4095, 4096, 4097):
        assert order_statistic_pair(a, k) == (ordered[k], ordered[k + 1])


def test_median_heuristic_rejects_undefined_distances():
    x = np.array([[np.inf, 0.0], [np.inf, 1.0], [0.0, 2.0]])
    with pytest.raises(ValueError, match="infinite values"):
        median_distance(x)


def test_determinism_by_seed(sample):
    a, b = RFF(32, seed=5).fit(sample), RFF(32, seed=5).fit(sample)
    assert a == b
    assert not np.array_equal(a.weights_, RFF(32, seed=6).fit(sample).weights_)
    n1, n2 = Nystrom(16, seed=5).fit(sample), Nystrom(16, seed=5).fit(sample)
    assert np.array_equal(n1.landmarks_, n2.landmarks_)


def test_seed_none_is_recorded_and_reproducible(sample):
    a = RFF(16, seed=None).fit(sample)
    b = RFF(16, seed=a.seed_).fit(sample)
    assert np.array_equal(a.weights_, b.weights_)


def test_make_feature_map_specs():
    assert make_feature_map("rff:32") == RFF(32)
    assert make_feature_map("NYSTROM:8", seed=2) == Nystrom(8, seed=2)
    assert make_feature_map("linear") == Linear()
    # every class's own name, in any case, names it too
    for name, cls in FEATURE_MAPS.items():
        assert type(make_feature_map(cls.__name__)) is cls
        assert type(make_feature_map(cls.__name__.lower())) is cls
        assert type(make_feature_map(name.upper())) is cls
    fmap = RFF(8)
    assert make_feature_map(fmap) is fmap


def test_a_spec_names_the_maps_parameters():
    # what the command line and job files can give: the advice of the fit's
    # "no scale" error (a bandwidth) is one of them
    assert make_feature_map("quadrature:bandwidth=0.5") == QuadratureFF(bandwidth=0.5)
    assert make_feature_map("rff:32,bandwidth=2.5", seed=4) == RFF(32, bandwidth=2.5, seed=4)
    assert make_feature_map("rff:kernel=laplacian,scaled=true") == RFF(
        kernel="laplacian", scaled=True
    )
    assert make_feature_map("rff:16,seed=9", seed=4) == RFF(16, seed=9)  # the spec's own
    assert make_feature_map("quadrature:bandwidth=median").bandwidth == "median"
    for spec, match in [
        ("rff:width=2", r"'width' is not a parameter of RFF \(its parameters: n_features, "),
        ("rff:64,n_features=32", "'n_features' is given twice"),
        ("rff:3.5", "the number of features must be an integer"),
    ]:
        with pytest.raises(InputError, match=match):
            make_feature_map(spec)
    x = np.r_[np.zeros(500), np.ones(500)]
    by_spec = kcpstream.segment(x, features="quadrature:bandwidth=0.5", n_bkps=1)
    by_map = kcpstream.segment(x, features=QuadratureFF(bandwidth=0.5), n_bkps=1)
    assert by_spec.changepoints.tolist() == by_map.changepoints.tolist() == [500]
    assert by_spec.gains.tolist() == by_map.gains.tolist()


def test_transform_before_fit_is_an_error():
    with pytest.raises(RuntimeError, match=r"not fitted yet: call \.fit"):
        RFF(8).transform(np.zeros(3))


def test_transform_checks_the_width(sample):
    fmap = RFF(8).fit(sample)
    with pytest.raises(ValueError, match="fitted on d=2 .* input has d=3"):
        fmap.transform(np.zeros((4, 3)))
