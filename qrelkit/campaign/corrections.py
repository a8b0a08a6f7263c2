"""Correcting judgments from the command line (``qrelkit campaign judgments list|set|retract``;
docs/campaign.md, "Operating a campaign").

An organizer lists the judgments in force (or their whole history), changes an assessor's grade
of an item, or retracts it. Nothing is ever deleted or updated: a change is a row appended to the
judging store's change log (``judgment_changes``, the log an assessor's change in the web app
writes too: :func:`apply_changes`), so the
original grade and every change stay for audit. The grade in force is what every later reading
uses — the next CAL round's training labels, the stopping rule, the density, the qrels:

* ``set``: every judgment in force of (topic, passage, assessor) — the original and the copies
  CAL made of it in later batches — takes the new grade (a retracted one is brought back with it);
* ``retract``: they leave the log's readings, and the item is owed again by its assessor (the
  campaign asks for it at its next wait).

A correction that changes anything makes the closing stages (qrels, evaluate, reuse, report)
run again at the next ``campaign run``, which rewrites their files from the grades in force.
Decisions already made (screening, stopping) stay: a correction does not reopen a decided topic.
A correction waits for the campaign's advance lock, so it never slips into a CAL round at work.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd

from qrelkit.campaign.lock import advance_lock
from qrelkit.campaign.store import campaign_config
from qrelkit.errors import InputError
from qrelkit.io.tables import read_answer_table
from qrelkit.labels.params import LabelsParams
from qrelkit.store import CampaignStore, open_campaign_store

#: stages whose files are made from the judgments in force after every decision
CLOSING_STAGES = ("qrels", "evaluate", "reuse", "report")


def list_judgments(directory: str | os.PathLike, *, topic: str | None = None, assessor: str | None = None,
                   batch: str | None = None, history: bool = False) -> pd.DataFrame:
    """The judgments in force (``seq, qid, docid, assessor, grade, batch_id, source, time``), of
    one ``topic``, ``assessor`` and/or ``batch`` when given, in log order; with ``history`` every
    judgment ever made and every change of it, one row each (``change`` 0 for the judgment itself,
    then 1, 2, ... for its changes; ``grade`` empty for a retraction)."""
    store = open_campaign_store(directory, readonly=True)
    try:
        return store.judgments.records(topic=topic, assessor=assessor, batch=batch, history=history)
    finally:
        store.close()


def read_corrections(path: str | os.PathLike, *, retract: bool) -> pd.DataFrame:
    """A corrections file (CSV, TSV, JSONL, Parquet): ``qid, docid, assessor`` and, to set,
    ``grade`` — one row per item to change, as ``qrelkit campaign judgments list`` writes them."""
    cols = ["qid", "docid", "assessor"] + ([] if retract else ["grade"])
    df, offset = read_answer_table(Path(path), cols, what="corrections", lacks="corrections need column(s)")
    out = df[cols].astype(str).apply(lambda c: c.str.strip())
    out["line"] = range(offset, offset + len(out))
    out["file"] = str(path)
    return out


def correct_judgments(directory: str | os.PathLike, rows: pd.DataFrame, *, retract: bool = False, reason: str = "",
                      on_wait: Callable[[str], None] | None = None) -> dict:
    """Set (``grade`` column) or retract (``retract``) the judgments in force of the items in
    ``rows`` (``qid, docid, assessor``; ``file``/``line`` name them in errors) in one
    transaction, under the campaign's advance lock (see the module documentation). Strict: an
    item with no judgment of that assessor is ``[unknown-judgment]``, a grade outside the
    campaign's scale ``[grade-outside-scale]``, nothing is changed. Returns ``items``,
    ``changed`` (judgments whose grade in force changed), ``unchanged`` (already so) and
    ``stages_to_redo`` (closing stages that will run again)."""
    d = Path(directory)
    with advance_lock(d, what="a judgments correction", on_wait=on_wait):
        store = open_campaign_store(d)
        try:
            scale = {int(g) for g in LabelsParams.from_config(campaign_config(store)).scale}
            items = list(_items(rows, retract, scale))
            source = "organizer-retract" if retract else "organizer-set"
            res = apply_changes(store, items, source=source + (f": {reason}" if reason else ""))
        finally:
            store.close()
    return {"items": len(items), **res}


def apply_changes(store: CampaignStore, items: Iterable[tuple], *, source: str) -> dict:
    """Change the grades in force of ``items`` (``(qid, docid, assessor, grade or None, file,
    line)``: :meth:`~qrelkit.store.interfaces.JudgmentLog.change_judgments`) and forget the
    closing stages when anything changed, in one transaction: what a correction of the organizer
    and an assessor's own change in the web app both write. The caller holds the campaign's
    advance lock. Returns ``changed``, ``unchanged`` and ``stages_to_redo``."""
    with store.transaction():  # the changes and the closing stages forgotten: all or nothing
        res = store.judgments.change_judgments(items, source=source)
        again = store.state.forget_stages(CLOSING_STAGES) if res["changed"] else []
    return {**res, "stages_to_redo": again}


def _items(rows: pd.DataFrame, retract: bool, scale: set[int]) -> Iterable[tuple]:
    """``(qid, docid, assessor, grade or None, file, line)`` of each row, the grade checked."""
    for i, r in enumerate(rows.to_dict("records")):
        where = {"file": r.get("file", "<corrections>"), "line": r.get("line", i + 1)}
        for c in ("qid", "docid", "assessor"):
            if not str(r.get(c, "") or "").strip():
                raise InputError("missing-value", f"empty {c}", **where)
        grade = None
        if not retract:
            raw = str(r.get("grade", "")).strip()
            if not raw.lstrip("-").isdigit() or int(raw) not in scale:
                raise InputError("grade-outside-scale", f"grade {raw!r} is not one of the scale {sorted(scale)}", **where)
            grade = int(raw)
        yield str(r["qid"]).strip(), str(r["docid"]).strip(), str(r["assessor"]).strip(), grade, where["file"], \
            where["line"]
