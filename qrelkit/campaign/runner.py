"""``qrelkit.Campaign``: a campaign folder with one store that knows the protocol, the inputs,
every stage done, every batch out and every judgment in (docs/campaign.md).

>>> c = Campaign.init("camp", config="configs/trec-dl-2022.toml", corpus="corpus.jsonl",
...                   topics="topics.tsv", runs="runs", manifest="manifest.csv")   # doctest: +SKIP
>>> c.run(oracle="qrels.txt", error_rate=0.05, seed=7)                             # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd
import pyarrow as pa

from qrelkit.cal.loop import warm_up
from qrelkit.cal.params import ThreadParams
from qrelkit.campaign import adjudication, adopt, outputs, rounds, stages
from qrelkit.campaign.door import check_folder, check_twin, guidelines_file
from qrelkit.campaign.health import campaign_health
from qrelkit.campaign.lock import LOCK_NAME, advance_lock
from qrelkit.campaign.judging import WAITING, Waiting
from qrelkit.campaign.report import write_report
from qrelkit.campaign.settings import combine_rule
from qrelkit.campaign.store import (campaign_config, check_inputs, corpus_records, input_record, sha256_file,
                                    source_digest)
from qrelkit.config import CAMPAIGN_REQUIRED, CAMPAIGN_STAGES, load_config
from qrelkit.errors import InputError, disk_full
from qrelkit.io.corpus import check_corpus
from qrelkit.io.manifest import read_manifest
from qrelkit.io.params import RunsParams, SourcesParams
from qrelkit.io.paths import check_writable
from qrelkit.io.qrels import read_qrels
from qrelkit.io.runs import expand_sources, read_runs
from qrelkit.io.sources import is_irds, open_corpus
from qrelkit.io.topics import read_topics
from qrelkit.labels.params import LabelsParams
from qrelkit.pooler import PoolParams
from qrelkit.store import CampaignStore, campaign_path, open_campaign_store

STAGES = CAMPAIGN_STAGES
REQUIRED = CAMPAIGN_REQUIRED
_FUNCS: dict[str, Callable] = {
    "validate": stages.stage_validate, "select": stages.stage_select, "dedupe": stages.stage_dedupe,
    "pool": stages.stage_pool, "screening": stages.stage_screening, "pool-rest": adjudication.stage_pool_rest,
    "fractional": stages.stage_fractional, "cal": rounds.stage_cal, "qrels": outputs.stage_qrels,
    "evaluate": outputs.stage_evaluate, "reuse": outputs.stage_reuse,
}


def _files(path: str | os.PathLike) -> list[Path]:
    return [Path(p) for p in expand_sources([Path(path)])]


def writable(path: str | os.PathLike) -> Path:
    """``path`` (a file to write, or a folder to write in) when it can be written; else
    ``[unwritable-output]`` before any work (:func:`qrelkit.io.paths.check_writable`, the check
    every command makes)."""
    p = Path(path)
    check_writable(p, folder=p.is_dir())
    return p


def _readable(name: str, path: str | os.PathLike | None) -> Path:
    if path is None:
        raise InputError("bad-option", f"campaign init needs --{name}")
    p = Path(path)
    if not is_irds(path) and not p.exists():
        raise InputError("unreadable", "no such file", file=str(p))
    return p


def _where(path: Path) -> str:
    """What a campaign records of an input: its absolute path, or ``irds:<id>`` as given."""
    return str(path) if is_irds(path) else str(path.resolve())


class Campaign:
    """A campaign folder (``DIR/campaign.db`` and the artefacts of its stages): the Python face of
    ``qrelkit campaign``. :meth:`init` creates one from a protocol file and the inputs;
    ``Campaign(DIR)`` opens it; :meth:`run` advances it, :meth:`import_judgments` takes
    assessors' files, :meth:`status` and :meth:`report` describe it (docs/campaign.md).

    Examples
    --------
    >>> import tempfile
    >>> from qrelkit import Campaign, InputError
    >>> try:
    ...     Campaign(tempfile.mkdtemp())   # a folder without a campaign
    ... except InputError as exc:
    ...     exc.rule
    'not-a-campaign'
    """

    def __init__(self, directory: str | os.PathLike) -> None:
        self.dir = Path(directory)
        if not campaign_path(self.dir).is_file():
            raise InputError("not-a-campaign", "no campaign here (create one with 'qrelkit campaign init')",
                             file=str(self.dir))

    # -- init --------------------------------------------------------------------------------------

    @classmethod
    def init(cls, directory: str | os.PathLike, *, config: str | os.PathLike | None, corpus: str | os.PathLike,
             topics: str | os.PathLike, runs: str | os.PathLike, manifest: str | os.PathLike,
             qrels: str | os.PathLike | None = None, lenient: bool | None = None, force: bool = False) -> "Campaign":
        """Validate every input (runs against manifest and topics, strict unless ``lenient``; the
        corpus in full, :func:`~qrelkit.io.corpus.check_corpus`), then create the store recording
        each input (path, size, sha256) and the effective configuration. An existing campaign is
        ``[campaign-exists]``; a folder with files in it is ``[folder-not-empty]`` unless ``force``
        adopts it (:func:`qrelkit.campaign.door.check_folder`)."""
        d = Path(directory)
        check_folder(d, force=force)
        writable(d)
        cfg = load_config(config, {"runs.lenient": lenient} if lenient is not None else {})  # every rule across keys
        paths = {k: _readable(k, v) for k, v in (("corpus", corpus), ("topics", topics), ("runs", runs),
                                                  ("manifest", manifest))}
        if qrels is not None:
            paths["qrels"] = _readable("qrels", qrels)
        guide = guidelines_file(cfg, config)  # [web] guidelines: readable UTF-8, or refused now
        sources = SourcesParams.from_config(cfg)  # how an irds: dataset's fields map
        tdf = read_topics(paths["topics"], params=sources)
        man = read_manifest(paths["manifest"])
        run_files = _files(paths["runs"])
        read_runs(run_files, **RunsParams.from_config(cfg).read_args(), topics=tdf["qid"].tolist(), manifest=man,
                  ties=PoolParams.from_config(cfg).ties)
        corpus_check = check_corpus(open_corpus(paths["corpus"], params=sources))  # every rule; fingerprinted
        if corpus_check.passages == 0:
            raise InputError("empty-file", "the corpus holds no passage", file=str(paths["corpus"]))
        if qrels is not None:
            read_qrels(paths["qrels"], scale=LabelsParams.from_config(cfg).scale)
        records = [r for k, p in paths.items() if k != "runs"
                   for r in (corpus_records(corpus_check) if k == "corpus" else [input_record(k, p, sources)])]
        records += [input_record("run", p) for p in run_files]
        if config is not None:
            records.append(input_record("config", config))
        _create_store(d, tdf, cfg, records,
                      paths={"config": str(Path(config).resolve()) if config else None,
                             "corpus": _where(paths["corpus"]), "topics": _where(paths["topics"]),
                             "manifest": str(paths["manifest"].resolve()),
                             "qrels": _where(paths["qrels"]) if qrels is not None else None,
                             "runs": [str(p.resolve()) for p in run_files],
                             "runs_dir": str(paths["runs"].resolve()) if paths["runs"].is_dir() else None,
                             "guidelines": str(guide) if guide else None},
                      overrides={"runs.lenient": lenient} if lenient is not None else {})
        return cls(d)

    # -- plumbing ----------------------------------------------------------------------------------

    def _open(self, **kw) -> tuple[CampaignStore, Any, dict]:
        store = open_campaign_store(self.dir, **kw)
        try:
            check_inputs(store)
            paths = store.state.get("paths")
            cfg = campaign_config(store)
        except BaseException:
            store.close()
            raise
        return store, cfg, paths

    # -- run ---------------------------------------------------------------------------------------

    def runner(self, *, oracle: str | os.PathLike | None = None, error_rate: float = 0.0,
               seed: int | None = None, what: str = "a campaign runner") -> "Runner":
        """A long-lived :class:`Runner` of this campaign: the store kept open, the inputs checked
        once, the CAL features loaded once; call :meth:`Runner.advance` whenever judgments came
        in (cheap when nothing can move). Close it (or use it in a ``with`` block)."""
        return Runner(self, oracle=oracle, error_rate=error_rate, seed=seed, what=what)

    def run(self, *, oracle: str | os.PathLike | None = None, error_rate: float = 0.0, seed: int | None = None,
            until: str | None = None, progress: Callable[[str], None] | None = None,
            on_wait: Callable[[str], None] | None = None) -> dict:
        """Advance every topic as far as the judgments allow (see docs/campaign.md). Returns a
        summary: ``stages_done``, ``state`` (``done``, ``waiting for judgments``, or ``until``),
        ``waiting`` (batches out: batch, topic, assessor, items, file), ``topics`` (decisions).
        ``on_wait`` is told at once when another process holds the campaign and this run waits
        for it (:func:`qrelkit.campaign.lock.advance_lock`)."""
        if until is not None and until not in STAGES:
            raise InputError("bad-option", f"--until must be one of {', '.join(STAGES)}, got {until!r}")
        writable(self.dir)
        with advance_lock(self.dir, what="a campaign run", on_wait=on_wait), \
                self.runner(oracle=oracle, error_rate=error_rate, seed=seed, what="a campaign run") as r:
            return r.advance(progress, until=until)  # the lock before the runner: a busy campaign is left as it is

    # -- the protocol file edited, a new campaign from this one ------------------------------------

    def adopt_config(self, *, dry_run: bool = False) -> dict:
        """Adopt the protocol file's changed values for the stages not run yet
        (:func:`qrelkit.campaign.adopt.adopt_config`: refused, naming the key and the stage, when
        a stage that reads a changed key is done or started); one advance at a time meanwhile."""
        writable(self.dir)
        with advance_lock(self.dir, what="campaign adopt-config"):
            store = open_campaign_store(self.dir)
            try:
                return adopt.adopt_config(store, self.dir, dry_run=dry_run)
            finally:
                store.close()

    def judged_qrels(self) -> pa.Table:
        """Every judgment in force, one grade per topic and passage by ``[campaign] combine``
        (the grade screening, CAL and the final qrels see), every topic, as qrels: what a new
        campaign takes as judgments made before it (``campaign init --qrels``) so as not to ask
        for them again. Read from the store alone: inputs changed since init do not stop it."""
        with open_campaign_store(self.dir, readonly=True) as store:
            return store.judgments.export_qrels(combine=combine_rule(campaign_config(store)))

    # -- import, status, report --------------------------------------------------------------------

    def import_judgments(self, files: Sequence[str | os.PathLike], *, lenient: bool = False):
        """Judgments from assessors (the judging store's import: one transaction, idempotent,
        conflicts reported — strict: :class:`~qrelkit.store.ConflictError`). Every row must
        name a batch the campaign issued and an assessor it was issued to
        (:meth:`~qrelkit.store.interfaces.Assignments.import_files`: ``[unknown-batch]``, ``[not-assigned]``). An
        input gone or changed blocks the runs, not the assessors' answers: they are taken."""
        store = open_campaign_store(self.dir)
        try:
            scale = LabelsParams.from_config(campaign_config(store)).scale
            return store.assignments.import_files(files, lenient=lenient, scale=scale)
        finally:
            store.close()

    def status(self) -> pd.DataFrame:
        """One row per topic (see :func:`status_table`), whatever the state of the inputs (the
        store read as it is: :meth:`health` says what blocks the campaign)."""
        store = open_campaign_store(self.dir, readonly=True)
        try:
            return status_table(stages.Context(self.dir, store, campaign_config(store), store.state.get("paths")))
        finally:
            store.close()

    def health(self) -> dict:
        """Why the campaign waits and what to do (:func:`qrelkit.campaign.health.campaign_health`):
        ``state, summary, inputs, failure, lock, owed``. Changes nothing."""
        return campaign_health(self.dir)

    def report(self, output: str | os.PathLike, *, force: bool = False) -> list[Path]:
        """Write the report (``.html`` with embedded figures, and its ``.md`` twin). The twin
        never replaces a file that is not a campaign report (``[output-exists]``) unless ``force``."""
        writable(output)
        if Path(output).suffix.lower() != ".md":
            check_twin(Path(output).with_suffix(".md"), force=force)
        store, cfg, _ = self._open()
        try:
            return write_report(self, Path(output), store=store, cfg=cfg)
        finally:
            store.close()


def _create_store(d: Path, topics: pd.DataFrame, cfg, records: list, **state: Any) -> None:
    """Create the campaign store in ``d`` (the folder too, when missing) with its topics, the
    records of its inputs, the effective configuration and ``state``; on any failure nothing is
    left: the store's files are removed, and the folder when this call made it."""
    made = d  # the topmost folder this call makes (None: d exists)
    while not made.parent.exists():
        made = made.parent
    made = None if d.exists() else made
    d.mkdir(parents=True, exist_ok=True)
    try:
        store = CampaignStore(campaign_path(d), create=True)
        try:
            store.topics.add(topics, threads=list(ThreadParams.from_config(cfg).threads))
            store.state.record_inputs(records, cfg.effective())
            store.state.update(**state)
        finally:
            store.close()
        (d / LOCK_NAME).touch()  # with the store, what marks a campaign's folder (qrelkit.io.paths.campaign_folder_of)
    except BaseException:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(str(campaign_path(d)) + suffix).unlink(missing_ok=True)
        (d / LOCK_NAME).unlink(missing_ok=True)
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        raise


class Runner:
    """A campaign kept open to be advanced again and again (:meth:`Campaign.runner`): what a web
    app calls each time a batch is completed. The store stays open, the inputs are checked in full
    at the first :meth:`advance` and then by size and modification time only (a file whose stat
    changed is checked in full again), and the CAL features and candidate sets stay loaded.

    One runner is used by one thread at a time (its SQLite connection may move between threads,
    but :meth:`advance` is not reentrant); other processes and connections may import judgments
    meanwhile (the store's transactions serialize the writers).

    Examples
    --------
    >>> with Campaign("camp").runner() as r:     # doctest: +SKIP
    ...     r.advance()["state"]
    'waiting for judgments'
    """

    def __init__(self, campaign: Campaign, *, oracle: str | os.PathLike | None = None, error_rate: float = 0.0,
                 seed: int | None = None, what: str = "a campaign runner") -> None:
        if not 0 <= error_rate <= 1:
            raise InputError("out-of-range", f"error rate must be in [0, 1], got {error_rate!r}")
        self.campaign = campaign
        self.what = what  # who holds the advance lock, for those who wait on it
        self._seen: dict[str, tuple[int, int]] = {}
        writable(campaign.dir)
        store = open_campaign_store(campaign.dir, check_same_thread=False)
        try:
            check_inputs(store, self._seen)
            paths = store.state.get("paths")
            cfg = campaign_config(store)
            orc = None if oracle is None else _oracle_record(store, oracle, error_rate, seed)
        except BaseException:
            store.close()
            raise
        self.ctx = stages.Context(campaign.dir, store, cfg, paths, orc)
        try:
            self.ctx.judging.check_oracle()  # at the door: not at the first item it cannot grade
        except BaseException:
            store.close()
            raise
        self._adoptions = len(store.state.get("config_adoptions", []))

    def _adopted(self) -> None:
        """A configuration adopted since this runner read it (``campaign adopt-config``): a new
        context with it (the caches built under the former one are dropped)."""
        n = len(self.ctx.store.state.get("config_adoptions", []))
        if n != self._adoptions:
            old = self.ctx
            texts = old.cache.pop("texts", None)
            if texts is not None:
                texts.close()
            self.ctx = stages.Context(old.dir, old.store, campaign_config(old.store), old.paths, old.judging.oracle)
            self._adoptions = n

    def close(self) -> None:
        """Close the store and the text index (idempotent)."""
        texts = self.ctx.cache.pop("texts", None)
        if texts is not None:
            texts.close()
        self.ctx.store.close()

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def warm(self) -> None:
        """Load now what the next CAL batches need — the CAL features, the threads' candidate
        sets, the scoring kernels, the learner (:func:`qrelkit.cal.loop.warm_up`) — once the pool
        is made (the features depend on the near-duplicate classes) and while CAL is to come: a
        web app's first next batch then waits only for its round's computation. Nothing when CAL
        is skipped or done."""
        ctx = self.ctx
        done = ctx.store.state.stages_done()
        if not ctx.enabled("cal") or "cal" in done or "pool" not in done:
            return
        fp = ctx.settings.fractional
        warm_up(stages.features(ctx), ctx.settings.threads.threads, fraction=fp.fraction, fraction_seed=fp.seed,
                cache=ctx.candidates)

    def advance(self, progress: Callable[[str], None] | None = None, *, until: str | None = None) -> dict:
        """Advance every topic as far as the judgments allow; the same summary as
        :meth:`Campaign.run`: ``state``, ``stages_done``, ``waiting``, ``topics``, ``warnings``,
        ``seconds`` (per stage run now), ``seconds_total``, ``seconds_outside_stages``."""
        if until is not None and until not in STAGES:
            raise InputError("bad-option", f"--until must be one of {', '.join(STAGES)}, got {until!r}")
        writable(self.campaign.dir)
        with advance_lock(self.campaign.dir, what=self.what):  # one advance at a time, across processes
            return self._advance(progress, until)

    def _advance(self, progress: Callable[[str], None] | None, until: str | None) -> dict:
        check_inputs(self.ctx.store, self._seen)
        self._adopted()
        ctx = self.ctx
        ctx.say = progress or (lambda _msg: None)
        ctx.judging.repaired = False
        done = ctx.store.state.stages_done()
        state, waiting, seconds = "done", [], {}
        t_all = time.perf_counter()
        plan = _plan(ctx, done, until)
        for name in STAGES:
            if name not in REQUIRED and not ctx.enabled(name):
                continue
            if name in done:
                if name == until:
                    state = f"until {until}"
                    break
                continue
            ctx.say(f"stage {name} ({plan.index(name) + 1}/{len(plan)})")
            t0 = time.perf_counter()
            try:
                result = self._stage(name)
            except Exception as exc:
                raise self._failed(name, exc)
            seconds[name] = round(time.perf_counter() - t0, 3)
            if isinstance(result, Waiting):
                state, waiting = WAITING, result.batches
                break
            ctx.store.state.finish_stage(name, result, seconds[name])
            done[name] = result
            if name == until:
                state = f"until {until}"
                break
        total = time.perf_counter() - t_all
        if ctx.store.state.failure() is not None:  # whatever failed before, the stages ran now: it is behind us
            ctx.store.state.clear_failure()
        return {"campaign": str(self.campaign.dir), "state": state, "stages_done": list(ctx.store.state.stages_done()),
                "waiting": waiting, "topics": ctx.store.state.decision_counts(),
                "warnings": int(len(ctx.store.state.warnings())),
                "seconds": seconds, "seconds_total": round(total, 3),
                "seconds_outside_stages": round(total - sum(seconds.values()), 3)}


    def _failed(self, stage: str, exc: Exception) -> Exception:
        """A stage failed: the exception to raise (a full disk as one ``[disk-full]`` line naming
        the campaign folder when the error names no file), recorded in the store as the campaign's
        last failure — stage, time, rule, message, who ran it — for ``campaign status`` (best
        effort: on a full disk the record may fail too). The next advance that gets through the
        stages clears it."""
        err = disk_full(exc, where=str(self.campaign.dir)) or exc
        info = {"stage": stage, "time": _dt.datetime.now().astimezone().isoformat(timespec="seconds"), "by": self.what,
                "rule": err.rule if isinstance(err, InputError) else "internal-error",
                "message": str(err) if isinstance(err, InputError) else f"{type(err).__name__}: {err}"}
        with contextlib.suppress(Exception):
            self.ctx.store.state.record_failure(info)
        return err

    def _stage(self, name: str) -> Any:
        """Run one stage; every Python warning it raises that is about the data (not a
        deprecation, not the JIT's) goes to the store's warnings, so the report counts it."""
        ctx = self.ctx
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if name == "report":
                write_report(self.campaign, ctx.dir / "report.html", store=ctx.store, cfg=ctx.cfg)
                result: Any = {"files": ["report.html", "report.md"]}
            else:
                result = _FUNCS[name](ctx)
        for w in caught:
            if not issubclass(w.category, _NOT_DATA) and "numba" not in str(getattr(w.category, "__module__", "")):
                ctx.store.state.warn(name, f"{w.category.__name__}: {w.message}")
        return result


_NOT_DATA = (DeprecationWarning, PendingDeprecationWarning, FutureWarning, ImportWarning, ResourceWarning)


def _plan(ctx: stages.Context, done: dict, until: str | None) -> list[str]:
    """The stages a call will run, in order (enabled, not done, up to ``until``)."""
    out = []
    for name in STAGES:
        if name in REQUIRED or ctx.enabled(name):
            if name not in done:
                out.append(name)
            if name == until:
                break
    return out


def _oracle_record(store: CampaignStore, oracle: str | os.PathLike, error_rate: float, seed: int | None) -> dict:
    """The oracle (file, hash, error rate, seed), recorded at its first use; another one than the
    recorded is ``[oracle-changed]``."""
    p = Path(oracle)
    if is_irds(oracle):  # the qrels of a dataset of ir_datasets, fingerprinted as read
        where, digest = str(oracle), source_digest("qrels", str(oracle))
    elif not p.is_file():
        raise InputError("unreadable", "no such file", file=str(p))
    else:
        where, digest = str(p.resolve()), sha256_file(p)
    orc = {"path": where, "sha256": digest, "error_rate": float(error_rate),
           "seed": int(seed if seed is not None else 0)}
    known = store.state.get("oracle")
    if known is not None and known != orc:
        raise InputError("oracle-changed", "this campaign was judged by another oracle (file, error rate or "
                         "seed); give the same one", file=str(p))
    if known is None:
        store.state.update(oracle=orc)
    return orc


STATUS_COLUMNS = ["qid", "stage", "judged", "relevant", "density", "screening", "threads", "decision", "rule",
                  "batches_out"]


def status_table(ctx: stages.Context) -> pd.DataFrame:
    """Per topic: stage reached, judged, relevant, density (every judgment), screening decision,
    CAL thread states (blank when ``[campaign] skip`` holds cal), stopping decision and the rule that fired, batches out (assignments with
    items still owed)."""
    s = ctx.store
    lab = ctx.judging.labels()
    rel = set(ctx.settings.relevant)
    ct = s.state.topics().set_index("qid")
    th = s.topics.threads()
    pend = s.assignments.pending()
    out_by_topic = pend.groupby("qid")["batch_id"].nunique().to_dict() if len(pend) else {}
    done = s.state.stages_done()
    last = next((n for n in reversed(STAGES) if n in done), "init")
    labs = dict(tuple(lab.groupby("qid", sort=False)))  # one pass, not one scan of the log per topic
    ths = dict(tuple(th.groupby("qid", sort=False)))
    cal = ctx.enabled("cal")  # CAL skipped: its threads never run, so no state to show
    rows = []
    for q in ctx.inputs.topic_ids:
        g = labs.get(q, lab.iloc[:0])
        n, r = len(g), int(g["grade"].isin(rel).sum())
        c = ct.loc[q] if q in ct.index else None
        states = ths.get(q, th.iloc[:0])
        dec = None if c is None or pd.isna(c["decision"]) else str(c["decision"])
        stage = dec if dec else ("waiting for judgments" if out_by_topic.get(q) else last)
        rows.append({"qid": q, "stage": stage, "judged": n, "relevant": r, "density": round(r / n, 4) if n else None,
                     "screening": None if c is None or pd.isna(c["screening"]) else str(c["screening"]),
                     "threads": " ".join(f"{t}:{st}" for t, st in zip(states["thread"], states["state"]))
                     if cal else "",
                     "decision": dec, "rule": None if c is None or pd.isna(c["rule"]) else str(c["rule"]),
                     "batches_out": int(out_by_topic.get(q, 0))})
    return pd.DataFrame(rows, columns=STATUS_COLUMNS)
