"""The screening step of the judging protocol: is a topic worth judging?

TREC 2022 Deep Learning (docs/protocol.md, steps 1-2; config section ``[screen]``): the assessor
first judges the first ``first_n`` (100) items of the topic's pool, in pool order. The topic is
discarded when at least ``discard_if_relevant_share_at_least`` (0.5) of them are relevant (too many
relevant items for the pool to find them all), or, with ``discard_if_no_relevant``, when none is.

:func:`screen_topics` applies the rule to every topic: the *screening set* of a topic is

* with a pool (``qid, docid``; ordered by ``position`` when the table has it, else in row order):
  its first ``first_n`` items — fewer when the topic's pool is smaller;
* without a pool: the first ``first_n`` passages judged for the topic, in judging order (the
  judging store's order: pool batches are issued first, so these are the pool's first items).

A topic's decision (:data:`DECISIONS`) is ``incomplete`` until every item of its screening set is
judged (without a pool: until ``first_n`` are judged; an empty pool is never complete), then
``discard-none`` (no relevant item, when that rule is on), ``discard-too-many`` (relevant share >=
the threshold, compared exactly: 50 of 100 discards at 0.5) or ``keep``. Relevant means a grade
in ``relevant_grades`` (the config's ``[labels] passage_relevant``: 2, 3).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from qrelkit.cal.params import ScreenParams
from qrelkit.cal.stopping import status_table
from qrelkit.store.combine import DEFAULT_COMBINE, combine_log
from qrelkit.errors import InputError

KEEP, DISCARD_TOO_MANY, DISCARD_NONE, INCOMPLETE = "keep", "discard-too-many", "discard-none", "incomplete"
DECISIONS = (KEEP, DISCARD_TOO_MANY, DISCARD_NONE, INCOMPLETE)
SCREENING_COLUMNS = ["qid", "to_screen", "screened", "relevant", "share", "decision"]


class ScreeningRule(ScreenParams):
    """The screening rule: its parameters (:class:`~qrelkit.cal.params.ScreenParams`, ``[screen]``
    and ``[labels] passage_relevant``; ``from_config``) and the decision they make."""

    def decide(self, to_screen: int, screened: int, relevant: int) -> str:
        """The decision for a topic whose screening set has ``to_screen`` items, ``screened`` of
        them judged, ``relevant`` of those relevant."""
        if to_screen <= 0 or screened < to_screen:
            return INCOMPLETE
        if relevant == 0 and self.discard_if_none:
            return DISCARD_NONE
        if Fraction(relevant, screened) >= Fraction(str(self.discard_share)):
            return DISCARD_TOO_MANY
        return KEEP


def _frame(df: pd.DataFrame | Any, what: str, need: Sequence[str]) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        df = df.to_pandas()
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise InputError("missing-column", f"{what} needs column(s) {', '.join(missing)}")
    return df


def screen_topics(judgments: pd.DataFrame, pool: pd.DataFrame | None = None, *, topics: Iterable[str] | None = None,
                  rule: ScreeningRule | None = None, **params: Any) -> pd.DataFrame:
    """Per topic (:data:`SCREENING_COLUMNS`): the size of its screening set, how many of it are
    judged, how many relevant, their share and the decision (see the module documentation).

    ``judgments``: ``qid, docid, grade`` in judging order, one grade per (topic, passage) (the
    first row counts when a passage repeats); ``pool``: ``qid, docid`` (``position`` optional) or
    None; ``topics``: every topic to report (default: the topics of the pool, else of the
    judgments), in this order; ``rule`` or its parameters (:class:`ScreeningRule`)."""
    rule = rule or ScreeningRule(**params)
    j = _frame(judgments, "judgments", ["qid", "docid", "grade"])
    j = j.assign(qid=j["qid"].astype(str), docid=j["docid"].astype(str)).drop_duplicates(["qid", "docid"], keep="first")
    rel = np.isin(j["grade"].to_numpy(dtype=np.int64), np.asarray(rule.relevant_grades, dtype=np.int64))
    grade_rel = dict(zip(zip(j["qid"], j["docid"]), rel.tolist()))
    n = int(rule.first_n)
    if pool is not None:
        p = _frame(pool, "pool", ["qid", "docid"])
        p = p.assign(qid=p["qid"].astype(str), docid=p["docid"].astype(str))
        if "position" in p.columns:
            p = p.sort_values("position", kind="stable")
        sets = {q: g["docid"].head(n).tolist() for q, g in p.groupby("qid", sort=False)}
    else:
        sets = {q: g["docid"].head(n).tolist() for q, g in j.groupby("qid", sort=False)}
    order = [str(t) for t in topics] if topics is not None else list(sets)
    rows = []
    for q in order:
        items = sets.get(q, [])
        to_screen = len(items) if pool is not None else n
        judged = [grade_rel[(q, d)] for d in items if (q, d) in grade_rel]
        screened, relevant = len(judged), int(sum(judged))
        share = relevant / screened if screened else float("nan")
        rows.append((q, to_screen, screened, relevant, share, rule.decide(to_screen, screened, relevant)))
    return pd.DataFrame(rows, columns=SCREENING_COLUMNS).astype(
        {"to_screen": np.int64, "screened": np.int64, "relevant": np.int64, "share": np.float64})


def store_screening(store, *, config: Mapping | None = None, pool: pd.DataFrame | None = None,
                    combine: str = DEFAULT_COMBINE, **params: Any) -> pd.DataFrame:
    """:func:`screen_topics` over a judging store's judgments (every thread, one grade per
    passage by ``combine``) and topics, with the config's ``[screen]`` rule."""
    log = store.judgments.log(None, "all")
    return _screening_from_log(store, log, pool, ScreeningRule.from_config(config, **params),
                               combine)


def _screening_from_log(store, log: pd.DataFrame, pool: pd.DataFrame | None, rule: ScreeningRule,
                        combine: str) -> pd.DataFrame:
    """:func:`store_screening` from ``log``, the store's pool and cal judgments already read."""
    labels = combine_log(log, combine=combine)
    return screen_topics(labels, pool, topics=store.topics.all()["qid"].astype(str).tolist(), rule=rule)


def status_with_screening(store, *, config: Mapping | None = None, pool: pd.DataFrame | None = None,
                          combine: str = DEFAULT_COMBINE, **status: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``cal status``: the stopping rules' status table (:func:`~qrelkit.cal.stopping.status_table`)
    with a ``screening`` column (the topic's screening decision), and the screening table."""
    log = store.judgments.log(None, None, include_sample=True)  # read once: the status and the screening
    df = status_table(store, config=config, combine=combine, _log=log, **status)
    scr = _screening_from_log(store, log[log["kind"] != "sample"], pool, ScreeningRule.from_config(config), combine)
    decision = dict(zip(scr["qid"], scr["decision"]))
    return df.assign(screening=[decision.get(str(q), INCOMPLETE) for q in df["qid"]]), scr
