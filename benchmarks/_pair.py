"""A rule measured beside kcpstream's defaults: a cycle's windows segmented with
the invariant shape part and another one, each at half the level.

``paired(x, shape)`` is ``kcpstream.segment(x)`` where the defaults take no
windows; where they take windows of ``w`` samples of a cycle of ``P``, it is
the one of ``segment(x, features=Temporal(window=w), alpha=alpha / 2)`` and
``segment(x, features=Temporal(window=w, shape=shape, cycles=round(w / P),
level=level), alpha=alpha / 2)`` with more change-points (the first on a
tie): a Bonferroni split, so a series without change gets a change-point from
either with probability at most ``alpha``.  The defaults are this rule with
``shape="canonical", level=False`` (``kcpstream.engine.pair``).
"""

from __future__ import annotations

import kcpstream
from kcpstream.engine.pair import fundamental_cycles as cycles_of
from kcpstream.features import Temporal

__all__ = ["ALPHA", "cycles_of", "paired"]

ALPHA = 0.01


def paired(x, shape: str, alpha: float = ALPHA, whole=None, level: bool = True, **kw):
    """The pair rule's answer for ``x`` (``kw``: more arguments of ``segment``),
    and which part gave it (``"invariant"``, ``shape``, or None: no windows).
    ``whole``: ``segment(x, alpha=alpha, **kw)`` when already made."""
    if whole is None:
        whole = kcpstream.segment(x, alpha=alpha, **kw)
    window, period = whole.params.get("window"), whole.params.get("period")
    if not window or period is None:
        return whole, None
    invariant = Temporal(window=window)
    first = kcpstream.segment(x, features=invariant, alpha=alpha / 2, **kw)
    fmap = Temporal(window=window, shape=shape, cycles=cycles_of(window, period), level=level)
    second = kcpstream.segment(x, features=fmap, alpha=alpha / 2, **kw)
    if second.n_changepoints > first.n_changepoints:
        return second, shape
    return first, "invariant"
