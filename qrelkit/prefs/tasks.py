"""Crowd tasks for side-by-side preference judgments: export, import, screening, re-issue,
agreement (docs/protocol.md section 2).

**Tasks.** The real pairs are put in a seeded random order and cut into tasks of
``pairs_per_task`` (10) pairs; the last task may hold fewer. Each task gets ``test_pairs`` (3)
test pairs: a known relevant passage of a topic (a qrel with grade >= ``test_min_rel``) against
an obviously off-topic passage, one known relevant to a *different* topic and not relevant to
this one. Within a task the order of the 13 comparisons and the left/right placement of each
are randomized with a generator seeded by (seed, task id), so a task's layout does not depend on
any other task. Task ids are ``<prefix><number>`` (``T00001``); a re-issued task is
``<id>.r<k>``.

Task table (:data:`TASK_SCHEMA`; the master copy, kept by the organizer) has one row per
(task, slot): ``task_id, slot, qid, query, kind (real|test), pair_id, doc_a, doc_b,
left_docid, right_docid, left_text, right_text, expected (left|right for test pairs),
offtopic_qid, exclude_workers``. The crowd export (:func:`export_view`,
:data:`EXPORT_COLUMNS`) leaves out everything that would reveal the test pairs: ``task_id,
slot, qid, query, left_docid, left_text, right_docid, right_text, choice``.

**Answers** (CSV/TSV/JSONL/Parquet) need ``task_id, slot, worker, choice``; ``choice`` is
``left``/``right`` (``l``/``r``, any case) or the chosen passage's id. Rules, as for assessor
batches: ``missing-column``; ``unknown-item`` (no such task and slot was issued);
``bad-choice`` (neither side of that slot); ``conflict`` (one worker, one slot, two different
choices). The same answer imported twice counts once; empty choices are unanswered and skipped.
Strict mode stops at the first error with file and line; lenient mode drops bad rows and counts
them.

**Screening** (:func:`screen_answers`). A worker who failed any test pair (chose the off-topic
passage) is excluded: none of their answers is used, anywhere. A task (all its re-issues
counted together) is listed for re-issue when it has fewer than ``assignments`` complete
answer sets from workers who were not excluded; the reason is ``worker-excluded`` or
``incomplete``. A task nobody answered yet, or whose latest re-issue nobody answered yet, is
pending and not listed. :func:`reissue_tasks` makes the new tasks: same comparisons, a fresh seeded
order and placement, the excluded workers listed in ``exclude_workers`` so another worker
does them.

**Agreement** (:func:`worker_agreement`), over real pairs judged by two or more accepted workers: raw
agreement (the mean over pairs of the share of agreeing worker pairs, Fleiss' P_i) and Fleiss'
kappa from ``statsmodels.stats.inter_rater.fleiss_kappa`` over the pairs with the most common
number of judgments (Fleiss' kappa needs the same number of raters per item; how many pairs
entered is reported). The categories are "doc_a preferred" and "doc_b preferred".
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.errors import InputError, fail_or_count, quoted
from qrelkit.io import tables
from qrelkit.io.order import qid_order
from qrelkit.prefs.common import STR_LIST, as_list, need_columns, ordered, pair_id, as_frame, rng_for, sort_frame
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.prefs.params import PrefsParams

TASK_SCHEMA = pa.schema([
    ("task_id", pa.string()), ("slot", pa.int32()), ("qid", pa.string()), ("query", pa.string()),
    ("kind", pa.string()), ("pair_id", pa.string()), ("doc_a", pa.string()), ("doc_b", pa.string()),
    ("left_docid", pa.string()), ("right_docid", pa.string()), ("left_text", pa.string()),
    ("right_text", pa.string()), ("expected", pa.string()), ("offtopic_qid", pa.string()),
    ("exclude_workers", STR_LIST),
])
EXPORT_COLUMNS = ["task_id", "slot", "qid", "query", "left_docid", "left_text", "right_docid", "right_text", "choice"]
ANSWER_COLUMNS = ["task_id", "slot", "worker", "choice"]
JUDGMENT_SCHEMA = pa.schema([
    ("qid", pa.string()), ("pair_id", pa.string()), ("doc_a", pa.string()), ("doc_b", pa.string()),
    ("winner", pa.string()), ("worker", pa.string()), ("task_id", pa.string()), ("slot", pa.int32()),
    ("left_docid", pa.string()), ("right_docid", pa.string()), ("choice", pa.string()),
])
WORKER_COLUMNS = ["worker", "tasks", "answers", "test_answers", "test_failed", "excluded", "real_answers_used"]
REISSUE_SCHEMA = pa.schema([("task_id", pa.string()), ("base_task", pa.string()), ("reason", pa.string()),
                            ("workers", STR_LIST)])
REISSUE_COLUMNS = REISSUE_SCHEMA.names


def base_task(task_id: str) -> str:
    """The original task id of a task: ``<base>`` for a reissue ``<base>.r<k>`` (repeated suffixes too)."""
    return re.sub(r"(\.r\d+)+$", "", str(task_id))


def issue_number(task_id: str) -> int:
    """Which issue of its base task a task id is: ``k`` for a reissue ``<base>.r<k>``, 0 for the
    original task."""
    m = re.search(r"\.r(\d+)$", str(task_id))
    return int(m.group(1)) if m else 0


def _opt(x) -> str | None:
    return None if x is None or x is pd.NA or (isinstance(x, float) and np.isnan(x)) or x == "" else str(x)


# --------------------------------------------------------------------------- making tasks


def _relevant_by_topic(qrels: pa.Table, min_rel: int) -> tuple[dict[str, list[str]], dict[str, set[str]]]:
    known: dict[str, list[str]] = {}
    positive: dict[str, set[str]] = {}
    for q, d, r in zip(qrels["qid"].to_pylist(), qrels["docid"].to_pylist(), qrels["rel"].to_pylist()):
        if r is None:
            continue
        if r > 0:
            positive.setdefault(q, set()).add(d)
        if r >= min_rel:
            known.setdefault(q, []).append(d)
    return {q: sorted(v) for q, v in known.items()}, positive


def _test_pairs(rng: np.random.Generator, n: int, known: dict[str, list[str]], positive: dict[str, set[str]],
                topics: list[str]) -> list[tuple[str, str, str, str]]:
    """``n`` test pairs (qid, relevant passage, off-topic passage, off-topic passage's topic):
    distinct topics within a task when there are enough."""
    out: list[tuple[str, str, str, str]] = []
    used: set[str] = set()
    nt = len(topics)
    for _ in range(n):
        for attempt in range(200):
            q = topics[int(rng.integers(nt))]
            if q in used and attempt < 100 and nt > n:
                continue
            q2 = topics[int(rng.integers(nt))]
            if q2 == q:
                continue
            off = [d for d in known[q2] if d not in positive.get(q, ())]
            if not off:
                continue
            rel = known[q]
            out.append((q, rel[int(rng.integers(len(rel)))], off[int(rng.integers(len(off)))], q2))
            used.add(q)
            break
        else:
            raise InputError("no-test-pairs", "cannot find an off-topic passage for a test pair: the qrels' topics "
                             "share all their relevant passages")
    return out


def _layout(task_id: str, slots: list[dict], seed: int) -> list[dict]:
    """Shuffle the comparisons of one task and choose each one's left/right placement."""
    rng = rng_for(seed, "task", task_id)
    perm = rng.permutation(len(slots))
    flip = rng.random(len(slots)) < 0.5
    out = []
    for pos, i in enumerate(perm, start=1):
        s = dict(slots[i])
        first, second = (s["doc_b"], s["doc_a"]) if flip[pos - 1] else (s["doc_a"], s["doc_b"])
        if s["kind"] == "test":  # doc_a holds the relevant passage until placement
            first, second = (s["_off"], s["_rel"]) if flip[pos - 1] else (s["_rel"], s["_off"])
            s["expected"] = "right" if flip[pos - 1] else "left"
        s["slot"] = pos
        s["left_docid"], s["right_docid"] = first, second
        s["task_id"] = task_id
        out.append(s)
    return out


@declared_defaults(PrefsParams)
def make_tasks(
    pairs: pd.DataFrame | pa.Table,
    qrels: pa.Table,
    *,
    pairs_per_task: int = AS_DECLARED,
    test_pairs: int = AS_DECLARED,
    test_min_rel: int = AS_DECLARED,
    seed: int = AS_DECLARED,
    prefix: str = "T",
    texts: dict[str, tuple[str, str | None]] | None = None,
    queries: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Crowd tasks (:data:`TASK_SCHEMA`) for ``pairs`` (see the module documentation). ``qrels``
    supply the test pairs' known relevant passages; ``texts`` maps passage id -> (text, docid)
    (:func:`qrelkit.io.corpus.lookup_texts`); ``queries`` maps qid -> query text."""
    if pairs_per_task < 1:
        raise InputError("bad-option", f"pairs per task must be >= 1, got {pairs_per_task}")
    if test_pairs < 0:
        raise InputError("bad-option", f"test pairs must be >= 0, got {test_pairs}")
    df = as_frame(pairs)
    need_columns(df, ["qid", "doc_a", "doc_b"], "pairs table")
    real = pd.DataFrame({"qid": df["qid"].astype(str), "doc_a": df["doc_a"].astype(str), "doc_b": df["doc_b"].astype(str)})
    ab = [ordered(a, b) for a, b in zip(real["doc_a"], real["doc_b"])]
    real["doc_a"] = [x for x, _ in ab]
    real["doc_b"] = [y for _, y in ab]
    if (real["doc_a"] == real["doc_b"]).any():
        raise InputError("self-pair", "a pair compares a passage with itself")
    real["pair_id"] = [pair_id(q, a, b) for q, a, b in zip(real["qid"], real["doc_a"], real["doc_b"])]
    real = sort_frame(real.drop_duplicates(["qid", "doc_a", "doc_b"]), ["doc_a", "doc_b"])
    known, positive = _relevant_by_topic(qrels, test_min_rel)
    topics = qid_order(known)
    if test_pairs and len(topics) < 2:
        raise InputError("no-test-pairs", f"test pairs need known relevant passages (grade >= {test_min_rel}) "
                         "for at least two topics in the qrels")
    order = np.random.default_rng(seed).permutation(len(real))
    real = real.iloc[order].reset_index(drop=True)
    n_tasks = -(-len(real) // pairs_per_task)
    width = max(5, len(str(n_tasks)))
    rows: list[dict] = []
    for t in range(n_tasks):
        task_id = f"{prefix}{t + 1:0{width}d}"
        chunk = real.iloc[t * pairs_per_task:(t + 1) * pairs_per_task]
        slots = [{"qid": q, "kind": "real", "pair_id": p, "doc_a": a, "doc_b": b, "expected": None, "offtopic_qid": None}
                 for q, p, a, b in zip(chunk["qid"], chunk["pair_id"], chunk["doc_a"], chunk["doc_b"])]
        rng = rng_for(seed, "tests", task_id)
        for q, rel, off, q2 in _test_pairs(rng, test_pairs, known, positive, topics) if test_pairs else []:
            a, b = ordered(rel, off)
            slots.append({"qid": q, "kind": "test", "pair_id": "test-" + pair_id(q, a, b), "doc_a": a, "doc_b": b,
                          "expected": None, "offtopic_qid": q2, "_rel": rel, "_off": off})
        rows += _layout(task_id, slots, seed)
    return _finish(rows, texts, queries)


def _finish(rows: list[dict], texts, queries) -> pd.DataFrame:
    out = pd.DataFrame(rows, columns=[c for c in TASK_SCHEMA.names if c not in ("query", "left_text", "right_text")])
    tx = texts or {}
    out["query"] = [(queries or {}).get(q, "") for q in out["qid"]]
    out["left_text"] = [tx.get(d, ("", None))[0] for d in out["left_docid"]]
    out["right_text"] = [tx.get(d, ("", None))[0] for d in out["right_docid"]]
    if "exclude_workers" not in out or out["exclude_workers"].isna().all():
        out["exclude_workers"] = [[] for _ in range(len(out))]
    out["slot"] = out["slot"].astype(np.int32) if len(out) else out["slot"]
    return out[TASK_SCHEMA.names].reset_index(drop=True)


def export_view(tasks: pd.DataFrame) -> pd.DataFrame:
    """What workers see (:data:`EXPORT_COLUMNS`): no kind, pair, expected answer or off-topic
    source, so test pairs look like any other comparison; ``choice`` is empty."""
    out = tasks[[c for c in EXPORT_COLUMNS if c != "choice"]].copy()
    out["choice"] = ""
    return out


def task_summary(tasks: pd.DataFrame) -> dict:
    """Counts of a task table: distinct tasks, rows, real and test pairs."""
    return {"tasks": int(tasks["task_id"].nunique()), "rows": int(len(tasks)),
            "real_pairs": int((tasks["kind"] == "real").sum()), "test_pairs": int((tasks["kind"] == "test").sum())}


def normalize_tasks(tasks: pd.DataFrame | pa.Table, file: str | None = None) -> pd.DataFrame:
    """A task table read back (Parquet, or CSV with lists as text) in :data:`TASK_SCHEMA` types."""
    df = as_frame(tasks).copy()
    need_columns(df, ["task_id", "slot", "qid", "kind", "pair_id", "doc_a", "doc_b", "left_docid", "right_docid",
                      "expected"], "task table", file)
    for c in TASK_SCHEMA.names:
        if c not in df.columns:
            df[c] = [[] for _ in range(len(df))] if c == "exclude_workers" else ""
    df["exclude_workers"] = [as_list(v) for v in df["exclude_workers"]]
    for c in ("task_id", "qid", "kind", "pair_id", "doc_a", "doc_b", "left_docid", "right_docid"):
        df[c] = df[c].astype(str)
    df["slot"] = df["slot"].astype(np.int32)
    return df[TASK_SCHEMA.names]


# ----------------------------------------------------------------------- re-issue


@declared_defaults(PrefsParams)
def reissue_tasks(tasks: pd.DataFrame, reissue: pd.DataFrame, *, exclude_workers: Sequence[str] = (),
                  seed: int = AS_DECLARED) -> pd.DataFrame:
    """New tasks for the ``reissue`` list (:data:`REISSUE_COLUMNS`): the same comparisons as the
    listed task, id ``<base>.r<k>`` (k one more than any re-issue of that base in ``tasks``), a
    fresh seeded order and placement, and ``exclude_workers`` = the task's earlier exclusions,
    its listed workers and ``exclude_workers``."""
    tasks = normalize_tasks(tasks)
    if len(reissue) == 0:
        return tasks.iloc[0:0].reset_index(drop=True)
    last: dict[str, int] = {}
    for t in tasks["task_id"].unique():
        b = base_task(t)
        last[b] = max(last.get(b, 0), issue_number(t))
    by_task = {t: g for t, g in tasks.groupby("task_id", sort=False)}
    rows: list[dict] = []
    texts: dict[str, tuple[str, None]] = {}
    queries: dict[str, str] = {}
    for tid, workers in zip(reissue["task_id"], reissue["workers"]):
        if tid not in by_task:
            raise InputError("unknown-item", f"task {tid} was not issued")
        g = by_task[tid].sort_values("slot")
        b = base_task(tid)
        last[b] += 1
        new_id = f"{b}.r{last[b]}"
        excl = sorted(set(as_list(g["exclude_workers"].iloc[0])) | set(as_list(workers)) | set(exclude_workers))
        slots = []
        for r in g.itertuples(index=False):
            s = {"qid": r.qid, "kind": r.kind, "pair_id": r.pair_id, "doc_a": r.doc_a, "doc_b": r.doc_b,
                 "expected": None, "offtopic_qid": _opt(r.offtopic_qid), "exclude_workers": excl}
            if r.kind == "test":
                rel = r.left_docid if r.expected == "left" else r.right_docid
                s["_rel"], s["_off"] = rel, (r.right_docid if r.expected == "left" else r.left_docid)
            texts[r.left_docid] = (r.left_text or "", None)
            texts[r.right_docid] = (r.right_text or "", None)
            queries[r.qid] = r.query or ""
            slots.append(s)
        rows += _layout(new_id, slots, seed)
    for r in rows:
        r.pop("_rel", None)
        r.pop("_off", None)
    return _finish(rows, texts, queries)


# --------------------------------------------------------------------------- answers


def read_answers(
    files: Sequence[str | os.PathLike],
    tasks: pd.DataFrame,
    *,
    lenient: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read worker answers against the issued ``tasks``. Returns ``(answers, report)``: one row per
    (task, slot, worker) with the task's fields, ``choice`` (left|right), ``winner`` (the chosen
    passage) and ``correct`` (test pairs: chose the known relevant passage); and the count per
    rule. See the module documentation for the rules."""
    tasks = normalize_tasks(tasks)
    key = {(t, int(s)): i for i, (t, s) in enumerate(zip(tasks["task_id"], tasks["slot"]))}
    left = tasks["left_docid"].tolist()
    right = tasks["right_docid"].tolist()
    counts: dict[str, int] = {}
    rows = []

    def fail(rule: str, msg: str, path: Path, line: int) -> None:
        fail_or_count(counts, lenient, rule, msg, str(path), line)

    for f in files:
        path = Path(f)
        df, offset = tables.read_answer_table(path, ANSWER_COLUMNS, what="answers", lacks="answers lack column(s)")
        for i, (t, s, w, c) in enumerate(zip(df["task_id"], df["slot"], df["worker"], df["choice"])):
            line = i + offset
            c = str(c).strip()
            if c == "":
                counts["unanswered"] = counts.get("unanswered", 0) + 1
                continue
            try:
                slot = int(float(str(s).strip()))
            except ValueError:
                slot = -1
            idx = key.get((str(t).strip(), slot))
            if idx is None:
                fail("unknown-item", f"task {t} slot {s} was not issued", path, line)
                continue
            lc = c.lower()
            if lc in ("left", "l") or (c == left[idx] and c != right[idx]):
                side = "left"
            elif lc in ("right", "r") or c == right[idx]:
                side = "right"
            else:
                fail("bad-choice", f"choice {quoted(c)} is neither left nor right (nor {left[idx]} / {right[idx]})", path, line)
                continue
            worker = str(w).strip()
            if not worker:
                fail("missing-value", "answer without a worker", path, line)
                continue
            rows.append((idx, worker, side, str(path), line))
    ans = pd.DataFrame(rows, columns=["_idx", "worker", "choice", "_file", "_line"])
    n0 = len(ans)
    ans = ans.drop_duplicates(["_idx", "worker", "choice"], keep="first")
    counts["repeated"] = n0 - len(ans)
    dup = ans.duplicated(["_idx", "worker"], keep=False)
    if dup.any():
        first = ans[dup].iloc[1]
        if not lenient:
            t = tasks.iloc[int(first["_idx"])]
            raise InputError("conflict", f"worker {first['worker']} gave task {t['task_id']} slot {t['slot']} two "
                             "different answers", file=first["_file"], line=int(first["_line"]))
        counts["conflict"] = counts.get("conflict", 0) + int(dup.sum())
        ans = ans[~dup]
    t = tasks.iloc[ans["_idx"].to_numpy()].reset_index(drop=True)
    out = t.assign(worker=ans["worker"].to_numpy(), choice=ans["choice"].to_numpy())
    out["winner"] = np.where(out["choice"] == "left", out["left_docid"], out["right_docid"])
    out["correct"] = [None if k != "test" else (c == e) for k, c, e in zip(out["kind"], out["choice"], out["expected"])]
    out = out.sort_values(["task_id", "worker", "slot"], kind="stable").reset_index(drop=True)
    counts["imported"] = len(out)
    report = pd.DataFrame(sorted(counts.items()), columns=["rule", "count"])
    return out, report


def worker_agreement(judgments: pd.DataFrame) -> dict:
    """Agreement between workers on pairs judged more than once (see the module documentation)."""
    if len(judgments) == 0:
        return {"pairs_multi": 0, "raw_agreement": None, "fleiss_kappa": None, "fleiss_pairs": 0,
                "method": "raw agreement (Fleiss P_i) and statsmodels fleiss_kappa"}
    j = judgments.drop_duplicates(["qid", "pair_id", "worker"])
    g = j.assign(_a=(j["winner"] == j["doc_a"]).astype(int)).groupby(["qid", "pair_id"])["_a"].agg(["sum", "count"])
    g = g[g["count"] >= 2]
    out = {"pairs_multi": int(len(g)), "method": "raw agreement (Fleiss P_i) and statsmodels fleiss_kappa"}
    if len(g) == 0:
        out.update(raw_agreement=None, fleiss_kappa=None, fleiss_pairs=0, judgments_per_pair=None)
        return out
    a = g["sum"].to_numpy(float)
    n = g["count"].to_numpy(float)
    b = n - a
    p_i = (a * (a - 1) + b * (b - 1)) / (n * (n - 1))
    out["raw_agreement"] = float(p_i.mean())
    modal = int(pd.Series(n.astype(int)).mode().min())
    sel = n == modal
    out["judgments_per_pair"] = modal
    out["fleiss_pairs"] = int(sel.sum())
    try:
        from statsmodels.stats.inter_rater import fleiss_kappa  # lazy: statsmodels takes ~2 s to import

        table = np.column_stack([a[sel], b[sel]])
        k = float(fleiss_kappa(table, method="fleiss"))
        out["fleiss_kappa"] = None if np.isnan(k) else k
    except ImportError:  # pragma: no cover - statsmodels is a dependency of the evaluation modules
        out["fleiss_kappa"] = None
        out["method"] = "raw agreement (Fleiss P_i); statsmodels not installed"
    return out


@declared_defaults(PrefsParams)
def screen_answers(answers: pd.DataFrame, tasks: pd.DataFrame, *, assignments: int = AS_DECLARED) -> dict:
    """Exclude workers who failed a test pair, list tasks for re-issue, keep the usable real-pair
    judgments and measure agreement. Returns ``{"judgments", "workers", "reissue", "excluded",
    "agreement", "summary"}`` (see the module documentation)."""
    tasks = normalize_tasks(tasks)
    if assignments < 1:
        raise InputError("bad-option", f"assignments must be >= 1, got {assignments}")
    tests = answers[answers["kind"] == "test"]
    failed = tests[tests["correct"] == False]  # noqa: E712 - object column
    excluded = sorted(set(failed["worker"]))
    ok = answers[~answers["worker"].isin(excluded)]
    # workers table
    rows = []
    for w, g in answers.groupby("worker", sort=True):
        t = g[g["kind"] == "test"]
        rows.append((w, int(g["task_id"].nunique()), int(len(g)), int(len(t)), int((t["correct"] == False).sum()),  # noqa: E712
                     w in excluded, int(((g["kind"] == "real") & (w not in excluded)).sum())))
    workers = pd.DataFrame(rows, columns=WORKER_COLUMNS)
    # coverage of each base task by complete answer sets of accepted workers
    size = tasks.groupby("task_id").size()
    done = ok.groupby(["task_id", "worker"]).size().rename("n").reset_index()
    done["complete"] = done["n"].to_numpy() == size.reindex(done["task_id"]).to_numpy()
    done["base"] = done["task_id"].map(base_task)
    covered = done[done["complete"]].groupby("base").size()
    re_rows = []
    latest = tasks.drop_duplicates("task_id")[["task_id"]].assign(base=lambda d: d["task_id"].map(base_task))
    latest = latest.assign(_k=latest["task_id"].map(issue_number)).sort_values(["base", "_k"], kind="stable")
    answered_by = answers.groupby("task_id")["worker"].agg(lambda s: sorted(set(s)))
    for b, g in latest.groupby("base", sort=True):
        if int(covered.get(b, 0)) >= assignments:
            continue
        variants = [t for t in g["task_id"] if t in answered_by.index]
        if not variants or g["task_id"].iloc[-1] not in answered_by.index:
            continue  # never answered, or its latest re-issue is not answered yet: pending
        bad = sorted({w for t in variants for w in answered_by[t] if w in excluded})
        reason = "worker-excluded" if bad else "incomplete"
        re_rows.append((g["task_id"].iloc[-1], b, reason, bad))
    reissue = pd.DataFrame(re_rows, columns=REISSUE_COLUMNS)
    judg = ok[ok["kind"] == "real"]
    judg = sort_frame(judg[JUDGMENT_SCHEMA.names].copy(), ["pair_id", "worker", "task_id", "slot"])
    answered_bases = set(answers["task_id"].map(base_task))
    summary = {
        "answers": int(len(answers)), "workers": int(answers["worker"].nunique()), "excluded_workers": excluded,
        "test_answers": int(len(tests)), "test_failed": int(len(failed)),
        "judgments": int(len(judg)), "pairs_judged": int(judg[["qid", "pair_id"]].drop_duplicates().shape[0]),
        "tasks": int(latest["base"].nunique()), "tasks_reissue": int(len(reissue)),
        "tasks_unanswered": int(len(set(latest["base"]) - answered_bases)),
    }
    return {"judgments": judg, "workers": workers, "reissue": reissue, "excluded": excluded,
            "agreement": worker_agreement(judg), "summary": summary}


@declared_defaults(PrefsParams)
def import_answers(
    files: Sequence[str | os.PathLike],
    tasks: pd.DataFrame,
    *,
    assignments: int = AS_DECLARED,
    lenient: bool = False,
    seed: int = AS_DECLARED,
) -> dict:
    """The whole import: :func:`read_answers`, :func:`screen_answers` and, for the tasks to
    re-issue, :func:`reissue_tasks`. Returns the screening result plus ``"answers"``,
    ``"report"`` (count per rule) and ``"new_tasks"`` (the re-issued tasks)."""
    tasks = normalize_tasks(tasks)
    dup = tasks.duplicated(["task_id", "slot"])
    if dup.any():
        r = tasks[dup].iloc[0]
        raise InputError("duplicate-task", f"task {r['task_id']} slot {r['slot']} was issued twice")
    answers, report = read_answers(files, tasks, lenient=lenient)
    res = screen_answers(answers, tasks, assignments=assignments)
    res["new_tasks"] = reissue_tasks(tasks, res["reissue"], exclude_workers=res["excluded"], seed=seed)
    res["answers"] = answers
    res["report"] = report
    return res


def read_judgments(table: pd.DataFrame | pa.Table, file: str | None = None) -> pd.DataFrame:
    """Preference judgments ``qid, doc_a, doc_b, winner`` (plus anything else) as strings, with
    doc_a < doc_b and ``pair_id`` filled in. Rule ``bad-winner``: the winner is neither passage."""
    df = as_frame(table).copy()
    need_columns(df, ["qid", "doc_a", "doc_b", "winner"], "judgments table", file)
    for c in ("qid", "doc_a", "doc_b", "winner"):
        df[c] = df[c].astype(str)
    ab = [ordered(a, b) for a, b in zip(df["doc_a"], df["doc_b"])]
    df["doc_a"] = [x for x, _ in ab]
    df["doc_b"] = [y for _, y in ab]
    bad = ~((df["winner"] == df["doc_a"]) | (df["winner"] == df["doc_b"]))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError("bad-winner", f"winner {df['winner'].iloc[i]} is neither {df['doc_a'].iloc[i]} nor "
                         f"{df['doc_b'].iloc[i]}", file=file, line=i + 2)
    df["pair_id"] = [pair_id(q, a, b) for q, a, b in zip(df["qid"], df["doc_a"], df["doc_b"])]
    return df
