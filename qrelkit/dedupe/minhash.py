"""MinHash signatures, bit-for-bit those of ``datasketch.MinHash`` (scheme ``affine32``, the
datasketch 2.x default) with ``hashfunc=qrelkit.dedupe.tokenize.shingle_hash``.

For a shingle hash ``h`` (32 bits) and permutation ``k``: ``fmix32(h) * a_k + b_k mod 2^32``;
the signature holds the minimum over the passage's shingles. ``a`` and ``b`` come from
``numpy.random.RandomState(seed)`` exactly as datasketch draws them. A passage without words has
the empty signature (all ``2^32 - 1``).
"""

from __future__ import annotations

import numba as nb
import numpy as np
import pyarrow as pa

from qrelkit.dedupe.tokenize import (
    SHINGLE_SEED,
    Normalization,
    mix64,
    next_word,
    byte_classes,
    byte_codes,
    lower_table,
    passage_words,
    string_buffers,
    word_count,
)
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.dedupe.params import DedupeParams

EMPTY = np.uint32(0xFFFFFFFF)
MAX_SHINGLE = 16


def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) as datasketch's affine32 scheme draws them."""
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    return a, b


@nb.njit(inline="always", cache=True)
def _fmix32(h):
    # numba widens integer arithmetic to 64 bits: truncate after every multiply
    h = np.uint32(h ^ (h >> np.uint32(16)))
    h = np.uint32(h * np.uint32(0x85EBCA6B))
    h = np.uint32(h ^ (h >> np.uint32(13)))
    h = np.uint32(h * np.uint32(0xC2B2AE35))
    return np.uint32(h ^ (h >> np.uint32(16)))


@nb.njit(inline="always", cache=True)
def _update(cur, hv32, a, b):
    x = _fmix32(hv32)
    for k in range(a.shape[0]):  # branch-free so that LLVM vectorizes it
        cur[k] = min(cur[k], np.uint32(a[k] * x + b[k]))


@nb.njit(inline="always", cache=True)
def _shingle(ring, pos, count, n):
    """Hash of the last ``count`` words in the ring (oldest first)."""
    h = SHINGLE_SEED
    for j in range(count):
        h = mix64(h ^ ring[(pos - count + j) % n])
    return np.uint32(h >> np.uint64(32))


@nb.njit(inline="always", cache=True)
def _passage_shingles(data, i, end, n, cls, low, ring, out, k):
    """Write the shingle hashes of the passage in data[i:end] to out[k:]; returns (end of what
    was written, number of words)."""
    count = 0
    while True:
        i, h = next_word(data, i, end, cls, low)
        if i < 0:
            break
        ring[count % n] = h
        count += 1
        if count >= n:
            out[k] = _shingle(ring, count, n, n)
            k += 1
    if 0 < count < n:
        out[k] = _shingle(ring, count, count, n)
        k += 1
    return k, count


@nb.njit(inline="always", cache=True)
def _shingle_values(words, count, n, xs, acc):
    """The MinHash inputs of a passage of ``count`` words (hashes ``words``): its shingles'
    hashes (:func:`_shingle`) after the 32-bit finalizer, written to ``xs``; returns how many
    (one shingle of all the words when there are fewer than ``n``, none without words). The
    chains of all shingles advance together, a word at a time (``acc``): a loop that vectorizes."""
    if count == 0:
        return 0
    w = min(count, n)
    m = count - w + 1
    for q in range(m):
        acc[q] = mix64(SHINGLE_SEED ^ words[q])
    for j in range(1, w):
        for q in range(m):
            acc[q] = mix64(acc[q] ^ words[q + j])
    for q in range(m):
        xs[q] = _fmix32(np.uint32(acc[q] >> np.uint64(32)))
    return m


@nb.njit(inline="always", cache=True)
def _min_hash(xs, m, a, b, cur):
    """``cur[k]`` = the minimum over ``xs[0:m]`` of ``a[k] * x + b[k] mod 2^32`` (EMPTY when
    ``m == 0``). The loop over permutations is the inner one: it vectorizes whatever ``m``; four
    shingles a round, so that ``cur`` is read and written once for four."""
    K = a.shape[0]
    for k in range(K):
        cur[k] = EMPTY
    q = 0
    while q + 4 <= m:
        x0, x1, x2, x3 = xs[q], xs[q + 1], xs[q + 2], xs[q + 3]
        for k in range(K):
            ak, bk = a[k], b[k]
            cur[k] = min(cur[k], min(np.uint32(ak * x0 + bk), np.uint32(ak * x1 + bk)),
                         min(np.uint32(ak * x2 + bk), np.uint32(ak * x3 + bk)))
        q += 4
    while q < m:
        x = xs[q]
        for k in range(K):
            cur[k] = min(cur[k], np.uint32(a[k] * x + b[k]))
        q += 1


@nb.njit(parallel=True, nogil=True, cache=True)
def _signatures(data, offsets, n, cls, tab, a, b, sig, nwords, keep, sh_cap, sh_vals, sh_count, block_end):
    """Signatures of the passages (CSR ``data``, ``offsets``), in ``len(block_end)`` blocks of
    passages, each with its own buffers. With ``keep``, block ``k``'s shingles go one passage
    after the other from ``sh_vals[sh_cap[lo]]`` (its first passage's slot) to ``block_end[k]``."""
    npass = len(offsets) - 1
    K = a.shape[0]
    blocks = len(block_end)
    for blk in nb.prange(blocks):
        lo, hi = blk * npass // blocks, (blk + 1) * npass // blocks
        cap = 0
        for p in range(lo, hi):
            cap = max(cap, offsets[p + 1] - offsets[p])
        codes = np.empty(cap, np.uint16)
        words = np.empty(cap // 2 + 2, np.uint64)  # at most one word per two bytes
        acc = np.empty(cap // 2 + 2, np.uint64)
        own = np.empty(0 if keep else cap // 2 + 2, np.uint32)
        cur = np.empty(K, np.uint32)
        at = sh_cap[lo] if keep else 0
        for p in range(lo, hi):
            count = passage_words(data, offsets[p], offsets[p + 1], cls, tab, codes, words)
            # kept shingles go straight to sh_vals: at <= sh_cap[p], so they stay in the block's slots
            xs = sh_vals[at : at + sh_cap[p + 1] - sh_cap[p]] if keep else own
            m = _shingle_values(words, count, n, xs, acc)
            nwords[p] = count
            if keep:
                sh_count[p] = m
                at += m
            _min_hash(xs, m, a, b, cur)
            for k in range(K):
                sig[p, k] = cur[k]
        block_end[blk] = at


@declared_defaults(DedupeParams)
def signatures(
    texts: pa.Array | pa.ChunkedArray,
    *,
    num_perm: int = AS_DECLARED,
    seed: int = AS_DECLARED,
    ngram: int = AS_DECLARED,
    norm: Normalization = Normalization(),
    perms: tuple[np.ndarray, np.ndarray] | None = None,
    out: np.ndarray | None = None,
    keep_shingles: bool = False,
    scratch: list | None = None,
):
    """MinHash signatures ``uint32[n, num_perm]`` and word counts ``int64[n]`` of passages
    (written into ``out`` when given: a C-contiguous ``uint32[n, num_perm]`` view).

    With ``keep_shingles`` also the passages' shingles as ``(starts, values)``: passage ``p``'s
    shingle hashes, after the 32-bit finalizer that MinHash applies (a bijection, so Jaccard
    similarities are those of the shingle sets), unsorted and with repeats, in
    ``values[starts[p]:starts[p+1]]`` (:func:`sorted_sets` makes sets of them). ``scratch``: a
    list that holds a work buffer from one call to the next."""
    if not 1 <= ngram <= MAX_SHINGLE:
        raise ValueError(f"ngram must be between 1 and {MAX_SHINGLE}")
    a, b = perms if perms is not None else permutations(num_perm, seed)
    data, offsets = string_buffers(texts, norm)
    n = len(offsets) - 1
    sig = np.empty((n, len(a)), dtype=np.uint32) if out is None else out
    nwords = np.zeros(n, np.int64)
    if keep_shingles:
        sh_cap = np.zeros(n + 1, np.int64)
        np.cumsum(np.diff(offsets) // 2 + 2, out=sh_cap[1:])
        if scratch is not None and scratch and len(scratch[0]) >= sh_cap[-1]:
            sh_vals = scratch[0]  # reused across calls: its pages are already mapped
        else:
            sh_vals = np.empty(int(sh_cap[-1]), np.uint32)
            if scratch is not None:
                scratch[:] = [sh_vals]
        sh_count = np.zeros(n, np.int64)
    else:
        sh_cap, sh_vals, sh_count = np.zeros(1, np.int64), np.zeros(0, np.uint32), np.zeros(0, np.int64)
    blocks = min(n, 256)  # units of work for the threads
    block_end = np.zeros(blocks, np.int64)
    _signatures(data, offsets, ngram, byte_classes(norm), byte_codes(norm), a, b, sig, nwords,
                keep_shingles, sh_cap, sh_vals, sh_count, block_end)
    if not keep_shingles:
        return sig, nwords
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(sh_count, out=starts[1:])
    first = sh_cap[np.arange(blocks) * n // blocks]
    vals = np.concatenate([sh_vals[s:e] for s, e in zip(first, block_end)] or [np.zeros(0, np.uint32)])
    return sig, nwords, (starts, vals)


@nb.njit(parallel=True, cache=True)
def _gather_sorted(starts, vals, rows, out_starts, out):
    for q in nb.prange(len(rows)):
        seg = out[out_starts[q] : out_starts[q + 1]]
        seg[:] = vals[starts[rows[q]] : starts[rows[q] + 1]]
        seg.sort()


def sorted_sets(starts: np.ndarray, vals: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique values of the segments ``rows`` of a CSR ``(starts, vals)``, as a CSR in the
    order of ``rows``."""
    rows = np.asarray(rows, np.int64)
    out_starts = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(starts[rows + 1] - starts[rows], out=out_starts[1:])
    out = np.empty(int(out_starts[-1]), np.uint32)
    _gather_sorted(starts, vals, rows, out_starts, out)
    return _unique_segments(out_starts, out)


@nb.njit(parallel=True, cache=True)
def _count_shingles(data, offsets, rows, n, cls, low):
    out = np.zeros(len(rows), np.int64)
    for q in nb.prange(len(rows)):
        p = rows[q]
        count = word_count(data, offsets[p], offsets[p + 1], cls, low)
        out[q] = max(count - n + 1, 1) if count > 0 else 0
    return out


@nb.njit(parallel=True, cache=True)
def _fill_shingles(data, offsets, rows, n, cls, low, starts, out):
    for q in nb.prange(len(rows)):
        p = rows[q]
        ring = np.empty(n, np.uint64)
        _passage_shingles(data, offsets[p], offsets[p + 1], n, cls, low, ring, out, starts[q])
        seg = out[starts[q] : starts[q + 1]]
        seg.sort()


@declared_defaults(DedupeParams)
def shingle_sets(
    texts: pa.Array | pa.ChunkedArray,
    rows: np.ndarray,
    *,
    ngram: int = AS_DECLARED,
    norm: Normalization = Normalization(),
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique 32-bit shingle hashes of the passages ``rows``: ``(starts, values)`` with the
    set of ``rows[q]`` in ``values[starts[q]:starts[q+1]]``."""
    data, offsets = string_buffers(texts, norm)
    cls, low = byte_classes(norm), lower_table(norm)
    rows = np.asarray(rows, np.int64)
    counts = _count_shingles(data, offsets, rows, ngram, cls, low)
    starts = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    vals = np.empty(int(starts[-1]), np.uint32)
    _fill_shingles(data, offsets, rows, ngram, cls, low, starts, vals)
    return _unique_segments(starts, vals)


@nb.njit(cache=True)
def _unique_segments(starts, vals):
    out = np.empty_like(vals)
    new_starts = np.zeros_like(starts)
    k = 0
    for q in range(len(starts) - 1):
        for t in range(starts[q], starts[q + 1]):
            if t == starts[q] or vals[t] != vals[t - 1]:
                out[k] = vals[t]
                k += 1
        new_starts[q + 1] = k
    return new_starts, out[:k]
