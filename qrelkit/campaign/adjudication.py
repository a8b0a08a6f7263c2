"""Budgeted judging in the campaign's pool-rest stage (docs/campaign.md, "Judging budgets").

With ``[adjudicate] strategy`` a registered adjudication strategy (:mod:`qrelkit.pooler.adjudication`),
the pool-rest stage judges each kept topic's pool in the strategy's order, ``[adjudicate] batch``
documents per topic per round, a topic's next round issued once its last round is judged
(:func:`qrelkit.pooler.next_round`), until ``[adjudicate] budget`` judgments of the topic were
made in that order (0: the whole pool) or its pool is exhausted: the Common Core 2017 protocol
(``configs/common-core-2017.toml``). With ``strategy = "none"`` the stage is
:func:`qrelkit.campaign.stages.stage_pool_rest`, unchanged: the rest of the pool in one batch.

A round is one batch of the topic's owner, issued under the fixed id ``{qid}/adj-{n:04d}`` (n
from 1; kind ``pool``). The strategy's pool is the topic's pool documents that a pooled run
retrieved (:func:`qrelkit.pooler.topic_pools`); the documents of it judged before the strategy
began (screening's, the initial qrels') are its *prior*: their outcomes known to it, never issued
again, not counted in the budget. An outcome is the campaign's label of the passage (one grade by
``[campaign] combine``) being one of ``[labels] passage_relevant``.

Nothing is held in memory between calls: the rounds issued (in issue order) and the labels are
read from the store, and the strategy is replayed from its start. The store keeps one thing more
per topic, written *before* its round is issued: what the strategy saw when it chose the topic's
last round (``campaign_state`` key ``adjudication/{qid}``: the prior and every outcome known
then). So a judgment changed after the next round was chosen (an assessor's change in the web
app, an organizer's correction) changes the qrels, not the rounds already chosen — the replay
never meets rounds it would not choose — and a kill between the record and the issue issues the
same round on resume.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from qrelkit.campaign import stages
from qrelkit.campaign.judging import Waiting
from qrelkit.campaign.settings import combine_rule
from qrelkit.config import Config
from qrelkit.errors import InputError
from qrelkit.io.tables import read_table
from qrelkit.labels.params import LabelsParams
from qrelkit.pooler import AdjudicateParams, TopicPool, next_round, topic_pools
from qrelkit.store import CampaignStore, combine_log

ROUND = "adj-"
PROGRESS_COLUMNS = ["qid", "pool", "prior", "rounds", "judged", "budget", "relevant", "owed", "state"]


def round_id(qid: str, n: int) -> str:
    """The batch id of topic ``qid``'s round ``n`` (from 1): ``{qid}/adj-{n:04d}``."""
    return f"{qid}/{ROUND}{n:04d}"


def _record_key(qid: str) -> str:
    return f"adjudication/{qid}"


def issued_rounds(store: CampaignStore) -> dict[str, list[list[str]]]:
    """Each topic's rounds issued so far, in issue order, each its docids in batch order."""
    items = store.batches.items()
    out: dict[str, dict[str, list[str]]] = {}
    for bid, q, d in zip(items["batch_id"].astype(str), items["qid"], items["docid"].astype(str)):
        if q is not None and bid.startswith(f"{q}/{ROUND}"):
            out.setdefault(str(q), {}).setdefault(bid, []).append(d)
    return {q: list(r.values()) for q, r in out.items()}


def outcomes(labels: pd.DataFrame, relevant: set[int]) -> dict[str, dict[str, bool]]:
    """Per topic, each judged passage's outcome: its label (``qid, docid, grade``, one per
    passage) in ``relevant``."""
    out: dict[str, dict[str, bool]] = {}
    for q, d, g in zip(labels["qid"].astype(str), labels["docid"].astype(str), labels["grade"]):
        out.setdefault(q, {})[d] = int(g) in relevant
    return out


def seen(store: CampaignStore, pool: TopicPool, rounds: list[list[str]],
         known_now: dict[str, bool]) -> tuple[list[str], dict[str, bool], bool]:
    """What the strategy sees when it chooses the topic's next round: its prior (docids), the
    outcomes known (docid -> relevant) and whether they are recorded already (a kill came between
    the record and the issue). Recorded for the last round: those outcomes and, for the last
    round's documents, the labels in force (``known_now``). Nothing recorded (no round yet): the
    pool documents judged now are the prior."""
    rec = store.state.get(_record_key(pool.qid))
    n = len(rounds)
    if rec is not None and rec["round"] == n + 1:
        return list(rec["prior"]), dict(rec["known"]), True
    if rec is not None and rec["round"] == n and n:
        known = dict(rec["known"])
        known.update({d: known_now[d] for d in rounds[-1] if d in known_now})
        return list(rec["prior"]), known, False
    done = {d for r in rounds for d in r}
    prior = [d for d in pool.docids if d in known_now and d not in done]
    return prior, {d: known_now[d] for d in [*prior, *sorted(done)] if d in known_now}, False


def _topic_step(ctx: stages.Context, pool: TopicPool, rounds: list[list[str]], known_now: dict[str, bool]) -> str:
    """Issue topic ``pool.qid``'s next round if it is due: ``issued``, ``out`` (its last round is
    not all judged) or ``done`` (the budget spent, or the pool exhausted)."""
    p = ctx.settings.adjudicate
    prior, known, recorded = seen(ctx.store, pool, rounds, known_now)
    if rounds and any(d not in known for d in rounds[-1]):
        return "out"
    nxt = next_round(p.strategy, pool, rounds, known, size=p.batch, budget=p.budget, prior=prior, params=p)
    if not nxt:
        return "done"
    n = len(rounds) + 1
    if not recorded:  # what the strategy saw, before the round it chose is issued
        ctx.store.state.update(**{_record_key(pool.qid): {"round": n, "prior": prior, "known": known}})
    ctx.store.assignments.issue(pool.qid, nxt, round_id(pool.qid, n), ctx.judging.assessors_for(pool.qid), kind="pool")
    return "issued"


def _issue_rounds(ctx: stages.Context, pools: dict[str, TopicPool], keep: list[str]) -> list[str]:
    """Every kept topic that owes nothing gets its next round when one is due; the topics that got one."""
    owed = set(ctx.judging.owed()["qid"].astype(str))
    rounds = issued_rounds(ctx.store)
    known = outcomes(ctx.judging.labels(), set(ctx.settings.relevant))
    moved = [q for q in keep if q in pools and q not in owed
             and _topic_step(ctx, pools[q], rounds.get(q, []), known.get(q, {})) == "issued"]
    if moved:
        ctx.say(f"adjudication: round {max(len(rounds.get(q, [])) + 1 for q in moved)}, {len(moved)} topic(s)")
    return moved


def stage_pool_rest(ctx: stages.Context) -> dict | Waiting:
    """The pool-rest stage: with ``[adjudicate] strategy = "none"``,
    :func:`qrelkit.campaign.stages.stage_pool_rest`; else the kept topics' pools judged in the
    strategy's order, round by round (see the module's documentation). With the oracle every
    round is judged as it is issued; without it, topics whose round is judged get their next one
    and the stage returns :class:`Waiting` while rounds are out. Returns the kept topics, the
    judgments the strategy made, its name, budget and batch, and per topic the judgments made
    (``judged``) and the relevant among them (``relevant``)."""
    p = ctx.settings.adjudicate
    if p.strategy == "none":
        return stages.stage_pool_rest(ctx)
    keep = stages.kept_topics(ctx)
    if "topic_pools" not in ctx.cache:  # the pool stage's file, written once: read once by a long-lived runner
        ctx.cache["topic_pools"] = topic_pools(read_table(ctx.dir / "pool.parquet"))
    pools = ctx.cache["topic_pools"]
    while True:
        if ctx.judging.oracle is not None:
            owed = ctx.judging.owed()
            if len(owed):
                ctx.judging.answer(owed)
        if not _issue_rounds(ctx, pools, keep) or ctx.judging.oracle is None:
            break
    wait = ctx.judging.judge("pool-rest")
    if wait:
        return wait
    rounds = issued_rounds(ctx.store)
    known = outcomes(ctx.judging.labels(), set(ctx.settings.relevant))
    made = {q: [d for r in rounds.get(q, []) for d in r] for q in keep}
    return {"topics": len(keep), "items": sum(len(v) for v in made.values()), "strategy": p.strategy,
            "budget": p.budget, "batch": p.batch, "judged": {q: len(v) for q, v in made.items()},
            "relevant": {q: sum(bool(known.get(q, {}).get(d)) for d in v) for q, v in made.items()}}


def adjudication_progress(directory: str | Path, store: CampaignStore, cfg: Config) -> pd.DataFrame | None:
    """Where each kept topic's budgeted judging stands (None with ``strategy = "none"``), read
    from the store and the pool alone: ``qid``, ``pool`` (the strategy's pool), ``prior``,
    ``rounds`` issued, ``judged`` (the strategy's judgments made), ``budget``, ``relevant`` (among
    them), ``owed`` (items of its rounds still owed) and ``state`` in words (a round out, the next
    round due, done: the budget spent or the pool exhausted)."""
    p = AdjudicateParams.from_config(cfg)
    if p.strategy == "none":
        return None
    try:  # the pool stage's file (gone or damaged: no topic to show, status still answers)
        pools = topic_pools(read_table(Path(directory) / "pool.parquet"))
    except (InputError, OSError, pa.ArrowException):
        pools = {}
    discarded = store.state.decided_topics("discarded")
    rounds = issued_rounds(store)
    pend = store.assignments.pending()
    owed = pend[pend["batch_id"].astype(str).str.contains(f"/{ROUND}", regex=False)].groupby("qid").size().to_dict()
    known = outcomes(combine_log(store.judgments.log(None, "all"), combine=combine_rule(cfg)),
                     {int(g) for g in LabelsParams.from_config(cfg).passage_relevant})
    finished = "pool-rest" in store.state.stages_done()
    rows = []
    for q in store.topics.all()["qid"].astype(str):
        if q in discarded or q not in pools:
            continue
        rs, k = rounds.get(q, []), known.get(q, {})
        prior = len(seen(store, pools[q], rs, k)[0])
        made = [d for r in rs for d in r]
        rows.append({"qid": q, "pool": pools[q].n_docs, "prior": prior, "rounds": len(rs),
                     "judged": sum(d in k for d in made), "budget": p.budget or None,
                     "relevant": sum(bool(k.get(d)) for d in made), "owed": int(owed.get(q, 0)),
                     "state": _state(p, len(rs), len(made), prior, pools[q].n_docs, int(owed.get(q, 0)), finished)})
    return pd.DataFrame(rows, columns=PROGRESS_COLUMNS)


def _state(p: AdjudicateParams, rounds: int, made: int, prior: int, size: int, owed: int, finished: bool) -> str:
    if owed:
        return f"round {rounds} out: {owed} item(s) owed"
    if p.budget and made >= p.budget:
        return "done: budget spent"
    if prior + made >= size:
        return "done: pool exhausted"
    if finished:
        return "done"
    return "next round due" if rounds else "not started"


def waiting_summary(progress: pd.DataFrame | None, cfg: Config, shown: int = 5) -> str:
    """The topics with a round out, in words (the end of ``campaign status``'s sentence): "" when
    none. E.g. ``pool-rest judges in mm-ns order (budget 50 per topic, rounds of 10): a round out
    on topic 1001 (round 3, 20 of 50 judged)``."""
    if progress is None or not len(progress):
        return ""
    out = progress[progress["owed"] > 0]
    if not len(out):
        return ""
    p = AdjudicateParams.from_config(cfg)
    each = [f"{r.qid} (round {r.rounds}, {r.judged} of {p.budget or r.pool - r.prior} judged)"
            for r in out.head(shown).itertuples(index=False)]
    more = f" and {len(out) - shown} more" if len(out) > shown else ""
    budget = f"budget {p.budget} per topic" if p.budget else "the whole pool"
    return (f"pool-rest judges in {p.strategy} order ({budget}, rounds of {p.batch}): a round out on "
            f"topic{'s' if len(out) > 1 else ''} {', '.join(each)}{more}")


def describe(cfg: Config) -> dict[str, Any] | None:
    """The campaign's adjudication in one dict (None with ``strategy = "none"``): strategy,
    budget per topic (0: the whole pool), batch (round size)."""
    p = AdjudicateParams.from_config(cfg)
    return None if p.strategy == "none" else {"strategy": p.strategy, "budget": p.budget, "batch": p.batch}
