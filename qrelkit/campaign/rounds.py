"""The CAL stage of a campaign: rounds of :func:`qrelkit.cal.loop.issue_next_batches` in the
configured threads, each round judged, then the stopping rule per topic and thread.

A round has two phases recorded in the store (``cal_phase``, ``cal_round``): ``issue`` (every
active thread gets its next batch; a resumed issue phase issues only the threads that have none
yet, and the store's state is what the first attempt saw, since nothing is judged in this phase)
and ``judge`` (assigned assessors or the oracle judge every batch; then the density rule decides
every active thread: a topic is decided when its official thread is). Threads still active after
``[campaign] max_rounds`` rounds stop with the rule ``max-rounds``.
"""

from __future__ import annotations

import pandas as pd

from qrelkit.cal.loop import CalParams, issue_next_batches
from qrelkit.cal.stopping import ACCEPT, REJECT, JudgingState, get_rule
from qrelkit.cal.store import combine_log
from qrelkit.campaign.stages import Context, Waiting, features, kept_topics

RULE = "density"
_STATE = {ACCEPT: "accepted", REJECT: "rejected"}


def _active(ctx: Context) -> pd.DataFrame:
    th = ctx.store.threads()
    keep = set(kept_topics(ctx))
    return th[(th["state"] == "active") & th["qid"].isin(keep) & th["thread"].isin(ctx.threads)]


_ACTION = {"accepted": ACCEPT, "rejected": REJECT}


def sync_decisions(ctx: Context) -> None:
    """A kept topic whose official thread is no longer active is decided: its action, rule and
    reason are the thread's (its state, and its reason ``"rule: why"``); its other threads stop.
    Derived from the stored thread states, so a kill between two writes loses nothing."""
    ct = ctx.store.campaign_topics()
    decided = set(ct.loc[ct["decision"].notna(), "qid"])
    th = ctx.store.threads()
    for qid in kept_topics(ctx):
        mine = th[th["qid"] == qid]
        off = mine[mine["thread"] == ctx.official_thread]
        if not len(off) or off["state"].iat[0] == "active":
            continue
        if qid not in decided:
            rule, _, why = str(off["reason"].iat[0]).partition(": ")
            ctx.store.set_topics([{"qid": qid, "decision": _ACTION.get(off["state"].iat[0], "stop"), "rule": rule,
                                   "reason": why}])
        for t in mine.loc[mine["state"] == "active", "thread"]:
            ctx.store.set_thread_state(qid, t, "stopped", f"topic decided by thread {ctx.official_thread}")


def _thread_view(log: pd.DataFrame, thread: str) -> pd.DataFrame:
    """The judgments a thread sees (the judging store's views): every pool and CAL batch for
    ``all``; the pool batches and its own CAL batches for the others."""
    if thread == "all":
        return log
    return log[(log["kind"] == "pool") | ((log["kind"] == "cal") & (log["thread"] == thread))]


def apply_stopping(ctx: Context) -> None:
    """The stopping rule on every active thread of every kept topic (idempotent). The judgment
    log is read once; each thread's state (judged passages in judging order, one grade each by
    ``[campaign] combine``, the budget) is what :func:`qrelkit.cal.stopping.state_from_store`
    gives the density rule."""
    rule = get_rule(RULE, ctx.cfg)
    budget = ctx.cfg.get_value("cal", "budget")
    active = _active(ctx)
    if not len(active):
        return
    log = ctx.store.judgments(None, "all")
    by_topic = {q: g for q, g in log.groupby("qid", sort=False)}
    for t in active.itertuples(index=False):
        lab = combine_log(_thread_view(by_topic.get(t.qid, log.iloc[:0]), t.thread), combine=ctx.combine)
        st = JudgingState.from_grades(lab["docid"].tolist(), lab["grade"].astype("int64").tolist(),
                                      relevant_grades=ctx.relevant, batches=lab["batch_seq"].tolist(),
                                      budget=None if budget is None else int(budget), topic=t.qid, thread=t.thread)
        d = rule.decide(st)
        if not d.stopped:
            continue
        ctx.store.set_thread_state(t.qid, t.thread, _STATE.get(d.action, "stopped"), f"{d.rule}: {d.reason}")
    sync_decisions(ctx)


def _stop_all(ctx: Context, rule: str, why: str) -> None:
    for t in _active(ctx).itertuples(index=False):
        ctx.store.set_thread_state(t.qid, t.thread, "stopped", f"{rule}: {why}")
    sync_decisions(ctx)


def _issue(ctx: Context, feats, round_: int) -> None:
    params = CalParams.from_config(ctx.cfg)
    active = _active(ctx)
    topics = list(dict.fromkeys(active["qid"]))
    _, report = issue_next_batches(ctx.store, feats, topics=topics, threads=ctx.threads, params=params,
                                   fraction=float(ctx.cfg.get_value("fractional", "fraction")),
                                   fraction_seed=int(ctx.cfg.get_value("fractional", "seed")), combine=ctx.combine)
    for r in report.itertuples(index=False):
        if r.action == "exhausted":
            ctx.store.set_thread_state(r.qid, r.thread, "stopped", "exhausted: no candidate left to judge")
    sync_decisions(ctx)
    # every CAL batch of this round gets its assessors (also those issued before a kill)
    b = ctx.store.batches()
    assigned = set(ctx.store.assignments()["batch_id"])
    for bid, qid in zip(b.loc[b["kind"] == "cal", "batch_id"], b.loc[b["kind"] == "cal", "qid"]):
        if bid not in assigned:
            ctx.store.assign(bid, ctx.assessors_for(qid, round_))


def stage_cal(ctx: Context) -> dict | Waiting:
    """The CAL rounds: alternately issue the next batch of every active topic and thread and have it
    judged, applying the stopping rules, until no topic is active or ``[campaign] max_rounds`` is
    reached; returns the rounds done and the count of each topic decision, or :class:`Waiting`."""
    store = ctx.store
    feats = None
    max_rounds = int(ctx.cfg.get_value("campaign", "max_rounds"))
    while True:
        phase = store.get_state("cal_phase", "judge")
        round_ = int(store.get_state("cal_round", 0))
        if phase == "issue":
            if feats is None:
                ctx.say("CAL: features")
                feats = features(ctx)
            ctx.repair_encountered()
            ctx.say(f"CAL: round {round_}")
            _issue(ctx, feats, round_)
            store.set_state(cal_phase="judge")
            continue
        sync_decisions(ctx)
        wait = ctx.judge("cal")
        if wait:
            return wait
        apply_stopping(ctx)
        if not len(_active(ctx)):
            break
        if round_ >= max_rounds:
            _stop_all(ctx, "max-rounds", f"{max_rounds} CAL rounds done")
            break
        store.set_state(cal_phase="issue", cal_round=round_ + 1)
    ct = store.campaign_topics()
    return {"rounds": int(store.get_state("cal_round", 0)),
            "decisions": {str(k): int(v) for k, v in ct["decision"].fillna("none").value_counts().sort_index().items()}}
