"""Segmenter: one data pass, then predict() returns what segment() returns."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import kcpstream
from kcpstream import InputError, NotFittedError, Segmenter, datasets

SELECTIONS = [
    {},
    {"n_bkps": 2},
    {"n_bkps": 6},
    {"pen": "slope"},
    {"pen": 40.0},
    {"min_size": 700},
    {"alpha": 0.001},
    {"d_max": 5},
]


def _same(a: kcpstream.Segmentation, b: kcpstream.Segmentation) -> None:
    assert np.array_equal(a.changepoints, b.changepoints)
    assert np.array_equal(a.path_costs, b.path_costs, equal_nan=True)
    assert np.array_equal(a.pvalues, b.pvalues, equal_nan=True)
    assert np.array_equal(a.gains, b.gains)
    assert a.selection == b.selection
    assert a.params == b.params


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """2e5 samples in chunks of 2**15: searched on the block grid, refinement reads."""
    x = datasets.changing_distribution(200_000, 4, seed=3).x.astype(np.float32)
    path = str(tmp_path_factory.mktemp("seg") / "x.zarr")
    arr = zarr.create_array(path, shape=x.shape, chunks=(2**15,), dtype="float32")
    arr[:] = x
    return path


@pytest.mark.parametrize("kw", SELECTIONS, ids=repr)
def test_predict_is_segment_on_the_block_grid(store, kw):
    seg = Segmenter().fit(store)
    got = seg.predict(**kw)
    _same(got, kcpstream.segment(store, **kw))
    assert not got.diagnostics.in_memory
    assert got.diagnostics.samples_featurized_pass == 0 and got.diagnostics.chunks_read == 0


def test_predict_in_memory_and_with_dynp():
    x = datasets.changing_distribution(5_000, 3, seed=1).x
    for method in ("binseg", "dynp"):
        seg = Segmenter(method=method).fit(x)
        for kw in SELECTIONS[:4]:
            _same(seg.predict(**kw), kcpstream.segment(x, method=method, **kw))


def test_segments_evaluated_once_are_not_read_again(store):
    seg = Segmenter().fit(store)
    first = seg.predict(n_bkps=6)
    assert first.diagnostics.samples_scanned > 0
    again = seg.predict(n_bkps=6)
    _same(again, first)
    assert again.diagnostics.samples_scanned == 0
    # another min_size admits other splits: searched afresh, still segment()'s answer
    other = seg.predict(n_bkps=6, min_size=5_000)
    assert other.diagnostics.samples_scanned > 0
    _same(other, kcpstream.segment(store, n_bkps=6, min_size=5_000))


def test_a_window_map_and_a_fitted_map():
    t = np.arange(40_000)
    rng = np.random.default_rng(0)
    x = np.sin(2 * np.pi * t / np.where(t < 20_000, 50, 25)) + 0.1 * rng.normal(size=t.size)
    _same(Segmenter(window=50).fit(x).predict(), kcpstream.segment(x, window=50))
    fmap = kcpstream.RFF(16, seed=2).fit(x[:2000, None])
    _same(Segmenter(fmap).fit(x).predict(n_bkps=1), kcpstream.segment(x, features=fmap, n_bkps=1))


def test_errors():
    with pytest.raises(NotFittedError, match=r"call \.fit"):
        Segmenter().predict()
    greedy = Segmenter(method="greedy")  # kept as given, checked by fit (scikit-learn's way)
    assert greedy.method == "greedy"
    with pytest.raises(InputError, match="method must be"):
        greedy.fit(np.random.default_rng(0).normal(size=1_000))
    seg = Segmenter().fit(np.random.default_rng(0).normal(size=1_000))
    with pytest.raises(InputError, match="n_bkps must be an integer"):
        seg.predict(n_bkps=-1)
    with pytest.raises(InputError, match="cannot fit"):
        seg.predict(n_bkps=600)
    assert "fitted on array" in repr(seg)


def test_parameters_are_attributes_as_in_scikit_learn():
    x = np.random.default_rng(1).normal(size=2_000)
    x[1000:] *= 3
    seg = Segmenter(window=None, seed=3)
    assert seg.get_params()["seed"] == 3 and seg.seed == 3
    assert set(seg.get_params()) == {
        "features", "method", "window", "block_size", "seed", "sample_size", "tile",
        "cache_bytes", "progress",
    }  # fmt: skip
    assert seg.set_params(method="dynp") is seg and seg.method == "dynp"
    with pytest.raises(ValueError, match="no parameter 'n_bkps'"):
        seg.set_params(n_bkps=2)
    _same(seg.fit_predict(x, n_bkps=1), kcpstream.segment(x, method="dynp", seed=3, n_bkps=1))
    clone = Segmenter(**seg.get_params())
    _same(clone.fit(x).predict(n_bkps=1), seg.predict(n_bkps=1))


def test_a_parameter_changed_after_fit_is_an_error_until_fit_again():
    x = np.random.default_rng(2).normal(size=2_000)
    seg = Segmenter().fit(x)
    seg.set_params(sample_size=1024)
    with pytest.raises(NotFittedError, match="sample_size changed since it was fitted"):
        seg.predict()
    seg.set_params(sample_size=2048)  # an equal value is no change
    seg.predict()
    seg.method = "dynp"
    with pytest.raises(NotFittedError, match="method changed"):
        seg.predict()
    assert seg.fit(x).predict().method == "dynp"
