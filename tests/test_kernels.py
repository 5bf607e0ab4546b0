"""The pure kernels against direct numpy computations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcpstream._kernels.batches import batch_difference_tiles
from kcpstream._kernels.blockstats import (
    SNAPSHOT,
    largest_boundary_gain,
    merge_piece_into,
    piece_stats,
    scan_piece,
    segment_boundary_scan,
    split_gain,
)
from kcpstream.search.stats import BlockStats, PieceStats

from .reference import bridge_excursion, cusum_gains


def _cost(z: np.ndarray) -> float:
    return float(((z - z.mean(axis=0)) ** 2).sum())


@given(st.integers(0, 2**32 - 1), st.integers(2, 40), st.integers(1, 5))
def test_split_gain_is_cost_decrease(seed, n, p):
    rng = np.random.default_rng(seed)
    q = rng.integers(-1000, 1000, size=(n, p))
    c = int(rng.integers(1, n))
    g = split_gain(c, n - c, q[:c].sum(axis=0), q.sum(axis=0))
    expected = _cost(q.astype(float)) - _cost(q[:c].astype(float)) - _cost(q[c:].astype(float))
    assert g == pytest.approx(expected, rel=1e-9, abs=1e-6)


@given(st.integers(0, 2**32 - 1), st.integers(1, 30), st.integers(1, 6))
def test_largest_boundary_gain_matches_numpy(seed, b, p):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 50, size=b)
    S = rng.integers(-(2**40), 2**40, size=(b, p))
    x = np.cumsum(counts)[:-1].astype(np.float64)
    n = float(counts.sum())
    cum = np.cumsum(S, axis=0, dtype=np.float64)
    dev = cum[:-1] - (x / n)[:, None] * cum[-1]
    gains = n / (x * (n - x)) * (dev**2).sum(axis=1)
    expected = float(gains.max()) if b > 1 else 0.0
    assert largest_boundary_gain(counts, S) == pytest.approx(expected, rel=1e-9)


def _block_stats(q: np.ndarray, block: int, bridges: bool = False) -> BlockStats:
    """Block statistics of integer features ``q`` (n, p): exact sums, and the bridge
    bounds when asked (zeros otherwise); Q = 0, M2 = 1."""
    n = q.shape[0]
    blocks = [q[j * block : (j + 1) * block] for j in range(-(-n // block))]
    S = np.stack([b.sum(axis=0) for b in blocks])
    R = np.array([bridge_excursion(b) if bridges else 0.0 for b in blocks])
    return BlockStats(n, block, 0, S, np.zeros(len(blocks)), np.ones(len(blocks)), R)


def _add_splits(stats: BlockStats, q: np.ndarray, points, bridges: bool = False) -> None:
    """Record exact splits of ``stats`` at ``points``, each inside its block, with
    the halves' sums (and bridge bounds when asked; 0 otherwise)."""
    n, block = q.shape[0], stats.block_size
    for c in points:
        a = c // block * block
        e = min(a + block, n)
        left, right = (
            PieceStats(len(h), h.sum(axis=0), 0.0, 0.0, bridge_excursion(h) if bridges else 0.0)
            for h in (q[a:c], q[c:e])
        )
        stats.add_split(c, a, e, left, right)


@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.sampled_from([16, 64]))
def test_sums_across_features_round_in_feature_order(seed, k, m):
    # sums of squares beyond 2**53 round: Q and M2 are summed over the features
    # in their order, never reassociated, so they do not depend on how the
    # kernel's work arrays happen to be aligned (checkpoints and fresh runs
    # then agree to the bit)
    rng = np.random.default_rng(seed)
    n, p = 300, k * m
    z = rng.normal(size=(k, n, m)).astype(np.float32)
    scale = 2.0**26
    cuts = np.array([0, 100, n], np.int64)
    S = np.empty((2, p), np.int64)
    Q, M2, R, cnt = np.empty(2), np.empty(2), np.empty(2), np.empty(2, np.int64)
    piece_stats(z, scale, cuts, S, Q, M2, R, cnt, -1.0, SNAPSHOT)
    q = np.rint(z.astype(np.float64) * scale).transpose(1, 0, 2).reshape(n, p)
    zabs = np.abs(z.astype(np.float64)).transpose(1, 0, 2).reshape(n, p)
    for i in range(2):
        part = q[cuts[i] : cuts[i + 1]]
        per_feature = np.zeros(p)
        for row in part:  # each feature's sum, sample after sample
            per_feature += row * row
        total = 0.0
        for v in per_feature:  # then across the features, in order
            total += float(v)
        assert Q[i] == total
        bound = 0.0
        for v in zabs[cuts[i] : cuts[i + 1]].max(axis=0) * scale + 0.5:
            bound += float(v) * float(v)
        assert M2[i] == bound * (1.0 + 1e-12)


@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 60),
    st.integers(1, 2),
    st.integers(1, 4),
    st.sampled_from([1, SNAPSHOT]),
)
def test_piece_stats_match_numpy(seed, n, k, m, every):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(k, n, m)).astype(np.float32)
    p = k * m
    n_cuts = int(rng.integers(1, n + 1))
    inner = np.sort(rng.choice(np.arange(1, n + 1), size=n_cuts, replace=False))
    cuts = np.unique(np.r_[0, inner, n]).astype(np.int64)
    pieces = len(cuts) - 1
    S = np.empty((pieces, p), np.int64)
    Q, M2, R = np.empty(pieces), np.empty(pieces), np.empty(pieces)
    cnt = np.empty(pieces, np.int64)
    scale = 2.0**20
    piece_stats(z, scale, cuts, S, Q, M2, R, cnt, -1.0, every)
    q = np.rint(z.astype(np.float64) * scale).transpose(1, 0, 2).reshape(n, p)  # (n, p) rows
    for i in range(pieces):
        part = q[cuts[i] : cuts[i + 1]]
        assert cnt[i] == len(part)
        assert S[i].tolist() == part.sum(axis=0).astype(np.int64).tolist()
        assert Q[i] == pytest.approx((part**2).sum(), rel=1e-12)
        # M2 bounds every sample's squared norm, by sum_j (max_t |z_tj| scale + 1/2)^2
        assert (part**2).sum(axis=1).max() <= M2[i]
        zpart = z.astype(np.float64).transpose(1, 0, 2).reshape(n, p)[cuts[i] : cuts[i + 1]]
        expected_m2 = ((np.abs(zpart).max(axis=0) * scale + 0.5) ** 2).sum()
        assert M2[i] == pytest.approx(expected_m2, rel=1e-9)
        # R bounds the bridge excursion from above, within the snapshot slack
        step = np.sqrt(M2[i]) + np.linalg.norm(part.sum(axis=0)) / len(part)
        exact = bridge_excursion(part)
        assert exact * (1 - 1e-12) <= R[i] <= exact + every * step + 1e-6
        if every == 1:  # evaluated at every position: the excursion itself
            assert R[i] == pytest.approx(bridge_excursion(part), rel=1e-8, abs=1e-6)


@given(st.integers(0, 2**32 - 1), st.integers(2, 50), st.integers(1, 4))
def test_merged_bridge_is_an_upper_bound(seed, n, p):
    rng = np.random.default_rng(seed)
    q = rng.integers(-50, 50, size=(n, p)).astype(np.int64) + rng.integers(-200, 200, size=p)
    cut = int(rng.integers(1, n))
    a, b = q[:cut], q[cut:]
    S_a = a.sum(axis=0)
    ra, rb = bridge_excursion(a), bridge_excursion(b)
    S_b = b.sum(axis=0)
    count, _, _, R = merge_piece_into(len(a), S_a, 0.0, 0.0, ra, len(b), S_b, 0.0, 0.0, rb)
    assert count == n
    assert S_a.tolist() == q.sum(axis=0).tolist()
    assert R >= bridge_excursion(q) * (1 - 1e-12)


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 80),
    p=st.integers(1, 4),
    block=st.integers(1, 20),
    min_size=st.integers(1, 6),
    shift=st.floats(0, 30),
)
def test_piece_bounds_dominate_every_interior_gain(seed, n, p, block, min_size, shift):
    """The pruning bound of each piece is at least the gain of every split inside it."""
    rng = np.random.default_rng(seed)
    q = rng.integers(-100, 100, size=(n, p)).astype(np.int64)
    q[n // 2 :] += np.int64(shift * 10)  # a mean change makes gains large near it
    stats = _block_stats(q, block, bridges=True)
    max_norm = float(np.sqrt((q.astype(float) ** 2).sum(axis=1)).max())
    cumsum = np.zeros((n + 1, p), np.int64)
    np.cumsum(q, axis=0, out=cumsum[1:])
    # every segment whose ends are grid points
    grid = sorted({*range(0, n, block), n})
    for a in grid:
        for e in grid:
            if e - a < 2 * min_size:
                continue
            j0, j1 = a // block + 1, (e - 1) // block
            head = stats.piece_bridge(a, min(e, j0 * block))
            tail = stats.piece_bridge(j1 * block, e) if j0 <= j1 else 0.0
            _, _, bounds = segment_boundary_scan(
                stats.prefix, stats.bridge, block, j0, j1, a, e,
                cumsum[a], cumsum[e], head, tail, min_size, max_norm, 0.0,
            )  # fmt: skip
            gains = cusum_gains(cumsum, a, e, min_size)
            positions = [a, *range(j0 * block, j1 * block + 1, block), e] if j0 <= j1 else [a, e]
            for i in range(len(positions) - 1):
                lo, hi = positions[i], positions[i + 1]
                inside = gains[lo - a + 1 : hi - a]
                inside = inside[np.isfinite(inside)]
                if inside.size:
                    assert bounds[i] >= inside.max() * (1 - 1e-12)
                else:
                    assert bounds[i] == -1.0


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 60),
    p=st.integers(1, 4),
    block=st.integers(1, 9),
    data=st.data(),
)
def test_prefix_rows_are_prefix_at(seed, n, p, block, data):
    # grid points, the end, and refined split points between grid points
    rng = np.random.default_rng(seed)
    q = rng.integers(-100, 100, size=(n, p)).astype(np.int64)
    stats = _block_stats(q, block)
    refined = [c for c in range(1, n) if c % block and data.draw(st.booleans())]
    _add_splits(stats, q, refined)
    positions = [*range(0, n, block), n, *refined]
    positions = data.draw(st.permutations(positions))
    rows = stats.prefix_rows(np.array(positions, dtype=np.int64))
    expected = np.stack([stats.prefix_at(int(c))[0] for c in positions])
    np.testing.assert_array_equal(rows, expected)
    np.testing.assert_array_equal(rows, np.stack([q[:c].sum(axis=0) for c in positions]))


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 80),
    p=st.integers(1, 4),
    block=st.integers(1, 9),
    min_size=st.integers(1, 6),
    most=st.integers(1, 5),
    shift=st.integers(0, 30),
    data=st.data(),
)
def test_bound_segment_is_its_numpy_reference(seed, n, p, block, min_size, most, shift, data):
    # the compiled pending pieces (runs cut at `most` pieces, their bounds and
    # sums before them) against numpy steps around the boundary scan, on
    # segments between grid points and refined splits
    from unittest import mock

    from kcpstream.search import binseg
    from kcpstream.search.requests import pieces_of

    from .reference import bound_segment_reference

    rng = np.random.default_rng(seed)
    q = rng.integers(-100, 100, size=(n, p)).astype(np.int64)
    q[n // 2 :] += np.int64(shift)
    stats = _block_stats(q, block, bridges=True)
    # at most one refined split per block, as a search makes them: a segment's
    # end pieces are then pieces of the statistics
    inside = [range(a + 1, min(a + block, n)) for a in range(0, n, block)]
    refined = [data.draw(st.sampled_from(r)) for r in inside if r and data.draw(st.booleans())]
    _add_splits(stats, q, refined, bridges=True)
    known = sorted({*range(0, n, block), n, *refined})
    start = data.draw(st.sampled_from(known))
    end = data.draw(st.sampled_from([c for c in known if c > start] or [n]))
    if end <= start:
        return
    with mock.patch.object(binseg, "MAX_RUN_SAMPLES", most * block):
        seg = binseg.bound_segment(stats, start, end, min_size)
        gain, split, upper, requests, bounds = bound_segment_reference(stats, start, end, min_size)
    assert (seg.gain, seg.split, seg.upper, seg.bounds) == (gain, split, upper, bounds)
    assert len(seg.pending) == len(requests)
    made = [seg.request(stats, i) for i in range(len(seg.pending))]
    for req, (a, e, left, grid) in zip(made, requests, strict=True):
        assert (req.segment, req.piece_start, req.piece_end, req.grid) == ((start, end), a, e, grid)
        np.testing.assert_array_equal(req.left_at_piece, left)
        np.testing.assert_array_equal(req.total, q[start:end].sum(axis=0))
        np.testing.assert_array_equal(req.left_at_piece, q[start:a].sum(axis=0))
        assert len(pieces_of(req)) <= most
    # runs end only where the next pending piece is not adjacent or the run is full
    for req, after in zip(made[:-1], made[1:], strict=True):
        assert after.piece_start > req.piece_end or len(pieces_of(req)) == most


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(2, 70),
    st.integers(1, 9),
    st.sampled_from(["euclidean", "cityblock"]),
    st.booleans(),
)
def test_pairwise_sums_give_scipy_pdist_to_the_bit(seed, m, d, metric, ties):
    from scipy.spatial.distance import pdist

    from kcpstream._kernels.distances import order_statistic_pair, pairwise_sums

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 3, size=(m, d)).astype(np.float64) if ties else rng.normal(size=(m, d))
    sums = pairwise_sums(x, metric == "euclidean")
    dist = np.sqrt(sums) if metric == "euclidean" else sums
    assert np.array_equal(dist, pdist(x, metric))
    k = int(rng.integers(sums.size))
    ordered = np.sort(sums)
    pair = order_statistic_pair(sums, k)
    assert pair == (ordered[k], ordered[min(k + 1, sums.size - 1)])


@settings(max_examples=120, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    k=st.integers(1, 2),
    m=st.integers(1, 9),
    length=st.integers(1, 70),
    head=st.integers(0, 40),
    tail=st.integers(-20, 40),  # below 0: a piece reaching past its segment's end
    min_size=st.integers(1, 30),
    grid=st.sampled_from([0, 4, 7, 16]),
)
def test_scan_piece_is_split_gain_at_every_position(seed, k, m, length, head, tail, min_size, grid):
    # the scan sums the gains of several positions side by side: each must be
    # split_gain's value to the bit, and the first best position must win
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(k, length, m)).astype(np.float32)
    constant = seed % 3 == 0  # every gain 0: the first admissible position wins the ties
    if constant:
        Z[:] = 0.0
    scale = 2.0**10
    q = np.rint(Z.astype(np.float64) * scale).astype(np.int64)  # (k, L, m)
    flat = np.concatenate([q[g] for g in range(k)], axis=1)  # (L, k m) in feature order
    before = rng.integers(-(2**20), 2**20, size=(head, k * m)) * (not constant)
    after = rng.integers(-(2**20), 2**20, size=(max(tail, 0), k * m)) * (not constant)
    seg_start, piece_start = 1000, 1000 + head
    seg_end = piece_start + length + tail
    left0 = before.sum(axis=0)
    total = left0 + flat.sum(axis=0) + after.sum(axis=0)
    gain, pos = scan_piece(Z, scale, piece_start, seg_start, seg_end, left0, total, min_size, grid)
    best, where = -1.0, -1
    left = left0.copy()
    for t in range(length - 1):  # the obvious loop: every interior position, in order
        left = left + flat[t]
        c = piece_start + t + 1
        if c < seg_start + min_size or c > seg_end - min_size or (grid and c % grid == 0):
            continue
        g = split_gain(c - seg_start, seg_end - c, left, total)
        if g > best:
            best, where = g, c
    assert (pos, gain) == (where, best)


@settings(max_examples=60, deadline=None)
@given(
    p=st.integers(1, 70),
    m=st.integers(0, 600),
    per_batch=st.integers(1, 40),
    exponent=st.integers(0, 30),
    seed=st.integers(0, 2**16),
)
def test_batch_differences_are_numpys(p, m, per_batch, exponent, seed):
    rng = np.random.default_rng(seed)
    prefix = np.cumsum(rng.integers(-(2**30), 2**30, size=(p, m + 1)), axis=1) * 2.0**-exponent
    tile = 1 + seed % 9
    k, T, ss = batch_difference_tiles(prefix, per_batch, tile)
    assert k == m // per_batch
    want = np.diff(prefix[:, : k * per_batch + 1 : per_batch], n=2, axis=1)
    whole = np.concatenate(list(T), axis=1) if len(T) else np.zeros((p, 0))
    assert whole.shape == (p, -(-want.shape[1] // tile) * tile)  # the last tile padded
    np.testing.assert_array_equal(whole[:, : want.shape[1]], want)
    rows = np.zeros(want.shape[1])  # the features' squares summed in their order
    for row in want:
        rows = rows + row * row
    assert ss.tobytes() == rows.tobytes()
    if want.shape[1] > 1:  # what numpy's reduction over the first axis gives
        assert ss.tobytes() == (want**2).sum(axis=0).tobytes()
    assert not whole[:, want.shape[1] :].any()


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    blocks=st.integers(1, 300),
    p=st.integers(1, 70),
    block=st.integers(1, 7),
    scale=st.sampled_from([1, 2**20, 2**40]),
)
def test_the_boundary_scan_is_split_gain_at_every_boundary_to_the_bit(
    seed, blocks, p, block, scale
):
    # every boundary's gain is split_gain's value to the bit (sums large enough
    # that their conversions round), the first of the largest wins
    rng = np.random.default_rng(seed)
    steps = rng.integers(-scale, scale + 1, size=(p, blocks + 1)).astype(np.int64)
    prefix = np.cumsum(steps, axis=1)
    n = blocks * block
    a, e = sorted(int(v) for v in rng.integers(0, n + 1, size=2))
    if e - a < 2:
        return
    j0, j1 = a // block + 1, (e - 1) // block
    pa = prefix[:, a // block] + rng.integers(-scale, scale + 1, size=p)
    pe = prefix[:, e // block] + rng.integers(-scale, scale + 1, size=p)
    gain, pos, _ = segment_boundary_scan(
        prefix, np.zeros(blocks + 1), block, j0, j1, a, e, pa, pe, 0.0, 0.0, 1, 1.0, 0.0
    )
    want, at = -1.0, -1
    for j in range(j0, j1 + 1):
        g = split_gain(j * block - a, e - j * block, prefix[:, j] - pa, pe - pa)
        if g > want:
            want, at = g, j * block
    assert (gain, pos) == (want, at)
