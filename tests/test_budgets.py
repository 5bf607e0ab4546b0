"""The bookkeeping sizes (blocks, pieces, graph, caches) stay within their
budgets for simulated series of 10**9 to 10**12 samples: every size is
computed from the planning functions, the pass plan or a search on a small
signal, with nothing read and no graph computed.  Budgets are the constants
the code names.

The block grid holds ``TARGET_BLOCKS`` to ``MAX_GRID_BLOCKS`` blocks at any
length up to ``MAX_SAMPLES`` (blocks of up to ``MAX_BLOCK`` samples): a
refinement reads a long block chunk by chunk and scans it in slices, so what
a scan holds does not grow with the block either.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from kcpstream.engine.plan import (
    MAX_BLOCK,
    MAX_D_MAX,
    MAX_GRID_BLOCKS,
    SERIES_STATE_BYTES,
    TARGET_BLOCKS,
    block_size_of,
    planned_length,
)
from kcpstream.engine.run import cache_share
from kcpstream.inputs.signal import MAX_SAMPLES, Signal, as_signal
from kcpstream.passes.data import SPLIT_CHUNK_TASKS, data_passes, pass_plan, pass_task_count
from kcpstream.passes.drive import drive_many
from kcpstream.persist.checkpoint import PREFIX_SLAB_BYTES, slab_columns
from kcpstream.search.binseg import binseg_steps
from kcpstream.search.stats import BlockStats

from .helpers import default_settings, fitted_map, planned_job

CHUNK = 2**22  # samples per stored chunk of the simulated archive (238 419 chunks at 1e12)
MAPS = ("rff:32", "quadrature:64")  # rff:32, and the default map of one channel ("auto")
SIZES = (10**9, 10**10, 10**12)


#: What one series' statistics and the work made of them may take at once,
#: as plan.py documents it: SERIES_STATE_BYTES ("about 0.5 GiB").
def call_budget(p: int) -> int:
    return SERIES_STATE_BYTES


def stats_bytes(nb: int, p: int) -> int:
    """Bytes of a BlockStats of nb blocks: prefix (p, nb+1) int64, prefix_q (nb+1),
    block_q, max_norm2, bridge (nb each) -- checked against a real one below."""
    return 8 * p * (nb + 1) + 8 * (nb + 1) + 3 * 8 * nb


def _job(n: int, name: str):
    """The job of a series of n samples, planned before any read."""
    return planned_job(n, fitted_map(name))


def _lazy_signal(n: int) -> Signal:
    """A Signal of n samples in CHUNK-sample chunks: only its chunk grid is used."""
    return Signal(data=da.zeros((n, 1), chunks=(CHUNK, 1)), description="simulated")


def test_stats_bytes_is_what_blockstats_holds():
    nb, p, B = 1000, 32, 64
    z = np.zeros(nb)
    stats = BlockStats.from_prefix(nb * B, B, 20, np.zeros((p, nb + 1), np.int64), z, z, z)
    assert stats.nbytes == stats_bytes(nb, p)


@pytest.mark.parametrize("name", MAPS)
@pytest.mark.parametrize("n", SIZES)
def test_block_grid_stays_within_the_call_budget(n, name):
    job, st = _job(n, name)
    p, B = job.fmap.n_features_out_, job.block_size
    nb = -(-n // B)
    assert B == block_size_of(n, st) <= MAX_BLOCK
    assert TARGET_BLOCKS // 2 <= nb <= MAX_GRID_BLOCKS  # (planned_length: at most 2n)
    assert stats_bytes(nb, p) <= call_budget(p)


@pytest.mark.parametrize("name", MAPS)
@pytest.mark.parametrize("n", [10**10, MAX_SAMPLES])
def test_sample_cache_and_search_sizes_do_not_grow_with_n(n, name):
    job, st = _job(n, name)
    assert job.cache.max_bytes == cache_share(st) == st.cache_bytes
    assert CHUNK * 8 <= job.cache.chunk_budget  # a chunk fits: none kept beyond the budget
    assert job.d_max <= MAX_D_MAX
    assert not job.stats and not job.search.known  # nothing per n before the pass


@pytest.mark.parametrize("name", MAPS)
@pytest.mark.parametrize("n", SIZES)
def test_checkpoint_slabs_stay_within_the_call_budget(n, name):
    job, _ = _job(n, name)
    p, nb = job.fmap.n_features_out_, -(-n // job.block_size)
    assert 8 * p * slab_columns(p) <= PREFIX_SLAB_BYTES  # each slab within its size
    slabs = -(-(nb + 1) // slab_columns(p))  # files written (and hashed) per save
    assert slabs * PREFIX_SLAB_BYTES <= call_budget(p)


def _touched_blocks(signal: Signal, B: int) -> int:
    """Blocks the chunk results of the data pass hold together before
    _assemble (a chunk's first and last block may be partial)."""
    s = signal.chunk_starts
    return int(((s[1:] - 1) // B - s[:-1] // B + 1).sum())


@pytest.mark.parametrize("n", [10**10, 10**12])
def test_data_pass_graph_has_a_task_per_chunk_at_most_sliced(n):
    sig = _lazy_signal(n)
    chunks = len(sig.chunk_starts) - 1
    B = block_size_of(n, default_settings())
    tasks = pass_task_count(sig, B)
    assert tasks == len(pass_plan(sig, B)) == chunks  # 32 MiB chunks: one task each
    assert tasks <= chunks * (SPLIT_CHUNK_TASKS + 2)  # a sliced chunk: read + slices + merge


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("p", [32, 64])
def test_data_pass_results_held_before_assembly_within_the_call_budget(n, p):
    # data_passes keeps every chunk's counts, S, Q, M2, R until _assemble, which
    # then builds S (nb, p) and prefix (p, nb + 1) (and a second prefix in
    # prefix_columns); ~1 kB of dict and array headers per chunk comes on top
    sig = _lazy_signal(n)
    held = 8 * (p + 4) * _touched_blocks(sig, block_size_of(n, default_settings()))
    assert held <= call_budget(p)


#: Segments evaluated per segment of the path: not a constant of the code;
#: 4-8 measured (noise, steps, random walk; B = 64 and 1024).
KNOWN_PER_SEGMENT = 10


def test_refinement_bookkeeping_grows_with_d_max_not_n():
    rng = np.random.default_rng(0)
    x = rng.normal(size=100_000) + np.repeat(rng.normal(size=200), 500) * 0.7
    fmap = fitted_map("rff:32")
    sig = as_signal(x, chunks=10_000)
    stats = data_passes([(sig, fmap, 64, None)], tile=4096)[0].stats
    known: dict = {}
    steps = binseg_steps(stats, min_size=20, n_bkps=MAX_D_MAX - 1, allow_fewer=True, known=known)
    drive_many([(steps, sig, fmap, None)], 20, 4096)
    # a refined segment adds one split point and the two pieces it cuts
    assert len(stats._points) <= len(known) <= KNOWN_PER_SEGMENT * MAX_D_MAX
    assert len(stats._pieces) <= 2 * len(stats._points)
    # one (p,) int64 sum per point and per piece: < 10 MB at p = 64 and MAX_D_MAX, any n


def test_planned_length_is_at_most_twice_n():
    for n in (10**10, MAX_SAMPLES):
        assert n <= planned_length(n) <= 2 * n


@pytest.mark.parametrize("name", MAPS)
def test_noise_estimate_of_the_longest_grid_stays_within_the_call_budget(name):
    # the long-run noise is estimated from the block grid's prefix sums (its
    # batch sums and their products): it grows with the blocks, not with n
    import tracemalloc

    from kcpstream.selection.choose import noise_of

    job, _ = _job(MAX_SAMPLES, name)
    p, B = job.fmap.n_features_out_, job.block_size
    nb = -(-MAX_SAMPLES // B)
    rng = np.random.default_rng(0)
    steps = rng.integers(-(2**20), 2**20, size=(p, nb), dtype=np.int64)
    prefix = np.concatenate([np.zeros((p, 1), np.int64), np.cumsum(steps, axis=1)], axis=1)
    z = np.zeros(nb)
    stats = BlockStats.from_prefix(MAX_SAMPLES, B, 20, prefix, z, z, z)
    tracemalloc.start()
    try:
        assert noise_of(stats, None) is not None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= call_budget(p)


@pytest.mark.parametrize("name", MAPS)
def test_a_scan_of_the_largest_block_holds_a_slice_not_the_block(name):
    # a refinement of a MAX_BLOCK block featurizes a slice at a time (into the
    # thread's scratch buffer) and keeps p integers per slice
    from kcpstream.passes.ranges import MAX_SCRATCH_BYTES
    from kcpstream.passes.sliced import LONG_PIECE, slice_length, whole_length

    fmap = fitted_map(name)
    p, step = fmap.n_features_out_, slice_length(fmap)
    assert whole_length(fmap) == LONG_PIECE < MAX_BLOCK  # a whole block: sliced
    assert 4 * p * step <= MAX_SCRATCH_BYTES
    per_slice = 8 * p + 200  # a PieceStats: S and four numbers, with its headers
    assert -(-MAX_BLOCK // step) * per_slice <= MAX_SCRATCH_BYTES
