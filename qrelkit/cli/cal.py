"""``qrelkit cal``: the judging store of a CAL campaign and its stopping rules (init, import,
status, export, replay, ...), and the CAL loop (features, next, simulate)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from qrelkit.cal.params import KEYS as CAL_KEYS, THREADS, CalParams, FeatureParams, ThreadParams
from qrelkit.cli import HELP, common
from qrelkit.dedupe.params import DedupeParams
from qrelkit.errors import InputError, repair_counts
from qrelkit.labels.params import LabelsParams
from qrelkit.pooler.params import FractionalParams

if TYPE_CHECKING:  # names for annotations only: importing them loads pyarrow and pandas
    import pyarrow as pa

app = typer.Typer(help=HELP["cal"], no_args_is_help=True)


def _default(key: str) -> str:
    """``[cal] key``'s declared default as a help text shows it (``25``, ``1,000,000``, ``none``)."""
    value = CAL_KEYS[key].default
    return "none" if value is None else f"{value:,}"


StoreArg = typer.Argument(..., help="The campaign's judging store (SQLite file).")
RuleOpt = typer.Option(None, "--rule", "-r", help="Stopping rule: density | knee | budget | target, or a registered one (default: config [stopping] rule, density).")
SetOpt = typer.Option([], "--set", help="Rule parameter KEY=VALUE (repeatable), e.g. min_judged=100.")
BudgetOpt = typer.Option(None, "--budget", help=f"Judging budget per topic and thread (default: config [cal] budget, {_default('budget')}).")
ThreadOpt = typer.Option([], "--thread", help="Only this thread (repeatable): fractional | local | all.")
CombineOpt = typer.Option("median_high", "--combine", help="Several assessors' grades -> one: median_high | max | min.")


def _rule_params(items: List[str], rule: str = "density") -> dict:
    """``--set KEY=VALUE`` rule parameters, checked against the rule's config section
    (``[stopping]`` or ``[stopping.<rule>]``) when the schema declares them."""
    from qrelkit.cal.stopping import rule_section  # lazy: pyarrow, pandas; `--help` stays fast
    return common.key_values(items, rule_section(rule))


def _store_path(path: Path) -> Path:
    if not path.is_file():
        raise InputError("not-a-store", "no judging store here (create one with 'qrelkit cal init')", file=str(path))
    return path


LockTimeoutOpt = typer.Option(60.0, "--lock-timeout", envvar="QRELKIT_LOCK_TIMEOUT",
                              help="Seconds to wait for another writer's lock on the store before failing.")


@contextlib.contextmanager
def _open(path: Path, *, readonly: bool = False, timeout: float = 60.0, operation: str | None = None):
    from qrelkit.store import open_store, store_errors  # lazy: pyarrow, pandas; `--help` stays fast
    store = open_store(_store_path(path), readonly=readonly, timeout=timeout, operation=operation)
    try:
        with store_errors(path):
            yield store
    finally:
        store.close()


def _write_report(df, output: Optional[Path], kind: str, params: dict) -> None:
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    if output is None:
        return
    write_table(pa.Table.from_pandas(df, preserve_index=False), output, kind=kind, params=params)


@app.command("init")
def init(
    store: Path = StoreArg,
    topics: Path = typer.Option(..., "--topics", "-t", help="Topics file (qid<TAB>text, JSONL or one qid per line)."),
    threads: Optional[str] = typer.Option(None, "--threads", help="Comma-separated threads (default: config [cal] threads)."),
    collection_size: Optional[int] = typer.Option(None, "--collection-size", help="Passages the threads rank (budget method)."),
    lock_timeout: float = LockTimeoutOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Create a judging store (or add topics to one) with CAL threads per topic."""
    from qrelkit.io.topics import read_topics  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.store import init_store  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[topics, config], stores=[store])
    cfg = common.config(config)
    names = ThreadParams.from_config(cfg, threads=threads or None).threads
    df = read_topics(topics)
    existed = store.exists()
    try:
        s = init_store(store, df, threads=names, collection_size=collection_size, timeout=lock_timeout,
                       operation="cal init")
    except BaseException:
        if not existed:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{store}{suffix}").unlink()
        raise
    with contextlib.closing(s):
        counts = s.counts()
    common.emit({"store": str(store), "created": not existed, "threads_per_topic": names, **counts}, as_json,
                f"{'extended' if existed else 'created'} {store}: {counts['topics']} topics, {counts['threads']} threads")


@app.command("import")
def import_(
    store: Path = StoreArg,
    files: List[Path] = typer.Argument(..., help="Judgments tables or completed batch files (.csv, .tsv, .jsonl, .parquet)."),
    lenient: bool = typer.Option(False, "--lenient/--strict", help="Skip conflicting and bad rows and report them instead of importing nothing."),
    scale: Optional[str] = typer.Option(None, "--scale", help="Allowed grades, comma-separated (default: config [labels] scale)."),
    conflicts_out: Optional[Path] = typer.Option(None, "--conflicts-out", help="Write the conflicting rows (lenient mode) to this table."),
    lock_timeout: float = LockTimeoutOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Append judgments to the store in one transaction: all or nothing, idempotent; a different
    grade from the same assessor for the same topic and passage is a conflict."""
    common.check_io(inputs=[files, config], outputs=[conflicts_out], stores=[store])
    cfg = common.config(config)
    sc = [int(x) for x in scale.split(",")] if scale else [int(x) for x in LabelsParams.from_config(cfg).scale]
    for f in files:
        if not f.is_file():
            raise InputError("unreadable", "no such file", file=str(f))
    with _open(store, timeout=lock_timeout, operation="cal import") as s, \
            common.progress("cal import: reading", len(files)) as advance:
        report = s.judgments.import_files(files, lenient=lenient, scale=sc, progress=advance)
    if conflicts_out is not None:
        _write_report(report.conflicts.astype({"stored_grade": "float64"}), conflicts_out, "cal-conflicts",
                      {"store": str(store), "files": [str(f) for f in files]})
    summary = {"store": str(store), "imported": report.imported, "batches_registered": report.batches_registered,
               "counts": report.counts, "conflicts": common.records(report.conflicts)}
    common.report_repairs(repair_counts(report.counts), summary)
    common.emit(summary, as_json, f"imported {report.imported} judgments into {store} ({report.counts})")
    if not as_json and len(report.conflicts):
        common.print_table(report.conflicts, title=f"{len(report.conflicts)} conflicting rows skipped", console=common.stderr)


@app.command("export")
def export(
    store: Path = StoreArg,
    output: Path = typer.Option(..., "-o", "--output", help="Qrels: TREC text (any name) or .parquet; with --log a table."),
    combine: str = CombineOpt,
    thread: str = typer.Option("all", "--thread", help="all (every judgment) | local | fractional (shared pool + that thread)."),
    log: bool = typer.Option(False, "--log", help="Write the judgment log (no times) instead of qrels: .parquet/.csv/.tsv/.jsonl."),
    as_json: bool = common.JsonOpt,
) -> None:
    """Export qrels (one grade per topic and passage) or the judgment log; same store, same bytes."""
    from qrelkit.io.qrels import write_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(outputs=[output], read_stores=[store])
    with _open(store, readonly=True) as s:
        table = (s.judgments.export_log(thread=thread) if log
                 else s.judgments.export_qrels(combine=combine, thread=thread))
    params = {"thread": thread} if log else {"thread": thread, "combine": combine}
    if log:
        write_table(table, output, kind="judgment-log", params=params)
    elif output.name.lower().endswith(".parquet"):
        write_table(table, output, kind="qrels", params=params)
    else:
        write_qrels(table, output)
    topics = len(set(table["qid"].to_pylist()))
    common.emit({"output": str(output), "rows": table.num_rows, "topics": topics, **params}, as_json,
                f"wrote {table.num_rows} {'log rows' if log else 'qrels'} over {topics} topics -> {output}")


@app.command("status")
def status(
    store: Path = StoreArg,
    rule: str = RuleOpt,
    params: List[str] = SetOpt,
    budget: Optional[int] = BudgetOpt,
    threads: List[str] = ThreadOpt,
    combine: str = CombineOpt,
    pool: Optional[Path] = typer.Option(None, "--pool", help="Pool table (qid, docid; ordered by position if present) for the screening rule: a topic's first N are its pool's first N (default: its first N judged passages in judging order)."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Also write the table (.parquet/.csv/.tsv/.jsonl)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Per topic and thread: judged, relevant, density, the stopping rule's decision and why, and
    the topic's screening decision (the config's screen section: keep, discard-too-many,
    discard-none, or incomplete while its first N are not all judged)."""
    from qrelkit.cal.screening import status_with_screening  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.cal.stopping import get_rule, rule_name  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import read_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[config, pool], outputs=[output], read_stores=[store])
    cfg = common.config(config)
    pool_df = None
    if pool is not None:
        pool_df = read_table(pool)
        if not {"qid", "docid"} <= set(pool_df.column_names):
            raise InputError("missing-column", "a pool table needs columns qid and docid", file=str(pool))
        pool_df = pool_df.select([c for c in ("qid", "docid", "position") if c in pool_df.column_names]).to_pandas()
    rule = rule_name(cfg, rule)
    settings = _rule_params(params, rule)
    with _open(store, readonly=True) as s:
        with common.progress("cal status") as advance:
            df, scr = status_with_screening(s, config=cfg, pool=pool_df, rule=rule, combine=combine, budget=budget,
                                            threads=threads or None, progress=advance, **settings)
    _write_report(df, output, "cal-status", {"store": str(store), "rule": rule, "params": params, "budget": budget,
                                             "pool": str(pool) if pool else None})
    needs = get_rule(rule, cfg, **settings).needs()
    if as_json:
        common.emit({"store": str(store), "rule": rule, "needs": needs,
                     "threads": common.records(df),
                     "screening": common.records(scr)}, True)
    else:
        shown = df.assign(density=df["density"].map(lambda x: "" if x != x else f"{x:.3f}"))
        common.print_table(shown, title=f"{store} ({rule} rule: {needs})")


@app.command("replay")
def replay(
    store: Path = StoreArg,
    rule: str = typer.Option(..., "--rule", "-r", help="Stopping rule: density | knee | budget | target."),
    params: List[str] = SetOpt,
    budget: Optional[int] = BudgetOpt,
    threads: List[str] = ThreadOpt,
    combine: str = CombineOpt,
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Also write the table (.parquet/.csv/.tsv/.jsonl)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Re-apply a stopping rule to the stored judgment log, batch by batch in judging order, and
    report where it would have stopped (judged, relevant, recall of the log's relevant, saved)."""
    from qrelkit.cal.stopping import replay_store  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[config], outputs=[output], read_stores=[store])
    cfg = common.config(config)
    with _open(store, readonly=True) as s:
        df = replay_store(s, rule=rule, config=cfg, combine=combine, budget=budget, threads=threads or None,
                          **_rule_params(params, rule))
    _write_report(df, output, "cal-replay", {"store": str(store), "rule": rule, "params": params, "budget": budget})
    if as_json:
        common.emit({"store": str(store), "rule": rule,
                     "threads": common.records(df)}, True)
    else:
        fmt = {c: (lambda x: "" if x is None or x != x else f"{x:.3f}") for c in ("stop_density", "recall")}
        shown = df.assign(**{c: df[c].map(f) for c, f in fmt.items()})
        common.print_table(shown, title=f"{store}: replay of the {rule} rule")


# -- the CAL loop: features, next, simulate -------------------------------------------------------

# Imports inside the functions (qrelkit.cal.loop, .features, .simulate, .study, qrelkit.dedupe.tokenize):
# they compile numba kernels, too slow to pay on every 'qrelkit --help'. Everything else is imported here.


def _norm(cfg):
    """The tokenizer settings of the near-duplicate module (config ``[dedupe]``): CAL features
    and near-duplicate detection see the same words."""
    return DedupeParams.from_config(cfg).norm


def _threads(value: Optional[str]) -> Optional[list[str]]:
    if value is None:
        return None
    names = [t.strip() for t in value.split(",") if t.strip()]
    bad = [t for t in names if t not in THREADS]
    if bad or not names:
        raise InputError("bad-option", f"threads must be among {', '.join(THREADS)}, got {value!r}")
    return names


def _load_features(path: Path, cfg, classes: Optional[Path] = None):
    """A features folder (built by ``cal features``), or a corpus file featurized in memory."""
    from qrelkit.io.classes import read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.cal.features import build_features, load_features  # lazy: numba kernels, slow to import

    if path.is_dir():
        if classes is not None:
            raise InputError("bad-option", "--classes is stored with the features; give it to 'qrelkit cal features'")
        return load_features(path)
    if not path.exists():
        raise InputError("unreadable", "no such file or folder", file=str(path))
    cls = read_classes(classes) if classes else None
    with common.progress("building features", None):
        return build_features(path, norm=_norm(cfg), classes=cls)


@app.command("features")
def features(
    corpus: Path = typer.Argument(..., help="The corpus: a file (JSONL, TSV or Parquet, optionally .gz), a folder of shards, or irds:DATASET (streamed)."),
    output: Path = typer.Option(..., "-o", "--output", help="Folder for the features; next to the store by default: campaign.db -> campaign.db.features."),
    classes: Optional[Path] = typer.Option(None, "--classes", help="Near-duplicate classes: CAL then selects canonical passages only."),
    universe: Optional[Path] = typer.Option(None, "--universe", help="Only these passages (a table with a pid/docid column, or one id per line)."),
    shard_size: Optional[int] = typer.Option(None, "--shard-size", help=f"Passages per shard (default: config [cal] shard_size, {_default('shard_size')}): memory while building is about one shard."),
    hashing: Optional[int] = typer.Option(None, "--hashing", help=f"Fold words into N hash buckets: at most N columns, bounded vocabulary memory (default: config [cal] hashing, {_default('hashing')}: every word)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Build on a Dask LocalCluster of N worker processes (the same folder, byte for byte)."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Build on this Dask scheduler's workers, e.g. tcp://host:8786 (the output, and a folder of shards, on shared storage)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Build CAL features once: BMI (1 + ln tf) * idf, L2-normalized, float32 CSR shards, memory-mappable
    (in parallel on Dask with --workers or --scheduler)."""
    from qrelkit.io.classes import read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.corpus import passages_upper_bound  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[corpus, classes, universe, config], folders=[output])
    from qrelkit.cal.features import build_features  # lazy: numba kernels, slow to import
    dask = common.dask_choice(workers, scheduler)
    cfg = common.config(config)
    cls = read_classes(classes) if classes else None
    ids = _read_ids(universe) if universe else None
    params = {"corpus": str(corpus), "classes": str(classes) if classes else None,
              "universe_file": str(universe) if universe else None, "config": cfg.source}
    # the bar's total: lines of the corpus (a universe keeps fewer passages: no total then)
    total = passages_upper_bound(corpus) if common.stderr.is_terminal and universe is None else None
    fp = FeatureParams.from_config(cfg, shard_size=shard_size, hashing=hashing)
    with common.progress("featurizing", total) as advance:
        feats = build_features(corpus, output, norm=_norm(cfg), universe=ids, classes=cls, progress=advance, params=params,
                               shard_size=fp.shard_size, hashing=fp.hashing, **dask)
    summary = {"output": str(output), "passages": feats.n_rows, "terms": feats.n_terms, "nonzeros": feats.nnz,
               "shards": len(feats.shards), "classes": cls is not None, "seconds": round(feats.timings.get("total", 0.0), 2)}
    common.emit(summary, as_json, f"features of {feats.n_rows} passages ({feats.n_terms} terms, {feats.nnz} non-zeros, "
                f"{len(feats.shards)} shards) -> {output}")


def _read_ids(path: Path) -> pa.Array:
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.tables import read_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.text import read_text  # lazy: pyarrow; `--help` stays fast
    if path.suffix.lower() in (".parquet", ".csv", ".tsv", ".jsonl"):
        t = read_table(path)
        for c in ("pid", "docid", "id"):
            if c in t.column_names:
                return pa.compute.cast(t[c], pa.string()).combine_chunks()
        raise InputError("missing-column", "the universe table needs a pid, docid or id column", file=str(path))
    lines = [ln.strip() for ln in read_text(path).splitlines() if ln.strip()]
    return pa.array(lines, pa.string())


WorkersOpt = typer.Option(None, "--workers", help="Score the feature shards on a Dask LocalCluster of N worker processes (same batches as without).")
SchedulerOpt = typer.Option(None, "--scheduler", help="Score the feature shards on this Dask scheduler's workers, e.g. tcp://host:8786 (the features on shared storage).")


def _scorer(feats, scheduler: Optional[str], workers: Optional[int]):
    from qrelkit.cal.distributed import scorer_for  # lazy: numba kernels, slow to import

    return scorer_for(feats, scheduler=scheduler, workers=workers)


@app.command("next")
def next_(
    store: Path = typer.Argument(..., help="The campaign's judging store."),
    output: Path = typer.Option(..., "-o", "--output", help="The issued batches for assessors (.csv, .tsv, .jsonl, .parquet)."),
    features_dir: Optional[Path] = typer.Option(None, "--features", "-f", help="Features folder (default: STORE's name + .features)."),
    topics: List[str] = typer.Option([], "--topic", help="Only this topic (repeatable)."),
    threads: Optional[str] = typer.Option(None, "--threads", help="Comma-separated threads (default: every active thread)."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Join passage texts from this corpus (streamed)."),
    assessor: str = typer.Option("", "--assessor", help="Fill the assessor column with this name."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help=f"Passages per batch (default: config [cal] batch_size, {_default('batch_size')})."),
    schedule: Optional[str] = typer.Option(None, "--schedule", help="fixed | bmi (BMI's growing batches: 1, then +ceil(B/10))."),
    fraction: Optional[float] = typer.Option(None, "--fraction", help="Fractional collection share (default: config [fractional])."),
    allow_open: bool = typer.Option(False, "--allow-open", help="Issue even when the thread's last batch is not judged yet."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Compute the batches but do not record them in the store."),
    combine: str = typer.Option("median_high", "--combine", help="Several assessors' grades -> one: median_high | max | min."),
    lock_timeout: float = LockTimeoutOpt,
    workers: Optional[int] = WorkersOpt,
    scheduler: Optional[str] = SchedulerOpt,
    seed: Optional[int] = common.SeedOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Issue the next CAL batch of every active topic and thread: train on the thread's view of the
    judgments, rank the candidates, record the best passages that need judging (passages judged in
    another thread are encountered: copied into the batch, not judged again)."""
    from qrelkit.io.corpus import lookup_texts  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.store import open_store, store_errors  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[features_dir, corpus, config], outputs=[output], stores=[store])
    from qrelkit.cal.features import load_features  # lazy: numba kernels, slow to import
    from qrelkit.cal.loop import batches_table, issue_next_batches  # lazy: numba kernels, slow to import
    cfg = common.config(config)
    if not store.is_file():
        raise InputError("not-a-store", "no judging store here (create one with 'qrelkit cal init')", file=str(store))
    s = open_store(store, timeout=lock_timeout, operation="cal next")  # a damaged store fails before the work
    fdir = features_dir or store.with_name(store.name + ".features")
    feats = load_features(fdir)
    params = CalParams.from_config(cfg, batch_size=batch_size, schedule=schedule, seed=seed)
    fp = FractionalParams.from_config(cfg, fraction=fraction)
    with contextlib.closing(s), store_errors(store), _scorer(feats, scheduler, workers) as scorer:
        batches, report = issue_next_batches(s, feats, topics=topics or None, threads=_threads(threads), params=params,
                                             fraction=fp.fraction, fraction_seed=fp.seed, combine=combine,
                                             allow_open=allow_open, dry_run=dry_run, scorer=scorer)
    texts = None
    if corpus is not None:
        want = {p for b in batches for p in b.pids}
        texts = {k: v[0] for k, v in lookup_texts(corpus, want).items()} if want else {}
    table = batches_table(batches, assessor=assessor, texts=texts)
    write_table(table, output, kind="cal-batches", params={
        "store": str(store), "features": str(fdir), "cal": params.as_dict(), "fraction": fp.fraction, "fraction_seed": fp.seed,
        "combine": combine, "dry_run": dry_run})
    counts = report["action"].value_counts().to_dict()
    summary = {"output": str(output), "batches": len(batches), "passages": table.num_rows, "actions": counts,
               "threads": common.records(report),
               "judged_passages_not_in_features": report.attrs.get("judged_passages_not_in_features", 0)}
    common.emit(summary, as_json, f"issued {len(batches)} batches ({table.num_rows} passages) -> {output}; {counts}")


@app.command("simulate")
def simulate(
    features_or_corpus: Path = typer.Argument(..., help="Features folder ('cal features'), or a corpus file (featurized in memory)."),
    topics: Path = typer.Option(..., "--topics", "-t", help="Topics (qid<TAB>text): the queries are CAL's seed documents."),
    qrels: Path = typer.Option(..., "--qrels", "-q", help="The oracle: hidden graded qrels."),
    output: Path = typer.Option(..., "-o", "--output", help="Folder for log, summary, rules, curves (tables) and the plot."),
    initial: Optional[Path] = typer.Option(None, "--initial", help="Judgments made before CAL (qrels or a judgments table), e.g. the judged pools."),
    threads: str = typer.Option("all", "--threads", help="Comma-separated threads run side by side: fractional,local,all."),
    rules: List[str] = typer.Option([], "--rule", "-r", help="Stopping rule to watch (repeatable): density | knee | budget | target."),
    stop_when: Optional[str] = typer.Option(None, "--stop-when", help="End a thread when this rule fires (default: run to --until-recall)."),
    max_effort: int = typer.Option(1000, "--max-effort", help="Most passages judged per topic and thread (initial judgments included)."),
    until_recall: float = typer.Option(0.95, "--until-recall", help="Without --stop-when: run until every rule fired and this recall is reached."),
    budget: Optional[int] = typer.Option(None, "--budget", help="Judging budget the rules see (density: budget exhausted)."),
    unjudged: str = typer.Option("zero", "--unjudged", help="Passages the qrels do not grade: zero (non-relevant) | skip (no label)."),
    error_rate: float = typer.Option(0.0, "--error-rate", help="Probability the oracle gives another grade (seeded)."),
    classes: Optional[Path] = typer.Option(None, "--classes", help="Near-duplicate classes (only with a corpus file)."),
    topic: List[str] = typer.Option([], "--topic", help="Only this topic (repeatable)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help=f"Passages per batch (default: config [cal] batch_size, {_default('batch_size')})."),
    schedule: Optional[str] = typer.Option(None, "--schedule", help="fixed | bmi."),
    fraction: Optional[float] = typer.Option(None, "--fraction", help="Fractional collection share (fractional thread)."),
    relevant: Optional[str] = typer.Option(None, "--relevant", help="Grades counted as relevant, comma-separated, e.g. 1 for binary qrels (default: config [labels] passage_relevant, 2,3)."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Write recall-effort.png."),
    workers: Optional[int] = WorkersOpt,
    scheduler: Optional[str] = SchedulerOpt,
    seed: Optional[int] = common.SeedOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Simulate CAL with an oracle from qrels: recall-vs-effort curves, effort to 75% and 95%
    recall, and recall and effort when each stopping rule fires. Topics that the binarization
    leaves with no relevant passage are named on stderr (an error when it is every topic), and so
    are the topics whose curve --max-effort cut, with their recall at the cut."""
    import pandas as pd  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.topics import read_topics  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[features_or_corpus, topics, qrels, initial, classes, config], folders=[output])
    from qrelkit.cal.simulation import plot_curves, qrels_grades, simulate_cal, topics_without_relevant  # lazy: numba kernels, slow to import
    from qrelkit.cal.study import fractional_pids, read_initial, select_topics, thread_summary, watched_rules, write_simulation  # lazy: numba kernels, slow to import

    cfg = common.config(config)
    th = _threads(threads)
    params = CalParams.from_config(cfg, batch_size=batch_size, schedule=schedule, seed=seed, relevant=_grades(relevant))
    tdf = select_topics(read_topics(topics), topic, file=str(topics))
    q = read_qrels(qrels)
    topics_without_relevant(qrels_grades(q), tdf["qid"].astype(str).tolist(), params.relevant, file=str(qrels))
    feats = _load_features(features_or_corpus, cfg, classes)
    init = read_initial(initial) if initial is not None else None
    rule_objs = watched_rules(rules, stop_when, cfg)
    frac_ids = None
    if "fractional" in th:
        fp = FractionalParams.from_config(cfg, fraction=fraction)
        frac_ids = fractional_pids(feats, fp.fraction, fp.seed)
    with common.progress("simulating", len(tdf)) as advance, _scorer(feats, scheduler, workers) as scorer:
        res = simulate_cal(feats, tdf, q, threads=th, params=params, initial=init, rules=rule_objs, stop_when=stop_when,
                           max_effort=max_effort, until_recall=until_recall, budget=budget, fraction_ids=frac_ids,
                           unjudged=unjudged, error_rate=error_rate, scale=tuple(LabelsParams.from_config(cfg).scale),
                           progress=lambda _q: advance(1), qrels_file=str(qrels), scorer=scorer)
    cut = common.records(res.cut)
    write_simulation(res, output, {
        "features": str(features_or_corpus), "topics": str(topics), "qrels": str(qrels),
        "initial": str(initial) if initial else None, **res.params, "config": cfg.source,
        "no_relevant_topics": res.no_relevant, "cut_by_max_effort": cut})
    if plot and len(res.curves):
        plot_curves(res.curves, output / "recall-effort.png")
    per_thread = thread_summary(res, rule_objs)
    _warn_simulation(res, len(tdf), max_effort, params.relevant)
    if as_json:
        common.emit({"output": str(output), "topics": len(tdf), "threads": per_thread,
                     "no_relevant": res.no_relevant, "cut_by_max_effort": cut, "max_effort": max_effort,
                     "actions": res.rules.groupby(["thread", "rule", "action"]).size().reset_index(name="n").to_dict(orient="records")}, True)
    else:
        common.print_table(pd.DataFrame(per_thread), title=f"CAL simulation: {len(tdf)} topics -> {output}")


def _grades(value: Optional[str]) -> Optional[tuple[int, ...]]:
    """``--relevant 2,3`` -> (2, 3); None when not given."""
    if value is None:
        return None
    try:
        out = tuple(int(x) for x in value.split(",") if x.strip())
    except ValueError:
        out = ()
    if not out:
        raise InputError("bad-option", f"--relevant takes grades separated by commas, e.g. 2,3; got {value!r}")
    return out


def _warn_simulation(res, n_topics: int, max_effort: int, relevant) -> None:
    """One warning line on stderr for the topics with no relevant passage, one for the curves
    that --max-effort cut (with their recall at the cut); the first 20 of each are named, all
    of them are in --json and the tables' metadata."""
    def listed(items: list[str]) -> str:
        more = f", ... ({len(items) - 20} more in --json and the tables' metadata)" if len(items) > 20 else ""
        return ", ".join(items[:20]) + more

    if res.no_relevant:
        common.stderr.print(
            f"qrelkit: warning: {len(res.no_relevant)} of {n_topics} topics have no relevant passage when grades "
            f"{', '.join(map(str, relevant))} count as relevant (recall undefined; stopped 'no-relevant'): "
            + listed(res.no_relevant), markup=False, highlight=False)
    if len(res.cut):
        def rec(x):
            return "n/a" if x is None or x != x else f"{x:.3f}"

        items = [f"{q}/{t} {rec(r)}" for q, t, r in zip(res.cut["qid"], res.cut["thread"], res.cut["recall"])]
        common.stderr.print(
            f"qrelkit: warning: --max-effort {max_effort} cut {len(items)} curves (topic/thread recall at the cut): "
            + listed(items), markup=False, highlight=False)
