"""Kernels of the nearest-neighbour test of short series
(:mod:`kcpstream.selection.neighbours`): each subsequence's nearest others
under the z-normalised Euclidean distance, and the scan of the edges that
cross each split.

The distances come from sliding dot products, one row of the distance matrix
at a time (``O(N^2)`` work, ``O(N)`` memory): the test is for series
of at most a few ten thousand samples.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: A subsequence whose standard deviation is below this is constant: at the
#: z-normalised distance 0 from another constant one, and ``m`` (the squared
#: norm of a z-normalised one) from any other.
FLAT = 1e-8

#: Distances are compared on a grid of ``m / GRID``: shapes that are equal
#: (a flag's, a step's) are at equal distances, which the sliding dot
#: products give to rounding only, and ties must go to the random priority.
GRID = 2.0**30


@njit(nogil=True, cache=True)
def _distance(dot, m, mu_i, mu_j, inv_i, inv_j, on_i, on_j):
    """The distance of two subsequences in units of ``m / GRID``, from their
    dot product.  With ``on`` 1 for a subsequence that is not flat and 0 for
    one that is, ``m (on_i + on_j - 2 on_i on_j r)`` is ``2 m (1 - r)``
    between two shapes, ``m`` between a shape and a flat one and 0 between
    two flat ones."""
    r = min((dot - m * mu_i * mu_j) * inv_i * inv_j / m, 1.0)
    return math.floor((on_i + on_j - 2.0 * on_i * on_j * r) * GRID + 0.5)


@njit(nogil=True, cache=True)
def _mix(z):
    """SplitMix64's finalizer: every bit of ``z`` (uint64) moves every bit out."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(nogil=True, cache=True)
def tie_rank(seed, i, j):
    """A pseudo-random rank of candidate ``j`` for subsequence ``i``: ties are
    broken independently for every subsequence, so that many with the same
    equals (a flag's flat stretches) do not all pick the same few.

    Row ``i`` gets a SplitMix64 stream of its own, started from a mix of
    ``seed`` and ``i``, and ``j`` is that stream's ``j``-th draw.  A single
    mix of a sum linear in ``i`` and ``j`` (as before) gave neighbouring
    rows similar orders of their candidates: their edges went to the same
    few stretches, a structure no block order has, and a flag at 0.5 % with
    subsequences of 4 samples got a change-point in 18 of 20 series of 3000
    (``benchmarks/results/real.md``)."""
    golden = np.uint64(0x9E3779B97F4A7C15)
    start = _mix(np.uint64(seed) * golden + np.uint64(i))
    return np.int64(_mix(start + np.uint64(j + 1) * golden) >> np.uint64(1))


@njit(nogil=True, cache=True)
def _before(d, p, best_d, best_p):
    """Whether a candidate at distance ``d`` of priority ``p`` ranks before
    the one held: ties (flat or repeated subsequences) are broken by a random
    priority, so that the neighbour among equals is drawn uniformly."""
    return d < best_d or (d == best_d and p < best_p)


@njit(nogil=True, cache=True)
def _keep(i, j, d, seed, best, rank, arg):
    """Candidate ``j`` at distance ``d`` into row ``i``'s nearest, if it ranks there."""
    k = best.shape[1]
    p = tie_rank(seed, i, j)
    if not _before(d, p, best[i, k - 1], rank[i, k - 1]):
        return
    q = k - 1
    while q > 0 and _before(d, p, best[i, q - 1], rank[i, q - 1]):
        best[i, q] = best[i, q - 1]
        rank[i, q] = rank[i, q - 1]
        arg[i, q] = arg[i, q - 1]
        q -= 1
    best[i, q] = d
    rank[i, q] = p
    arg[i, q] = j


@njit(nogil=True, cache=True)
def nearest_subsequences(x, m, lo, hi, exclusion, k, seed):  # noqa: PLR0913
    """The ``k`` nearest of the subsequences ``x[q : q + m]`` for ``q`` in ``lo
    .. hi - 1``, among the same, those fewer than ``exclusion`` apart left
    out: an ``(N, k)`` array of ``q - lo`` (``-1`` where fewer exist).  Ties
    go to the lower :func:`tie_rank` of ``seed``.

    The samples are taken about their mean; row ``i``'s dot products come
    from row ``i - 1``'s (two products a pair), its distances in a loop the
    compiler vectorizes, and only those within the row's ``k``-th nearest
    so far are ranked."""
    N = hi - lo
    best = np.full((N, k), np.inf)
    rank = np.full((N, k), np.iinfo(np.int64).max, np.int64)
    arg = np.full((N, k), -1, np.int64)
    # about their mean, the dot products less the means' product keep their
    # digits (a flag stored as 1000 and 1001 would lose them all)
    x = x[lo : hi - 1 + m] - np.mean(x[lo : hi - 1 + m])
    mu = np.empty(N)
    inv = np.empty(N)
    on = np.empty(N)
    for q in range(N):
        total = 0.0
        for t in range(m):
            total += x[q + t]
        mu[q] = total / m
        v = 0.0
        for t in range(m):
            v += (x[q + t] - mu[q]) ** 2
        sd = math.sqrt(v / m)
        on[q] = 0.0 if sd < FLAT else 1.0
        inv[q] = 0.0 if sd < FLAT else 1.0 / sd
    first = np.empty(N)
    for j in range(N):
        s = 0.0
        for t in range(m):
            s += x[t] * x[j + t]
        first[j] = s
    qt = first.copy()
    before = np.empty(N)
    row = np.empty(N)
    for i in range(N):
        if i > 0:  # the dot products of row i from those of row i - 1
            qt, before = before, qt
            qt[0] = first[i]
            for j in range(1, N):
                qt[j] = before[j - 1] - x[j - 1] * x[i - 1] + x[j + m - 1] * x[i + m - 1]
        mi, ii, oi = mu[i], inv[i], on[i]
        for j in range(N):
            row[j] = _distance(qt[j], m, mi, mu[j], ii, inv[j], oi, on[j])
        apart = max(exclusion, 1)  # (never itself)
        for j in range(0, max(0, i - apart + 1)):
            if row[j] <= best[i, k - 1]:
                _keep(i, j, row[j], seed, best, rank, arg)
        for j in range(i + apart, N):
            if row[j] <= best[i, k - 1]:
                _keep(i, j, row[j], seed, best, rank, arg)
    return arg


@njit(nogil=True, cache=True)
def crossing_scan(position, arg, min_side):
    """The largest standardised deficit of crossing edges over the splits
    ``t`` in ``[min_side, N - min_side]``, and its ``t``, for nodes placed at
    ``position`` (a permutation of ``0 .. N - 1``).

    An edge ``i -> arg[i, q]`` crosses ``t`` when its ends lie on either side.
    With ``E`` edges whose ends were drawn at random, ``E 2 t (N - t) /
    (N (N - 1))`` of them would; the deficit is that less the edges that do,
    over its square root."""
    N = arg.shape[0]
    diff = np.zeros(N + 1)
    edges = 0
    for i in range(N):
        for q in range(arg.shape[1]):
            j = arg[i, q]
            if j < 0:
                continue
            a = position[i]
            b = position[j]
            if a > b:
                a, b = b, a
            diff[a + 1] += 1.0
            diff[b + 1] -= 1.0
            edges += 1
    best = -np.inf
    at = -1
    crossing = 0.0
    for t in range(1, N):
        crossing += diff[t]
        if t < min_side or t > N - min_side:
            continue
        expected = edges * 2.0 * t * (N - t) / (N * (N - 1.0))
        if expected <= 0.0:
            continue
        z = (expected - crossing) / math.sqrt(expected)
        if z > best:
            best = z
            at = t
    return best, at


@njit(nogil=True, cache=True)
def block_exceedances(arg, orders, block, min_side, statistic, stop):
    """How many of the block orders ``orders`` (each row a permutation of the
    ``ceil(N / block)`` blocks of ``block`` consecutive nodes) give a scan
    statistic of at least ``statistic``, stopping once ``stop`` do; and how
    many orders were evaluated."""
    N = arg.shape[0]
    position = np.empty(N, np.int64)
    count = 0
    done = 0
    for r in range(orders.shape[0]):
        p = 0
        for b in orders[r]:
            for i in range(b * block, min((b + 1) * block, N)):
                position[i] = p
                p += 1
        s, _ = crossing_scan(position, arg, min_side)
        done += 1
        if s >= statistic:
            count += 1
            if count >= stop:
                break
    return count, done
