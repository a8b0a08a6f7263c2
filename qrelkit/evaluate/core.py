"""Scoring runs with ir-measures: canonical order, judged topics only, a stated missing-topic policy.

:func:`evaluate` is the entry point (:func:`evaluate_sets` does the same for several judgment sets
at once, reading the runs once). What it does, in order:

1. **Judged topics.** Negative grades ("pooled, not judged") are dropped from the qrels; the
   topics left are the *judged topics*, the only ones scored and averaged over.
2. **Runs filtered to judged topics** first (the rest can never count, and skipping them is what
   makes evaluation fast).
3. **Ranking order** (``ranking``, :data:`RANKINGS`). By default (``trec_eval``) each topic's
   documents are ordered as trec_eval orders them: by the score held as a 32-bit float (trec_eval
   reads scores into ``float sim``, and so does pytrec_eval), so scores equal in float32 tie, and
   ties by docid descending. ``exact`` orders by the 64-bit score (qrelkit's canonical run order,
   :mod:`qrelkit.io.runs`), ties by docid descending. A table not in the chosen order is put in
   it. Each document is then handed to ir-measures with the score ``-rank``: no two documents
   of a topic tie, so every provider (pytrec_eval breaks ties by docid descending, the msmarco
   and judged providers by docid ascending) sees the same ranking.
4. **ir-measures** computes every value: one evaluator is built for the qrels and each run is
   passed to it. A measure with a cutoff that only looks at the first k documents (P, RR, nDCG,
   AP, R, Success, Judged, NCG at k, without ``judged_only``) is handed each run's first k
   documents only — the same value, less work; RR@k is evaluated as ir-measures' RR over those
   k documents (the same value by definition; ir-measures would otherwise send RR@k to its
   msmarco provider, which sorts every list in Python).
5. **Missing topics** — judged topics for which a run retrieved nothing — follow the policy
   ``missing``: ``zero`` (default; they score 0 for every measure and count in the average, as
   ``trec_eval -c`` and ir-measures do), ``skip`` (left out of that run's average, as trec_eval 9
   without ``-c``), or ``error`` (stop, as trec_eval 10 does). The policy is part of every report
   (:meth:`Evaluation.policy_line`).

Results: a per-query table (``run, qid, measure, value, missing``; one row per run, measure and
judged topic; a skipped topic has a null value) and a summary table (``run, measure, value,
topics, missing_topics``), each aggregated as ir-measures aggregates that measure (mean for
effectiveness measures, sum for counts such as ``NumRet``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

import ir_measures
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from qrelkit.errors import InputError
from qrelkit.evaluate.measures import computable, hashed_once, parse_measures, with_relevance
from qrelkit.io.qrels import QRELS_SCHEMA, judged
from qrelkit.io.runs import RUN_SCHEMA, canonical_indices, qid_order
from qrelkit.io.tables import read_metadata
from qrelkit.params import AS_DECLARED, declared_defaults, param
from qrelkit.evaluate.params import EvalParams

MISSING_POLICIES = {
    "zero": "judged topics missing from a run score 0 and count in its average (as trec_eval -c)",
    "skip": "judged topics missing from a run are left out of its average (as trec_eval 9 without -c)",
    "error": "a judged topic missing from a run is an error (as trec_eval 10)",
}

RANKINGS = {
    "trec_eval": "score as a 32-bit float descending, ties by docid descending (trec_eval, pytrec_eval)",
    "exact": "score as a 64-bit float descending, ties by docid descending",
}

PER_QUERY_SCHEMA = pa.schema([
    ("run", pa.string()), ("qid", pa.string()), ("measure", pa.string()), ("value", pa.float64()),
    ("missing", pa.bool_()),
])
SUMMARY_SCHEMA = pa.schema([
    ("run", pa.string()), ("measure", pa.string()), ("value", pa.float64()), ("topics", pa.int32()),
    ("missing_topics", pa.int32()),
])


@dataclass
class Evaluation:
    """What :func:`evaluate` returns."""

    per_query: pa.Table
    summary: pa.Table
    measures: list[str]
    topics: list[str]  # judged topics, natural order
    runs: list[str]
    missing: str
    missing_by_run: dict[str, list[str]] = field(default_factory=dict)
    unjudged_rows: int = 0  # run rows dropped because their topic is not judged
    unjudged_topics: int = 0
    ranking: str = param(EvalParams.KEYS, "ranking")

    def policy_line(self) -> str:
        n_missing = sum(len(v) for v in self.missing_by_run.values())
        runs_missing = sum(1 for v in self.missing_by_run.values() if v)
        return (f"missing-topic policy: {self.missing} — {MISSING_POLICIES[self.missing]}; "
                f"{len(self.topics)} judged topics; {n_missing} missing (run, topic) pairs in {runs_missing} "
                f"of {len(self.runs)} runs; {self.unjudged_topics} unjudged topics ({self.unjudged_rows} run "
                f"lines) not scored; ranking: {RANKINGS[self.ranking]}")

    def report(self) -> dict:
        return {
            "missing_policy": self.missing,
            "missing_policy_text": MISSING_POLICIES[self.missing],
            "judged_topics": len(self.topics),
            "runs": len(self.runs),
            "measures": self.measures,
            "missing_pairs": sum(len(v) for v in self.missing_by_run.values()),
            "runs_with_missing_topics": {r: v for r, v in self.missing_by_run.items() if v},
            "unjudged_topics": self.unjudged_topics,
            "unjudged_run_lines": self.unjudged_rows,
            "ranking": self.ranking,
            "ranking_text": RANKINGS[self.ranking],
        }

    def wide(self):
        """The summary as a pandas frame, one row per run, one column per measure."""
        df = self.summary.to_pandas()
        w = df.pivot(index="run", columns="measure", values="value")
        return w.reindex(index=self.runs, columns=self.measures)


def _as_table(t, columns: dict) -> pa.Table:
    """The named columns of a pyarrow table or pandas frame, cast to the given types (ids are
    strings, always)."""
    if not isinstance(t, pa.Table):
        t = pa.Table.from_pandas(pd.DataFrame(t), preserve_index=False)
    missing = [c for c in columns if c not in t.column_names]
    if missing:
        raise InputError("missing-column", f"table needs columns {', '.join(columns)} (missing {', '.join(missing)})")
    return pa.table({c: pc.cast(t[c], typ) for c, typ in columns.items()})


def qrels_dict(qrels: pa.Table) -> dict[str, dict[str, int]]:
    """``{qid: {docid: grade}}`` for the judged rows (grade >= 0)."""
    q = judged(qrels)
    if q.num_rows == 0:
        return {}
    # topics in order of first appearance, each one's rows in file order (a docid judged twice: the
    # last grade), one dict made per topic rather than one lookup per row
    enc = pc.dictionary_encode(q["qid"]).combine_chunks()
    codes = enc.indices.to_numpy(zero_copy_only=False)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(enc.dictionary) + 1)).tolist()
    docids = q["docid"].take(pa.array(order)).to_numpy(zero_copy_only=False).tolist()
    rels = q["rel"].take(pa.array(order)).to_numpy(zero_copy_only=False).astype(np.int64).tolist()
    return {qid: dict(zip(docids[s:e], rels[s:e]))
            for qid, s, e in zip(enc.dictionary.to_pylist(), bounds[:-1], bounds[1:])}


def _codes(values: pa.ChunkedArray | pa.Array, order: Sequence[str]) -> np.ndarray:
    idx = pc.index_in(values, value_set=pa.array(list(order), pa.string()))
    return idx.to_numpy(zero_copy_only=False).astype(np.int64)


def _group_codes(runs: pa.Table, topics: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Run names (sorted), run code and topic code (natural order) of every row."""
    run_names = sorted(set(pc.unique(runs["run"]).to_pylist()))
    return run_names, _codes(runs["run"], run_names), _codes(runs["qid"], topics)


@declared_defaults(EvalParams)
def _ensure_canonical(runs: pa.Table, topics: list[str], ranking: str = AS_DECLARED):
    """``runs`` (already restricted to judged topics) in the ``ranking`` order (grouped by run
    and topic), re-sorted only if needed, with its run names and the run and topic code of
    every row."""
    codes = _group_codes(runs, topics)
    if runs.num_rows < 2:
        return runs, codes
    names, rcode, qcode = codes
    group = rcode * (len(topics) + 1) + qcode
    score = runs["score"].to_numpy()
    if ranking == "trec_eval":
        score = score.astype(np.float32)  # trec_eval's `float sim`: equal in float32 is a tie
    idx = canonical_indices(group, score, runs["docid"])
    if idx is None:
        return runs, codes
    return runs.take(pa.array(idx)), (names, rcode[idx], qcode[idx])


# measures whose value depends on the first `cutoff` documents only (judged_only excepted)
_TOP_K_ONLY = {"P", "RR", "nDCG", "AP", "R", "Success", "Judged", "NCG"}


def _depth_groups(ms: Sequence[ir_measures.Measure]) -> dict[int | None, list[tuple[ir_measures.Measure, ir_measures.Measure]]]:
    """Measures grouped by the run depth they need: {depth or None (all): [(measure, proxy)]}.

    The proxy is what ir-measures evaluates: the measure itself, or for RR@k, RR over the first
    k documents."""
    groups: dict[int | None, list] = {}
    for m in ms:
        k = m.params.get("cutoff")
        if m.NAME in _TOP_K_ONLY and isinstance(k, int) and k > 0 and not m.params.get("judged_only", False):
            proxy = m
            if m.NAME == "RR":
                proxy = type(m)(**{p: v for p, v in m.params.items() if p != "cutoff"})
            groups.setdefault(k, []).append((m, proxy))
        else:
            groups.setdefault(None, []).append((m, m))
    return groups


def _run_dicts(runs: pa.Table, topics: list[str], depths: Iterable[int | None] = (None,), codes=None) -> dict:
    """``{depth: {run: {qid: {docid: -rank}}}}`` from a canonical table restricted to judged
    topics, each list cut to ``depth`` documents (``None``: all)."""
    n = runs.num_rows
    depths = list(depths)
    out: dict = {d: {} for d in depths}
    if n == 0:
        return out
    run_names, rcode, qcode = codes if codes is not None else _group_codes(runs, topics)
    group = rcode * (len(topics) + 1) + qcode
    starts = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    ends = np.concatenate((starts[1:], [n]))
    depth = int((ends - starts).max())
    neg = [-float(i) for i in range(1, depth + 1)]  # score = -rank: no ties, canonical order kept
    docids = runs["docid"].to_numpy(zero_copy_only=False).tolist()  # faster than to_pylist()
    for s, e, r, q in zip(starts.tolist(), ends.tolist(), rcode[starts].tolist(), qcode[starts].tolist()):
        rname = run_names[r]
        qid = topics[q]
        for d in depths:
            stop = e if d is None else min(e, s + d)
            out[d].setdefault(rname, {})[qid] = dict(zip(docids[s:stop], neg))  # zip stops with the list
    return out


@declared_defaults(EvalParams)
def evaluate(
    runs: pa.Table,
    qrels: pa.Table,
    measures: Iterable[str | ir_measures.Measure],
    *,
    missing: str = AS_DECLARED,
    rel: int | None = None,
    run_names: Sequence[str] | None = None,
    ranking: str = AS_DECLARED,
    topic_of: Mapping[str, str] | None = None,
) -> Evaluation:
    """Score every run of ``runs`` (:data:`qrelkit.io.runs.RUN_SCHEMA`) against ``qrels``
    (:data:`qrelkit.io.qrels.QRELS_SCHEMA`) with ir-measures.

    ``measures`` are ir-measures strings or objects; ``rel`` sets the binary relevance level of
    measures that did not set one (``AP`` -> ``AP(rel=2)``). ``missing`` is the missing-topic
    policy (:data:`MISSING_POLICIES`). ``run_names`` lists runs to report even if they retrieved
    nothing for any judged topic (default: the runs in ``runs``). ``ranking`` orders each
    topic's documents (:data:`RANKINGS`; default ``trec_eval``: float32 score, ties by docid
    descending). ``topic_of`` maps each qrels topic to the runs' topic whose lists it scores
    (default: its own): several judgment sets of one topic are then scored in one call, each
    run's list read once (a study of judging budgets); results are per qrels topic.

    Examples
    --------
    >>> from qrelkit.simulate.toy import toy_qrels, toy_runs
    >>> runs, qrels = toy_runs(), toy_qrels()
    >>> from qrelkit import evaluate
    >>> result = evaluate(runs, qrels, ["P@1", "R@2"])
    >>> result.summary.to_pandas().pivot(index="run", columns="measure", values="value").round(3).to_dict()
    {'P@1': {'a': 0.667, 'b': 0.333}, 'R@2': {'a': 0.833, 'b': 0.333}}
    """
    return _evaluate_sets(runs, [qrels], measures, missing=missing, rel=rel, run_names=run_names, ranking=ranking,
                          topic_of=topic_of)[0]


@declared_defaults(EvalParams)
def evaluate_sets(
    runs: pa.Table,
    qrels_sets: Sequence[pa.Table | Judgments],
    measures: Iterable[str | ir_measures.Measure],
    *,
    missing: str = AS_DECLARED,
    rel: int | None = None,
    run_names: Sequence[str] | None = None,
    ranking: str = AS_DECLARED,
) -> list[Evaluation]:
    """The same runs scored against several judgment sets (e.g. official qrels and a reduced copy
    of them): one :class:`Evaluation` per set, each what :func:`evaluate` gives for that set
    alone, but the runs are filtered, put in order and turned into ir-measures' input once for
    all the sets. A set is a qrels table or :class:`Judgments` made for the same ``measures``
    and ``rel`` (its evaluators are then built once for every call that scores against it; a
    table's topics score their own lists, as :func:`evaluate` without ``topic_of``). With
    ``missing="error"`` the first run (by name) that retrieved nothing for a judged topic of any
    set stops the call, with the error :func:`evaluate` gives for the first such set.

    Examples
    --------
    >>> from qrelkit.simulate.toy import toy_qrels, toy_runs
    >>> runs, qrels = toy_runs(), toy_qrels()
    >>> from qrelkit.evaluate import evaluate_sets
    >>> full, fewer = evaluate_sets(runs, [qrels, qrels.slice(0, 3)], ["P@1"])
    >>> full.summary["value"].to_pylist() == evaluate(runs, qrels, ["P@1"]).summary["value"].to_pylist()
    True
    """
    return _evaluate_sets(runs, list(qrels_sets), measures, missing=missing, rel=rel, run_names=run_names,
                          ranking=ranking)


class Judgments:
    """Qrels made ready to score runs with some measures: the judged topics and ir-measures'
    evaluators, built once. :func:`evaluate_sets` takes it in place of a qrels table, so that
    scoring batch after batch of runs against the same qrels builds them once. ``topic_of`` as
    in :func:`evaluate`. Its attributes are its working state, to be read, not changed; it does
    not pickle (its measures are ir-measures' objects made to hash once), so a process pool that
    needs it makes its own, or shares it by forking.

    >>> from qrelkit.simulate.toy import toy_qrels, toy_runs
    >>> from qrelkit.evaluate import Judgments, evaluate_sets
    >>> official = Judgments(toy_qrels(), ["P@1"])
    >>> [ev.summary["value"].to_pylist() for ev in evaluate_sets(toy_runs(), [official, official], ["P@1"])]
    [[0.6666666666666666, 0.3333333333333333], [0.6666666666666666, 0.3333333333333333]]
    """

    def __init__(self, qrels: pa.Table, measures: Iterable[str | ir_measures.Measure], *, rel: int | None = None,
                 topic_of: Mapping[str, str] | None = None):
        self.measures = computable(with_relevance(parse_measures(measures), rel))
        self.qd = qrels_dict(_as_table(qrels, {"qid": pa.string(), "docid": pa.string(), "rel": pa.int32()})
                             .cast(QRELS_SCHEMA))
        if not self.qd:
            raise InputError("no-judgments", "the qrels hold no judged (grade >= 0) documents")
        self.topics = qid_order(self.qd.keys())
        self.lists_of = _lists_of(self.topics, topic_of)
        self.own = all(self.lists_of[q] == q for q in self.topics)  # each topic scores its own lists
        self.tpos = {q: i for i, q in enumerate(self.topics)}
        mpos = {m: i for i, m in enumerate(self.measures)}
        self.evaluators = {}
        for d, pairs in _depth_groups(self.measures).items():
            pairs = [(m, hashed_once(p)) for m, p in pairs]
            # ir-measures hashes a measure by building its repr (microseconds, per value): look the
            # provider's measure objects up by identity, falling back to equality for any other object
            self.evaluators[d] = (ir_measures.evaluator([p for _, p in pairs], self.qd),
                                  {p: mpos[m] for m, p in pairs}, {id(p): mpos[m] for m, p in pairs})

    @property
    def names(self) -> list[str]:
        return [str(m) for m in self.measures]


def _unjudged(runs: pa.Table, kept: pa.Table, sets: list[Judgments], list_topics: list[str]) -> list[tuple[int, int]]:
    """Per set: the run lines and topics of ``runs`` it does not judge (``kept``: the lines of any
    set's topics). The runs' topics are found once, and only when a set leaves lines unjudged."""
    out = []
    run_topics = kept_counts = None
    for j in sets:
        own = set(j.lists_of.values())
        if len(own) == len(list_topics):  # the set judges every topic kept
            rows = runs.num_rows - kept.num_rows
        else:
            if kept_counts is None:
                vc = pc.value_counts(kept["qid"])
                kept_counts = dict(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()))
            rows = runs.num_rows - sum(kept_counts.get(q, 0) for q in own)
        if rows and run_topics is None:
            run_topics = set(pc.unique(runs["qid"]).to_pylist())
        out.append((rows, len(run_topics - own) if rows else 0))
    return out


def _evaluate_sets(runs: pa.Table, qrels_sets: list, measures, *, missing: str, rel: int | None,
                   run_names: Sequence[str] | None, ranking: str,
                   topic_of: Mapping[str, str] | None = None) -> list[Evaluation]:
    """:func:`evaluate` and :func:`evaluate_sets`, their defaults resolved."""
    if missing not in MISSING_POLICIES:
        raise InputError("bad-option", f"missing-topic policy must be one of {', '.join(MISSING_POLICIES)}, got {missing!r}")
    if ranking not in RANKINGS:
        raise InputError("bad-option", f"ranking must be one of {', '.join(RANKINGS)}, got {ranking!r}")
    ms = computable(with_relevance(parse_measures(measures), rel))
    names = [str(m) for m in ms]
    runs = _as_table(runs, {"run": pa.string(), "qid": pa.string(), "docid": pa.string(), "score": pa.float64()})
    sets = [q if isinstance(q, Judgments) else Judgments(q, ms, topic_of=topic_of) for q in qrels_sets]
    for j in sets:
        if j.names != names:
            raise InputError("bad-option", f"judgments prepared for measures {', '.join(j.names)}, scored with "
                             f"{', '.join(names)}")
    all_runs = sorted(set(run_names) if run_names is not None else set(pc.unique(runs["run"]).to_pylist()))
    list_topics = qid_order({t for j in sets for t in j.lists_of.values()})

    kept = runs.filter(pc.is_in(runs["qid"], value_set=pa.array(list_topics, pa.string())))
    unjudged = _unjudged(runs, kept, sets, list_topics)
    kept, codes = _ensure_canonical(kept.select(["run", "qid", "docid", "score"]), list_topics, ranking)
    per_depth = _run_dicts(kept, list_topics, _depth_groups(ms).keys(), codes)
    ends = np.cumsum([len(j.topics) for j in sets]).tolist()
    parts = [slice(e - len(j.topics), e) for j, e in zip(sets, ends)]  # each set's topics in the scored arrays
    values, is_missing = _score_runs(all_runs, per_depth, ms, sets, parts, missing)
    out = []
    for j, part, (unjudged_rows, unjudged_topics) in zip(sets, parts, unjudged):
        v, miss = values[:, :, part], is_missing[:, part]
        out.append(Evaluation(
            per_query=_per_query_table(all_runs, j.topics, names, v, miss),
            summary=_summary_table(all_runs, ms, names, v, miss, missing), measures=names, topics=list(j.topics),
            runs=all_runs, missing=missing,
            missing_by_run={r: [j.topics[i] for i in np.flatnonzero(miss[ri])] for ri, r in enumerate(all_runs)},
            unjudged_rows=int(unjudged_rows), unjudged_topics=int(unjudged_topics), ranking=ranking))
    return out


def _score_runs(all_runs: list[str], per_depth: dict, ms: list, sets: list[Judgments], parts: list[slice],
                missing: str) -> tuple[np.ndarray, np.ndarray]:
    """Every run's value of every measure on every topic of every set, each set's topics at its
    part (NaN for a skipped missing topic), and its missing flags: ``(runs, measures, topics)``
    and ``(runs, topics)``."""
    n = parts[-1].stop if parts else 0
    values = np.full((len(all_runs), len(ms), n), np.nan)
    is_missing = np.zeros((len(all_runs), n), bool)
    lists_of_run = next(iter(per_depth.values()), {})  # every depth holds the same runs and topics
    for ri, r in enumerate(all_runs):
        rd = lists_of_run.get(r, {})
        for j, part in zip(sets, parts):
            is_missing[ri, part] = [j.lists_of[q] not in rd for q in j.topics]
        if missing == "error" and is_missing[ri].any():
            for j, part in zip(sets, parts):  # the first set with a topic the run missed
                gone = [j.topics[i] for i in np.flatnonzero(is_missing[ri, part])]
                if gone:
                    raise missing_topic_error(r, gone)
        if rd:
            for j, part in zip(sets, parts):
                off = part.start
                for d, (evaluator, back, ids) in j.evaluators.items():
                    lists = per_depth[d][r]
                    for metric in evaluator.iter_calc(lists if j.own else {q: lists[j.lists_of[q]] for q in j.topics
                                                                           if j.lists_of[q] in lists}):
                        qi = j.tpos.get(metric.query_id)
                        if qi is None or is_missing[ri, off + qi]:
                            continue
                        mi = ids.get(id(metric.measure))
                        if mi is None:
                            mi = back[metric.measure]
                        values[ri, mi, off + qi] = float(metric.value)
        # a measure a provider left out for a retrieved topic gets that measure's default
        for mi, m in enumerate(ms):
            row = values[ri, mi]
            gap = np.isnan(row) & ~is_missing[ri]
            row[gap] = float(m.DEFAULT)
            if missing == "zero":
                row[is_missing[ri]] = float(m.DEFAULT)
    return values, is_missing


def missing_topic_error(run: str, topics: Sequence[str]) -> InputError:
    """The error of the ``error`` missing-topic policy: ``run`` retrieved nothing for the judged
    ``topics``."""
    return InputError("missing-topic", f"run {run!r} retrieved nothing for {len(topics)} judged topic(s): "
                      f"{', '.join(topics[:5])} (policy 'error'; use --missing zero or skip)")


def refuse_missing(run_names: Sequence[str], topics: Sequence[str], absent: np.ndarray) -> None:
    """The ``error`` missing-topic policy checked before any work, as :func:`evaluate` applies
    it: ``absent[r, t]`` says run ``r`` retrieved nothing for judged topic ``t``; the first such
    run (in the order of ``run_names``, by name for evaluate's) is :func:`missing_topic_error`."""
    rows = np.flatnonzero(absent.any(axis=1))
    if len(rows):
        r = int(rows[0])
        raise missing_topic_error(run_names[r], [topics[t] for t in np.flatnonzero(absent[r])])


def _lists_of(topics: list[str], topic_of: Mapping[str, str] | None) -> dict[str, str]:
    """Each qrels topic's runs' topic (``topic_of``; itself without). A judged topic ``topic_of``
    does not map is ``[bad-option]``."""
    if topic_of is None:
        return {q: q for q in topics}
    lacking = [q for q in topics if q not in topic_of]
    if lacking:
        raise InputError("bad-option", f"topic_of maps no runs' topic for {len(lacking)} judged topic(s): "
                         f"{', '.join(lacking[:5])}")
    return {q: str(topic_of[q]) for q in topics}


def _per_query_table(all_runs: list[str], topics: list[str], names: list[str], values: np.ndarray,
                     is_missing: np.ndarray) -> pa.Table:
    """The per-query table (:data:`PER_QUERY_SCHEMA`): run, measure, topic order."""
    nm, nq = values.shape[1], values.shape[2]
    nr = len(all_runs)
    run_col = np.repeat(np.arange(nr), nm * nq)
    meas_col = np.tile(np.repeat(np.arange(nm), nq), nr)
    qid_col = np.tile(np.arange(nq), nr * nm)
    flat = values.reshape(-1)
    miss_flat = np.repeat(is_missing[:, None, :], nm, axis=1).reshape(-1)
    return pa.table(
        {
            "run": pa.array(all_runs, pa.string()).take(pa.array(run_col)) if nr else pa.array([], pa.string()),
            "qid": pa.array(topics, pa.string()).take(pa.array(qid_col)),
            "measure": pa.array(names, pa.string()).take(pa.array(meas_col)),
            "value": pa.array(flat, pa.float64(), mask=np.isnan(flat)),
            "missing": pa.array(miss_flat, pa.bool_()),
        },
        schema=PER_QUERY_SCHEMA,
    )


def _summary_table(all_runs: list[str], ms: list, names: list[str], values: np.ndarray, is_missing: np.ndarray,
                   missing: str) -> pa.Table:
    """The per-run summary (:data:`SUMMARY_SCHEMA`): each measure's aggregate over the topics the
    missing-topic policy keeps."""
    nq = values.shape[2]
    rows = []
    for ri, r in enumerate(all_runs):
        use = ~is_missing[ri] if missing == "skip" else np.ones(nq, bool)
        for mi, m in enumerate(ms):
            agg = m.aggregator()
            for v in values[ri, mi][use]:
                agg.add(float(v))
            n_used = int(use.sum())
            val = float(agg.result()) if n_used else float("nan")
            rows.append((r, names[mi], val, n_used, int(is_missing[ri].sum())))
    return pa.table(
        {
            "run": pa.array([x[0] for x in rows], pa.string()),
            "measure": pa.array([x[1] for x in rows], pa.string()),
            "value": pa.array([x[2] for x in rows], pa.float64(), mask=np.isnan([x[2] for x in rows]) if rows else None),
            "topics": pa.array([x[3] for x in rows], pa.int32()),
            "missing_topics": pa.array([x[4] for x in rows], pa.int32()),
        },
        schema=SUMMARY_SCHEMA,
    )


def load_canonical_runs(path, topics: Iterable[str] | None = None) -> tuple[pa.Table, list[str]]:
    """Runs from a Parquet table of canonical runs (``qrelkit runs canonicalize -o runs.parquet``:
    validated once, in canonical order), only the rows of ``topics`` when given (the filter is
    applied while reading). Returns the table and the names of all runs in the file (a run may
    have no row for any of ``topics``)."""
    meta = read_metadata(path)
    if meta.get("kind") != "runs":
        raise InputError("not-canonical-runs", "not a table of canonical runs (write one with 'qrelkit runs canonicalize "
                         "-o runs.parquet')", file=str(path))
    try:
        # the run names as Parquet holds them, a dictionary: no string made for each of the rows
        names = pq.read_table(path, columns=["run"], read_dictionary=["run"]).column("run")
        filters = None if topics is None else [("qid", "in", sorted(set(str(t) for t in topics)))]
        t = pq.read_table(path, columns=RUN_SCHEMA.names, filters=filters)
    except (pa.ArrowInvalid, KeyError, OSError) as exc:
        raise InputError("unreadable", f"cannot read canonical runs: {exc}", file=str(path)) from None
    run_names = set()
    for chunk in names.chunks:
        if not isinstance(chunk, pa.DictionaryArray):
            chunk = pc.dictionary_encode(chunk)
        used = np.unique(chunk.indices.drop_null().to_numpy())
        run_names.update(chunk.dictionary.take(pa.array(used, pa.int64())).to_pylist())
    return t.select(RUN_SCHEMA.names).cast(RUN_SCHEMA), sorted(run_names)


def per_query_matrix(per_query: pa.Table, measure: str, runs: Sequence[str] | None = None):
    """A pandas frame topics x runs of one measure's per-query values (natural topic order)."""
    df = per_query.filter(pc.equal(per_query["measure"], measure)).to_pandas()
    if df.empty:
        raise InputError("unknown-measure", f"no per-query values for measure {measure!r}")
    w = df.pivot(index="qid", columns="run", values="value")
    w = w.reindex(index=qid_order(w.index), columns=list(runs) if runs is not None else sorted(w.columns))
    return w
