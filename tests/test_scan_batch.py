"""Pieces scanned together equal pieces scanned one by one."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcpstream import RFF
from kcpstream.features import BrownianThreshold
from kcpstream.passes import ranges
from kcpstream.passes.scan import scan_batch, scan_piece
from kcpstream.search.requests import ScanRequest

from .reference import bridge_excursion, quantized


def _exact_prefix(fmap, x: np.ndarray) -> np.ndarray:
    """Exact integer prefix sums of the quantized features of ``x``, ``(n + 1, p)``."""
    q = quantized(fmap.transform(x), fmap.quantum_exponent_)
    cum = np.zeros((len(x) + 1, q.shape[1]), np.int64)
    np.cumsum(q, axis=0, out=cum[1:])
    return cum


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 10_000),
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=8),
    tile=st.sampled_from([1, 3, 16, 4096]),
    scratch=st.sampled_from([64, 2**10, 8 * 2**20]),
    min_size=st.integers(1, 5),
    shared=st.booleans(),
    threshold=st.booleans(),
    constant=st.booleans(),
)
def test_scan_batch_equals_scan_piece(
    monkeypatch, seed, lengths, tile, scratch, min_size, shared, threshold, constant
):
    monkeypatch.setattr(ranges, "MAX_SCRATCH_BYTES", scratch)  # small: several groups
    rng = np.random.default_rng(seed)
    n = sum(lengths) + 20
    x = rng.standard_normal((n, 2))
    if constant:  # gains are 0 up to rounding: ties between pieces
        x[:] = 0.5
    fmap = (BrownianThreshold(6) if threshold else RFF(8, bandwidth=1.0, seed=seed)).fit(x)
    cum = _exact_prefix(fmap, x)
    reqs, xs, start = [], [], 10
    for length in lengths:  # consecutive pieces, of one segment or each of its own
        a, e = (0, n) if shared else (start - int(rng.integers(0, 5)), start + length + 3)
        left, total = cum[start] - cum[a], cum[e] - cum[a]
        reqs.append(ScanRequest((a, e), start, start + length, left, total))
        xs.append(x[start : start + length])
        start += length
    batch = scan_batch(xs, fmap, reqs, min_size, tile)
    single = [scan_piece(xi, fmap, r, min_size, tile) for xi, r in zip(xs, reqs, strict=True)]
    for b, s in zip(batch, single, strict=True):
        assert (b.gain, b.pos) == (s.gain, s.pos)
    # every segment's winning split comes with the statistics of its two halves
    winners = {}
    for i, s in enumerate(single):
        j = winners.get(s.request.segment)
        if s.pos >= 0 and (j is None or (s.gain, -s.pos) > (single[j].gain, -single[j].pos)):
            winners[s.request.segment] = i
    for i in winners.values():
        for got, want in ((batch[i].left, single[i].left), (batch[i].right, single[i].right)):
            assert got is not None
            assert got.count == want.count and np.array_equal(got.S, want.S)  # exact sums
            # Q, M2, R only feed pruning bounds; their float sums beyond 2**53 are
            # reassociated by the compiled kernel, so the rounding may differ
            bounds_in = [(got.Q, want.Q), (got.M2, want.M2), (got.R, want.R)]
            np.testing.assert_allclose(*zip(*bounds_in, strict=True), rtol=1e-12)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 10_000),
    lengths=st.lists(st.integers(1, 300), min_size=1, max_size=4),
    tile=st.sampled_from([1, 7, 64, 4096]),
    scratch=st.sampled_from([64, 2**12, 8 * 2**20]),
)
def test_featurize_range_into_the_thread_scratch_equals_one_tile(
    monkeypatch, seed, lengths, tile, scratch
):
    # the per-tile buffer and the features buffer are both this thread's scratch,
    # reused call after call: each range must still equal its features computed at once
    monkeypatch.setattr(ranges, "MAX_SCRATCH_BYTES", scratch)
    rng = np.random.default_rng(seed)
    fmap = RFF(16, bandwidth=1.0, seed=seed).fit(rng.standard_normal((50, 2)))
    for length in lengths:
        x = rng.standard_normal((length, 2))
        whole = fmap.tile_buffer(length)
        fmap.featurize_tile(x, whole)
        got = ranges.featurize_range(fmap, x, tile, ranges.scratch_features(fmap, length))
        np.testing.assert_array_equal(got, whole)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    signals=st.lists(st.lists(st.integers(1, 60), min_size=1, max_size=12), min_size=1, max_size=4),
    threads=st.integers(1, 4),
)
def test_held_pieces_scanned_in_threads_equal_one_scan_batch_per_signal(seed, signals, threads):
    import dask

    from kcpstream.passes import scan

    rng = np.random.default_rng(seed)
    batches, here, expected = [], [], []
    for b, lengths in enumerate(signals):
        n = sum(lengths) + 20
        x = rng.standard_normal((n, 1))
        fmap = RFF(8, bandwidth=1.0, seed=seed + b).fit(x)
        cum = _exact_prefix(fmap, x)
        reqs, xs, start = [], [], 10
        for length in lengths:  # the pieces of two segments
            a, e = (0, n) if rng.random() < 0.5 else (5, n - 5)
            reqs.append(
                ScanRequest((a, e), start, start + length, cum[start] - cum[a], cum[e] - cum[a])
            )
            xs.append(x[start : start + length])
            start += length
        batches.append((None, fmap, reqs, None))
        here.append((b, list(range(len(reqs))), xs))
        expected.append(scan_batch(xs, fmap, reqs, 2, 4096))
    old = scan.MIN_THREAD_SAMPLES
    scan.MIN_THREAD_SAMPLES = 1  # threads whatever the pieces' length
    try:
        with dask.config.set(num_workers=threads):
            got = {b: {} for b in range(len(signals))}
            for b, held, found in scan._scan_here(batches, here, 2, 4096):
                got[b].update(zip(held, found, strict=True))
    finally:
        scan.MIN_THREAD_SAMPLES = old
    for b, want in enumerate(expected):
        assert sorted(got[b]) == list(range(len(want)))
        winners = {}
        for i, w in enumerate(want):
            assert (got[b][i].gain, got[b][i].pos) == (w.gain, w.pos)
            j = winners.get(w.request.segment)
            if w.pos >= 0 and (j is None or (w.gain, -w.pos) > (want[j].gain, -want[j].pos)):
                winners[w.request.segment] = i
        for i in winners.values():  # the halves a search keeps, exact
            assert np.array_equal(got[b][i].left.S, want[i].left.S)
            assert got[b][i].left.count == want[i].left.count


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    grid=st.integers(2, 12),
    head=st.integers(0, 11),
    blocks=st.integers(1, 6),
    tail=st.integers(0, 11),
    min_size=st.integers(1, 6),
    constant=st.booleans(),
)
def test_a_run_of_pieces_scans_what_its_pieces_scan_one_by_one(
    seed, grid, head, blocks, tail, min_size, constant
):
    # a segment's pending pieces next to each other are one request: the same best
    # split (positions strictly inside each piece; ties to the first), and the
    # halves of the piece of the grid that holds it
    rng = np.random.default_rng(seed)
    n = 4 * grid + (blocks + 2) * grid
    x = np.full((n, 1), 0.5) if constant else rng.standard_normal((n, 1))
    fmap = RFF(8, bandwidth=1.0, seed=seed).fit(x)
    cum = _exact_prefix(fmap, x)
    a = 2 * grid - min(head, grid - 1)  # the segment starts inside a block (or on one)
    e = (2 + blocks) * grid + min(tail, grid - 1)
    edges = sorted({a, e, *range(-(-a // grid) * grid, e, grid)})
    pieces = list(zip(edges[:-1], edges[1:], strict=True))
    one = [ScanRequest((a, e), s, t, cum[s] - cum[a], cum[e] - cum[a]) for s, t in pieces]
    single = [
        scan_piece(x[s:t], fmap, r, min_size, 4096) for (s, t), r in zip(pieces, one, strict=True)
    ]
    run = ScanRequest((a, e), a, e, cum[a] - cum[a], cum[e] - cum[a], grid)
    assert run.pieces == len(pieces)
    for got in (scan_piece(x[a:e], fmap, run, min_size, 4096),
                scan_batch([x[a:e]], fmap, [run], min_size, 4096)[0]):  # fmt: skip
        found = [s for s in single if s.pos >= 0]
        if not found:
            assert got.pos == -1
            continue
        best = max(found, key=lambda s: (s.gain, -s.pos))
        assert (got.gain, got.pos) == (best.gain, best.pos)
        assert got.piece == (best.request.piece_start, best.request.piece_end)
        for mine, theirs in ((got.left, best.left), (got.right, best.right)):
            assert mine.count == theirs.count and np.array_equal(mine.S, theirs.S)
            np.testing.assert_allclose([mine.Q, mine.R], [theirs.Q, theirs.R], rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    length=st.integers(2, 400),
    step=st.integers(1, 90),
    min_size=st.integers(1, 30),
    offset=st.integers(0, 40),
    constant=st.booleans(),
    threshold=st.booleans(),
    grid=st.sampled_from([0, 0, 3, 16, 64]),
)
def test_a_piece_scanned_in_slices_equals_its_scan_whole(
    seed, length, step, min_size, offset, constant, threshold, grid
):
    # a piece too long to featurize at once (or a run of grid pieces) is scanned
    # slice by slice: the same best split (ties to the first), the halves' exact
    # sums and counts, and bridge bounds that still bound the halves' excursions
    from kcpstream.passes.sliced import SlicedScan
    from kcpstream.search.requests import piece_of

    rng = np.random.default_rng(seed)
    n = length + 2 * offset + 10
    x = np.full((n, 2), 0.5) if constant else rng.standard_normal((n, 2))
    x[n // 2 :] += 0.7
    fmap = (BrownianThreshold(6) if threshold else RFF(8, bandwidth=1.0, seed=seed)).fit(x)
    cum = _exact_prefix(fmap, x)
    a, e = 0, n
    s, t = offset + 5, offset + 5 + length
    req = ScanRequest((a, e), s, t, cum[s] - cum[a], cum[e] - cum[a], grid)
    whole = scan_piece(x[s:t], fmap, req, min_size, 4096)
    scan = SlicedScan(req, fmap, min_size, 4096)
    for lo in range(s, t, step):
        scan.feed(x[lo : min(t, lo + step)])
    got = scan.result()
    assert (got.gain, got.pos) == (whole.gain, whole.pos)
    if whole.pos < 0:
        assert got.left is None and got.right is None
        return
    assert got.piece == whole.piece
    pa, pb = piece_of(req, whole.pos)
    q = quantized(fmap.transform(x), fmap.quantum_exponent_)
    for mine, theirs, part in (
        (got.left, whole.left, q[pa : whole.pos]),
        (got.right, whole.right, q[whole.pos : pb]),
    ):
        assert mine.count == theirs.count == len(part)
        assert np.array_equal(mine.S, theirs.S) and np.array_equal(mine.S, part.sum(axis=0))
        np.testing.assert_allclose(mine.Q, theirs.Q, rtol=1e-12)
        assert mine.M2 >= (part.astype(float) ** 2).sum(axis=1).max() * (1 - 1e-12)
        rounding = 1e-12 * len(part) * np.abs(part).max()  # of the reference's float sums
        assert mine.R >= bridge_excursion(part) * (1 - 1e-12) - rounding


def test_long_pieces_in_a_batch_are_scanned_in_slices(monkeypatch):
    # scan_batch hands a piece longer than LONG_PIECE to the sliced scan, in
    # slices of the thread's scratch, and its answer is the whole piece's
    from kcpstream.passes import sliced

    monkeypatch.setattr(sliced, "LONG_PIECE", 50)
    fed = []
    feed = sliced.SlicedScan._feed
    monkeypatch.setattr(
        sliced.SlicedScan, "_feed", lambda self, x: fed.append(len(x)) or feed(self, x)
    )
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 1))
    x[170:] += 1.0
    fmap = RFF(8, bandwidth=1.0, seed=3).fit(x)
    monkeypatch.setattr(ranges, "MAX_SCRATCH_BYTES", 4 * fmap.n_features_out_ * 16)
    assert sliced.slice_length(fmap) == 16
    cum = _exact_prefix(fmap, x)
    reqs = [ScanRequest((0, 300), s, t, cum[s], cum[300]) for s, t in ((10, 40), (40, 240))]
    got = scan_batch([x[10:40], x[40:240]], fmap, reqs, 5, 4096)
    assert fed and max(fed) == 16 and sum(fed) == 200  # the long piece only, in slices
    for g, r in zip(got, reqs, strict=True):
        want = scan_piece(x[r.piece_start : r.piece_end], fmap, r, 5, 4096)
        assert (g.gain, g.pos) == (want.gain, want.pos)
    assert got[1].left is not None and np.array_equal(got[1].left.S, cum[got[1].pos] - cum[40])
