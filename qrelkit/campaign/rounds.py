"""The CAL stage of a campaign: rounds of :func:`qrelkit.cal.loop.issue_next_batches` in the
configured threads, each round judged, then the stopping rule — **per topic**.

Every kept topic has its own CAL round and phase in the store (``campaign_cal``): ``judge``
(its batches are out; once every item of the topic is judged, the stopping rule of ``[stopping]
rule`` (:func:`campaign_rule`; the density rule by default) decides its
active threads and, when some are still active, the topic moves to the next round's ``issue``)
and ``issue`` (every active thread of the topic that has no batch for this round gets its next
one; nothing of the topic is judged in this phase, so a resumed issue phase sees the store the
first attempt saw). A topic whose batches are judged goes on at once, whatever the other
topics' batches: ``campaign run`` advances every topic as far as its judgments allow. Threads
still active after ``[campaign] max_rounds`` rounds of their topic stop with the rule
``max-rounds``.

What a topic's batches hold depends only on that topic's judgments (and the seeds), so the
outputs are the same whatever order the topics' rounds happen in.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from qrelkit.cal.loop import issue_next_batches
from qrelkit.cal.params import StoppingParams
from qrelkit.cal.stopping import ACCEPT, REJECT, Description, JudgingState, StoppingRule, get_rule, thread_states
from qrelkit.campaign.adjudication import describe as describe_adjudication
from qrelkit.campaign.judging import Waiting
from qrelkit.campaign.settings import Settings
from qrelkit.campaign.stages import Context, features, kept_topics
from qrelkit.config import Config
from qrelkit.pooler import PoolParams, pool_parameters

_STATE = {ACCEPT: "accepted", REJECT: "rejected"}
_ACTION = {"accepted": ACCEPT, "rejected": REJECT}


def campaign_rule(cfg: Config) -> StoppingRule:
    """The campaign's stopping rule: the registered rule ``[stopping] rule`` with its parameters
    from the configuration (``[stopping]`` for the density rule, ``[stopping.<rule>]``)."""
    return get_rule(StoppingParams.from_config(cfg).rule, cfg)


def topic_stopping(store, settings: Settings, rule: StoppingRule, qid: str) -> Description:
    """What the campaign's stopping ``rule`` (:func:`campaign_rule`) needs and where topic ``qid``
    of the campaign's ``store`` stands (:meth:`~qrelkit.cal.stopping.StoppingRule.describe`): its
    official thread's state as the rule sees it in :func:`apply_stopping` (every grade in force,
    one per passage). ``settings``: the campaign's, read once by the caller."""
    th = store.topics.threads(qid)
    th = th[th["thread"] == settings.official_thread]
    states = list(thread_states(th, store.judgments.log(qid, "all"), relevant=settings.relevant,
                                combine=settings.combine, budget=settings.threads.budget)) if len(th) else []
    return rule.describe(states[0] if states else JudgingState((), np.zeros(0, bool), topic=str(qid)))


def describe_protocol(cfg: Config) -> dict[str, Any]:
    """The campaign's pool and stopping rule in words (the web app's organizer page): the pool
    kind ``[pool] kind`` and its parameters, the rule ``[stopping] rule`` and what it needs, and
    the order the pool is judged in under a budget (``adjudication``: strategy, budget, batch; None
    with ``[adjudicate] strategy = "none"``)."""
    kind = PoolParams.from_config(cfg).kind
    rule = campaign_rule(cfg)
    params = ", ".join(f"{k}={v}" for k, v in pool_parameters(kind, cfg).items() if v is not None)
    return {"pool_kind": kind, "pool": params, "rule": rule.name, "needs": rule.needs(),
            "adjudication": describe_adjudication(cfg)}


def _active(ctx: Context, topics: set[str] | None = None) -> pd.DataFrame:
    th = ctx.store.topics.threads()
    keep = set(kept_topics(ctx)) if topics is None else set(topics) & set(kept_topics(ctx))
    return th[(th["state"] == "active") & th["qid"].isin(keep) & th["thread"].isin(ctx.settings.threads.threads)]


def sync_decisions(ctx: Context) -> None:
    """A kept topic whose official thread is no longer active is decided: its action, rule and
    reason are the thread's (its state, and its reason ``"rule: why"``); its other threads stop.
    Derived from the stored thread states, so a kill between two writes loses nothing."""
    decided = ctx.store.state.decided_topics()
    kept = set(kept_topics(ctx))
    threads: dict[str, list[tuple[str, str, str]]] = {}
    for qid, thread, state, reason in ctx.store.topics.thread_rows():
        threads.setdefault(qid, []).append((thread, state, reason))
    for qid in ctx.inputs.topic_ids:
        mine = threads.get(qid, [])
        off = [(state, reason) for thread, state, reason in mine if thread == ctx.settings.official_thread]
        if qid not in kept or not off or off[0][0] == "active":
            continue
        if qid not in decided:
            rule, _, why = str(off[0][1]).partition(": ")
            ctx.store.state.set_topics([{"qid": qid, "decision": _ACTION.get(off[0][0], "stop"), "rule": rule,
                                         "reason": why}])
        for thread, state, _ in mine:
            if state == "active":
                ctx.store.topics.set_thread_state(qid, thread, "stopped",
                                                  f"topic decided by thread {ctx.settings.official_thread}")


def apply_stopping(ctx: Context, topics: list[str] | None = None) -> None:
    """The stopping rule on every active thread of the kept ``topics`` (all kept topics when
    None; idempotent). Their judgments are read once (one query per topic, or the whole log for
    every topic); each thread's state is :func:`qrelkit.cal.stopping.thread_states`'s (its view,
    one grade per passage by the configured aggregation, the budget)."""
    rule = campaign_rule(ctx.cfg)
    budget = ctx.settings.threads.budget
    active = _active(ctx, None if topics is None else set(topics))
    if not len(active):
        return
    qids = list(dict.fromkeys(active["qid"]))
    log = (ctx.store.judgments.log(None, "all") if topics is None or len(qids) > 8
           else pd.concat([ctx.store.judgments.log(q, "all") for q in qids], ignore_index=True))
    states = thread_states(active, log, relevant=ctx.settings.relevant, combine=ctx.settings.combine, budget=budget)
    for t, st in zip(active.itertuples(index=False), states):
        d = rule.decide(st)
        if d.stopped:
            ctx.store.topics.set_thread_state(t.qid, t.thread, _STATE.get(d.action, "stopped"), f"{d.rule}: {d.reason}")
    sync_decisions(ctx)


def _issue(ctx: Context, rounds: dict[str, tuple[int, str]], topics: list[str]) -> None:
    """The issue phase of ``topics``: each active thread with fewer CAL batches than its topic's
    round gets its next batch (a resumed phase issues only the missing ones); exhausted threads
    stop; every CAL batch of these topics without assessors gets its topic's round's."""
    s = ctx.store
    feats = features(ctx)
    b = s.batches.all(counts=False)
    cal = b[b["kind"] == "cal"]
    have = cal.groupby(["qid", "thread"]).size().to_dict()
    groups: dict[tuple[str, ...], list[str]] = {}
    active = _active(ctx, set(topics))
    for q, g in active.groupby("qid", sort=False):
        need = tuple(t for t in g["thread"] if have.get((q, t), 0) < rounds[q][0])
        if need:
            groups.setdefault(need, []).append(q)
    params, fp = ctx.settings.cal, ctx.settings.fractional
    for need, qs in groups.items():
        _, report = issue_next_batches(s, feats, topics=qs, threads=list(need), params=params, fraction=fp.fraction,
                                       fraction_seed=fp.seed, combine=ctx.settings.combine, allow_open=True,
                                       cache=ctx.candidates)
        for r in report.itertuples(index=False):
            if r.action == "exhausted":
                s.topics.set_thread_state(r.qid, r.thread, "stopped", "exhausted: no candidate left to judge")
        lost = int(report.attrs.get("judged_passages_not_in_features", 0))
        if lost:
            s.state.warn("cal", f"topics {', '.join(qs)}: {lost} judged passage(s) not in the CAL features "
                         "(not trained on)")
    sync_decisions(ctx)
    b = s.batches.all(counts=False)
    assigned = set(s.assignments.all()["batch_id"])
    mine = b[(b["kind"] == "cal") & b["qid"].isin(set(topics))]
    s.assignments.assign({bid: ctx.judging.assessors_for(qid, rounds[qid][0])
                          for bid, qid in zip(mine["batch_id"], mine["qid"]) if bid not in assigned})


def _next_rounds(ctx: Context, rounds: dict[str, tuple[int, str]], owed: set[str]) -> list[str]:
    """Topics in their judge phase with nothing owed: the stopping rule, then the next round
    (``issue``) for those still active, or ``max-rounds``. Returns the topics moved on."""
    ready = [q for q in kept_topics(ctx) if rounds[q][1] == "judge" and q not in owed]
    act = _active(ctx, set(ready))
    if not len(act):
        return []
    apply_stopping(ctx, list(dict.fromkeys(act["qid"])))
    act = _active(ctx, set(ready))
    max_rounds = ctx.settings.campaign.max_rounds
    moved, stopped = [], False
    for q, g in act.groupby("qid", sort=False):
        if rounds[q][0] >= max_rounds:
            for t in g["thread"]:
                ctx.store.topics.set_thread_state(q, t, "stopped", f"max-rounds: {max_rounds} CAL rounds done")
            stopped = True
        else:
            moved.append(q)
    if stopped:
        sync_decisions(ctx)
    ctx.store.state.set_cal_rounds([(q, rounds[q][0] + 1, "issue") for q in moved])
    return moved


def stage_cal(ctx: Context) -> dict | Waiting:
    """The CAL rounds, per topic: a topic whose batches are judged gets the stopping rule and, if
    still active, its next batches at once; topics with batches out wait. With the oracle every
    batch is judged as it is issued, and the stage runs until no topic is active; without it, it
    returns :class:`Waiting` (the batches out) once no topic can move. Returns the most rounds a
    topic had and the count of each topic decision."""
    store = ctx.store
    while True:
        rounds = store.state.cal_rounds()
        issue = [q for q in kept_topics(ctx) if rounds[q][1] == "issue"]
        if issue:
            ctx.say(f"CAL round {max(rounds[q][0] for q in issue)}: {len(issue)} topic(s)")
            ctx.judging.repair_encountered()
            _issue(ctx, rounds, issue)
            store.state.set_cal_rounds([(q, rounds[q][0], "judge") for q in issue])
            rounds.update({q: (rounds[q][0], "judge") for q in issue})
        else:
            sync_decisions(ctx)  # (the issue phase syncs)
        owed = ctx.judging.owed()
        if ctx.judging.oracle is not None and len(owed):
            ctx.judging.answer(owed)  # now nothing is owed
            owed = owed.iloc[:0]
        if _next_rounds(ctx, rounds, set(owed["qid"])):
            continue
        if not len(_active(ctx)):
            break
        wait = ctx.judging.judge("cal")  # no topic can move: what is out (or, judged meanwhile, go on)
        if wait:
            return wait
    return {"rounds": max((r for r, _ in store.state.cal_rounds().values()), default=0),
            "decisions": store.state.decision_counts()}
