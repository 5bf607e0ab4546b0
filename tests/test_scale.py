"""Larger signals: counts of work (never times) and exactness with realistic block sizes."""

from __future__ import annotations

import numpy as np
import pytest

import kcpstream
from kcpstream import datasets

from .helpers import on_the_grid
from .reference import local_gains, quantized, reference_binseg


@pytest.mark.parametrize("grid", [False, True])
def test_one_million_samples_featurized_at_most_1_3_times(grid, monkeypatch):
    sig = datasets.changing_distribution(1_000_000, 10, seed=7)
    if grid:  # rounds of reads, each piece featurized as it is scanned
        on_the_grid(monkeypatch)
    res = kcpstream.segment(sig.x, n_bkps=10)
    d = res.diagnostics
    assert d.samples_featurized <= 1.3 * sig.n
    if grid:
        assert d.samples_featurized == sig.n + d.samples_scanned and d.rounds > 0
    else:  # searched in one call, each block featurized when first scanned
        assert d.rounds == 0 and sig.n < d.samples_featurized
        assert (d.samples_featurized - sig.n) % d.block_size == 0  # whole blocks
    assert d.passes == pytest.approx(d.samples_featurized / sig.n)
    # the changes are found (this signal's changes are all clear ones)
    assert np.abs(res.changepoints - sig.changepoints).max() <= 100


def test_segments_that_may_displace_the_weakest_split_are_refined_together():
    # refined one per round as the replay meets them, this search took 22 rounds
    sig = datasets.changing_distribution(400_000, 20, seed=0)
    res = kcpstream.segment(sig.x, n_bkps=20)
    assert res.diagnostics.rounds <= 12


@pytest.mark.parametrize("features", ["rff:16", "nystrom:12", "linear"])
@pytest.mark.parametrize("block_size", [None, 997, 4096])
def test_exact_against_bruteforce_at_200k(features, block_size):
    sig = datasets.changing_distribution(200_000, 8, seed=11)
    res = kcpstream.segment(
        sig.x, n_bkps=12, d_max=13, features=features, block_size=block_size, chunks=30_011
    )  # a path of 12 splits: binary segmentation's own change-points
    q = quantized(res.features.transform(sig.x), res.features.quantum_exponent_)
    expected = reference_binseg(q, res.min_size, n_bkps=12, compiled=True)
    assert res.order.tolist() == [pos for pos, _ in expected]
    unit = 2.0 ** (-2 * res.features.quantum_exponent_)
    assert res.gains.tolist() == [g * unit for g in local_gains(q, res.changepoints)]
