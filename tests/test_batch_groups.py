"""A batch past its budget of statistics runs a group of series at a time: the
answers of one group, each group's statistics freed before the next one's pass."""

from __future__ import annotations

import gc
import logging

import numpy as np
import pytest
import xarray as xr

import kcpstream
import kcpstream.engine.plan
import kcpstream.engine.run
from kcpstream import datasets
from kcpstream.engine.plan import state_groups
from kcpstream.search.stats import BlockStats

SENSORS = 6
N = 20_000


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Six sensors of 20 000 samples in a zarr store, one chunk per sensor; the
    fourth has a run of NaN."""
    x = np.stack(
        [datasets.changing_distribution(N, 2, seed=40 + s).x for s in range(SENSORS)], axis=1
    )
    x[7_000:7_500, 3] = np.nan
    path = tmp_path_factory.mktemp("groups") / "sensors.zarr"
    da_ = xr.DataArray(x.astype("f4"), dims=("time", "sensor"), name="v")
    da_.to_dataset().chunk({"time": N, "sensor": 1}).to_zarr(path, consolidated=False)
    return path


def _answers(batch) -> list:
    return [
        (
            r.changepoints.tolist(),
            r.gains.tolist(),
            None if r.pvalues is None else r.pvalues.tolist(),
            r.path_costs.tolist(),
            r.selection,
            r.diagnostics.in_memory,
            r.diagnostics.block_size,
            r.diagnostics.n_missing,
        )
        for _, r in batch
    ]


def _segment(path, **kw):
    da_ = xr.open_zarr(path, chunks=None, consolidated=False)["v"]
    return kcpstream.segment(da_, dim="time", batch_dims="sensor", missing="skip", **kw)


@pytest.mark.parametrize("kw", [{}, {"n_bkps": 2}])
def test_a_batch_in_groups_gives_the_answers_of_one_group(store, monkeypatch, caplog, kw):
    # two series' exact prefix sums in memory: the others on the block grid
    monkeypatch.setattr(kcpstream.engine.plan, "DENSE_BATCH_BYTES", 2 * 8 * (N + 1) * 64)
    whole = _segment(store, **kw)
    assert [r.diagnostics.in_memory for _, r in whole] == [True, True] + [False] * 4
    # a budget of one series: every series is a group (its in-memory limit the batch's)
    monkeypatch.setattr(kcpstream.engine.plan, "BATCH_STATE_BYTES", 1)
    with caplog.at_level(logging.INFO, logger="kcpstream"):
        grouped = _segment(store, **kw)
    assert _answers(grouped) == _answers(whole)
    lines = [r.getMessage() for r in caplog.records]
    assert [f"series {k}-{k} of {SENSORS}" in lines for k in range(1, SENSORS + 1)] == [
        True
    ] * SENSORS
    # its gap skipped: found while the series were prepared, before the groups are
    # formed (a gap that only the data pass finds is run again within its group)
    assert grouped[3].diagnostics.n_missing == 500


@pytest.fixture(scope="module")
def late_gap_store(tmp_path_factory):
    """The sensors in chunks of 1000 samples, the fourth with three NaN in a
    chunk that a fit sample of 1000 samples does not read: only the data pass
    finds them."""
    x = np.stack(
        [datasets.changing_distribution(N, 2, seed=40 + s).x for s in range(SENSORS)], axis=1
    )
    x[7_000:7_003, 3] = np.nan
    path = tmp_path_factory.mktemp("late") / "sensors.zarr"
    da_ = xr.DataArray(x.astype("f4"), dims=("time", "sensor"), name="v")
    da_.to_dataset().chunk({"time": 1000, "sensor": 1}).to_zarr(path, consolidated=False)
    return path


def test_a_gap_the_data_pass_finds_keeps_the_batchs_in_memory_limit(
    late_gap_store, monkeypatch, caplog
):
    monkeypatch.setattr(kcpstream.engine.plan, "DENSE_BATCH_BYTES", 2 * 8 * (N + 1) * 64)
    kw = {"features": "rff", "sample_size": 1000}
    whole = _segment(late_gap_store, **kw)
    monkeypatch.setattr(kcpstream.engine.plan, "BATCH_STATE_BYTES", 1)
    with caplog.at_level(logging.INFO, logger="kcpstream"):
        grouped = _segment(late_gap_store, **kw)
    lines = [r.getMessage() for r in caplog.records]
    # found by the fourth group's pass, after the groups were formed: that
    # series is run again within its group (its fit a second time)
    fourth = lines[
        lines.index(f"series 4-4 of {SENSORS}") : lines.index(f"series 5-5 of {SENSORS}")
    ]
    assert [line for line in fourth if line.startswith("fit: ")] == [
        line for line in lines if line.startswith("fit: feature maps of 1 series with NaN")
    ]
    assert sum(line.startswith("fit: ") for line in fourth) == 1
    assert grouped[3].diagnostics.n_missing == 3
    # the fourth is on the block grid in both: alone in its group, it must not
    # take the in-memory place the first two series hold over the whole batch
    assert [r.diagnostics.in_memory for _, r in grouped] == [True, True] + [False] * 4
    assert _answers(grouped) == _answers(whole)


def test_a_groups_statistics_are_freed_before_the_next_groups_pass(store, monkeypatch):
    held = []
    statistics = kcpstream.engine.run.statistics

    def counting(jobs, st):
        gc.collect()
        held.append(sum(isinstance(o, BlockStats) for o in gc.get_objects()))
        return statistics(jobs, st)

    monkeypatch.setattr(kcpstream.engine.run, "statistics", counting)
    monkeypatch.setattr(kcpstream.engine.plan, "DENSE_MAX_VALUES", 0)  # the block grid
    monkeypatch.setattr(kcpstream.engine.plan, "BATCH_STATE_BYTES", 1)
    _segment(store, n_bkps=2)
    # a pass per group (the gap was found before: no pass again), and none
    # while an earlier group's statistics are held
    assert held == [0] * SENSORS


class _Job:
    """What :func:`state_bytes` looks at."""

    def __init__(self, n: int, in_memory: bool = False) -> None:
        self.signal = type("S", (), {"n": n})()
        self.fmap = type("F", (), {"n_features_out_": 60})()
        self.block_size, self.in_memory = 100, in_memory


def test_state_bytes_are_the_prefix_rows_and_the_search_records():
    records = kcpstream.engine.plan.SEARCH_RECORD_BYTES
    assert kcpstream.engine.plan.state_bytes(_Job(10_000)) == 8 * 64 * 101 + records
    assert kcpstream.engine.plan.state_bytes(_Job(10_001)) == 8 * 64 * 102 + records
    assert kcpstream.engine.plan.state_bytes(_Job(10_000, True)) == 8 * 64 * 10_001 + records


@pytest.mark.parametrize("seed", range(20))
def test_state_groups_are_consecutive_balanced_and_as_few_as_the_budget_allows(seed):
    rng = np.random.default_rng(seed)
    jobs = [_Job(int(n)) for n in rng.integers(10, 10**6, size=rng.integers(1, 40))]
    each = [kcpstream.engine.plan.state_bytes(j) for j in jobs]
    budget = int(rng.integers(1, 2 * sum(each)))
    groups = state_groups(jobs, budget=budget)
    assert sum(groups, []) == list(range(len(jobs)))  # consecutive, each job once
    assert len(groups) <= -(-sum(each) // budget)
    share = sum(each) / len(groups)
    assert all(sum(each[i] for i in g) <= share + max(each) for g in groups)


def test_equal_series_make_equal_groups():
    jobs = [_Job(10_000) for _ in range(10)]
    one = kcpstream.engine.plan.state_bytes(jobs[0])
    assert sorted(len(g) for g in state_groups(jobs, budget=3 * one)) == [2, 2, 3, 3]
    assert state_groups(jobs, budget=10 * one) == [list(range(10))]
    assert state_groups(jobs, budget=1) == [[i] for i in range(10)]
    assert state_groups([], budget=1) == []


def test_a_batch_in_groups_keeps_every_series_in_its_checkpoint(store, tmp_path, monkeypatch):
    monkeypatch.setattr(kcpstream.engine.plan, "BATCH_STATE_BYTES", 1)
    written = _segment(store, checkpoint=tmp_path / "ck")
    assert {r.diagnostics.checkpoint for _, r in written} == {"written"}
    monkeypatch.setattr(kcpstream.engine.plan, "BATCH_STATE_BYTES", 2**40)  # one group
    loaded = _segment(store, checkpoint=tmp_path / "ck")
    assert {r.diagnostics.checkpoint for _, r in loaded} == {"loaded"}
    assert sum(r.diagnostics.samples_featurized for _, r in loaded) == 0
    assert _answers(loaded) == _answers(written)


def _reads(monkeypatch) -> list:
    """Every read of the store's chunks, as the tuple of chunk positions read."""
    import kcpstream.inputs.signal as signal_module

    seen: list = []
    real = signal_module.SourceSlice._read_chunks

    def counting(self, indices):
        seen.append(tuple(int(i) for i in indices))
        return real(self, indices)

    monkeypatch.setattr(signal_module.SourceSlice, "_read_chunks", counting)
    return seen


@pytest.mark.parametrize("cache_bytes", [2**28, 2**18])
def test_a_batchs_fit_reads_are_made_together_and_give_each_series_its_own_answer(
    store, monkeypatch, cache_bytes
):
    # the samples "auto" reads of every series in one graph (in groups of at
    # most cache_bytes), then each series fitted: the answers and the counts
    # of the fits made apart, as many chunk reads, and each series' answer alone
    together: list[int] = []
    real = kcpstream.engine.run.fit_samples

    def recorded(reads):
        together.append(len(reads))
        return real(reads)

    monkeypatch.setattr(kcpstream.engine.run, "fit_samples", recorded)
    reads = _reads(monkeypatch)
    batch = _segment(store, cache_bytes=cache_bytes)
    assert sum(together) == SENSORS
    assert len(together) == (1 if cache_bytes == 2**28 else SENSORS)  # 160 kB of float64 each
    read_together = len(reads)
    monkeypatch.setattr(kcpstream.engine.run, "_reads_together", lambda *a: False)
    apart = _segment(store, cache_bytes=cache_bytes)
    assert len(together) == (1 if cache_bytes == 2**28 else SENSORS)
    assert _answers(batch) == _answers(apart)
    if cache_bytes == 2**28:  # every chunk kept from its fit to its pass, either way
        assert len(reads) - read_together == read_together
        for (_, got), (_, want) in zip(batch, apart, strict=True):
            assert got.diagnostics.reads == want.diagnostics.reads
    else:  # a chunk past a series' share: which are read again depends on the threads' order
        for (_, got), (_, want) in zip(batch, apart, strict=True):
            assert got.diagnostics.reads.fit_chunks_read == want.diagnostics.reads.fit_chunks_read
    da_ = xr.open_zarr(store, chunks=None, consolidated=False)["v"]
    for s, (_, got) in enumerate(batch):
        want = kcpstream.segment(da_.isel(sensor=s), dim="time", missing="skip")
        assert got.changepoints.tolist() == want.changepoints.tolist()
        assert got.gains.tolist() == want.gains.tolist()


def test_a_chunk_lost_before_the_fit_reads_together_is_named_as_without_them(tmp_path, monkeypatch):
    # the batch's fit reads made together meet a lost chunk: the same one-line
    # error as the reads made series by series (which series, which samples);
    # with missing="skip" its samples are a gap either way, the same answers
    x = np.stack(
        [datasets.changing_distribution(N, 2, seed=60 + s).x for s in range(SENSORS)], axis=1
    )
    path = tmp_path / "lost.zarr"
    da_ = xr.DataArray(x.astype("f4"), dims=("time", "sensor"), name="v")
    da_.to_dataset().chunk({"time": 5_000, "sensor": 1}).to_zarr(path, consolidated=False)
    (path / "v" / "c" / "2" / "3").unlink()  # samples [10000, 15000) of sensor 3

    def run(**kw):
        v = xr.open_zarr(path, chunks=None, consolidated=False)["v"]
        return kcpstream.segment(v, dim="time", batch_dims="sensor", **kw)

    messages, answers = [], []
    for together in (True, False):
        if not together:
            monkeypatch.setattr(kcpstream.engine.run, "_reads_together", lambda *a: False)
        with pytest.raises(kcpstream.InputError) as err:
            run()
        messages.append(str(err.value))
        answers.append(_answers(run(missing="skip")))
    assert "sensor=3" in messages[0] and "[10000, 15000)" in messages[0]
    assert len(messages[0].splitlines()) == 1
    assert messages[0] == messages[1]
    assert answers[0] == answers[1]
