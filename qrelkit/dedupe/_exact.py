"""Exact Jaccard of sorted shingle-hash sets for pairs of passages (numba)."""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(inline="always", cache=True)
def set_jaccard(starts, vals, a, b):
    """Jaccard of the sorted sets ``a`` and ``b`` of a CSR (1 for two empty sets)."""
    x, x1 = starts[a], starts[a + 1]
    y, y1 = starts[b], starts[b + 1]
    n = (x1 - x) + (y1 - y)
    inter = 0
    while x < x1 and y < y1:
        if vals[x] == vals[y]:
            inter += 1
            x += 1
            y += 1
        elif vals[x] < vals[y]:
            x += 1
        else:
            y += 1
    union = n - inter
    return 1.0 if union == 0 else inter / union


@nb.njit(parallel=True, cache=True)
def exact_pairs(starts, vals, a, b, threshold):
    """Whether the sets ``a[p]`` and ``b[p]`` (CSR ``starts``, ``vals``) have Jaccard >= threshold."""
    out = np.empty(len(a), np.bool_)
    for p in nb.prange(len(a)):
        out[p] = set_jaccard(starts, vals, a[p], b[p]) >= threshold
    return out


@nb.njit(parallel=True, cache=True)
def jaccard_pairs(starts, vals, a, b):
    """Jaccard of the sets ``a[p]`` and ``b[p]``."""
    out = np.empty(len(a), np.float64)
    for p in nb.prange(len(a)):
        out[p] = set_jaccard(starts, vals, a[p], b[p])
    return out
