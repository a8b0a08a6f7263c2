"""The budget study: on an existing collection, how many judgments does each adjudication strategy
need before the leaderboard stops changing? (issue 23; docs/study.md)

:func:`budget_study` replays every strategy on the collection's pool with the qrels as the oracle
(a document outside the qrels is not relevant, as in the papers; grade >= ``rel`` is relevant),
once per strategy to the largest budget: the judging order's prefixes are the smaller budgets.
Depth-k pools (``depth-K``) and orders computed elsewhere (``extra_orders``, e.g. CAL) are
strategies too. At every budget it compares the leaderboard under the qrels found so far (the
judged documents with their qrels grades; unjudged = not relevant) with the leaderboard under the
full qrels: Kendall's tau and tau_AP (:func:`qrelkit.evaluate.leaderboard_correlation`), the
largest rank drop, the pairs of runs whose significant difference changes (paired t-test over
topics, scipy), and at chosen budgets leave-one-group-out bias (:func:`~qrelkit.reuse.leave_out`).

**Scoring.** Every value comes from ir-measures through :func:`qrelkit.evaluate.evaluate`; a run's
score is the measure's own ir-measures aggregate of its per-topic values (as ``evaluate``
aggregates them). A per-topic value depends on that topic's judgments only, so each distinct
(topic, judgments) is scored once, whichever strategies and budgets share it: the distinct ones
are handed to ``evaluate`` as topics of their own, each scored on its topic's lists
(``topic_of``: a run's list is read once per call, whatever the number of judgment sets), whole
topics per call, in forked worker processes. For the measures of :data:`POSITIVES_ONLY` (a topic's
value depends only on its positively graded judgments and on the ranks of those documents) two
judged sets with the same positive documents share a scoring.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.cal.params import CalParams
from qrelkit.errors import InputError
from qrelkit.evaluate import (
    MISSING_POLICIES, RANKINGS, computable, evaluate, leaderboard_correlation, parse_measures, refuse_missing,
    with_relevance,
)
from qrelkit.evaluate.params import EvalParams
from qrelkit.io.order import canonical_indices, competition_ranks
from qrelkit.io.qrels import QRELS_SCHEMA, judged, sort_qrels
from qrelkit.io.runs import qid_order
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.pooler import (
    AdjudicateParams, TopicPool, available_strategies, depth_pool, filter_runs, pool_from_lists, simulate_order,
    topic_pools,
)
from qrelkit.pooler.params import POOL
from qrelkit.reuse.forked import fork_map, shared
from qrelkit.reuse.leaveout import PLACEHOLDER_DOCID, leave_out, run_info
from qrelkit.reuse.params import ReuseParams

#: the budgets of a study by default: shares of each topic's pool
DEFAULT_BUDGETS = ("10%", "20%", "30%", "40%", "50%", "60%", "70%", "80%", "90%", "100%")
#: the measure of the leaderboards by default
DEFAULT_MEASURE = "AP"
#: ``depth-K``: the depth-K pool of the pooled runs as a strategy
DEPTH_PREFIX = "depth-"
#: the name of CAL as a strategy (:class:`CalStrategy`)
CAL = "cal"
#: measures whose value on a topic depends only on its positively graded judgments and the ranks of
#: those documents in the run (a judged non-relevant document counts as an unjudged one)
POSITIVES_ONLY = frozenset({"AP", "nDCG", "RR", "R", "Success", "P"})
#: run lines from which the study scores in two processes by default
PARALLEL_MIN_ROWS = 500_000
#: run lines (of whole topics) whose lists one evaluate() call reads, with every judgment set of those topics
CHUNK_ROWS = 2_000_000
KINDS = {"adjudication": "a registered adjudication strategy, replayed with the qrels as the oracle",
         "depth": "the depth-K pool of the pooled runs, judged whole",
         "order": "a judging order given by the caller"}


# ----------------------------------------------------------------------------------- budgets

@dataclass(frozen=True)
class Budget:
    """One budget: ``count`` judgments per topic, or ``share`` (0 < share <= 1) of each topic's
    pool rounded up; never more than the topic's pool. ``label`` is how tables name it."""

    label: str
    count: int | None = None
    share: Fraction | None = None

    def judgments(self, pool_size: int) -> int:
        """The judgments this budget allows on a topic whose pool holds ``pool_size`` documents.

        >>> Budget("10%", share=Fraction(1, 10)).judgments(1815), Budget("500", count=500).judgments(120)
        (182, 120)
        """
        n = self.count if self.count is not None else math.ceil(self.share * pool_size)
        return min(int(n), int(pool_size))


def parse_budgets(spec: str | Iterable[str | int]) -> list[Budget]:
    """Budgets from ``"100,200,500"`` (judgments per topic) or ``"10%,20%"`` (shares of each
    topic's pool; exact decimals, ``12.5%``), or a list of such items; repeats are dropped, the order
    kept. Anything else is ``[bad-budget]``.

    >>> [b.label for b in parse_budgets("100, 10%,12.5%,100")]
    ['100', '10%', '12.5%']
    """
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[Budget] = []
    for item in items:
        s = str(item).strip()
        try:
            if s.endswith("%"):
                share = Fraction(s[:-1].strip()) / 100
                ok, b = 0 < share <= 1, Budget(f"{s[:-1].strip()}%", share=share)
            else:
                n = int(s)
                ok, b = n >= 1, Budget(str(n), count=n)
        except (ValueError, ZeroDivisionError):
            ok = False
        if not ok:
            raise InputError("bad-budget", f"budget {s!r}: give judgments per topic (a whole number >= 1, e.g. 100) "
                             "or a share of each topic's pool (above 0% and at most 100%, e.g. 10%)")
        if all((b.count, b.share) != (o.count, o.share) for o in out):
            out.append(b)
    if not out:
        raise InputError("bad-budget", "no budget given")
    return out


# ------------------------------------------------------------------------------------ result

@dataclass(frozen=True)
class CalStrategy:
    """CAL as a strategy of a budget study (``cal``): its judging order over each topic's pool by
    :func:`qrelkit.cal.budget.cal_pool_orders` — the judged depth-``seed_k`` pool first, then CAL
    over the pool's documents — with features built from ``corpus`` (over the pooled documents),
    the queries ``topics`` (qid, text) and ``params`` (:class:`~qrelkit.cal.params.CalParams`)."""

    corpus: Any
    topics: pd.DataFrame
    params: Any = None
    seed_k: int = 1
    workdir: str | os.PathLike | None = None

    def orders(self, pools: Mapping[str, TopicPool], relevant: Mapping[str, set], budget: int | None,
               progress: Callable[[str], None] | None = None) -> dict[str, list[str]]:
        """The order of every topic of ``pools``, up to ``budget`` judgments (None: whole pools)."""
        # lazy: the CAL machinery (features, scikit-learn) loads only when CAL is a strategy
        from qrelkit.cal.budget import cal_pool_orders
        return cal_pool_orders(self.corpus, self.topics, pools, relevant, budget=budget, seed_k=self.seed_k,
                               params=self.params, workdir=self.workdir, progress=progress)


@dataclass
class BudgetStudy:
    """What :func:`budget_study` returns: tables (pyarrow) and the settings and statements the
    report carries. ``timings`` (seconds per stage, counts) is part of no output."""

    summary: pa.Table  # one row per (strategy, budget)
    topics: pa.Table   # one row per (strategy, budget, topic)
    runs: pa.Table     # one row per (strategy, budget, run): the leaderboards
    pairs: pa.Table    # the pairs of runs whose significant difference changes, per (strategy, budget)
    params: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def tables(self) -> dict[str, pa.Table]:
        return {"summary": self.summary, "topics": self.topics, "runs": self.runs, "pairs": self.pairs}


# --------------------------------------------------------------------------------- the study

@declared_defaults(EvalParams, depth=POOL["depth"])
def budget_study(
    runs: pa.Table,
    qrels: pa.Table,
    manifest: pd.DataFrame | None = None,
    *,
    pooled: Iterable[str] | None = None,
    strategies: Sequence[str] | str | None = None,
    depths: Iterable[int] = (),
    budgets: str | Iterable[str | int] = DEFAULT_BUDGETS,
    depth: int = AS_DECLARED,
    measure: str = DEFAULT_MEASURE,
    rel: int | None = None,
    missing: str = AS_DECLARED,
    ranking: str = AS_DECLARED,
    alpha: float = AS_DECLARED,
    extra_orders: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
    logo_budgets: str | Iterable[str | int] = (),
    reuse: ReuseParams | None = None,
    params: AdjudicateParams | None = None,
    workers: int | None = None,
    progress: Callable[..., None] | None = None,
    cal: CalStrategy | None = None,
) -> BudgetStudy:
    """The budget study of ``runs`` (canonical run table) on ``qrels``: every strategy replayed on
    the depth-``depth`` pool of the pooled runs over the qrels' judged topics, at every budget.

    ``pooled`` names the pooled runs (default: ``manifest``'s ``pooled`` column, else every run);
    ``manifest`` (run, group) gives the groups of leave-one-group-out. ``strategies``: registered
    adjudication strategies and ``depth-K`` (default: every registered strategy), and ``depths``
    (K: ``depth-K`` after them); each adjudication strategy is replayed in rounds of
    ``params.batch`` with ``params``' constants. ``extra_orders`` adds strategies given as judging
    orders (name -> qid -> docids, first judged first; a document outside the pool may
    be in it). ``budgets`` (:func:`parse_budgets`): judgments per topic or shares of each topic's
    pool. ``measure`` (one ir-measures measure, ``rel`` its relevance level and the oracle's:
    grade >= ``rel``, default 1), ``missing`` and ``ranking`` go to :func:`~qrelkit.evaluate.evaluate`;
    ``alpha`` is the level of the paired t-tests. At ``logo_budgets`` (added to ``budgets``) every
    strategy's partial qrels go through :func:`~qrelkit.reuse.leave_out` (``reuse``: its procedure,
    uniqueness, orphans and removal). ``workers``: processes that replay and score (default: 2 for
    at least 500,000 run lines when the platform can fork, else 1); the results do not depend on
    it. ``progress``: ``progress(0, total=<tasks>)``, then ``progress(1)`` per scoring task.
    ``cal`` (:class:`CalStrategy`) adds CAL as the strategy ``cal``, judged in its order over the pool.

    Examples
    --------
    >>> from qrelkit.simulate.toy import toy_qrels, toy_runs
    >>> res = budget_study(toy_runs(), toy_qrels(), strategies=["docid", "depth-1"], budgets="1,2", depth=3)
    >>> cols = ["strategy", "budget", "judgments_mean", "relevant_found_mean", "kendall_tau"]
    >>> res.summary.select(cols).to_pylist()[-1]
    {'strategy': 'depth-1', 'budget': 'pool', 'judgments_mean': 2.0, 'relevant_found_mean': 1.0, 'kendall_tau': 1.0}
    """
    clock = [time.perf_counter()]
    if missing not in MISSING_POLICIES:
        raise InputError("bad-option", f"missing-topic policy must be one of {', '.join(MISSING_POLICIES)}, "
                         f"got {missing!r}")
    if ranking not in RANKINGS:
        raise InputError("bad-option", f"ranking must be one of {', '.join(RANKINGS)}, got {ranking!r}")
    if not 0 < float(alpha) < 1:
        raise InputError("bad-option", f"alpha must be between 0 and 1, got {alpha}")
    level = 1 if rel is None else int(rel)
    if level < 1:
        raise InputError("bad-option", f"the relevance level must be at least 1, got {rel}")
    ms = computable(with_relevance(parse_measures([measure]), level))
    if len(ms) != 1:
        raise InputError("unknown-measure", f"the study takes one measure ir-measures computes, got {measure!r}")
    reuse = reuse or ReuseParams()
    params = params or AdjudicateParams()
    blist = parse_budgets(budgets)
    logo_items = logo_budgets.split(",") if isinstance(logo_budgets, str) else list(logo_budgets)
    logo = parse_budgets(logo_items) if any(str(i).strip() for i in logo_items) else []
    blist += [b for b in logo if all((b.count, b.share) != (o.count, o.share) for o in blist)]
    extra_orders = dict(extra_orders or {})
    if cal is not None:
        extra_orders.setdefault(CAL, {})  # named now, ordered once the pools are known
    names = _strategy_names(strategies, extra_orders, depths)
    col = _prepare(runs, qrels, manifest, pooled=pooled, depth=depth, rel=level, ranking=ranking,
                   procedure=reuse.procedure if logo else "group")
    if cal is not None:
        extra_orders[CAL] = _cal_orders(col, cal, blist, level)
    if workers is None:
        workers = min(2, os.cpu_count() or 1) if col.base.num_rows >= PARALLEL_MIN_ROWS else 1
    if int(workers) < 1:
        raise InputError("bad-option", f"workers must be at least 1, got {workers}")
    workers = int(workers)
    if missing == "error":
        _refuse_missing(col)
    _universes(col, names, extra_orders or {})
    clock.append(time.perf_counter())
    orders = _orders(col, names, blist, params, workers)
    clock.append(time.perf_counter())
    plan = _variants(col, names, orders, blist, positives_only(ms[0]))
    chunks = plan.chunks(workers)
    if progress is not None:
        progress(0, total=len(chunks) + len(_at(plan, logo)))
    clock.append(time.perf_counter())
    values, miss = _score(col, plan, ms[0], missing, ranking, workers, progress)
    clock.append(time.perf_counter())
    boards = _leaderboards(col, plan, ms[0], values, miss, missing, float(alpha))
    clock.append(time.perf_counter())
    logo_rows = _logo(col, plan, boards, logo, reuse, str(ms[0]), level, missing, ranking, workers, manifest, progress)
    clock.append(time.perf_counter())
    res = _result_tables(col, plan, boards, logo_rows)
    res.params, res.notes = _statements(col, names, blist, logo, str(ms[0]), level, missing, ranking,
                                        float(alpha), params, reuse)
    if cal is not None:  # CAL's parameters, its seed among them, as the order was made
        res.params["cal"] = {"seed_k": cal.seed_k, **(cal.params or CalParams()).as_dict()}
    clock.append(time.perf_counter())
    res.timings = {"prepare": clock[1] - clock[0], "orders": clock[2] - clock[1], "variants": clock[3] - clock[2],
                   "scoring": clock[4] - clock[3], "leaderboards": clock[5] - clock[4], "logo": clock[6] - clock[5],
                   "tables": clock[7] - clock[6], "total": clock[7] - clock[0], "workers": workers,
                   "evaluate_calls": len(chunks), "scorings": plan.n_vt, "topic_scorings": plan.n_refs,
                   "list_lines_scored": plan.lines_scored, "rows": col.base.num_rows}
    return res


def _cal_orders(col: _Collection, cal: CalStrategy, blist: list, level: int) -> dict[str, list[str]]:
    """CAL's order over each study topic's pool, as far as the largest budget reaches."""
    pools = {q: col.tps[q] for q in col.topics if q in col.tps}
    relevant = {q: {d for d, g in col.truth[i].items() if g >= level} for i, q in enumerate(col.topics)}
    counts = [b.count for b in blist]
    budget = None if any(c is None for c in counts) else max(counts)
    return cal.orders(pools, relevant, budget)


def positives_only(m) -> bool:
    """Whether the measure ``m`` (ir-measures) is in :data:`POSITIVES_ONLY` (without
    ``judged_only``): its value on a topic depends only on the positively graded judgments and
    where the run ranks those documents, so judged sets with the same positive documents score the
    same."""
    return m.NAME in POSITIVES_ONLY and not m.params.get("judged_only")


def _strategy_names(strategies: Sequence[str] | str | None, extra: Mapping | None,
                    depths: Iterable[int] = ()) -> list[tuple[str, str, int]]:
    """``(name, kind, depth K)`` of every strategy of the study, in the order given, then the
    depth-K of ``depths``, extra orders last."""
    if strategies is None:
        given = available_strategies()
    else:
        given = [s.strip() for item in ([strategies] if isinstance(strategies, str) else strategies)
                 for s in str(item).split(",") if s.strip()]
    given += [f"{DEPTH_PREFIX}{str(k).strip()}" for k in depths]
    if not given and not extra:
        raise InputError("bad-option", "no strategy given")
    registered = set(available_strategies())
    out: list[tuple[str, str, int]] = []
    for name in given:
        k = name[len(DEPTH_PREFIX):] if name.startswith(DEPTH_PREFIX) else ""
        if name in registered:
            entry = (name, "adjudication", 0)
        elif extra and name in extra:  # an extra order named among the strategies: it comes last, as given
            continue
        elif name == CAL:
            raise InputError("bad-option", "strategy 'cal' needs the corpus and the topics (--corpus, --topics)")
        elif k.isascii() and k.lstrip("-").isdigit() and int(k) < 1:
            raise InputError("bad-option", f"{name}: the depth K of a depth-K pool must be at least 1")
        elif k.isascii() and k.isdigit() and int(k) >= 1:
            entry = (f"{DEPTH_PREFIX}{int(k)}", "depth", int(k))
        else:
            raise InputError("bad-option", f"unknown strategy {name!r}; strategies: {', '.join(sorted(registered))}, "
                             f"{DEPTH_PREFIX}K (the depth-K pool)" + (f", {', '.join(extra)}" if extra else ""))
        if entry[0] not in [e[0] for e in out]:
            out.append(entry)
    for name in extra or {}:
        if str(name) in [e[0] for e in out] or str(name) in registered or str(name).startswith(DEPTH_PREFIX):
            raise InputError("bad-option", f"extra order {name!r} has the name of a strategy; name it otherwise")
        out.append((str(name), "order", 0))
    return out


# ------------------------------------------------------------------------------- collection

@dataclass
class _Collection:
    """The runs, qrels, pool and per-topic document universes of one study (:func:`_prepare`)."""

    runs: pa.Table             # the run lines of the study topics, in the evaluation's ranking order
    base: pa.Table             # their run, qid, docid, score
    run_names: list[str]
    topics: list[str]
    qrels: pa.Table            # judged qrels of the topics, sorted
    info: pd.DataFrame         # run_info: run, group, type, pooled, unit
    pooled: list[str]
    depth: int
    rel: int
    pool: pa.Table
    tps: dict[str, TopicPool]
    starts: np.ndarray         # (runs, topics): first row of each run's list in ``base``
    ends: np.ndarray
    truth: list[dict[str, int]]  # per topic: docid -> qrels grade (judged rows)
    universe: list[np.ndarray] = field(default_factory=list)  # per topic: every document a study may judge, sorted
    grade: list[np.ndarray] = field(default_factory=list)     # per topic: the oracle's grades (0 outside the qrels)
    in_qrels: list[np.ndarray] = field(default_factory=list)
    pool_codes: list[np.ndarray] = field(default_factory=list)  # per topic: universe code of each pool document
    depth_docs: dict[int, list[np.ndarray]] = field(default_factory=dict)  # K -> per topic: the depth-K pool's codes
    extra: dict[str, list[np.ndarray]] = field(default_factory=dict)       # order name -> per topic: its codes

    @property
    def n_topics(self) -> int:
        return len(self.topics)

    @property
    def topic_rows(self) -> np.ndarray:
        """Per topic: the run lines of every run's list."""
        return (self.ends - self.starts).sum(axis=0)


def _prepare(runs: pa.Table, qrels: pa.Table, manifest: pd.DataFrame | None, *, pooled: Iterable[str] | None,
             depth: int, rel: int, ranking: str, procedure: str) -> _Collection:
    """The study's topics (the qrels' judged ones), its runs in the evaluation's ranking order, the
    pooled runs, their depth pool and each (run, topic) list's rows."""
    if int(depth) < 1:
        raise InputError("bad-option", f"pool depth must be >= 1, got {depth}")
    q = sort_qrels(judged(qrels.select(["qid", "docid", "rel"]).cast(QRELS_SCHEMA)))
    if q.num_rows == 0:
        raise InputError("no-judgments", "the qrels hold no judged (grade >= 0) documents")
    topics = qid_order(pc.unique(q["qid"]).to_pylist())
    run_names = sorted(set(pc.unique(runs["run"]).to_pylist()))
    if not run_names:
        raise InputError("no-runs", "no run retrieved anything")
    info = run_info(run_names, manifest, procedure=procedure, pooled=pooled)
    pooled_names = info.loc[info["pooled"], "run"].tolist()
    if not pooled_names:
        raise InputError("no-pooled-runs", "no run is pooled: the study needs the pool of at least one run")
    base = runs.filter(pc.is_in(runs["qid"], value_set=pa.array(topics, pa.string())))
    base = base.select(["run", "qid", "docid", "rank", "score"]).combine_chunks()
    pool = depth_pool(filter_runs(base, pooled_names), int(depth))
    tps = topic_pools(pool)
    if not tps:
        raise InputError("no-pool", f"no pooled run retrieved a document for any of the qrels' {len(topics)} judged "
                         "topic(s) (topic ids as the runs write them?): there is nothing to judge")
    tps = {t: tps.get(t) or pool_from_lists(t, {}) for t in topics}
    nT, nR = len(topics), len(run_names)
    rc = pc.index_in(base["run"], value_set=pa.array(run_names, pa.string())).to_numpy(zero_copy_only=False)
    qc = pc.index_in(base["qid"], value_set=pa.array(topics, pa.string())).to_numpy(zero_copy_only=False)
    g = rc.astype(np.int64) * nT + qc.astype(np.int64)
    score = base["score"].to_numpy()
    idx = canonical_indices(g, score.astype(np.float32) if ranking == "trec_eval" else score, base["docid"])
    if idx is not None:
        base, g = base.take(pa.array(idx)), g[idx]
    cells = np.arange(nR * nT)
    starts = np.searchsorted(g, cells, side="left").reshape(nR, nT)
    ends = np.searchsorted(g, cells, side="right").reshape(nR, nT)
    truth: list[dict[str, int]] = [{} for _ in topics]
    tpos = {t: i for i, t in enumerate(topics)}
    for qid, d, r in zip(q["qid"].to_pylist(), q["docid"].to_pylist(), q["rel"].to_pylist()):
        truth[tpos[qid]][d] = int(r)
    return _Collection(runs=base, base=base.select(["run", "qid", "docid", "score"]), run_names=run_names,
                       topics=topics, qrels=q,
                       info=info, pooled=pooled_names, depth=int(depth), rel=rel, pool=pool, tps=tps, starts=starts,
                       ends=ends, truth=truth)


def _refuse_missing(col: _Collection) -> None:
    """The ``error`` missing-topic policy, checked before any work (as evaluate() would)."""
    refuse_missing(col.run_names, col.topics, col.ends - col.starts == 0)


def _universes(col: _Collection, names: list[tuple[str, str, int]], extra: Mapping) -> None:
    """Per topic: every document a strategy may judge (the pool, the qrels, the depth-K pools, the
    extra orders), sorted, with the oracle's grades."""
    depth_lists: dict[int, dict[str, list[str]]] = {}
    for _, kind, k in names:
        if kind == "depth" and k not in depth_lists:
            depth_lists[k] = _depth_docs(col, k)
    orders = {name: _extra_order(col, name, extra[name]) for name, kind, _ in names if kind == "order"}
    for t, qid in enumerate(col.topics):
        tp = col.tps[qid]
        docs = set(tp.docids) | set(col.truth[t])
        for lists in depth_lists.values():
            docs.update(lists[qid])
        for o in orders.values():
            docs.update(o[qid])
        u = np.array(sorted(docs), dtype=object)
        col.universe.append(u)
        col.grade.append(np.array([max(col.truth[t].get(d, 0), 0) for d in u], np.int32))
        col.in_qrels.append(np.array([d in col.truth[t] for d in u], bool))
        ua = pa.array(u.tolist(), pa.string())
        col.pool_codes.append(_codes(pa.array(list(tp.docids), pa.string()), ua))
        for k, lists in depth_lists.items():
            col.depth_docs.setdefault(k, []).append(_codes(pa.array(lists[qid], pa.string()), ua))
        for name, o in orders.items():
            col.extra.setdefault(name, []).append(_codes(pa.array(o[qid], pa.string()), ua))


def _codes(values: pa.Array, universe: pa.Array) -> np.ndarray:
    """Each value's index in ``universe`` (-1: not in it)."""
    idx = pc.fill_null(pc.index_in(values, value_set=universe), -1)
    if isinstance(idx, pa.ChunkedArray):
        idx = idx.combine_chunks()
    return idx.to_numpy(zero_copy_only=False).astype(np.int64)


def _depth_docs(col: _Collection, k: int) -> dict[str, list[str]]:
    """Per topic: the documents of the depth-``k`` pool of the pooled runs."""
    dp = depth_pool(filter_runs(col.runs, col.pooled), k)
    out: dict[str, list[str]] = {t: [] for t in col.topics}
    for q, d in zip(dp["qid"].to_pylist(), dp["docid"].to_pylist()):
        out[q].append(d)
    return out


def _extra_order(col: _Collection, name: str, order: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """An order given by the caller, checked: one for every topic, no document twice."""
    got = {str(q): [str(d) for d in docs] for q, docs in order.items()}
    out = {}
    for qid in col.topics:
        if qid not in got:
            raise InputError("missing-topic", f"order {name!r} has no judging order for topic {qid}")
        seq = got[qid]
        if len(set(seq)) != len(seq):
            twice = next(d for i, d in enumerate(seq) if d in seq[:i])
            raise InputError("bad-order", f"order {name!r}, topic {qid}: document {twice!r} comes twice")
        out[qid] = seq
    return out


# ------------------------------------------------------------------------- replaying, forking

def _orders(col: _Collection, names: list[tuple[str, str, int]], blist: list[Budget], params: AdjudicateParams,
            workers: int) -> dict[str, list[np.ndarray]]:
    """Per adjudication strategy, per topic: the universe codes it judges, in order, up to the
    largest budget (one replay: the prefixes are the smaller budgets)."""
    todo = [n for n, kind, _ in names if kind == "adjudication"]
    spans = np.array_split(np.arange(col.n_topics), workers) if workers > 1 else [np.arange(col.n_topics)]
    tasks = [(n, int(s[0]), int(s[-1]) + 1) for n in todo for s in spans if len(s)]
    parts = fork_map(_order_task, tasks, {"col": col, "blist": blist, "params": params}, workers)
    out: dict[str, list[np.ndarray]] = {n: [] for n in todo}
    for (n, _, _), part in zip(tasks, parts):
        out[n] += part
    return out


def _order_task(task: tuple[str, int, int]) -> list[np.ndarray]:
    name, t0, t1 = task
    st = shared()
    col, blist, params = st["col"], st["blist"], st["params"]
    out = []
    for t in range(t0, t1):
        tp = col.tps[col.topics[t]]
        codes = col.pool_codes[t]
        n = max(b.judgments(tp.n_docs) for b in blist)
        if n == 0:
            out.append(np.zeros(0, np.int64))
            continue
        relevant = col.grade[t][codes] >= col.rel
        order = simulate_order(name, tp, relevant, budget=n, batch=params.batch, params=params)
        out.append(codes[order])
    return out


# ---------------------------------------------------------------------------- the variants

@dataclass
class _Variant:
    """One (strategy, budget) of the study: what it judges per topic and its scoring per topic."""

    strategy: str
    kind: str
    budget: Budget | None  # None: a depth-K pool (judged whole), or the full qrels
    judged: list[np.ndarray]  # per topic: universe codes judged, in judging order
    vt: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # per topic: its distinct scoring

    @property
    def label(self) -> str:
        return "pool" if self.budget is None else self.budget.label


@dataclass
class _Plan:
    """Every variant, and the distinct (topic, judgments) they need scored (``vt_*``)."""

    safe: bool
    topic_rows: np.ndarray
    variants: list[_Variant] = field(default_factory=list)
    full: _Variant | None = None
    keys: dict[tuple[int, bytes], int] = field(default_factory=dict)
    vt_topic: list[int] = field(default_factory=list)
    vt_codes: list[np.ndarray] = field(default_factory=list)
    n_refs: int = 0
    lines_scored: int = 0

    @property
    def n_vt(self) -> int:
        return len(self.vt_topic)

    def add(self, col: _Collection, v: _Variant) -> _Variant:
        """Give ``v`` its scoring per topic: the distinct judgments of that topic (the positive ones
        only for a measure of :data:`POSITIVES_ONLY`), numbered in order of first use."""
        vt = np.empty(col.n_topics, np.int64)
        for t, j in enumerate(v.judged):
            codes = np.sort(j)
            if self.safe:
                codes = codes[col.grade[t][codes] > 0]
            key = (t, codes.tobytes())
            i = self.keys.get(key)
            if i is None:
                i = self.keys[key] = len(self.vt_topic)
                self.vt_topic.append(t)
                self.vt_codes.append(codes)
            vt[t] = i
        self.n_refs += col.n_topics
        v.vt = vt
        return v

    def chunks(self, workers: int) -> list[np.ndarray]:
        """The scorings of one evaluate() call each (ascending): whole topics, their lists about
        :data:`CHUNK_ROWS` run lines, at least two calls per worker when there are several (so that
        they share the work), balanced by the lines read (list lines x scorings)."""
        if not self.vt_topic:
            return []
        vt_topic = np.array(self.vt_topic, np.int64)
        topics = np.unique(vt_topic)
        rows = self.topic_rows[topics]
        cost = rows * np.bincount(vt_topic, minlength=len(self.topic_rows))[topics]
        n = max(int(math.ceil(rows.sum() / CHUNK_ROWS)), 2 * workers if workers > 1 else 1)
        n = min(n, len(topics))
        cum = np.cumsum(cost)
        cuts = np.searchsorted(cum, cum[-1] * np.arange(1, n) / n, side="left") + 1
        bounds = sorted({0, len(topics), *(int(c) for c in cuts)})
        groups = [topics[a:b] for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
        return [np.flatnonzero(np.isin(vt_topic, g)) for g in groups]


def _variants(col: _Collection, names: list[tuple[str, str, int]], orders: dict[str, list[np.ndarray]],
              blist: list[Budget], safe: bool) -> _Plan:
    """The full qrels, then every (strategy, budget) in the order given (a depth-K pool once)."""
    plan = _Plan(safe=safe, topic_rows=col.topic_rows)
    plan.full = plan.add(col, _Variant("qrels", "qrels", None, [np.flatnonzero(m) for m in col.in_qrels]))
    for name, kind, k in names:
        if kind == "depth":
            plan.variants.append(plan.add(col, _Variant(name, kind, None, col.depth_docs[k])))
            continue
        seqs = orders[name] if kind == "adjudication" else col.extra[name]
        for b in blist:
            judged_ = [s[: b.judgments(col.tps[q].n_docs)] for s, q in zip(seqs, col.topics)]
            plan.variants.append(plan.add(col, _Variant(name, kind, b, judged_)))
    plan.n_refs -= col.n_topics  # the full qrels are no variant
    return plan


# ------------------------------------------------------------------------------- scoring

def _score(col: _Collection, plan: _Plan, m, missing: str, ranking: str, workers: int,
           progress: Callable[..., None] | None) -> tuple[np.ndarray, np.ndarray]:
    """Every distinct (topic, judgments): its per-run value and missing flag, ``(runs, scorings)``."""
    state = {"col": col, "plan": plan, "measure": m, "missing": missing, "ranking": ranking}
    chunks = plan.chunks(workers)
    results = fork_map(_score_task, chunks, state, workers, progress)
    nR = len(col.run_names)
    values, miss = np.full((nR, plan.n_vt), np.nan), np.zeros((nR, plan.n_vt), bool)
    for ids, (v, mi) in zip(chunks, results):
        values[:, ids], miss[:, ids] = v, mi
    plan.lines_scored = int(sum(plan.topic_rows[plan.vt_topic[v]] for v in range(plan.n_vt)))
    return values, miss


def _task_qrels(col: _Collection, plan: _Plan, vts: Iterable[int]) -> pa.Table:
    """The qrels of a chunk of scorings, each its own topic (named by its number)."""
    qid, docid, rel = [], [], []
    for v in vts:
        t, codes = plan.vt_topic[v], plan.vt_codes[v]
        if len(codes):
            qid += [str(v)] * len(codes)
            docid += col.universe[t][codes].tolist()
            rel += col.grade[t][codes].tolist()
        else:  # nothing judged: the topic still counts, with nothing relevant
            qid.append(str(v))
            docid.append(PLACEHOLDER_DOCID)
            rel.append(0)
    return pa.table({"qid": pa.array(qid, pa.string()), "docid": pa.array(docid, pa.string()),
                     "rel": pa.array(rel, pa.int32())})


def _score_task(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One evaluate() call: the scorings ``ids`` as topics of their own (``str(v)``), each on its
    topic's lists (``topic_of``). Returns their values and missing flags, ``(runs, len(ids))``."""
    st = shared()
    col, plan = st["col"], st["plan"]
    ev = evaluate(col.base, _task_qrels(col, plan, ids), [st["measure"]], missing=st["missing"],
                  run_names=col.run_names, ranking=st["ranking"],
                  topic_of={str(v): col.topics[plan.vt_topic[v]] for v in ids})
    pq = ev.per_query
    run_pos = {name: i for i, name in enumerate(col.run_names)}
    col_pos = {str(v): j for j, v in enumerate(ids)}
    r = np.array([run_pos[x] for x in pq["run"].to_pylist()], np.int64)
    c = np.array([col_pos[x] for x in pq["qid"].to_pylist()], np.int64)
    values, miss = np.full((len(col.run_names), len(ids)), np.nan), np.zeros((len(col.run_names), len(ids)), bool)
    values[r, c] = np.asarray(pq["value"].to_numpy(), float)
    miss[r, c] = np.asarray(pq["missing"].to_numpy(), bool)
    return values, miss


# --------------------------------------------------------------------------- leaderboards

@dataclass
class _Boards:
    """The leaderboards: the full qrels' and each variant's, with their comparisons."""

    full: np.ndarray               # per run: the score under the full qrels
    rank_full: np.ndarray
    scores: list[np.ndarray]       # per variant, per run
    ranks: list[np.ndarray]
    rows: list[dict]               # per variant: its comparison with the full leaderboard
    pairs: list[pd.DataFrame]      # per variant: the pairs whose significant difference changes


def _aggregate(m, values: np.ndarray, miss: np.ndarray, missing: str) -> np.ndarray:
    """Each run's score: the measure's own ir-measures aggregate of its per-topic values, over the
    topics the missing-topic policy keeps (as :func:`~qrelkit.evaluate.evaluate` aggregates)."""
    out = np.full(values.shape[0], np.nan)
    for r in range(values.shape[0]):
        use = ~miss[r] if missing == "skip" else np.ones(values.shape[1], bool)
        if use.any():
            agg = m.aggregator()
            for x in values[r][use]:
                agg.add(float(x))
            out[r] = float(agg.result())
    return out


def pair_tests(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Paired t-tests (scipy's ``ttest_rel``, two-sided) between every two runs of ``values``
    (runs x topics; a topic where either value is NaN is left out of that pair, as
    :func:`~qrelkit.evaluate.significance` does): the pairs' run indices ``i < j``, the mean
    difference (i - j) and the p-value (NaN when undefined, e.g. no difference at all)."""
    from scipy import stats  # lazy: scipy takes ~0.3 s to import, only a study's tests need it

    i, j = np.triu_indices(values.shape[0], 1)
    a, b = values[i], values[j]
    nan = bool(np.isnan(values).any())
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if len(i) == 0 or values.shape[1] == 0:
            return i, j, np.full(len(i), np.nan), np.full(len(i), np.nan)
        p = np.asarray(stats.ttest_rel(a, b, axis=1, nan_policy="omit" if nan else "propagate").pvalue, float)
        diff = np.nanmean(a - b, axis=1)
    return i, j, diff, p


def _changes(i, j, diff_f, p_f, diff, p, alpha: float) -> dict[str, np.ndarray]:
    """Which pairs' significant difference changes: ``lost`` (significant under the full qrels,
    not now), ``gained`` (the reverse) and ``reversed`` (significant both ways, opposite signs)."""
    sig_f = np.nan_to_num(p_f, nan=1.0) < alpha
    sig = np.nan_to_num(p, nan=1.0) < alpha
    return {"lost": sig_f & ~sig, "gained": ~sig_f & sig,
            "reversed": sig_f & sig & (np.sign(diff_f) != np.sign(diff))}


def _leaderboards(col: _Collection, plan: _Plan, m, values: np.ndarray, miss: np.ndarray, missing: str,
                  alpha: float) -> _Boards:
    """Each variant's leaderboard against the full one: Kendall's tau, tau_AP, rank drops, and the
    pairs whose significant difference changes."""
    names = col.run_names
    fv = plan.full.vt
    full = _aggregate(m, values[:, fv], miss[:, fv], missing)
    rank_full = competition_ranks(full, decimals=None)
    i, j, diff_f, p_f = pair_tests(np.where(miss[:, fv] & (missing == "skip"), np.nan, values[:, fv]))
    boards = _Boards(full=full, rank_full=rank_full, scores=[], ranks=[], rows=[], pairs=[])
    for v in plan.variants:
        x = np.where(miss[:, v.vt] & (missing == "skip"), np.nan, values[:, v.vt])
        s = _aggregate(m, values[:, v.vt], miss[:, v.vt], missing)
        rk = competition_ranks(s, decimals=None)
        corr = leaderboard_correlation(pd.Series(full, index=names), pd.Series(s, index=names))
        _, _, diff, p = pair_tests(x)
        ch = _changes(i, j, diff_f, p_f, diff, p, alpha)
        drop = rk - rank_full
        boards.scores.append(s)
        boards.ranks.append(rk)
        boards.rows.append({"kendall_tau": corr["kendall_tau"], "kendall_p": corr["kendall_p"],
                            "tau_ap": corr["tau_ap_a"], "max_rank_drop": int(max(0, drop.max())) if len(drop) else 0,
                            "runs_rank_changed": int((drop != 0).sum()),
                            **{f"significance_{k}": int(c.sum()) for k, c in ch.items()}})
        kind = np.select([ch["lost"], ch["gained"], ch["reversed"]], ["lost", "gained", "reversed"], "")
        sel = np.flatnonzero(kind != "")
        boards.pairs.append(pd.DataFrame({
            "strategy": v.strategy, "budget": v.label, "run_a": [names[a] for a in i[sel]],
            "run_b": [names[b] for b in j[sel]], "diff_full": diff_f[sel], "p_full": p_f[sel], "diff": diff[sel],
            "p": p[sel], "change": kind[sel]}))
    return boards


# ---------------------------------------------------------------------------- leave-out

def _partial_qrels(col: _Collection, judged_codes: Sequence[np.ndarray]) -> pa.Table:
    """The qrels found so far: the judged documents with the oracle's grades (0 outside the
    qrels), a placeholder non-relevant judgment for a topic with none (it stays a judged topic)."""
    qid, docid, rel = [], [], []
    for t, codes in enumerate(judged_codes):
        codes = np.sort(codes)
        if len(codes):
            qid += [col.topics[t]] * len(codes)
            docid += col.universe[t][codes].tolist()
            rel += col.grade[t][codes].tolist()
        else:
            qid.append(col.topics[t])
            docid.append(PLACEHOLDER_DOCID)
            rel.append(0)
    return pa.table({"qid": pa.array(qid, pa.string()), "docid": pa.array(docid, pa.string()),
                     "rel": pa.array(rel, pa.int32())})


LOGO_COLUMNS = {"mean_abs_diff": "logo_mean_abs_diff", "max_abs_diff": "logo_max_abs_diff",
                "max_rank_drop": "logo_max_rank_drop", "runs_rank_changed": "logo_runs_rank_changed",
                "kendall_tau": "logo_kendall_tau"}


def _logo(col: _Collection, plan: _Plan, boards: _Boards, logo: list[Budget], reuse: ReuseParams, mname: str,
          level: int, missing: str, ranking: str, workers: int, manifest: pd.DataFrame | None,
          progress: Callable[..., None] | None) -> dict[int, dict]:
    """Leave-out bias (:func:`~qrelkit.reuse.leave_out`, the official scores being the variant's)
    of every variant at a budget of ``logo``: variant index -> its summary row for the measure."""
    todo = _at(plan, logo)
    state = {"col": col, "plan": plan, "boards": boards, "reuse": reuse, "measure": mname, "rel": level,
             "missing": missing, "ranking": ranking, "manifest": manifest}
    return dict(zip(todo, fork_map(_logo_task, todo, state, workers, progress)))


def _at(plan: _Plan, logo: list[Budget]) -> list[int]:
    """The variants at a budget of ``logo`` (by value: ``10%`` is ``10.0%``)."""
    at = {(b.count, b.share) for b in logo}
    return [k for k, v in enumerate(plan.variants) if v.budget is not None and (v.budget.count, v.budget.share) in at]


def _logo_task(k: int) -> dict:
    st = shared()
    col, v, rp = st["col"], st["plan"].variants[k], st["reuse"]
    official = pa.table({"run": pa.array(col.run_names, pa.string()),
                         "measure": pa.array([st["measure"]] * len(col.run_names), pa.string()),
                         "value": pa.array(st["boards"].scores[k], pa.float64())})
    res = leave_out(col.runs, _partial_qrels(col, v.judged), st["manifest"], procedure=rp.procedure,
                    uniqueness=rp.uniqueness, pooled=col.pooled, depth=col.depth, pool=col.pool, orphans=rp.orphans,
                    orphan_depth=rp.orphan_depth, removal=rp.removal, measures=[st["measure"]], missing=st["missing"],
                    rel=st["rel"], official=official, workers=1, ranking=st["ranking"])
    row = res.summary.to_pylist()[0]
    return {new: row[old] for old, new in LOGO_COLUMNS.items()}


# -------------------------------------------------------------------------------- tables

SUMMARY_SCHEMA = pa.schema([
    ("strategy", pa.string()), ("kind", pa.string()), ("budget", pa.string()), ("judgments_mean", pa.float64()),
    ("judgments", pa.int64()), ("relevant_found_mean", pa.float64()), ("recall", pa.float64()),
    ("kendall_tau", pa.float64()), ("kendall_p", pa.float64()), ("tau_ap", pa.float64()),
    ("max_rank_drop", pa.int32()), ("runs_rank_changed", pa.int32()), ("significance_changes", pa.int32()),
    ("significance_lost", pa.int32()), ("significance_gained", pa.int32()), ("significance_reversed", pa.int32()),
    ("logo_mean_abs_diff", pa.float64()), ("logo_max_abs_diff", pa.float64()), ("logo_max_rank_drop", pa.int32()),
    ("logo_runs_rank_changed", pa.int32()), ("logo_kendall_tau", pa.float64()),
])
TOPICS_SCHEMA = pa.schema([
    ("strategy", pa.string()), ("budget", pa.string()), ("qid", pa.string()), ("pool", pa.int64()),
    ("judged", pa.int64()), ("relevant_found", pa.int64()), ("relevant", pa.int64()), ("recall", pa.float64()),
])
RUNS_SCHEMA = pa.schema([
    ("strategy", pa.string()), ("budget", pa.string()), ("run", pa.string()), ("group", pa.string()),
    ("pooled", pa.bool_()), ("score", pa.float64()), ("rank", pa.int32()), ("score_full", pa.float64()),
    ("rank_full", pa.int32()), ("rank_change", pa.int32()),
])
PAIRS_SCHEMA = pa.schema([
    ("strategy", pa.string()), ("budget", pa.string()), ("run_a", pa.string()), ("run_b", pa.string()),
    ("diff_full", pa.float64()), ("p_full", pa.float64()), ("diff", pa.float64()), ("p", pa.float64()),
    ("change", pa.string()),
])


def _frame(rows: list[dict] | pd.DataFrame, schema: pa.Schema) -> pa.Table:
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows, columns=schema.names)
    return pa.Table.from_pandas(df[schema.names], schema=schema, preserve_index=False)


def _result_tables(col: _Collection, plan: _Plan, boards: _Boards, logo_rows: dict[int, dict]) -> BudgetStudy:
    """The summary, per-topic, leaderboard and pairs tables, variants in the study's order."""
    pool = np.array([col.tps[q].n_docs for q in col.topics], np.int64)
    relevant = np.array([int((g[m] >= col.rel).sum()) for g, m in zip(col.grade, col.in_qrels)], np.int64)
    info = col.info.set_index("run")
    summary, topics, runs = [], [], []
    for k, v in enumerate(plan.variants):
        judged_n = np.array([len(j) for j in v.judged], np.int64)
        found = np.array([int((col.grade[t][j] >= col.rel).sum()) for t, j in enumerate(v.judged)], np.int64)
        ch = boards.rows[k]
        summary.append({"strategy": v.strategy, "kind": v.kind, "budget": v.label,
                        "judgments_mean": float(judged_n.mean()), "judgments": int(judged_n.sum()),
                        "relevant_found_mean": float(found.mean()),
                        "recall": float(found.sum() / relevant.sum()) if relevant.sum() else np.nan,
                        **ch, "significance_changes": ch["significance_lost"] + ch["significance_gained"]
                        + ch["significance_reversed"],
                        **{c: logo_rows.get(k, {}).get(c) for c in LOGO_COLUMNS.values()}})
        with np.errstate(divide="ignore", invalid="ignore"):
            rec = np.where(relevant > 0, found / np.maximum(relevant, 1), np.nan)
        topics.append(pd.DataFrame({"strategy": v.strategy, "budget": v.label, "qid": col.topics, "pool": pool,
                                    "judged": judged_n, "relevant_found": found, "relevant": relevant, "recall": rec}))
        runs.append(pd.DataFrame({
            "strategy": v.strategy, "budget": v.label, "run": col.run_names,
            "group": info.loc[col.run_names, "group"].astype(str).to_numpy(),
            "pooled": info.loc[col.run_names, "pooled"].to_numpy(bool), "score": boards.scores[k],
            "rank": boards.ranks[k], "score_full": boards.full, "rank_full": boards.rank_full,
            "rank_change": boards.ranks[k] - boards.rank_full}))
    empty = {s: pd.DataFrame(columns=s.names) for s in (TOPICS_SCHEMA, RUNS_SCHEMA, PAIRS_SCHEMA)}
    cat = lambda fs, s: pd.concat(fs, ignore_index=True) if fs else empty[s]  # noqa: E731
    return BudgetStudy(summary=_frame(summary, SUMMARY_SCHEMA),
                       topics=_frame(cat(topics, TOPICS_SCHEMA), TOPICS_SCHEMA),
                       runs=_frame(cat(runs, RUNS_SCHEMA), RUNS_SCHEMA),
                       pairs=_frame(cat([p for p in boards.pairs if len(p)], PAIRS_SCHEMA), PAIRS_SCHEMA), params={})


def _statements(col: _Collection, names: list[tuple[str, str, int]], blist: list[Budget], logo: list[Budget],
                mname: str, level: int, missing: str, ranking: str, alpha: float,
                params: AdjudicateParams, reuse: ReuseParams) -> tuple[dict, list[str]]:
    """The settings (``params``) and the statements (``notes``) of the report."""
    pool = np.array([col.tps[q].n_docs for q in col.topics], np.int64)
    relevant = int(sum(int((g[m] >= level).sum()) for g, m in zip(col.grade, col.in_qrels)))
    out = {
        "strategies": [n for n, _, _ in names], "kinds": {n: kind for n, kind, _ in names},
        "budgets": [b.label for b in blist], "logo_budgets": [b.label for b in logo], "depth": col.depth,
        "measure": mname, "relevance_level": level, "missing": missing, "ranking": ranking, "alpha": alpha,
        "test": "paired t-test (scipy.stats.ttest_rel), two-sided", "batch": params.batch,
        "constants": params.constants(), "runs": len(col.run_names), "pooled_runs": len(col.pooled),
        "topics": col.n_topics, "pool_documents": int(pool.sum()), "pool_mean": float(pool.mean()),
        "judged": int(col.qrels.num_rows), "relevant": relevant,
        "logo": {"procedure": reuse.procedure, "uniqueness": reuse.uniqueness, "orphans": reuse.orphans,
                 "removal": reuse.removal} if logo else None,
    }
    notes = [
        f"Pool: the depth-{col.depth} pool of {len(col.pooled)} pooled runs (of {len(col.run_names)}) over the "
        f"{col.n_topics} topics the qrels judge; {pool.mean():.1f} documents per topic on average "
        f"({int(pool.min())}-{int(pool.max())}).",
        f"Oracle: the qrels (grade >= {level} is relevant; a document outside them is not relevant, as in the "
        f"papers); {relevant} relevant documents of {col.qrels.num_rows} judged.",
        f"Strategies replayed once each to the largest budget in rounds of {params.batch} judgments (a round is "
        "chosen before its outcomes are seen); the smaller budgets are the order's prefixes. Constants: "
        + ", ".join(f"{k} {v:g}" for k, v in params.constants().items()) + ".",
        "Budgets: judgments per topic, or a share of each topic's pool rounded up; never more than the topic's pool. "
        "depth-K: the depth-K pool of the pooled runs, judged whole (its cost: its size).",
        f"Leaderboards: {mname} (ir-measures) of every run under the qrels found so far (judged documents with their "
        f"qrels grades; unjudged = not relevant) against the full qrels; missing-topic policy {missing}, ranking "
        f"{ranking}. Ranks are competition ranks; a rank drop is the rank now minus the rank under the full qrels.",
        f"Significance: paired t-test over topics between every two runs at alpha {alpha:g}; a pair changes when it is "
        "significant under one qrels and not the other (lost, gained) or significant under both with opposite signs "
        "(reversed).",
    ]
    empty = [q for q in col.topics if col.tps[q].n_docs == 0]
    if empty:
        notes.append(f"{len(empty)} judged topic(s) with an empty pool (no pooled run retrieved a document for them; "
                     f"they count with nothing found): {', '.join(empty[:5])}{' ...' if len(empty) > 5 else ''}.")
    notes.append("tau_AP is left blank while every run scores the same under the qrels found so far (it would rank "
                 "tied runs by name).")
    if logo:
        notes.append(f"Leave-out bias at {', '.join(b.label for b in logo)}: 'reuse leave-out' "
                     f"({reuse.procedure}, uniqueness {reuse.uniqueness}, orphans {reuse.orphans}) on each strategy's "
                     "qrels found so far, its leaderboard being the official one.")
    return out, notes
