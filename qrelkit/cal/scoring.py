"""Scoring and selection over a sharded feature store: each shard is scored on its own (the
numba kernels below, memory-mapped rows), its best candidates are selected with the same rule as
a whole collection, and the shards' candidates are merged.

**Same batches whatever the shards.** A row's score is ``X[r] @ w + b`` summed in one thread in
column order, so it does not depend on the shard holding the row. A batch is the first ``k``
finite scores in the total order *score descending, then passage id* (ids are distinct):
:func:`select_top` returns exactly that prefix, for a whole collection or for one shard, so the
first ``k`` of the union of every shard's first ``k`` (:func:`merge_tops`, the same order) is the
first ``k`` of the collection — ties at the cut included, whichever shard they are in.

:class:`LocalScorer` scores the shards one after the other in this process;
:class:`qrelkit.cal.distributed.DaskScorer` scores them on Dask workers and merges at the client.
Both take the same arguments (:meth:`LocalScorer.top`) and give the same batches.

**Several models at once.** A CAL round trains one model per topic for each thread; the thread's
rankers share their candidates, so ``top_many`` scores up to :data:`SCORE_GROUP` models in one
pass over each shard's rows (:func:`score_shard_many`: every model's sum of a row in column order,
in float32, bit for bit the one-model kernels' scores), keeps each model's first ``k`` per shard
and merges them per model as :meth:`LocalScorer.top` does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numba as nb
import numpy as np
import pyarrow as pa

from qrelkit.cal.features import Features
from qrelkit.cal.shards import Shard
from qrelkit.jit import twins

__all__ = ["PARALLEL_MIN_NNZ", "SCORE_GROUP", "Candidates", "LocalScorer", "TopRows", "merge_tops", "model_matrix",
           "score", "score_many", "score_shard", "score_shard_many", "select_top", "shard_top", "shard_top_many"]


# --------------------------------------------------------------------------- kernels


@nb.njit(cache=True, inline="never")
def _row_wide(a, e, indices16, indices, data, w):
    """A row with a column id >= 65535: ids come from the int32 array where the 2-byte one is 0xFFFF."""
    s = np.float32(0.0)
    for j in range(a, e):
        c = np.int64(indices16[j])
        if c == 0xFFFF:
            c = np.int64(indices[j])
        s += data[j] * w[c]
    return s


@nb.njit(cache=True, inline="always")
def _row_score(r, indptr, indices16, indices, data, w, b):
    """One row's score: ``X[r] @ w + b``, summed in column order."""
    a = indptr[r]
    e = indptr[r + 1]
    if e > a and indices16[e - 1] == 0xFFFF:  # columns ascend: only the last can tell
        return _row_wide(a, e, indices16, indices, data, w) + b
    s = np.float32(0.0)
    for j in range(a, e):
        s += data[j] * w[indices16[j]]
    return s + b


@nb.njit(cache=True, inline="always")
def _is_wide(r, indptr, indices16):
    """Whether row ``r`` has a column id >= 65535 (columns ascend: only the last can tell)."""
    e = indptr[r + 1]
    return e > indptr[r] and indices16[e - 1] == 0xFFFF


@nb.njit(cache=True, inline="always")
def _four_rows(r0, r1, r2, r3, indptr, indices16, data, w, b, out, o):
    """The scores of four rows without wide ids into ``out[o:o + 4]``: each row is summed in
    column order in its own accumulator, so each sum is the one :func:`_row_score` makes, but
    the four chains of additions overlap in the processor instead of waiting on each other."""
    a0, a1, a2, a3 = indptr[r0], indptr[r1], indptr[r2], indptr[r3]
    n0, n1, n2, n3 = indptr[r0 + 1] - a0, indptr[r1 + 1] - a1, indptr[r2 + 1] - a2, indptr[r3 + 1] - a3
    m = min(min(n0, n1), min(n2, n3))
    s0 = np.float32(0.0)
    s1 = np.float32(0.0)
    s2 = np.float32(0.0)
    s3 = np.float32(0.0)
    for j in range(m):
        s0 += data[a0 + j] * w[indices16[a0 + j]]
        s1 += data[a1 + j] * w[indices16[a1 + j]]
        s2 += data[a2 + j] * w[indices16[a2 + j]]
        s3 += data[a3 + j] * w[indices16[a3 + j]]
    for j in range(m, n0):
        s0 += data[a0 + j] * w[indices16[a0 + j]]
    for j in range(m, n1):
        s1 += data[a1 + j] * w[indices16[a1 + j]]
    for j in range(m, n2):
        s2 += data[a2 + j] * w[indices16[a2 + j]]
    for j in range(m, n3):
        s3 += data[a3 + j] * w[indices16[a3 + j]]
    out[o] = s0 + b
    out[o + 1] = s1 + b
    out[o + 2] = s2 + b
    out[o + 3] = s3 + b


def _score_all_py(indptr, indices16, indices, data, w, b, out):
    n = len(indptr) - 1
    for g in nb.prange((n + 3) // 4):
        r = 4 * g
        if r + 4 <= n and not (_is_wide(r, indptr, indices16) or _is_wide(r + 1, indptr, indices16)
                               or _is_wide(r + 2, indptr, indices16) or _is_wide(r + 3, indptr, indices16)):
            _four_rows(r, r + 1, r + 2, r + 3, indptr, indices16, data, w, b, out, r)
        else:
            for q in range(r, min(n, r + 4)):
                out[q] = _row_score(q, indptr, indices16, indices, data, w, b)


def _score_rows_py(indptr, indices16, indices, data, w, b, rows, out):
    n = len(rows)
    for g in nb.prange((n + 3) // 4):
        i = 4 * g
        if i + 4 <= n and not (_is_wide(rows[i], indptr, indices16) or _is_wide(rows[i + 1], indptr, indices16)
                               or _is_wide(rows[i + 2], indptr, indices16) or _is_wide(rows[i + 3], indptr, indices16)):
            _four_rows(rows[i], rows[i + 1], rows[i + 2], rows[i + 3], indptr, indices16, data, w, b, out, i)
        else:
            for q in range(i, min(n, i + 4)):
                out[q] = _row_score(rows[q], indptr, indices16, indices, data, w, b)


# The scoring kernels read 2-byte column ids (the features' ``indices16``: columns are numbered by
# document frequency, so nearly every non-zero has an id below 65535; the others are read from the
# int32 ids): 6 instead of 8 bytes per non-zero. Each row is summed in one thread in column order,
# so the float32 scores are those of a plain CSR product; rows go four at a time, each in its own
# accumulator (the same sums, 14-17% faster on one 1M shard than one row at a time: the additions
# of one row wait on each other, those of four rows do not). The rare rows with a wide id are
# summed in a separate, never inlined function: with both loops inline, the common loop ran at
# half speed (48 vs 28 ms for 47M non-zeros on 2 cores). Parallel over rows for large matrices; serial
# twins for small ones (no thread start-up, and no waiting for a thread that another process
# holds up).
_score_all, _score_all_serial = twins(_score_all_py)
_score_rows, _score_rows_serial = twins(_score_rows_py)
PARALLEL_MIN_NNZ = 1 << 21


def score_shard(shard: Shard, w: np.ndarray, b: float = 0.0, rows: np.ndarray | None = None,
                out: np.ndarray | None = None) -> np.ndarray:
    """float32 scores of a shard's rows ``X[rows] @ w + b`` (local rows; all when None): one pass
    over the rows' non-zeros, parallel over rows when there are at least
    :data:`PARALLEL_MIN_NNZ` of them."""
    shard.hot()
    n = shard.n_rows if rows is None else len(rows)
    if out is None:
        out = np.empty(n, np.float32)
    w = np.asarray(w, np.float32)
    nnz = shard.nnz
    work = nnz if rows is None else nnz * len(rows) / max(shard.n_rows, 1)
    par = work >= PARALLEL_MIN_NNZ
    i16 = shard.compact_indices()
    if rows is None:
        (_score_all if par else _score_all_serial)(shard.indptr, i16, shard.indices, shard.data, w, np.float32(b), out)
    else:
        (_score_rows if par else _score_rows_serial)(shard.indptr, i16, shard.indices, shard.data, w, np.float32(b),
                                                     np.asarray(rows, np.int64), out)
    return out


def score(features: Features, w: np.ndarray, b: float = 0.0, rows: np.ndarray | None = None,
          out: np.ndarray | None = None) -> np.ndarray:
    """float32 scores ``X[rows] @ w + b`` (all rows when ``rows`` is None), shard by shard."""
    n = features.n_rows if rows is None else len(rows)
    if out is None:
        out = np.empty(n, np.float32)
    if rows is None:
        for s in features.shards:
            score_shard(s, w, b, None, out[s.first_row: s.end_row])
        return out
    return _by_shard(features, np.asarray(rows, np.int64), out, lambda s, local: score_shard(s, w, b, local))


def _by_shard(features: Features, rows: np.ndarray, out: np.ndarray, fn) -> np.ndarray:
    """``out[i] = fn(shard, local rows)`` for the rows of each shard (global ``rows``)."""
    sid = features.shard_of(rows)
    for k in np.unique(sid):
        sel = np.flatnonzero(sid == k)
        s = features.shards[int(k)]
        out[sel] = fn(s, rows[sel] - s.first_row)
    return out


def _score_many_py(indptr, indices16, indices, data, W, b, rows, out):
    k = W.shape[1]
    for i in nb.prange(len(rows)):
        r = rows[i]
        a = indptr[r]
        e = indptr[r + 1]
        for t in range(k):
            out[i, t] = np.float32(0.0)
        wide = e > a and indices16[e - 1] == 0xFFFF
        for j in range(a, e):
            c = np.int64(indices16[j])
            if wide and c == 0xFFFF:
                c = np.int64(indices[j])
            v = data[j]
            for t in range(k):
                out[i, t] += v * W[c, t]
        for t in range(k):
            out[i, t] += b[t]


# Several weight vectors in one pass over the rows (a CAL round's topics of one thread): each
# vector's score of a row is summed in column order in float32, as the one-vector kernels do, so
# the scores are bit for bit theirs; the rows are read once for all of them.
_score_many, _score_many_serial = twins(_score_many_py)
SCORE_GROUP = 16  # models scored per pass over a shard (memory: a shard's candidates x 16 float32)


def score_shard_many(shard: Shard, W: np.ndarray, b: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """float32 scores of several linear models over a shard's rows (local; all when None):
    ``X[rows] @ W + b`` as (rows, models), column ``t`` equal to :func:`score_shard` of
    ``W[:, t]`` and ``b[t]`` bit for bit, in one pass over the rows' non-zeros."""
    shard.hot()
    W = np.ascontiguousarray(W, np.float32)
    b = np.ascontiguousarray(b, np.float32)
    rows = np.arange(shard.n_rows, dtype=np.int64) if rows is None else np.ascontiguousarray(rows, np.int64)
    out = np.empty((len(rows), W.shape[1]), np.float32)
    work = shard.nnz * len(rows) / max(shard.n_rows, 1)
    (_score_many if work >= PARALLEL_MIN_NNZ else _score_many_serial)(
        shard.indptr, shard.compact_indices(), shard.indices, shard.data, W, b, rows, out)
    return out


def score_many(features: Features, W: np.ndarray, b: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """float32 scores of several linear models at once: ``X[rows] @ W + b`` as an array of
    (rows, models) — column ``t`` equals :func:`score` of ``W[:, t]`` and ``b[t]``, bit for bit
    — shard by shard, one pass over each shard's rows for every model."""
    W = np.ascontiguousarray(W, np.float32)
    if rows is None:
        parts = [score_shard_many(s, W, b) for s in features.shards]
        return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros((0, W.shape[1]), np.float32)
    out = np.empty((len(rows), W.shape[1]), np.float32)
    return _by_shard(features, np.asarray(rows, np.int64), out, lambda s, local: score_shard_many(s, W, b, local))


def model_matrix(models: list[tuple], n_terms: int) -> np.ndarray:
    """The (columns, models) float32 weights of ``models`` (``(w, b, cols)``: ``w`` is zero off
    ``cols``)."""
    W = np.zeros((n_terms, len(models)), np.float32)
    for t, (w, _b, cols) in enumerate(models):
        W[cols, t] = np.asarray(w)[cols]
    return W


# --------------------------------------------------------------------------- selection


def _prefilter(scores: np.ndarray, k: int) -> np.ndarray | None:
    """Positions of a subset of ``scores`` sure to hold the ``k`` largest (with every score tied
    with the k-th): those at or above a threshold read off a strided sample of the scores; None
    when that does not pay (small arrays) or the sample's guess keeps fewer than ``k``."""
    n = len(scores)
    if n < (1 << 16) or k > (n >> 8):
        return None
    stride = n >> 14
    sample = np.array(scores[::stride])
    m = len(sample)
    r = min(m - 1, 4 * -(-k * m // n) + 8)  # rank from the top: about 4k + 8 * stride scores pass
    t = np.partition(sample, m - 1 - r)[m - 1 - r]
    if not np.isfinite(t):
        return None
    idx = np.flatnonzero(scores >= t)
    return idx if len(idx) >= k else None


def select_top(scores: np.ndarray, k: int, pids: pa.Array, positions: np.ndarray | None = None) -> np.ndarray:
    """Positions (into ``scores``) of the ``k`` best finite scores, ties at the cut broken by pid,
    ordered by score descending, then pid. ``pids[i]`` is the pid of ``scores[i]`` (or of
    ``positions``' mapping: ``pids`` is indexed by ``positions[i]`` when given).

    ``numpy.argpartition`` does the selection; on large arrays it runs on the scores at or above
    a threshold taken from a strided sample (the result is the same: every score that can be
    among the best ``k``, ties included, passes the threshold)."""
    n = len(scores)
    if k <= 0 or n == 0:
        return np.zeros(0, np.int64)
    k = min(k, n)
    sub = _prefilter(scores, k)
    if sub is None:
        sub = np.arange(n)
        local = scores
    else:
        local = scores[sub]
    m = len(sub)
    top = np.argpartition(local, m - k)[m - k:]
    top = top[np.isfinite(local[top])]
    if len(top) == 0:
        return np.zeros(0, np.int64)
    thr = local[top].min()
    above = sub[top[local[top] > thr]]
    tied = sub[np.flatnonzero(local == thr)]
    need = min(k - len(above), len(tied))

    def pid_of(pos: np.ndarray) -> list[str]:
        rows = pos if positions is None else positions[pos]
        return pids.take(pa.array(np.asarray(rows, np.int64))).to_pylist()

    if len(tied) > need:
        tp = pid_of(tied)
        order = sorted(range(len(tied)), key=lambda i: tp[i])[:need]
        tied = tied[np.array(order, np.int64)]
    sel = np.concatenate([above, tied])
    sp_ = pid_of(sel)
    sc = scores[sel]
    order = sorted(range(len(sel)), key=lambda i: (-float(sc[i]), sp_[i]))
    return sel[np.array(order, np.int64)]




# --------------------------------------------------------------------------- shards and merging


@dataclass
class TopRows:
    """The best candidates in rank order: global rows, float32 scores, passage ids; the seconds
    spent scoring and selecting."""

    rows: np.ndarray
    scores: np.ndarray
    pids: list[str]
    timings: dict = field(default_factory=dict)

    @classmethod
    def empty(cls) -> "TopRows":
        return cls(np.zeros(0, np.int64), np.zeros(0, np.float32), [])


def _shard_select(shard: Shard, sc: np.ndarray, cand: np.ndarray | None, skip: np.ndarray, k: int) -> TopRows:
    """The first ``k`` of a shard's candidate scores ``sc`` (modified: skipped rows get -inf)."""
    if len(skip):
        sc[skip if cand is None else np.searchsorted(cand, skip)] = -np.inf
    sel = select_top(sc, k, shard.pids, cand)
    local = sel if cand is None else cand[sel]
    return TopRows(local + shard.first_row, sc[sel].copy(), shard.pids.take(pa.array(local)).to_pylist())


def shard_top(shard: Shard, w: np.ndarray, b: float, cand: np.ndarray | None, skip: np.ndarray, k: int,
              buf: np.ndarray | None = None) -> TopRows:
    """The first ``k`` candidates of one shard (score descending, then pid).

    ``cand``: the shard's candidate rows (local, ascending; None: every row); ``skip``: local rows
    of candidates never selected (ascending); ``buf``: float32 scratch of at least as many
    entries as candidates. Rows are returned as global rows."""
    n = shard.n_rows if cand is None else len(cand)
    if k <= 0 or n == 0:
        return TopRows.empty()
    t0 = time.perf_counter()
    sc = score_shard(shard, w, b, cand, None if buf is None else buf[:n])
    t1 = time.perf_counter()
    top = _shard_select(shard, sc, cand, skip, k)
    top.timings = {"score": t1 - t0, "select": time.perf_counter() - t1}
    return top


def shard_top_many(shard: Shard, W: np.ndarray, b: np.ndarray, cand: np.ndarray | None, skips: list[np.ndarray],
                   ks: list[int]) -> list[TopRows]:
    """:func:`shard_top` of several models (the columns of ``W``, intercepts ``b``) over the same
    candidates, scored in one pass over the shard's rows (:func:`score_shard_many`); ``skips``
    and ``ks`` per model. Each model's timings hold its share of the scoring time."""
    n = shard.n_rows if cand is None else len(cand)
    if n == 0 or not len(ks):
        return [TopRows.empty() for _ in ks]
    t0 = time.perf_counter()
    many = score_shard_many(shard, W, b, cand)
    share = (time.perf_counter() - t0) / len(ks)
    out = []
    for t, (skip, k) in enumerate(zip(skips, ks)):
        t1 = time.perf_counter()
        top = _shard_select(shard, np.ascontiguousarray(many[:, t]), cand, skip, k) if k > 0 else TopRows.empty()
        top.timings = {"score": share, "select": time.perf_counter() - t1}
        out.append(top)
    return out


def merge_tops(parts: list[TopRows], k: int) -> TopRows:
    """The first ``k`` of several shards' candidates, by score descending, then pid."""
    parts = [p for p in parts if len(p.rows)]
    if not parts:
        return TopRows.empty()
    rows = np.concatenate([p.rows for p in parts])
    sc = np.concatenate([p.scores for p in parts])
    pids = [x for p in parts for x in p.pids]
    order = sorted(range(len(rows)), key=lambda i: (-float(sc[i]), pids[i]))[:k]
    idx = np.array(order, np.int64)
    return TopRows(rows[idx], sc[idx], [pids[i] for i in order])


def merge_timed(parts: list[TopRows], k: int) -> TopRows:
    """:func:`merge_tops` of shards' parts, with their scoring and selecting seconds summed."""
    t0 = time.perf_counter()
    t_score = sum(p.timings.get("score", 0.0) for p in parts)
    t_select = sum(p.timings.get("select", 0.0) for p in parts)
    out = parts[0] if len(parts) == 1 else merge_tops(parts, k)
    out.timings = {"score": t_score, "select": t_select + time.perf_counter() - t0}
    return out


class Candidates:
    """The rows a thread may score, sample and select (None: every row), split by shard.

    ``positions`` follow the given order of ``rows`` (negatives are drawn by position); the
    shards see their candidates in ascending order."""

    def __init__(self, features: Features, rows: np.ndarray | None) -> None:
        self.rows = None if rows is None else np.ascontiguousarray(rows, np.int64)
        self.n = features.n_rows if rows is None else len(self.rows)
        starts = features.starts
        if self.rows is None:
            self._order = self._sorted = None
            self.bounds = starts
            return
        ascending = len(self.rows) < 2 or bool((self.rows[1:] > self.rows[:-1]).all())
        self._order = None if ascending else np.argsort(self.rows, kind="stable")
        self._sorted = self.rows if ascending else self.rows[self._order]
        self.bounds = np.searchsorted(self._sorted, starts)

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """Candidate position of each row (-1 for rows that are not candidates)."""
        rows = np.asarray(rows, np.int64)
        if self.rows is None:
            return rows.copy()
        i = np.searchsorted(self._sorted, rows)
        i[i == len(self._sorted)] = 0
        ok = (len(self._sorted) > 0) & (self._sorted[i] == rows) if len(self._sorted) else np.zeros(len(rows), bool)
        pos = i if self._order is None else self._order[i]
        return np.where(ok, pos, -1).astype(np.int64)

    def rows_at(self, pos: np.ndarray) -> np.ndarray:
        """The rows at candidate positions."""
        pos = np.asarray(pos, np.int64)
        return pos.copy() if self.rows is None else self.rows[pos]

    def shard_rows(self, s: int, first_row: int) -> np.ndarray | None:
        """Local candidate rows of shard ``s`` (ascending; None: all of its rows)."""
        if self._sorted is None:
            return None
        return self._sorted[self.bounds[s]: self.bounds[s + 1]] - first_row


def split_rows(features: Features, rows: np.ndarray) -> list[np.ndarray]:
    """Ascending global rows -> the local rows of each shard."""
    starts = features.starts
    cut = np.searchsorted(rows, starts)
    return [rows[cut[s]: cut[s + 1]] - starts[s] for s in range(len(features.shards))]


class LocalScorer:
    """Scores a thread's candidates shard by shard in this process (memory-mapped shards, the
    numba kernels using every core) and merges the shards' best. One scorer may serve many
    rankers: it holds one score buffer of a shard's size."""

    def __init__(self, features: Features) -> None:
        self.features = features
        self._buf = np.empty(0, np.float32)

    def top(self, w: np.ndarray, b: float, cols: np.ndarray, cands: Candidates, skip_rows: np.ndarray,
            k: int) -> TopRows:
        """The first ``k`` candidates (score descending, then pid) under the model ``w, b``
        (``cols``: the columns it uses; ``w`` is zero elsewhere), never selecting ``skip_rows``
        (ascending global rows of candidates)."""
        f = self.features
        need = max((s.n_rows for s in f.shards), default=0)
        if len(self._buf) < need:
            self._buf = np.empty(need, np.float32)
        parts = [shard_top(sh, w, b, cands.shard_rows(s, sh.first_row), skip, k, self._buf)
                 for s, (sh, skip) in enumerate(zip(f.shards, split_rows(f, skip_rows)))]
        return merge_timed(parts, k)

    def top_many(self, models: list[tuple], cands: Candidates, skips: list[np.ndarray], ks: list[int]) -> list[TopRows]:
        """:meth:`top` of several models ``(w, b, cols)`` over the same candidates (``skips`` and
        ``ks`` per model): every shard's rows are read once for all of them (at most
        :data:`SCORE_GROUP` at a time). The same results as :meth:`top` model by model."""
        if len(models) == 1:
            (w, b, cols), = models
            return [self.top(w, b, cols, cands, skips[0], ks[0])]
        out: list[TopRows] = []
        f = self.features
        for g in range(0, len(models), SCORE_GROUP):
            group = models[g: g + SCORE_GROUP]
            W = model_matrix(group, f.n_terms)
            b = np.array([m[1] for m in group], np.float32)
            split = [split_rows(f, np.asarray(sk, np.int64)) for sk in skips[g: g + SCORE_GROUP]]
            per_shard = [shard_top_many(sh, W, b, cands.shard_rows(s, sh.first_row), [sp[s] for sp in split],
                                        ks[g: g + SCORE_GROUP]) for s, sh in enumerate(f.shards)]
            out += [merge_timed([tops[t] for tops in per_shard], ks[g + t]) for t in range(len(group))]
        return out

    def close(self) -> None:
        """Nothing to release (for symmetry with the Dask scorer)."""
