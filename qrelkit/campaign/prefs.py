"""Preference tasks inside a campaign (docs/web.md, "Preference tasks"): the crowd tasks of the
preference protocol (docs/prefs.md; 10 real + 3 test pairs per task) answered by the campaign's
assessors in the web app, one comparison at a time, kept in the campaign store.

* :func:`make_preference_tasks` builds tasks with :func:`qrelkit.prefs.make_tasks` — from a
  pairs table, or by default from the campaign itself: the top-1 pool of its runs plus its
  best-judged passages (the ``top1`` pool kind, :func:`qrelkit.pooler.configured_pool`, with the
  current labels as the qrels, then :func:`qrelkit.prefs.pool_pairs`); the test pairs' known relevant passages are the
  campaign's judged ones — and assigns each to ``[prefs] assignments`` assessors.
* :func:`screen_preferences` applies the protocol's screening (:func:`qrelkit.prefs.read_answers`,
  :func:`qrelkit.prefs.screen_answers`, :func:`qrelkit.prefs.reissue_tasks`) to the answers of
  finished tasks: an assessor who chose the off-topic passage of a test pair is excluded (none
  of their answers is used), their tasks are re-issued to others.
* :func:`export_preferences` gives the task table and the answers in the files ``qrelkit prefs
  import`` reads.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.campaign.runner import Campaign
from qrelkit.campaign.judging import text_index
from qrelkit.campaign.settings import combine_rule
from qrelkit.campaign.stages import Context
from qrelkit.campaign.store import campaign_config, check_inputs
from qrelkit.config import CampaignParams, Config
from qrelkit.errors import InputError
from qrelkit.io.tables import write_table
from qrelkit.pooler import configured_pool
from qrelkit.prefs import TASK_SCHEMA, make_tasks, pool_pairs, read_answers, reissue_tasks, screen_answers
from qrelkit.prefs.common import to_arrow
from qrelkit.prefs.params import PrefsParams
from qrelkit.prefs.tasks import base_task, normalize_tasks
from qrelkit.store import CampaignStore, open_campaign_store

PREFS_DIR = "prefs"
ANSWER_COLUMNS = ["task_id", "slot", "worker", "choice"]


def _campaign_pool(directory: Path, store: CampaignStore, cfg: Config) -> pa.Table:
    """The campaign's top-1 pool: every run's first passage per topic plus the topics' judged
    passages of grade >= ``[top1] perfect_min_rel`` (only the best-graded ones with ``[top1]
    perfect = "best"``), near-duplicates as one item when the campaign has classes."""
    ctx = Context(directory, store, cfg, store.state.get("paths"))
    qrels = store.judgments.export_qrels(combine=ctx.settings.combine)
    return configured_pool("top1", ctx.inputs.runset.table, cfg, qrels=qrels, classes=ctx.inputs.classes).table


def _assign(task_ids: Sequence[str], assessors: list[str], per_task: int, load: dict[str, int],
            refused: dict[str, set[str]] | None = None) -> dict[str, list[str]]:
    """Each task to ``per_task`` distinct assessors, least loaded first (ties: the list's order),
    never to one in ``refused[task]``; ``load`` (open tasks per assessor) is updated."""
    out: dict[str, list[str]] = {}
    for t in task_ids:
        ok = [a for a in assessors if a not in (refused or {}).get(t, set())]
        chosen = sorted(ok, key=lambda a: (load.get(a, 0), assessors.index(a)))[:per_task]
        for a in chosen:
            load[a] = load.get(a, 0) + 1
        out[t] = chosen
    return out


def make_preference_tasks(directory: str | os.PathLike, *, pairs: pd.DataFrame | None = None,
                          topics: Sequence[str] | None = None, assessors: Sequence[str] | None = None,
                          pairs_per_task: int | None = None, test_pairs: int | None = None,
                          test_min_rel: int | None = None, assignments: int | None = None, seed: int | None = None,
                          prefix: str | None = None) -> dict[str, Any]:
    """Build preference tasks for the campaign at ``directory`` and store them, each assigned to
    ``assignments`` (``[prefs] assignments``) of ``assessors`` (default ``[campaign]
    assessors``). ``pairs``: a pairs table (``qrelkit prefs pairs|single``, a tournament's
    pending pairs); default: the campaign's top-1 pool (see the module documentation).
    ``topics`` limits the pairs to those topics; a topic screening discarded has none. Task ids
    are ``PREFIX00001``... (default ``P``, then ``P2-``, ``P3-``... for later sets). Settings default to the ``[prefs]`` section.
    Returns a summary (tasks, comparisons, tasks per assessor, the pool file)."""
    directory = Path(directory)
    Campaign(directory)  # [not-a-campaign]
    with open_campaign_store(directory) as store:
        check_inputs(store)
        cfg = campaign_config(store)
        state = store.state.get("prefs") or {}
        sets = list(state.get("sets", []))
        prefix = prefix if prefix else ("P" if not sets else f"P{len(sets) + 1}-")
        out = set(excluded_assessors(store))  # who failed a test pair answers no more tasks
        names = [str(a) for a in (assessors or CampaignParams.from_config(cfg).assessors) if str(a) not in out]
        pp = PrefsParams.from_config(cfg, assignments=assignments, seed=seed, pairs_per_task=pairs_per_task,
                                     test_pairs=test_pairs, test_min_rel=test_min_rel)
        n_assign = pp.assignments
        if not names or n_assign > len(set(names)):
            raise InputError("bad-option", f"{n_assign} assessor(s) per task need as many assessors (not excluded), "
                             f"got {names}")
        pool = pool_file = None
        if pairs is None:
            pool = _campaign_pool(directory, store, cfg)
            pairs = pool_pairs(pool)
        if topics:
            pairs = pairs[pairs["qid"].astype(str).isin({str(t) for t in topics})]
        # a topic screening discarded gets no comparison, real or test (its qrels are left out)
        discarded = store.state.decided_topics("discarded")
        pairs = pairs[~pairs["qid"].astype(str).isin(discarded)]
        qrels = store.judgments.export_qrels(combine=combine_rule(cfg))
        out_of = pa.array(sorted(discarded), pa.string())
        qrels = qrels.filter(pc.invert(pc.is_in(pc.cast(qrels["qid"], pa.string()), value_set=out_of)))
        if not len(pairs):
            raise InputError("no-pairs", "no pair to judge (every topic's pool holds one item, or --topics left none)")
        tdf = store.topics.all()
        s = pp.seed
        tasks = make_tasks(pairs, qrels, pairs_per_task=pp.pairs_per_task,
                           test_pairs=pp.test_pairs, test_min_rel=pp.test_min_rel, seed=s, prefix=prefix,
                           queries=dict(zip(tdf["qid"].astype(str), tdf["text"].astype(str))))
        index = text_index(directory, store)
        try:
            texts = index.texts(set(tasks["left_docid"]) | set(tasks["right_docid"]))
        finally:
            index.close()
        tasks["left_text"] = [texts.get(d, ("", None))[0] for d in tasks["left_docid"]]
        tasks["right_text"] = [texts.get(d, ("", None))[0] for d in tasks["right_docid"]]
        ids = list(dict.fromkeys(tasks["task_id"]))
        taken = set(ids) & set(store.prefs.tasks()["task_id"])
        if taken:
            raise InputError("tasks-exist", f"preference task {min(taken)} exists already (give another --prefix)",
                             file=str(directory))
        plan = _assign(ids, list(dict.fromkeys(names)), n_assign, open_load(store))
        if pool is not None:  # the tournament reads it; written once the tasks are made, before they are stored
            pool_file = directory / PREFS_DIR / f"pool-{prefix.rstrip('-') or 'P'}.parquet"
            pool_file.parent.mkdir(exist_ok=True)
            write_table(pool, pool_file, kind="pool-top1", params={"campaign": str(directory), "prefix": prefix})
        store.prefs.add_tasks(tasks, plan)
        known = list(dict.fromkeys([*state.get("assessors", []), *names]))
        store.state.update(prefs={"sets": [*sets, prefix], "assessors": known, "assignments": n_assign, "seed": s})
    per: dict[str, int] = {}
    for who in plan.values():
        for a in who:
            per[a] = per.get(a, 0) + 1
    return {"campaign": str(directory), "prefix": prefix, "tasks": len(ids), "comparisons": int(len(tasks)),
            "real_pairs": int((tasks["kind"] == "real").sum()), "test_pairs": int((tasks["kind"] == "test").sum()),
            "topics": int(tasks.loc[tasks["kind"] == "real", "qid"].nunique()), "assignments": n_assign,
            "tasks_per_assessor": per, "pool": str(pool_file) if pool_file else None}


# ----------------------------------------------------------------------------- progress


def finished_sets(store: CampaignStore) -> pd.DataFrame:
    """``task_id, worker``: the (task, assessor) pairs whose every comparison is answered."""
    ans = store.prefs.answers()
    if not len(ans):
        return pd.DataFrame({"task_id": [], "worker": []})
    size = store.prefs.tasks().groupby("task_id").size()
    n = ans.groupby(["task_id", "worker"]).size().rename("n").reset_index()
    return n.loc[n["n"].to_numpy() == size.reindex(n["task_id"]).to_numpy(), ["task_id", "worker"]].reset_index(drop=True)


def excluded_assessors(store: CampaignStore) -> list[str]:
    """The assessors the last screening excluded (they failed a test pair)."""
    return list((store.state.get("pref_screening") or {}).get("excluded", []))


def open_load(store: CampaignStore) -> dict[str, int]:
    """Preference tasks each assessor still has to finish."""
    a = store.prefs.assignments()
    done = {(t, w) for t, w in finished_sets(store).itertuples(index=False)}
    out: dict[str, int] = {}
    for t, w in zip(a["task_id"], a["assessor"]):
        if (t, w) not in done:
            out[w] = out.get(w, 0) + 1
    return out


def finished_answers(store: CampaignStore) -> pd.DataFrame:
    """The answers of finished (task, assessor) sets only (``task_id, slot, worker, choice``): a
    task's answers count once all its comparisons are answered (an assessor at work on a task
    is not screened on half of it)."""
    ans = store.prefs.answers()
    keep = finished_sets(store)
    if not len(ans) or not len(keep):
        return ans.iloc[0:0]
    return ans.merge(keep, on=["task_id", "worker"], how="inner")[ANSWER_COLUMNS]


# ---------------------------------------------------------------------------- screening


def _screen(tasks: pd.DataFrame, answers: pd.DataFrame, assignments: int) -> dict:
    """The protocol's screening of ``answers`` (read by :func:`qrelkit.prefs.read_answers` from
    a file, as ``qrelkit prefs import`` reads them)."""
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "answers.csv"
        answers.to_csv(f, index=False)
        ans, _ = read_answers([f], tasks)
    return screen_answers(ans, tasks, assignments=assignments)


def screen_preferences(store: CampaignStore) -> dict[str, Any]:
    """Screen the finished answers (see the module documentation) and act on the outcome: the
    tasks :func:`qrelkit.prefs.screen_answers` lists for re-issue — unless one of their
    assessors is still at work on them — are re-issued (:func:`qrelkit.prefs.reissue_tasks`)
    to assessors who were not excluded and never had the task; the unfinished tasks of an
    excluded assessor go to such an assessor. Returns the summary (kept in the store as
    ``pref_screening``). Idempotent: a re-issued task is pending until answered."""
    tasks = normalize_tasks(store.prefs.tasks())
    state = store.state.get("prefs") or {}
    n_assign = int(state.get("assignments", 1))
    if not len(tasks):
        return {"tasks": 0}
    res = _screen(tasks, finished_answers(store), n_assign)
    excluded = list(res["excluded"])
    a = store.prefs.assignments()
    done = {(t, w) for t, w in finished_sets(store).itertuples(index=False)}
    at_work = {t for t, w in zip(a["task_id"], a["assessor"]) if (t, w) not in done and w not in excluded}
    reissue = res["reissue"][~res["reissue"]["task_id"].isin(at_work)].reset_index(drop=True)
    new = reissue_tasks(tasks, reissue, exclude_workers=excluded, seed=int(state.get("seed", 0)))
    names = [n for n in state.get("assessors", []) if n not in excluded]
    had: dict[str, set[str]] = {}
    for t, w in zip(a["task_id"], a["assessor"]):
        had.setdefault(base_task(t), set()).add(w)
    load = open_load(store)
    moved = 0
    if len(new):
        ids = list(dict.fromkeys(new["task_id"]))
        excl = {t: set(x) for t, x in zip(new["task_id"], new["exclude_workers"])}
        plan = _assign(ids, names, n_assign, load, {t: excl[t] | had.get(base_task(t), set()) for t in ids})
        store.prefs.add_tasks(new, plan)
    for t, w in zip(a["task_id"], a["assessor"]):  # an excluded assessor's unfinished tasks go to others
        if w in excluded and (t, w) not in done:
            to = _assign([t], names, 1, load, {t: had.get(base_task(t), set())})[t]
            if to and store.prefs.assign(t, to[0], instead_of=w):
                had.setdefault(base_task(t), set()).add(to[0])
                moved += 1
    summary = {**res["summary"], "excluded": excluded, "reissued": [str(t) for t in dict.fromkeys(new["task_id"])],
               "moved": moved, "agreement": res["agreement"]}
    store.state.update(pref_screening=summary)
    return summary


# ------------------------------------------------------------------------------- export


def export_preferences(directory: str | os.PathLike) -> tuple[pa.Table, pd.DataFrame]:
    """The campaign's preference tasks (the task table, :data:`qrelkit.prefs.TASK_SCHEMA`:
    originals and re-issues) and the answers of finished tasks (``task_id, slot, worker,
    choice``; answers undone in the web app left out): ``qrelkit prefs import ANSWERS --tasks
    TASKS`` reads them. The store is opened read-only (an older one is read as it is)."""
    with open_campaign_store(directory, readonly=True) as store:
        tasks = normalize_tasks(store.prefs.tasks())
        answers = finished_answers(store)
    return to_arrow(tasks, TASK_SCHEMA), answers.reset_index(drop=True)


def preference_status(store: CampaignStore) -> dict[str, Any]:
    """The organizer's figures: tasks (and re-issues), comparisons, finished task sets, open
    assignments, tasks nobody is assigned, per assessor (assigned, finished, excluded), and the
    last screening's summary."""
    tasks = store.prefs.tasks()
    a = store.prefs.assignments()
    fin = finished_sets(store)
    excluded = set(excluded_assessors(store))
    per = []
    for w in sorted(set(a["assessor"]) | set(fin["worker"])):
        per.append({"assessor": w, "assigned": int((a["assessor"] == w).sum()),
                    "finished": int((fin["worker"] == w).sum()), "excluded": w in excluded})
    ids = list(dict.fromkeys(tasks["task_id"]))
    return {"tasks": len(ids), "reissues": sum(1 for t in ids if base_task(t) != t), "comparisons": int(len(tasks)),
            "finished": int(len(fin)), "unassigned": len(set(ids) - set(a["task_id"])), "assessors": per,
            "screening": store.state.get("pref_screening")}
