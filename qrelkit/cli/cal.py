"""``qrelkit cal``: the judging store of a CAL campaign and its stopping rules.

The CAL loop and simulation commands (``qrelkit.cli.cal_loop``) attach to :data:`app` too.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import List, Optional

import pyarrow as pa
import typer

from qrelkit.cal.screening import status_with_screening
from qrelkit.cal.stopping import get_rule, replay_store, rule_name, rule_section
from qrelkit.cal.store import init_store, open_store, store_errors
from qrelkit.cli import common
from qrelkit.errors import InputError, repair_counts
from qrelkit.io.qrels import write_qrels
from qrelkit.io.tables import read_table, write_table
from qrelkit.io.topics import read_topics

app = typer.Typer(help="Continuous active learning: judging store, stopping rules.", no_args_is_help=True)

StoreArg = typer.Argument(..., help="The campaign's judging store (SQLite file).")
RuleOpt = typer.Option(None, "--rule", "-r", help="Stopping rule: density | knee | budget | target, or a registered one (default: config [stopping] rule, density).")
SetOpt = typer.Option([], "--set", help="Rule parameter KEY=VALUE (repeatable), e.g. min_judged=100.")
BudgetOpt = typer.Option(None, "--budget", help="Judging budget per topic and thread (default: config [cal] budget, none).")
ThreadOpt = typer.Option([], "--thread", help="Only this thread (repeatable): fractional | local | all.")
CombineOpt = typer.Option("median_high", "--combine", help="Several assessors' grades -> one: median_high | max | min.")


def _rule_params(items: List[str], rule: str = "density") -> dict:
    """``--set KEY=VALUE`` rule parameters, checked against the rule's config section
    (``[stopping]`` or ``[stopping.<rule>]``) when the schema declares them."""
    return common.key_values(items, rule_section(rule))


def _store_path(path: Path) -> Path:
    if not path.is_file():
        raise InputError("not-a-store", "no judging store here (create one with 'qrelkit cal init')", file=str(path))
    return path


LockTimeoutOpt = typer.Option(60.0, "--lock-timeout", envvar="QRELKIT_LOCK_TIMEOUT",
                              help="Seconds to wait for another writer's lock on the store before failing.")


@contextlib.contextmanager
def _open(path: Path, *, readonly: bool = False, timeout: float = 60.0, operation: str | None = None):
    store = open_store(_store_path(path), readonly=readonly, timeout=timeout, operation=operation)
    try:
        with store_errors(path):
            yield store
    finally:
        store.close()


def _write_report(df, output: Optional[Path], kind: str, params: dict) -> None:
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
    common.check_io(inputs=[topics, config], stores=[store])
    cfg = common.config(config)
    names = [t.strip() for t in threads.split(",")] if threads else list(cfg.get_value("cal", "threads"))
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
    sc = [int(x) for x in scale.split(",")] if scale else [int(x) for x in cfg.get_value("labels", "scale")]
    for f in files:
        if not f.is_file():
            raise InputError("unreadable", "no such file", file=str(f))
    with _open(store, timeout=lock_timeout, operation="cal import") as s, \
            common.progress("cal import: reading", len(files)) as advance:
        report = s.import_files(files, lenient=lenient, scale=sc, progress=advance)
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
    common.check_io(outputs=[output], read_stores=[store])
    with _open(store, readonly=True) as s:
        table = s.export_log(thread=thread) if log else s.export_qrels(combine=combine, thread=thread)
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
