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

from qrelkit.dedupe._exact import set_jaccard
from qrelkit.dedupe.tokenize import mix64

NO_EDGE = np.int64(-1)


def s_curve(bands: int, rows: int, points=(0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)) -> dict[float, float]:
    """Probability that two passages of Jaccard similarity ``s`` become candidates:
    ``1 - (1 - s^rows)^bands``."""
    return {s: 1.0 - (1.0 - s**rows) ** bands for s in points}


def threshold_estimate(bands: int, rows: int) -> float:
    """The similarity where the S-curve is steepest, ``(1/bands)^(1/rows)``."""
    return (1.0 / bands) ** (1.0 / rows)


@nb.njit(inline="always", cache=True)
def band_key(sig, i, b, rows):
    """The LSH key of band ``b`` of signature row ``i`` (``rows`` values per band), as uint64."""
    h = np.uint64(0x9E3779B97F4A7C15) + np.uint64(b)
    for r in range(rows):
        h = mix64(h ^ np.uint64(sig[i, b * rows + r]))
    return h


@nb.njit(cache=True)
def _table_size(n):
    size = 16
    while size < 2 * n:
        size *= 2
    return size


BAND_GROUP = 8  # bands keyed in one pass over the signatures (their values fill the lines read)
PART_KEYS = 8192  # band keys per partition, about: its lookup table stays in the core's cache


@nb.njit(cache=True)
def _partition_bits(n):
    """Bits of a band key that choose its partition, for ``n`` keys (at least one)."""
    r = 1
    while (n >> r) > PART_KEYS and r < 24:
        r += 1
    return r


@nb.njit(inline="always", cache=True)
def _first_of_keys(keys, skip, r, out, counts, pk, pi):
    """``out[i]`` = the first ``i' < i`` with ``keys[i'] == keys[i]`` (left as it is when there is
    none); passages with ``skip`` set take no part. The keys are partitioned by their top ``r``
    bits, in corpus order, so each partition's lookup table is small."""
    shift = np.uint64(64 - r)
    parts = len(counts) - 1
    for p in range(parts + 1):
        counts[p] = 0
    for i in range(len(keys)):
        if not skip[i]:
            counts[np.int64(keys[i] >> shift) + 1] += 1
    big = 0
    for p in range(parts):
        big = max(big, counts[p + 1])
        counts[p + 1] += counts[p]
    fill = np.empty(parts, np.int64)
    for p in range(parts):
        fill[p] = counts[p]
    for i in range(len(keys)):
        if not skip[i]:
            p = np.int64(keys[i] >> shift)
            pk[fill[p]] = keys[i]
            pi[fill[p]] = i
            fill[p] += 1
    size = _table_size(big)
    tk = np.empty(size, np.uint64)
    tv = np.empty(size, np.int32)
    for p in range(parts):
        size = _table_size(counts[p + 1] - counts[p])
        for t in range(size):
            tv[t] = -1
        mask = np.uint64(size - 1)
        for t in range(counts[p], counts[p + 1]):
            k = pk[t]
            slot = k & mask
            while True:
                v = tv[slot]
                if v < 0:
                    tk[slot] = k
                    tv[slot] = pi[t]
                    break
                if tk[slot] == k:
                    out[pi[t]] = v
                    break
                slot = (slot + np.uint64(1)) & mask


def first_with_key(sig, bands, rows, skip):
    """For each band and passage: the index of the first passage (corpus order) with the same
    band key, or -1 when it is the first itself. Passages with ``skip`` set take no part.
    Each thread keys :data:`BAND_GROUP` bands at a time in one pass over the signatures and
    finds the first of each key in small partitions (:func:`_first_of_keys`)."""
    return _first_with_key(sig, bands, rows, skip, nb.get_num_threads())


@nb.njit(parallel=True, cache=True)
def _first_with_key(sig, bands, rows, skip, lanes):
    """:func:`first_with_key` in ``lanes`` parallel lanes, each taking every lanes-th group of
    bands in work arrays of its own, kept from one group to the next: fresh memory costs a page
    fault per 4 KiB (a new set of arrays for every group was 150k page faults at 4M passages)."""
    n = sig.shape[0]
    out = np.full((bands, n), -1, np.int32)
    r = _partition_bits(n)
    groups = (bands + BAND_GROUP - 1) // BAND_GROUP
    lanes = max(1, min(lanes, groups))
    keys_of = np.empty((lanes, min(bands, BAND_GROUP), n), np.uint64)
    pk_of = np.empty((lanes, n), np.uint64)
    pi_of = np.empty((lanes, n), np.int32)
    for lane in nb.prange(lanes):
        keys, pk, pi = keys_of[lane], pk_of[lane], pi_of[lane]
        counts = np.empty((1 << r) + 1, np.int64)
        for g in range(lane, groups, lanes):
            b0, b1 = g * BAND_GROUP, min(bands, (g + 1) * BAND_GROUP)
            for i in range(n):
                if not skip[i]:
                    for b in range(b0, b1):
                        keys[b - b0, i] = band_key(sig, i, b, rows)
            for b in range(b0, b1):
                _first_of_keys(keys[b - b0], skip, r, out[b], counts, pk, pi)
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


@nb.njit(inline="always", cache=True)
def _firsts_of(first, i, buf):
    """The distinct passages that ``i`` shares a band key with, sorted, in ``buf``; returns how many."""
    m = 0
    for b in range(first.shape[0]):
        v = first[b, i]
        if v >= 0:  # insertion sort: a few values at most (and less to compile than a sort)
            q = m
            while q > 0 and buf[q - 1] > v:
                buf[q] = buf[q - 1]
                q -= 1
            buf[q] = v
            m += 1
    u = 0
    for q in range(m):
        if q == 0 or buf[q] != buf[q - 1]:
            buf[u] = buf[q]
            u += 1
    return u


@nb.njit(parallel=True, cache=True)
def _candidate_pairs(first):
    n = first.shape[1]
    blocks = min(n, 256)
    starts = np.zeros(n + 1, np.int64)
    for blk in nb.prange(blocks):
        buf = np.empty(first.shape[0], np.int32)
        for i in range(blk * n // blocks, (blk + 1) * n // blocks):
            starts[i + 1] = _firsts_of(first, i, buf)
    for i in range(n):
        starts[i + 1] += starts[i]
    pi = np.empty(starts[n], np.int64)
    pj = np.empty(starts[n], np.int64)
    for blk in nb.prange(blocks):
        buf = np.empty(first.shape[0], np.int32)
        for i in range(blk * n // blocks, (blk + 1) * n // blocks):
            if starts[i + 1] > starts[i]:
                u = _firsts_of(first, i, buf)
                for q in range(u):
                    pi[starts[i] + q] = i
                    pj[starts[i] + q] = buf[q]
    return pi, pj


def candidate_pairs(first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique candidate pairs (i, j), j < i, from :func:`first_with_key`, sorted by (i, j)."""
    return _candidate_pairs(first)


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


@nb.njit(inline="always", cache=True)
def _pair_jaccard(pos, starts, vals, sig, use_sig, a, b):
    if use_sig:
        return _sig_jaccard(sig, pos[a], pos[b])
    return set_jaccard(starts, vals, pos[a], pos[b])


@nb.njit(cache=True)
def _best_class(x, nbr_starts, nbrs, canon, count, touched, pos, starts, vals, sig, use_sig, threshold, skip):
    """The class (its canonical) that ``x`` joins: among the classes of its assigned neighbours
    whose canonical passes against ``x`` (``skip``: a class not to consider), the one holding
    most of its neighbours, then the one whose canonical is nearest, then the first; -1 if none.
    Also returns the number of x's neighbours in the chosen class."""
    m = 0
    for q in range(nbr_starts[x], nbr_starts[x + 1]):
        c = canon[nbrs[q]]
        if c < 0 or nbrs[q] == x:
            continue
        if count[c] == 0:
            touched[m] = c
            m += 1
        count[c] += 1
    best, best_n, best_j = -1, 0, -1.0
    for t in range(m):
        c = touched[t]
        k = count[c]
        count[c] = 0
        if c == skip or c == x or k < best_n:
            continue
        jac = _pair_jaccard(pos, starts, vals, sig, use_sig, x, c)
        if jac < threshold:
            continue
        if k > best_n or jac > best_j or (jac == best_j and c < best):
            best, best_n, best_j = c, k, jac
    return best, best_n


@nb.njit(cache=True)
def canonical_assign(n, order, nbr_starts, nbrs, pos, starts, vals, sig, use_sig, threshold, rounds, init=None):
    """Canonical linkage over the graph of verified pairs (CSR ``nbr_starts``, ``nbrs``).

    Passages are taken in ``order``; each joins the class of an earlier-taken neighbour whose
    canonical it passes itself (Jaccard >= ``threshold``, exact from the shingle sets ``starts``,
    ``vals`` or estimated from the signature rows ``sig``; ``pos`` maps a passage to its row), else
    it founds a class and is its canonical. Then up to ``rounds`` passes move a member to the
    class of its neighbours where more of them sit, again only when it passes that class's
    canonical. Every member passes its canonical by construction. Passages already assigned in
    ``init`` (canonical >= 0) stay as they are. Returns (canonical per passage, members moved)."""
    canon = np.full(n, -1, np.int64) if init is None else init.copy()
    fixed = canon >= 0
    count = np.zeros(n, np.int64)
    touched = np.empty(max(n, 1), np.int64)
    for x in order:
        if fixed[x]:
            continue
        c, k = _best_class(x, nbr_starts, nbrs, canon, count, touched, pos, starts, vals, sig, use_sig, threshold, -1)
        canon[x] = x if c < 0 else c
    moved = 0
    for _ in range(rounds):
        changed = 0
        for x in order:
            cur = canon[x]
            if cur == x or fixed[x]:
                continue
            here = 0
            for q in range(nbr_starts[x], nbr_starts[x + 1]):
                if canon[nbrs[q]] == cur or nbrs[q] == cur:
                    here += 1
            c, k = _best_class(x, nbr_starts, nbrs, canon, count, touched, pos, starts, vals, sig, use_sig, threshold, cur)
            if c >= 0 and k > here:
                canon[x] = c
                changed += 1
        moved += changed
        if changed == 0:
            break
    return canon, moved


@nb.njit(parallel=True, cache=True)
def star_classes(comp_starts, comp_nodes, pri, pos, starts, vals, sig, use_sig, threshold, canon, rounds):
    """Classes of small components (``comp_nodes[comp_starts[k]:comp_starts[k+1]]``, corpus order)
    from the exact graph of all their pairs (Jaccard >= ``threshold``): the passage with most
    unclassed near-duplicates (priority passages first, then the first in corpus order on ties)
    becomes a canonical and takes them all, until every passage has a class; then a member moves
    to the class of another canonical it is a near-duplicate of when that class holds more of its
    near-duplicates. Writes ``canon``; returns the members moved."""
    moved = np.zeros(max(len(comp_starts) - 1, 0), np.int64)
    for k in nb.prange(len(comp_starts) - 1):
        nodes = comp_nodes[comp_starts[k] : comp_starts[k + 1]]
        s = len(nodes)
        if s == 2:  # one verified pair: the first passage (or the priority one) is the canonical
            c = nodes[1] if pri[nodes[1]] and not pri[nodes[0]] else nodes[0]
            canon[nodes[0]] = c
            canon[nodes[1]] = c
            continue
        adj = np.zeros((s, s), np.bool_)
        for a in range(s):
            for b in range(a + 1, s):
                near = _pair_jaccard(pos, starts, vals, sig, use_sig, nodes[a], nodes[b]) >= threshold
                adj[a, b] = near
                adj[b, a] = near
        center = np.full(s, -1, np.int64)
        left = s
        while left > 0:
            best, best_key = -1, -1
            for a in range(s):
                if center[a] >= 0:
                    continue
                free = 0
                for b in range(s):
                    if adj[a, b] and center[b] < 0:
                        free += 1
                key = free + (s + 1 if pri[nodes[a]] else 0)
                if key > best_key:
                    best, best_key = a, key
            center[best] = best
            left -= 1
            for b in range(s):
                if adj[best, b] and center[b] < 0:
                    center[b] = best
                    left -= 1
        for _ in range(rounds):
            changed = 0
            for a in range(s):
                c = center[a]
                if c == a:
                    continue
                here = 0
                for b in range(s):
                    if adj[a, b] and center[b] == c:
                        here += 1
                best, best_n = c, here
                for d in range(s):
                    if center[d] == d and d != c and adj[a, d]:
                        m = 0
                        for b in range(s):
                            if adj[a, b] and center[b] == d:
                                m += 1
                        if m > best_n:
                            best, best_n = d, m
                if best != c:
                    center[a] = best
                    changed += 1
            moved[k] += changed
            if changed == 0:
                break
        for a in range(s):
            canon[nodes[a]] = nodes[center[a]]
    return moved.sum()


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
    "candidate_pairs", "choose_bands", "exact_jaccard", "first_with_key", "greedy_claims",
    "s_curve", "threshold_estimate", "union_components", "verify_signatures",
]
