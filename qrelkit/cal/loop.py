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
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numba as nb
import numpy as np
import pandas as pd
import pyarrow as pa
import scipy.sparse as sp

from qrelkit.cal.features import Features, SparseRows
from qrelkit.cal.params import SCHEDULES, THREADS, CalParams  # noqa: F401  (callers find them here)
# score, score_many, select_top and PARALLEL_MIN_NNZ live in qrelkit.cal.scoring; callers also find them here
from qrelkit.cal.scoring import (  # noqa: F401
    PARALLEL_MIN_NNZ, SCORE_GROUP, Candidates, LocalScorer, TopRows, score, score_many, select_top,
)
from qrelkit.cal.stopping import _in_view, binarize
from qrelkit.store.combine import DEFAULT_COMBINE, combine_log
from qrelkit.store.interfaces import ENCOUNTERED
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.pooler.fractional import fractional_masks
from qrelkit.pooler.params import FRACTIONAL


# --------------------------------------------------------------------------- parameters
# CalParams (the [cal] keys that decide a batch, declared beside it) lives in qrelkit.cal.params


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


def fit_weights(block: SparseRows, labels: np.ndarray, *, C: float = CalParams().C, class_weight: str | None = None,
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
    as they stand. Holds the buffers (weights) so that iterations allocate little.

    ``candidates``: rows that may be scored, sampled and selected (None: every row; with the
    features' near-duplicate classes, every canonical row). See :func:`candidate_rows`.
    ``candidates`` may also be a :class:`~qrelkit.cal.scoring.Candidates` over them, shared by
    the rankers of a thread instead of built again.
    ``scorer``: who scores the shards — a :class:`~qrelkit.cal.scoring.LocalScorer` (default: in
    this process) or a :class:`~qrelkit.cal.distributed.DaskScorer`; the batches are the same.
    """

    def __init__(self, features: Features, query: str, *, topic: str = "", thread: str = "all",
                 candidates: np.ndarray | Candidates | None = None, params: CalParams = CalParams(),
                 scorer=None) -> None:
        # here and not at the first iteration: the ranker's learner library (scikit-learn and the
        # scipy.stats it pulls in, ~1 s); campaign commands that import this module never make a ranker
        from sklearn.linear_model import LogisticRegression  # noqa: F401  (lazy: see above)

        self.features = features
        self.topic = str(topic)
        self.thread = thread
        self.params = params
        self.qvec = features.featurize([query]) if params.query_document else None
        if candidates is None and features.canonical is not None:
            candidates = candidate_rows(features)
        self.cands = candidates if isinstance(candidates, Candidates) else Candidates(features, candidates)
        self.candidates = self.cands.rows
        self.n_candidates = self.cands.n
        self.scorer = scorer if scorer is not None else LocalScorer(features)
        self._w = np.zeros(features.n_terms, np.float32)
        self._scratch = np.full(features.n_terms, -1, np.int32)
        self._last_cols = np.zeros(0, np.int64)

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """Candidate positions of rows (-1 for rows that are not candidates)."""
        return self.cands.positions(rows)

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
        return self.cands.rows_at(pos)

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

        The same as :meth:`train`, the scorer's best candidates under its model, then
        :meth:`choose` (which is how several rankers share one scoring pass: the scorer's
        ``top_many``, see :func:`issue_next_batches`).
        """
        fit = self.train(train_rows, train_relevant, skip_rows, iteration, known_rows)
        model, skip, n = self.scoring_request(fit, k)
        return self.choose(fit, self.scorer.top(*model, self.cands, skip, n), k)

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

    def scoring_request(self, fit: "Fit", k: int) -> tuple[tuple, np.ndarray, int]:
        """What the scorer needs for ``fit``'s batch of ``k``: the model ``(w, b, cols)``, the
        rows never selected (ascending) and how many best candidates to return (the known rows
        encountered come on top of ``k``)."""
        return (fit.w, fit.b, fit.cols), np.unique(self.cands.rows_at(fit.skip_pos)), k + len(fit.known_pos)

    def choose(self, fit: "Fit", top: TopRows, k: int) -> Batch:
        """The batch from the scorer's best candidates under ``fit``'s model (``top``: the
        first :meth:`scoring_request` of them, skipped rows left out): the ``k`` best, with the
        encountered known rows among them."""
        t3 = time.perf_counter()
        new = np.ones(len(top.rows), bool)
        n_sel = len(top.rows)
        if len(fit.known_pos):
            new = ~np.isin(top.rows, self.cands.rows_at(fit.known_pos))
            cut = np.flatnonzero(np.cumsum(new) >= k)
            if len(cut):
                n_sel = int(cut[0]) + 1
                new = new[:n_sel]
        t_score = top.timings.get("score", 0.0)
        timings = {**fit.timings, "score": t_score,
                   "select": top.timings.get("select", 0.0) + time.perf_counter() - t3}
        timings["total"] = sum(timings.values())
        return Batch(
            topic=self.topic, thread=self.thread, iteration=fit.iteration, rows=top.rows[:n_sel],
            pids=top.pids[:n_sel], scores=top.scores[:n_sel].copy(), new=new, n_train=fit.n_train,
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


def candidate_rows(features: Features, universe: Iterable[str] | pa.Array | None = None) -> np.ndarray | None:
    """Rows that CAL may select: canonical passages (with the features' classes), restricted to
    ``universe`` (passage ids, e.g. the fractional collection) when given. ``None`` means every
    row (no classes, no universe)."""
    keep = features.canonical
    if keep is not None:
        keep = np.array(keep, bool)
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
    def local_rows(s) -> np.ndarray:  # a shard's canonical rows
        return np.arange(len(s.pids), dtype=np.int64) if s.canonical is None else np.flatnonzero(s.canonical)

    def ids():  # shard by shard: the ids are never all in memory at once
        for s in features.shards:
            yield s.pids if s.canonical is None else s.pids.take(pa.array(local_rows(s)))

    masks = fractional_masks(ids, fraction, seed)  # no lookup of the kept ids: their rows are known
    parts = [start + local_rows(s)[m] for s, start, m in zip(features.shards, features.starts, masks)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


class CandidateCache:
    """The candidates of the CAL threads (rows, positions, per-shard bounds), computed once per
    features, fraction and seed: what a caller that issues batches again and again (a campaign
    runner, the judging app) keeps between :func:`issue_next_batches` calls. The fractional
    collection's rows take a pass over every passage id (seconds at millions of passages); the
    other threads share the canonical rows.

    A cache serves one :class:`~qrelkit.cal.features.Features` object: given another (features
    rebuilt, a store reloaded) it starts afresh."""

    def __init__(self) -> None:
        self._features: Features | None = None
        self._cands: dict[tuple[str, float, int], Candidates] = {}

    def candidates(self, features: Features, thread: str, fraction: float, seed: int) -> Candidates:
        """The candidates ``thread`` may select (``rows`` None: every row)."""
        if features is not self._features:
            self._features, self._cands = features, {}
        # only the fractional thread depends on the fraction and its seed
        key = ("fractional", float(fraction), int(seed)) if thread == "fractional" else ("canonical", 0.0, 0)
        if key not in self._cands:
            rows = fractional_candidates(features, fraction, seed) if thread == "fractional" else candidate_rows(features)
            self._cands[key] = Candidates(features, rows)
        return self._cands[key]


def warm_up(features: Features, threads: Sequence[str], *, fraction: float, fraction_seed: int,
            cache: CandidateCache) -> None:
    """Make ready, ahead of the first :func:`issue_next_batches` with this ``cache``, what its
    first call would otherwise spend seconds on at a million passages: the threads' candidates
    (:class:`CandidateCache`), the pid -> row lookup of ``features``, the scoring kernels
    (compiled, or loaded from numba's cache) and the learner's library (scikit-learn)."""
    cands = {id(c): c for c in (cache.candidates(features, t, fraction, fraction_seed) for t in threads)}
    features.rows_of(["-"])
    if features.n_rows:
        W, b = np.zeros((features.n_terms, 1), np.float32), np.zeros(1, np.float32)
        for c in cands.values():  # each distinct set of candidates once (local and all share theirs)
            score_many(features, W, b, c.rows)
        score_many(features, W, b, np.zeros(1, np.int64))
    from sklearn.linear_model import LogisticRegression  # noqa: F401  (lazy: importing it now is the point)


_NO_BATCHES = pd.DataFrame(columns=["batch_id", "qid", "thread", "iteration", "kind", "status"])


@declared_defaults(FRACTIONAL, fraction_seed="seed")
def issue_next_batches(
    store,
    features: Features,
    *,
    topics: Sequence[str] | None = None,
    threads: Sequence[str] | None = None,
    params: CalParams = CalParams(),
    fraction: float = AS_DECLARED,
    fraction_seed: int = AS_DECLARED,
    combine: Any = DEFAULT_COMBINE,
    allow_open: bool = False,
    dry_run: bool = False,
    scorer=None,
    cache: CandidateCache | None = None,
) -> tuple[list[Batch], pd.DataFrame]:
    """Compute and issue the next CAL batch of every active thread of ``store``.

    For each topic (all, or ``topics``) and thread (the store's, or ``threads``) whose state is
    ``active``: the thread's view of the judgment log (pool batches plus its own CAL batches;
    every batch for ``all``; several assessors' grades combined by ``combine``, a rule name or object
    as :func:`qrelkit.store.combine.combined_grades` takes) trains the model;
    every passage issued or judged for the topic in any thread is skipped (random-sample
    passages of the target method are neither skipped nor trained on); the batch is recorded
    with ``store.batches.issue(topic, thread, pids, kind="cal")`` unless ``dry_run``.

    Passages already judged in another thread are *encountered* when the thread's ranking
    reaches them: they are recorded in the batch (rank order) and their judgments are copied into
    it (``source="encountered"``), so the thread sees them without new judging work; the batch
    still holds ``k`` passages that need judging. Passages issued but not judged yet are skipped.

    ``scorer``: who scores the shards (default: a :class:`~qrelkit.cal.scoring.LocalScorer` in
    this process; :class:`~qrelkit.cal.distributed.DaskScorer` on Dask workers: the same batches).

    A thread whose last CAL batch is still open (not every item judged) is skipped unless
    ``allow_open``. Returns the batches and one row per (topic, thread) saying what happened
    (``issued``, ``waiting``, ``exhausted``, or the thread's state) with the number of new items
    and of encountered passages.

    ``cache``: a :class:`CandidateCache` kept by a caller that issues batches again and again
    with the same features (a campaign runner): the threads' candidates are computed once, not
    on every call (the fractional collection's rows take a pass over every passage id).
    """
    tdf = store.topics.all()
    want_topics = None if topics is None else {str(t) for t in topics}
    cand_cache = cache if cache is not None else CandidateCache()
    scorer = scorer if scorer is not None else LocalScorer(features)
    # every topic's threads and CAL batches in one read each (not a query per topic)
    all_threads = dict(tuple(store.topics.threads().groupby("qid", sort=False)))
    cal_all = store.batches.all(counts=False)
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
        cands = cand_cache.candidates(features, thread, fraction, fraction_seed)
        rankers, fits, missing_total = _train_all(features, states, todo[thread], thread, cands, params,
                                                  combine, missing_total, scorer)
        ks = [batch_size(params, thread, iteration) for _qid, iteration in todo[thread]]
        for (qid, _it), ranker, fit, k, top in zip(todo[thread], rankers, fits, ks, _tops(scorer, rankers, fits, ks)):
            st = states[qid]
            b = ranker.choose(fit, top, k)
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
                b.batch_id = store.batches.issue(qid, b.thread, b.pids, kind="cal")
                if enc:  # encountered passages bring their judgments into this thread's view
                    copy = st.log[st.log["docid"].isin(set(enc))][["qid", "docid", "assessor", "grade"]].copy()
                    copy["batch_id"] = b.batch_id
                    store.judgments.import_judgments(copy, source=ENCOUNTERED)
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
        log = store.judgments.log(qid, None)  # every pool and cal judgment (no samples)
        items = store.batches.issued_items(qid)
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


def _train_all(features: Features, states: dict, todo: list, thread: str, cands: Candidates,
               params: CalParams, combine: Any, missing_total: int, scorer=None) -> tuple[list, list, int]:
    """The ranker and trained model of ``thread`` for every (topic, iteration) of ``todo``."""
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
        ranker = CalRanker(features, st.text, topic=qid, thread=thread, candidates=cands, params=params,
                           scorer=scorer)
        if cands.rows is not None:
            keep &= ranker.positions(np.maximum(rows, 0)) >= 0
        rankers.append(ranker)
        fits.append(ranker.train(rows[keep], rel[keep], skip[skip >= 0], iteration, known_rows=known[known >= 0]))
    return rankers, fits, missing_total


def _tops(scorer, rankers: list, fits: list, ks: list) -> list[TopRows]:
    """Every ranker's best candidates under its fitted model (for a batch of ``ks``), from one
    ``scorer.top_many`` call: the rankers of a thread share their candidates, so the scorer reads
    each shard's rows once for :data:`~qrelkit.cal.scoring.SCORE_GROUP` models at a time."""
    if not rankers:
        return []
    reqs = [r.scoring_request(f, k) for r, f, k in zip(rankers, fits, ks)]
    return scorer.top_many([q[0] for q in reqs], rankers[0].cands, [q[1] for q in reqs], [q[2] for q in reqs])


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
