"""Numba kernels on plain arrays: block statistics, split gains, exact scans.

Every kernel works on *quantized* features: a float32 feature value ``z`` is
represented by the integer ``q = rint(z * scale)`` with ``scale = 2**k`` (the
feature map's ``quantum_exponent_``).  Sums of ``q`` are exact ``int64``, so the
statistics of any range do not depend on how the range was cut into chunks,
tiles or blocks, and every code path that evaluates the gain of a split
position feeds :func:`split_gain` the very same integers.

Feature tiles have shape ``(k, L, m)``: ``k`` groups of ``m`` features for
``L`` samples (see :mod:`kcpstream._kernels.featurize`).

Piece statistics (one row per piece of consecutive samples):

``count``   number of samples
``S``       ``(p,)`` int64, the sum of ``q``
``Q``       float64, the sum of ``||q||^2``
``M2``      float64, an upper bound on ``||q||^2`` over the samples
``R``       float64, an upper bound on the bridge excursion
            ``max_m ||delta_m - (m / L) S||`` where ``delta_m`` is the sum of the
            first ``m`` samples of the piece
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def split_gain(n_left, n_right, sum_left, sum_total):
    """Gain of splitting a segment into a left part and a right part.

    ``G = (nL * nR / N) * || S_L / nL - S_R / nR ||^2`` in quantized units,
    with ``S_R = S - S_L`` computed exactly in integers and the means taken
    as products with ``1 / nL`` and ``1 / nR``.  The loop order is fixed, so
    the result is a deterministic function of its integer inputs; every
    gain kcpstream computes is this function's value (the vectorized
    boundary scan performs the same operations in the same order).
    """
    fl = float(n_left)
    fr = float(n_right)
    inv_l = 1.0 / fl
    inv_r = 1.0 / fr
    acc = 0.0
    for j in range(sum_total.shape[0]):
        sl = sum_left[j]
        sr = sum_total[j] - sl
        d = float(sl) * inv_l - float(sr) * inv_r
        acc += d * d
    return (fl * fr / (fl + fr)) * acc


@njit(nogil=True, cache=True)
def split_gains(n_left, n, sum_left, sum_total):
    """:func:`split_gain` of the splits of a segment of ``n`` samples after
    ``n_left[i]`` samples, whose left sums are the rows of ``sum_left``
    (int64 ``(L, p)``): float64 ``(L,)``."""
    out = np.empty(n_left.shape[0])
    for i in range(n_left.shape[0]):
        out[i] = split_gain(n_left[i], n - n_left[i], sum_left[i], sum_total)
    return out


#: The bridge excursion is evaluated every SNAPSHOT samples and bounded in between.
SNAPSHOT = 8


def snapshot_every(window_samples: int) -> int:
    """Samples between the bridge excursion's evaluations for a map whose
    feature vectors each hold ``window_samples`` samples: every one for
    windows (a window's features cost far more than the ``p`` operations of
    an evaluation, and windows vary far less than the a-priori step between
    snapshots allows, which left the search's bounds loose enough to scan most
    blocks again), :data:`SNAPSHOT` for pointwise maps."""
    return 1 if window_samples > 1 else SNAPSHOT


@njit(nogil=True, cache=True)
def piece_stats(Z, scale, bounds, S, Q, M2, R, counts, norm_bound=-1.0, every=SNAPSHOT):
    """Statistics of consecutive pieces of a feature tile (see :func:`piece_stats_into`)."""
    longest = 0
    for i in range(bounds.shape[0] - 1):
        longest = max(longest, bounds[i + 1] - bounds[i])
    snaps = np.empty((longest // every + 1, Z.shape[0] * Z.shape[2]))
    piece_stats_into(Z, scale, bounds, S, Q, M2, R, counts, norm_bound, snaps, every)


@njit(nogil=True, cache=True)
def ordered_sum(acc, v):
    """``acc + sum_j v[j]`` in index order: for sums that round (beyond
    ``2**53``), whose bits must not depend on how the arrays happen to be
    aligned in memory, as a vectorized reduction's order does (callers are
    not compiled with ``fastmath``'s reassociation, which would undo it)."""
    for j in range(v.shape[0]):
        acc += v[j]
    return acc


@njit(nogil=True, cache=True)
def ordered_sumsq(acc, v):
    """``acc + sum_j v[j]**2`` in index order (see :func:`ordered_sum`)."""
    for j in range(v.shape[0]):
        acc += v[j] * v[j]
    return acc


@njit(nogil=True, cache=True)
def lane_sumsq(v):
    """``sum_j v[j]**2`` in eight lanes (``j % 8``), each in index order, added
    pairwise at the end: a fixed order (the same bits wherever ``v`` lies in
    memory) that still runs eight additions at a time."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    n8 = v.shape[0] // 8 * 8
    for j in range(0, n8, 8):
        a0 += v[j] * v[j]
        a1 += v[j + 1] * v[j + 1]
        a2 += v[j + 2] * v[j + 2]
        a3 += v[j + 3] * v[j + 3]
        a4 += v[j + 4] * v[j + 4]
        a5 += v[j + 5] * v[j + 5]
        a6 += v[j + 6] * v[j + 6]
        a7 += v[j + 7] * v[j + 7]
    for j in range(n8, v.shape[0]):
        a0 += v[j] * v[j]
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


@njit(nogil=True, cache=True, fastmath={"nsz"})
def piece_stats_into(Z, scale, bounds, S, Q, M2, R, counts, norm_bound, snaps, every):
    """Statistics of consecutive pieces of a feature tile.

    Parameters
    ----------
    Z : float32 (k, L, m) raw features of the tile (quantized here).
    scale : float64, ``2**k``.
    bounds : int64 (n + 1,) local piece boundaries, ``bounds[0] = 0``.
    S, Q, M2, R, counts : outputs with one row per piece.
    norm_bound : float
        A bound on every sample's quantized norm known in advance (the
        feature map's), or a negative number to bound it from the data.
    snaps : float64 work array, at least ``(longest piece // every + 1, p)``
        (passed in so that a caller reuses it: no allocation per tile).
    every : int
        Samples between evaluations of the bridge excursion
        (:func:`snapshot_every`); 1 evaluates it at every sample.

    Every per-sample operation is elementwise across features (sum, sum of
    squares, maximum magnitude), so it vectorizes without reassociating.  The
    quantized features are integers held in float64: their sums are exact
    while they stay below ``2**53`` (the data pass checks ``L * max|q| <
    2**52``).  Sums of squares go beyond it and round: each is summed in a
    fixed order (samples in order, then features in order; the bridge's norms
    in :func:`lane_sumsq`'s lanes), never one a compiler chose by how the
    arrays happen to be aligned, so a block has the same bits in every run
    (a checkpoint's and a fresh run's agree).  ``Q``, ``M2``
    and ``R`` only feed upper bounds:

    * ``M2 = sum_j (max_t |z_tj| scale + 1/2)^2`` bounds every sample's
      squared norm (``norm_bound ** 2`` when given);
    * ``R`` bounds the bridge excursion ``max_m ||delta_m - (m / L) S||``:
      the excursion is evaluated exactly every :data:`SNAPSHOT` samples, and
      ``w`` samples after a snapshot ``||r_m|| <= ||r_k|| + w A`` (and
      likewise back from the next one), ``A`` bounding the norm of one sample
      minus the piece mean; hence ``(||r_k|| + ||r_k+1|| + w A) / 2``.
      With ``every = 1`` every position is evaluated and ``R`` is the
      excursion itself.
    """
    k, _, m = Z.shape
    p = k * m
    n_pieces = bounds.shape[0] - 1
    s = np.empty(p)
    sq = np.empty(p)
    mx = np.empty(p)
    for i in range(n_pieces):
        lo = bounds[i]
        hi = bounds[i + 1]
        length = hi - lo
        counts[i] = length
        s[:] = 0.0
        sq[:] = 0.0
        mx[:] = 0.0
        n_snaps = 0
        for t in range(lo, hi):
            for g in range(k):
                zrow = Z[g, t]
                for jj in range(m):
                    q = np.rint(np.float64(zrow[jj]) * scale)
                    j = g * m + jj
                    s[j] += q
                    sq[j] += q * q
            if (t - lo + 1) % every == 0 and t + 1 < hi:
                snaps[n_snaps, :] = s
                n_snaps += 1
        if norm_bound < 0.0:  # no bound known in advance: |q_j| <= max_t |z_tj| * scale + 1/2
            for t in range(lo, hi):
                for g in range(k):
                    zrow = Z[g, t]
                    for jj in range(m):
                        j = g * m + jj
                        mx[j] = max(mx[j], abs(np.float64(zrow[jj])))
            for j in range(p):
                mx[j] = mx[j] * scale + 0.5
        # across the features in order: these sums exceed 2**53 and round
        qsum = ordered_sum(0.0, sq)
        m2 = ordered_sumsq(0.0, mx)
        s2 = ordered_sumsq(0.0, s)
        for j in range(p):
            S[i, j] = np.int64(s[j])
        if norm_bound >= 0.0:
            m2 = norm_bound * norm_bound
        Q[i] = qsum
        M2[i] = m2 * (1.0 + 1e-12)
        inv_len = 1.0 / float(length)
        step = (math.sqrt(m2) + math.sqrt(s2) * inv_len) * (1.0 + 1e-12)
        prev = 0.0
        rmax = 0.0
        for kk in range(n_snaps):
            frac = float((kk + 1) * every) * inv_len
            for j in range(p):
                sq[j] = snaps[kk, j] - frac * s[j]  # sq: free once Q is summed
            cur = math.sqrt(lane_sumsq(sq))
            if every == 1:  # nothing lies between two positions
                rmax = max(rmax, cur)
            else:
                rmax = max(rmax, 0.5 * (prev + cur + every * step))
            prev = cur
        if every > 1:
            rmax = max(rmax, 0.5 * (prev + (length - n_snaps * every) * step))
        R[i] = 0.0 if length < 2 else rmax * (1.0 + 1e-9)


@njit(nogil=True, cache=True)
def merge_piece_into(count_a, S_a, Q_a, M2_a, R_a, count_b, S_b, Q_b, M2_b, R_b):
    """Merge piece B (which follows piece A) into A; returns A's new fields.

    ``S_a`` is updated in place.  The bridge bound of the union is
    ``max(R_a, R_b) + ||S_a - (n_a / n) (S_a + S_b)||``, a valid upper bound
    by the triangle inequality.
    """
    if count_b == 0:
        return count_a, Q_a, M2_a, R_a
    if count_a == 0:
        for j in range(S_a.shape[0]):
            S_a[j] = S_b[j]
        return count_b, Q_b, M2_b, R_b
    n = count_a + count_b
    frac = float(count_a) / float(n)
    acc = 0.0
    for j in range(S_a.shape[0]):
        total = S_a[j] + S_b[j]
        d = float(S_a[j]) - frac * float(total)
        acc += d * d
        S_a[j] = total
    return n, Q_a + Q_b, max(M2_a, M2_b), max(R_a, R_b) + math.sqrt(acc)


@njit(nogil=True, cache=True)
def merge_pieces_into_blocks(block_ids, p_cnt, p_S, p_Q, p_M2, p_R, cnt, S, Q, M2, R):
    """Merge piece ``i`` into block ``block_ids[i]`` of the outputs, in order."""
    for i in range(block_ids.shape[0]):
        b = block_ids[i]
        c, q, m2, r = merge_piece_into(
            cnt[b], S[b], Q[b], M2[b], R[b], p_cnt[i], p_S[i], p_Q[i], p_M2[i], p_R[i]
        )
        cnt[b] = c
        Q[b] = q
        M2[b] = m2
        R[b] = r


@njit(nogil=True, cache=True)
def tile_piece_bounds(tile_start, length, block_size):
    """Local boundaries of the pieces a tile of ``length`` samples starting at
    ``tile_start`` is cut into by the block grid (``bounds[0] = 0``)."""
    end = tile_start + length
    first_cut = (tile_start // block_size + 1) * block_size
    n_pieces = 1
    if first_cut < end:
        n_pieces += (end - 1 - first_cut) // block_size + 1
    bounds = np.empty(n_pieces + 1, np.int64)
    bounds[0] = 0
    for i in range(1, n_pieces):
        bounds[i] = first_cut + (i - 1) * block_size - tile_start
    bounds[n_pieces] = length
    return bounds


@njit(nogil=True, cache=True)
def accumulate_tile(
    Z,
    scale,
    tile_start,
    block_size,
    first_block,
    cnt,
    S,
    Q,
    M2,
    R,
    norm_bound,
    work_S,
    snaps,
    every,
):
    """Add a featurized tile (samples ``tile_start ..``) to block statistics.

    The tile is cut at block boundaries; each piece's statistics are merged
    into block ``start // block_size - first_block`` of the outputs (a block
    that continues from an earlier tile is merged with the bridge rule).
    ``work_S`` (int64, at least ``(pieces, p)``) and ``snaps`` (see
    :func:`piece_stats_into`) are work arrays reused from tile to tile:
    allocating them per tile costs page faults where ``malloc`` returns large
    blocks to the system at once (dask's worker processes).
    """
    length = Z.shape[1]
    bounds = tile_piece_bounds(tile_start, length, block_size)
    n_pieces = bounds.shape[0] - 1
    p_S = work_S[:n_pieces]
    p_Q = np.empty(n_pieces)
    p_M2 = np.empty(n_pieces)
    p_R = np.empty(n_pieces)
    p_cnt = np.empty(n_pieces, np.int64)
    piece_stats_into(Z, scale, bounds, p_S, p_Q, p_M2, p_R, p_cnt, norm_bound, snaps, every)
    block_ids = (tile_start + bounds[:-1]) // block_size - first_block
    merge_pieces_into_blocks(block_ids, p_cnt, p_S, p_Q, p_M2, p_R, cnt, S, Q, M2, R)


def accumulate_work(
    tile_len: int, block_size: int, p: int, every: int = SNAPSHOT
) -> tuple[np.ndarray, np.ndarray]:
    """The work arrays :func:`accumulate_tile` needs for tiles of ``tile_len`` samples."""
    pieces = tile_len // block_size + 2
    return np.empty((pieces, p), np.int64), np.empty((tile_len // every + 1, p))


@njit(nogil=True, cache=True)
def largest_boundary_gain(counts, S):
    """``max_i N / (x_i (N - x_i)) ||c_i - (x_i / N) T||^2`` over the inner
    boundaries ``i`` of consecutive blocks (``counts`` (b,), ``S`` (b, p)):
    ``x_i`` samples and ``c_i`` feature sums before boundary ``i``, ``N`` and
    ``T`` the totals.  The largest gain of a split at a block boundary, in
    one pass with no array of the blocks' size; ``0.0`` for one block."""
    b, p = S.shape
    if b < 2:
        return 0.0
    total = np.zeros(p)
    n = 0.0
    for i in range(b):
        n += float(counts[i])
        for j in range(p):
            total[j] += float(S[i, j])
    run = np.zeros(p)
    x = 0.0
    best = -np.inf
    for i in range(b - 1):
        x += float(counts[i])
        f = x / n
        acc = 0.0
        for j in range(p):
            run[j] += float(S[i, j])
            dev = run[j] - f * total[j]
            acc += dev * dev
        gain = n / (x * (n - x)) * acc
        if gain > best:
            best = gain
    return best


@njit(nogil=True, cache=True)
def first_nonfinite_row(x):
    """Index of the first row of ``x`` (L, d) holding a NaN or inf, or -1."""
    for t in range(x.shape[0]):
        for k in range(x.shape[1]):
            if not np.isfinite(x[t, k]):
                return t
    return -1


@njit(nogil=True, cache=True)
def _interior_bound(n_total, x_lo, x_hi, x_s, length, norm_s, norm_t, bridge, step):
    """Upper bound on ``N / (x (N - x)) * ||u||^2`` over ``x in [x_lo, x_hi]``.

    ``x`` counts the samples left of the split; the piece spans ``x_s ..
    x_s + length``.  Two bounds on ``||u||`` are combined:

    * convexity: ``||u|| <= norm_s + (norm_t - norm_s) (x - x_s) / length
      + bridge`` (the norm of an affine function lies below its chord, and
      the bridge bounds the deviation from the affine part);
    * ``||u|| <= min(x, N - x) * step`` with ``step`` bounding the norm of
      one sample minus the segment mean.

    The first bound is ``g(x) = N h(x)^2 / (x (N - x))`` with ``h >= 0``
    affine on the interval.  ``g`` tends to infinity at ``x -> 0`` (unless
    ``h(0) = 0``, where it increases) and at ``x -> N`` or falls to a double
    zero where ``h`` vanishes, and ``g'`` has at most one other zero
    (``x = alpha N / (beta N + 2 alpha)``), which can therefore only be a
    minimum: the maximum over an interval is at one of its ends.
    """
    n = float(n_total)
    beta = (norm_t - norm_s) / float(length)
    alpha = norm_s + bridge - beta * float(x_s)
    best = 0.0
    for x in (float(x_lo), float(x_hi)):
        val = alpha + beta * x
        g = n * val * val / (x * (n - x))
        if g > best:
            best = g
    # distance to the nearer end of the segment, at its largest inside the interval
    half = 0.5 * n
    if float(x_hi) <= half:
        m = float(x_hi)
    elif float(x_lo) >= half:
        m = n - float(x_lo)
    else:
        m = half
    g_end = n * m * step * step / (n - m)
    return min(best, g_end)


@njit(nogil=True, cache=True)
def segment_boundary_scan(
    prefix,
    bridge,
    block_size,
    j0,
    j1,
    start,
    end,
    prefix_start,
    prefix_end,
    bridge_head,
    bridge_tail,
    min_size,
    max_norm,
    eps_norm,
):
    """Evaluate a segment ``[start, end)`` at its block boundaries.

    ``prefix`` holds the exact prefix sums feature-major, ``(p, n_blocks + 1)``.
    The boundaries are ``start``, the grid points ``j * block_size`` for ``j``
    in ``[j0, j1]`` and ``end``; the pieces between consecutive boundaries are
    the head piece (bridge bound ``bridge_head``), the base blocks ``j0 ..
    j1 - 1`` (``bridge[j]``) and the tail piece (``bridge_tail``).  When
    ``j0 > j1`` the segment is a single piece with bound ``bridge_head``.
    ``max_norm`` bounds the norm of every sample's (quantized) features.

    The gains at the boundaries are computed several boundaries at a time,
    feature by feature in the order of :func:`split_gain` and with its
    operations, so each one is bit-for-bit the value :func:`split_gain`
    returns.

    Returns ``(best_gain, best_pos, piece_bounds)``: the largest gain at an
    admissible boundary (first one on ties; ``-1.0`` and ``-1`` if there is
    none) and, for each piece, an upper bound on the gain of any admissible
    split strictly inside it (``-1.0`` if it has none).
    """
    n_total = end - start
    p = prefix_start.shape[0]
    n_inner = j1 - j0 + 1 if j1 >= j0 else 0
    n_pieces = n_inner + 1
    lo_ok = start + min_size
    hi_ok = end - min_size

    # for every inner boundary, split_gain's sum over the features (same
    # operations, same order), a feature's row at a time over every boundary:
    # the row is read as it lies and the inner loop is one vectorisable
    # stream (1.5-1.9x faster than boundaries in tiles of 64, from 2e3 to
    # 1.3e5 blocks at 64 features, the same bits); the centred sum
    # u = S_L - (nL / N) S = w d (w = nL nR / N) has norm w sqrt(acc)
    fl = np.empty(n_inner)
    fr = np.empty(n_inner)
    inv_l = np.empty(n_inner)
    inv_r = np.empty(n_inner)
    acc = np.zeros(n_inner)
    tot2 = 0.0
    for j in range(p):
        tot = float(prefix_end[j] - prefix_start[j])
        tot2 += tot * tot
    for u in range(n_inner):
        pos = (j0 + u) * block_size
        fl[u] = float(pos - start)
        fr[u] = float(end - pos)
        inv_l[u] = 1.0 / fl[u]
        inv_r[u] = 1.0 / fr[u]
    for j in range(p):
        a = prefix_start[j]
        tot = prefix_end[j] - a
        row = prefix[j, j0 : j0 + n_inner]
        for u in range(n_inner):
            sl = row[u] - a
            sr = tot - sl
            d = float(sl) * inv_l[u] - float(sr) * inv_r[u]
            acc[u] += d * d
    step = max_norm + math.sqrt(tot2) / float(n_total) + eps_norm

    best_gain = -1.0
    best_pos = -1
    bounds = np.empty(n_pieces, np.float64)
    prev_pos = start
    prev_norm = 0.0
    for i in range(n_pieces):
        if i < n_inner:
            pos = (j0 + i) * block_size
            w = fl[i] * fr[i] / (fl[i] + fr[i])
            norm = w * math.sqrt(acc[i]) * (1.0 + 1e-12)
            if lo_ok <= pos <= hi_ok:
                g = w * acc[i]
                if g > best_gain:
                    best_gain = g
                    best_pos = pos
        else:
            pos = end
            norm = 0.0
        # piece [prev_pos, pos)
        if i == 0:
            rb = bridge_head
        elif i == n_pieces - 1:
            rb = bridge_tail
        else:
            rb = bridge[j0 + i - 1]
        c_lo = max(prev_pos + 1, lo_ok)
        c_hi = min(pos - 1, hi_ok)
        if c_lo > c_hi:
            bounds[i] = -1.0
        else:
            bounds[i] = _interior_bound(
                n_total,
                c_lo - start,
                c_hi - start,
                prev_pos - start,
                pos - prev_pos,
                prev_norm + eps_norm,
                norm + eps_norm,
                rb + eps_norm,
                step,
            )
        prev_pos = pos
        prev_norm = norm
    return best_gain, best_pos, bounds


@njit(nogil=True, cache=True)
def segment_pending(
    prefix,
    bridge,
    block_size,
    j0,
    j1,
    start,
    end,
    prefix_start,
    prefix_end,
    bridge_head,
    bridge_tail,
    min_size,
    max_norm,
    eps_norm,
    slack_scale,
    rounding,
    most,
):
    """:func:`segment_boundary_scan` and the pieces of the segment that must be
    scanned, in one call.

    A piece is pending when it has an admissible split inside and its bound,
    with slack (``bound * slack_scale + rounding``), reaches the best boundary
    gain (every piece with a split inside when there is no admissible boundary).
    Pending pieces next to each other form runs of at most ``most`` pieces.

    Returns ``(best_gain, best_pos, upper, run_start, run_end, run_grid,
    run_bound)``: the best boundary, the largest of its gain and the pending
    pieces' slack bounds, and for each run its first sample, its end
    (exclusive), ``block_size`` when it holds more than one piece (else 0) and
    the largest slack bound of its pieces.
    """
    best_gain, best_pos, bounds = segment_boundary_scan(
        prefix,
        bridge,
        block_size,
        j0,
        j1,
        start,
        end,
        prefix_start,
        prefix_end,
        bridge_head,
        bridge_tail,
        min_size,
        max_norm,
        eps_norm,
    )
    n_pieces = bounds.shape[0]
    n_inner = j1 - j0 + 1 if j1 >= j0 else 0
    first = np.empty(n_pieces, np.int64)
    last = np.empty(n_pieces, np.int64)
    run_bound = np.empty(n_pieces, np.float64)
    upper = best_gain
    runs = 0
    length = 0
    prev = -2
    for i in range(n_pieces):
        if bounds[i] < 0:
            continue
        slack = bounds[i] * slack_scale + rounding
        if best_pos >= 0 and not slack >= best_gain:
            continue
        if slack > upper:
            upper = slack
        if runs > 0 and i == prev + 1 and length < most:
            last[runs - 1] = i
            length += 1
            if slack > run_bound[runs - 1]:
                run_bound[runs - 1] = slack
        else:
            first[runs] = i
            last[runs] = i
            run_bound[runs] = slack
            runs += 1
            length = 1
        prev = i
    run_start = np.empty(runs, np.int64)
    run_end = np.empty(runs, np.int64)
    run_grid = np.zeros(runs, np.int64)
    for r in range(runs):
        i, k = first[r], last[r]
        run_start[r] = start if i == 0 else (j0 + i - 1) * block_size
        run_end[r] = (j0 + k) * block_size if k < n_inner else end
        if k > i:
            run_grid[r] = block_size
    return best_gain, best_pos, upper, run_start, run_end, run_grid, run_bound[:runs]


#: Positions whose gains :func:`scan_piece` computes side by side (independent
#: sums, one per position, each in :func:`split_gain`'s order).
SCAN_LANES = 32


@njit(nogil=True, cache=True)
def scan_piece(Z, scale, piece_start, seg_start, seg_end, left_at_piece, total, min_size, grid=0):
    """Exact scan of every split position strictly inside a piece
    (:func:`scan_run` of the whole of ``Z``)."""
    return scan_run(
        Z,
        0,
        Z.shape[1],
        scale,
        piece_start,
        seg_start,
        seg_end,
        left_at_piece,
        total,
        min_size,
        grid,
    )


@njit(nogil=True, cache=True)
def scan_run(
    Z, lo, hi, scale, piece_start, seg_start, seg_end, left_at_piece, total, min_size, grid=0
):
    """Exact scan of every split position strictly inside a piece, whose
    features are ``Z[:, lo:hi, :]``.

    The piece is given by its bounds in ``Z``, not as a slice: a slice of
    the middle axis is not contiguous to the compiler, and a sample's
    features, read through it, did not vectorize (60 -> 41 ns a sample for
    two groups of 32 features, ``benchmarks/results/throughput.md``).

    ``Z`` (k, L, m) holds the raw features of samples ``piece_start ..
    piece_start + L - 1``; ``left_at_piece`` is the exact integer sum of the
    segment's samples before ``piece_start``; ``total`` the segment's sum.
    With ``grid > 0`` the range is a run of consecutive pieces of a block
    grid of that size: its grid points (multiples of ``grid``) are skipped,
    so the positions scanned are those strictly inside each piece.

    The gains of :data:`SCAN_LANES` consecutive positions are summed side by
    side, feature by feature with :func:`split_gain`'s operations in its
    order, so each is bit for bit that function's value: one position's sum
    is a chain of dependent additions, and interleaving several chains is
    what makes the scan fast without reordering any of them.  A tile's left
    sums are kept position by position (each position's a contiguous row,
    written as the running sum is, through views: indexed element by element
    in three dimensions, the update did not vectorize; 49 -> 37 ns a sample
    at 64 features, ``benchmarks/results/throughput.md``).

    Returns ``(best_gain, best_pos)`` (first position on ties; ``-1.0, -1``
    when no admissible position lies inside the piece).
    """
    k, m = Z.shape[0], Z.shape[2]
    length = hi - lo
    p = k * m
    left = left_at_piece.copy()
    lo_ok = seg_start + min_size
    hi_ok = seg_end - min_size
    best_gain = -1.0
    best_pos = -1
    lanes = SCAN_LANES
    rows = np.empty((lanes, p), left.dtype)  # left sums of a tile's positions, position-major
    fl = np.empty(lanes)
    fr = np.empty(lanes)
    inv_l = np.empty(lanes)
    inv_r = np.empty(lanes)
    acc = np.empty(lanes)
    # positions piece_start + t + 1 for t < stop: none past the last admissible one
    # (whose right part, and every earlier one's, is at least min_size long)
    stop = min(length - 1, hi_ok - piece_start)
    t0 = 0
    while t0 < stop:
        nb = min(lanes, stop - t0)
        for u in range(nb):
            t = t0 + u
            row = rows[u]
            for g in range(k):
                z = Z[g, lo + t]
                lg = left[g * m : (g + 1) * m]
                rg = row[g * m : (g + 1) * m]
                for jj in range(m):
                    v = lg[jj] + np.int64(np.rint(np.float64(z[jj]) * scale))
                    lg[jj] = v
                    rg[jj] = v
            pos = piece_start + t + 1
            fl[u] = float(pos - seg_start)
            fr[u] = float(seg_end - pos)
            inv_l[u] = 1.0 / fl[u]
            inv_r[u] = 1.0 / fr[u]
            acc[u] = 0.0
        t0 += nb
        if piece_start + t0 < lo_ok:  # the tile's last position is not admissible yet
            continue
        for j in range(p):
            tot = total[j]
            for u in range(nb):
                sl = rows[u, j]
                sr = tot - sl
                d = float(sl) * inv_l[u] - float(sr) * inv_r[u]
                acc[u] += d * d
        for u in range(nb):
            pos = piece_start + t0 - nb + u + 1
            if pos < lo_ok:
                continue
            if grid > 0 and pos % grid == 0:
                continue
            gain = (fl[u] * fr[u] / (fl[u] + fr[u])) * acc[u]
            if gain > best_gain:
                best_gain = gain
                best_pos = pos
    return best_gain, best_pos


@njit(nogil=True, cache=True)
def scan_pieces(
    Z, scale, offsets, piece_starts, seg_starts, seg_ends, lefts, totals, min_size, grids
):
    """:func:`scan_piece` of several pieces whose features are consecutive in ``Z``.

    Piece ``i`` is ``Z[:, offsets[i]:offsets[i + 1]]``, starting at sample
    ``piece_starts[i]`` of segment ``[seg_starts[i], seg_ends[i])``, with
    ``lefts[i]``, ``totals[i]`` and ``grids[i]`` as in :func:`scan_piece`.
    Returns the best gain and position of every piece.
    """
    n_pieces = offsets.shape[0] - 1
    gains = np.empty(n_pieces)
    positions = np.empty(n_pieces, np.int64)
    for i in range(n_pieces):
        gains[i], positions[i] = scan_run(
            Z,
            offsets[i],
            offsets[i + 1],
            scale,
            piece_starts[i],
            seg_starts[i],
            seg_ends[i],
            lefts[i],
            totals[i],
            min_size,
            grids[i],
        )
    return gains, positions


@njit(nogil=True, cache=True)
def threshold_tile_stats(x, thresholds, qv, tile_start, block_size, first_block, cnt, S, Q, M2, R):
    """Block statistics of threshold features ``q = qv * 1{x > t_k}`` without
    building them: one binary search and one histogram increment per sample
    and channel.

    ``x`` (L, d) float64 samples ``tile_start ..``; ``thresholds`` (d, K)
    sorted; feature ``c * K + k`` is channel c above threshold k.  The sums of
    piece ``[a, b)`` are ``qv * #{samples above t_k}``, suffix sums of the
    piece's histogram of ``#{k: t_k < x}``; the bridge is evaluated every
    :data:`SNAPSHOT` samples as in :func:`piece_stats` and merged into the
    blocks the same way.  The integers equal those of the dense features.
    """
    length, d = x.shape
    K = thresholds.shape[1]
    p = d * K
    bounds = tile_piece_bounds(tile_start, length, block_size)
    n_pieces = bounds.shape[0] - 1
    level = np.empty((length, d), np.int64)  # thresholds below each sample, per channel
    for t in range(length):
        for c in range(d):
            level[t, c] = np.searchsorted(thresholds[c], x[t, c], side="left")
    p_S = np.zeros((n_pieces, p), np.int64)
    p_Q = np.zeros(n_pieces)
    p_M2 = np.zeros(n_pieces)
    p_R = np.zeros(n_pieces)
    p_cnt = np.empty(n_pieces, np.int64)
    hist = np.zeros((d, K + 1), np.int64)
    qv_f = float(qv)
    for i in range(n_pieces):
        lo = bounds[i]
        hi = bounds[i + 1]
        n_i = hi - lo
        p_cnt[i] = n_i
        hist[:, :] = 0
        total_levels = 0
        top = 0
        for t in range(lo, hi):
            s_lev = 0
            for c in range(d):
                hist[c, level[t, c]] += 1
                s_lev += level[t, c]
            total_levels += s_lev
            top = max(top, s_lev)
        for c in range(d):  # sums: qv * #{level > k} = suffix sums of the histogram
            acc = 0
            for k in range(K - 1, -1, -1):
                acc += hist[c, k + 1]
                p_S[i, c * K + k] = qv * acc
        p_Q[i] = qv_f * qv_f * float(total_levels)
        p_M2[i] = qv_f * qv_f * float(top)
        # bridge excursion at the snapshots, bounded in between (see piece_stats)
        s2 = 0.0
        for j in range(p):
            s2 += float(p_S[i, j]) ** 2
        inv_len = 1.0 / float(n_i)
        step = (math.sqrt(p_M2[i]) + math.sqrt(s2) * inv_len) * (1.0 + 1e-12)
        hist[:, :] = 0
        prev = 0.0
        rmax = 0.0
        n_snaps = 0
        for t in range(lo, hi):
            for c in range(d):
                hist[c, level[t, c]] += 1
            m = t - lo + 1
            if m % SNAPSHOT == 0 and t + 1 < hi:
                frac = float(m) * inv_len
                acc2 = 0.0
                for c in range(d):
                    acc = 0
                    for k in range(K - 1, -1, -1):
                        acc += hist[c, k + 1]
                        r = qv_f * float(acc) - frac * float(p_S[i, c * K + k])
                        acc2 += r * r
                cur = math.sqrt(acc2)
                rmax = max(rmax, 0.5 * (prev + cur + SNAPSHOT * step))
                prev = cur
                n_snaps += 1
        rmax = max(rmax, 0.5 * (prev + (n_i - n_snaps * SNAPSHOT) * step))
        p_R[i] = 0.0 if n_i < 2 else rmax * (1.0 + 1e-9)
    block_ids = (tile_start + bounds[:-1]) // block_size - first_block
    merge_pieces_into_blocks(block_ids, p_cnt, p_S, p_Q, p_M2, p_R, cnt, S, Q, M2, R)
