"""The exact int64 sums hold any series the project is for: the grid of a map
is coarsened (once, the same for the same length) when a series is longer than
its sums hold, before anything is read; a signal far outside the fit sample's
range is refused after the pass with the sample named."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kcpstream
from kcpstream import RFF, InputError, Linear
from kcpstream.features import make_feature_map
from kcpstream.features.base import QUANTUM_BITS, SUM_BITS, FeatureMap
from kcpstream.features.registry import FEATURE_MAPS

from .helpers import fitted_map, planned_job
from .reference import quantized, reference_binseg


@pytest.mark.parametrize("name", sorted(FEATURE_MAPS))
def test_every_map_holds_any_length_on_a_grid_chosen_from_it(name):
    fmap = fitted_map(name)
    assert fmap.grid_shift_ == 0
    assert fmap.holding(fmap.capacity_) is fmap  # nothing to change while it holds
    for n in (10**10, 10**12, 2**50):
        held = fmap.holding(n)
        assert held.capacity_ >= n
        # the coarsest grid that holds n: one bit finer does not
        assert held is fmap or held.grid_shift_ == 0 or held.capacity_ // 2 < n
        assert held.holding(n) is held  # the same length, the same grid
        assert held.quantum_exponent_ == fmap.quantum_exponent_ - held.grid_shift_
        assert FeatureMap.from_json(held.to_json()) == held
        assert fmap.quantum_exponent_ == fitted_map(name).quantum_exponent_  # a copy
    if fmap.quantized_amplitude_bound_ > 0:  # the bound holds for the features made
        x = np.random.default_rng(1).normal(size=(4000, fmap.n_features_in_)) * 3
        for held in (fmap, fmap.holding(10**12)):
            q = np.abs(held.transform(x).astype(np.float64)) * 2.0**held.quantum_exponent_
            assert q.max() <= held.quantized_amplitude_bound_


def test_ten_to_the_twelve_samples_are_summed_on_a_grid_of_two_to_the_minus_22():
    # the default maps of one and of several channels
    for name, d in (("auto", 1), ("rff:32", 1), ("auto", 3)):
        fmap = fitted_map("rff" if name == "auto" and d > 1 else name, d)
        if name == "auto":
            fmap = fitted_map(type(make_feature_map("auto", seed=0, d=d)).name, d)
        held = fmap.holding(10**12)
        bits = QUANTUM_BITS - held.grid_shift_
        assert bits >= 22, (name, d, bits)
        assert 10**12 * held.quantized_amplitude_bound_ < 2.0**SUM_BITS


def test_unshifted_maps_keep_their_json_and_equality():
    fmap = fitted_map("rff:16")
    assert "_grid_shift" not in fmap.to_json()  # checkpoints of today's grid stay valid
    held = fmap.holding(10**11)
    assert held != fmap and "_grid_shift" in held.to_json()


@pytest.mark.parametrize("n", [5 * 10**9, 10**10, 10**12])
def test_a_long_series_is_planned_on_a_grid_that_holds_it_before_any_read(n):
    fmap = fitted_map("rff:32")
    job, _ = planned_job(n, fmap, n_bkps=3)
    assert job.fmap.capacity_ >= n
    assert (job.fmap.grid_shift_ == 0) == (n <= fmap.capacity_)
    assert job.fmap == fmap.holding(n)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    shift=st.integers(1, 12),
    block_size=st.integers(1, 50),
    chunks=st.integers(7, 400),
)
def test_segmentation_on_a_coarser_grid_is_exact(seed, shift, block_size, chunks):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(400, 2))
    x[230:] += rng.uniform(0.3, 2.0)
    fmap = RFF(16, seed=1).fit(x)
    held = fmap.holding(fmap.capacity_ * 2**shift)
    assert held.grid_shift_ >= shift
    q = quantized(held.transform(x), held.quantum_exponent_)
    expected = reference_binseg(q, 20, n_bkps=3)
    data = da.from_array(x, chunks=(chunks, 2))
    kw = {"n_bkps": 3, "d_max": 4, "min_size": 20, "block_size": block_size}  # greedy
    res = kcpstream.segment(data, features=held, **kw)
    assert sorted(res.changepoints.tolist()) == sorted(pos for pos, _ in expected)


def _write(path, x, chunk):
    chunks = (chunk,) + x.shape[1:]
    z = zarr.create_array(path, shape=x.shape, chunks=chunks, dtype=x.dtype, overwrite=True)
    z[:] = x
    return z


def test_a_checkpointed_series_that_grows_past_its_grid_is_summed_again_on_a_coarser_one(
    tmp_path,
):
    rng = np.random.default_rng(3)
    fmap = RFF(16, seed=0).fit(rng.normal(size=(2048, 1)))
    # a grid so fine that its sums hold only about 600 000 samples (the same
    # arithmetic as 1.7e10 samples on the grid of the fit)
    fine = fmap.holding(1)
    fine.quantum_exponent_ = fmap.quantum_exponent_ + 15
    capacity = fine.capacity_
    assert 2**19 < capacity < 2**20
    chunk = 20_000
    n1 = (capacity * 9 // 10) // chunk * chunk
    n2 = (capacity * 11 // 10) // chunk * chunk
    x = rng.normal(size=n2).astype("f4")
    x[n1 // 2 :] += 1.0
    x[n1 + (n2 - n1) // 2 :] -= 2.0
    store = str(tmp_path / "s.zarr")
    z = _write(store, x[:n1], chunk)
    kw = {"features": fine, "block_size": 500, "n_bkps": 2}
    ck = tmp_path / "ck"
    first = kcpstream.segment(store, checkpoint=ck, **kw)
    assert first.features == fine and first.diagnostics.checkpoint == "written"
    z.resize((n2,))
    z[n1:] = x[n1:]
    grown = kcpstream.segment(store, checkpoint=ck, **kw)
    # another grid: the checkpoint's sums are not mixed with the new ones
    assert grown.features == fine.holding(n2) and grown.features.grid_shift_ == 1
    assert grown.diagnostics.checkpoint == "written"
    assert grown.diagnostics.samples_featurized_pass == n2
    fresh = kcpstream.segment(store, **kw)
    assert grown.changepoints.tolist() == fresh.changepoints.tolist()
    assert grown.gains.tolist() == fresh.gains.tolist()
    assert np.all(np.abs(np.sort(grown.changepoints) - [n1 // 2, n1 + (n2 - n1) // 2]) < 500)
    # the next run loads it
    assert kcpstream.segment(store, checkpoint=ck, **kw).diagnostics.checkpoint == "loaded"


@pytest.mark.parametrize("block_size", [None, 2**17])  # one block: featurized in parts
def test_values_far_outside_the_fitted_range_are_named_with_their_sample(block_size):
    rng = np.random.default_rng(0)
    x = rng.normal(size=100_000)
    fmap = Linear().fit(x[:100, None] * 1e-6)  # fitted on a tiny range
    x[73_251] = 1e12
    data = da.from_array(x, chunks=10_000)
    with pytest.raises(InputError, match=r"far outside the range of the fit sample.*index 73251"):
        kcpstream.segment(data, features=fmap, n_bkps=1, block_size=block_size)


@pytest.mark.parametrize(("chunk", "block_size"), [(3000, 4096), (700, 2500), (9000, 4096)])
def test_blocks_longer_than_a_scan_holds_are_scanned_in_slices_exactly(
    tmp_path, monkeypatch, chunk, block_size
):
    # the blocks of a long series hold more samples than a scan featurizes at
    # once: each is read chunk by chunk and scanned slice by slice, with the
    # result of brute force on the same features
    from kcpstream.passes import scan, sliced

    monkeypatch.setattr(sliced, "LONG_PIECE", 1000)
    fed, tasks = [], []
    feed, scan_long = sliced.SlicedScan._feed, scan.scan_long
    monkeypatch.setattr(sliced.SlicedScan, "_feed", lambda s, x: fed.append(len(x)) or feed(s, x))
    monkeypatch.setattr(scan, "scan_long", lambda *a: tasks.append(1) or scan_long(*a))
    rng = np.random.default_rng(chunk)
    x = rng.normal(size=(40_000, 2)).astype(np.float32)
    for at, level in ((9_100, 0.8), (23_457, -0.4), (31_002, 0.5)):
        x[at:] += level
    fmap = RFF(16, seed=1).fit(x[:2000])
    expected = reference_binseg(quantized(fmap.transform(x), fmap.quantum_exponent_), 20, n_bkps=3)
    kw = {"features": fmap, "n_bkps": 3, "d_max": 4, "min_size": 20, "block_size": block_size}
    store = _write(tmp_path / "x.zarr", x, chunk)
    for data in (store, da.from_array(x, chunks=(chunk, 2))):
        fed.clear()
        res = kcpstream.segment(data, **kw)
        assert sorted(res.changepoints.tolist()) == sorted(pos for pos, _ in expected)
        assert fed and max(fed) <= min(chunk, sliced.slice_length(fmap))
    assert tasks  # pieces read chunk by chunk, not only from the sample cache
