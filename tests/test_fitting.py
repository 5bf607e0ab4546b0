"""A fit a checkpoint kept is used only for the same samples under the same settings."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from kcpstream.engine.autofeatures import Cycle, stretch_windows
from kcpstream.engine.fitting import FitRecord, fit_reads, still_fits
from kcpstream.inputs.provenance import Units
from kcpstream.inputs.signal import EPOCH_MIN, epoch_length, fit_windows
from kcpstream.selection.significance import MIN_BATCHES


def _record(n: int, features: str = "auto", window: int = 1, period=None) -> FitRecord:
    reads = tuple(fit_reads(n, features == "auto", 2048, window))
    error = None if period is None else 0.0
    return FitRecord(
        features, 2048, None, 1, period, error, window, features == "auto", reads, "{}"
    )


def _slabs(changed: set[int] = frozenset(), slabs: int = 200):
    old = {k: f"v{k}" for k in range(slabs)}
    new = {k: f"w{k}" if k in changed else f"v{k}" for k in range(slabs)}
    return old, new


def _versions(step: int, changed: set[int] = frozenset(), slabs: int = 200):
    """The samples that changed when slabs ``changed`` of ``step`` rows did."""
    old, new = _slabs(changed, slabs)
    return Units.direct(step, 0, slabs * step, new).changed(old)


def test_the_reads_are_the_stretches_and_the_fit_windows():
    n = 5 * EPOCH_MIN // 2
    assert fit_reads(n, True, 2048, 1) == stretch_windows(n, 2048)[0]
    assert fit_reads(n, False, 2048, 1) == fit_windows(n, 2048)
    # a window map is fitted on windows of the windows of the series' epoch, which
    # stay while it grows (as the pointwise fit's samples do)
    epoch = epoch_length(n)
    assert fit_reads(n, False, 2048, 10) == [(a * 10, b * 10) for a, b in fit_windows(epoch // 10)]
    assert fit_reads(n + 100_000, False, 2048, 10) == fit_reads(n, False, 2048, 10)
    assert (
        fit_reads(n, True, 2048, 10)[: len(stretch_windows(n, 2048)[0])]
        == (stretch_windows(n, 2048)[0])
    )


def test_an_append_within_the_epoch_keeps_the_fit():
    n = EPOCH_MIN + 300_000
    record = _record(n)
    assert still_fits(record, "auto", n + 10_000, 1, 2048, None, _versions(2**16))
    # the same settings only
    assert not still_fits(record, "rff", n + 10_000, 1, 2048, None, _versions(2**16))
    assert not still_fits(record, "auto", n + 10_000, 2, 2048, None, _versions(2**16))
    assert not still_fits(record, "auto", n + 10_000, 1, 4096, None, _versions(2**16))
    assert not still_fits(record, "auto", n + 10_000, 1, 2048, 3, _versions(2**16))
    # past the epoch the windows move: fitted again
    assert not still_fits(record, "auto", 2 * EPOCH_MIN + 1, 1, 2048, None, _versions(2**16))


def test_a_changed_object_under_a_read_window_refits():
    n = EPOCH_MIN + 300_000
    record = _record(n)
    step = 2**16
    under = {(a // step) for a, _ in record.reads} | {(b - 1) // step for _, b in record.reads}
    elsewhere = set(range(40)) - under
    assert still_fits(record, "auto", n, 1, 2048, None, _versions(step, elsewhere))
    for k in sorted(under):
        assert not still_fits(record, "auto", n, 1, 2048, None, _versions(step, {k}))
    # an object the earlier version did not have (no version then) is a change
    old, new = _slabs()
    del old[min(under)]
    changed = Units.direct(step, 0, 200 * step, new).changed(old)
    assert not still_fits(record, "auto", n, 1, 2048, None, changed)


def test_a_cycle_whose_window_the_series_no_longer_allows_refits():
    n = EPOCH_MIN + 300_000
    record = _record(n, window=500, period=500)
    assert still_fits(record, "auto", n, 1, 2048, None, _versions(2**16))
    # a cycle longer than the series allows: windows of n // MIN_BATCHES, which grow
    record = _record(n, window=n // MIN_BATCHES, period=10**9)
    assert not still_fits(record, "auto", n + 1_000, 1, 2048, None, _versions(2**16))


def test_a_fit_record_keeps_the_period_and_its_error():
    record = _record(EPOCH_MIN, window=73, period=7.3)
    again = FitRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record and again.cycle == Cycle(7.3, 0.0)
    # a period known to no precision (fewer than three stretches): inf, kept as null
    vague = dataclasses.replace(record, period_error=math.inf)
    assert json.loads(json.dumps(vague.to_dict()))["period_error"] is None
    assert FitRecord.from_dict(vague.to_dict()).cycle == Cycle(7.3, math.inf)
    # a record from before the error was kept is not one (the map is fitted again)
    old = {k: v for k, v in record.to_dict().items() if k != "period_error"}
    with pytest.raises(TypeError):
        FitRecord.from_dict(old)


def test_a_fit_record_keeps_the_subsequences_of_dependent_samples():
    record = dataclasses.replace(_record(EPOCH_MIN), subsequence=12)
    again = FitRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again == record and again.subsequence == 12
    independent = _record(EPOCH_MIN)
    assert FitRecord.from_dict(independent.to_dict()).subsequence is None
    # a pointwise record from before the dependence check is not one (the map is
    # fitted again, and its samples checked): a fresh call may test them otherwise
    old = {k: v for k, v in record.to_dict().items() if k != "subsequence"}
    with pytest.raises(KeyError):
        FitRecord.from_dict(old)
    # a record of windows needs none
    windows = dataclasses.replace(_record(EPOCH_MIN, window=73, period=7.3), auto=False).to_dict()
    del windows["subsequence"]
    assert FitRecord.from_dict(windows).subsequence is None
