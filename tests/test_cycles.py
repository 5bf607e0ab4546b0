"""Daily cycles and several channels: windows that follow the period exactly,
a change inside a window that is one change, channels on a common footing,
and a cyclic archive that grows."""

from __future__ import annotations

import itertools
import json
import math
import signal
import time

import numpy as np
import pytest
import xarray as xr
import zarr
from scipy.signal import lfilter

import kcpstream
from kcpstream.engine.autofeatures import signal_period, whole_cycles
from kcpstream.features import RFF
from kcpstream.features.period import refine_period

from .test_pipeline import _kcpstream
from .test_watch import _watching


def _cyclic(n, period, seed, *, changes=(), ar=0.0, drift=0.0, amplitude=3.0):
    """A cycle of ``period`` samples (any real number) with AR(1) noise and a
    linear drift; ``changes``: ``(at, kind, size)`` with kind level, amplitude
    or noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    amp = np.full(n, amplitude)
    sd = np.full(n, 0.5)
    level = np.zeros(n)
    for at, kind, size in changes:
        {"level": level, "amplitude": amp, "noise": sd}[kind][at:] += size
    noise = lfilter([1.0], [1.0, -ar], rng.standard_normal(n)) * np.sqrt(1 - ar * ar)
    phase = rng.uniform(0, 2 * np.pi)
    x = 20 + amp * np.sin(2 * np.pi * t / period + phase) + sd * noise + level + drift * t / n
    return x.astype("f4")


def test_the_cycle_of_the_example_is_one_change():
    # an 8640-sample day at n = 8e6 (no multiple of a block): windows of whole
    # blocks drifted through the cycle and gave up to 33 change-points for 1
    n = 8_000_000
    t = np.arange(n)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        x = (20 + 3 * np.sin(2 * np.pi * t / 8640) + 0.5 * rng.standard_normal(n)).astype("f4")
        x[3_000_000:] += 1
        res = kcpstream.segment(x)
        assert res.n_changepoints == 1 and abs(int(res.changepoints[0]) - 3_000_000) < n // 100
        assert res.params["window"] == 8640 and abs(res.params["period"] - 8640) < 0.1


@pytest.mark.parametrize(
    ("period", "changes"),
    [
        (700, [(900_000, "level", 0.6)]),  # found by the stretches: samples' windows
        (1440, [(700_000, "amplitude", 1.5), (1_400_000, "level", -0.8)]),
        (2345.6, [(1_100_000, "noise", 0.8)]),  # a period of no whole number of samples
        (8640, [(600_000, "level", 1.0), (1_500_000, "amplitude", -1.2)]),
    ],
)
def test_changes_of_a_cycle_are_found_at_its_period(period, changes):
    n = 2_000_000
    for seed in range(2):
        x = _cyclic(n, period, seed, changes=changes, ar=0.6, drift=0.5)
        res = kcpstream.segment(x)
        assert res.n_changepoints == len(changes), (seed, res.changepoints)
        for c, (at, _, _) in zip(res.changepoints, changes, strict=True):
            assert abs(int(c) - at) < n // 100
        assert abs(res.params["window"] - period) <= 1


@pytest.mark.parametrize("period", [700, 3000, 8640])
def test_a_strong_change_of_a_cycle_is_one_change_point(period):
    # the window holding the change is a mixture of both sides, far from either:
    # it stood apart as a segment of its own next to the change (a temporal
    # map's windows of 700, a long cycle's of 3000 and 8640)
    n, t = 2_000_000, np.arange(2_000_000)
    for seed in range(2):
        rng = np.random.default_rng(seed)
        x = 20 + 3 * np.sin(2 * np.pi * t / period) + 0.5 * rng.standard_normal(n)
        x[1_234_567:] += 1
        res = kcpstream.segment(x.astype("f4"))
        assert res.n_changepoints == 1, (seed, res.changepoints)
        assert abs(int(res.changepoints[0]) - 1_234_567) <= period


@pytest.mark.parametrize("period", [700, 1440, 2345.6, 8640])
def test_a_steady_cycle_with_drift_and_ar_noise_is_no_change(period):
    for seed in range(2):
        res = kcpstream.segment(_cyclic(2_000_000, period, seed + 10, ar=0.8, drift=1.0))
        assert res.n_changepoints == 0, (seed, res.changepoints)


@pytest.mark.parametrize("period", [7.3, 22.5, 135.2, 50.0])
def test_refined_periods_keep_in_phase_over_the_whole_series(period):
    n = 31_250
    t = np.arange(n)
    for seed in range(3):
        rng = np.random.default_rng(seed)
        cycle = np.sin(2 * np.pi * t / period) + 0.3 * np.sign(np.sin(2 * np.pi * t / period))
        y = cycle + 2 * rng.standard_normal(n) + np.where(t > n // 3, 1.0, 0.0)
        # the given period is the nearest lag or a near multiple (a cycle of a
        # fractional period peaks highest at a whole multiple of it)
        for multiple in (1, 10):
            given = int(round(multiple * period))
            found = refine_period(y, given)
            drift = abs(found - multiple * period) * n / (multiple * period)
            assert drift < 0.05 * multiple * period, (given, found)


def test_a_cycle_in_one_channel_of_several_is_found_and_the_order_does_not_matter():
    rng = np.random.default_rng(0)
    n = 8192
    cyc = np.sin(2 * np.pi * np.arange(n) / 97)[:, None] + 0.3 * rng.standard_normal((n, 1))
    noise = rng.standard_normal((n, 2))
    pieces = [np.hstack([noise, cyc])[k * 1024 : (k + 1) * 1024 * 4] for k in range(4)]
    found = signal_period(pieces)
    assert abs(found.period - 97) < 0.05 and found.error < 0.05
    assert signal_period([p[:, ::-1] for p in pieces]) == found
    assert signal_period([p[:, :2] for p in pieces]) is None


@pytest.mark.parametrize(
    ("period", "error", "most", "window"),
    [
        (7.3, 1e-5, 10**6, 73),  # ten cycles make a whole number of samples
        (21.89994, 1e-5, 10**6, 219),  # a multiple the autocorrelation found
        (100.5, 0.001, 10**6, 201),
        (333.25, 0.001, 10**6, 1333),
        (1440.003, 0.002, 10**6, 1440),
        (700.06, 0.08, 10**6, 700),  # known to 0.08: more cycles would drift further
        (7.3, math.inf, 10**6, 7),  # known to no precision: one cycle
        (7.3, 1e-5, 50, 22),  # at most 50 samples: 3 cycles leave the least
        (900.0, 0.0, 500, 500),  # not one cycle fits
    ],
)
def test_windows_hold_whole_cycles(period, error, most, window):
    assert whole_cycles(period, error, most) == window


@pytest.mark.parametrize("period", [7.3, 24.3, 100.5, 333.25])
def test_a_steady_short_cycle_of_no_whole_number_of_samples_is_no_change(period):
    # windows of the nearest whole number of samples drift through the cycle:
    # with them, a period of 7.3 (windows of 22, three cycles) got 25 change-points
    for seed in range(2):
        x = _cyclic(1_000_000, period, seed + 20, ar=0.6, drift=1.0)
        res = kcpstream.segment(x)
        assert res.n_changepoints == 0, (seed, res.changepoints, res.params["window"])
        cycles = res.params["window"] / period
        assert abs(cycles - round(cycles)) * period < 0.05


def _channels(n, seed):
    """Temperature (a daily cycle), pressure (AR noise) and vibration (tiny
    scale): 5 changes, each in one channel, and an independent noise channel."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    cps = [300_000, 700_000, 1_100_000, 1_500_000, 1_800_000]
    temp = 15 + 5 * np.sin(2 * np.pi * t / 1440) + lfilter([1], [1, -0.8], rng.standard_normal(n))
    temp[cps[0] :] += 1.5
    temp[cps[3] :] -= 2
    pres = 1013 + lfilter([1], [1, -0.9], rng.standard_normal(n))
    pres[cps[1] :] += 3
    pres[cps[4] :] -= 2
    vib = 0.01 * rng.standard_normal(n)
    vib[cps[2] :] *= 2
    extra = rng.standard_normal(n)
    chans = {"temperature": temp, "pressure": pres, "vibration": vib, "noise": extra}
    return {k: v.astype("f4") for k, v in chans.items()}, cps


def test_joint_channels_do_not_depend_on_their_order_scale_or_a_noise_channel():
    n = 2_000_000
    chans, cps = _channels(n, 0)
    names = ["temperature", "pressure", "vibration"]
    answers = set()
    for order in itertools.permutations(names):
        res = kcpstream.segment(np.stack([chans[k] for k in order], axis=1))
        answers.add(tuple(res.changepoints.tolist()))
    assert len(answers) == 1
    (found,) = answers
    assert len(found) == 5 and all(abs(c - at) < n // 100 for c, at in zip(found, cps, strict=True))
    # a channel of noise changes the kernel, not the changes: as many, at most a
    # window apart
    with_noise = kcpstream.segment(np.stack([chans[k] for k in [*names, "noise"]], axis=1))
    assert with_noise.n_changepoints == 5
    assert np.abs(with_noise.changepoints - np.array(found)).max() <= with_noise.params["window"]


def test_scaled_fourier_features_are_the_same_for_permuted_channels():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((500, 4)) * np.array([1e-3, 1.0, 50.0, 7.0]) + [0, 5, -3, 1e3]
    perm = np.array([2, 0, 3, 1])
    a = RFF(32, scaled=True).fit(x)
    b = RFF(32, scaled=True).fit(x[:, perm])
    np.testing.assert_array_equal(a.transform(x[:50]), b.transform(x[:50, perm]))
    # unscaled, the largest channel is the kernel; scaled, each channel counts
    assert not np.array_equal(RFF(32).fit(x).weights_[perm], RFF(32).fit(x[:, perm]).weights_)


def _cyclic_store(path, x, chunk):
    z = zarr.create_array(str(path), shape=x.shape, chunks=(chunk,), dtype=x.dtype)
    z[:] = x
    return z


def test_a_cyclic_checkpointed_series_that_grows_gives_the_fresh_answer(tmp_path):
    # the run after an append crashed on the windows of a long cycle
    n, more = 3_000_000, 86_400
    x = _cyclic(n + more, 8640, 0, changes=[(1_200_000, "level", 1.0)])
    z = _cyclic_store(tmp_path / "c.zarr", x[:n], 100_000)
    first = kcpstream.segment(str(tmp_path / "c.zarr"), checkpoint=tmp_path / "ck")
    assert first.params["window"] == 8640 and first.n_changepoints == 1
    z.resize((n + more,))
    z[n:] = x[n:]
    grown = kcpstream.segment(str(tmp_path / "c.zarr"), checkpoint=tmp_path / "ck")
    fresh = kcpstream.segment(str(tmp_path / "c.zarr"))
    assert grown.diagnostics.chunks_reused > 0
    np.testing.assert_array_equal(grown.changepoints, fresh.changepoints)
    assert grown.params["period"] == fresh.params["period"]


def _cyclic_archive(folder, n, more, period=1440, at=600_000):
    """A cycle of ``period`` samples (a 1440-sample day) with a level change at
    ``at``, as a store of ``n`` samples, a job file with a checkpoint, and the
    ``more`` samples to append."""
    x = _cyclic(n + more, period, 1, changes=[(at, "level", 1.0)])
    t = np.arange(n + more).astype("datetime64[m]")
    ds = xr.Dataset({"v": (("time",), x[:n])}, coords={"time": t[:n]})
    ds.chunk({"time": 100_000}).to_zarr(folder / "archive.zarr", mode="w")
    (folder / "job.toml").write_text(
        '[input]\nstore = "archive.zarr"\nvariables = ["v"]\n\n'
        '[output]\nstore = "out"\ncheckpoint = "ck"\n'
    )
    return xr.Dataset({"v": (("time",), x[n:])}, coords={"time": t[n:]})


def _saved_result(folder):
    (path,) = (folder / "out" / "series").glob("*.json")
    return kcpstream.Segmentation.from_json(path.read_text())


def _run_and_append(folder, tail):
    """``kcpstream run`` on the job of :func:`_cyclic_archive`, ``tail``
    appended, run again: the result saved."""
    first = _kcpstream("run", folder / "job.toml", "--quiet", cwd=folder)
    assert first.returncode == 0, first.stderr
    tail.to_zarr(folder / "archive.zarr", append_dim="time")
    second = _kcpstream("run", folder / "job.toml", "--quiet", cwd=folder)
    assert second.returncode == 0 and "Traceback" not in second.stderr, second.stderr
    return _saved_result(folder)


def test_a_cyclic_archive_that_grows_is_updated_by_run(tmp_path):
    n, more = 3_000_000, 43_200
    res = _run_and_append(tmp_path, _cyclic_archive(tmp_path, n, more))
    assert res.n_samples == n + more and res.diagnostics.chunks_reused > 0
    fresh = kcpstream.segment(xr.open_zarr(tmp_path / "archive.zarr")["v"])
    np.testing.assert_array_equal(res.changepoints, fresh.changepoints)
    assert res.params["window"] == 1440


def test_an_archive_with_a_short_cycle_that_grows_is_updated_by_run(tmp_path):
    # segmented in windows of whole cycles, with both shape parts: the fits and
    # the windows' statistics of the unchanged chunks are kept
    n, more = 1_000_000, 10_000
    tail = _cyclic_archive(tmp_path, n, more, period=37.3, at=400_000)
    res = _run_and_append(tmp_path, tail)
    d = res.diagnostics
    assert res.n_samples == n + more and res.params["window"] == 373
    assert d.checkpoint == "updated" and d.fit_chunks_read == 0 and d.chunks_reused >= 9
    fresh = kcpstream.segment(xr.open_zarr(tmp_path / "archive.zarr")["v"])
    np.testing.assert_array_equal(res.changepoints, fresh.changepoints)
    np.testing.assert_array_equal(res.pvalues, fresh.pvalues)
    assert res.params["shape"] == fresh.params["shape"]


def test_a_cyclic_archive_that_grows_is_updated_by_watch(tmp_path):
    n, more = 3_000_000, 43_200
    tail = _cyclic_archive(tmp_path, n, more)
    with _watching(tmp_path / "job.toml", "--every", "1s", "--json", "--quiet") as proc:
        first = json.loads(proc.stdout.readline())
        assert first["done"] == 1 and first["failed"] == {}
        tail.to_zarr(tmp_path / "archive.zarr", append_dim="time")
        deadline, grown = time.monotonic() + 300, False
        while not grown and time.monotonic() < deadline:
            report = json.loads(proc.stdout.readline())
            assert report["failed"] == {}, report
            grown = report["done"] == 1 and _saved_result(tmp_path).n_samples == n + more
        assert grown
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "Traceback" not in err
    fresh = kcpstream.segment(xr.open_zarr(tmp_path / "archive.zarr")["v"])
    np.testing.assert_array_equal(_saved_result(tmp_path).changepoints, fresh.changepoints)
