"""Gaps are data: a series with missing samples (NaN) is segmented exactly as
its valid samples alone, with positions mapped back to the input's."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kcpstream
from kcpstream import InputError, MissingSamplesWarning
from kcpstream.inputs.gaps import GapMap, chunk_gaps
from kcpstream.persist import checkpoint

from .helpers import routed_cluster

# -- gap patterns ------------------------------------------------------------


def _with_gaps(x: np.ndarray, pattern: str, rng, chunk: int) -> np.ndarray:
    """``x`` (float) with one kind of gap (NaN in every channel, or in one)."""
    x = np.array(x, dtype=np.float64, copy=True)
    n = x.shape[0]
    miss = np.zeros(n, bool)
    if pattern == "isolated":
        miss[rng.choice(n, max(1, n // 20), replace=False)] = True
    elif pattern == "run":
        a = int(rng.integers(1, n // 2))
        miss[a : a + int(rng.integers(1, n // 5))] = True
    elif pattern == "chunk":  # a whole chunk
        a = chunk * int(rng.integers(0, max(1, n // chunk - 1)))
        miss[a : a + chunk] = True
    elif pattern == "across":  # a run across a chunk boundary
        b = chunk * max(1, int(rng.integers(1, max(2, n // chunk))))
        miss[max(0, b - 3) : b + 4] = True
    elif pattern == "ends":
        miss[: int(rng.integers(1, 6))] = True
        miss[n - int(rng.integers(1, 6)) :] = True
    if x.ndim == 1:
        x[miss] = np.nan
    else:  # a NaN in one channel is a missing sample
        x[miss, int(rng.integers(0, x.shape[1]))] = np.nan
    return x


def _valid(x: np.ndarray) -> np.ndarray:
    nan = np.isnan(x)
    return ~(nan.any(axis=1) if nan.ndim == 2 else nan)


def _alone(x: np.ndarray, chunk: int | None = None):
    """``x``'s valid samples alone, as the series without gaps that has the
    chunks of ``x`` (chunked by ``chunk``) with their gaps taken out: the same
    samples in the same tasks (float sums of squares then have the same bits)."""
    valid = _valid(x)
    if chunk is None:
        return x[valid]
    counts = [int(valid[a : a + chunk].sum()) for a in range(0, len(x), chunk)]
    return da.from_array(x[valid], chunks=(tuple(c for c in counts if c),) + x.shape[1:])


def _assert_same_as_valid_alone(res, ref, x) -> None:
    """``res`` (of ``x`` with gaps) is ``ref`` (of ``x``'s valid samples) mapped back."""
    index = np.flatnonzero(_valid(x))
    np.testing.assert_array_equal(res.changepoints, index[ref.changepoints])
    np.testing.assert_array_equal(res.order, index[ref.order])
    np.testing.assert_array_equal(res.gains, ref.gains)
    np.testing.assert_array_equal(res.path_costs, ref.path_costs)
    np.testing.assert_array_equal(res.segment_costs, ref.segment_costs)
    np.testing.assert_array_equal(res.pvalues, ref.pvalues)
    assert res.selection.to_dict() == ref.selection.to_dict()
    assert res.n_samples == x.shape[0]
    assert res.diagnostics.n_missing == x.shape[0] - len(index)
    if len(index) == x.shape[0]:  # no gap: nothing to say of them
        assert res.earliest.size == 0 and res.segment_valid.size == 0
        return
    # where each change could begin: just after the valid sample before it
    np.testing.assert_array_equal(res.earliest, index[ref.changepoints - 1] + 1)
    bounds = np.r_[0, ref.changepoints, ref.n_samples]
    np.testing.assert_array_equal(res.segment_valid, np.diff(bounds))


RULES = [
    {"n_bkps": 1},
    {"n_bkps": 3},
    {"pen": 0.5},
    {"pen": "auto"},
    {"pen": "slope"},
    {"method": "dynp", "n_bkps": 2},
]
MAPS = ["linear", "rff:16", "quadrature:8", "nystrom:8", "orf:8", "brownian:4"]


@st.composite
def gapped(draw):
    n = draw(st.integers(120, 500))
    d = draw(st.integers(1, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    cut = int(rng.integers(n // 4, 3 * n // 4))
    x = rng.normal(size=(n, d))
    x[cut:] = x[cut:] * 2.0 + 1.0
    chunk = draw(st.integers(7, n // 2))
    pattern = draw(st.sampled_from(["none", "isolated", "run", "chunk", "across", "ends"]))
    x = _with_gaps(x if d > 1 else x[:, 0], pattern, rng, chunk)
    return x, chunk


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    gapped(),
    st.sampled_from(MAPS),
    st.sampled_from(RULES),
    st.sampled_from([None, 1, 4, 16]),
    st.integers(0, 3),
)
def test_a_series_with_gaps_is_its_valid_samples_segmented_alone(data, fmap, rule, block, seed):
    x, chunk = data
    kw = {"features": fmap, "seed": seed, "block_size": block, "min_size": 5, **rule}
    if rule.get("pen") in ("auto", "slope"):
        kw["d_max"] = 6
    ref_exc = res_exc = None
    try:
        ref = kcpstream.segment(_alone(x, chunk), **kw)
    except (InputError, kcpstream.NotEnoughSplitsError) as exc:
        ref_exc = exc
    try:
        res = kcpstream.segment(da.from_array(x, chunks=(chunk,) + x.shape[1:]), **kw)
    except (InputError, kcpstream.NotEnoughSplitsError) as exc:
        res_exc = exc
    if ref_exc is not None or res_exc is not None:
        assert type(ref_exc) is type(res_exc), (ref_exc, res_exc)
        return
    _assert_same_as_valid_alone(res, ref, x)


def _two_regimes(n=30_000, cut=18_000, seed=0):
    rng = np.random.default_rng(seed)
    return np.r_[rng.normal(0, 1, cut), rng.normal(0.8, 1.8, n - cut)]


def _archive_with_gaps(n=30_000, seed=0):
    """Two regimes (change at 60 %), an outage, a whole missing chunk and dropped samples."""
    rng = np.random.default_rng(seed)
    x = _two_regimes(n, 3 * n // 5, seed)
    x[n // 5 : n // 5 + n // 30] = np.nan  # an outage
    x[2000:3000] = np.nan  # a whole chunk of 1000
    x[rng.choice(n, n // 150, replace=False)] = np.nan  # dropped samples
    return x


@pytest.mark.parametrize("route", ["numpy", "dask"])
def test_the_data_pass_and_refinement_honour_gaps(route):
    # a block grid (block_size=64): the data pass, the bounds and the refinement reads
    x = _archive_with_gaps()
    data = x if route == "numpy" else da.from_array(x, chunks=1000)
    for kw in ({"n_bkps": 3}, {"pen": "auto"}, {"method": "dynp", "n_bkps": 2}):
        res = kcpstream.segment(data, block_size=64, features="rff:32", seed=1, **kw)
        ref = kcpstream.segment(
            _alone(x, None if route == "numpy" else 1000),
            block_size=64, features="rff:32", seed=1, **kw,
        )  # fmt: skip
        assert not res.diagnostics.in_memory
        _assert_same_as_valid_alone(res, ref, x)


def test_the_default_map_and_its_fit_come_from_valid_samples():
    # features="auto": the period check and the fit sample read valid samples only
    x = _archive_with_gaps(seed=3)
    res = kcpstream.segment(x, chunks=1000)
    ref = kcpstream.segment(_alone(x, 1000))
    _assert_same_as_valid_alone(res, ref, x)
    assert res.features.to_json() == ref.features.to_json()


def test_a_windowed_map_segments_windows_of_valid_samples():
    x = _archive_with_gaps(seed=4)
    res = kcpstream.segment(x, window=50, n_bkps=1)
    ref = kcpstream.segment(x[_valid(x)], window=50, n_bkps=1)
    _assert_same_as_valid_alone(res, ref, x)


def test_the_issue_example_finds_the_one_true_change():
    # 10**5 samples, a change at 60 %, a 3 % outage and 200 dropped samples: filling
    # the outage invents two change-points at its edges; skipping it finds the one
    rng = np.random.default_rng(1)
    n = 100_000
    x = np.r_[rng.normal(0, 1, 60_000), rng.normal(0.5, 1.5, 40_000)]
    x[20_000:23_000] = np.nan
    x[rng.choice(n, 200, replace=False)] = np.nan
    times = pd.date_range("2026-01-01", periods=n, freq="1min")
    arr = xr.DataArray(x, dims="time", coords={"time": times}, name="temp").chunk(time=10_000)
    res = kcpstream.segment(arr)
    assert res.n_changepoints == 1 and abs(int(res.changepoints[0]) - 60_000) < 100
    assert res.changepoint_times[0] == times[res.changepoints[0]]
    filled = kcpstream.segment(pd.Series(x).ffill().to_numpy())
    assert filled.n_changepoints > 1  # what the gaps are not


def test_a_change_inside_a_gap_is_reported_at_the_first_valid_sample_after_it():
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(0, 1, 3000), rng.normal(5, 1, 3000)]
    x[2900:3200] = np.nan  # the change at 3000 lies in the gap
    times = pd.date_range("2026-01-01", periods=6000, freq="s")
    arr = xr.DataArray(x, dims="time", coords={"time": times}, name="v")
    res = kcpstream.segment(arr, n_bkps=1)
    assert res.changepoints.tolist() == [3200] and res.earliest.tolist() == [2900]
    table = res.to_dataframe()
    assert table["earliest"].tolist() == [0, 2900]
    assert table["earliest_time"].iloc[1] == times[2900]
    assert table["start_time"].iloc[1] == times[3200]
    assert table["last_time"].iloc[0] == times[2899]  # the segment's last valid sample
    assert table["valid"].tolist() == [2900, 2800]
    again = kcpstream.Segmentation.from_json(res.to_json())
    np.testing.assert_array_equal(again.earliest, res.earliest)
    assert again.times["earliest"][0] == times[2900]
    assert again.diagnostics.n_missing == 300 and again.diagnostics.longest_gap == 300


def _write_store(path, x, chunk=1000, fill=None):
    ds = xr.Dataset(
        {"v": ("time", x)},
        coords={"time": pd.date_range("2026-01-01", periods=len(x), freq="s")},
    )
    ds.chunk({"time": chunk}).to_zarr(path, mode="w")


def _kcpstream(*args):
    exe = Path(sys.executable).parent / "kcpstream"
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=600)


def test_a_store_with_gaps_gives_one_answer_on_every_route(tmp_path):
    # xarray leaves out the chunk that is all NaN (the store's fill value): a
    # lost chunk, unless missing="skip" says it is a gap
    x = _archive_with_gaps(seed=5)
    path = tmp_path / "a.zarr"
    _write_store(path, x)
    assert not (path / "v" / "c" / "2").exists()
    kw = {"n_bkps": 2, "features": "rff:32", "seed": 0}
    with pytest.raises(InputError, match=r"no chunk for samples \[2000, 3000\).*missing='skip'"):
        kcpstream.segment(str(path), variable="v", **kw)
    ref = kcpstream.segment(_alone(x, 1000), **kw)
    expected = np.flatnonzero(_valid(x))[ref.changepoints].tolist()
    kw["missing"] = "skip"
    routes = {
        "path": kcpstream.segment(str(path), variable="v", **kw),
        "url": kcpstream.segment(f"file://{path}", variable="v", **kw),
        "zarr": kcpstream.segment(zarr.open_group(path, mode="r")["v"], **kw),
        "xarray": kcpstream.segment(xr.open_zarr(path)["v"], **kw),
    }
    for name, res in routes.items():
        assert res.changepoints.tolist() == expected, name
        np.testing.assert_array_equal(res.path_costs, ref.path_costs)
        assert res.diagnostics.n_missing == int((~_valid(x)).sum())
    cli = _kcpstream(
        "segment", path, "--variable", "v", "--n-bkps", 2, "--features", "rff:32",
        "--seed", 0, "--missing", "skip", "--json",
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    out = json.loads(cli.stdout)
    assert out["changepoints"] == expected and out["n_missing"] == int((~_valid(x)).sum())
    job = tmp_path / "job.toml"
    job.write_text(
        f'[input]\nstore = "{path}"\nvariables = ["v"]\nmissing = "skip"\n'
        '[features]\nmap = "rff"\nn_features = 32\nseed = 0\n'
        '[selection]\nn_bkps = 2\n[output]\nstore = "out"\n'
    )
    ran = _kcpstream("run", job, "--json")
    assert ran.returncode == 0, ran.stderr
    (result,) = (tmp_path / "out" / "series").glob("*.json")
    assert kcpstream.Segmentation.from_json(result.read_text()).changepoints.tolist() == expected
    table = pd.read_csv(tmp_path / "out" / "segments.csv")
    assert table["start"].tolist()[1:] == expected
    assert table["valid"].sum() == int(_valid(x).sum()) and "earliest" in table


def test_an_absent_chunk_is_a_gap_only_when_asked_and_only_in_floats(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "f.zarr"
    z = zarr.create_array(path, shape=(20_000,), chunks=(1000,), dtype="f4", fill_value=0.0)
    z[:] = np.r_[rng.normal(0, 1, 12_000), rng.normal(2, 1, 8_000)].astype("f4")
    (path / "c" / "3").unlink()
    with pytest.raises(InputError, match=r"no chunk for samples \[3000, 4000\)"):
        kcpstream.segment(str(path), n_bkps=1)  # a lost chunk is never taken for a gap
    res = kcpstream.segment(str(path), n_bkps=1, missing="skip")
    assert res.diagnostics.n_missing == 1000 and res.diagnostics.longest_gap == 1000
    x = np.asarray(z[:], dtype=np.float64)
    x[3000:4000] = np.nan  # not the fill value 0.0
    ref = kcpstream.segment(_alone(x, 1000), n_bkps=1)
    _assert_same_as_valid_alone(res, ref, x)
    ints = zarr.create_array(tmp_path / "i.zarr", shape=(5000,), chunks=(1000,), dtype="i2")
    ints[:] = np.arange(5000) % 7
    with pytest.raises(InputError, match="cannot hold"):
        kcpstream.segment(str(tmp_path / "i.zarr"), missing="skip")


def test_skipna_false_refuses_nan_with_the_count_the_first_time_and_the_variable(tmp_path):
    x = _archive_with_gaps(seed=6)
    first = int(np.flatnonzero(~_valid(x))[0])
    arr = xr.DataArray(
        x, dims="time", coords={"time": pd.date_range("2026-01-01", periods=len(x), freq="s")},
        name="temperature",
    )  # fmt: skip
    missing = int((~_valid(x)).sum())
    with pytest.raises(InputError, match="skipna") as info:
        kcpstream.segment(arr.chunk(time=1000), skipna=False)
    text = str(info.value)
    assert "'temperature'" in text and f"{missing} missing samples" in text
    assert f"index {first} (time {arr.time.values[first]}" in text
    path = tmp_path / "a.zarr"
    _write_store(path, x)
    cli = _kcpstream("segment", path, "--variable", "v", "--no-skipna", "--missing", "skip")
    assert cli.returncode == 1 and "Traceback" not in cli.stderr
    assert f"{missing} missing samples" in cli.stderr
    with pytest.raises(InputError, match="skipna must be True"):
        kcpstream.segment(x, skipna="yes")


@pytest.mark.parametrize("where", [17, 2_500, 4_999])
def test_an_infinity_stays_an_error_naming_its_index(where):
    x = np.random.default_rng(0).normal(size=5_000)
    x[where] = np.inf
    x[where + 1 :: 97] = np.nan  # NaN after it are gaps, not the error
    x[:where:89] = np.nan
    with pytest.raises(InputError, match=rf"infinity at index {where}\b"):
        kcpstream.segment(da.from_array(x, chunks=700), n_bkps=1)


def test_nothing_valid_or_too_little_is_one_clear_error():
    with pytest.raises(InputError, match=r"no valid sample: all 1000 are missing"):
        kcpstream.segment(np.full(1000, np.nan))
    x = np.full(1000, np.nan)
    x[:15] = np.arange(15.0)
    with pytest.warns(MissingSamplesWarning, match="985 of its 1000 samples are missing"):
        with pytest.raises(InputError, match=r"15 samples, fewer than 2\*min_size"):
            kcpstream.segment(x, n_bkps=1, min_size=10)


def test_a_series_mostly_missing_warns():
    x = _two_regimes(4000, 2000)
    x[::3] = np.nan
    x[1::3] = np.nan
    with pytest.warns(MissingSamplesWarning, match="longest gap 2"):
        res = kcpstream.segment(x, n_bkps=1)
    assert res.diagnostics.missing_share == pytest.approx(2667 / 4000, abs=1e-3)
    assert "66.7 %" in repr(res)


def test_one_sensors_gaps_never_fail_another():
    rng = np.random.default_rng(0)
    base = np.stack([_two_regimes(20_000, 12_000, s) for s in range(3)], axis=1)
    data = base.copy()
    data[5_000:6_000, 1] = np.nan
    data[rng.choice(20_000, 300, replace=False), 2] = np.nan
    arr = xr.DataArray(data, dims=("time", "sensor"), coords={"sensor": ["a", "b", "c"]})
    batch = kcpstream.segment(arr.chunk(time=2_000), batch_dims="sensor", n_bkps=2, seed=0)
    for j, (labels, res) in enumerate(batch):
        col = data[:, j]
        ref = kcpstream.segment(_alone(col, 2_000), n_bkps=2, seed=0)
        _assert_same_as_valid_alone(res, ref, col)
        assert (res.diagnostics.n_missing > 0) == (labels["sensor"] != "a")


def test_a_segmenter_predicts_from_the_valid_samples_statistics():
    x = _archive_with_gaps(seed=7)
    seg = kcpstream.Segmenter(features="rff:32", seed=0, block_size=64).fit(x)
    for kw in ({"n_bkps": 2}, {"pen": "auto"}):
        _assert_same_as_valid_alone(
            seg.predict(**kw),
            kcpstream.segment(x[_valid(x)], features="rff:32", seed=0, block_size=64, **kw),
            x,
        )


def test_a_checkpoint_keeps_the_gaps_and_the_statistics(tmp_path, caplog):
    x = _archive_with_gaps(seed=8)
    path = tmp_path / "a.zarr"
    _write_store(path, x)
    kw = {"variable": "v", "n_bkps": 2, "block_size": 64, "checkpoint": tmp_path / "ck"}
    kw["missing"] = "skip"  # (xarray left out the chunks that are all NaN)
    first = kcpstream.segment(str(path), **kw)
    assert first.diagnostics.checkpoint == "written"
    caplog.set_level(logging.INFO, logger="kcpstream")
    caplog.clear()
    again = kcpstream.segment(str(path), **kw)
    assert again.diagnostics.checkpoint == "loaded"
    # neither a read to find the gaps, nor a pass that would meet them
    assert not [r for r in caplog.records if r.getMessage().startswith("gaps:")]
    assert again.diagnostics.samples_featurized == 0
    np.testing.assert_array_equal(again.changepoints, first.changepoints)
    # a gap record damaged into other valid JSON is not used: found again by reading
    (record,) = (tmp_path / "ck").rglob("gaps/*.json")
    body = json.loads(record.read_text())
    identity, lineage = body["identity"], body.get("lineage")
    assert checkpoint.load_gaps(tmp_path / "ck", identity, lineage) is not None
    gaps = np.array(body["summary"])
    gaps[gaps[:, 0] < gaps[:, 0].max(), 0] += 1  # a chunk's count of valid samples
    record.write_text(json.dumps({**body, "summary": gaps.tolist()}))
    assert checkpoint.load_gaps(tmp_path / "ck", identity, lineage) is None
    caplog.clear()
    read_again = kcpstream.segment(str(path), **kw)
    assert [r for r in caplog.records if r.getMessage().startswith("gaps:")]
    np.testing.assert_array_equal(read_again.changepoints, first.changepoints)
    # a gap back-filled is another input: never the statistics of the old one
    x2 = x.copy()
    x2[2000:3000] = _two_regimes(30_000, 18_000, 8)[2000:3000]
    _write_store(path, x2)
    filled = kcpstream.segment(str(path), **kw)
    assert filled.diagnostics.checkpoint != "loaded"
    ref = kcpstream.segment(_alone(x2, 1000), n_bkps=2, block_size=64)
    _assert_same_as_valid_alone(filled, ref, x2)


# -- the gap map ---------------------------------------------------------------


@given(st.lists(st.booleans(), min_size=1, max_size=80), st.integers(1, 20))
def test_gap_map_counts_and_longest_gap_match_a_scan(missing, chunk):
    miss = np.array(missing)
    x = np.where(miss, np.nan, 1.0)
    starts = np.r_[np.arange(0, len(x), chunk), len(x)]
    gaps = GapMap(
        starts, np.array([chunk_gaps(x[a:b]) for a, b in zip(starts[:-1], starts[1:], strict=True)])
    )
    assert gaps.n_missing == int(miss.sum()) and gaps.n == len(x)
    longest = run = 0
    for m in miss:
        run = run + 1 if m else 0
        longest = max(longest, run)
    assert gaps.longest_gap == longest
    assert gaps.first_missing == (int(np.argmax(miss)) if miss.any() else None)
    back = GapMap.from_dict(json.loads(json.dumps(gaps.to_dict())))
    np.testing.assert_array_equal(back.starts, gaps.starts)
    np.testing.assert_array_equal(back.summary, gaps.summary)


def test_fill_values_and_masks_are_gaps_on_every_route(tmp_path):
    # an int16 store with a CF scale and fill value: by path, as a raw zarr array
    # and through xarray, the stand-ins are missing samples, never samples
    x = _two_regimes(20_000, 12_000, 9)
    x[5_000:5_600] = np.nan
    encoding = {"v": {"dtype": "int16", "scale_factor": 0.001, "_FillValue": -32768}}
    path = tmp_path / "cf.zarr"
    xr.Dataset({"v": ("time", x)}).chunk(time=2_000).to_zarr(path, encoding=encoding)
    raw = zarr.open_group(path, mode="r")["v"]
    assert raw[5_000] == -32768
    decoded = xr.open_zarr(path)["v"].values
    ref = kcpstream.segment(_alone(decoded, 2_000), n_bkps=2)
    for data in (str(path), raw, xr.open_zarr(path)["v"]):
        kw = {"variable": "v"} if isinstance(data, str) else {}
        res = kcpstream.segment(data, n_bkps=2, **kw)
        _assert_same_as_valid_alone(res, ref, decoded)
    masked = np.ma.masked_invalid(decoded)
    masked.data[~np.isfinite(decoded)] = 1e6  # what a mask hides is no sample
    _assert_same_as_valid_alone(
        kcpstream.segment(masked, n_bkps=2), kcpstream.segment(_alone(decoded), n_bkps=2), decoded
    )


def test_gaps_the_data_pass_meets_are_not_read_again_to_be_found(caplog):
    # one NaN outside the fit sample's windows: the data pass finds it, and its
    # chunk results say where every gap is (no read to find them)
    from kcpstream.inputs.signal import fit_windows

    x = _two_regimes(200_000, 120_000, 10)
    at = 150_123
    assert not any(a <= at < b for a, b in fit_windows(len(x)))
    x[at] = np.nan
    kw = {"block_size": 64, "n_bkps": 1, "seed": 0, "features": "rff:16"}
    caplog.set_level(logging.INFO, logger="kcpstream")
    res = kcpstream.segment(da.from_array(x, chunks=10_000), **kw)
    assert not [r for r in caplog.records if r.getMessage().startswith("gaps:")]
    _assert_same_as_valid_alone(res, kcpstream.segment(_alone(x, 10_000), **kw), x)
    # a NaN in the fit sample is met first: the series is read once to find the gaps
    caplog.clear()
    x[:100] = np.nan
    res = kcpstream.segment(da.from_array(x, chunks=10_000), **kw)
    assert len([r for r in caplog.records if r.getMessage().startswith("gaps:")]) == 1
    _assert_same_as_valid_alone(res, kcpstream.segment(_alone(x, 10_000), **kw), x)


@given(st.lists(st.booleans(), min_size=2, max_size=120), st.integers(1, 30), st.booleans())
def test_valid_positions_map_back_with_kept_runs_or_by_reading(missing, chunk, keep_runs):
    from kcpstream.inputs.gaps import ValidPositions, gap_map, scan_chunk

    miss = np.array(missing)
    if miss.all():
        return
    x = np.where(miss, np.nan, 1.0)
    data = da.from_array(x, chunks=chunk)
    starts = np.r_[np.arange(0, len(x), chunk), len(x)]
    scans = [scan_chunk(x[a:b]) for a, b in zip(starts[:-1], starts[1:], strict=True)]
    if not keep_runs:  # as for chunks of more runs than are kept: read again
        scans = [(summary, None) for summary, _ in scans]
    positions = ValidPositions(gap_map(starts, scans), data)
    index = np.flatnonzero(~miss)
    ranks = np.arange(len(index) + 1)
    np.testing.assert_array_equal(positions.original(ranks), np.r_[index, len(x)])
    np.testing.assert_array_equal(positions.earliest(ranks[1:-1]), index[:-1] + 1)


def test_a_store_with_gaps_gives_the_same_answer_on_a_distributed_cluster(tmp_path):
    # the gaps found by the cluster's tasks, the pass over the valid samples on
    # its workers (processes: nothing shared with this one), the same answer
    x = _archive_with_gaps(seed=11)
    path = tmp_path / "a.zarr"
    _write_store(path, x)
    kw = {"variable": "v", "n_bkps": 2, "features": "rff:32", "seed": 0, "missing": "skip"}
    local = kcpstream.segment(str(path), **kw)
    ref = kcpstream.segment(_alone(x, 1000), n_bkps=2, features="rff:32", seed=0)
    with routed_cluster():
        on_cluster = kcpstream.segment(str(path), **kw)
        by_xarray = kcpstream.segment(xr.open_zarr(path)["v"], **{**kw, "variable": None})
    for res in (local, on_cluster, by_xarray):
        _assert_same_as_valid_alone(res, ref, x)
        assert res.diagnostics.n_missing == int((~_valid(x)).sum())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=0, max_size=60), st.integers(1, 3), st.booleans())
def test_valid_rows_in_place_are_the_rows_without_nan(missing, d, one_dim):
    """A fresh read's valid rows are moved to its start (no copy of the
    chunk): the same rows, in order, as the copy takes."""
    from kcpstream.inputs.gaps import valid_rows

    rng = np.random.default_rng(len(missing))
    x = rng.normal(size=(len(missing), d)).astype(np.float32)
    for i, miss in enumerate(missing):
        if miss:
            x[i, int(rng.integers(0, d))] = np.nan
    if one_dim:
        x = x[:, 0].copy()
    expected = valid_rows(x.copy())
    fresh = x.copy()
    got = valid_rows(fresh, own=True)
    np.testing.assert_array_equal(got, expected)
    assert np.shares_memory(got, fresh) or got.size == 0  # moved, not copied
    view = x[::1]  # not the caller's to change: copied
    before = x.copy()
    np.testing.assert_array_equal(valid_rows(view, own=True), expected)
    np.testing.assert_array_equal(x, before)
