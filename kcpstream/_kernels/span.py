"""Kernel of the split test's tail over a segment's positions: the quadrature of
Siegmund's overshoot factor (:func:`kcpstream.selection.significance.discrete_span`).

A choice evaluates it for every segment it tests, a few thousand times for a
batch of short series; on arrays of 65 nodes numpy's per-call overhead was
most of its cost (``benchmarks/results/throughput.md``).
"""

from __future__ import annotations

import math

from numba import njit


@njit(nogil=True, cache=True)
def _erf(z):
    """``erf`` of ``z >= 0`` to 1.5e-7 (Abramowitz & Stegun 7.1.26); below 0.05
    its Taylor series (the rational form loses relative accuracy there)."""
    if z < 0.05:
        return (2.0 / math.sqrt(math.pi)) * z * (1.0 - z * z / 3.0 + z**4 / 10.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return 1.0 - poly * math.exp(-z * z)


@njit(nogil=True, cache=True)
def overshoot_at(x):
    """Siegmund's ``nu(x)`` of one step size ``x`` (see
    :func:`kcpstream.selection.significance.overshoot`)."""
    x = max(x, 1e-12)
    h = 0.5 * x
    half = 0.5 * _erf(h / math.sqrt(2.0))
    pdf = math.exp(-0.5 * h * h) / math.sqrt(2.0 * math.pi)
    return (2.0 / x) * half / (h * (0.5 + half) + pdf)


@njit(nogil=True, cache=True)
def span_quadrature(b, edge, steps, nodes):
    """Trapezoid rule, over ``nodes`` points of ``u in [-edge, edge]``, of
    ``nu(b / sqrt(steps t (1 - t)))`` with ``t = 1 / (1 + exp(-u))``."""
    du = 2.0 * edge / (nodes - 1)
    total = 0.0
    previous = 0.0
    for i in range(nodes):
        u = -edge + i * du
        t = 1.0 / (1.0 + math.exp(-u))
        nu = overshoot_at(b / math.sqrt(steps * t * (1.0 - t)))
        if i:
            total += (nu + previous) * 0.5 * du
        previous = nu
    return total
