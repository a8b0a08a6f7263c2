"""The CAL loop: one iteration = train, score every candidate, select the next batch.

Per topic and thread (docs/protocol.md section 1, step 4; Cormack and Grossman's BMI):

* **training set** — the judged passages the thread may see, binarized by the config
  (``[labels] passage_relevant``, 2 and 3 by default); the query text as one synthetic relevant
  document (featurized with the stored vocabulary and idf); ``negatives`` (100) random unjudged
  candidates labelled non-relevant, drawn anew every iteration from a generator seeded by
  ``(seed, topic, thread, iteration)``;
* **model** — scikit-learn's ``LogisticRegression`` (liblinear, L2, ``C``) fitted on only the
  columns that occur in the training rows (the weights of all other columns would be 0 anyway);
* **scoring** — one float32 sparse matrix-vector product over the candidates (a numba kernel,
  parallel over rows; no float64 copy of the matrix as ``predict_proba`` would make). Scores are
  the model's decision values, which order passages as its probabilities do;
* **selection** — ``numpy.argpartition`` for the best ``k`` candidates that are not judged or
  issued yet; ties at the cut are broken by passage id, and the batch is sorted by score
  descending, then passage id: the batch is a function of the scores and ids only.

**Candidates.** Non-canonical members of near-duplicate classes are never candidates (only
canonical passages are judged, TREC 2022), so they are neither scored nor sampled as negatives;
the fractional thread's candidates are the canonical passages of the fractional collection.

**Threads** (:data:`THREADS`):

``fractional``
    candidates: the fractional collection; training: the thread's own judgments and the initial
    (pool) judgments, of passages inside the fractional collection.
``local``
    candidates: the whole corpus; training: the thread's own judgments and the initial judgments.
``all``
    candidates: the whole corpus; training: every judgment of the topic.

No passage is judged twice for a topic. When a thread's ranking reaches a passage that another
thread has already judged, the passage is *encountered*: it joins the thread's batch (and so its
view, and its training set from then on) with the existing judgment, at no judging cost, and the
batch still brings ``k`` passages that need judging ("the judgments given to CAL contained only
passages encountered in this thread", TREC 2022). Passages issued but not judged yet are skipped.

**Batch sizes** (:func:`batch_size`): ``batch_size`` (25) per iteration; the fractional thread uses
``fractional_batch_size_later`` (50) from iteration ``fractional_later_from`` (2) on; or BMI's
growing schedule (``schedule="bmi"``: 1, then ``B + ceil(B / 10)``).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numba as nb
import numpy as np
import pandas as pd
import pyarrow as pa
import scipy.sparse as sp

from qrelkit.cal.features import Features, SparseRows
from qrelkit.cal.stopping import _in_view, binarize
from qrelkit.cal.store import combine_log
from qrelkit.config import default as config_default
from qrelkit.errors import InputError
from qrelkit.jit import twins
from qrelkit.pooler.fractional import fractional_ids

THREADS = ("fractional", "local", "all")
SCHEDULES = ("fixed", "bmi")


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class CalParams:
    """Everything that decides a CAL batch (with the features and the judgments)."""

    # defaults: the configuration schema's [cal] (and [labels] passage_relevant), qrelkit.config
    batch_size: int = config_default("cal", "batch_size")
    fractional_batch_size_later: int = config_default("cal", "fractional_batch_size_later")
    fractional_later_from: int = config_default("cal", "fractional_later_from")
    schedule: str = config_default("cal", "schedule")
    negatives: int = config_default("cal", "negatives")
    C: float = config_default("cal", "C")
    class_weight: str | None = None if config_default("cal", "class_weight") == "none" else config_default("cal", "class_weight")
    query_document: bool = config_default("cal", "query_document")
    relevant: tuple[int, ...] = tuple(config_default("labels", "passage_relevant"))
    seed: int = config_default("cal", "seed")

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise InputError("bad-option", f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.batch_size < 1 or self.fractional_batch_size_later < 1:
            raise InputError("bad-option", "batch sizes must be at least 1")
        if self.fractional_later_from < 1:
            raise InputError("bad-option", "fractional_later_from must be at least 1")
        if self.negatives < 0:
            raise InputError("bad-option", "negatives must not be negative")
        if not self.C > 0:
            raise InputError("bad-option", "C must be positive")
        if self.class_weight not in (None, "balanced"):
            raise InputError("bad-option", f"class_weight must be none or 'balanced', got {self.class_weight!r}")

    @classmethod
    def from_config(cls, cfg: Mapping | None = None, **overrides: Any) -> "CalParams":
        """Values from a config's ``[cal]`` section (and ``[labels] passage_relevant``), then
        ``overrides`` that are not None."""
        kw: dict[str, Any] = {}
        if cfg is not None:
            cal = dict(cfg.get("cal", {}) or {})
            for k in ("batch_size", "fractional_batch_size_later", "fractional_later_from", "schedule", "negatives",
                      "C", "class_weight", "query_document", "seed"):
                if k in cal:
                    kw[k] = cal[k]
            rel = (cfg.get("labels", {}) or {}).get("passage_relevant")
            if rel is not None:
                kw["relevant"] = tuple(int(x) for x in rel)
        kw.update({k: v for k, v in overrides.items() if v is not None})
        if "relevant" in kw:
            kw["relevant"] = tuple(int(x) for x in kw["relevant"])
        for k in ("batch_size", "fractional_batch_size_later", "fractional_later_from", "negatives", "seed"):
            if k in kw:
                kw[k] = int(kw[k])
        if "C" in kw:
            kw["C"] = float(kw["C"])
        if kw.get("class_weight") in ("", "none", "None"):
            kw["class_weight"] = None
        return cls(**kw)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["relevant"] = list(self.relevant)
        return d


def batch_size(params: CalParams, thread: str, iteration: int) -> int:
    """Size of CAL batch number ``iteration`` (1-based) of a thread."""
    if iteration < 1:
        raise ValueError("iterations are numbered from 1")
    if params.schedule == "bmi":
        b = 1
        for _ in range(iteration - 1):
            b += math.ceil(b / 10)
        return b
    if thread == "fractional" and iteration >= params.fractional_later_from:
        return params.fractional_batch_size_later
    return params.batch_size


def key64(text: str) -> int:
    """A stable 64-bit key of a text (BLAKE2b, 8 bytes, little-endian): seeds that depend on a
    topic or thread name, the same in every process and Python version."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def iteration_seed(seed: int, topic: str, thread: str, iteration: int) -> np.random.SeedSequence:
    """The seed sequence of one iteration: independent of run order and of other topics."""
    return np.random.SeedSequence([int(seed) & (2**63 - 1), key64(str(topic)), key64(str(thread)), int(iteration)])


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


def _score_all_py(indptr, indices16, indices, data, w, b, out):
    for r in nb.prange(len(indptr) - 1):
        out[r] = _row_score(r, indptr, indices16, indices, data, w, b)


def _score_rows_py(indptr, indices16, indices, data, w, b, rows, out):
    for i in nb.prange(len(rows)):
        out[i] = _row_score(rows[i], indptr, indices16, indices, data, w, b)


# The scoring kernels read 2-byte column ids (the features' ``indices16``: columns are numbered by
# document frequency, so nearly every non-zero has an id below 65535; the others are read from the
# int32 ids): 6 instead of 8 bytes per non-zero. Each row is summed in one thread in column order,
# so the float32 scores are those of a plain CSR product. The rare rows with a wide id are summed
# in a separate, never inlined function: with both loops inline, the common loop ran at half
# speed (48 vs 28 ms for 47M non-zeros on 2 cores). Parallel over rows for large matrices; serial
# twins for small ones (no thread start-up, and no waiting for a thread that another process
# holds up).
_score_all, _score_all_serial = twins(_score_all_py)
_score_rows, _score_rows_serial = twins(_score_rows_py)
PARALLEL_MIN_NNZ = 1 << 21


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
# the scores are bit for bit theirs; the matrix is read once for all of them.
_score_many, _score_many_serial = twins(_score_many_py)


def score_many(features: Features, W: np.ndarray, b: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """float32 scores of several linear models at once: ``X[rows] @ W + b`` as an array of
    (rows, models) — column ``t`` equals :func:`score` of ``W[:, t]`` and ``b[t]``, bit for bit
    — in one pass over the rows' non-zeros (parallel over rows for large matrices)."""
    W = np.ascontiguousarray(W, np.float32)
    b = np.ascontiguousarray(b, np.float32)
    rows = np.arange(features.n_rows, dtype=np.int64) if rows is None else np.ascontiguousarray(rows, np.int64)
    out = np.empty((len(rows), W.shape[1]), np.float32)
    work = features.nnz * len(rows) / max(features.n_rows, 1)
    (_score_many if work >= PARALLEL_MIN_NNZ else _score_many_serial)(
        features.indptr, features.compact_indices(), features.indices, features.data, W, b, rows, out)
    return out


def score(features: Features, w: np.ndarray, b: float = 0.0, rows: np.ndarray | None = None,
          out: np.ndarray | None = None) -> np.ndarray:
    """float32 scores ``X[rows] @ w + b`` (all rows when ``rows`` is None): one pass over the
    rows' non-zeros, parallel over rows when there are at least :data:`PARALLEL_MIN_NNZ` of them."""
    n = features.n_rows if rows is None else len(rows)
    if out is None:
        out = np.empty(n, np.float32)
    w = np.asarray(w, np.float32)
    work = features.nnz if rows is None else features.nnz * len(rows) / max(features.n_rows, 1)
    par = work >= PARALLEL_MIN_NNZ
    i16 = features.compact_indices()
    if rows is None:
        (_score_all if par else _score_all_serial)(features.indptr, i16, features.indices, features.data, w,
                                                   np.float32(b), out)
    else:
        (_score_rows if par else _score_rows_serial)(features.indptr, i16, features.indices, features.data, w,
                                                     np.float32(b), rows, out)
    return out


# --------------------------------------------------------------------------- training


@nb.njit(cache=True)
def _local_columns(indices, scratch):
    """Renumber the column ids that occur 0.. in ascending order (so sorted rows stay sorted);
    ``scratch`` holds -1 everywhere and is restored. Returns (local ids, the global column of
    each local id)."""
    cols = np.empty(len(indices), np.int64)
    n = 0
    for j in range(len(indices)):
        c = indices[j]
        if scratch[c] < 0:
            scratch[c] = 0
            cols[n] = c
            n += 1
    cols = np.sort(cols[:n])
    for i in range(n):
        scratch[cols[i]] = i
    local = np.empty(len(indices), np.int32)
    for j in range(len(indices)):
        local[j] = scratch[indices[j]]
    for i in range(n):
        scratch[cols[i]] = -1
    return local, cols


def _train_matrix(block: SparseRows, n_terms: int, scratch: np.ndarray | None = None):
    """(csr over the block's own columns, those columns)."""
    if scratch is None:
        scratch = np.full(n_terms, -1, np.int32)
    local, cols = _local_columns(block.indices, scratch)
    m = sp.csr_matrix((block.data, local, block.indptr.astype(np.int32)), shape=(block.n_rows, max(len(cols), 1)))
    m.has_sorted_indices = True  # feature rows are sorted by column; the renumbering keeps the order
    return m, cols


def fit_weights(block: SparseRows, labels: np.ndarray, *, C: float = 1.0, class_weight: str | None = None,
                random_state: int = 0,
                n_terms: int | None = None, out: np.ndarray | None = None,
                scratch: np.ndarray | None = None) -> tuple[np.ndarray, float, np.ndarray]:
    """Fit logistic regression on the training rows' own columns.

    Returns ``(w, b, cols)``: float32 weights over all ``n_terms`` columns (zero outside
    ``cols``), the intercept, and the columns that were fitted. With ``out`` the weights are
    written into that buffer, which must be zero outside the columns it was last given;
    ``scratch`` is an int32 buffer of ``n_terms`` entries, all -1 (it is restored).
    """
    from sklearn.linear_model import LogisticRegression  # lazy: scikit-learn takes ~1-3 s to import

    n_terms = int(n_terms if n_terms is not None else (int(block.indices.max()) + 1 if len(block.indices) else 1))
    X, cols = _train_matrix(block, n_terms, scratch)
    y = np.asarray(labels, dtype=np.int8)
    w = out if out is not None else np.zeros(n_terms, np.float32)
    if len(np.unique(y)) < 2:  # one class only: rank by the centroid of the positive rows
        coef = np.asarray(X[y == 1].mean(axis=0)).ravel() if (y == 1).any() else np.zeros(X.shape[1])
        b = 0.0
    else:
        from sklearn import config_context  # lazy, as above

        model = LogisticRegression(C=C, class_weight=class_weight, solver="liblinear", random_state=random_state,
                                   max_iter=1000)
        # the inputs are built here (finite, valid): skip scikit-learn's checks, a third of a fit
        with config_context(assume_finite=True, skip_parameter_validation=True):
            model.fit(X, y)
        coef = model.coef_.ravel()
        b = float(model.intercept_[0])
    if len(cols):
        w[cols] = coef[: len(cols)].astype(np.float32)
    return w, b, cols


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


# --------------------------------------------------------------------------- one topic, one thread


@dataclass
class Batch:
    """One CAL batch: passages (rows and pids) in rank order with their scores; ``new`` marks the
    passages that need judging (the others were encountered: judged before in another thread)."""

    topic: str
    thread: str
    iteration: int
    rows: np.ndarray
    pids: list[str]
    scores: np.ndarray
    new: np.ndarray | None = None
    n_train: int = 0
    n_relevant: int = 0
    n_negatives: int = 0
    n_columns: int = 0
    timings: dict = field(default_factory=dict)
    batch_id: str | None = None

    def __post_init__(self) -> None:
        if self.new is None:
            self.new = np.ones(len(self.rows), bool)

    def table(self) -> pa.Table:
        n = len(self.pids)
        return pa.table({
            "qid": pa.array([self.topic] * n, pa.string()),
            "thread": pa.array([self.thread] * n, pa.string()),
            "iteration": pa.array([self.iteration] * n, pa.int32()),
            "rank": pa.array(np.arange(1, n + 1), pa.int32()),
            "docid": pa.array(self.pids, pa.string()),
            "score": pa.array(np.asarray(self.scores, np.float64), pa.float64()),
            "new": pa.array(np.asarray(self.new, bool)),
        })


class CalRanker:
    """CAL for one topic over a fixed candidate set: call :meth:`next_batch` with the judgments
    as they stand. Holds the buffers (weights, scores) so that iterations allocate little.

    ``candidates``: rows that may be scored, sampled and selected (None: every row; with the
    features' near-duplicate classes, every canonical row). See :func:`candidate_rows`.
    ``positions``: another ranker's :attr:`position_map` over the same candidates, shared
    instead of built again (an array over every row).
    """

    def __init__(self, features: Features, query: str, *, topic: str = "", thread: str = "all",
                 candidates: np.ndarray | None = None, params: CalParams = CalParams(),
                 positions: np.ndarray | None = None) -> None:
        self.features = features
        self.topic = str(topic)
        self.thread = thread
        self.params = params
        self.qvec = features.featurize([query]) if params.query_document else None
        if candidates is None and features.classes is not None:
            candidates = candidate_rows(features)
        self.candidates = None if candidates is None else np.ascontiguousarray(candidates, np.int64)
        n = features.n_rows if self.candidates is None else len(self.candidates)
        self.n_candidates = n
        self._scores = np.empty(n, np.float32)
        self._w = np.zeros(features.n_terms, np.float32)
        self._scratch = np.full(features.n_terms, -1, np.int32)
        self._last_cols = np.zeros(0, np.int64)
        if self.candidates is not None and positions is not None:
            self._pos = positions  # shared by the rankers over these candidates (read only)
        elif self.candidates is not None:
            self._pos = np.full(features.n_rows, -1, np.int32 if features.n_rows < 2**31 else np.int64)
            self._pos[self.candidates] = np.arange(n)
        else:
            self._pos = None

    @property
    def position_map(self) -> np.ndarray | None:
        """Candidate position of every row (-1 for rows that are not candidates; None: every row
        is one), to share with rankers over the same candidates."""
        return self._pos

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """Candidate positions of rows (-1 for rows that are not candidates)."""
        rows = np.asarray(rows, np.int64)
        if self._pos is None:
            return rows.copy()
        return self._pos[rows].astype(np.int64)

    def sample_negatives(self, rng: np.random.Generator, excluded_pos: np.ndarray, m: int) -> np.ndarray:
        """``m`` distinct random candidate rows that are not excluded, in draw order."""
        n = self.n_candidates
        if m <= 0 or n == 0:
            return np.zeros(0, np.int64)
        excl = np.unique(excluded_pos[excluded_pos >= 0])
        free = n - len(excl)
        if free <= 0:
            return np.zeros(0, np.int64)
        m = min(m, free)
        if free < 4 * m:  # dense: draw from the complement
            mask = np.ones(n, bool)
            mask[excl] = False
            pos = rng.choice(np.flatnonzero(mask), size=m, replace=False)
        else:
            pos = np.zeros(0, np.int64)
            while len(pos) < m:
                draw = rng.integers(0, n, size=2 * m + 8)
                draw = draw[~np.isin(draw, excl)]
                allp = np.concatenate([pos, draw])
                _, first = np.unique(allp, return_index=True)
                pos = allp[np.sort(first)]
            pos = pos[:m]
        return pos if self.candidates is None else self.candidates[pos]

    def next_batch(self, train_rows: np.ndarray, train_relevant: np.ndarray, skip_rows: np.ndarray, k: int,
                   iteration: int, known_rows: np.ndarray | None = None) -> Batch:
        """The next ``k`` passages to judge.

        ``train_rows``/``train_relevant``: the judged rows this thread trains on (its view) and
        their binary labels; ``skip_rows``: rows never selected (the thread's view, and passages
        issued but not judged yet); ``known_rows``: rows already judged elsewhere (in other
        threads) — when the ranking reaches one it is *encountered*: it joins the batch (in rank
        order) with its existing judgment and does not count towards ``k``. Random negatives come
        from candidates in neither set. ``iteration``: the 1-based iteration number (seeds the
        negatives). ``Batch.new`` marks the passages that need judging.

        The same as :meth:`train`, :func:`score` of its model over the candidates, then
        :meth:`choose` (which is how several rankers share one scoring pass, :func:`score_many`).
        """
        fit = self.train(train_rows, train_relevant, skip_rows, iteration, known_rows)
        t0 = time.perf_counter()
        sc = score(self.features, fit.w, fit.b, self.candidates, out=self._scores)
        fit.timings["score"] = time.perf_counter() - t0
        return self.choose(fit, sc, k)

    def train(self, train_rows: np.ndarray, train_relevant: np.ndarray, skip_rows: np.ndarray, iteration: int,
              known_rows: np.ndarray | None = None) -> "Fit":
        """The model of the next batch (see :meth:`next_batch` for the arguments): random
        negatives drawn, logistic regression fitted; scoring and choosing come after."""
        t0 = time.perf_counter()
        p = self.params
        train_rows = np.asarray(train_rows, np.int64)
        train_relevant = np.asarray(train_relevant, bool)
        skip_pos = self.positions(np.asarray(skip_rows, np.int64)) if len(skip_rows) else np.zeros(0, np.int64)
        skip_pos = skip_pos[skip_pos >= 0]
        known_pos = np.zeros(0, np.int64)
        if known_rows is not None and len(known_rows):
            known_pos = self.positions(np.asarray(known_rows, np.int64))
            known_pos = np.setdiff1d(known_pos[known_pos >= 0], skip_pos)
        ss = iteration_seed(p.seed, self.topic, self.thread, iteration)
        rng = np.random.default_rng(ss)
        neg = self.sample_negatives(rng, np.concatenate([skip_pos, known_pos]), p.negatives)
        rows = np.concatenate([train_rows, neg])
        y = np.concatenate([train_relevant.astype(np.int8), np.zeros(len(neg), np.int8)])
        block = self.features.rows(rows)
        if self.qvec is not None:
            block = block.stack(self.qvec)
            y = np.concatenate([y, np.ones(1, np.int8)])
        t1 = time.perf_counter()
        self._w[self._last_cols] = 0.0
        w, b, cols = fit_weights(block, y, C=p.C, class_weight=p.class_weight, random_state=int(ss.generate_state(1)[0] & 0x7FFFFFFF),
                                 n_terms=self.features.n_terms, out=self._w, scratch=self._scratch)
        self._last_cols = cols
        t2 = time.perf_counter()
        return Fit(w=w, b=b, cols=cols, iteration=iteration, skip_pos=skip_pos, known_pos=known_pos, n_train=len(y),
                   n_relevant=int(y.sum()), n_negatives=len(neg), timings={"prepare": t1 - t0, "fit": t2 - t1})

    def choose(self, fit: "Fit", scores: np.ndarray, k: int) -> Batch:
        """The batch from the model's ``scores`` over the candidates (modified: skipped rows get
        -inf): the ``k`` best not skipped, with the encountered known rows among them."""
        t3 = time.perf_counter()
        sc, skip_pos, known_pos = scores, fit.skip_pos, fit.known_pos
        if len(skip_pos):
            sc[skip_pos] = -np.inf
        sel = select_top(sc, k + len(known_pos), self.features.pids, self.candidates)
        new = np.ones(len(sel), bool)
        if len(known_pos):
            new = ~np.isin(sel, known_pos)
            cut = np.flatnonzero(np.cumsum(new) >= k)
            if len(cut):
                sel, new = sel[: cut[0] + 1], new[: cut[0] + 1]
        sel_rows = sel if self.candidates is None else self.candidates[sel]
        t4 = time.perf_counter()
        timings = {**fit.timings, "select": t4 - t3}
        timings["total"] = sum(timings.values())
        return Batch(
            topic=self.topic, thread=self.thread, iteration=fit.iteration, rows=sel_rows,
            pids=self.features.pid_list(sel_rows), scores=sc[sel].copy(), new=new, n_train=fit.n_train,
            n_relevant=fit.n_relevant, n_negatives=fit.n_negatives, n_columns=len(fit.cols), timings=timings,
        )


@dataclass
class Fit:
    """A ranker's model for its next batch (:meth:`CalRanker.train`): weights ``w`` (nonzero on
    ``cols`` only), intercept ``b``, and what choosing needs (candidate positions to skip, known
    positions to encounter)."""

    w: np.ndarray
    b: float
    cols: np.ndarray
    iteration: int
    skip_pos: np.ndarray
    known_pos: np.ndarray
    n_train: int = 0
    n_relevant: int = 0
    n_negatives: int = 0
    timings: dict = field(default_factory=dict)
    scores: np.ndarray | None = field(default=None, repr=False)


def candidate_rows(features: Features, universe: Iterable[str] | pa.Array | None = None) -> np.ndarray | None:
    """Rows that CAL may select: canonical passages (with the features' classes), restricted to
    ``universe`` (passage ids, e.g. the fractional collection) when given. ``None`` means every
    row (no classes, no universe)."""
    keep = None
    if features.classes is not None:
        keep = np.asarray(features.classes) == np.arange(features.n_rows)
    if universe is not None:
        rows = features.rows_of(universe)
        m = np.zeros(features.n_rows, bool)
        m[rows[rows >= 0]] = True
        keep = m if keep is None else keep & m
    return None if keep is None else np.flatnonzero(keep)


# --------------------------------------------------------------------------- driving a judging store


def fractional_candidates(features: Features, fraction: float, seed: int) -> np.ndarray:
    """Rows of the fractional collection: the first ``fraction`` of the canonical passages in the
    seeded random order of :func:`qrelkit.pooler.fractional.fractional_ids` (the same passages as
    ``qrelkit pool fractional`` with the same classes, fraction and seed)."""
    canon = candidate_rows(features)
    ids = features.pids if canon is None else features.pids.take(pa.array(canon))
    kept = fractional_ids(ids, fraction, seed)
    rows = features.rows_of(kept)
    return np.sort(rows[rows >= 0])


def prepare_candidates(features: Features, threads: Sequence[str], *, fraction: float, fraction_seed: int,
                       cache: dict) -> list[tuple]:
    """Fill ``cache`` (the ``cache`` of :func:`issue_next_batches`) with the candidate rows of
    ``threads`` — computed once per features, fraction and seed: the fractional collection's
    take a pass over every passage id — and return their keys. A long-lived caller may call it
    ahead of the first batch (:func:`warm_up`)."""
    keys = []
    for thread in threads:
        key = ("candidates", thread, fraction, fraction_seed)
        if key not in cache:
            cache[key] = (fractional_candidates(features, fraction, fraction_seed) if thread == "fractional"
                          else candidate_rows(features))
        keys.append(key)
    return keys


def warm_up(features: Features, threads: Sequence[str], *, fraction: float, fraction_seed: int, cache: dict) -> None:
    """Make ready, ahead of the first :func:`issue_next_batches` with this ``cache``, what its
    first call would otherwise spend seconds on at a million passages: the threads' candidate
    rows (:func:`prepare_candidates`), the pid -> row lookup of ``features``, the scoring kernels
    (compiled, or loaded from numba's cache) and the learner's library (scikit-learn)."""
    keys = prepare_candidates(features, threads, fraction=fraction, fraction_seed=fraction_seed, cache=cache)
    features.rows_of(["-"])
    if features.n_rows:
        W, b = np.zeros((features.n_terms, 1), np.float32), np.zeros(1, np.float32)
        for key in keys:
            score_many(features, W, b, cache[key])
        score_many(features, W, b, np.zeros(1, np.int64))
    from sklearn.linear_model import LogisticRegression  # noqa: F401  (lazy: importing it now is the point)


_NO_BATCHES = pd.DataFrame(columns=["batch_id", "qid", "thread", "iteration", "kind", "status"])


def issue_next_batches(
    store,
    features: Features,
    *,
    topics: Sequence[str] | None = None,
    threads: Sequence[str] | None = None,
    params: CalParams = CalParams(),
    fraction: float = 0.1,
    fraction_seed: int = 0,
    combine: Any = "median_high",
    allow_open: bool = False,
    dry_run: bool = False,
    cache: dict | None = None,
) -> tuple[list[Batch], pd.DataFrame]:
    """Compute and issue the next CAL batch of every active thread of ``store``.

    For each topic (all, or ``topics``) and thread (the store's, or ``threads``) whose state is
    ``active``: the thread's view of the judgment log (pool batches plus its own CAL batches;
    every batch for ``all``; several assessors' grades combined by ``combine``, a rule name or object
    as :func:`qrelkit.cal.store.combined_grades` takes) trains the model;
    every passage issued or judged for the topic in any thread is skipped (random-sample
    passages of the target method are neither skipped nor trained on); the batch is recorded
    with ``store.issue_batch(topic, thread, pids, kind="cal")`` unless ``dry_run``.

    Passages already judged in another thread are *encountered* when the thread's ranking
    reaches them: they are recorded in the batch (rank order) and their judgments are copied into
    it (``source="encountered"``), so the thread sees them without new judging work; the batch
    still holds ``k`` passages that need judging. Passages issued but not judged yet are skipped.

    A thread whose last CAL batch is still open (not every item judged) is skipped unless
    ``allow_open``. Returns the batches and one row per (topic, thread) saying what happened
    (``issued``, ``waiting``, ``exhausted``, or the thread's state) with the number of new items
    and of encountered passages.

    ``cache``: a dict kept by a caller that issues batches again and again with the same
    features (a campaign runner): the threads' candidate rows are computed once into it, not on
    every call (the fractional collection's rows take a pass over every passage id).
    """
    tdf = store.topics()
    want_topics = None if topics is None else {str(t) for t in topics}
    cand_cache: dict = cache if cache is not None else {}
    # every topic's threads and CAL batches in one read each (not a query per topic)
    all_threads = dict(tuple(store.threads().groupby("qid", sort=False)))
    cal_all = store.batches(counts=False)
    cal_all = dict(tuple(cal_all[cal_all["kind"] == "cal"].groupby("qid", sort=False)))
    states: dict[str, _TopicState] = {}
    report: dict[tuple[int, int], dict] = {}  # (topic, thread) order -> what happened
    todo: dict[str, list[tuple[str, int]]] = {}  # thread -> [(topic, iteration)] to compute
    for ti, (qid, text) in enumerate(zip(tdf["qid"].astype(str), tdf["text"].astype(str))):
        if want_topics is not None and qid not in want_topics or qid not in all_threads:
            continue
        st = states[qid] = _TopicState.read(store, qid, text, ti, all_threads[qid], cal_all.get(qid, _NO_BATCHES))
        for thread, state in zip(st.threads["thread"], st.threads["state"]):
            if threads is not None and thread not in threads:
                continue
            key = (ti, THREADS.index(thread))
            mine = st.cal_batches[st.cal_batches["thread"] == thread]
            if state != "active":
                report[key] = _row(qid, thread, state)
            elif not allow_open and len(mine) and mine["status"].iloc[-1] == "open":
                report[key] = _row(qid, thread, "waiting", mine["batch_id"].iloc[-1])
            else:
                todo.setdefault(thread, []).append((qid, len(mine) + 1))
    missing_total = 0
    for thread in THREADS:  # thread by thread: a topic's later threads skip what its earlier ones chose
        if thread not in todo:
            continue
        key = prepare_candidates(features, [thread], fraction=fraction, fraction_seed=fraction_seed, cache=cand_cache)[0]
        rankers, fits, missing_total = _train_all(features, states, todo[thread], thread, cand_cache, key, params,
                                                  combine, missing_total)
        for (qid, iteration), ranker, fit in zip(todo[thread], rankers, fits):
            st = states[qid]
            b = ranker.choose(fit, _scores_of(fits, fit, features, ranker.candidates), batch_size(params, thread, iteration))
            if len(b.rows) == 0 or not b.new.any():
                report[(st.index, THREADS.index(thread))] = _row(qid, thread, "exhausted")
                continue
            st.batches.append(b)
            if not dry_run:  # the topic's next threads skip these (issued in the write pass below)
                st.pending |= {p_ for p_, n_ in zip(b.pids, b.new.tolist()) if n_}
    out: list[Batch] = []
    for qid, st in states.items():  # the writes, topic by topic in thread order (as issued one by one)
        for b in st.batches:
            enc = [p_ for p_, n_ in zip(b.pids, b.new.tolist()) if not n_]
            if not dry_run:
                b.batch_id = store.issue_batch(qid, b.thread, b.pids, kind="cal")
                if enc:  # encountered passages bring their judgments into this thread's view
                    copy = st.log[st.log["docid"].isin(set(enc))][["qid", "docid", "assessor", "grade"]].copy()
                    copy["batch_id"] = b.batch_id
                    store.import_judgments(copy, source="encountered")
            out.append(b)
            report[(st.index, THREADS.index(b.thread))] = {**_row(qid, b.thread, "issued", b.batch_id),
                                                          "items": int(b.new.sum()), "encountered": len(enc)}
    rep = pd.DataFrame([report[k] for k in sorted(report)], columns=["qid", "thread", "action", "batch_id", "items",
                                                                    "encountered"])
    rep.attrs["judged_passages_not_in_features"] = missing_total
    return out, rep


def _row(qid: str, thread: str, action: str, batch_id: str | None = None) -> dict:
    return {"qid": qid, "thread": thread, "action": action, "batch_id": batch_id, "items": 0, "encountered": 0}


@dataclass
class _TopicState:
    """What :func:`issue_next_batches` reads of one topic, once: its threads, log (pool and CAL
    judgments), issued items and CAL batches; ``pending`` (issued, not judged) grows with the
    batches chosen for its threads, which ``batches`` collects."""

    qid: str
    text: str
    index: int
    threads: pd.DataFrame
    cal_batches: pd.DataFrame
    log: pd.DataFrame
    items: pd.DataFrame
    judged: set
    issued: list
    pending: set
    batches: list = field(default_factory=list)

    @classmethod
    def read(cls, store, qid: str, text: str, index: int, threads: pd.DataFrame, cal_batches: pd.DataFrame) -> "_TopicState":
        log = store.judgments(qid, None)  # every pool and cal judgment (no samples)
        items = store.issued_items(qid)
        judged = set(log["docid"])
        issued = list(dict.fromkeys(items["passage"]))
        return cls(qid, text, index, threads, cal_batches, log, items, judged, issued, set(issued) - judged)

    def view(self, thread: str, combine: Any) -> tuple[pd.DataFrame, set]:
        """The thread's judged passages (one grade each, judging order) and everything in its
        view, judged or issued (as ``store.labels`` / ``issued_passages`` for the thread): the
        pool batches and its own; every batch for ``all``."""
        if thread == "all":
            lab = combine_log(self.log, combine=combine)
            return lab, set(lab["docid"]) | set(self.issued)
        seen = _in_view(self.log["kind"].to_numpy(), self.log["thread"].to_numpy(), thread)
        lab = combine_log(self.log[seen], combine=combine)
        mine = _in_view(self.items["kind"].to_numpy(), self.items["thread"].to_numpy(), thread)
        return lab, set(lab["docid"]) | set(self.items["passage"][mine])


def _train_all(features: Features, states: dict, todo: list, thread: str, cand_cache: dict, key: tuple,
               params: CalParams, combine: Any, missing_total: int) -> tuple[list, list, int]:
    """The ranker and trained model of ``thread`` for every (topic, iteration) of ``todo``."""
    cand = cand_cache[key]
    rankers, fits = [], []
    for qid, iteration in todo:
        st = states[qid]
        lab, view = st.view(thread, combine)
        skip = features.rows_of(sorted(view | st.pending))
        known = features.rows_of(sorted(st.judged - view))
        rows = features.rows_of(lab["docid"].astype(str).tolist())
        rel = binarize(lab["grade"].to_numpy(), params.relevant)
        keep = rows >= 0
        missing_total += int((~keep).sum())
        ranker = CalRanker(features, st.text, topic=qid, thread=thread, candidates=cand, params=params,
                           positions=cand_cache.get(("positions",) + key[1:]))
        cand_cache[("positions",) + key[1:]] = ranker.position_map
        if cand is not None:
            keep &= ranker.positions(np.maximum(rows, 0)) >= 0
        rankers.append(ranker)
        fits.append(ranker.train(rows[keep], rel[keep], skip[skip >= 0], iteration, known_rows=known[known >= 0]))
    return rankers, fits, missing_total


SCORE_GROUP = 16  # models scored per pass over the matrix (memory: rows x 16 float32)


def _scores_of(fits: list, fit: "Fit", features: Features, candidates: np.ndarray | None) -> np.ndarray:
    """``fit``'s scores over the candidates: the models of ``fits`` are scored
    :data:`SCORE_GROUP` at a time in one pass (:func:`score_many`); computed when the first
    model of a group is asked for, kept on the fits until each takes its column."""
    i = next(j for j, f in enumerate(fits) if f is fit)
    if fit.scores is None:
        group = fits[i: i + SCORE_GROUP]
        W = np.zeros((features.n_terms, len(group)), np.float32)
        for t, f in enumerate(group):
            W[f.cols, t] = f.w[f.cols]
        many = score_many(features, W, np.array([f.b for f in group], np.float32), candidates)
        for t, f in enumerate(group):
            f.scores = np.ascontiguousarray(many[:, t])
    sc, fit.scores = fit.scores, None
    return sc


def batches_table(batches: Sequence[Batch], *, assessor: str = "", texts: Mapping[str, str] | None = None) -> pa.Table:
    """Assessor-facing rows of issued batches — the passages that need judging (not the
    encountered ones): ``batch_id, qid, thread, iteration, position`` (rank in the batch),
    ``docid, score, assessor, grade`` (empty, to be filled; importable with ``qrelkit cal
    import``) and ``text`` when ``texts`` (pid -> text) is given."""
    cols: dict[str, list] = {k: [] for k in ("batch_id", "qid", "thread", "iteration", "position", "docid", "score",
                                             "assessor", "grade")}
    if texts is not None:
        cols["text"] = []
    for b in batches:
        for i, (p, s, n) in enumerate(zip(b.pids, np.asarray(b.scores, np.float64).tolist(), b.new.tolist()), 1):
            if not n:
                continue
            cols["batch_id"].append(getattr(b, "batch_id", None) or "")
            cols["qid"].append(b.topic)
            cols["thread"].append(b.thread)
            cols["iteration"].append(b.iteration)
            cols["position"].append(i)
            cols["docid"].append(p)
            cols["score"].append(s)
            cols["assessor"].append(assessor)
            cols["grade"].append(None)
            if texts is not None:
                cols["text"].append(texts.get(p, ""))
    types = {"iteration": pa.int32(), "position": pa.int32(), "score": pa.float64(), "grade": pa.int32()}
    return pa.table({k: pa.array(v, types.get(k, pa.string())) for k, v in cols.items()})
