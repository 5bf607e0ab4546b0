"""Choosing the number of segments from a path of segmentations.

A search yields, for every number of segments ``D = 1 .. D_max``, a
segmentation and its cost ``C(D)`` (the sum of segment costs).  Four rules
pick ``D``:

* ``n_bkps=K``: ``D = K + 1``;
* ``pen=beta``: minimise ``C(D) + beta (D - 1)``;
* ``pen="auto"``: binary segmentation's splits tested top down
  (:func:`significant_splits`, with the p-values of :mod:`kcpstream.selection.significance`),
  then each change-point of the chosen segmentation between its neighbours
  (in :mod:`kcpstream.selection.choose`, which holds the block statistics);
* ``pen="slope"``: the penalty of Arlot, Celisse & Harchaoui,
  ``pen(D) = c1 log binom(n - 1, D - 1) + c2 D``, with ``c1, c2`` calibrated
  by the slope heuristic: over the largest ``D`` the cost of the best
  segmentations falls like the minimal penalty, so a least-squares fit of
  ``C(D)`` against the two shapes over ``D in [0.6 D_max, D_max]`` gives
  the minimal penalty, and twice it is the penalty used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

#: Share of the largest numbers of segments the slope heuristic fits on.
FIT_FRACTION = 0.4


@dataclass(frozen=True)
class Selection:
    """How the number of segments was chosen.

    Attributes
    ----------
    rule : {"n_bkps", "pen", "auto", "slope"}
    n_segments : int
        The chosen D.
    d_max : int
        The largest D on the path.
    pen : float or None
        The linear penalty (rule "pen").
    c1, c2 : float or None
        The calibrated constants of ``c1 log binom(n-1, D-1) + c2 D`` (rule "slope").
    fit_range : tuple of int or None
        The ``[D_lo, D_hi]`` the slope heuristic was fitted on.
    alpha : float or None
        The level of each split's test (rule "auto").
    noise : dict or None
        The long-run noise the splits were tested against (rule "auto"; see
        :class:`kcpstream.selection.significance.LongRunNoise`).
    """

    rule: str
    n_segments: int
    d_max: int
    pen: float | None = None
    c1: float | None = None
    c2: float | None = None
    fit_range: tuple[int, int] | None = None
    alpha: float | None = None
    noise: dict | None = None

    def penalty(self, n: int, d: np.ndarray | int) -> np.ndarray:
        """The penalty this rule adds to the cost of a segmentation with ``d`` segments."""
        d = np.asarray(d, dtype=float)
        if self.rule == "slope":
            return self.c1 * log_binomial_shape(n, d) + self.c2 * d
        if self.rule == "pen":
            return self.pen * (d - 1)
        return np.zeros_like(d)

    def to_dict(self) -> dict:
        out = asdict(self)
        if out["fit_range"] is not None:
            out["fit_range"] = list(out["fit_range"])
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Selection:
        data = dict(data)
        if data.get("fit_range") is not None:
            data["fit_range"] = tuple(data["fit_range"])
        return cls(**data)


def log_binomial_shape(n: int, d: np.ndarray | int) -> np.ndarray:
    """``log binom(n - 1, D - 1)``, the number of segmentations into D segments."""
    d = np.asarray(d, dtype=float)
    lg = np.vectorize(math.lgamma, otypes=[float])
    return lg(n) - lg(d) - lg(n - d + 1.0)


def select_by_penalty(costs: np.ndarray, pen: float) -> Selection:
    """``D`` minimising ``C(D) + pen (D - 1)``; ``costs[D - 1] = C(D)``."""
    d = np.arange(1, len(costs) + 1)
    crit = costs + pen * (d - 1)
    return Selection("pen", int(d[int(np.argmin(crit))]), len(costs), pen=float(pen))


def slope_heuristic(costs: np.ndarray, n: int, *, fit_fraction: float = FIT_FRACTION) -> Selection:
    """Calibrate ``c1 log binom(n-1, D-1) + c2 D`` on the path and choose ``D``.

    ``costs[D - 1]`` is the cost of the best segmentation found with D
    segments.  The fit uses the largest ``fit_fraction`` of the path
    (:data:`FIT_FRACTION` by default; at least 3 points); the slopes of the
    fit are the minimal penalty's constants.  A slope of the wrong sign (the
    shape does not describe the path there) is set to zero and the fit is
    redone with the other shape.
    """
    costs = np.asarray(costs, dtype=float)
    d_max = len(costs)
    if d_max < 4:
        raise ValueError(
            f"the automatic penalty needs a path of at least 4 segmentations, got {d_max}; "
            "raise d_max or give n_bkps or pen"
        )
    if not 0.0 < fit_fraction <= 1.0:
        raise ValueError(f"fit_fraction must be in (0, 1], got {fit_fraction!r}")
    d_lo = max(1, min(d_max - 2, math.ceil((1.0 - fit_fraction) * d_max)))
    d = np.arange(d_lo, d_max + 1, dtype=float)
    y = costs[d_lo - 1 :]
    shapes = np.stack([log_binomial_shape(n, d), d], axis=1)
    coef = _fit_decreasing(shapes, y)
    c1, c2 = 2.0 * coef[0], 2.0 * coef[1]
    all_d = np.arange(1, d_max + 1)
    crit = costs + c1 * log_binomial_shape(n, all_d) + c2 * all_d
    return Selection(
        "slope",
        int(all_d[int(np.argmin(crit))]),
        d_max,
        c1=float(c1),
        c2=float(c2),
        fit_range=(int(d_lo), int(d_max)),
    )


def significant_splits(
    splits: list[tuple[int, int, int]], n: int, alpha: float, p_value: Callable[[int], float]
) -> list[int]:
    """Binary segmentation's splits that are significant, top down.

    ``splits`` are ``(start, end, split)`` in the order the splits were made
    (a parent before its children), ``p_value(i)`` the p-value of split
    ``i``.  A split counts when its p-value is at most ``alpha`` and the
    segment it splits came from a split that counts (or is the whole series
    ``[0, n)``): the test of a segment is only made once the change above it
    was accepted, so a series without change gets a change-point with
    probability about ``alpha`` (the root's test).  ``p_value`` is asked only
    for those splits (the others cannot count, whatever their p-value: on a
    path of 100 splits of a series with few changes, most).  Returns the
    positions of the splits that count, in order.
    """
    open_segments = {(0, int(n))}
    accepted: list[int] = []
    for i, (start, end, split) in enumerate(splits):
        if (start, end) in open_segments and p_value(i) <= alpha:
            accepted.append(int(split))
            open_segments.update({(start, split), (split, end)})
    return accepted


def _fit_decreasing(shapes: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative ``a`` with ``y ~ b - shapes @ a`` (least squares, intercept b)."""
    best = np.zeros(shapes.shape[1])
    best_err = np.inf
    k = shapes.shape[1]
    for mask in range(1, 2**k):  # every non-empty subset of the shapes
        cols = [i for i in range(k) if mask >> i & 1]
        design = np.column_stack([np.ones(len(y)), -shapes[:, cols]])
        sol, *_ = np.linalg.lstsq(design, y, rcond=None)
        if np.any(sol[1:] < 0):
            continue
        err = float(((design @ sol - y) ** 2).sum())
        if err < best_err:
            best_err = err
            best = np.zeros(k)
            best[cols] = sol[1:]
    return best
