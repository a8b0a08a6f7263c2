"""Why a campaign waits, and what to do (``qrelkit campaign status``; docs/campaign.md,
"Operating a campaign").

:func:`campaign_health` reads a campaign without changing anything (the store opened read-only,
the advance lock only probed) and says:

* ``state``: ``done``; ``blocked`` (an input is gone or changed, or the last run failed and
  nothing got through since); ``busy`` (another process advances it now); ``waiting`` (batches
  are out: assessors owe items); ``ready`` (nothing is owed: the next ``campaign run`` goes on);
* ``inputs``: every recorded input gone or changed, with what to do;
* ``failure``: the last run's failure (stage, time, rule, message, who ran it) with what to do,
  until a run gets through the stages again;
* ``lock``: who advances the campaign now (``what``, ``pid``, ``since``), or None;
* ``owed``: per batch out and assessor, the items owed, the batch file, and whether anyone can
  judge it: when the campaign has web accounts (``qrelkit serve``), an assessor without one or
  with a revoked one can never judge in the app — ``judgeable`` false, and the note says how to
  fix it;
* ``adjudication``: with an ``[adjudicate] strategy``, where each kept topic's budgeted judging
  stands (:func:`qrelkit.campaign.adjudication.adjudication_progress`: rounds, judged of the
  budget, a round out); the summary of a waiting campaign names the topics with a round out.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from qrelkit.campaign.adjudication import adjudication_progress, waiting_summary
from qrelkit.campaign.lock import describe_holder, held_by
from qrelkit.campaign.judging import batch_file
from qrelkit.campaign.store import campaign_config, input_problems
from qrelkit.config import CAMPAIGN_STAGES, CampaignParams, WebParams
from qrelkit.store import CampaignStore, open_campaign_store

def _kept(file: str | None) -> str:
    """How the campaign knows an input as it was at init."""
    if file is not None and file.startswith("irds:"):
        return "its fingerprint is recorded: the same dataset, version and records"
    if file is not None and Path(file).is_dir():
        return "each shard's SHA-256 is recorded, and their names"
    return "its SHA-256 is recorded"


def todo(rule: str, directory: str | os.PathLike, file: str | None = None, *, config: bool = False) -> str:
    """What an operator does about a problem of rule ``rule`` (one sentence; ``config``: the
    problem is the protocol file's)."""
    d = str(directory)
    again = f"then 'qrelkit campaign run {d}' continues where it stopped"
    adopt = f"'qrelkit campaign adopt-config {d}' adopts its new values for the stages not run yet; or " if config else ""
    return {
        "input-missing": f"put {file or 'the file'} back where init found it; {again}",
        "input-changed": f"restore {file or 'the file'} as it was at init ({_kept(file)}); {adopt}start a new "
                         f"campaign from this one's judgments ('qrelkit campaign export {d}', then 'campaign init "
                         "--qrels'); " + again,
        "disk-full": f"free some space on the disk of {d}; {again} (nothing stored was lost)",
        "internal-error": "a bug in qrelkit (the failing command printed its traceback): report it; "
                          f"'qrelkit campaign run {d}' tries again and repeats nothing that was stored",
        "campaign-busy": "wait for the other process to finish (or stop it); " + again,
    }.get(rule, f"fix what the message names; {again}")


def owed_items(directory: str | os.PathLike, store: CampaignStore, *, free_choice: bool = False) -> list[dict]:
    """Per batch out and assessor (issue order): ``qid, batch_id, kind, assessor, owed, items,
    file, judgeable, note`` (see the module documentation)."""
    pend = store.assignments.pending()
    if not len(pend):
        return []
    sizes = store.batches.all(counts=True).set_index("batch_id")["items"].to_dict()
    accounts = {a["name"]: a for a in store.accounts.all()}
    rows = []
    for (bid, assessor), g in pend.groupby(["batch_id", "assessor"], sort=False):
        acc = accounts.get(assessor)
        judgeable, note = True, ""
        if accounts and (acc is None or acc["revoked"]):
            why = "has no account" if acc is None else f"has a revoked account (since {acc['revoked']})"
            judgeable = free_choice
            note = (f"{assessor} {why} in the web app: add one ('qrelkit campaign assessor add {directory} {assessor}')"
                    + (", or another assessor takes the topic ([web] free_topic_choice)" if free_choice else
                       ", or nobody can judge this batch in the app (import a file for it instead)"))
        rows.append({"qid": str(g["qid"].iat[0]), "batch_id": str(bid), "kind": str(g["kind"].iat[0]),
                     "assessor": str(assessor), "owed": int(len(g)), "items": int(sizes.get(bid, len(g))),
                     "file": str(batch_file(directory, assessor, bid)), "judgeable": judgeable, "note": note})
    return rows


def campaign_health(directory: str | os.PathLike) -> dict[str, Any]:
    """Why the campaign in ``directory`` waits and what to do (see the module documentation):
    ``state, summary, inputs, failure, lock, owed, adjudication``. Changes nothing."""
    d = Path(directory)
    store = open_campaign_store(d, readonly=True)
    try:
        config_file = (store.state.get("paths") or {}).get("config")
        inputs = [{"rule": e.rule, "file": e.file, "message": str(e),
                   "todo": todo(e.rule, d, e.file, config=bool(config_file) and e.file == config_file)}
                  for e in input_problems(store)]
        failure = store.state.failure()
        if failure:
            failure = {**failure, "todo": todo(str(failure.get("rule")), d)}
        cfg = campaign_config(store)  # the recorded configuration: what the campaign runs with
        free, skip = WebParams.from_config(cfg).free_topic_choice, set(CampaignParams.from_config(cfg).skip)
        owed = owed_items(d, store, free_choice=free)
        done = set(store.state.stages_done())
        adj = adjudication_progress(d, store, cfg) if "pool" in done else None
    finally:
        store.close()
    lock = held_by(d)
    left = [s for s in CAMPAIGN_STAGES if s not in done and s not in skip]
    state, summary = _state(d, inputs, failure, lock, owed, left)
    rounds = waiting_summary(adj, cfg) if state == "waiting" else ""
    return {"state": state, "summary": summary + (f"; {rounds}" if rounds else ""), "inputs": inputs,
            "failure": failure, "lock": lock, "owed": owed,
            "adjudication": [] if adj is None else adj.to_dict("records")}


def _state(d: Path, inputs: list, failure: dict | None, lock: dict | None, owed: list[dict],
           left: list[str]) -> tuple[str, str]:
    """The campaign's state and one sentence for it (see :func:`campaign_health`)."""
    if inputs:
        return "blocked", f"blocked: {len(inputs)} input(s) gone or changed since init; {inputs[0]['todo']}"
    if lock is not None:
        return "busy", f"busy: {describe_holder(lock)} advances it now"
    if failure:
        return "blocked", (f"blocked: the last run failed in stage {failure.get('stage')} at {failure.get('time')}: "
                           f"{failure.get('message')}; {failure['todo']}")
    if not left:
        return "done", "done: every stage is done"
    if owed:
        who = sorted({r["assessor"] for r in owed})
        stuck = [r for r in owed if not r["judgeable"]]
        return "waiting", (f"waiting for judgments: {sum(r['owed'] for r in owed)} item(s) of {len({r['batch_id'] for r in owed})}"
                           f" batch(es) owed by {', '.join(who)}" + (f"; {len(stuck)} batch(es) nobody can judge in the "
                                                                    "web app (see the notes)" if stuck else ""))
    return "ready", f"ready: nothing is owed; 'qrelkit campaign run {d}' goes on with stage {left[0]}"
