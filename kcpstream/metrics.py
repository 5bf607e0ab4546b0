"""Distances and scores between segmentations.

A segmentation of ``n`` samples is given by its change-points: the indices of
the first sample of every segment but the first (kcpstream's
``Segmentation.changepoints``; ruptures' breakpoints without the final ``n``
are the same thing).  Every function accepts any sequence of integers.

All of them work from the overlaps of the segments of the two segmentations
(one sweep, ``O(D + D')``), never from an ``n x n`` matrix.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "hausdorff",
    "frobenius",
    "rand_index",
    "precision_recall",
    "f1_score",
    "covering",
]


def _changepoints(
    cps: Sequence[int] | np.ndarray, n: int | None = None, name: str = ""
) -> np.ndarray:
    arr = np.unique(np.asarray(cps, dtype=np.int64).ravel())
    if n is not None:
        if arr.size and (arr[0] <= 0 or arr[-1] >= n):
            raise ValueError(
                f"{name or 'change-points'} must lie in 1 .. n-1 = {n - 1}, got {arr.tolist()}; "
                "pass change-points, not breakpoints ending with n"
            )
    return arr


def _bounds(cps: np.ndarray, n: int) -> np.ndarray:
    return np.concatenate(([0], cps, [n]))


def _overlaps(true: np.ndarray, pred: np.ndarray, n: int):
    """Yield ``(i, j, overlap)`` for every pair of intersecting segments."""
    bt, bp = _bounds(true, n), _bounds(pred, n)
    i = j = 0
    while i < len(bt) - 1 and j < len(bp) - 1:
        lo = max(bt[i], bp[j])
        hi = min(bt[i + 1], bp[j + 1])
        if hi > lo:
            yield i, j, int(hi - lo)
        if bt[i + 1] <= bp[j + 1]:
            i += 1
        else:
            j += 1


def hausdorff(true: Sequence[int], pred: Sequence[int]) -> float:
    """Hausdorff distance between two sets of change-points (in samples).

    ``max(max_t min_p |t - p|, max_p min_t |t - p|)``; 0 when both are empty,
    ``inf`` when exactly one is.
    """
    t, p = _changepoints(true), _changepoints(pred)
    if t.size == 0 and p.size == 0:
        return 0.0
    if t.size == 0 or p.size == 0:
        return float("inf")
    d = np.abs(t[:, None] - p[None, :])
    return float(max(d.min(axis=1).max(), d.min(axis=0).max()))


def frobenius(true: Sequence[int], pred: Sequence[int], n: int) -> float:
    """Frobenius distance ``||M - M'||_F`` between the segmentations' matrices.

    ``M_ij = 1{i and j in the same segment} / |segment|`` (the projection onto
    piecewise-constant signals), as in Arlot, Celisse & Harchaoui and the
    thesis the project grew from.  ``||M||_F^2 = D`` and
    ``<M, M'> = sum |A cap A'|^2 / (|A| |A'|)`` over pairs of segments.
    """
    t, p = _changepoints(true, n, "true"), _changepoints(pred, n, "pred")
    bt, bp = _bounds(t, n), _bounds(p, n)
    lt, lp = np.diff(bt), np.diff(bp)
    inner = sum(ov * ov / (lt[i] * lp[j]) for i, j, ov in _overlaps(t, p, n))
    sq = len(lt) + len(lp) - 2.0 * inner
    return float(np.sqrt(max(sq, 0.0)))


def rand_index(true: Sequence[int], pred: Sequence[int], n: int) -> float:
    """Rand index: the fraction of pairs of samples on which the segmentations agree
    (same segment in both, or different segments in both)."""
    t, p = _changepoints(true, n, "true"), _changepoints(pred, n, "pred")
    lt, lp = np.diff(_bounds(t, n)), np.diff(_bounds(p, n))
    pairs = n * (n - 1) / 2
    same_t = float((lt * (lt - 1) / 2).sum())
    same_p = float((lp * (lp - 1) / 2).sum())
    same_both = sum(ov * (ov - 1) / 2 for _, _, ov in _overlaps(t, p, n))
    return 1.0 - (same_t + same_p - 2.0 * same_both) / pairs if pairs else 1.0


def precision_recall(true: Sequence[int], pred: Sequence[int], margin: int) -> tuple[float, float]:
    """Precision and recall of ``pred`` with a tolerance of ``margin`` samples.

    A predicted change-point is a true positive when it is matched to a true
    one at distance at most ``margin``, each true change-point matched at
    most once (a maximum matching: a sweep in time order).  With no
    prediction precision is 1 (nothing wrong was said); with no true
    change-point recall is 1.
    """
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    t, p = _changepoints(true), _changepoints(pred)
    matched = 0
    j = 0
    for c in t:  # earliest unused prediction within the margin of each true change-point
        while j < p.size and p[j] < c - margin:
            j += 1
        if j < p.size and p[j] <= c + margin:
            matched += 1
            j += 1
    precision = matched / p.size if p.size else 1.0
    recall = matched / t.size if t.size else 1.0
    return precision, recall


def f1_score(true: Sequence[int], pred: Sequence[int], margin: int) -> float:
    """Harmonic mean of :func:`precision_recall` (0 when both are 0)."""
    precision, recall = precision_recall(true, pred, margin)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def covering(true: Sequence[int], pred: Sequence[int], n: int) -> float:
    """Segmentation covering of the true segmentation by ``pred``.

    ``(1/n) sum_A |A| max_A' J(A, A')`` over the true segments ``A``, with
    ``J`` the Jaccard index of two segments (intervals).
    """
    t, p = _changepoints(true, n, "true"), _changepoints(pred, n, "pred")
    bt, bp = _bounds(t, n), _bounds(p, n)
    best = np.zeros(len(bt) - 1)
    for i, j, ov in _overlaps(t, p, n):
        union = max(bt[i + 1], bp[j + 1]) - min(bt[i], bp[j])
        best[i] = max(best[i], ov / union)
    return float((np.diff(bt) * best).sum() / n)
