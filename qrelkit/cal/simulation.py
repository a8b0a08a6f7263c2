"""Simulated CAL campaigns: the whole loop with an oracle assessor taken from qrels.

:func:`simulate_cal` runs, per topic, one or several CAL threads (:mod:`qrelkit.cal.loop`) in
rounds — each active thread issues its next batch, the oracle grades it, the stopping rules look
at the thread's judgments — and returns the judgment log, recall-vs-effort curves, the effort to
reach 75% and 95% recall, and where every stopping rule fired.

**Oracle.** A passage's grade is its grade in the qrels. Passages that the qrels do not grade
(and negative grades, "pooled, not judged") follow the *unjudged policy*: ``zero`` (default:
non-relevant, grade 0) or ``skip`` (the passage is issued and counts as effort, but gets no
label: it neither trains the model nor counts for the stopping rules). ``error_rate`` > 0
replaces a grade, with that probability, by another grade of the scale (seeded).

**Effort and recall** of a thread: effort = the number of passages in the thread's view (the
initial judgments it sees plus its own batches, encountered passages included — for ``all``:
every judgment of the topic, i.e. the campaign's cost); recall = truly relevant passages in that
view / R, "truly" by the truth qrels whatever the (simulated, possibly wrong) assessor said, so
recall never exceeds 1; the stopping rules and the model see the assessor's grades. R is the
number of relevant candidates of the thread (canonical passages only, within the fractional
collection for ``fractional``). Within a batch, passages count in rank order.
Recall at effort ``k`` equals ``ir_measures`` ``R@k`` of the judging order taken as a ranking (a
test checks this). ``new_judgments`` counts what a thread sent to the oracle. A topic that the
binarization (``params.relevant``) leaves with no relevant candidate has no recall: it is listed in
``no_relevant`` and its threads stop as ``no-relevant`` (with ``stop_when``, that rule still
decides when they stop); when that is every topic,
:func:`simulate_cal` raises ``no-relevant`` before any work. Threads stopped by ``max_effort`` are
listed in ``cut`` with their recall at the cut.

**Stopping rules** plug in by name: any object with ``name`` and
``decide(JudgingState) -> Decision`` (:mod:`qrelkit.cal.stopping`). After each batch of a thread,
every rule sees the thread's judged sequence; the first decision other than ``continue`` is
recorded with the effort and recall at that point. For the ``target`` rule each topic gets a
random sample of the thread's candidates (``draw_sample`` order) judged by the oracle until the
rule's ``size`` relevant passages are found; its cost is reported apart (``sample_judgments``),
and sample passages neither train the model nor are skipped by it. A thread stops when the ``stop_when`` rule
fires, when ``max_effort`` is reached or nothing is left to judge; without ``stop_when`` it runs
until every rule fired and recall reached ``until_recall``.

**Threads** are simulated in rounds (fractional, local, all), sharing one judgment log: no
passage is judged twice for a topic — a thread that reaches a passage judged by another thread
*encounters* it (the passage joins its view with its grade, at no oracle cost) — and ``all``
trains on everything (see :mod:`qrelkit.cal.loop`). A single thread alone is plain CAL.

:class:`BM25` ranks a corpus with the same tokenizer — the baseline of the effectiveness table.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numba as nb
import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.cal.features import Features, Vocabulary, chunks_of, row_pairs
from qrelkit.cal.loop import THREADS, CalParams, CalRanker, batch_size, candidate_rows, key64
from qrelkit.cal.scoring import LocalScorer
from qrelkit.cal.stopping import JudgingState, TargetSample, draw_sample
from qrelkit.dedupe.tokenize import Normalization, word_hashes
from qrelkit.errors import InputError
from qrelkit.io.atomic import atomic_path
from qrelkit.labels.params import LabelsParams
from qrelkit.params import AS_DECLARED, declared_defaults

UNJUDGED_POLICIES = ("zero", "skip")
TARGETS = (0.75, 0.95)
LOG_COLUMNS = ["qid", "thread", "iteration", "position", "docid", "grade", "relevant", "truly_relevant", "score"]


# --------------------------------------------------------------------------- oracle


class Oracle:
    """Grades from qrels for passages given as feature rows."""

    @declared_defaults(CalParams, scale=LabelsParams.KEYS["scale"])
    def __init__(self, qrels: pa.Table, features: Features, *, unjudged: str = "zero", error_rate: float = 0.0,
                 scale: Sequence[int] = AS_DECLARED, seed: int = AS_DECLARED) -> None:
        if unjudged not in UNJUDGED_POLICIES:
            raise InputError("bad-option", f"unjudged must be one of {', '.join(UNJUDGED_POLICIES)}, got {unjudged!r}")
        if not 0 <= error_rate <= 1:
            raise InputError("bad-option", "error_rate must be in [0, 1]")
        self.unjudged = unjudged
        self.error_rate = float(error_rate)
        self.scale = np.asarray(list(scale), np.int64)
        self.seed = int(seed)
        rows = features.rows_of(qrels["docid"])
        rel = qrels["rel"].to_numpy(zero_copy_only=False).astype(np.int64)
        qid = np.asarray(qrels["qid"].to_pylist(), dtype=object)
        keep = (rows >= 0) & (rel >= 0)
        self._truth: dict[str, dict[int, int]] = {}
        df = pd.DataFrame({"q": qid[keep], "r": rows[keep], "g": rel[keep]})
        for q, g in df.groupby("q", sort=False):
            self._truth[str(q)] = dict(zip(g["r"].tolist(), g["g"].tolist()))
        self.missing = int((rows < 0).sum())

    def topic_truth(self, topic: str) -> dict[int, int]:
        """row -> grade of a topic's graded passages."""
        return self._truth.get(str(topic), {})

    def grades(self, topic: str, rows: np.ndarray, *, rng: np.random.Generator | None = None) -> np.ndarray:
        """Grade of each row (float: NaN for "no label" under the ``skip`` policy)."""
        truth = self.topic_truth(topic)
        default = 0.0 if self.unjudged == "zero" else np.nan
        g = np.array([truth.get(int(r), default) for r in rows], dtype=np.float64)
        if self.error_rate > 0 and len(g):
            rng = rng or np.random.default_rng(self.seed)
            flip = rng.random(len(g)) < self.error_rate
            for i in np.flatnonzero(flip & ~np.isnan(g)):
                others = self.scale[self.scale != int(g[i])]
                if len(others):
                    g[i] = float(rng.choice(others))
        return g


# --------------------------------------------------------------------------- curves


def recall_curve(relevant_in_order: np.ndarray, R: int) -> pd.DataFrame:
    """``effort, found, recall`` after each judged passage (effort 1..n)."""
    rel = np.asarray(relevant_in_order, bool)
    found = np.cumsum(rel)
    effort = np.arange(1, len(rel) + 1)
    recall = found / R if R > 0 else np.full(len(rel), np.nan)
    return pd.DataFrame({"effort": effort, "found": found, "recall": recall})


def effort_to_recall(relevant_in_order: np.ndarray, R: int, target: float) -> int | None:
    """The smallest effort at which recall reaches ``target`` (None if never, or R = 0)."""
    if R <= 0:
        return None
    need = int(np.ceil(target * R - 1e-9))
    found = np.cumsum(np.asarray(relevant_in_order, bool))
    hit = np.flatnonzero(found >= need)
    return int(hit[0]) + 1 if len(hit) else None


def recall_at(relevant_in_order: np.ndarray, R: int, effort: int) -> float | None:
    """Recall after ``effort`` judged passages (all of them when fewer were judged)."""
    if R <= 0:
        return None
    rel = np.asarray(relevant_in_order, bool)[: max(int(effort), 0)]
    return float(rel.sum()) / R


# --------------------------------------------------------------------------- simulation


@dataclass
class SimulationResult:
    """What :func:`simulate_cal` returns.

    ``log``: one row per judged passage (qid, thread, iteration — 0 for initial judgments —,
    position in the thread's view, docid, grade, relevant (by that grade), truly_relevant (by the
    truth qrels), score). ``summary``: one row per topic
    and thread (R, effort, found, recall, effort to 75%/95% recall, recall at effort R and 2R,
    why the thread stopped). ``rules``: one row per topic, thread and rule (fired, action, reason,
    effort, recall when it fired). ``curves``: effort, found, recall per topic and thread.
    ``no_relevant``: topics with no relevant passage under the binarization (``params.relevant``;
    their recall is undefined, their threads stop as ``no-relevant``). ``cut``: the threads that
    ``max_effort`` stopped (qid, thread, R, effort, found, recall at the cut): their curves end
    there.
    """

    log: pd.DataFrame
    summary: pd.DataFrame
    rules: pd.DataFrame
    curves: pd.DataFrame
    params: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    no_relevant: list = field(default_factory=list)
    cut: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CUT_COLUMNS))


CUT_COLUMNS = ["qid", "thread", "R", "effort", "found", "recall"]


def topics_without_relevant(grades: Mapping[str, Iterable[int]], topics: Sequence[str], relevant: Iterable[int], *,
                            file: str | None = None) -> list[str]:
    """The topics (of ``topics``, in order) none of whose ``grades`` (topic -> its passages'
    grades) is in ``relevant``: the binarization leaves them no relevant passage, so recall is
    undefined for them. When that is every topic, the error ``no-relevant`` (e.g. binary qrels,
    grade 1, with the passage binarization 2, 3), naming the grades the qrels do have."""
    rel = {int(g) for g in relevant}
    none = [str(q) for q in topics if not any(int(g) in rel for g in grades.get(str(q), ()))]
    if topics and len(none) == len(topics):
        seen = sorted({int(g) for q in topics for g in grades.get(str(q), ())})
        raise InputError("no-relevant", f"no topic has a relevant passage when grades {', '.join(map(str, sorted(rel)))} "
                         f"count as relevant (the qrels' grades for these topics: {', '.join(map(str, seen)) or 'none'}); "
                         "set the relevant grades ([labels] passage_relevant, or --relevant; e.g. 1 for binary qrels)",
                         file=file)
    return none


def qrels_grades(qrels: pa.Table) -> dict[str, list[int]]:
    """topic -> the grades of its judged passages (negative grades, "not judged", left out)."""
    df = pd.DataFrame({"q": qrels["qid"].to_pylist(), "g": qrels["rel"].to_pylist()})
    df = df[df["g"] >= 0]
    return {str(q): g.tolist() for q, g in df.groupby("q", sort=False)["g"]}


def _state(passages: list[str], relevant: list[bool], batch_ends: list[int], *, budget, collection_size, topic, thread,
           sample=None):
    return JudgingState(passages=tuple(passages), relevant=np.asarray(relevant, bool), batch_ends=tuple(batch_ends),
                        budget=budget, collection_size=collection_size, topic=str(topic), thread=thread,
                        issued=frozenset(passages), sample=sample)


def _target_sample(features: Features, cand: np.ndarray | None, oracle: "Oracle", topic: str, size: int, seed: int,
                   rel_set: set, rng) -> tuple[Any, int]:
    """The target method's random sample of a thread's candidates (``draw_sample`` order), judged
    by the oracle until ``size`` relevant passages are found: (TargetSample, judgments made)."""
    ids = features.pids if cand is None else features.pids.take(pa.array(cand))
    order = draw_sample(ids.to_pylist(), len(ids), seed=seed, topic=topic)
    rows = features.rows_of(order)
    passages, relevant = [], []
    found = 0
    step = max(256, 8 * size)
    for start in range(0, len(rows), step):
        part = rows[start:start + step]
        g = oracle.grades(topic, part, rng=rng)
        for r, gg in zip(part.tolist(), g.tolist()):
            passages.append(order[len(passages)])
            rel = (not np.isnan(gg)) and int(gg) in rel_set
            relevant.append(rel)
            found += int(rel)
            if found >= size:
                return TargetSample(tuple(passages), tuple(relevant), False), len(passages)
    return TargetSample(tuple(passages), tuple(relevant), True), len(passages)


@dataclass
class _Thread:
    name: str
    ranker: CalRanker
    cand_mask: np.ndarray | None  # rows that are candidates (None: all)
    R: int
    collection_size: int  # number of candidate rows (cand_mask's count, or every row)
    iteration: int = 0
    view: list[int] = field(default_factory=list)  # indices into the topic log
    batch_ends: list[int] = field(default_factory=list)
    fired: dict = field(default_factory=dict)
    stopped: str = ""
    cost: int = 0  # passages this thread sent to the oracle (new judgments)
    sample: Any = None  # the target method's judged random sample
    sample_cost: int = 0
    evaluated: int = 0  # view length the rules last saw
    truly_relevant: frozenset = frozenset()  # the R relevant candidate rows, by the truth qrels

    def found(self, L_row) -> int:
        """Truly relevant passages in the view (recall's numerator: the truth qrels decide, not
        the simulated assessor, whose errors would otherwise count as found)."""
        return sum(1 for i in self.view if L_row[i] in self.truly_relevant)


@declared_defaults(CalParams, scale=LabelsParams.KEYS["scale"])
def simulate_cal(
    features: Features,
    topics: pd.DataFrame,
    qrels: pa.Table,
    *,
    threads: Sequence[str] = ("all",),
    params: CalParams = CalParams(),
    initial: pa.Table | pd.DataFrame | None = None,
    rules: Mapping[str, Any] | None = None,
    stop_when: str | None = None,
    max_effort: int = 1000,
    until_recall: float = 0.95,
    until_effort_r: float = 0.0,
    budget: int | None = None,
    fraction_ids: pa.Array | None = None,
    unjudged: str = "zero",
    error_rate: float = 0.0,
    scale: Sequence[int] = AS_DECLARED,
    progress: Callable[[str], None] | None = None,
    qrels_file: str | None = None,
    scorer=None,
) -> SimulationResult:
    """Simulate CAL for every topic of ``topics`` (columns qid, text) against ``qrels``.

    Parameters
    ----------
    threads:
        CAL threads to run side by side (``fractional``, ``local``, ``all``).
    params:
        The CAL parameters (batch sizes, negatives, C, relevant grades, seed).
    initial:
        Judgments made before CAL (qid, docid, and grade or rel), e.g. the judged pools: every
        thread sees them (the fractional thread those inside its collection); they count as
        effort. ``None``: CAL starts from the query alone.
    rules:
        Stopping rules by name (objects with ``decide``).
    stop_when:
        Name of the rule (in ``rules``) that ends a thread when it fires.
    max_effort:
        A thread issues no more batches once its view holds this many passages (initial judgments
        included); batches are cut to fit. A view can still grow past it by passages encountered
        in the last batch and, for ``all``, by the other threads' judgments.
    until_recall, until_effort_r:
        Without ``stop_when``: a thread runs until every rule fired, this recall is reached and
        at least ``until_effort_r * R`` passages are in its view (e.g. 2 to measure recall at
        effort 2R).
    budget:
        Passed to the rules as the judging budget of a thread.
    fraction_ids:
        The fractional collection (passage ids) — required for the ``fractional`` thread.
    unjudged, error_rate, scale:
        The oracle (see the module docs).
    qrels_file:
        Where ``qrels`` came from, named by the error ``no-relevant``.
    scorer:
        Who scores the feature shards (default: in this process;
        :class:`~qrelkit.cal.distributed.DaskScorer`: on Dask workers, the same results).
    """
    t_start = time.perf_counter()
    rules = dict(rules or {})
    cr, init, no_relevant = _cal_setup(features, topics, qrels, threads=threads, params=params, initial=initial,
                                       rules=rules, stop_when=stop_when, max_effort=max_effort,
                                       until_recall=until_recall, until_effort_r=until_effort_r, budget=budget,
                                       fraction_ids=fraction_ids, unjudged=unjudged, error_rate=error_rate,
                                       scale=scale, qrels_file=qrels_file)
    cr.scorer = scorer if scorer is not None else LocalScorer(features)
    out = _Outputs()
    for qid, text in zip(topics["qid"].astype(str), topics["text"].astype(str)):
        if progress is not None:
            progress(qid)
        log = _topic_log(init, qid, cr.rel_set)
        ths = _start_threads(cr, qid, text, log)
        rng_err = np.random.default_rng(np.random.SeedSequence([params.seed & (2**63 - 1), key64(qid), 7]))
        while True:
            active = [th for th in ths if not th.stopped]
            if not active:
                break
            for th in active:
                _advance(cr, th, ths, log, qid, rng_err)
        out.add_topic(qid, ths, log, rules)
    return out.result(features, cr, no_relevant, params, unjudged=unjudged, error_rate=error_rate,
                      seconds=time.perf_counter() - t_start)


@dataclass
class _CalRun:
    """The settings every topic of :func:`simulate_cal` shares."""

    features: Features
    oracle: "Oracle"
    params: CalParams
    threads: list[str]
    cand: dict  # thread -> candidate rows (None: all)
    masks: dict  # thread -> candidate mask (None: all)
    rules: dict
    stop_when: str | None
    max_effort: int
    until_recall: float
    until_effort_r: float
    budget: int | None
    rel_set: set
    target_size: int
    scorer: Any = None


def _cal_setup(features: Features, topics: pd.DataFrame, qrels: pa.Table, *, threads, params, initial, rules,
               stop_when, max_effort, until_recall, until_effort_r, budget, fraction_ids, unjudged, error_rate, scale,
               qrels_file) -> tuple[_CalRun, pd.DataFrame | None, list[str]]:
    """Check the options; the oracle, the threads' candidates, the initial judgments and the
    topics without a relevant passage."""
    if stop_when is not None and stop_when not in rules:
        raise InputError("bad-option", f"stop_when rule {stop_when!r} is not among the rules ({', '.join(rules) or 'none'})")
    threads = [t for t in THREADS if t in set(threads)]
    if not threads:
        raise InputError("bad-option", f"threads must be among {', '.join(THREADS)}")
    if "fractional" in threads and fraction_ids is None:
        raise InputError("bad-option", "the fractional thread needs the fractional collection (fraction_ids)")
    if max_effort < 1:
        raise InputError("bad-option", "max_effort must be at least 1")
    oracle = Oracle(qrels, features, unjudged=unjudged, error_rate=error_rate, scale=scale, seed=params.seed)
    base = candidate_rows(features)
    cand = {t: (candidate_rows(features, fraction_ids) if t == "fractional" else base) for t in threads}
    masks = {}
    for t, c in cand.items():
        if c is None:
            masks[t] = None
        else:
            m = np.zeros(features.n_rows, bool)
            m[c] = True
            masks[t] = m
    init = _initial_table(initial, features)
    rel_set = set(params.relevant)
    target_size = next((int(getattr(r, "size", 0)) for n, r in rules.items() if getattr(r, "name", n) == "target"), 0)
    topic_ids = topics["qid"].astype(str).tolist()
    no_relevant = topics_without_relevant({q: oracle.topic_truth(q).values() for q in topic_ids}, topic_ids, rel_set,
                                          file=qrels_file)
    cr = _CalRun(features=features, oracle=oracle, params=params, threads=threads, cand=cand, masks=masks, rules=rules,
                 stop_when=stop_when, max_effort=max_effort, until_recall=until_recall, until_effort_r=until_effort_r,
                 budget=budget, rel_set=rel_set, target_size=target_size)
    return cr, init, no_relevant


@dataclass
class _Log:
    """A topic's judgment log: one entry per judged passage (row, grade, thread, iteration,
    score); ``first`` maps a row to its entry."""

    rel_set: set
    row: list[int] = field(default_factory=list)
    grade: list[float] = field(default_factory=list)
    thread: list[str] = field(default_factory=list)
    iteration: list[int] = field(default_factory=list)
    score: list[float] = field(default_factory=list)
    first: dict[int, int] = field(default_factory=dict)

    def add(self, row: int, grade: float, thread: str, iteration: int, score: float) -> None:
        self.first[row] = len(self.row)
        self.row.append(row)
        self.grade.append(grade)
        self.thread.append(thread)
        self.iteration.append(iteration)
        self.score.append(score)

    def label_ok(self, i: int) -> bool:
        return not np.isnan(self.grade[i])

    def is_rel(self, i: int) -> bool:
        return self.label_ok(i) and int(self.grade[i]) in self.rel_set


def _topic_log(init: pd.DataFrame | None, qid: str, rel_set: set) -> _Log:
    """The topic's log, started with its initial judgments."""
    log = _Log(rel_set=rel_set)
    if init is not None:
        ti = init[init["qid"] == qid]
        for r, g in zip(ti["row"].tolist(), ti["grade"].tolist()):
            if r in log.first:
                continue
            log.add(int(r), float(g), "", 0, np.nan)
    return log


def _start_threads(cr: _CalRun, qid: str, text: str, log: _Log) -> list[_Thread]:
    """The topic's threads, each seeing the initial judgments inside its collection."""
    features, params = cr.features, cr.params
    truth = cr.oracle.topic_truth(qid)
    rel_rows = np.array([r for r, g in truth.items() if g in cr.rel_set], np.int64)
    ths: list[_Thread] = []
    samples: dict[str, tuple] = {}
    for t in cr.threads:
        m = cr.masks[t]
        rel_t = rel_rows if m is None or not len(rel_rows) else rel_rows[m[rel_rows]]
        rk = CalRanker(features, text, topic=qid, thread=t, candidates=cr.cand[t], params=params, scorer=cr.scorer)
        th = _Thread(name=t, ranker=rk, cand_mask=m, R=int(len(rel_t)),
                     collection_size=int(m.sum()) if m is not None else features.n_rows,
                     truly_relevant=frozenset(rel_t.tolist()))
        if cr.target_size:
            key = "fraction" if t == "fractional" else "base"
            if key not in samples:
                samples[key] = _target_sample(features, cr.cand[t], cr.oracle, qid, cr.target_size, params.seed,
                                              cr.rel_set,
                                              np.random.default_rng(np.random.SeedSequence([params.seed & (2**63 - 1), key64(qid), 11])))
            th.sample, th.sample_cost = samples[key]
        for i, r in enumerate(log.row):
            if m is None or m[r]:
                th.view.append(i)
        if th.view:
            th.batch_ends.append(len(th.view))
        ths.append(th)
    return ths


def _advance(cr: _CalRun, th: _Thread, ths: list[_Thread], log: _Log, qid: str, rng_err: np.random.Generator) -> None:
    """One step of an active thread: consult the rules, stop it, or judge its next batch."""
    rules, stop_when, max_effort = cr.rules, cr.stop_when, cr.max_effort
    if rules and th.evaluated != len(th.view):  # the view changed since the rules last looked
        _apply_rules(th, rules, log, cr.features, cr.budget)
        th.evaluated = len(th.view)
        if stop_when is not None and stop_when in th.fired:
            th.stopped = f"rule:{stop_when}"
            return
    if len(th.view) >= max_effort:
        th.stopped = "max-effort"
        return
    th.iteration += 1
    k = min(batch_size(cr.params, th.name, th.iteration), max_effort - len(th.view))
    own = np.array([log.row[i] for i in th.view], np.int64)
    vis = [i for i in th.view if log.label_ok(i)]
    train_rows = np.array([log.row[i] for i in vis], np.int64)
    train_rel = np.array([log.is_rel(i) for i in vis], bool)
    known = np.array(sorted(set(log.first) - set(own.tolist())), np.int64)
    b = th.ranker.next_batch(train_rows, train_rel, own, k, th.iteration, known_rows=known)
    if len(b.rows) == 0 or not b.new.any():
        th.stopped = "exhausted"
        return
    new_rows = b.rows[b.new]
    g = cr.oracle.grades(qid, new_rows, rng=rng_err)
    grade_of = dict(zip(new_rows.tolist(), g.tolist()))
    for r, s_, is_new in zip(b.rows.tolist(), b.scores.tolist(), b.new.tolist()):
        if is_new:
            log.add(int(r), grade_of[r], th.name, th.iteration, float(s_))
            for other in ths:  # a new judgment enters this thread's view and the all thread's
                if other is not th and other.name == "all" and (other.cand_mask is None or other.cand_mask[r]):
                    other.view.append(log.first[r])
        th.view.append(log.first[r])  # new or encountered
        th.cost += int(is_new)
    th.batch_ends.append(len(th.view))
    for o in ths:
        if o is not th and o.name == "all" and (not o.batch_ends or o.batch_ends[-1] != len(o.view)):
            o.batch_ends.append(len(o.view))
    _apply_rules(th, rules, log, cr.features, cr.budget)
    th.evaluated = len(th.view)
    recall = th.found(log.row) / th.R if th.R else 1.0
    if stop_when is not None:
        if stop_when in th.fired:
            th.stopped = f"rule:{stop_when}"
    elif len(th.fired) == len(rules) and recall >= cr.until_recall and len(th.view) >= cr.until_effort_r * th.R:
        th.stopped = "recall-reached" if th.R else "no-relevant"  # R = 0: no recall to reach


@dataclass
class _Outputs:
    """The rows of the result tables, topic by topic."""

    logs: list = field(default_factory=list)
    summaries: list = field(default_factory=list)
    rule_rows: list = field(default_factory=list)
    curves: list = field(default_factory=list)

    def add_topic(self, qid: str, ths: list[_Thread], log: _Log, rules: Mapping[str, Any]) -> None:
        for th in ths:
            order = [i for i in th.view]
            rel_seq = np.array([log.row[i] in th.truly_relevant for i in order], bool)
            self.summaries.append(_summary_row(qid, th, rel_seq))
            for name in rules:
                f = th.fired.get(name)
                self.rule_rows.append({"qid": qid, "thread": th.name, "rule": name, "fired": f is not None,
                                       "action": f["action"] if f else "continue", "reason": f["reason"] if f else "",
                                       "effort": f["effort"] if f else None, "found": f["found"] if f else None,
                                       "recall": f["recall"] if f else None})
            c = recall_curve(rel_seq, th.R)
            c.insert(0, "thread", th.name)
            c.insert(0, "qid", qid)
            self.curves.append(c)
            for pos, i in enumerate(order, 1):
                self.logs.append((qid, log.thread[i] or "initial", log.iteration[i], pos, log.row[i], log.grade[i],
                                  log.is_rel(i), log.row[i] in th.truly_relevant, log.score[i], th.name))

    def result(self, features: Features, cr: _CalRun, no_relevant: list[str], params: CalParams, *, unjudged: str,
               error_rate: float, seconds: float) -> SimulationResult:
        log = pd.DataFrame(self.logs, columns=["qid", "source", "iteration", "position", "row", "grade", "relevant",
                                               "truly_relevant", "score", "thread"])
        if len(log):
            log["docid"] = features.pid_list(log["row"].to_numpy())
        else:
            log["docid"] = pd.Series([], dtype=object)
        log = log[["qid", "thread", "source", "iteration", "position", "docid", "grade", "relevant", "truly_relevant",
                   "score"]]
        log["grade"] = log["grade"].astype("Float64").round().astype("Int32")
        summary = pd.DataFrame(self.summaries)
        rules_df = pd.DataFrame(self.rule_rows, columns=["qid", "thread", "rule", "fired", "action", "reason", "effort",
                                                         "found", "recall"])
        curves_df = pd.concat(self.curves, ignore_index=True) if self.curves else \
            pd.DataFrame(columns=["qid", "thread", "effort", "found", "recall"])
        cut = summary[summary["stopped"] == "max-effort"][CUT_COLUMNS].reset_index(drop=True) if len(summary) else \
            pd.DataFrame(columns=CUT_COLUMNS)
        return SimulationResult(log=log, summary=summary, rules=rules_df, curves=curves_df, no_relevant=no_relevant,
                                cut=cut,
                                params={**params.as_dict(), "threads": list(cr.threads), "max_effort": cr.max_effort,
                                        "stop_when": cr.stop_when, "until_recall": cr.until_recall,
                                        "until_effort_r": cr.until_effort_r, "budget": cr.budget,
                                        "unjudged": unjudged, "error_rate": error_rate, "rules": sorted(cr.rules)},
                                timings={"total": seconds})


def _initial_table(initial, features: Features) -> pd.DataFrame | None:
    if initial is None:
        return None
    df = initial.to_pandas() if isinstance(initial, pa.Table) else pd.DataFrame(initial)
    gcol = "grade" if "grade" in df.columns else "rel" if "rel" in df.columns else None
    if gcol is None or "qid" not in df.columns or "docid" not in df.columns:
        raise InputError("missing-column", "initial judgments need qid, docid and grade (or rel)")
    df = df[df[gcol].notna()]
    df = df[df[gcol].astype(int) >= 0]
    rows = features.rows_of(pa.array(df["docid"].astype(str).tolist(), pa.string()))
    out = pd.DataFrame({"qid": df["qid"].astype(str).to_numpy(), "row": rows, "grade": df[gcol].astype(int).to_numpy()})
    return out[out["row"] >= 0]


def _apply_rules(th: _Thread, rules: Mapping[str, Any], log: _Log, features, budget) -> None:
    if not rules:
        return
    idx = [i for i in th.view if log.label_ok(i)]
    passages = features.pid_list(np.array([log.row[i] for i in idx], np.int64)) if idx else []
    relevant = [log.is_rel(i) for i in idx]
    # batch ends in the labelled sequence
    pos = {i: n for n, i in enumerate(idx, 1)}
    ends, last = [], 0
    for e in th.batch_ends:
        while e > 0 and th.view[e - 1] not in pos:
            e -= 1
        v = pos[th.view[e - 1]] if e > 0 else 0
        if v > last:
            ends.append(v)
            last = v
    state = _state(passages, relevant, ends, budget=budget, collection_size=th.collection_size, topic=th.ranker.topic,
                   thread=th.name, sample=th.sample)
    for name, rule in rules.items():
        if name in th.fired:
            continue
        d = rule.decide(state)
        if d.action != "continue":
            found = th.found(log.row)
            th.fired[name] = {"action": d.action, "reason": d.reason, "effort": len(th.view), "found": found,
                              "recall": (found / th.R) if th.R else None}


def _summary_row(qid: str, th: _Thread, rel_seq: np.ndarray) -> dict:
    R = th.R
    row = {"qid": qid, "thread": th.name, "R": R, "effort": len(rel_seq), "new_judgments": th.cost,
           "sample_judgments": th.sample_cost, "found": int(rel_seq.sum()),
           "recall": (float(rel_seq.sum()) / R) if R else None, "iterations": th.iteration, "stopped": th.stopped}
    for t in TARGETS:
        row[f"effort_{int(t * 100)}"] = effort_to_recall(rel_seq, R, t)
    row["recall_at_R"] = recall_at(rel_seq, R, R)
    row["recall_at_2R"] = recall_at(rel_seq, R, 2 * R)
    return row


def plot_curves(curves: pd.DataFrame, path: str | os.PathLike, *, title: str = "CAL: recall vs. effort") -> None:
    """One line per topic and thread (recall against effort), written as PNG (matplotlib Agg)."""
    import matplotlib  # lazy: matplotlib takes ~0.5 s to import, only plots need it

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # lazy: as above, after choosing the Agg backend

    threads = list(dict.fromkeys(curves["thread"])) if len(curves) else []
    fig, axes = plt.subplots(1, max(len(threads), 1), figsize=(5.5 * max(len(threads), 1), 4.2), squeeze=False)
    for ax, t in zip(axes[0], threads or [None]):
        sub = curves[curves["thread"] == t] if t is not None else curves
        for _, c in sub.groupby("qid", sort=False):
            ax.plot(c["effort"], c["recall"], lw=0.9, alpha=0.7)
        ax.axhline(0.75, color="grey", ls=":", lw=0.8)
        ax.axhline(0.95, color="grey", ls="--", lw=0.8)
        ax.set_xlabel("effort (passages judged)")
        ax.set_ylabel("recall")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{title} — {t}" if t else title, fontsize=10)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)


# --------------------------------------------------------------------------- BM25 baseline


@nb.njit(cache=True)
def _bm25_accumulate(indptr, rows, tfs, doclen, avgdl, idf_t, k1, b, out):
    for j in range(indptr[0], indptr[1]):
        r = rows[j]
        tf = tfs[j]
        out[r] += idf_t * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * doclen[r] / avgdl))


class BM25:
    """Okapi BM25 over the shared tokenizer (an inverted index in memory): the plain ranking that
    CAL must beat. ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` (Lucene's); query terms count once
    each."""

    def __init__(self, corpus, *, norm: Normalization = Normalization(), k1: float = 0.9, b: float = 0.4) -> None:
        self.norm, self.k1, self.b = norm, float(k1), float(b)
        vocab = Vocabulary()
        rows_l, cols_l, tf_l, pids, lens = [], [], [], [], []
        base = 0
        for chunk in chunks_of(corpus)():
            offsets, hashes = word_hashes(chunk["text"], norm)
            cols = vocab.assign(hashes)
            nuniq, idx, tf = row_pairs(offsets, cols, vocab.n)
            rows_l.append(np.repeat(np.arange(base, base + len(nuniq)), nuniq))
            cols_l.append(idx)
            tf_l.append(tf)
            lens.append(np.diff(offsets))
            p = chunk["pid"]
            pids.append(p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p)
            base += len(nuniq)
        self.vocab = vocab
        self.n = base
        self.pids = pa.concat_arrays(pids).cast(pa.string()) if pids else pa.array([], pa.string())
        rows = np.concatenate(rows_l) if rows_l else np.zeros(0, np.int64)
        cols = np.concatenate(cols_l) if cols_l else np.zeros(0, np.int32)
        tfs = np.concatenate(tf_l) if tf_l else np.zeros(0, np.float32)
        order = np.argsort(cols, kind="stable")
        self.post_rows = rows[order]
        self.post_tf = tfs[order].astype(np.float64)
        self.post_ptr = np.zeros(vocab.n + 1, np.int64)
        np.cumsum(np.bincount(cols, minlength=vocab.n), out=self.post_ptr[1:])
        self.doclen = (np.concatenate(lens) if lens else np.zeros(0, np.int64)).astype(np.float64)
        self.avgdl = float(self.doclen.mean()) if self.n else 1.0
        df = np.diff(self.post_ptr).astype(np.float64)
        self.idf = np.log1p((self.n - df + 0.5) / (df + 0.5))

    def scores(self, query: str) -> np.ndarray:
        _, hashes = word_hashes(pa.array([query], pa.string()), self.norm)
        cols = np.unique(self.vocab.lookup(hashes))
        out = np.zeros(self.n, np.float64)
        for c in cols[cols >= 0]:
            _bm25_accumulate(self.post_ptr[c : c + 2], self.post_rows, self.post_tf, self.doclen, self.avgdl,
                             float(self.idf[c]), self.k1, self.b, out)
        return out

    def ranking(self, query: str) -> np.ndarray:
        """Row order by score descending, then pid ascending."""
        s = self.scores(query)
        pid = np.asarray(self.pids.to_pylist(), dtype=object)
        return np.lexsort((pid, -s))
