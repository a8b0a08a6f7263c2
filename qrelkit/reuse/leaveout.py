"""Leave-out simulations: how would each run have scored had it not contributed to the judgments?

:func:`leave_out` carries out NIST's leave-one-group-out practice (docs/protocol.md section 5, "Leave-one-group-
out"; docs/protocol.md section 1, "Reusability") and its two variants:

1. **Units.** ``procedure="group"`` (default) leaves out one group at a time, ``"run"`` one run,
   ``"type"`` one run type (a manifest column ``type``, e.g. neural / traditional).
2. **Unique documents.** For each unit, the judged documents that only it contributed (see
   :mod:`qrelkit.reuse.attribution` for the two definitions of "contributed" and the treatment of
   documents no run contributed) are removed from the qrels (``removal="remove"``) or marked
   unjudged (grade -1, ``removal="unjudged"``). Both give the same scores, because evaluation
   never counts a negative grade as judged; they differ in the reduced qrels written out.
3. **Re-scoring.** Every run of the left-out unit — pooled or not — is scored on its unit's
   reduced qrels, once per unit. Only the left-out unit's runs are re-scored (NIST practice): the
   other runs keep their official scores, and the "left-out leaderboard" puts every run at its own
   left-out score. Units without unique judged documents are not re-scored (their left-out scores
   equal the official ones). One :func:`qrelkit.evaluate.evaluate_sets` call per unit gives its
   runs' official scores (unless given) and their left-out scores, from one reading of the runs.
4. **Fixed topic set.** Scores average over the same judged topics as the official scores: a topic
   whose every judgment a unit contributed alone keeps one placeholder non-relevant judgment (a
   docid no run can retrieve), so it scores as a judged topic with nothing relevant rather than
   dropping out of that unit's averages.

Per run: official and left-out score, difference, % difference, official rank, rank on the
left-out leaderboard, rank of the left-out score among the other runs' official scores ("alone"),
and the unit's removed judged and relevant documents. Ranks are competition ranks (1 + the number
of runs with a strictly higher score). Per measure: mean and max absolute and % change, max rank
drop, runs whose rank changes, Kendall's tau-b (scipy) and tau_ap
(:func:`qrelkit.evaluate.leaderboard_correlation`, the official ranking as reference) between the
official and the left-out leaderboard. Per topic: judged, relevant, relevance density, the share
of relevant documents found by one group only, and the flags of the DL rule (density above
``density_threshold``, 0.4) and of Voorhees' warning (more than ``voorhees_share``, a third,
relevant).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.errors import InputError
from qrelkit.evaluate import (
    MISSING_POLICIES, RANKINGS, Judgments, computable, evaluate_sets, leaderboard_correlation, parse_measures,
    refuse_missing, with_relevance,
)
from qrelkit.io.order import competition_ranks
from qrelkit.io.qrels import QRELS_SCHEMA, judged, sort_qrels
from qrelkit.io.runs import qid_order
from qrelkit.pooler import pooled_flag
from qrelkit.pooler.pools import match_rows
from qrelkit.reuse.attribution import ORIGIN_NAMES, ORPHANS, UNIQUENESS, build_attribution, unique_ints
from qrelkit.reuse.forked import ForkPool, shared
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.pooler.params import POOL
from qrelkit.reuse.params import ReuseParams
from qrelkit.evaluate.params import EvalParams

DEFAULT_MEASURES = ["AP", "nDCG@10", "P@10", "Bpref", "Judged@10"]
PROCEDURES = {"group": "leave-one-group-out", "run": "leave-one-run-out", "type": "leave-one-type-out"}
REMOVAL = {
    "remove": "unique judged documents are removed from the qrels",
    "unjudged": "unique judged documents are kept in the qrels marked unjudged (grade -1)",
}
RESCORING = ("Only the runs of the left-out unit are re-scored, pooled or not (NIST practice); every other run "
             "keeps its official score. The left-out leaderboard puts every run at its own left-out score.")
#: docid of the placeholder judgment that keeps an emptied topic judged (whitespace: no TREC run can hold it)
PLACEHOLDER_DOCID = " qrelkit: no judgment left"
#: run lines from which leave_out() scores in two processes by default
PARALLEL_MIN_ROWS = 500_000


@dataclass
class LeaveOutResult:
    """What :func:`leave_out` returns: tables (pyarrow) plus the settings and statements the
    report must carry."""

    runs: pa.Table      # one row per (measure, run)
    summary: pa.Table   # one row per measure
    units: pa.Table     # one row per left-out unit
    topics: pa.Table    # one row per judged topic
    removed: pa.Table   # unit, qid, docid, rel, origin: every judged row a unit contributed alone
    params: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage (not part of any output)

    def tables(self) -> dict[str, pa.Table]:
        return {"runs": self.runs, "summary": self.summary, "units": self.units, "topics": self.topics,
                "removed": self.removed}


@declared_defaults(ReuseParams)
def run_info(run_names: Sequence[str], manifest: pd.DataFrame | None, *, procedure: str = AS_DECLARED,
             pooled: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per run (sorted): ``run, group, type, pooled, unit``.

    Groups come from the manifest (without one every run is its own group); ``pooled`` from the
    argument, else the manifest's ``pooled`` column, else every run is pooled. A run missing
    from the manifest is the error ``not-in-manifest``."""
    if procedure not in PROCEDURES:
        raise InputError("bad-option", f"procedure must be one of {', '.join(PROCEDURES)}, got {procedure!r}")
    names = sorted(run_names)
    df = pd.DataFrame({"run": names})
    if manifest is None:
        df["group"] = df["run"]
        df["type"] = None
        man_pooled = None
    else:
        m = manifest.copy()
        m.columns = [str(c).strip().lower() for c in m.columns]
        for c in ("run", "group"):
            if c not in m.columns:
                raise InputError("missing-column", f"manifest needs a {c!r} column")
        m["run"] = m["run"].astype(str)
        m = m.drop_duplicates("run").set_index("run")
        unknown = [r for r in names if r not in m.index]
        if unknown:
            raise InputError("not-in-manifest", f"{len(unknown)} run(s) not in the manifest: {', '.join(unknown[:5])}")
        df["group"] = [str(m.at[r, "group"]) for r in names]
        df["type"] = [None if "type" not in m.columns or pd.isna(m.at[r, "type"]) or str(m.at[r, "type"]).strip() == ""
                      else str(m.at[r, "type"]).strip() for r in names]
        man_pooled = [pooled_flag(m.at[r, "pooled"], r) for r in names] if "pooled" in m.columns else None
    if pooled is not None:
        ps = set(pooled)
        df["pooled"] = [r in ps for r in names]
    elif man_pooled is not None:
        df["pooled"] = man_pooled
    else:
        df["pooled"] = True
    if procedure == "group":
        df["unit"] = df["group"]
    elif procedure == "run":
        df["unit"] = df["run"]
    else:
        if manifest is None or df["type"].isna().any():
            missing = df.loc[df["type"].isna(), "run"].tolist()
            raise InputError("missing-value", "leave-one-type-out needs a manifest column 'type' with a value for "
                             f"every run (missing for: {', '.join(missing[:5])})")
        df["unit"] = df["type"]
    return df


# ------------------------------------------------------------------------ scoring (maybe forked)

def _reduced(st: dict, gone_rows: np.ndarray | None) -> pa.Table:
    """The qrels a unit's runs are scored with: the official qrels without (or with grade -1 on)
    ``gone_rows``, plus a placeholder judgment for every topic left without one."""
    rows: pa.Table = st["qrels"]
    if gone_rows is None:
        return rows
    gone = np.zeros(rows.num_rows, bool)
    gone[gone_rows] = True
    if st["removal"] == "remove":
        out = rows.filter(pa.array(~gone))
    else:
        rel = np.where(gone, -1, rows["rel"].to_numpy(zero_copy_only=False)).astype(np.int32)
        out = rows.set_column(2, "rel", pa.array(rel, pa.int32()))
    left = np.bincount(st["topic"][~gone], minlength=len(st["topics"]))
    emptied = np.flatnonzero((left == 0) & (st["judged_per_topic"] > 0))
    if len(emptied):
        ph = pa.table({"qid": pa.array([st["topics"][i] for i in emptied], pa.string()),
                       "docid": pa.array([PLACEHOLDER_DOCID] * len(emptied), pa.string()),
                       "rel": pa.array(np.zeros(len(emptied), np.int32))})
        out = pa.concat_tables([out, ph])
    return out


def _task(task: tuple) -> list[tuple]:
    """``(run codes, removed row indices or None, official?)`` -> ``(kind, runs, measures, values)``
    of the scorings it asks for, from one reading of the runs: the official scores (``official?``)
    and the left-out scores (removed rows given)."""
    codes, gone_rows, official = task
    st = shared()
    if st["run_bounds"] is not None:  # canonical tables hold each run's rows together: zero-copy slices
        starts, ends = st["run_bounds"]
        runs = pa.concat_tables([st["runs"].slice(int(starts[c]), int(ends[c] - starts[c])) for c in codes])
    else:
        runs = st["runs"].filter(pa.array(np.isin(st["run_code"], codes)))
    sets = []
    if official:
        if "_official_judgments" not in st:  # made ready once per process
            st["_official_judgments"] = Judgments(st["qrels"], st["measures"])
        sets.append(("official", st["_official_judgments"]))
    if gone_rows is not None:
        sets.append(("unit", _reduced(st, gone_rows)))
    evs = evaluate_sets(runs, [q for _, q in sets], st["measures"], missing=st["missing"], rel=st["rel"],
                        run_names=[st["run_names"][c] for c in codes], ranking=st["ranking"])
    return [(kind, ev.summary["run"].to_pylist(), ev.summary["measure"].to_pylist(), ev.summary["value"].to_pylist())
            for (kind, _), ev in zip(sets, evs)]


def _official_from(official, run_names: Sequence[str], names: Sequence[str]) -> dict:
    df = official.to_pandas() if isinstance(official, pa.Table) else pd.DataFrame(official)
    for c in ("run", "measure", "value"):
        if c not in df.columns:
            raise InputError("missing-column", f"official scores need columns run, measure, value (missing {c!r})")
    got = {(str(r), str(m)): float(v) if v is not None else np.nan for r, m, v in zip(df["run"], df["measure"], df["value"])}
    lacking = [(r, m) for m in names for r in run_names if (r, m) not in got]
    if lacking:
        r, m = lacking[0]
        raise InputError("missing-official", f"official scores lack {len(lacking)} (run, measure) pair(s), e.g. "
                         f"{r!r} {m!r} (measure names as evaluate() reports them, e.g. 'AP(rel=2)')")
    return got


# ------------------------------------------------------------------------------------ ranks

def competition_rank(values: np.ndarray) -> np.ndarray:
    """1 + the number of strictly higher values (NaN ranks last): the scores are written in full,
    so they are compared in full."""
    return competition_ranks(values, decimals=None)


def rank_alone(official: np.ndarray, left_out: np.ndarray) -> np.ndarray:
    """Rank of each run's left-out score among the *other* runs' official scores."""
    o = np.where(np.isnan(official), -np.inf, official)
    lo = np.where(np.isnan(left_out), -np.inf, left_out)
    higher = o[None, :] > lo[:, None]
    np.fill_diagonal(higher, False)
    return 1 + higher.sum(axis=1)


# ------------------------------------------------------------------------------ main entry

@declared_defaults(ReuseParams, missing=EvalParams.KEYS["missing"], ranking=EvalParams.KEYS["ranking"],
                   voorhees_share="voorhees_relevant_share", depth=POOL["depth"])
def leave_out(
    runs: pa.Table,
    qrels: pa.Table,
    manifest: pd.DataFrame | None = None,
    *,
    procedure: str = AS_DECLARED,
    uniqueness: str = AS_DECLARED,
    pooled: Iterable[str] | None = None,
    depth: int = AS_DECLARED,
    per_run_depth: Mapping[str, int] | None = None,
    pool: pa.Table | None = None,
    classes: pa.Table | None = None,
    orphans: str = AS_DECLARED,
    orphan_depth: int = AS_DECLARED,
    removal: str = AS_DECLARED,
    measures: Iterable[str] = DEFAULT_MEASURES,
    missing: str = AS_DECLARED,
    rel: int | None = None,
    topics: Iterable[str] | None = None,
    official: pa.Table | pd.DataFrame | None = None,
    density_threshold: float = AS_DECLARED,
    voorhees_share: float = AS_DECLARED,
    workers: int | None = None,
    ranking: str = AS_DECLARED,
    progress: Callable[..., None] | None = None,
) -> LeaveOutResult:
    """Leave-one-group-out (or -run-, -type-out) simulation over ``runs`` (canonical run table,
    :data:`qrelkit.io.runs.RUN_SCHEMA`) and ``qrels`` (:data:`qrelkit.io.qrels.QRELS_SCHEMA`).

    ``manifest`` (run, group, optionally pooled and type) assigns runs to units; ``pooled`` (run
    names) overrides its ``pooled`` column. Contributions come from the ``pool`` table's
    provenance or are recomputed at ``depth``/``per_run_depth`` (see
    :func:`qrelkit.reuse.attribution.build_attribution` for ``uniqueness``, ``classes``,
    ``orphans`` and ``orphan_depth``). ``measures``, ``missing``, ``rel`` and ``ranking`` are passed to
    :func:`qrelkit.evaluate.evaluate_sets`; ``rel`` (default 1) is also the grade from which a
    document counts as relevant in counts and densities. ``topics`` restricts the study to those
    topics. ``official`` (run, measure, value — e.g. the summary of ``evaluate`` on the same
    qrels with the same settings) skips the official scoring. ``workers``: processes that score
    (default: 2 when there are at least 500,000 run lines and the platform can fork, else 1);
    the results do not depend on it. With ``missing="error"``, the first run (by name) that
    retrieved nothing for a judged topic stops the study before any scoring, with the error
    :func:`qrelkit.evaluate.evaluate` gives. ``progress``: called as ``progress(0, total=<scorings>)``
    once the scorings are known (one per unit; with ``official`` given, one per unit with removed
    documents), then ``progress(1)`` after each.

    Examples
    --------
    The toy runs as two groups of one run each, pooled to depth 1:

    >>> from qrelkit.simulate.toy import toy_qrels, toy_runs
    >>> runs, qrels = toy_runs(), toy_qrels()
    >>> import pandas as pd
    >>> from qrelkit import leave_out
    >>> manifest = pd.DataFrame({"run": ["a", "b"], "group": ["g1", "g2"]})
    >>> result = leave_out(runs, qrels, manifest, depth=1, measures=["P@1"])
    >>> result.units.select(["unit", "removed_judged", "topics_emptied"]).to_pydict()
    {'unit': ['g1', 'g2'], 'removed_judged': [2, 1], 'topics_emptied': [2, 0]}
    >>> result.runs.select(["run", "official", "left_out"]).to_pydict()
    {'run': ['a', 'b'], 'official': [0.6666666666666666, 0.3333333333333333], 'left_out': [0.0, 0.0]}
    """
    _check_options(removal, uniqueness, orphans, missing)
    clock = [time.perf_counter()]
    if ranking not in RANKINGS:
        raise InputError("bad-option", f"ranking must be one of {', '.join(RANKINGS)}, got {ranking!r}")
    st = _prepare(runs, qrels, manifest, procedure=procedure, pooled=pooled, measures=measures, rel=rel,
                  topics=topics)
    if workers is None:
        workers = min(2, os.cpu_count() or 1) if st.runs.num_rows >= PARALLEL_MIN_ROWS else 1
    workers = max(1, int(workers))
    off_given = _official_from(official, st.run_names, st.mnames) if official is not None else None
    attribution = dict(uniqueness=uniqueness, depth=depth, per_run_depth=per_run_depth, pool=pool, classes=classes,
                       orphans=orphans, orphan_depth=orphan_depth)
    rm, results, n_tasks = _attribute_and_score(st, procedure=procedure, removal=removal, missing=missing, rel=rel,
                                                ranking=ranking, workers=workers, official_given=official is not None,
                                                attribution=attribution, progress=progress, clock=clock)
    clock.append(time.perf_counter())
    off, lo = _collected_scores(results)
    if off_given is not None:
        off = off_given
    runs_tab, summary_tab = _score_tables(st, rm, off, lo)
    units_tab = _unit_table(st, rm)
    topics_tab = _topic_table(st, rm, density_threshold, voorhees_share)
    removed = _removed_table(st, rm)
    settings = dict(procedure=procedure, uniqueness=uniqueness, depth=depth, per_run_depth=per_run_depth, pool=pool,
                    classes=classes, orphans=orphans, orphan_depth=orphan_depth, removal=removal, missing=missing,
                    ranking=ranking, density_threshold=density_threshold, voorhees_share=voorhees_share,
                    official_given=official is not None)
    params, notes = _statements(st, rm, off, manifest, settings)
    clock.append(time.perf_counter())
    timings = {"prepare": clock[1] - clock[0], "attribution": clock[2] - clock[1],
               "scoring_wait": clock[3] - clock[2], "tables": clock[4] - clock[3], "total": clock[4] - clock[0],
               "workers": workers, "evaluate_calls": n_tasks}
    return LeaveOutResult(runs=runs_tab, summary=summary_tab, units=units_tab, topics=topics_tab, removed=removed,
                          params=params, notes=notes, timings=timings)


# ------------------------------------------------------------------------ stages of leave_out

def _check_options(removal: str, uniqueness: str, orphans: str, missing: str) -> None:
    if removal not in REMOVAL:
        raise InputError("bad-option", f"removal must be one of {', '.join(REMOVAL)}, got {removal!r}")
    if uniqueness not in UNIQUENESS:
        raise InputError("bad-option", f"uniqueness must be one of {', '.join(UNIQUENESS)}, got {uniqueness!r}")
    if orphans not in ORPHANS:
        raise InputError("bad-option", f"orphans must be one of {', '.join(ORPHANS)}, got {orphans!r}")
    if missing not in MISSING_POLICIES:
        raise InputError("bad-option", f"missing-topic policy must be one of {', '.join(MISSING_POLICIES)}, got {missing!r}")


@dataclass
class _Study:
    """The runs, judgments, units and topics of one leave-out study (:func:`_prepare`)."""

    runs: pa.Table
    q: pa.Table  # judged qrels, sorted
    ms: list
    mnames: list[str]
    level: int
    run_names: list[str]
    info: pd.DataFrame
    unit_names: list[str]
    unit_of_run: np.ndarray
    group_names: list[str]
    group_of_run: np.ndarray
    pooled_runs: list[str]
    relv: np.ndarray  # relevant judged rows
    topics_list: list[str]
    tcode: np.ndarray  # topic index of every judged row
    judged_per_topic: np.ndarray
    unit_runs: list[np.ndarray] = field(default_factory=list)

    @property
    def nT(self) -> int:
        return len(self.topics_list)

    @property
    def nU(self) -> int:
        return len(self.unit_names)


def _prepare(runs: pa.Table, qrels: pa.Table, manifest: pd.DataFrame | None, *, procedure: str,
             pooled: Iterable[str] | None, measures: Iterable[str], rel: int | None,
             topics: Iterable[str] | None) -> _Study:
    """Measures, judged qrels and runs (restricted to ``topics``), units and topic codes."""
    ms = computable(with_relevance(parse_measures(list(measures)), rel))
    q = qrels.select(["qid", "docid", "rel"]).cast(QRELS_SCHEMA)
    if topics is not None:
        tset = pa.array(sorted({str(t) for t in topics}), pa.string())
        q = q.filter(pc.is_in(q["qid"], value_set=tset))
        runs = runs.filter(pc.is_in(runs["qid"], value_set=tset))
    q = sort_qrels(judged(q))
    if q.num_rows == 0:
        raise InputError("no-judgments", "the qrels hold no judged (grade >= 0) documents"
                         + (" for the given topics" if topics is not None else ""))
    run_names = sorted(set(pc.unique(runs["run"]).to_pylist()))
    if not run_names:
        raise InputError("no-runs", "no run retrieved anything")
    info = run_info(run_names, manifest, procedure=procedure, pooled=pooled)
    unit_names = sorted(set(info["unit"]))
    unit_code = {u: i for i, u in enumerate(unit_names)}
    group_names = sorted(set(info["group"]))
    gcode = {g: i for i, g in enumerate(group_names)}
    level = int(rel) if rel is not None else 1
    topics_list = qid_order(pc.unique(q["qid"]).to_pylist())
    tcode = pc.index_in(q["qid"], value_set=pa.array(topics_list, pa.string())).to_numpy(zero_copy_only=False)
    tcode = tcode.astype(np.int64)
    st = _Study(runs=runs, q=q, ms=ms, mnames=[str(m) for m in ms], level=level, run_names=run_names, info=info,
                unit_names=unit_names, unit_of_run=np.array([unit_code[u] for u in info["unit"]], np.int64),
                group_names=group_names, group_of_run=np.array([gcode[g] for g in info["group"]], np.int64),
                pooled_runs=info.loc[info["pooled"], "run"].tolist(),
                relv=q["rel"].to_numpy(zero_copy_only=False) >= level, topics_list=topics_list, tcode=tcode,
                judged_per_topic=np.bincount(tcode, minlength=len(topics_list)))
    st.unit_runs = [np.flatnonzero(st.unit_of_run == u) for u in range(st.nU)]
    return st


@dataclass
class _Removals:
    """What each unit contributed alone (the attribution's owners, counted per unit)."""

    own: dict  # owner and origin of every judged row, by unit
    gown: dict  # the same by group
    has: np.ndarray  # rows owned by one unit
    removed_judged: np.ndarray
    removed_rel: np.ndarray
    topics_affected: np.ndarray
    topics_emptied: np.ndarray


def _removals(st: _Study, att, orphans: str, procedure: str) -> _Removals:
    nT, nU, tcode, judged_per_topic = st.nT, st.nU, st.tcode, st.judged_per_topic
    own = att.owners(st.unit_of_run, nU, orphans)
    gown = own if procedure == "group" else att.owners(st.group_of_run, len(st.group_names), orphans)
    owner = own["owner"]
    has = owner >= 0
    ut = unique_ints(owner[has] * nT + tcode[has])
    per_ut = np.zeros((nU, nT), np.int64)
    np.add.at(per_ut, (owner[has], tcode[has]), 1)
    return _Removals(
        own=own, gown=gown, has=has,
        removed_judged=np.bincount(owner[has], minlength=nU),
        removed_rel=np.bincount(owner[has & st.relv], minlength=nU),
        topics_affected=np.bincount(ut // nT, minlength=nU) if len(ut) else np.zeros(nU, np.int64),
        topics_emptied=((per_ut == judged_per_topic[None, :]) & (judged_per_topic[None, :] > 0)).sum(axis=1))


def _attribute_and_score(st: _Study, *, procedure: str, removal: str, missing: str, rel: int | None, ranking: str,
                         workers: int, official_given: bool, attribution: dict, progress: Callable[..., None] | None,
                         clock: list[float]) -> tuple[_Removals, list[list[tuple]], int]:
    """Attribution, then one scoring task per unit (:func:`_task`), largest first: the official
    scores of its runs unless given, and their left-out scores when the unit contributed judged
    documents alone. Returns the removals, the scoring results and the number of tasks."""
    runs, run_names, nU = st.runs, st.run_names, st.nU
    rc = pc.index_in(runs["run"], value_set=pa.array(run_names, pa.string())).to_numpy(zero_copy_only=False)
    rc = rc.astype(np.int32)
    rows_per_run = np.bincount(rc, minlength=len(run_names))
    run_bounds = None
    if len(rc) and bool(np.all(rc[1:] >= rc[:-1])):
        ids = np.arange(len(run_names))
        run_bounds = (np.searchsorted(rc, ids, side="left"), np.searchsorted(rc, ids, side="right"))
    if missing == "error":
        _missing_topic_check(st, rc)
    scorer = ForkPool(_task, {"runs": runs, "run_code": rc, "run_bounds": run_bounds, "run_names": run_names,
                              "qrels": st.q, "topic": st.tcode, "topics": st.topics_list,
                              "judged_per_topic": st.judged_per_topic, "removal": removal, "measures": st.ms,
                              "missing": missing, "rel": rel, "ranking": ranking}, workers)
    try:
        clock.append(time.perf_counter())
        att = build_attribution(runs, st.q, pooled=st.pooled_runs, **attribution)
        rm = _removals(st, att, attribution["orphans"], procedure)
        clock.append(time.perf_counter())

        # per unit, largest first: its runs' official scores (unless given) and, when it contributed
        # judged documents alone, their left-out scores, from one reading of the runs
        owner = rm.own["owner"]
        rows_of_unit = np.argsort(np.where(rm.has, owner, nU), kind="stable")
        bounds = np.searchsorted(np.where(rm.has, owner, nU)[rows_of_unit], np.arange(nU + 1))
        units_todo = [u for u in range(nU) if rm.removed_judged[u] > 0 or not official_given]
        units_todo.sort(key=lambda u: (-int(rows_per_run[st.unit_runs[u]].sum()), u))
        for u in units_todo:
            gone = rows_of_unit[bounds[u]:bounds[u + 1]] if rm.removed_judged[u] > 0 else None
            scorer.submit((st.unit_runs[u].astype(np.int64), gone, not official_given))
        if progress is not None:
            progress(0, total=len(units_todo))
        if scorer.forked:  # while the workers score, this process loads what the tables need
            import scipy.stats  # noqa: F401  lazy: ~0.3 s, for the rank correlations
        results = scorer.results(progress)
    finally:
        scorer.close()
    return rm, results, len(units_todo)


def _missing_topic_check(st: _Study, rc: np.ndarray) -> None:
    """The ``error`` missing-topic policy before any scoring, as the official scores would apply it
    (:func:`qrelkit.evaluate.refuse_missing`: the first run by name)."""
    idx = pc.index_in(st.runs["qid"], value_set=pa.array(st.topics_list, pa.string()))
    judged_row = idx.is_valid().to_numpy(zero_copy_only=False)
    tc = pc.fill_null(idx, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    has = np.zeros((len(st.run_names), st.nT), bool)
    has[rc[judged_row], tc[judged_row]] = True
    refuse_missing(st.run_names, st.topics_list, ~has)


def _collected_scores(results: list[list[tuple]]) -> tuple[dict, dict]:
    """The official and the left-out scores by (run, measure)."""
    off: dict[tuple[str, str], float] = {}
    lo: dict[tuple[str, str], float] = {}
    for task in results:
        for kind, rr, mm, vv in task:
            target = off if kind == "official" else lo
            for r, m, v in zip(rr, mm, vv):
                target[(r, m)] = np.nan if v is None else float(v)
    return off, lo


_RUNS_SCHEMA = pa.schema([
    ("measure", pa.string()), ("run", pa.string()), ("group", pa.string()), ("unit", pa.string()),
    ("type", pa.string()), ("pooled", pa.bool_()), ("official", pa.float64()), ("left_out", pa.float64()),
    ("diff", pa.float64()), ("pct_diff", pa.float64()), ("official_rank", pa.int32()),
    ("left_out_rank", pa.int32()), ("rank_change", pa.int32()), ("left_out_rank_alone", pa.int32()),
    ("rank_change_alone", pa.int32()), ("removed_judged", pa.int64()), ("removed_relevant", pa.int64()),
])
_SUMMARY_SCHEMA = pa.schema([
    ("measure", pa.string()), ("runs", pa.int32()), ("units", pa.int32()), ("rescored_units", pa.int32()),
    ("mean_diff", pa.float64()), ("mean_abs_diff", pa.float64()), ("max_abs_diff", pa.float64()),
    ("run_max_abs_diff", pa.string()), ("mean_abs_pct_diff", pa.float64()), ("max_abs_pct_diff", pa.float64()),
    ("max_rank_drop", pa.int32()), ("runs_rank_changed", pa.int32()), ("max_rank_drop_alone", pa.int32()),
    ("runs_rank_changed_alone", pa.int32()), ("kendall_tau", pa.float64()), ("kendall_p", pa.float64()),
    ("tau_ap", pa.float64()),
])


def _measure_scores(st: _Study, rm: _Removals, m: str, off: dict, lo: dict) -> tuple[pd.DataFrame, dict]:
    """Per run (official, left-out, differences, ranks) and summary row of one measure."""
    run_names, info, unit_of_run = st.run_names, st.info, st.unit_of_run
    n_runs = len(run_names)
    o = np.array([off[(r, m)] for r in run_names], float)
    lv = np.array([lo.get((r, m), off[(r, m)]) for r in run_names], float)
    diff = lv - o
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(o != 0, 100.0 * diff / o, np.nan)
    r_off = competition_rank(o)
    r_lo = competition_rank(lv)
    r_alone = rank_alone(o, lv)
    f = pd.DataFrame({
        "measure": m, "run": run_names, "group": info["group"].to_numpy(), "unit": info["unit"].to_numpy(),
        "type": info["type"].to_numpy(), "pooled": info["pooled"].to_numpy(bool),
        "official": o, "left_out": lv, "diff": diff, "pct_diff": pct,
        "official_rank": r_off, "left_out_rank": r_lo, "rank_change": r_lo - r_off,
        "left_out_rank_alone": r_alone, "rank_change_alone": r_alone - r_off,
        "removed_judged": rm.removed_judged[unit_of_run], "removed_relevant": rm.removed_rel[unit_of_run],
    })
    f = f.sort_values(["official_rank", "run"], kind="stable")
    corr = leaderboard_correlation(pd.Series(o, index=run_names), pd.Series(lv, index=run_names))
    absd = np.abs(diff)
    absp = np.abs(pct)
    has_p = ~np.isnan(absp)
    drop = r_lo - r_off
    drop_alone = r_alone - r_off
    i_max = int(np.nanargmax(absd)) if n_runs and not np.all(np.isnan(absd)) else None
    row = {
        "measure": m, "runs": n_runs, "units": st.nU, "rescored_units": int((rm.removed_judged > 0).sum()),
        "mean_diff": float(np.nanmean(diff)) if n_runs else np.nan,
        "mean_abs_diff": float(np.nanmean(absd)) if n_runs else np.nan,
        "max_abs_diff": float(np.nanmax(absd)) if i_max is not None else np.nan,
        "run_max_abs_diff": run_names[i_max] if i_max is not None else None,
        "mean_abs_pct_diff": float(np.mean(absp[has_p])) if has_p.any() else np.nan,
        "max_abs_pct_diff": float(np.max(absp[has_p])) if has_p.any() else np.nan,
        "max_rank_drop": int(max(0, drop.max())) if n_runs else 0,
        "runs_rank_changed": int((drop != 0).sum()),
        "max_rank_drop_alone": int(max(0, drop_alone.max())) if n_runs else 0,
        "runs_rank_changed_alone": int((drop_alone != 0).sum()),
        "kendall_tau": corr["kendall_tau"], "kendall_p": corr["kendall_p"], "tau_ap": corr["tau_ap_a"],
    }
    return f, row


def _score_tables(st: _Study, rm: _Removals, off: dict, lo: dict) -> tuple[pa.Table, pa.Table]:
    """The per (measure, run) table and the per measure summary."""
    frames = []
    summary_rows = []
    for m in st.mnames:
        f, row = _measure_scores(st, rm, m, off, lo)
        frames.append(f)
        summary_rows.append(row)
    runs_df = pd.concat(frames, ignore_index=True)
    runs_tab = pa.Table.from_pandas(runs_df, preserve_index=False, schema=_RUNS_SCHEMA)
    summary_tab = pa.Table.from_pandas(pd.DataFrame(summary_rows), preserve_index=False, schema=_SUMMARY_SCHEMA)
    return runs_tab, summary_tab


def _unit_table(st: _Study, rm: _Removals) -> pa.Table:
    unit_runs, run_names = st.unit_runs, st.run_names
    return pa.table({
        "unit": pa.array(st.unit_names, pa.string()),
        "runs": pa.array([len(x) for x in unit_runs], pa.int32()),
        "pooled_runs": pa.array([int(st.info["pooled"].to_numpy()[x].sum()) for x in unit_runs], pa.int32()),
        "run_names": pa.array([",".join(run_names[i] for i in x) for x in unit_runs], pa.string()),
        "removed_judged": pa.array(rm.removed_judged, pa.int64()),
        "removed_relevant": pa.array(rm.removed_rel, pa.int64()),
        "topics_affected": pa.array(rm.topics_affected, pa.int32()),
        "topics_emptied": pa.array(rm.topics_emptied, pa.int32()),
        "rescored": pa.array(rm.removed_judged > 0),
    })


def _topic_table(st: _Study, rm: _Removals, density_threshold: float, voorhees_share: float) -> pa.Table:
    nT, tcode, relv, judged_per_topic = st.nT, st.tcode, st.relv, st.judged_per_topic
    g_one = rm.gown["owner"] >= 0
    orphan = rm.own["origin"] != 0
    rel_t = np.bincount(tcode[relv], minlength=nT)
    one_rel = np.bincount(tcode[relv & g_one], minlength=nT)
    with np.errstate(divide="ignore", invalid="ignore"):
        density = np.where(judged_per_topic > 0, rel_t / np.maximum(judged_per_topic, 1), np.nan)
        share_one = np.where(rel_t > 0, one_rel / np.maximum(rel_t, 1), np.nan)
    return pa.table({
        "qid": pa.array(st.topics_list, pa.string()),
        "judged": pa.array(judged_per_topic, pa.int64()),
        "relevant": pa.array(rel_t, pa.int64()),
        "density": pa.array(density, pa.float64(), mask=np.isnan(density)),
        "relevant_one_group": pa.array(one_rel, pa.int64()),
        "share_relevant_one_group": pa.array(share_one, pa.float64(), mask=np.isnan(share_one)),
        "judged_one_group": pa.array(np.bincount(tcode[g_one], minlength=nT), pa.int64()),
        "orphans": pa.array(np.bincount(tcode[orphan], minlength=nT), pa.int64()),
        "dl_flag": pa.array(density > density_threshold),
        "voorhees_flag": pa.array(density > voorhees_share),
    })


def _removed_table(st: _Study, rm: _Removals) -> pa.Table:
    """Every judged row a unit contributed alone, by unit, in qrels order."""
    rows, owner = st.q, rm.own["owner"]
    idx = np.flatnonzero(rm.has)
    rem_unit = np.asarray(st.unit_names, dtype=object)[owner[idx]] if len(idx) else np.zeros(0, object)
    removed = pa.table({
        "unit": pa.array(rem_unit, pa.string()),
        "qid": rows["qid"].take(pa.array(idx)), "docid": rows["docid"].take(pa.array(idx)),
        "rel": rows["rel"].take(pa.array(idx)),
        "origin": pa.array(ORIGIN_NAMES[rm.own["origin"][idx]], pa.string()),
    })
    if removed.num_rows:
        order = np.lexsort((np.arange(len(idx)), owner[idx]))  # by unit; rows already in qrels order
        removed = removed.take(pa.array(order))
    return removed


def _statements(st: _Study, rm: _Removals, off: dict, manifest: pd.DataFrame | None,
                s: dict) -> tuple[dict, list[str]]:
    """The settings (``params``) and the statements (``notes``) the report carries."""
    run_names, mnames, level, nU, nT = st.run_names, st.mnames, st.level, st.nU, st.nT
    n_runs = len(run_names)
    procedure, uniqueness, depth, per_run_depth = s["procedure"], s["uniqueness"], s["depth"], s["per_run_depth"]
    orphans, orphan_depth, removal, missing = s["orphans"], s["orphan_depth"], s["removal"], s["missing"]
    classes = s["classes"]
    orphan = rm.own["origin"] != 0
    n_orphans = int(orphan.sum())
    n_orphans_rel = int((orphan & st.relv).sum())
    attributed = int(((rm.own["origin"] == 1) & rm.has).sum())
    params = {
        "procedure": procedure, "uniqueness": uniqueness, "depth": int(depth),
        "per_run_depth": {str(k): int(v) for k, v in sorted((per_run_depth or {}).items())},
        "pool_provenance": "pool table" if s["pool"] is not None else "recomputed from the runs",
        "classes": classes is not None, "orphans": orphans,
        "orphan_depth": int(orphan_depth) if orphans == "retrieved" else None,
        "removal": removal, "measures": mnames, "missing": missing, "relevance_level": level, "ranking": s["ranking"],
        "density_threshold": float(s["density_threshold"]), "voorhees_share": float(s["voorhees_share"]),
        "official": "given" if s["official_given"] else "computed",
        "runs": n_runs, "pooled_runs": len(st.pooled_runs), "units": nU, "groups": len(st.group_names),
        "topics": nT, "judged": int(st.q.num_rows), "relevant": int(st.relv.sum()),
    }
    depth_txt = f"depth {depth}" + (f" (per-run depths for {len(per_run_depth)} runs)" if per_run_depth else "")
    notes = [
        f"Procedure: {PROCEDURES[procedure]} over {nU} units ({n_runs} runs, {len(st.pooled_runs)} pooled, "
        f"{len(st.group_names)} groups), {nT} judged topics.",
        f"Uniqueness ('{uniqueness}'): {UNIQUENESS[uniqueness]}; {depth_txt}; provenance "
        f"{params['pool_provenance']}" + ("; documents compared by near-duplicate class" if classes is not None else "")
        + ".",
        f"Documents without a contributing run ('{orphans}'): "
        + ORPHANS[orphans].format(depth=orphan_depth)
        + f". {n_orphans} judged documents ({n_orphans_rel} relevant) had no contributing run"
        + (f"; {attributed} of them were unique to one unit by retrieval" if orphans == "retrieved" else "") + ".",
        f"Removal ('{removal}'): {REMOVAL[removal]}; scores are the same either way.",
        RESCORING,
        f"Relevant means grade >= {level} (counts, density, relevant documents removed); measures: "
        f"{', '.join(mnames)}.",
        f"Missing-topic policy: {missing} — {MISSING_POLICIES[missing]}.",
        "Ranks are competition ranks (1 + runs with a strictly higher score). 'Left-out rank' is the rank on the "
        "leaderboard where every run is at its left-out score; 'alone' is the rank of the run's left-out score "
        "among the other runs' official scores. tau_ap takes the official ranking as reference.",
    ]
    man_run = None if manifest is None else next((c for c in manifest.columns if str(c).strip().lower() == "run"), None)
    if man_run is not None:
        absent = sorted(set(manifest[man_run].astype(str)) - set(run_names))
        if absent:
            notes.insert(1, f"{len(absent)} runs of the manifest have no run lines here (e.g. {', '.join(absent[:3])}) "
                         "and take no part: uniqueness is computed among the runs given.")
    flat = [m for m in mnames if np.nanmax(np.array([off[(r, m)] for r in run_names], float))
            == np.nanmin(np.array([off[(r, m)] for r in run_names], float))]
    if flat and n_runs > 1:
        notes.append(f"Every run has the same official {', '.join(flat)}: rank changes and Kendall's tau are not "
                     "informative there (tau is undefined for a constant leaderboard).")
    if int(rm.topics_emptied.sum()):
        notes.append(f"{int(rm.topics_emptied.sum())} (unit, topic) pairs lost every judgment; such a topic stays in the "
                     "unit's averages as judged with nothing relevant (placeholder judgment).")
    return params, notes


@declared_defaults(ReuseParams)
def reduced_qrels(qrels: pa.Table, removed: pa.Table, unit: str, removal: str = AS_DECLARED) -> pa.Table:
    """The qrels without (``"remove"``) or with grade -1 on (``"unjudged"``) the rows of
    ``removed`` (the :attr:`LeaveOutResult.removed` table) that belong to ``unit``."""
    if removal not in REMOVAL:
        raise InputError("bad-option", f"removal must be one of {', '.join(REMOVAL)}, got {removal!r}")
    q = qrels.select(["qid", "docid", "rel"]).cast(QRELS_SCHEMA)
    r = removed.filter(pc.equal(removed["unit"], unit)).select(["qid", "docid"])
    hit = match_rows(q, r.group_by(["qid", "docid"], use_threads=False).aggregate([]), ["qid", "docid"]) >= 0
    if removal == "remove":
        return sort_qrels(q.filter(pa.array(~hit)))
    rel = np.where(hit, -1, q["rel"].to_numpy(zero_copy_only=False)).astype(np.int32)
    return sort_qrels(q.set_column(2, "rel", pa.array(rel, pa.int32())))
