"""CAL as a judging strategy over a pool: "CAL from the judged top of the pool", the active
learning entry of a judging-budget study (issue 23, ``qrelkit study budget``), which compares it
with pooling and the adjudication strategies (:mod:`qrelkit.pooler.adjudication`) at equal cost.

For each topic, :func:`cal_pool_order` judges

1. **the seed**: the depth-``seed_k`` pool (every pooled run's top ``seed_k`` documents), in the
   ``rank`` strategy's order (every run's rank 1 in run order, then every run's rank 2, ...; a
   document at its first appearance). These judgments count in the cost.
2. **CAL's choices**: :func:`~qrelkit.cal.simulation.simulate_cal` with the seed as its initial
   judgments and one ``fractional`` thread whose collection (``fraction_ids``) is the topic's
   pool: the candidates, the random negatives and the training rows are pool documents only, and
   the relevant documents (``relevant``; every other document is not relevant) are the oracle.
   Batch sizes are the fractional thread's (``[cal] batch_size`` for the first batch,
   ``fractional_batch_size_later`` from ``fractional_later_from`` on; or ``schedule = "bmi"``);
   the last batch is cut to the budget (``max_effort``). No stopping rule: CAL runs until the
   budget is spent or it has chosen every pool document it can rank.
3. **the rest**: the pool documents CAL cannot rank, in docid order — documents that are not in
   the features (not in the corpus), or non-canonical members of near-duplicate classes when the
   features carry classes. With features of the whole pool this part is empty.

The order is cut to ``budget`` judgments (``None``: the whole pool, every document once). A budget
no larger than the seed is the seed's first ``budget`` documents in rank order. A topic none of
whose relevant documents is in the features gets CAL's part in docid order too (CAL has no
relevant document to learn from, and ``simulate_cal`` refuses such a topic): every order judges
the same documents as relevant there — none —, so every measure of the study is the same.

**Prefixes.** The cut to a budget never changes what came before it (CAL's model before the last
batch does not depend on the budget, and a cut batch is the best part of the full one), so the
order at budget ``b`` is the first ``b`` documents of the order without a budget: a study computes
it once and reads every budget off it. Deterministic for ``[cal] seed``.

**Features** (:func:`cal_pool_orders`): given (``features=``, e.g. the whole corpus's built once
with :func:`~qrelkit.cal.features.build_features`), or built from ``corpus`` over the union of the
pools' documents (``idf`` is then that of the pooled documents), in a temporary folder under
``workdir`` removed afterwards (in memory without ``workdir``).
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.cal.features import Features, build_features
from qrelkit.cal.loop import candidate_rows
from qrelkit.cal.params import CalParams
from qrelkit.cal.simulation import simulate_cal
from qrelkit.errors import InputError
from qrelkit.pooler.adjudication import TopicPool, simulate_order

__all__ = ["cal_pool_order", "cal_pool_orders", "seed_order"]


def seed_order(pool: TopicPool, seed_k: int) -> list[str]:
    """The depth-``seed_k`` pool of ``pool`` (each run's first ``seed_k`` documents), in the
    ``rank`` strategy's order: every run's rank 1 (runs in order), then every run's rank 2, ...

    >>> from qrelkit.pooler.adjudication import pool_from_lists
    >>> p = pool_from_lists("1", {"a": ["d3", "d1", "d5"], "b": ["d2", "d3", "d4"]})
    >>> seed_order(p, 1), seed_order(p, 2)
    (['d3', 'd2'], ['d3', 'd2', 'd1'])
    """
    k = int(seed_k)
    if k <= 0 or pool.n_docs == 0:
        return []
    lens = np.diff(pool.offsets)
    top = np.concatenate([pool.docs[o:o + min(k, n)] for o, n in zip(pool.offsets[:-1], lens)])
    n_seed = len(np.unique(top))
    # rank order takes every document of ranks <= k before any first seen below rank k
    order = simulate_order("rank", pool, np.zeros(pool.n_docs, bool), budget=n_seed)
    return [pool.docids[i] for i in order]


def _check(budget: int | None, seed_k: int) -> None:
    if budget is not None and int(budget) < 0:
        raise InputError("bad-option", f"the budget must be at least 0 (none: the whole pool), got {budget}")
    if int(seed_k) < 0:
        raise InputError("bad-option", f"seed_k must be at least 0 (0: CAL from the query alone), got {seed_k}")


def cal_pool_order(features: Features, qid: str, text: str, pool: TopicPool, relevant: Iterable[str], *,
                   budget: int | None = None, seed_k: int = 1, params: CalParams | None = None) -> list[str]:
    """CAL's judging order over one topic's ``pool`` (docids; see the module docs): the
    depth-``seed_k`` pool, then CAL's choices among the pool's documents, then the pool documents
    CAL cannot rank (docid order), cut to ``budget`` judgments (None: every pool document once).
    ``text``: the topic's query; ``relevant``: its relevant docids (any other is not relevant);
    ``params``: CAL's parameters (``[cal]``; its relevant grades are not used: ``relevant`` has
    decided)."""
    _check(budget, seed_k)
    n = pool.n_docs if budget is None else min(int(budget), pool.n_docs)
    seed = seed_order(pool, seed_k)
    if n <= len(seed):
        return seed[:n]
    rel = {str(d) for d in relevant}
    docids = list(pool.docids)
    rows = features.rows_of(docids)
    cand_rows = candidate_rows(features, pa.array(docids, pa.string()))
    ok = rows >= 0 if cand_rows is None else np.isin(rows, cand_rows)  # the pool documents CAL can rank
    cand = [d for d, o in zip(docids, ok) if o]
    chosen: list[str] = []
    found = sorted(d for d, r in zip(docids, rows) if r >= 0 and d in rel)
    if found:  # simulate_cal needs a relevant document in the features
        chosen = _cal_choices(features, str(qid), str(text), cand, seed, found, rel, n, params)
    taken = set(seed) | set(chosen)
    rest = [d for d in docids if d not in taken]
    return (seed + chosen + rest)[:n]


def _cal_choices(features: Features, qid: str, text: str, cand: list[str], seed: list[str], found: list[str],
                 rel: set[str], n: int, params: CalParams | None) -> list[str]:
    """The documents CAL chooses, in order, after the ``seed``: one ``fractional`` thread over the
    candidates ``cand``, the oracle judging ``found`` relevant (grade 1) and the rest not, until
    ``n`` judgments in its view (the seed's in the features included) or no candidate is left."""
    p = replace(params or CalParams(), relevant=(1,))  # the oracle is binary: grade 1 is relevant
    qrels = pa.table({"qid": pa.array([qid] * len(found), pa.string()), "docid": pa.array(found, pa.string()),
                      "rel": pa.array([1] * len(found), pa.int32())})
    initial = None
    if seed:
        initial = pa.table({"qid": pa.array([qid] * len(seed), pa.string()), "docid": pa.array(seed, pa.string()),
                            "rel": pa.array([int(d in rel) for d in seed], pa.int32())})
    res = simulate_cal(features, pd.DataFrame({"qid": [qid], "text": [text]}), qrels, threads=("fractional",),
                       params=p, initial=initial, max_effort=n,
                       until_recall=math.inf,  # no recall target: the budget or the pool's end stops CAL
                       fraction_ids=pa.array(cand, pa.string()), unjudged="zero")
    log = res.log
    return log.loc[log["source"] != "initial", "docid"].astype(str).tolist()


def _texts(topics: pd.DataFrame, qids: Iterable[str]) -> dict[str, str]:
    """qid -> query text of every topic of ``qids`` (a pooled topic missing from ``topics`` is
    ``[unknown-topic]``)."""
    for c in ("qid", "text"):
        if c not in topics.columns:
            raise InputError("missing-column", f"the topics need a column {c!r}")
    text = dict(zip(topics["qid"].astype(str), topics["text"].astype(str)))
    missing = [q for q in qids if q not in text]
    if missing:
        raise InputError("unknown-topic", f"pooled topic(s) {', '.join(missing[:10])} have no query text in the topics")
    return {q: text[q] for q in qids}


def cal_pool_orders(corpus, topics: pd.DataFrame, pools: Mapping[str, TopicPool],
                    relevant: Mapping[str, Iterable[str]], *, budget: int | None = None, seed_k: int = 1,
                    params: CalParams | None = None, features: Features | None = None,
                    workdir: str | os.PathLike | None = None,
                    progress: Callable[[str], None] | None = None) -> dict[str, list[str]]:
    """CAL's judging order over each topic's pool ("CAL from the judged top of the pool"): qid ->
    docids, topics in ``pools``' order, for a judging-budget study's ``extra_orders``.

    ``corpus``: a corpus file or table (``pid``, ``text``) the features are built from when
    ``features`` is None (over the pools' documents only; in a temporary folder under ``workdir``,
    removed afterwards, or in memory); ``topics``: the queries (columns ``qid``, ``text``);
    ``pools``: qid -> :class:`~qrelkit.pooler.adjudication.TopicPool`; ``relevant``: qid -> its
    relevant docids (a document outside them is not relevant; a topic missing has none);
    ``budget``: judgments per topic (None: the whole pool); ``seed_k``: the depth of the judged
    seed pool (0: CAL from the query alone); ``params``: ``CalParams.from_config(cfg)``;
    ``progress``: called with each topic's qid before it starts. Each topic's order is
    :func:`cal_pool_order`'s (see the module docs).

    >>> from qrelkit.pooler.adjudication import pool_from_lists
    >>> corpus = pa.table({"pid": ["d1", "d2", "d3", "d4"],
    ...                    "text": ["red apple pie", "blue sky", "apple tart recipe", "green grass"]})
    >>> pools = {"7": pool_from_lists("7", {"a": ["d2", "d1", "d4"], "b": ["d4", "d3"]})}
    >>> topics = pd.DataFrame({"qid": ["7"], "text": ["apple"]})
    >>> cal_pool_orders(corpus, topics, pools, {"7": {"d1"}}, params=CalParams(batch_size=1))
    {'7': ['d2', 'd4', 'd1', 'd3']}
    """
    _check(budget, seed_k)
    texts = _texts(topics, list(pools))
    tmp = None
    try:
        if features is None:
            universe = pa.array(sorted({d for p in pools.values() for d in p.docids}), pa.string())
            out = None
            if workdir is not None:
                Path(workdir).mkdir(parents=True, exist_ok=True)
                tmp = tempfile.mkdtemp(prefix="cal-budget-", dir=workdir)
                out = Path(tmp) / "features"
            features = build_features(corpus, out, universe=universe)
        orders = {}
        for qid, pool in pools.items():
            if progress is not None:
                progress(qid)
            orders[qid] = cal_pool_order(features, qid, texts[qid], pool, relevant.get(qid, ()), budget=budget,
                                         seed_k=seed_k, params=params)
        return orders
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
