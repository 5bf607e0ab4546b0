"""The default map for one channel: windows of the dominant period, temporal features."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.signal import lfilter

import kcpstream
from kcpstream import NotEnoughSplitsError, datasets
from kcpstream.features import QuadratureFF, Temporal
from kcpstream.features.period import _shortest_divisor, dominant_period
from kcpstream.features.temporal import SHAPES
from kcpstream.search.stats import BlockStats

from .reference import quantized, reference_binseg


def _sine(n, period, noise=0.5, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi)) + noise * rng.normal(size=n)


def _ar1(n, phi, seed):
    e = np.random.default_rng(seed).normal(size=n + 1000)
    return lfilter([1.0], [1.0, -phi], e)[1000:]


def _stretches(x, k=8, width=8192):
    starts = np.linspace(0, len(x) - width, k).round().astype(int)
    return [x[a : a + width] for a in starts] if len(x) > width else [x]


# -- the period ---------------------------------------------------------------


@pytest.mark.parametrize("period", [5, 37, 100, 600])
def test_the_period_of_a_noisy_cycle_is_found(period):
    x = _sine(200_000, period)
    assert abs(dominant_period(_stretches(x)) - period) <= max(1, period // 100)


@pytest.mark.parametrize(("n", "period"), [(1_000, 50), (10_000, 500), (200_000, 600)])
def test_the_period_of_a_cycle_on_a_trend_is_found(n, period):
    # a drift keeps the autocorrelation of a stretch about its mean positive at
    # every lag: each stretch is taken about its own line
    found = [
        dominant_period(_stretches(_sine(n, period, seed=s) + 2.0 * np.arange(n) / n))
        for s in range(10)
    ]
    assert all(f is not None and abs(f - period) <= max(1, period // 50) for f in found)


def test_a_cycle_of_spikes_has_its_own_period_not_a_harmonic():
    x = np.zeros(50_000)
    x[::50] = 5.0  # a heartbeat-like train: every harmonic of 1/50 is as strong
    x += np.random.default_rng(0).normal(scale=0.3, size=x.size)
    assert dominant_period(_stretches(x)) == 50


@pytest.mark.parametrize(
    "make",
    [
        lambda s: np.random.default_rng(s).normal(size=100_000),
        lambda s: _ar1(100_000, 0.95, s),
        lambda s: np.cumsum(np.random.default_rng(s).normal(size=100_000)),  # random walk
        lambda s: np.linspace(0, 5, 100_000) + np.random.default_rng(s).normal(size=100_000),
        lambda s: datasets.changing_distribution(60_000, 6, seed=s).x.astype(float),
        lambda s: datasets.scenario1(10_000, 10, seed=s).x.ravel(),
    ],
    ids=["iid", "ar(0.95)", "random walk", "trend", "changes", "scenario 1"],
)
def test_noise_drift_and_changes_have_no_period(make):
    found = [dominant_period(_stretches(make(seed))) for seed in range(10)]
    assert found == [None] * 10


def test_a_lag_divides_the_highest_peak_within_an_eighth_of_itself():
    assert _shortest_divisor(60, np.array([17, 30, 60])) == 30
    # 60 / 17 = 3.53 is within half of 4: a tolerance of an eighth of the multiple
    # (0.5 at 4) took 17 for a divisor
    assert _shortest_divisor(60, np.array([17, 60])) == 60
    assert _shortest_divisor(61, np.array([15, 61])) == 15  # 4.07 periods
    assert _shortest_divisor(61, np.array([])) == 61


def test_too_short_stretches_have_no_period():
    assert dominant_period([np.arange(10.0)]) is None
    assert dominant_period([]) is None
    assert dominant_period([np.ones(1000)]) is None  # no variation


# -- the temporal map -----------------------------------------------------------


def test_marginal_part_is_the_mean_of_the_pointwise_features():
    x = np.random.default_rng(1).gamma(2.0, size=4_000)
    rows = x.reshape(-1, 20)
    fmap = Temporal(64, window=20, shape_share=0.25).fit(rows)
    point = QuadratureFF(32, bandwidth=fmap.bandwidth_).fit(x)
    assert np.array_equal(point.weights_, fmap.weights_)
    z = fmap.transform(rows).astype(np.float64)
    mean = point.transform(x).astype(np.float64).reshape(-1, 20, 32).mean(axis=1)
    step = 2.0**-point.quantum_exponent_ + 2.0**-fmap.quantum_exponent_
    # centred on the fit sample's mean features
    np.testing.assert_allclose(z[:, :32] + fmap.offset_[:32], np.sqrt(0.75) * mean, atol=2 * step)
    assert np.abs(z.mean(axis=0)).max() < 1e-6  # fitted on these rows: mean 0
    raw = z + fmap.offset_
    assert ((raw**2).sum(axis=1) <= 1.0 + 1e-6).all()  # at most 1 = k(W, W)


def test_the_aligned_part_is_random_fourier_features_of_the_window():
    rng = np.random.default_rng(3)
    rows = rng.gamma(2.0, size=(200, 3 * 12))  # 200 windows of 12 samples, d = 3
    fmap = Temporal(64, window=12, shape="aligned").fit(rows)
    k = fmap._n_shape // 2
    assert fmap.templates_.shape == (k, 12, 3) and fmap.n_features_in_ == 12 * 3
    windows = rows.reshape(200, 12, 3)
    # the bandwidth: the median distance between two of the fit windows (every pair)
    i, j = np.triu_indices(200, 1)
    bandwidth = np.median(np.sqrt(((windows[i] - windows[j]) ** 2).sum(axis=(1, 2))))
    scale = 1.0 / np.sqrt((fmap.templates_**2).mean()) / bandwidth
    assert 0.85 < scale < 1.15  # Gaussian frequencies of scale 1 / bandwidth
    z = (windows - fmap.center_).reshape(200, -1) @ fmap.templates_.reshape(k, -1).T
    b = np.sqrt(0.5 / k)
    expected = np.hstack([b * np.cos(z), b * np.sin(z)])
    got = fmap.transform(rows).astype(np.float64) + fmap.offset_
    m = fmap.weights_.shape[1]
    step = 2.0**-fmap.quantum_exponent_
    np.testing.assert_allclose(got[:, 2 * m :], expected, atol=step + 1e-7)  # (float32)
    # the products of the features are the Gaussian kernel of the windows, in the mean
    gram = got[:, 2 * m :] @ got[:, 2 * m :].T
    squared = ((windows[:, None] - windows[None]) ** 2).sum(axis=(2, 3))
    exact = 0.5 * np.exp(-squared / 2 / bandwidth**2)
    assert np.abs(gram - exact).mean() < 0.05


def test_canonical_features_do_not_depend_on_where_the_cycle_starts():
    # windows of 2 cycles of 30 samples, each shifted by its own number of samples
    rng = np.random.default_rng(5)
    t = np.arange(60)
    shapes = [np.sin(2 * np.pi * t / 30) + 0.5 * np.sin(6 * np.pi * t / 30 + k) for k in range(40)]
    rows = np.array(shapes)
    fmap = Temporal(64, window=60, shape="canonical", cycles=2).fit(rows)
    shifted = np.array([np.roll(r, s) for r, s in zip(rows, rng.integers(0, 60, 40), strict=True)])
    step = 2.0**-fmap.quantum_exponent_
    np.testing.assert_allclose(fmap.transform(shifted), fmap.transform(rows), atol=2 * step)
    # (a shift by a fraction of a cycle is no whole number of samples in general:
    # the shape part's features of a window and of its reverse differ)
    reverse = fmap.transform(rows[:, ::-1].copy())
    assert np.abs(reverse - fmap.transform(rows)).max() > 100 * step


def _sawtooth(flip: bool, seed: int, cycles: int = 300) -> np.ndarray:
    # a ramp up and a drop, then a ramp down: the same values, the same waveform
    # turned around in time
    rng = np.random.default_rng(seed)
    t = np.arange(48)
    saw = np.clip((t - 8) / 24, 0, 1) * (t < 32)
    x = np.concatenate(
        [np.tile(saw, cycles // 2), np.tile(saw[::-1] if flip else saw, cycles // 2)]
    )
    return x + 0.3 * rng.normal(size=x.size)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_canonical_shape_sees_a_waveform_turned_around(seed):
    x = _sawtooth(True, seed)
    canonical = kcpstream.segment(x, features=Temporal(window=48, shape="canonical"))
    assert abs(int(canonical.changepoints[0]) - 7200) <= 48 and canonical.n_changepoints == 1
    assert kcpstream.segment(x, features=Temporal(window=48)).n_changepoints == 0


def test_a_steady_waveform_is_no_change_for_the_canonical_shape():
    # at the level of 0.01 (with short end pieces, where the test is least sure)
    found = [
        kcpstream.segment(_sawtooth(False, seed), features=Temporal(window=48, shape="canonical"))
        for seed in range(20)
    ]
    assert sum(res.n_changepoints > 0 for res in found) <= 2


def test_an_earlier_temporal_map_without_a_shape_loads_as_invariant():
    fmap = Temporal(32, window=10, n_bins=4).fit(np.random.default_rng(0).normal(size=(50, 10)))
    data = fmap.to_dict()
    del data["params"]["shape"], data["params"]["cycles"]
    back = kcpstream.FeatureMap.from_dict(data)
    assert back.shape == "invariant" and back == fmap


@pytest.mark.parametrize("shape", ["aligned", "canonical"])
def test_without_its_level_a_window_is_seen_less_its_mean(shape):
    rng = np.random.default_rng(6)
    t = np.arange(60)
    rows = np.array([np.sin(2 * np.pi * t / 30 + k) + 0.2 * rng.normal(size=60) for k in range(40)])
    moved = rows + rng.normal(scale=2.0, size=(40, 1))  # each window at a level of its own
    for level in (True, False):
        fmap = Temporal(64, window=60, shape=shape, cycles=2, level=level).fit(rows)
        m = fmap.weights_.shape[1]
        shape_part = [fmap.transform(r)[:, 2 * m :] for r in (rows, moved)]
        step = 2.0**-fmap.quantum_exponent_
        if level:  # the level moves the window as a vector
            assert np.abs(shape_part[0] - shape_part[1]).max() > 100 * step
        else:  # (the marginal part still sees it)
            np.testing.assert_allclose(shape_part[1], shape_part[0], atol=2 * step)
            marginal = [fmap.transform(r)[:, : 2 * m] for r in (rows, moved)]
            assert np.abs(marginal[1] - marginal[0]).max() > 0.01
    # a map that sees the level describes itself as before `level` existed, so the
    # statistics a checkpoint keeps under that description stay found
    assert "level" not in Temporal(window=8, shape=shape).to_dict()["params"]
    back = kcpstream.FeatureMap.from_json(Temporal(window=8, shape=shape, level=False).to_json())
    assert back.level is False


def test_the_aligned_shape_sees_a_waveform_move_within_its_cycle():
    # the bump moves from the 10th to the 34th of 48 samples: the marginal law
    # and every cyclic shift of the cycle are the same, so only where the bump
    # sits in a window that starts at the same phase tells the halves apart
    rng = np.random.default_rng(4)
    cycle = np.zeros(48)
    bump = np.exp(-0.5 * ((np.arange(48) - 10) / 2.0) ** 2) * 3
    before, after = cycle + bump, cycle + np.roll(bump, 24)
    x = np.concatenate([np.tile(before, 150), np.tile(after, 150)])
    x += 0.3 * rng.normal(size=x.size)
    aligned = kcpstream.segment(x, features=Temporal(window=48, shape="aligned"))
    invariant = kcpstream.segment(x, features=Temporal(window=48))
    assert aligned.changepoints.tolist() == [48 * 150]
    assert invariant.n_changepoints == 0


def test_delay_vectors_run_around_the_window():
    rows = np.arange(2 * 6 * 2, dtype=float).reshape(2, 12)  # 2 windows of 6 samples, d = 2
    got = Temporal(16, window=6, n_bins=4, delay=2)._rows(rows).reshape(2, 6, 6)
    cube = rows.reshape(2, 6, 2)
    for k in range(2):
        for t in range(6):
            expected = np.r_[cube[k, t], cube[k, (t + 2) % 6], cube[k, (t + 4) % 6]]
            np.testing.assert_array_equal(got[k, t], expected)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("delay", [0, 5])
def test_temporal_features_do_not_depend_on_the_tile_or_position(delay, shape):
    x = _sine(64 * 300, 64, seed=2)
    rows = x.reshape(-1, 64)
    fmap = Temporal(48, window=64, n_bins=8, delay=delay, shape=shape).fit(rows)
    assert fmap.n_features_in_ == 64
    whole = fmap.transform(rows)
    for tile in (1, 7, 1000):
        assert np.array_equal(fmap.transform(rows, tile=tile), whole)
    assert np.array_equal(fmap.transform(rows[13:]), whole[13:])
    back = kcpstream.FeatureMap.from_json(fmap.to_json())
    assert back == fmap and np.array_equal(back.transform(rows), whole)


@pytest.mark.parametrize("d", [2, 3, 4])
def test_several_channels_in_windows_are_featurized(d):
    # three channels take a quadrature rule with fewer nodes than asked for
    x = np.random.default_rng(d).standard_normal((40 * 30, d))
    rows = x.reshape(-1, 40 * d)
    fmap = Temporal(64, window=40).fit(rows)
    z = fmap.transform(rows)
    assert z.shape == (30, fmap.n_features_out_) and fmap.offset_.shape == (z.shape[1],)
    assert kcpstream.segment(x, window=40).n_changepoints == 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"window": 1}, "window must be an integer >= 2"),
        ({"n_features": 10}, "must be even and at least 16"),
        ({"n_features": 63}, "must be even"),
        ({"shape_share": 1.5}, "shape_share must be a number in"),
        ({"shape_share": True}, "shape_share must be a number in"),
        ({"delay": 8}, r"delay must be an integer in \[0, window=8\)"),
        ({"delay": -1}, "delay must be an integer"),
        ({"delay": True}, "delay must be an integer"),
        ({"shape": "phase"}, "shape must be one of 'invariant', 'aligned', 'canonical', got"),
        ({"cycles": 0}, r"cycles must be an integer in \[1, window // 2 = 4\]"),
        ({"cycles": 5}, "cycles must be an integer in"),
        ({"level": 1}, "level must be True or False, got 1"),
    ],
)
def test_bad_temporal_parameters_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Temporal(**{"n_features": 64, "window": 8, **kwargs})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    window=st.integers(2, 9),
    n_windows=st.integers(8, 60),
    n_bkps=st.integers(0, 3),
    chunk=st.integers(1, 200),
    block_size=st.integers(1, 9),
    delay=st.integers(0, 8),
    shape=st.sampled_from(SHAPES),
)
def test_temporal_search_equals_the_bruteforce_scan_of_the_windows(
    seed, window, n_windows, n_bkps, chunk, block_size, delay, shape
):
    rng = np.random.default_rng(seed)
    levels = np.repeat(rng.normal(scale=2, size=4), -(-n_windows * window // 4))
    x = rng.normal(size=n_windows * window) + levels[: n_windows * window]
    rows = x.reshape(-1, window)
    fitted = Temporal(
        16, window=window, n_bins=4, seed=seed % 7, delay=delay % window, shape=shape
    ).fit(rows)
    q = quantized(fitted.transform(x.reshape(-1, window)), fitted.quantum_exponent_)
    if (q == q[0]).all() or n_bkps > n_windows // 2 - 1:
        return
    expected = reference_binseg(q, 2, n_bkps=n_bkps)
    kw = dict(features=fitted, n_bkps=n_bkps, d_max=n_bkps + 1, min_size=2 * window)
    kw["block_size"] = block_size  # min_size in samples: 2 windows
    data = da.from_array(x, chunks=chunk * window if chunk % 3 else chunk)
    if expected is None:  # no n_bkps splits leave 2 windows on every side
        with pytest.raises(NotEnoughSplitsError):
            kcpstream.segment(data, **kw)
        return
    res = kcpstream.segment(data, **kw)
    assert res.order.tolist() == [pos * window for pos, _ in expected]


# -- the default ------------------------------------------------------------------


@pytest.mark.parametrize("n", [1_000, 10_000, 100_000])
def test_a_fixed_cycle_is_not_a_change(n):
    for seed in range(3):
        x = _sine(n, n // 20 if n < 20_000 else 500, seed=seed)
        res = kcpstream.segment(x)
        assert res.n_changepoints == 0
        assert res.params["window"] is not None and "Temporal" in res.params["features"]


def test_the_default_sees_a_change_of_frequency_the_pointwise_map_does_not():
    t = np.arange(6000)
    exact = 0
    for seed in range(5):  # each stretch without change has an alpha-level false alarm
        rng = np.random.default_rng(seed)
        x = np.r_[np.sin(t * 2 * np.pi / 40), np.sin(t * 2 * np.pi / 25)]
        x += 0.2 * rng.standard_normal(x.size)
        res = kcpstream.segment(x)
        w = res.params["window"]
        assert w is not None
        assert min(abs(res.changepoints - 6000)) <= w  # never missed
        exact += res.n_changepoints == 1
    assert exact >= 4
    assert kcpstream.segment(x, features="quadrature").n_changepoints != 1


def test_without_a_cycle_the_default_is_pointwise():
    x = datasets.changing_distribution(20_000, 3, seed=1).x
    res = kcpstream.segment(x)
    assert res.params["window"] is None and "QuadratureFF" in res.params["features"]


def test_the_default_window_does_not_depend_on_the_chunking():
    x = _sine(30_000, 70, seed=4)
    x[15_000:] *= 2.0
    runs = [kcpstream.segment(da.from_array(x, chunks=c)) for c in (30_000, 4_000, 777)]
    assert {r.params["window"] for r in runs} == {70}
    assert len({tuple(r.changepoints.tolist()) for r in runs}) == 1
    assert runs[0].n_changepoints == 1


def test_a_window_hint_takes_the_temporal_map():
    x = _sine(20_000, 50, seed=5)
    res = kcpstream.segment(x, window=25)
    assert res.params["window"] == 25 and "Temporal" in res.params["features"]


def test_the_window_leaves_the_test_enough_windows():
    x = _sine(8_000, 800, noise=0.2, seed=6)  # a period of 800: at most 8000 // 16 = 500
    res = kcpstream.segment(x)
    assert res.params["window"] == 500


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunk=st.integers(min_value=500, max_value=40_000))
def test_the_default_on_a_cycle_does_not_depend_on_the_chunking(chunk):
    x = _sine(40_000, 60, seed=8)
    x[25_000:] = np.sign(x[25_000:])
    ref = kcpstream.segment(x)
    res = kcpstream.segment(da.from_array(x, chunks=chunk))
    assert res.params["window"] == ref.params["window"] is not None
    assert res.changepoints.tolist() == ref.changepoints.tolist()
    assert res.pvalues.tolist() == ref.pvalues.tolist()
    again = kcpstream.segment(da.from_array(x, chunks=chunk))
    assert again.changepoints.tolist() == res.changepoints.tolist()  # deterministic


def test_windows_on_the_block_grid_are_read_about_once():
    # blocks of a few windows have their bridge excursion computed exactly:
    # bounded between snapshots instead, the search scanned most of the blocks
    # again (1.6 to 1.8 passes)
    n, period = 1_200_000, 12
    x = _sine(n, period, noise=0.3, seed=4)
    for a in (300_000, 700_000):
        x[a : a + 200_000] = np.sign(x[a : a + 200_000])
    res = kcpstream.segment(da.from_array(x, chunks=2**18))
    d = res.diagnostics
    assert res.params["window"] == period and not d.in_memory
    # the default segments the windows with both shape parts: each reads them about once
    assert d.passes < 2 * 1.2 and d.pieces_scanned < d.n_blocks // 5
    for shape in SHAPES:
        one = kcpstream.segment(
            da.from_array(x, chunks=2**18), features=Temporal(window=period, shape=shape)
        ).diagnostics
        assert one.passes < 1.2 and one.pieces_scanned < one.n_blocks // 5
    assert res.changepoints.tolist() == kcpstream.segment(x).changepoints.tolist()


def _channels(n, period, d, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(n)[:, None]
    x = np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi, size=d))
    return x + 0.3 * rng.normal(size=(n, d))


def test_several_channels_with_a_shared_cycle_get_windows_and_no_change():
    for seed in range(3):
        res = kcpstream.segment(_channels(20_000, 100, 8, seed))
        assert abs(res.params["window"] - 100) <= 1 and res.n_changepoints == 0


def test_a_change_of_waveform_in_one_channel_of_several_is_found():
    x = _channels(60_000, 40, 4, seed=0)
    x[30_000:, 2] = np.sign(x[30_000:, 2])
    res = kcpstream.segment(x)
    assert res.params["window"] == 40 and res.changepoints.tolist() == [30_000]


def test_windows_of_several_channels_split_over_chunks():
    # dask refuses to reshape (n, d) into (n / w, w d) in one step
    x = _channels(12_000, 30, 5, seed=1)
    a = kcpstream.segment(da.from_array(x, chunks=(1_000, 2)), window=30, n_bkps=1)
    b = kcpstream.segment(x, window=30, n_bkps=1)
    assert a.changepoints.tolist() == b.changepoints.tolist()


def _long_cycle(n, cycles, seed, amplitude_after=None):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    level = np.ones(n)
    if amplitude_after is not None:
        level[amplitude_after[0] :] = amplitude_after[1]
    phase = rng.uniform(0, 2 * np.pi)
    return level * np.sin(2 * np.pi * cycles * t / n + phase) + 0.5 * rng.standard_normal(n)


def test_a_cycle_longer_than_the_period_check_is_not_a_change():
    # 20 cycles of 50 000 samples: beyond the stretches of the period check, seen
    # in the block sums of the data pass (4 draws in 5 had 99 change-points before)
    for seed in range(3):
        res = kcpstream.segment(_long_cycle(1_000_000, 20, seed))
        assert res.n_changepoints == 0
        assert abs(res.params["window"] - 50_000) < 500
        assert res.diagnostics.samples_featurized_pass == 1_000_000  # one pass, no more


@pytest.mark.parametrize("at", [600_000, 625_000])  # on a window's edge, inside one
def test_a_change_of_a_long_cycle_is_found_at_window_resolution(at):
    x = _long_cycle(1_000_000, 20, 0, amplitude_after=(at, 2.0))
    res = kcpstream.segment(x)
    w = res.params["window"]
    # a window holding the change is a mixture of both sides: it can stand apart
    # as a segment of its own with the next window
    assert 1 <= res.n_changepoints <= 2 and min(abs(res.changepoints - at)) <= w
    assert all(abs(int(c) - at) <= 2 * w for c in res.changepoints)
    # window edges: the block edges nearest whole periods (blocks of 64 samples here)
    period = res.params["period"]
    k = np.rint(res.changepoints / period)
    assert (np.abs(res.changepoints - k * period) <= 32).all()
    assert (res.pvalues <= 0.01).all()


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunk=st.integers(min_value=3_000, max_value=200_000))
def test_a_long_cycle_does_not_depend_on_the_chunking(chunk):
    x = _long_cycle(400_000, 20, 1, amplitude_after=(250_000, 1.8))
    whole = kcpstream.segment(x)
    res = kcpstream.segment(da.from_array(x, chunks=chunk))
    assert res.params["window"] == whole.params["window"] is not None
    assert res.changepoints.tolist() == whole.changepoints.tolist()


def test_windows_of_block_statistics_hold_the_centred_window_sums():
    rng = np.random.default_rng(0)
    q = rng.integers(-50, 60, size=(1000, 3))
    norms = (q.astype(float) ** 2).sum(axis=1)
    prefix = np.c_[np.zeros((3, 1), np.int64), q.T.cumsum(axis=1)]
    stats = BlockStats.from_samples(0, prefix, norms, norms)
    # windows of 7 or 8 samples, as a period of 7.3 samples gives them
    edges = np.rint(np.arange(137) * 7.3).astype(np.int64)
    w = stats.windows(edges)
    mean = np.rint(q.mean(axis=0)).astype(np.int64)  # the mean sample, to a unit
    sums = np.array(
        [q[a:b].sum(axis=0) - (b - a) * mean for a, b in zip(edges[:-1], edges[1:], strict=True)]
    )
    assert w.n == 136 and w.block_size == 1
    np.testing.assert_array_equal(np.diff(w.prefix, axis=1), sums.T)
    assert w.cost(0, w.n) == pytest.approx(
        float((sums.astype(float) ** 2).sum() - (sums.sum(axis=0).astype(float) ** 2).sum() / 136)
    )
    with pytest.raises(ValueError):
        stats.windows(np.array([0, 5, 5, 9]))


def test_windows_of_equal_length_are_a_segmentation_of_the_window_sums():
    # centring changes no gain of windows of one length: the kernel of their means
    rng = np.random.default_rng(1)
    q = rng.integers(-50, 60, size=(700, 2))
    norms = (q.astype(float) ** 2).sum(axis=1)
    prefix = np.c_[np.zeros((2, 1), np.int64), q.T.cumsum(axis=1)]
    w = BlockStats.from_samples(0, prefix, norms, norms).windows(np.arange(0, 701, 7))
    raw = q.reshape(100, 7, 2).sum(axis=1).astype(float)
    for a, b in [(0, 100), (10, 37), (50, 99)]:
        seg = raw[a:b]
        expected = (seg**2).sum() - (seg.sum(axis=0) ** 2).sum() / (b - a)
        centred = seg - seg.mean(axis=0)
        assert w.cost(a, b) == pytest.approx(expected, rel=1e-9)
        assert w.cost(a, b) == pytest.approx((centred**2).sum(), rel=1e-9)
