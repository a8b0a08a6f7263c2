"""The stages of a campaign (docs/campaign.md): each one sequences public functions of pooler/,
dedupe/, cal/, labels/, evaluate/ and reuse/ over the campaign's state (:class:`Context`).

A stage returns its summary (a JSON-able dict, recorded in the store when it completes) or a
:class:`Waiting` when judgments are missing. Every stage can be run again after a kill: its store
writes are idempotent (batches are issued under fixed ids, unless they exist; judgments already in
the log are not asked for again) and its artefacts are written atomically and deterministically.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.cal.features import build_features, load_features
from qrelkit.cal.loop import CandidateCache
from qrelkit.cal.params import ThreadParams
from qrelkit.cal.screening import screen_topics
from qrelkit.campaign.settings import Settings
from qrelkit.config import CampaignParams, Config, assessor_file_name
from qrelkit.dedupe.cluster import cluster_corpus
from qrelkit.errors import InputError
from qrelkit.io.keys import stable_int
from qrelkit.io.manifest import read_manifest
from qrelkit.io.qrels import read_qrels
from qrelkit.io.runs import read_runs
from qrelkit.io.tables import read_frame, read_table, write_table
from qrelkit.labels.aggregate import VoteRule
from qrelkit.pooler import (configured_pool, filter_runs, fractional_ids_from_corpus, pool_selection,
                            pool_size_distribution, pooled_flag, restrict_runs)
from qrelkit.pooler.protocol import selection_options
from qrelkit.simulate.oracle import judge_batches, truth_map
from qrelkit.store import CampaignStore, TextIndex, combine_log, open_text_index

WAITING = "waiting for judgments"
ORACLE_ASSESSOR_SOURCE = "oracle"


@dataclass
class Waiting:
    """Judgments are missing: ``batches`` lists what is out (batch, topic, assessor, items, file)."""

    stage: str
    batches: list[dict] = field(default_factory=list)


def stable_seed(*parts: object) -> int:
    """A seed in [0, 2**32) from ``parts``: the low 32 bits of :func:`qrelkit.io.keys.stable_int`
    (the same parts give the same seed in every process and Python version, unlike ``hash``)."""
    return stable_int(*parts) & 0xFFFFFFFF


def combine_rule(cfg: Config) -> Any:
    """``[campaign] combine`` as :func:`qrelkit.store.combine.combined_grades` takes it: a rule name
    (median_high, max, min) or, for ``vote``, the labels' majority vote
    (:meth:`qrelkit.labels.VoteRule.from_config`: ``[labels] vote_threshold``, ``graded``,
    ``fallback``). That the vote and ``[labels] passage_relevant`` agree is a rule across keys
    (``vote-vs-passage-relevant``, checked when the configuration is loaded)."""
    name = CampaignParams.from_config(cfg).combine
    return VoteRule.from_config(cfg) if name == "vote" else name


def official_thread(cfg: Config) -> str:
    """The CAL thread that decides a topic: ``[cal] official_thread``, among ``[cal] threads``."""
    p = ThreadParams.from_config(cfg)  # the official thread is among the threads (rule official-thread-not-run)
    return p.official_thread if p.official_thread in p.threads else p.threads[-1]  # a store recorded before that rule


TEXT_INDEX = "text-index.sqlite"


def corpus_sha256(store: CampaignStore) -> str:
    """The SHA-256 of the campaign's corpus recorded at init ("" when none is recorded)."""
    rec = store.state.inputs()
    sha = rec.loc[rec["name"] == "corpus", "sha256"]
    return str(sha.iat[0]) if len(sha) else ""


def text_index(directory: str | os.PathLike, store: CampaignStore) -> TextIndex:
    """The campaign's passage text index, ``DIR/text-index.sqlite``
    (:func:`qrelkit.store.textindex.open_text_index`): built at its first need from the corpus,
    recorded with the corpus's SHA-256 of init, built again when missing or not the corpus's.
    The batch files and the web app's pages read passage texts there, never scanning the corpus."""
    corpus = (store.state.get("paths") or {})["corpus"]
    return open_text_index(corpus, Path(directory) / TEXT_INDEX, sha256=corpus_sha256(store))


_safe = assessor_file_name  # an assessor's (or a batch's) file and folder name


def _answers_in(path: Path) -> int:
    """How many grades an assessor filled into a batch file the campaign wrote (-1 when the
    file is no longer a table the campaign can read: edited, it is not the campaign's any more)."""
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, OSError, UnicodeDecodeError):
        return -1
    if "grade" not in df.columns:
        return -1
    return int((df["grade"].str.strip() != "").sum())


def batch_file(directory: str | os.PathLike, assessor: str, batch_id: str) -> Path:
    """The file of batch ``batch_id`` for ``assessor``: ``DIR/batches/ASSESSOR/BATCH.csv``
    (names made file-safe: other characters than letters, digits, ``-_.`` become ``_``)."""
    return Path(directory) / "batches" / _safe(assessor) / f"{_safe(batch_id)}.csv"


class Context:
    """What the stages share: the directory, store, config, inputs (read once, lazily) and the
    oracle (None: judgments come from assessors)."""

    def __init__(self, directory: Path, store: CampaignStore, cfg: Config, paths: dict,
                 oracle: dict | None = None, progress: Callable[[str], None] | None = None) -> None:
        self.dir, self.store, self.cfg, self.paths, self.oracle = directory, store, cfg, paths, oracle
        self.say = progress or (lambda _msg: None)
        self.cache: dict = {}  # what a long-lived runner keeps across calls: CAL features, texts, batch files
        self.candidates = CandidateCache()  # the CAL threads' candidates, computed once per features
        self.repaired = False  # lost copies of encountered passages looked for in this run
        self.settings = Settings.from_config(cfg)  # every component's parameters, read once

    # -- inputs ------------------------------------------------------------------------------------

    @cached_property
    def runset(self):
        return read_runs([Path(p) for p in self.paths["runs"]], **self.settings.runs.read_args(),
                         topics=self.topic_ids, manifest=self.manifest, ties=self.settings.pool.ties)

    @cached_property
    def manifest(self) -> pd.DataFrame:
        return read_manifest(self.paths["manifest"])

    @cached_property
    def topic_ids(self) -> list[str]:
        return self.store.topics.all()["qid"].astype(str).tolist()

    @property
    def selection(self) -> pd.DataFrame:
        return read_frame(self.dir / "selection.csv", what="selection")

    @property
    def pooled_runs(self) -> list[str]:
        sel = self.selection
        pooled = {str(r) for v, r in zip(sel["pooled"], sel["run"]) if pooled_flag(v, str(r))}
        return sorted(pooled & set(self.runset.runs))

    @cached_property
    def classes(self) -> pa.Table | None:
        p = self.dir / "classes.parquet"
        return read_table(p) if p.exists() else None

    @property
    def pool(self) -> pd.DataFrame:
        return read_table(self.dir / "pool.parquet").to_pandas()

    def initial_qrels(self) -> pa.Table | None:
        q = self.paths.get("qrels")
        return read_qrels(q, scale=self.settings.labels.scale) if q else None

    # -- settings ----------------------------------------------------------------------------------

    def enabled(self, stage: str) -> bool:
        return stage not in self.settings.campaign.skip

    @cached_property
    def combine(self) -> Any:
        """How several assessors' grades of an item become one (:func:`combine_rule`)."""
        return combine_rule(self.cfg)

    @property
    def relevant(self) -> list[int]:
        return [int(g) for g in self.settings.labels.passage_relevant]

    @property
    def threads(self) -> list[str]:
        return list(self.settings.threads.threads)

    @property
    def official_thread(self) -> str:
        return official_thread(self.cfg)

    def assessors_for(self, qid: str, round_: int = 0) -> list[str]:
        """The assessors of a batch of topic ``qid``: its owner (topic i -> assessor i mod n),
        then the next ones, ``[batch] assessors_per_item`` distinct names; CAL rounds rotate the
        owner unless ``[campaign] owner_judges_cal``."""
        # rules assessors-empty and assessors-too-few refuse what is left here for stores recorded before them
        names = list(self.settings.campaign.assessors) or ["A01"]
        k = min(self.settings.batch.assessors_per_item, len(names))
        owner = self.topic_ids.index(str(qid))
        if round_ and not self.settings.campaign.owner_judges_cal:
            owner += round_
        return [names[(owner + i) % len(names)] for i in range(k)]

    # -- judgments ---------------------------------------------------------------------------------

    def labels(self) -> pd.DataFrame:
        """One grade per judged (topic, passage) in judging order (every batch)."""
        return combine_log(self.store.judgments.log(None, "all"), combine=self.combine)

    def repair_encountered(self) -> int:
        """A CAL batch whose encountered passages lost their copied judgments (a kill between
        issuing the batch and copying them) gets them now, as the CAL loop would have. Once per
        run (:attr:`repaired`, reset by the runner at each advance): only a kill loses copies,
        and a kill ends the run."""
        if self.repaired:
            return 0
        self.repaired = True
        s = self.store
        rows = s.batches.lost_copies()
        if not len(rows):
            return 0
        logs = {q: s.judgments.log(q, "all") for q in dict.fromkeys(rows["qid"])}  # those topics' logs only
        copies = []
        for (bid, qid), g in rows.groupby(["batch_id", "qid"], sort=False):
            log = logs[qid]
            c = log[log["docid"].isin(set(g["docid"]))][["qid", "docid", "assessor", "grade"]].copy()
            c["batch_id"] = bid
            copies.append(c)
        s.judgments.import_judgments(pd.concat(copies, ignore_index=True), source="encountered")
        return len(rows)

    def owed(self) -> pd.DataFrame:
        """The items assigned assessors still owe (:meth:`~qrelkit.store.interfaces.Assignments.pending`), after the
        copies of encountered passages a kill lost are made again."""
        self.repair_encountered()
        return self.store.assignments.pending()

    def judge(self, stage: str) -> Waiting | None:
        """Have every assigned batch judged: by the oracle (:meth:`answer`), else report what is
        out and write its files."""
        pend = self.owed()
        if not len(pend):
            return None
        if self.oracle is None:
            return self._waiting(stage, pend)
        self.answer(pend)
        return None

    def answer(self, pend: pd.DataFrame) -> None:
        """The oracle answers the owed items ``pend`` (:meth:`owed`): one seeded simulated
        assessor per batch and assessor, every answer in one transaction."""
        truth = self._oracle_truth
        scale = tuple(self.settings.labels.scale)
        answers = []
        for (bid, assessor), g in pend.groupby(["batch_id", "assessor"], sort=False):
            rows = g[["qid", "docid"]].reset_index(drop=True)
            done = judge_batches(rows, truth, error_rate=float(self.oracle["error_rate"]), scale=scale,
                                 seed=stable_seed(self.oracle["seed"], bid, assessor))
            done["assessor"] = assessor
            done["batch_id"] = bid
            answers.append(done)
        # every answer in one transaction (each batch's are seeded by the batch alone)
        self.store.judgments.import_judgments(pd.concat(answers, ignore_index=True), source=ORACLE_ASSESSOR_SOURCE,
                                              scale=scale)

    @cached_property
    def _oracle_truth(self) -> dict:
        return truth_map(read_qrels(self.oracle["path"]))

    def texts(self) -> TextIndex:
        """The campaign's passage text index (:func:`text_index`), opened once per context."""
        if "texts" not in self.cache:
            self.cache["texts"] = text_index(self.dir, self.store)
        return self.cache["texts"]

    def _waiting(self, stage: str, pend: pd.DataFrame) -> Waiting:
        """What is out, each batch's file for its assessor written (again only when the items
        it lists changed since this context wrote it: a long-lived runner rewrites no file
        that is already right)."""
        written = self.cache.setdefault("batch_files", {})
        out, todo = [], []
        for (bid, assessor), g in pend.groupby(["batch_id", "assessor"], sort=False):
            f = batch_file(self.dir, assessor, bid)
            out.append({"batch_id": bid, "qid": str(g["qid"].iat[0]), "assessor": assessor, "items": int(len(g)),
                        "kind": str(g["kind"].iat[0]), "file": str(f)})
            key = (tuple(g["docid"]), tuple(g["position"]))
            if written.get(f) != key or not f.is_file():
                kept = _answers_in(f) if f.is_file() else 0
                if kept:  # an assessor filled it in place: never overwritten, to be imported
                    out[-1]["note"] = (f"the file holds {kept} grade(s): import it ('qrelkit campaign import "
                                       f"{self.dir} {f}')" if kept > 0 else "the file was edited and is not a table "
                                       "any more: it is left as it is (move it away for a new one)")
                    continue
                todo.append((f, bid, assessor, g, key))
        if not todo:
            return Waiting(stage, out)
        texts: dict[str, str] = {}
        try:
            texts = {k: v[0] for k, v in self.texts().texts({d for *_, g, _ in todo for d in g["docid"]}).items()}
        except InputError:
            pass
        tdf = self.store.topics.all()
        topics = dict(zip(tdf["qid"], tdf["text"]))
        for f, bid, assessor, g, key in todo:
            t = pa.table({"batch_id": [bid] * len(g), "qid": g["qid"].tolist(), "query": [topics.get(q, "") for q in g["qid"]],
                          "position": g["position"].astype("int32").tolist(), "docid": g["docid"].tolist(),
                          "text": [texts.get(d, "") for d in g["docid"]], "assessor": [assessor] * len(g),
                          "grade": pa.nulls(len(g), pa.int32())})
            write_table(t, f, kind="campaign-batch", params={})
            written[f] = key
        return Waiting(stage, out)

    def write(self, table: pa.Table | pd.DataFrame, name: str, kind: str, **params: Any) -> Path:
        if isinstance(table, pd.DataFrame):
            table = pa.Table.from_pandas(table, preserve_index=False)
        return write_table(table, self.dir / name, kind=kind, params=params)


# ----------------------------------------------------------------------------------------- stages


def stage_validate(ctx: Context) -> dict:
    """Read and validate the runs (against the manifest and the topics); run warnings go to the
    store; returns the counts of runs, documents, topics and issues and the repairs made."""
    rs = ctx.runset
    issues = rs.issues
    for r in issues.itertuples(index=False):
        if getattr(r, "severity", "") == "warning":
            ctx.store.state.warn("validate", f"run {r.run}: [{r.rule}] {r.message} ({r.count}x)")
        elif getattr(r, "severity", "") == "error":  # only here when lenient: repaired, and said so
            ctx.store.state.warn("validate", f"run {r.run}: [{r.rule}] {r.message} ({r.count}x); repaired: {r.repair}")
    return {"runs": len(rs.runs), "documents": rs.table.num_rows, "topics": len(ctx.topic_ids),
            "issues": int(len(issues)), "repaired": {k: int(v) for k, v in rs.repairs().items() if v}}


def stage_select(ctx: Context) -> dict:
    """Decide the pooled runs from the manifest (``[selection]`` configuration); writes
    ``selection.csv``; returns the number of runs and of pooled runs."""
    sel = pool_selection(ctx.manifest, **selection_options(ctx.cfg))
    ctx.write(sel, "selection.csv", "pool-selection")
    return {"runs": int(len(sel)), "pooled": int(sel["pooled"].sum())}


def stage_dedupe(ctx: Context) -> dict:
    """Cluster the corpus into near-duplicate classes (``[dedupe]`` configuration); writes
    ``classes.parquet``; returns the class statistics (passages, classes, duplicate classes, ...)."""
    params = ctx.settings.dedupe
    clu = cluster_corpus(ctx.paths["corpus"], params)
    ctx.write(clu.classes, "classes.parquet", "dedupe-classes", **params.as_dict())
    ctx.__dict__.pop("classes", None)
    st = clu.stats
    return {k: st[k] for k in ("passages", "classes", "duplicate_classes", "passages_in_duplicate_classes", "largest_class")}


def stage_pool(ctx: Context) -> dict:
    """The pool of the pooled runs: the kind ``[pool] kind`` (the depth pool: ``[pool] depth``)
    with its parameters from the configuration (:func:`qrelkit.pooler.configured_pool`), with the
    classes and the initial qrels; writes ``pool.parquet`` and imports the initial qrels as judged;
    returns the kind's parameters (depth), items, topics and the number of pooled runs."""
    runs = filter_runs(ctx.runset.table, ctx.pooled_runs)
    init = ctx.initial_qrels()
    made = configured_pool(None, runs, ctx.cfg, classes=ctx.classes, qrels=init)
    pool = made.table
    write_table(pool, ctx.dir / "pool.parquet", kind=f"pool-{made.kind}", params={**made.summary,
                                                                              "pooled_runs": ctx.pooled_runs})
    if init is not None:  # judgments made before the campaign count as judged (one batch per topic)
        q = init.to_pandas()
        q = q[(q["rel"] >= 0) & q["qid"].isin(set(ctx.topic_ids))]
        initial = pd.DataFrame({"qid": q["qid"], "docid": q["docid"], "assessor": "qrels", "grade": q["rel"],
                                "batch_id": [f"{x}/initial" for x in q["qid"]]})
        ctx.store.judgments.import_judgments(initial, source="initial-qrels", scale=None)
    dist = pool_size_distribution(pool)
    return {**made.summary, "items": int(pool.num_rows), "topics": int(dist["topics"]),
            "runs_pooled": len(ctx.pooled_runs)}


def _issue_pool_batches(ctx: Context, items: dict[str, list[str]], suffix: str) -> int:
    n = 0
    for qid in ctx.topic_ids:
        its = items.get(qid) or []
        if its:
            ctx.store.assignments.issue(qid, its, f"{qid}/{suffix}", ctx.assessors_for(qid), kind="pool")
            n += len(its)
    return n


def _judged_or_issued(ctx: Context) -> set[tuple[str, str]]:
    rows = ctx.store.batches.items()
    out = set(zip(rows["qid"], rows["docid"]))
    lab = ctx.labels()
    return out | set(zip(lab["qid"].astype(str), lab["docid"].astype(str)))


def stage_screening(ctx: Context) -> dict | Waiting:
    """Issue the first pool passages of each topic for judging, then screen the topics on those
    judgments (:func:`qrelkit.cal.screening.screen_topics`): a discarded topic has its CAL threads
    rejected; returns the count of each decision, or :class:`Waiting` while judgments are out."""
    rule = ctx.settings.screen
    pool = ctx.pool.sort_values(["position"], kind="stable")
    done = _judged_or_issued(ctx)
    items = {q: [d for d in g["docid"].astype(str).head(rule.first_n) if (q, d) not in done]
             for q, g in pool.groupby("qid", sort=False)}
    _issue_pool_batches(ctx, items, "screen")
    wait = ctx.judge("screening")
    if wait:
        return wait
    scr = screen_topics(ctx.labels(), pool[["qid", "docid", "position"]], topics=ctx.topic_ids, rule=rule)
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
    return [q for q in ctx.topic_ids if q not in discarded]


def stage_pool_rest(ctx: Context) -> dict | Waiting:
    """Issue the rest of the pool of every kept topic (the passages not judged or issued before)
    and have it judged; returns the numbers of kept topics and issued items, or :class:`Waiting`."""
    pool = ctx.pool.sort_values(["position"], kind="stable")
    keep = set(kept_topics(ctx))
    done = _judged_or_issued_before(ctx, "/pool-rest")
    items = {q: [d for d in g["docid"].astype(str) if (q, d) not in done] for q, g in pool.groupby("qid", sort=False)
             if q in keep}
    n = _issue_pool_batches(ctx, items, "pool-rest")
    wait = ctx.judge("pool-rest")
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
    kept = fractional_ids_from_corpus(ctx.paths["corpus"], frac, seed, classes=ctx.classes)
    runs = restrict_runs(filter_runs(ctx.runset.table, ctx.pooled_runs), kept, classes=ctx.classes)
    done = _judged_or_issued_before(ctx, "/fractional")
    made = configured_pool("depth", runs, ctx.cfg, classes=ctx.classes)
    pool, depth = made.table, made.arguments["depth"]
    keep = set(kept_topics(ctx))
    mask = [q in keep and (q, d) not in done for q, d in zip(pool["qid"].to_pylist(), pool["docid"].to_pylist())]
    pool = pool.filter(pa.array(mask, pa.bool_()))
    ctx.write(pool, "pool-fractional.parquet", "pool-fractional", fraction=frac, seed=seed, depth=depth)
    items: dict[str, list[str]] = {}
    for q, d in zip(pool["qid"].to_pylist(), pool["docid"].to_pylist()):
        items.setdefault(q, []).append(d)
    n = _issue_pool_batches(ctx, items, "fractional")
    wait = ctx.judge("fractional")
    return wait or {"fraction": frac, "kept_passages": len(kept), "items": n}


def features(ctx: Context):
    """CAL features of the corpus (canonical passages with the classes), built once under
    ``DIR/features`` (into a temporary folder, then renamed), loaded once per :class:`Context`."""
    if "features" in ctx.cache:
        return ctx.cache["features"]
    out = ctx.dir / "features"
    if not out.exists():
        for stale in ctx.dir.glob(".features.tmp*"):  # left by a killed run
            shutil.rmtree(stale, ignore_errors=True)
        ctx.say("CAL features of the corpus")
        tmp = ctx.dir / f".features.tmp{os.getpid()}"
        fp = ctx.settings.features
        build_features(ctx.paths["corpus"], tmp, norm=ctx.settings.dedupe.norm, classes=ctx.classes,
                       shard_size=fp.shard_size, hashing=fp.hashing)
        os.replace(tmp, out)
    ctx.cache["features"] = load_features(out)
    return ctx.cache["features"]
