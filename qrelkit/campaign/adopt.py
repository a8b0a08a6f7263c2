"""Editing a campaign's protocol file after ``campaign init`` (docs/campaign.md, "Editing the
protocol file"): which stages read each configuration key (:data:`CONFIG_STAGES`), which stages
are under way, and the adoption of the file's changed values for the stages not run yet
(:func:`adopt_config`, ``qrelkit campaign adopt-config``).
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from qrelkit.campaign.door import guidelines_file
from qrelkit.campaign.store import campaign_config, describe_change, input_record, protocol_file_config
from qrelkit.config import CAMPAIGN_STAGES, Config, changed_values
from qrelkit.errors import InputError
from qrelkit.store import CampaignStore

#: the pseudo-stage of what ``campaign init`` read (always done: never adoptable)
INIT = "init"
_JUDGING = ("screening", "pool-rest", "fractional", "cal")  # the stages that issue batches to assessors
_RUNS = ("validate", "pool", "fractional", "evaluate", "reuse")  # the stages that read the runs
_ONE_GRADE = _JUDGING + ("qrels", "report")  # several assessors' grades -> one ([campaign] combine)

#: the campaign stages that read each configuration key: ``"section.key"`` first, then
#: ``"section"``, then the top section (``stopping`` for ``[stopping.<rule>]``); a key listed
#: nowhere is read by every stage (conservative; ``[protocol] plugins`` among them). ``()``: no stage
#: reads it (informative, or read by other commands and the web app only, as they run).
#: :data:`INIT`: read by ``campaign init`` (the topics' CAL threads, the runs as validated there).
CONFIG_STAGES: dict[str, tuple[str, ...]] = {
    "protocol.name": ("report",),
    "protocol.source": (),
    "runs": (INIT, *_RUNS),
    "selection": ("select",),
    "pool.kind": ("pool",),
    "pool.depth": ("pool", "fractional"),
    "pool.judged": ("pool",),
    "pool.ties": (INIT, *_RUNS),
    "pool.dedupe": (),
    "pool.order": (),
    "top1": (),
    "fused": (),
    "screen": ("screening",),
    "fractional": ("fractional", "cal"),
    "adjudicate": ("pool-rest", "report"),
    "batch.first_n": (),
    "batch.seed": (),
    "batch.assessors_per_item": _JUDGING,
    "labels.scale": (INIT, "pool", *_ONE_GRADE),
    "labels.passage_relevant": ("screening", "pool-rest", "cal", "qrels", "evaluate", "report"),
    "labels.vote_threshold": _ONE_GRADE,
    "labels.graded": _ONE_GRADE,
    "labels.fallback": _ONE_GRADE,
    "labels.document_relevant": ("qrels", "evaluate", "reuse"),
    "labels.document_rule": ("qrels",),
    "labels.grade_map": ("qrels",),
    "labels.schemes": ("evaluate", "reuse"),
    "labels.agreement_level": ("report",),
    "eval": ("evaluate", "reuse", "report"),
    "prefs": (),
    "cal.threads": (INIT, "cal"),
    "cal.official_thread": ("cal", "qrels"),
    "cal.shard_size": ("cal",),
    "cal.hashing": ("cal",),
    "cal": ("cal",),
    "stopping": ("cal", "report"),  # [stopping] rule and every rule's section: the campaign's rule may be any of them
    "reuse": ("reuse",),
    "campaign.assessors": _JUDGING,
    "campaign.owner_judges_cal": ("cal",),
    "campaign.combine": _ONE_GRADE,
    "campaign.max_rounds": ("cal",),
    "web": (),
    "dedupe": ("dedupe", "cal"),  # the near-duplicate classes; the CAL features' tokenization
}


def stages_using(section: str, key: str) -> tuple[str, ...]:
    """The stages that read ``[section] key`` (:data:`CONFIG_STAGES`; every stage when unknown)."""
    for name in (f"{section}.{key}", section, section.partition(".")[0]):
        if name in CONFIG_STAGES:
            return CONFIG_STAGES[name]
    return (INIT, *CAMPAIGN_STAGES)


def _skip_stages(change: dict) -> tuple[str, ...]:
    """``[campaign] skip`` changed: the stages it adds or removes and every stage after the first
    of them (they would run on different artefacts)."""
    moved = set(change["old"]) ^ set(change["new"])
    if not moved:
        return ()
    first = min(CAMPAIGN_STAGES.index(s) for s in moved)
    return CAMPAIGN_STAGES[first:]


def under_way(store: CampaignStore, directory: Path) -> dict[str, str]:
    """The stages done or started, with why: ``done``, ``batches issued`` (a judging stage whose
    batches exist), ``CAL features built``; and :data:`INIT`."""
    out = {INIT: "done at campaign init"}
    out.update({name: "done" for name in store.state.stages_done()})
    b = store.batches.all(counts=False)
    ids, kinds = b["batch_id"].astype(str), b["kind"].astype(str)
    rest = ids.str.endswith("/pool-rest") | ids.str.contains(r"/adj-\d+$")  # the whole rest, or adjudication rounds
    for stage, issued in (("screening", ids.str.endswith("/screen")), ("pool-rest", rest),
                          ("fractional", ids.str.endswith("/fractional")), ("cal", kinds == "cal")):
        if stage not in out and bool(issued.any()):
            out[stage] = "started: batches issued"
    if "cal" not in out and (Path(directory) / "features").exists():
        out["cal"] = "started: CAL features built"
    return out


def config_adoption(store: CampaignStore, directory: Path, now: Config) -> list[dict[str, Any]]:
    """Every key whose value the protocol file (``now``: :func:`~qrelkit.campaign.store.protocol_file_config`)
    changed since the campaign's configuration was recorded: ``section, key, old, new, where,
    stages`` (those that read it) and ``refused`` (``read by stage S, which is ...``: the first of
    them done or started; None when the change can be adopted)."""
    busy = under_way(store, directory)
    out = []
    for c in changed_values(campaign_config(store), now):
        used = _skip_stages(c) if (c["section"], c["key"]) == ("campaign", "skip") else stages_using(c["section"], c["key"])
        hit = next((s for s in used if s in busy), None)
        out.append({**c, "stages": list(used), "refused": None if hit is None else f"read by stage {hit}, which is {busy[hit]}"})
    return out


def adopt_config(store: CampaignStore, directory: Path, *, dry_run: bool = False) -> dict[str, Any]:
    """Adopt the protocol file's changed values for the stages not run yet: accepted only when no
    stage that reads a changed key is done or started (else ``[adopt-refused]``, naming the key
    and the stage, nothing changed). Then the file's effective configuration is the campaign's,
    and its bytes are recorded (a comment-only edit just records them). ``dry_run``: report,
    change nothing. Returns ``changes`` (:func:`config_adoption`) and ``adopted``."""
    now = protocol_file_config(store)
    if now is None:
        raise InputError("bad-option", "this campaign has no protocol file (it was created without --config)",
                         file=str(directory))
    changes = config_adoption(store, directory, now)
    guide = guidelines_file(now, now.source)  # [web] guidelines: a readable UTF-8 file, or refused now
    refused = [c for c in changes if c["refused"]]
    if refused and not dry_run:
        c = refused[0]
        more = f" ({len(refused) - 1} other change(s) refused too)" if len(refused) > 1 else ""
        line = str(c["where"]).rpartition(":")[2]
        raise InputError("adopt-refused", f"{describe_change(c)} is {c['refused']}: the campaign cannot take it any "
                         f"more{more}; restore the value, or start a new campaign with this one's judgments "
                         "(docs/campaign.md)", file=now.source, line=int(line) if line.isdigit() else None)
    if dry_run:
        return {"changes": changes, "adopted": False}
    when = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    store.state.adopt_config(input_record("config", now.source), now.effective(),
                             {"when": when, "changes": [describe_change(c) for c in changes]})
    store.state.update(paths={**(store.state.get("paths") or {}), "guidelines": str(guide) if guide else None})
    for c in changes:
        store.state.warn("config", f"adopted {describe_change(c)} (read by {', '.join(c['stages']) or 'no stage'})")
    return {"changes": changes, "adopted": True}
