"""Kernel of the short-side test: the log-moment function of a segment's
samples along one direction of the feature space.

:mod:`kcpstream.selection.edges` bounds the tail of a short piece's sum by
the samples' own law (a Chernoff bound); this kernel computes what the
bound needs from the exact prefix sums at every sample, in one pass.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def log_moments(prefix, start, end, direction, rates):
    """``(scale, L)``: the samples ``i`` of ``[start, end)`` projected on
    ``direction`` about their mean, ``y_i = <u, q_i - mean>`` (``q_i`` the
    differences of the prefix sums ``prefix``, (p, n + 1) int64), their root
    mean square ``scale``, and for each ``rates[k]`` the log of the mean of
    ``exp(rates[k] * y_i / scale)`` (computed about the largest ``y_i``, so
    that no exponential overflows)."""
    p = prefix.shape[0]
    length = end - start
    mean = np.empty(p)
    for f in range(p):
        mean[f] = (prefix[f, end] - prefix[f, start]) / length
    y = np.zeros(length)
    for f in range(p):
        u = direction[f]
        if u == 0.0:
            continue
        for j in range(length):
            y[j] += (prefix[f, start + j + 1] - prefix[f, start + j] - mean[f]) * u
    square = 0.0
    for j in range(length):
        square += y[j] * y[j]
    scale = math.sqrt(square / length) if length else 0.0
    out = np.zeros(rates.shape[0])
    if not scale > 0:
        return scale, out
    top = -np.inf
    for j in range(length):
        y[j] /= scale
        top = max(top, y[j])
    for k in range(rates.shape[0]):
        lam = rates[k]
        total = 0.0
        for j in range(length):
            total += math.exp(lam * (y[j] - top))
        out[k] = lam * top + math.log(total / length)
    return scale, out
