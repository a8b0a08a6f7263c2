"""The stages of a campaign (docs/campaign.md): each one sequences public functions of pooler/,
dedupe/, cal/, labels/, evaluate/ and reuse/ over the campaign's state (:class:`Context`).

A stage returns its summary (a JSON-able dict, recorded in the store when it completes) or a
:class:`Waiting` when judgments are missing. Every stage can be run again after a kill: its store
writes are idempotent (batches are issued under fixed ids, unless they exist; judgments already in
the log are not asked for again) and its artefacts are written atomically and deterministically.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.cal.features import build_features, load_features
from qrelkit.cal.loop import CandidateCache
from qrelkit.cal.screening import screen_topics
from qrelkit.campaign.inputs import Inputs
from qrelkit.campaign.judging import Judging, Waiting
from qrelkit.campaign.settings import Settings
from qrelkit.config import Config
from qrelkit.dedupe.cluster import cluster_corpus
from qrelkit.dedupe.distributed import cluster_corpus_dask
from qrelkit.io.sources import CorpusSource, open_corpus
from qrelkit.io.tables import write_table
from qrelkit.pooler import (configured_pool, filter_runs, fractional_ids, fractional_ids_from_corpus, pool_selection,
                            pool_size_distribution, restrict_runs)
from qrelkit.store import CampaignStore


class Context:
    """A campaign run as the stages see it: its folder and store, its ``settings`` (every
    component's parameters, read once from the recorded configuration), its ``inputs`` (the tables
    the stages read), its ``judging`` (assessors, what is owed, the oracle, batch files), the
    run's ``cache`` (what a long-lived runner keeps across calls: CAL features and candidates, the
    text index, the batch files written) and ``say`` (progress, one line per step)."""

    def __init__(self, directory: Path, store: CampaignStore, cfg: Config, paths: dict,
                 oracle: dict | None = None, progress: Callable[[str], None] | None = None) -> None:
        self.dir, self.store, self.cfg, self.paths = directory, store, cfg, paths
        self.say = progress or (lambda _msg: None)
        self.cache: dict = {}
        self.candidates = CandidateCache()  # the CAL threads' candidates, computed once per features
        self.settings = Settings.from_config(cfg)
        self.inputs = Inputs(directory, store, paths, self.settings)
        self.judging = Judging(directory, store, self.settings, self.inputs, oracle, self.cache)

    @functools.cached_property
    def corpus(self) -> CorpusSource | None:
        """The corpus as a source (``[sources]`` maps an ``irds:`` dataset's fields), opened when a
        stage first reads it: what only looks at the store (status, the web pages) never opens it,
        so that a folder changed since init is the inputs' ``[input-changed]``, not a reader's error."""
        return open_corpus(self.paths["corpus"], params=self.settings.sources) if self.paths.get("corpus") else None

    def enabled(self, stage: str) -> bool:
        """Whether ``stage`` runs (not in ``[campaign] skip``)."""
        return stage not in self.settings.campaign.skip

    def write(self, table: pa.Table | pd.DataFrame, name: str, kind: str, **params: Any) -> Path:
        """Write an artefact of the campaign, ``DIR/name`` (its parameters in the metadata)."""
        if isinstance(table, pd.DataFrame):
            table = pa.Table.from_pandas(table, preserve_index=False)
        return write_table(table, self.dir / name, kind=kind, params=params)


# ----------------------------------------------------------------------------------------- stages


def stage_validate(ctx: Context) -> dict:
    """Read and validate the runs (against the manifest and the topics); run warnings go to the
    store; returns the counts of runs, documents, topics and issues and the repairs made."""
    rs = ctx.inputs.runset
    issues = rs.issues
    for r in issues.itertuples(index=False):
        if getattr(r, "severity", "") == "warning":
            ctx.store.state.warn("validate", f"run {r.run}: [{r.rule}] {r.message} ({r.count}x)")
        elif getattr(r, "severity", "") == "error":  # only here when lenient: repaired, and said so
            ctx.store.state.warn("validate", f"run {r.run}: [{r.rule}] {r.message} ({r.count}x); repaired: {r.repair}")
    return {"runs": len(rs.runs), "documents": rs.table.num_rows, "topics": len(ctx.inputs.topic_ids),
            "issues": int(len(issues)), "repaired": {k: int(v) for k, v in rs.repairs().items() if v}}


def stage_select(ctx: Context) -> dict:
    """Decide the pooled runs from the manifest (``[selection]`` configuration); writes
    ``selection.csv``; returns the number of runs and of pooled runs."""
    sel = pool_selection(ctx.inputs.manifest, **ctx.settings.selection.select_args())
    ctx.write(sel, "selection.csv", "pool-selection")
    return {"runs": int(len(sel)), "pooled": int(sel["pooled"].sum())}


def stage_dedupe(ctx: Context) -> dict:
    """Cluster the corpus into near-duplicate classes (``[dedupe]`` configuration); writes
    ``classes.parquet``; returns the class statistics (passages, classes, duplicate classes, ...)."""
    params, dask = ctx.settings.dedupe, ctx.settings.campaign.dask()
    if dask is None:
        clu = cluster_corpus(ctx.corpus, params)
    else:  # the same classes, band by band on the workers ([campaign] workers, scheduler)
        clu = cluster_corpus_dask(ctx.corpus, params, scheduler=dask.get("scheduler"), n_workers=dask.get("workers") or 2)
    ctx.write(clu.classes, "classes.parquet", "dedupe-classes", **params.as_dict())
    ctx.inputs.__dict__.pop("classes", None)  # read again: the stage wrote them
    st = clu.stats
    return {k: st[k] for k in ("passages", "classes", "duplicate_classes", "passages_in_duplicate_classes", "largest_class")}


def stage_pool(ctx: Context) -> dict:
    """The pool of the pooled runs: the kind ``[pool] kind`` (the depth pool: ``[pool] depth``)
    with its parameters from the configuration (:func:`qrelkit.pooler.configured_pool`), with the
    classes and the initial qrels; writes ``pool.parquet`` and imports the initial qrels as judged;
    returns the kind's parameters (depth), items, topics and the number of pooled runs."""
    runs = filter_runs(ctx.inputs.runset.table, ctx.inputs.pooled_runs)
    init = ctx.inputs.initial_qrels()
    made = configured_pool(None, runs, ctx.cfg, classes=ctx.inputs.classes, qrels=init)
    pool = made.table
    write_table(pool, ctx.dir / "pool.parquet", kind=f"pool-{made.kind}", params={**made.summary,
                                                                              "pooled_runs": ctx.inputs.pooled_runs})
    if init is not None:  # judgments made before the campaign count as judged (one batch per topic)
        q = init.to_pandas()
        q = q[(q["rel"] >= 0) & q["qid"].isin(set(ctx.inputs.topic_ids))]
        initial = pd.DataFrame({"qid": q["qid"], "docid": q["docid"], "assessor": "qrels", "grade": q["rel"],
                                "batch_id": [f"{x}/initial" for x in q["qid"]]})
        ctx.store.judgments.import_judgments(initial, source="initial-qrels", scale=None)
    dist = pool_size_distribution(pool)
    return {**made.summary, "items": int(pool.num_rows), "topics": int(dist["topics"]),
            "runs_pooled": len(ctx.inputs.pooled_runs)}


def _issue_pool_batches(ctx: Context, items: dict[str, list[str]], suffix: str) -> int:
    n = 0
    for qid in ctx.inputs.topic_ids:
        its = items.get(qid) or []
        if its:
            ctx.store.assignments.issue(qid, its, f"{qid}/{suffix}", ctx.judging.assessors_for(qid), kind="pool")
            n += len(its)
    return n


def _judged_or_issued(ctx: Context) -> set[tuple[str, str]]:
    rows = ctx.store.batches.items()
    out = set(zip(rows["qid"], rows["docid"]))
    lab = ctx.judging.labels()
    return out | set(zip(lab["qid"].astype(str), lab["docid"].astype(str)))


def stage_screening(ctx: Context) -> dict | Waiting:
    """Issue the first pool passages of each topic for judging, then screen the topics on those
    judgments (:func:`qrelkit.cal.screening.screen_topics`): a discarded topic has its CAL threads
    rejected; returns the count of each decision, or :class:`Waiting` while judgments are out."""
    rule = ctx.settings.screen
    pool = ctx.inputs.pool.sort_values(["position"], kind="stable")
    done = _judged_or_issued(ctx)
    items = {q: [d for d in g["docid"].astype(str).head(rule.first_n) if (q, d) not in done]
             for q, g in pool.groupby("qid", sort=False)}
    _issue_pool_batches(ctx, items, "screen")
    wait = ctx.judging.judge("screening")
    if wait:
        return wait
    scr = screen_topics(ctx.judging.labels(), pool[["qid", "docid", "position"]], topics=ctx.inputs.topic_ids,
                        rule=rule)
    rows = []
    for r in scr.itertuples(index=False):
        row = {"qid": r.qid, "screening": r.decision, "screened": int(r.screened), "screened_relevant": int(r.relevant)}
        if r.decision != "keep":
            row.update(decision="discarded", rule="screening", reason=f"{r.decision}: {r.relevant} relevant of {r.screened} screened")
        rows.append(row)
    ctx.store.state.set_topics(rows)
    for r in rows:
        if r["screening"] != "keep":
            for th in ctx.store.topics.threads(r["qid"])["thread"]:
                ctx.store.topics.set_thread_state(r["qid"], th, "rejected", f"screening: {r['screening']}")
    return {"decisions": {k: int(v) for k, v in scr["decision"].value_counts().sort_index().items()}}


def kept_topics(ctx: Context) -> list[str]:
    """The campaign's topics (in order) that screening did not discard."""
    discarded = ctx.store.state.decided_topics("discarded")
    return [q for q in ctx.inputs.topic_ids if q not in discarded]


def stage_pool_rest(ctx: Context) -> dict | Waiting:
    """Issue the rest of the pool of every kept topic (the passages not judged or issued before)
    and have it judged; returns the numbers of kept topics and issued items, or :class:`Waiting`."""
    pool = ctx.inputs.pool.sort_values(["position"], kind="stable")
    keep = set(kept_topics(ctx))
    done = _judged_or_issued_before(ctx, "/pool-rest")
    items = {q: [d for d in g["docid"].astype(str) if (q, d) not in done] for q, g in pool.groupby("qid", sort=False)
             if q in keep}
    n = _issue_pool_batches(ctx, items, "pool-rest")
    wait = ctx.judging.judge("pool-rest")
    return wait or {"topics": len(keep), "items": n}


def _judged_or_issued_before(ctx: Context, suffix: str) -> set[tuple[str, str]]:
    """(topic, passage) judged or issued before this stage's batches (ids ending in ``suffix``;
    everything so far when there is none yet): on a resumed run, the same set as on the first
    attempt, whatever got judged since."""
    b = ctx.store.batches.all(counts=False)
    mine = np.flatnonzero(b["batch_id"].astype(str).str.endswith(suffix).to_numpy())
    before = set(b["batch_id"].iloc[: mine[0]] if len(mine) else b["batch_id"])
    rows = ctx.store.batches.items()
    out = {(t, p) for bid, t, p in rows.itertuples(index=False) if bid in before}
    log = ctx.store.judgments.log(None, "all")
    log = log[log["batch_id"].isin(before)]
    return out | set(zip(log["qid"].astype(str), log["docid"].astype(str)))


def stage_fractional(ctx: Context) -> dict | Waiting:
    """The fractional pool: a seeded fraction of the corpus, the depth pool (``[pool] depth``,
    whatever ``[pool] kind``: the protocol's) of the pooled runs restricted to it; writes
    ``pool-fractional.parquet``, issues its new passages of the kept topics and has them judged;
    returns fraction, kept passages and items, or :class:`Waiting`."""
    fp = ctx.settings.fractional
    frac, seed = fp.fraction, fp.seed
    cls = ctx.inputs.classes
    if cls is not None:  # the dedupe stage's classes list every passage: the canonical ids, no corpus pass
        kept = fractional_ids(cls["docid"].filter(pc.equal(cls["docid"], cls["class_id"])), frac, seed)
    else:
        kept = fractional_ids_from_corpus(ctx.corpus, frac, seed)
    runs = restrict_runs(filter_runs(ctx.inputs.runset.table, ctx.inputs.pooled_runs), kept, classes=ctx.inputs.classes)
    done = _judged_or_issued_before(ctx, "/fractional")
    made = configured_pool("depth", runs, ctx.cfg, classes=ctx.inputs.classes)
    pool, depth = made.table, made.arguments["depth"]
    keep = set(kept_topics(ctx))
    mask = [q in keep and (q, d) not in done for q, d in zip(pool["qid"].to_pylist(), pool["docid"].to_pylist())]
    pool = pool.filter(pa.array(mask, pa.bool_()))
    ctx.write(pool, "pool-fractional.parquet", "pool-fractional", fraction=frac, seed=seed, depth=depth)
    items: dict[str, list[str]] = {}
    for q, d in zip(pool["qid"].to_pylist(), pool["docid"].to_pylist()):
        items.setdefault(q, []).append(d)
    n = _issue_pool_batches(ctx, items, "fractional")
    wait = ctx.judging.judge("fractional")
    return wait or {"fraction": frac, "kept_passages": len(kept), "items": n}


def features(ctx: Context):
    """CAL features of the corpus (canonical passages with the classes), built once under
    ``DIR/features`` (into a temporary folder, then renamed; on Dask with ``[campaign] workers`` or
    ``scheduler``: the same folder), loaded once per :class:`Context`."""
    if "features" in ctx.cache:
        return ctx.cache["features"]
    out = ctx.dir / "features"
    if not out.exists():
        for stale in ctx.dir.glob(".features.tmp*"):  # left by a killed run
            shutil.rmtree(stale, ignore_errors=True)
        ctx.say("CAL features of the corpus")
        tmp = ctx.dir / f".features.tmp{os.getpid()}"
        fp = ctx.settings.features
        build_features(ctx.corpus, tmp, norm=ctx.settings.dedupe.norm, classes=ctx.inputs.classes,
                       shard_size=fp.shard_size, hashing=fp.hashing, **(ctx.settings.campaign.dask() or {}))
        os.replace(tmp, out)
    ctx.cache["features"] = load_features(out)
    return ctx.cache["features"]
