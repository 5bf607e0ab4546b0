"""Kernel of the gap scan: one chunk's missing rows in one pass.

A row is missing when any of its values is NaN.  :func:`scan_gaps` gives
what :mod:`kcpstream.inputs.gaps` keeps of a chunk: its count of valid rows,
its first infinity and first missing row, its runs of missing rows at each
end and its longest, and the runs themselves (up to a number, so that a
chunk of scattered dropped samples does not cost memory in proportion).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(nogil=True, cache=True)
def scan_gaps(x, max_runs):
    """``(summary, starts, lengths, complete)`` of the rows of ``x`` (L, d), a float array.

    ``summary`` (int64): valid rows, first row holding an infinity (-1: none),
    first missing row (-1: none), missing rows at the start, at the end, the
    longest run of them.  ``starts``, ``lengths``: the runs of missing rows in
    order, at most ``max_runs`` of them; ``complete``: whether that is all of them.
    """
    n, d = x.shape
    valid = 0
    first_inf = -1
    first_missing = -1
    leading = 0
    longest = 0
    run = 0
    run_start = 0
    starts = np.empty(max_runs, np.int64)
    lengths = np.empty(max_runs, np.int64)
    k = 0
    complete = True
    for i in range(n + 1):
        miss = False
        if i < n:
            for j in range(d):
                v = x[i, j]
                if v != v:
                    miss = True
                elif first_inf < 0 and (v == np.inf or v == -np.inf):
                    first_inf = i
        if miss:
            if run == 0:
                run_start = i
            run += 1
            if first_missing < 0:
                first_missing = i
            continue
        if i < n:
            valid += 1
        if run > 0:  # a run ends here
            if run_start == 0:
                leading = run
            if run > longest:
                longest = run
            if k < max_runs:
                starts[k] = run_start
                lengths[k] = run
                k += 1
            else:
                complete = False
            if i == n:
                break
            run = 0
    trailing = run if n > 0 and run_start + run == n and run > 0 else 0
    summary = np.array([valid, first_inf, first_missing, leading, trailing, longest], np.int64)
    return summary, starts[:k], lengths[:k], complete


@njit(nogil=True, cache=True)
def compact_rows(x):
    """Move the rows of ``x`` (L, d) without a NaN to its start, in order, and
    return how many there are: the valid rows without a copy of the chunk."""
    n, d = x.shape
    k = 0
    for i in range(n):
        miss = False
        for j in range(d):
            v = x[i, j]
            if v != v:
                miss = True
                break
        if miss:
            continue
        if k != i:
            for j in range(d):
                x[k, j] = x[i, j]
        k += 1
    return k
