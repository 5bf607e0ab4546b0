"""The slow, obvious implementation the fast search must equal.

It featurizes every sample with ``FeatureMap.transform``, takes the exact
integer cumulative sum over all samples, evaluates every admissible split of
every segment, and runs sequential binary segmentation: split the segment
whose best gain is largest (ties: the smallest split position), repeat.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
from numba import njit

from kcpstream._kernels.blockstats import split_gain
from kcpstream.engine.plan import DEFAULT_D_MAX


@njit
def cusum_gains(cumsum, seg_start, seg_end, min_size):
    """Gains at every admissible split of ``[seg_start, seg_end)``, brute force.

    ``cumsum`` is the full-resolution exact prefix sum, ``cumsum[i]`` = sum of
    the first ``i`` samples.  Entry ``c - seg_start`` of the result is the gain
    of the split at ``c`` (``-inf`` where ``c`` is not admissible): the
    package's own :func:`split_gain` at every position, nothing skipped.
    """
    n_total = seg_end - seg_start
    out = np.full(n_total + 1, -np.inf)
    total = cumsum[seg_end] - cumsum[seg_start]
    for c in range(seg_start + min_size, seg_end - min_size + 1):
        left = cumsum[c] - cumsum[seg_start]
        out[c - seg_start] = split_gain(c - seg_start, seg_end - c, left, total)
    return out


def quantized(features: np.ndarray, exponent: int) -> np.ndarray:
    """Integer features ``z * 2**exponent`` (asserting they are exact integers)."""
    scaled = features.astype(np.float64) * 2.0**exponent
    q = scaled.astype(np.int64)
    assert np.array_equal(q.astype(np.float64), scaled), "features are not on the fixed-point grid"
    return q


def bridge_excursion(q: np.ndarray) -> float:
    """``max_m ||sum(q[:m]) - (m / L) sum(q)||`` over the positions of a piece of ``L`` samples."""
    length = q.shape[0]
    s = q.sum(axis=0)
    delta = np.cumsum(q, axis=0)[:-1]
    m = np.arange(1, length)[:, None]
    r = delta - m / length * s
    return float(np.sqrt((r**2).sum(axis=1)).max()) if length > 1 else 0.0


def best_split(cumsum: np.ndarray, a: int, e: int, min_size: int) -> tuple[float, int]:
    """Best split of [a, e) over every position; (-1.0, -1) if none is admissible."""
    best_gain, best_pos = -1.0, -1
    total = cumsum[e] - cumsum[a]
    for c in range(a + min_size, e - min_size + 1):
        g = split_gain(c - a, e - c, cumsum[c] - cumsum[a], total)
        if g > best_gain:
            best_gain, best_pos = g, c
    return best_gain, best_pos


def best_split_compiled(cumsum: np.ndarray, a: int, e: int, min_size: int) -> tuple[float, int]:
    """:func:`best_split` with the loop over positions compiled (for large n)."""
    if e - a < 2 * min_size:
        return -1.0, -1
    gains = cusum_gains(cumsum, a, e, min_size)
    i = int(np.argmax(gains))  # first maximum
    return float(gains[i]), a + i


def reference_binseg(
    q: np.ndarray,
    min_size: int,
    n_bkps: int | None = None,
    pen_q: float | None = None,
    compiled: bool = False,
    allow_fewer: bool = False,
):
    """Sequential binary segmentation over integer features ``q`` (n, p).

    Returns the list of (split, gain) in the order made, or None when
    ``n_bkps`` splits cannot be made (unless ``allow_fewer``: the splits made).
    """
    best_split_ = best_split_compiled if compiled else best_split
    n = q.shape[0]
    cumsum = np.zeros((n + 1, q.shape[1]), dtype=np.int64)
    np.cumsum(q, axis=0, out=cumsum[1:])
    segments = {(0, n): best_split_(cumsum, 0, n, min_size)}
    order = []
    while n_bkps is None or len(order) < n_bkps:
        # largest gain first; among equal gains the smallest split position
        key, (gain, pos) = max(segments.items(), key=lambda kv: (kv[1][0], -kv[1][1]))
        if pos < 0 or (pen_q is not None and not gain > pen_q):
            break
        order.append((pos, gain))
        del segments[key]
        a, e = key
        segments[(a, pos)] = best_split_(cumsum, a, pos, min_size)
        segments[(pos, e)] = best_split_(cumsum, pos, e, min_size)
    if n_bkps is not None and len(order) < n_bkps and not allow_fewer:
        return None
    return order


def local_gains(q: np.ndarray, changepoints) -> list[float]:
    """Each change-point's gain between its two neighbours (quantized units)."""
    n = q.shape[0]
    cumsum = np.zeros((n + 1, q.shape[1]), dtype=np.int64)
    np.cumsum(q, axis=0, out=cumsum[1:])
    bounds = [0, *map(int, changepoints), n]
    return [
        split_gain(c - a, e - c, cumsum[c] - cumsum[a], cumsum[e] - cumsum[a])
        for a, c, e in zip(bounds[:-2], bounds[1:-1], bounds[2:], strict=True)
    ]


def default_candidates(n: int, n_bkps: int, min_size: int) -> int:
    """Splits of binary segmentation's path offered for ``n_bkps`` change-points:
    twice as many, within the default path, at least ``n_bkps``."""
    return max(n_bkps, min(2 * n_bkps, DEFAULT_D_MAX - 1, n // min_size - 1))


def best_among_candidates(q: np.ndarray, candidates, n_bkps: int) -> tuple[Fraction, list]:
    """Every choice of ``n_bkps`` of ``candidates``: the largest exact value
    ``sum ||S_segment||^2 / |segment|`` (the least cost) and every choice reaching it.

    Exact rational arithmetic on the integer features, so ties are ties.
    """
    n = q.shape[0]
    cumsum = np.zeros((n + 1, q.shape[1]), dtype=object)
    cumsum[1:] = np.cumsum(q.astype(object), axis=0)
    best, argbest = None, []
    for cps in itertools.combinations(sorted(map(int, candidates)), n_bkps):
        bounds = [0, *cps, n]
        value = Fraction(0)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            s = cumsum[b] - cumsum[a]
            value += Fraction(int((s * s).sum()), b - a)
        if best is None or value > best:
            best, argbest = value, [list(cps)]
        elif value == best:
            argbest.append(list(cps))
    return best, argbest


def exact_value(q: np.ndarray, cps) -> Fraction:
    """``sum ||S_segment||^2 / |segment|`` of one segmentation, exactly."""
    return best_among_candidates(q, list(cps), len(cps))[0]


@njit(nogil=True, cache=True)
def segment_values_reference(prefix, positions, min_size):
    """The DP's segment values, one pair at a time: ``V[i, j] =
    ||S(g_i, g_j)||^2 / (g_j - g_i)`` for admissible ``i < j`` (else -inf),
    from the exact int64 prefix sums ``prefix`` (m, p) at the grid positions."""
    m = positions.shape[0]
    p = prefix.shape[1]
    values = np.full((m, m), -np.inf)
    for i in range(m):
        for j in range(i + 1, m):
            length = positions[j] - positions[i]
            if length < min_size:
                continue
            acc = 0.0
            for f in range(p):
                s = float(prefix[j, f] - prefix[i, f])
                acc += s * s
            values[i, j] = acc / float(length)
    return values


@njit(nogil=True, cache=True)
def dp_reference(values, d_max):
    """``best[d, j]``: largest sum of V (:func:`segment_values_reference`) over
    segmentations of ``[0, g_j)`` into d + 1 segments, inadmissible terms
    skipped explicitly; and the argmax table for backtracking (first maximum)."""
    m = values.shape[0]
    best = np.full((d_max, m), -np.inf)
    arg = np.full((d_max, m), -1, np.int64)
    for j in range(1, m):
        best[0, j] = values[0, j]
    for d in range(1, d_max):
        for j in range(1, m):
            top = -np.inf
            where = -1
            for i in range(1, j):
                if best[d - 1, i] == -np.inf or values[i, j] == -np.inf:
                    continue
                v = best[d - 1, i] + values[i, j]
                if v > top:
                    top = v
                    where = i
            best[d, j] = top
            arg[d, j] = where
    return best, arg


def line_gain_reference(q: np.ndarray, block_size: int, start: int, end: int) -> float:
    """Weighted least squares of a straight line in time through the mean
    features of the pieces of ``[start, end)`` cut at the grid points
    ``0, B, 2B, ...`` (each piece at its centre, weighted by its samples):
    its regression sum of squares, from the samples' features ``q`` (n, p)."""
    cuts = [start, *range(-(-(start + 1) // block_size) * block_size, end, block_size), end]
    cuts = sorted(set(c for c in cuts if start <= c <= end))
    if len(cuts) < 3:
        return 0.0
    counts = np.diff(cuts).astype(np.float64)
    centres = np.array([(a + b - 1) / 2 for a, b in itertools.pairwise(cuts)])
    means = np.array([q[a:b].sum(axis=0) for a, b in itertools.pairwise(cuts)]) / counts[:, None]
    w = np.sqrt(counts)[:, None]
    design = np.column_stack([np.ones_like(centres), centres - centres.mean()])
    coef, *_ = np.linalg.lstsq(design * w, means * w, rcond=None)
    fitted = design @ coef
    overall = (counts[:, None] * means).sum(axis=0) / counts.sum()
    return float((counts[:, None] * (fitted - overall) ** 2).sum())


def segment_gains_reference(res, data, segment: int, max_points: int):
    """The gain of splitting a segment of ``res`` at up to ``max_points`` of its
    positions and at the best admissible split, the obvious way: the whole
    segment read and featurized at once (``(offsets, gains)``)."""
    from kcpstream._kernels.blockstats import split_gain
    from kcpstream._kernels.dense import best_split_between
    from kcpstream.inputs.signal import as_signal

    signal = as_signal(data)
    a, e = res.segments[segment]
    w = res.features.window_samples
    q_exp = res.features.quantum_exponent_
    x = np.asarray(signal.data[a:e].compute())
    nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
    valid = np.flatnonzero(~(nan.any(axis=1) if nan.ndim == 2 else nan))
    x = x[valid]
    if w > 1:
        x = x[: len(x) // w * w].reshape(-1, w * x.shape[1])
    z = res.features.transform(x).astype(np.float64) * 2.0**q_exp
    cums = np.concatenate(
        [np.zeros((1, z.shape[1]), np.int64), np.cumsum(z.astype(np.int64), axis=0)]
    )
    n_seg = len(z)
    positions = np.unique(
        np.linspace(1, n_seg - 1, min(max_points, n_seg - 1)).round().astype(np.int64)
    )
    lo = max(1, res.min_size // w)
    lo = lo if n_seg >= 2 * lo else 1
    best = best_split_between(np.ascontiguousarray(cums.T), 0, n_seg, lo, n_seg - lo)[1]
    if best >= 0:
        positions = np.union1d(positions, [best])
    unit = 2.0 ** (-2 * q_exp)
    total = cums[-1]
    gains = np.array([split_gain(int(c), int(n_seg - c), cums[c], total) * unit for c in positions])
    return valid[positions * w], gains


def log_moments_reference(prefix, start: int, end: int, direction, rates):
    """The samples of ``[start, end)`` projected on ``direction`` about their
    mean, their root mean square ``s`` and ``log(mean(exp(rate * y / s)))``
    for each rate, by numpy."""
    q = np.diff(prefix[:, start : end + 1], axis=1).astype(np.float64)
    mean = (prefix[:, end] - prefix[:, start]) / (end - start)
    y = direction @ (q - mean[:, None])
    scale = float(np.sqrt(np.mean(y * y)))
    z = y / scale
    return scale, np.array([np.log(np.mean(np.exp(r * z))) for r in rates])


def bound_segment_reference(stats, start: int, end: int, min_size: int):
    """:func:`kcpstream.search.binseg.bound_segment` as numpy steps around the
    boundary scan: the pending pieces chosen by their slack bounds, cut into
    runs of consecutive pieces, each with the sum before it.  Returns ``(gain,
    split, upper, requests, bounds)``, requests as ``(piece_start, piece_end,
    left, grid)``."""
    from kcpstream._kernels.blockstats import segment_boundary_scan
    from kcpstream.search.binseg import _REL_SLACK, MAX_RUN_SAMPLES, _segment_pieces

    if end - start < 2 * min_size:
        return -1.0, -1, -1.0, [], []
    B, p = stats.block_size, stats.n_features
    qmax2 = max(stats.global_max_norm2, 1.0)
    pa, _ = stats.prefix_at(start)
    pe, _ = stats.prefix_at(end)
    j0, j1, head, tail = _segment_pieces(stats, start, end)
    eps_norm = (end - start) * math.sqrt(qmax2 * p) * 2.0**-48
    gain, split, bounds = segment_boundary_scan(
        stats.prefix, stats.bridge, B, j0, j1, start, end, pa, pe, head, tail,
        min_size, math.sqrt(qmax2), eps_norm,
    )  # fmt: skip
    slack = bounds * (1 + _REL_SLACK) + stats.gain_rounding(end - start)
    ok = (bounds >= 0) & (slack >= gain) if split >= 0 else bounds >= 0
    chosen = np.flatnonzero(ok)
    upper = max(float(gain), float(slack[chosen].max())) if chosen.size else float(gain)
    positions = [start, *range(j0 * B, j1 * B + 1, B), end] if j0 <= j1 else [start, end]
    most = max(1, MAX_RUN_SAMPLES // B)
    runs: list[list[int]] = []
    for i in chosen.tolist():
        if runs and runs[-1][-1] == i - 1 and len(runs[-1]) < most:
            runs[-1].append(i)
        else:
            runs.append([i])
    requests, run_bounds = [], []
    for run in runs:
        a, e = positions[run[0]], positions[run[-1] + 1]
        left = stats.prefix_at(a)[0] - pa if run[0] > 0 else np.zeros(p, np.int64)
        requests.append((a, e, left, B if len(run) > 1 else 0))
        run_bounds.append(max(float(slack[i]) for i in run))
    return float(gain), int(split), upper, requests, run_bounds


def bennett_tail_reference(q, gain, trim, most):
    """:func:`kcpstream.selection.edges.bounded_tail` summed over every length
    ``[trim, most)`` one by one, from the samples ``q`` (n, p) of the whole
    segment: the Bennett bound for ``m`` draws of vectors of norm at most
    ``b`` about their mean (``b`` the largest norm plus the mean's), variance
    ``v`` per draw, at both ends."""
    q = np.asarray(q, np.float64)
    n = q.shape[0]
    mean = q.mean(axis=0)
    v = float((q**2).sum(axis=1).mean() - mean @ mean)
    b = float(np.sqrt((q**2).sum(axis=1).max()) + np.sqrt(mean @ mean))
    total = 0.0
    for m in range(trim, most):
        t = math.sqrt(gain * m * (n - m) / n)
        u = b * t / (m * v)
        total += 2.0 * 2.0 * math.exp(-(m * v / b**2) * ((1 + u) * math.log1p(u) - u))
    return total


def overshoot(x: np.ndarray) -> np.ndarray:
    """Siegmund's ``nu(x)`` in numpy, element by element as written: the erf of
    Abramowitz & Stegun 7.1.26 (its Taylor series below 0.05), then
    ``(2 / x) (Phi(h) - 1/2) / (h Phi(h) + phi(h))`` at ``h = x / 2``."""
    x = np.maximum(np.asarray(x, dtype=np.float64), 1e-12)
    h = 0.5 * x
    z = h / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    series = (2.0 / math.sqrt(math.pi)) * z * (1.0 - z * z / 3.0 + z**4 / 10.0)
    half = 0.5 * np.where(z < 0.05, series, 1.0 - poly * np.exp(-z * z))
    pdf = np.exp(-0.5 * h * h) / math.sqrt(2.0 * math.pi)
    return (2.0 / x) * half / (h * (0.5 + half) + pdf)


def nearest_subsequences_reference(x, m, lo, hi, exclusion, k, seed):
    """Each subsequence's ``k`` nearest among ``lo .. hi - 1`` (the
    subsequences ``x[q : q + m]``; positions relative to ``lo``, ``-1``
    where fewer exist), from the full matrix of z-normalised
    Euclidean distances: a flat subsequence is 0 from another flat one and
    ``m`` from any other; ties go to the lower ``tie_rank``."""
    from kcpstream._kernels.neighbours import FLAT, GRID, tie_rank

    subs = np.lib.stride_tricks.sliding_window_view(np.asarray(x, dtype=float), m)
    subs = subs[lo:hi]
    sd = subs.std(axis=1)
    flat = sd < FLAT
    centred = subs - subs.mean(axis=1, keepdims=True)
    z = np.where(flat[:, None], 0.0, centred / np.where(flat, 1, sd)[:, None])
    d = ((z[:, None, :] - z[None, :, :]) ** 2).sum(axis=2)
    d[flat[:, None] != flat[None, :]] = m
    d[flat[:, None] & flat[None, :]] = 0.0
    n_nodes = hi - lo
    out = np.full((n_nodes, k), -1, dtype=np.int64)
    for i in range(n_nodes):
        allowed = [j for j in range(n_nodes) if abs(i - j) >= max(exclusion, 1)]
        # (on the kernel's grid: equal shapes at equal distances)
        ranked = sorted(
            allowed, key=lambda j: (np.floor(d[i, j] / m * GRID + 0.5), tie_rank(seed, i, j))
        )
        out[i, : min(k, len(ranked))] = ranked[:k]
    return out


def crossing_statistics(position, edges, min_side):
    """``Z(t)`` of :func:`kcpstream._kernels.neighbours.crossing_scan` at every
    ``t`` (NaN outside ``[min_side, N - min_side]``), edge by edge."""
    n_nodes = edges.shape[0]
    pairs = [(position[i], position[j]) for i in range(n_nodes) for j in edges[i] if j >= 0]
    z = np.full(n_nodes, np.nan)
    for t in range(1, n_nodes):
        if t < min_side or t > n_nodes - min_side:
            continue
        expected = len(pairs) * 2.0 * t * (n_nodes - t) / (n_nodes * (n_nodes - 1.0))
        if expected <= 0:
            continue
        crossing = sum(1 for a, b in pairs if min(a, b) < t <= max(a, b))
        z[t] = (expected - crossing) / np.sqrt(expected)
    return z
