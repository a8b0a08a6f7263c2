"""Locality-sensitive hashing over MinHash signatures, candidate verification and clustering.

* Band keys: the ``rows`` signature values of each of ``bands`` bands hashed to 64 bits.
* Candidates: within a band, every passage is paired with the first passage (corpus order) that
  has the same band key — a star per bucket, enough for connected components.
* Verification: the Jaccard similarity estimated from signatures (share of equal values), or
  the exact Jaccard of shingle sets, against a threshold.
* Classes: connected components of verified pairs (union-find, each class rooted at its first
  member in corpus order), or NIST's greedy mode, where the first unassigned passage in corpus
  order claims all its unassigned candidates.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from qrelkit.dedupe.tokenize import _mix64

NO_EDGE = np.int64(-1)


def s_curve(bands: int, rows: int, points=(0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)) -> dict[float, float]:
    """Probability that two passages of Jaccard similarity ``s`` become candidates:
    ``1 - (1 - s^rows)^bands``."""
    return {s: 1.0 - (1.0 - s**rows) ** bands for s in points}


def threshold_estimate(bands: int, rows: int) -> float:
    """The similarity where the S-curve is steepest, ``(1/bands)^(1/rows)``."""
    return (1.0 / bands) ** (1.0 / rows)


@nb.njit(inline="always", cache=True)
def _band_key(sig, i, b, rows):
    h = np.uint64(0x9E3779B97F4A7C15) + np.uint64(b)
    for r in range(rows):
        h = _mix64(h ^ np.uint64(sig[i, b * rows + r]))
    return h


@nb.njit(parallel=True, cache=True)
def band_keys(sig, bands, rows):
    """Band keys ``uint64[bands, n]`` (stored for incremental assignment)."""
    n = sig.shape[0]
    out = np.empty((bands, n), np.uint64)
    for i in nb.prange(n):
        for b in range(bands):
            out[b, i] = _band_key(sig, i, b, rows)
    return out


@nb.njit(cache=True)
def _table_size(n):
    size = 16
    while size < 2 * n:
        size *= 2
    return size


@nb.njit(parallel=True, cache=True)
def first_with_key(sig, bands, rows, skip):
    """For each band and passage: the index of the first passage (corpus order) with the same
    band key, or -1 when it is the first itself. Passages with ``skip`` set take no part.
    Band keys are computed on the fly, one band per thread, so they are never all in memory."""
    nb_, n = bands, sig.shape[0]
    out = np.full((nb_, n), -1, np.int32)
    size = _table_size(n)
    mask = np.uint64(size - 1)
    for b in nb.prange(nb_):
        tk = np.zeros(size, np.uint64)
        tv = np.full(size, -1, np.int64)
        for i in range(n):
            if skip[i]:
                continue
            k = _band_key(sig, i, b, rows)
            slot = k & mask
            while True:
                v = tv[slot]
                if v < 0:
                    tk[slot] = k
                    tv[slot] = i
                    break
                if tk[slot] == k:
                    out[b, i] = np.int32(v)
                    break
                slot = (slot + np.uint64(1)) & mask
    return out


@nb.njit(inline="always", cache=True)
def _find(parent, i):
    root = i
    while parent[root] != root:
        root = parent[root]
    while parent[i] != root:  # path compression
        nxt = parent[i]
        parent[i] = root
        i = nxt
    return root


@nb.njit(cache=True)
def _sig_jaccard(sig, i, j):
    same = 0
    K = sig.shape[1]
    for k in range(K):
        if sig[i, k] == sig[j, k]:
            same += 1
    return same / K


def candidate_pairs(first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique candidate pairs (i, j), j < i, from :func:`first_with_key`, sorted by (i, j)."""
    nb_, n = first.shape
    b_idx, i = np.nonzero(first >= 0)
    j = first[b_idx, i].astype(np.int64)
    key = np.unique(i.astype(np.int64) * np.int64(n) + j)
    return key // n, key % n


@nb.njit(parallel=True, cache=True)
def verify_signatures(sig, i, j, threshold):
    """Pairs whose Jaccard estimated from signatures reaches ``threshold``."""
    out = np.empty(len(i), np.bool_)
    for p in nb.prange(len(i)):
        out[p] = _sig_jaccard(sig, i[p], j[p]) >= threshold
    return out


@nb.njit(cache=True)
def union_components(n, i, j):
    """Connected components of the pairs; each passage's root is its class's first member."""
    parent = np.arange(n)
    for p in range(len(i)):
        a = _find(parent, i[p])
        b = _find(parent, j[p])
        if a < b:
            parent[b] = a
        elif b < a:
            parent[a] = b
    for k in range(n):
        parent[k] = _find(parent, k)
    return parent


@nb.njit(cache=True)
def greedy_claims(first, sig, threshold, verify_sig):
    """NIST's mode: in corpus order, an unassigned passage claims every unassigned passage that
    shares a band key with it (no transitive merging)."""
    nb_, n = first.shape
    # bucket members per (band, first member): CSR by first member
    counts = np.zeros(n + 1, np.int64)
    for b in range(nb_):
        for i in range(n):
            r = first[b, i]
            if r >= 0:
                counts[r + 1] += 1
    starts = np.cumsum(counts)
    members = np.empty(starts[-1], np.int64)
    fill = starts[:-1].copy()
    for b in range(nb_):
        for i in range(n):
            r = first[b, i]
            if r >= 0:
                members[fill[r]] = i
                fill[r] += 1
    owner = np.full(n, -1, np.int64)
    for i in range(n):
        if owner[i] >= 0:
            continue
        owner[i] = i
        # i's buckets: those it leads, and those of the leaders it belongs to
        for b in range(nb_):
            lead = first[b, i] if first[b, i] >= 0 else i
            # members of the bucket led by `lead` in band b: scan lead's list filtered by band
            for q in range(starts[lead], starts[lead + 1]):
                j = members[q]
                if j != i and owner[j] < 0 and first[b, j] == lead:
                    if not verify_sig or _sig_jaccard(sig, i, j) >= threshold:
                        owner[j] = i
            if lead != i and owner[lead] < 0:
                if not verify_sig or _sig_jaccard(sig, i, lead) >= threshold:
                    owner[lead] = i
    return owner


def choose_bands(num_perm: int, threshold: float) -> tuple[int, int]:
    """Bands x rows (bands * rows <= num_perm) whose S-curve gives at least 0.99 probability of
    becoming candidates at ``threshold`` with the most rows (the fewest false candidates)."""
    best = (num_perm, 1)
    for rows in range(1, num_perm + 1):
        bands = num_perm // rows
        if bands < 1:
            break
        p = 1.0 - (1.0 - threshold**rows) ** bands
        if p >= 0.99:
            best = (bands, rows)
    return best


def exact_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard of two sorted unique uint32 arrays."""
    if len(a) == 0 and len(b) == 0:
        return 1.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


__all__ = [
    "band_keys", "candidate_pairs", "choose_bands", "exact_jaccard", "first_with_key", "greedy_claims",
    "s_curve", "threshold_estimate", "union_components", "verify_signatures",
]
