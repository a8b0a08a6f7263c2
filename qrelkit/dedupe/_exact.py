"""Exact Jaccard of sorted shingle-hash sets for candidate pairs (numba)."""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(parallel=True, cache=True)
def exact_pairs(starts, vals, a, b, threshold):
    out = np.empty(len(a), np.bool_)
    for p in nb.prange(len(a)):
        x0, x1 = starts[a[p]], starts[a[p] + 1]
        y0, y1 = starts[b[p]], starts[b[p] + 1]
        inter = 0
        x, y = x0, y0
        while x < x1 and y < y1:
            if vals[x] == vals[y]:
                inter += 1
                x += 1
                y += 1
            elif vals[x] < vals[y]:
                x += 1
            else:
                y += 1
        union = (x1 - x0) + (y1 - y0) - inter
        out[p] = union == 0 or inter / union >= threshold
    return out
