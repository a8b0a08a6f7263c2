"""Adjudication: the order in which a topic's pool is judged when the budget is smaller than the
pool (docs/protocol.md, "Judging budgets").

A strategy sees one topic's pool as the pooled runs' lists (:class:`TopicPool`) and the outcomes
of the judgments made so far, and chooses the next documents to judge. The built-in strategies:

* ``docid`` — the pool in docid order (TREC's classic order, the baseline);
* ``rank`` — round robin by rank: every run's rank 1, then every run's rank 2, ... (runs in run
  order; a document already taken is passed over);
* ``mtf`` — Move-To-Front (Cormack, Palmer and Clarke, SIGIR 1998): judge the highest-priority
  run's next documents while they are relevant; a non-relevant one lowers its priority by one;
* ``hedge`` — Hedge (Aslam, Pavlu and Savell, SIGIR 2003): runs as experts, the document with
  the largest weighted belief next, weights multiplied by ``beta ** loss`` after each judgment;
* ``mm`` and ``mm-ns`` — MaxMean (Losada, Parapar and Barreiro, SAC 2016; IP&M 2017): the run
  with the largest posterior mean of a Beta(1, 1) prior updated with its judged documents;
  ``mm-ns`` weighs older judgments less (non-stationary: relevance thins out down a ranking);
* ``ucb`` — UCB1 (Auer, Cesa-Bianchi and Fischer, 2002) over the runs.

A strategy is a function ``(pool, known, prior, batches, **constants) -> order`` (the arrays of
:mod:`qrelkit.pooler.adjudication_kernels`); ``register_strategy("mine", fn)`` makes a new one a
choice of ``[adjudicate] strategy`` and of ``qrelkit study budget --strategy``.

:func:`simulate_order` replays a strategy against known outcomes (a study's oracle);
:func:`next_round` continues a campaign's judging from its record; :func:`adjudicate` replays a
whole collection.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.errors import InputError
from qrelkit.params import AS_DECLARED, add_choice, declared_defaults
from qrelkit.pooler.params import AdjudicateParams

Strategy = Callable[..., np.ndarray]
#: the pointer strategies' codes in :func:`qrelkit.pooler.adjudication_kernels.pointer_order`
MTF, MM, UCB = 0, 1, 2


def _kernels():
    # lazy: numba loads in ~0.5 s; the registry is imported with the configuration schema
    from qrelkit.pooler import adjudication_kernels
    return adjudication_kernels


@dataclass(frozen=True)
class TopicPool:
    """One topic's pool as the strategies see it: ``docids`` (the pool, sorted: a document is its
    index here), ``runs`` (the pooled runs, sorted: the run order that breaks ties) and each run's
    list of documents best first (``docs[offsets[k]:offsets[k + 1]]`` for run ``k``)."""

    qid: str
    docids: tuple[str, ...]
    runs: tuple[str, ...]
    offsets: np.ndarray
    docs: np.ndarray

    @property
    def n_docs(self) -> int:
        return len(self.docids)

    def lists(self) -> dict[str, list[str]]:
        """Each run's list of docids, best first."""
        return {r: [self.docids[d] for d in self.docs[self.offsets[k]:self.offsets[k + 1]]]
                for k, r in enumerate(self.runs)}

    def positions(self) -> dict[str, int]:
        """docid -> its index in the pool (built once per pool)."""
        got = self.__dict__.get("_positions")
        if got is None:
            got = {d: i for i, d in enumerate(self.docids)}
            object.__setattr__(self, "_positions", got)
        return got

    def index(self, docids: Iterable[str]) -> np.ndarray:
        """The documents' indices (an id not in the pool is ``[not-in-pool]``)."""
        pos = self.positions()
        try:
            return np.array([pos[d] for d in docids], np.int32)
        except KeyError as e:
            raise InputError("not-in-pool", f"topic {self.qid}: document {e.args[0]!r} is not in its pool") from None


def pool_from_lists(qid: str, lists: Mapping[str, Sequence[str]]) -> TopicPool:
    """A topic's pool from its runs' lists (run -> docids best first; a docid repeated in a list
    counts at its first rank): what a hand-worked example or a plugin builds.

    >>> p = pool_from_lists("1", {"b": ["d2", "d1"], "a": ["d1", "d3"]})
    >>> p.docids, p.runs, p.lists()
    (('d1', 'd2', 'd3'), ('a', 'b'), {'a': ['d1', 'd3'], 'b': ['d2', 'd1']})
    """
    runs = tuple(sorted(str(r) for r in lists))
    docids = tuple(sorted({str(d) for r in lists for d in lists[r]}))
    pos = {d: i for i, d in enumerate(docids)}
    offsets, docs = [0], []
    for r in runs:
        seen: set[str] = set()
        for d in map(str, lists[r]):
            if d not in seen:
                seen.add(d)
                docs.append(pos[d])
        offsets.append(len(docs))
    return TopicPool(str(qid), docids, runs, np.array(offsets, np.int64), np.array(docs, np.int32))


def topic_pools(pool: pa.Table) -> dict[str, TopicPool]:
    """Each topic's :class:`TopicPool` from a pool table with provenance (``qid``, ``docid`` and
    ``runs``: the list of ``{run, rank}`` of :func:`~qrelkit.pooler.pools.depth_pool`), topics in
    the table's order. A run's list holds its pooled documents by rank; a document no run retrieved
    (empty provenance) is left out.

    >>> import pyarrow as pa
    >>> t = pa.table({"qid": ["1", "1"], "docid": ["d1", "d2"],
    ...               "runs": [[{"run": "a", "rank": 1}], []]})
    >>> topic_pools(t)["1"].docids
    ('d1',)
    """
    for c in ("qid", "docid", "runs"):
        if c not in pool.column_names:
            raise InputError("missing-column", f"the pool needs a column {c!r} (a depth pool's provenance)")
    # a pool document no run retrieved (a plugin kind's, the qrels' of a top-1 pool) is no run's:
    # no strategy reaches it, so it is not in the strategies' pool
    pool = pool.filter(pc.greater(pc.list_value_length(pool["runs"]), 0))
    if pool.num_rows == 0:
        return {}
    prov = pool["runs"].combine_chunks()
    row = pc.list_parent_indices(prov).to_numpy()
    flat = pc.list_flatten(prov)
    # each pool row: its topic (codes in the table's order) and its document's index in the
    # topic's sorted docids
    tcode, qids = pd.factorize(pool["qid"].to_numpy(zero_copy_only=False))
    rows = pd.DataFrame({"t": tcode, "docid": pool["docid"].to_numpy(zero_copy_only=False)})
    rows = rows.sort_values(["t", "docid"], kind="stable")
    doc_of_row = np.empty(len(rows), np.int64)
    doc_of_row[rows.index.to_numpy()] = rows.groupby("t", sort=False).cumcount().to_numpy()
    t_sorted, docid_sorted = rows["t"].to_numpy(), rows["docid"].to_numpy()
    run_names, run_code = np.unique(flat.field("run").to_numpy(zero_copy_only=False).astype(str), return_inverse=True)
    topic, doc = tcode[row], doc_of_row[row]
    rank = flat.field("rank").to_numpy(zero_copy_only=False)
    o = np.lexsort((doc, rank, run_code, topic))
    topic, run_code, doc = topic[o], run_code[o], doc[o]
    key = (topic * len(run_names) + run_code) * (len(rows) + 1) + doc
    first = np.zeros(len(o), bool)  # a run's document counts at its first rank
    first[np.unique(key, return_index=True)[1]] = True
    topic, run_code, doc = topic[first], run_code[first], doc[first]
    dbounds = np.searchsorted(t_sorted, np.arange(len(qids) + 1))
    pbounds = np.searchsorted(topic, np.arange(len(qids) + 1))
    out: dict[str, TopicPool] = {}
    for t, q in enumerate(qids):
        rc = run_code[pbounds[t]:pbounds[t + 1]]
        present, counts = np.unique(rc, return_counts=True)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        out[str(q)] = TopicPool(str(q), tuple(str(d) for d in docid_sorted[dbounds[t]:dbounds[t + 1]]),
                                tuple(str(run_names[i]) for i in present), offsets,
                                doc[pbounds[t]:pbounds[t + 1]].astype(np.int32))
    return out


# ------------------------------------------------------------------------------ the strategies


def _static(pool: TopicPool, order: np.ndarray, prior: np.ndarray, batches: np.ndarray) -> np.ndarray:
    """A fixed order's first ``sum(batches)`` documents not judged before: a strategy that needs
    no outcome."""
    keep = order[~prior[order]]
    return keep[: int(np.sum(batches))].astype(np.int32)


def docid_order(pool: TopicPool, known: np.ndarray, prior: np.ndarray, batches: np.ndarray) -> np.ndarray:
    """``docid``: the pool in docid order."""
    return _static(pool, np.arange(pool.n_docs, dtype=np.int32), prior, batches)


def rank_order(pool: TopicPool, known: np.ndarray, prior: np.ndarray, batches: np.ndarray) -> np.ndarray:
    """``rank``: by rank, then run order; each document at its first appearance."""
    lens = np.diff(pool.offsets)
    rank = np.concatenate([np.arange(n) for n in lens]) if len(lens) else np.zeros(0, np.int64)
    run = np.repeat(np.arange(len(lens)), lens)
    seq = pool.docs[np.lexsort((run, rank))]
    _, first = np.unique(seq, return_index=True)
    return _static(pool, seq[np.sort(first)], prior, batches)


def _pointer(kind: int, discount: float = 1.0, ucb_c: float = 0.0):
    def order(pool: TopicPool, known: np.ndarray, prior: np.ndarray, batches: np.ndarray) -> np.ndarray:
        return _kernels().pointer_order(pool.offsets, pool.docs, pool.n_docs, known, prior, batches, kind, discount, ucb_c)
    return order


def mtf_order(pool: TopicPool, known: np.ndarray, prior: np.ndarray, batches: np.ndarray) -> np.ndarray:
    """``mtf``: Move-To-Front; every run starts at priority 0."""
    return _pointer(MTF)(pool, known, prior, batches)


def mm_order(pool: TopicPool, known: np.ndarray, prior: np.ndarray, batches: np.ndarray) -> np.ndarray:
    """``mm``: MaxMean, every judgment of a run weighing the same."""
    return _pointer(MM)(pool, known, prior, batches)


def mm_ns_order(pool: TopicPool, known: np.ndarray, prior: np.ndarray, batches: np.ndarray, *,
                mm_ns_discount: float = AdjudicateParams.declared_default("mm_ns_discount")) -> np.ndarray:
    """``mm-ns``: MaxMean, each older judgment of a run weighing ``mm_ns_discount`` times less."""
    return _pointer(MM, mm_ns_discount)(pool, known, prior, batches)


def ucb_order(pool: TopicPool, known: np.ndarray, prior: np.ndarray, batches: np.ndarray, *,
              ucb_c: float = AdjudicateParams.declared_default("ucb_c")) -> np.ndarray:
    """``ucb``: UCB1, the run with the largest ``mean + sqrt(ucb_c ln n / n_k)``."""
    return _pointer(UCB, 1.0, ucb_c)(pool, known, prior, batches)


def hedge_order(pool: TopicPool, known: np.ndarray, prior: np.ndarray, batches: np.ndarray, *,
                hedge_beta: float = AdjudicateParams.declared_default("hedge_beta")) -> np.ndarray:
    """``hedge``: Hedge(``hedge_beta``) over the runs."""
    return _kernels().hedge_order(pool.offsets, pool.docs, pool.n_docs, known, prior, batches, hedge_beta)


# -------------------------------------------------------------------------------- the registry

_STRATEGIES: dict[str, Strategy] = {}


def register_strategy(name: str, fn: Strategy | None = None):
    """Make ``fn(pool, known, prior, batches, **constants) -> order`` the adjudication strategy
    ``name`` (a choice of ``[adjudicate] strategy``); its keyword-only parameters named as
    ``[adjudicate]`` keys take those keys' values. Without ``fn``, a decorator."""
    def deco(f: Strategy) -> Strategy:
        if name == "none":
            raise ValueError("'none' is not a strategy: it means the whole pool, in pool order")
        _STRATEGIES[name] = f
        add_choice("adjudicate", "strategy", name)
        return f
    return deco if fn is None else deco(fn)


def available_strategies() -> list[str]:
    """The registered strategies' names, in registration order (the built-ins first)."""
    return list(_STRATEGIES)


def strategy(name: str) -> Strategy:
    """The strategy ``name`` (``[bad-option]`` when none is registered under it)."""
    if name not in _STRATEGIES:
        raise InputError("bad-option", f"unknown adjudication strategy {name!r}; strategies: "
                         f"{', '.join(available_strategies())}")
    return _STRATEGIES[name]


def _constants(fn: Strategy, params: AdjudicateParams | None) -> dict[str, Any]:
    c = (params or AdjudicateParams()).constants()
    takes = inspect.signature(fn).parameters
    return {k: v for k, v in c.items() if k in takes}


for _name, _fn in (("docid", docid_order), ("rank", rank_order), ("mtf", mtf_order), ("hedge", hedge_order),
                   ("mm", mm_order), ("mm-ns", mm_ns_order), ("ucb", ucb_order)):
    register_strategy(_name, _fn)


# ----------------------------------------------------------------------------------- replaying


def _rounds(budget: int, batch: int) -> np.ndarray:
    full, rest = divmod(int(budget), int(batch))
    return np.array([batch] * full + ([rest] if rest else []), np.int64)


def run_strategy(name: str, pool: TopicPool, known: np.ndarray, prior: np.ndarray | None, batches: Sequence[int],
                 params: AdjudicateParams | None = None) -> np.ndarray:
    """Strategy ``name`` on ``pool``: the documents chosen over the rounds ``batches`` (sizes),
    ``known`` the outcomes (1, 0, -1 not known), ``prior`` the documents judged before. A strategy
    that returns a document twice, a document judged before or one outside the pool is an error
    (``[bad-strategy]``)."""
    fn = strategy(name)
    known = np.ascontiguousarray(known, np.int8)
    prior = np.zeros(pool.n_docs, np.bool_) if prior is None else np.ascontiguousarray(prior, np.bool_)
    order = np.asarray(fn(pool, known, prior, np.asarray(batches, np.int64), **_constants(fn, params)), np.int32)
    if len(order) and (order.min() < 0 or order.max() >= pool.n_docs or len(np.unique(order)) != len(order)
                       or prior[order].any()):
        raise InputError("bad-strategy", f"strategy {name!r} on topic {pool.qid}: a document chosen twice, judged "
                         "before, or outside the pool")
    return order


def simulate_order(name: str, pool: TopicPool, relevant: np.ndarray, *, budget: int | None = None, batch: int = 1,
                   prior: np.ndarray | None = None, params: AdjudicateParams | None = None) -> np.ndarray:
    """The judging order of strategy ``name`` on ``pool`` when each judgment's outcome is
    ``relevant[d]`` (the oracle), ``batch`` documents per round, until ``budget`` judgments (None:
    the whole pool) or the pool is exhausted. Deterministic.

    >>> p = pool_from_lists("1", {"a": ["d1", "d2", "d3"], "b": ["d4", "d1"]})
    >>> rel = np.array([1, 0, 0, 1], bool)   # d1 and d4 relevant
    >>> [p.docids[d] for d in simulate_order("mtf", p, rel)]
    ['d1', 'd2', 'd4', 'd3']
    """
    n = pool.n_docs if budget is None else min(int(budget), pool.n_docs)
    known = np.asarray(relevant, bool).astype(np.int8)
    if len(known) != pool.n_docs:
        raise InputError("bad-option", f"topic {pool.qid}: {len(known)} outcomes for a pool of {pool.n_docs}")
    return run_strategy(name, pool, known, prior, _rounds(n, batch), params)


@declared_defaults(AdjudicateParams)
def next_round(name: str, pool: TopicPool, issued: Sequence[Sequence[str]], labels: Mapping[str, bool], *,
               size: int, budget: int = AS_DECLARED, prior: Iterable[str] = (), params: AdjudicateParams | None = None) -> list[str]:
    """The next round of a campaign's judging of ``pool`` in strategy ``name``'s order: ``issued``
    the rounds issued so far (docids, in issue order), ``labels`` the outcomes known (docid ->
    relevant), ``prior`` the documents judged before the strategy began (their outcomes in
    ``labels``), ``size`` the round's size, ``budget`` the judgments the strategy may make (0: the
    whole pool). Empty when the budget is spent or the pool exhausted, or while a round issued is
    not all judged. The strategy is replayed from the start: the rounds issued must be the ones it
    chooses (``[adjudication-changed]`` otherwise, e.g. the strategy or its constants changed)."""
    pos = pool.positions()
    pri = np.zeros(pool.n_docs, np.bool_)
    pri[[pos[d] for d in prior if d in pos]] = True
    known = np.full(pool.n_docs, -1, np.int8)
    for d, rel in labels.items():
        if d in pos:
            known[pos[d]] = 1 if rel else 0
    done = sum(len(r) for r in issued)
    if any(known[pool.index(r)].min(initial=0) < 0 for r in issued if len(r)):
        return []
    left = pool.n_docs - int(pri.sum()) - done
    room = left if budget <= 0 else min(left, int(budget) - done)
    if room <= 0:
        return []
    sizes = [len(r) for r in issued] + [min(size, room)]
    order = run_strategy(name, pool, known, pri, sizes, params)
    past = [d for r in issued for d in r]
    got = [pool.docids[i] for i in order]
    if got[: len(past)] != past:
        raise InputError("adjudication-changed", f"topic {pool.qid}: the rounds issued are not what strategy {name!r} "
                         "chooses now (its name or constants changed since they were issued)")
    return got[len(past):]


def adjudicate(pool: pa.Table, qrels: pa.Table, name: str, *, budget: int | None = None, batch: int = 1,
               rel: int = 1, params: AdjudicateParams | None = None) -> pa.Table:
    """Replay strategy ``name`` on every topic of ``pool`` (a depth pool with provenance) with
    ``qrels`` as the oracle (grade >= ``rel`` is relevant; a document outside them is not), ``batch``
    documents per round, until ``budget`` judgments per topic (None: the whole pool): the table
    ``qid, docid, step`` (1-based, per topic) ``, relevant``, topics in the pool's order."""
    truth: dict[tuple[str, str], int] = {}
    for q, d, g in zip(qrels["qid"].to_pylist(), qrels["docid"].to_pylist(), qrels["rel"].to_pylist()):
        truth[(str(q), str(d))] = int(g)
    cols: dict[str, list] = {"qid": [], "docid": [], "step": [], "relevant": []}
    for qid, tp in topic_pools(pool).items():
        relevant = np.array([truth.get((qid, d), 0) >= rel for d in tp.docids], bool)
        order = simulate_order(name, tp, relevant, budget=budget, batch=batch, params=params)
        cols["qid"] += [qid] * len(order)
        cols["docid"] += [tp.docids[i] for i in order]
        cols["step"] += list(range(1, len(order) + 1))
        cols["relevant"] += relevant[order].tolist()
    return pa.table({"qid": pa.array(cols["qid"], pa.string()), "docid": pa.array(cols["docid"], pa.string()),
                     "step": pa.array(cols["step"], pa.int32()), "relevant": pa.array(cols["relevant"], pa.bool_())})
