"""``qrelkit prefs``: shallow pooling with preference judgments (docs/protocol.md section 2).

pairs -> tasks -> (workers, or ``prefs simulate``) -> import (screening, re-issue) ->
tournament (preference qrels) -> winratio, rescore; ``single`` is the single-ranker check.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from qrelkit.cli import HELP, common
from qrelkit.cli.runs import RunsArg, load_runs
from qrelkit.prefs.params import PrefsParams
from qrelkit.errors import InputError, repair_counts
from qrelkit.pooler.params import Top1Params

if TYPE_CHECKING:  # names for annotations only: importing them loads pyarrow and pandas
    import pyarrow as pa
    import pandas as pd

app = typer.Typer(help=HELP["prefs"], no_args_is_help=True)

ClassesOpt = typer.Option(None, "--classes", help="Near-duplicate classes (docid -> class id): compare class ids.")
LenientOpt = typer.Option(None, "--lenient/--strict", help="Repair run defects instead of failing.")


def _runs(runs: List[Path], cfg, lenient: Optional[bool]) -> tuple[pa.Table, dict[str, int]]:
    """Run files/folders (validated by the run reader), or one Parquet table of canonical runs
    written by ``qrelkit runs canonicalize`` (already validated, read as is); with what lenient
    mode repaired (per rule)."""
    from qrelkit.io.runs import RUN_SCHEMA  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import read_metadata, read_table  # lazy: pyarrow; `--help` stays fast
    if len(runs) == 1 and runs[0].suffix == ".parquet" and runs[0].is_file() and read_metadata(runs[0]).get("kind") == "runs":
        t = read_table(runs[0])
        missing = [c for c in RUN_SCHEMA.names if c not in t.column_names]
        if missing:
            raise InputError("missing-column", f"canonical runs need columns {', '.join(missing)}", file=str(runs[0]))
        return t.select(RUN_SCHEMA.names).cast(RUN_SCHEMA), {}
    rs = load_runs(runs, cfg, lenient=lenient)
    return rs.table, rs.repairs()


def _v(cfg, key: str, override=None):
    """``[prefs] key`` of the config, the flag ``override`` winning (:class:`~qrelkit.prefs.params.PrefsParams`)."""
    return getattr(PrefsParams.from_config(cfg, **{key: override}), key)


def _pool(path: Path) -> pa.Table:
    from qrelkit.io.tables import read_table  # lazy: pyarrow; `--help` stays fast
    t = read_table(path)
    for c in ("qid", "docid"):
        if c not in t.column_names:
            raise InputError("missing-column", f"not a pool table (no column {c!r})", file=str(path))
    return t


def _frames(paths: List[Path], what: str) -> pd.DataFrame:
    import pandas as pd  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import read_table  # lazy: pyarrow; `--help` stays fast
    if not paths:
        raise InputError("bad-option", f"no {what} given")
    frames = [read_table(p).to_pandas() for p in paths]
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _judgments(paths: List[Path]) -> pd.DataFrame:
    import pandas as pd  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import read_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.prefs.tasks import read_judgments  # lazy: pyarrow, pandas; `--help` stays fast
    frames = []
    for p in paths:
        frames.append(read_judgments(read_table(p).to_pandas(), file=str(p)))
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _arrow(df: pd.DataFrame, schema: pa.Schema | None = None) -> pa.Table:
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.prefs.common import to_arrow  # lazy: pyarrow, pandas; `--help` stays fast
    if schema is not None:
        return to_arrow(df, schema)
    return pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)


class _Outputs:
    """Every output of a command, converted to tables first and written only when all are ready,
    so a failure writes nothing."""

    def __init__(self, params: dict) -> None:
        self.params = params
        self.items: list[tuple] = []

    def add(self, path: Optional[Path], table, kind: str, schema: pa.Schema | None = None, **extra) -> None:
        import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
        if path is not None:
            t = table if isinstance(table, pa.Table) else _arrow(table, schema)
            self.items.append(("table", path, t, kind, {**self.params, **extra}))

    def qrels(self, path: Path, table: pa.Table) -> None:
        self.items.append(("qrels", path, table, "qrels-prefs", self.params))

    def write(self) -> None:
        from qrelkit.io.qrels import write_qrels  # lazy: pyarrow, pandas; `--help` stays fast
        from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
        for how, path, t, kind, params in self.items:
            if how == "qrels" and path.suffix != ".parquet":
                write_qrels(t, path)
            else:
                write_table(t, path, kind=kind, params=params)


@app.command("pairs")
def pairs_cmd(
    pool: Path = typer.Argument(..., help="A top-1 pool (.parquet) from 'pool top1'."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Pairs table (.parquet/.csv/.tsv/.jsonl); without it, only the count and cost."),
    classes: Optional[Path] = ClassesOpt,
    best: Optional[Path] = typer.Option(None, "--best", help="Maintenance: current preference qrels; pair only newly surfaced items with them."),
    previous: List[Path] = typer.Option([], "--previous", help="Maintenance: an earlier pool whose items are already surfaced (repeatable)."),
    judged: List[Path] = typer.Option([], "--judged", help="Maintenance: earlier pairs or judgments (qid, doc_a, doc_b), never issued again (repeatable)."),
    per_task: Optional[int] = typer.Option(None, "--per-task", help=f"Real pairs per task (default: {common.default_of('prefs', 'pairs_per_task')})."),
    test_pairs: Optional[int] = typer.Option(None, "--test-pairs", help=f"Test pairs per task (default: {common.default_of('prefs', 'test_pairs')})."),
    price: Optional[float] = typer.Option(None, "--price", help=f"Price per task paid to the worker (default: {common.default_of('prefs', 'price_per_task')})."),
    fee: Optional[float] = typer.Option(None, "--fee", help=f"Platform fee per task (default: {common.default_of('prefs', 'fee_per_task')})."),
    assignments: Optional[int] = typer.Option(None, "--assignments", help=f"Workers per task (default: {common.default_of('prefs', 'assignments')})."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Every pair of each topic's pool once (or, with --best, newly surfaced items vs the best
    answers); prints the number of comparisons and the estimated cost before anything is exported."""
    from qrelkit.io.classes import read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.prefs.pairs import PAIR_SCHEMA, estimate_cost, maintenance_pairs, pair_summary, pool_pairs  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[pool, classes, best, previous, judged, config], outputs=[output])
    cfg = common.config(config)
    t = _pool(pool)
    cls = read_classes(classes) if classes else None
    if best is not None:
        prev = [_pool(p) for p in previous]
        jd = _frames(judged, "judged pairs") if judged else None
        df = maintenance_pairs(t, read_qrels(best), previous=prev, judged=jd, classes=cls)
        mode = "maintenance"
    else:
        if previous or judged:
            raise InputError("bad-option", "--previous and --judged need --best (maintenance mode)")
        df = pool_pairs(t, classes=cls)
        mode = "all-pairs"
    cost = estimate_cost(len(df), pairs_per_task=int(_v(cfg, "pairs_per_task", per_task)),
                         test_pairs=int(_v(cfg, "test_pairs", test_pairs)),
                         price_per_task=float(_v(cfg, "price_per_task", price)),
                         fee_per_task=float(_v(cfg, "fee_per_task", fee)),
                         assignments=int(_v(cfg, "assignments", assignments)))
    out = _Outputs(dict(pool=pool, classes=classes, best=best, previous=previous, judged=judged, mode=mode,
                      config=cfg.source))
    out.add(output, df, "pref-pairs", PAIR_SCHEMA)
    out.write()
    summary = {"mode": mode, "output": str(output) if output else None, **pair_summary(df), **cost}
    common.emit(summary, as_json, f"{mode}: {cost['pairs']} pairs over {summary['topics']} topics -> {cost['tasks']} tasks "
                f"x {cost['assignments']} assignment(s), estimated cost ${cost['cost']:,.2f} "
                f"(${cost['price_per_task']:.2f} + ${cost['fee_per_task']:.2f} per task)"
                + (f" -> {output}" if output else " (nothing written: no -o)"))


@app.command("tasks")
def tasks_cmd(
    pairs: Path = typer.Argument(..., help="Pairs table from 'prefs pairs', 'prefs single' or a tournament's --pending-out."),
    qrels: Path = typer.Option(..., "--qrels", "-q", help="Qrels with known relevant passages for the test pairs."),
    output: Path = typer.Option(..., "-o", "--output", help="Task table, the organizer's master copy (.parquet)."),
    export: Optional[Path] = typer.Option(None, "--export", help="Crowd export without the test-pair key (.csv/.jsonl)."),
    corpus: Optional[Path] = typer.Option(None, "--corpus", help="Corpus to join passage texts from (optional; empty texts without)."),
    topics: Optional[Path] = typer.Option(None, "--topics", "-t", help="Topics file for the query texts."),
    per_task: Optional[int] = typer.Option(None, "--per-task", help=f"Real pairs per task (default: {common.default_of('prefs', 'pairs_per_task')})."),
    test_pairs: Optional[int] = typer.Option(None, "--test-pairs", help=f"Test pairs per task (default: {common.default_of('prefs', 'test_pairs')})."),
    test_min_rel: Optional[int] = typer.Option(None, "--test-min-rel", help="Grade of the known relevant passage of a test pair."),
    prefix: str = typer.Option("T", "--prefix", help="Task id prefix (use one per round)."),
    seed: Optional[int] = common.SeedOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Crowd tasks: 10 real pairs + 3 test pairs (known relevant vs off-topic), seeded random order
    and left/right placement, with passage and query texts."""
    from qrelkit.io.corpus import lookup_texts  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import read_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.topics import read_topics  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.prefs.tasks import TASK_SCHEMA, export_view, make_tasks, task_summary  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[pairs, qrels, corpus, topics, config], outputs=[output, export])
    cfg = common.config(config)
    p = read_table(pairs).to_pandas()
    q = read_qrels(qrels)
    queries = dict(zip(*read_topics(topics)[["qid", "text"]].T.values)) if topics else None
    s = int(_v(cfg, "seed", seed))
    kw = dict(pairs_per_task=int(_v(cfg, "pairs_per_task", per_task)), test_pairs=int(_v(cfg, "test_pairs", test_pairs)),
              test_min_rel=int(_v(cfg, "test_min_rel", test_min_rel)), seed=s, prefix=prefix)
    t = make_tasks(p, q, **kw, queries=queries)
    if corpus is not None:
        with common.progress("joining passage texts", None):
            texts = lookup_texts(corpus, set(t["left_docid"]) | set(t["right_docid"]))
        t["left_text"] = [texts.get(d, ("", None))[0] for d in t["left_docid"]]
        t["right_text"] = [texts.get(d, ("", None))[0] for d in t["right_docid"]]
    params = dict(pairs=pairs, qrels=qrels, corpus=corpus, topics=topics, config=cfg.source, **kw)
    out = _Outputs(params)
    out.add(output, t, "pref-tasks", TASK_SCHEMA)
    out.add(export, export_view(t), "pref-tasks-export")
    out.write()
    summary = {"output": str(output), "export": str(export) if export else None, **task_summary(t),
               "texts_missing": int(((t["left_text"] == "") | (t["right_text"] == "")).sum()) if corpus else None}
    common.emit(summary, as_json, f"{summary['tasks']} tasks ({summary['real_pairs']} real + {summary['test_pairs']} test "
                f"comparisons) -> {output}" + (f", crowd export -> {export}" if export else ""))


@app.command("simulate")
def simulate(
    tasks: Path = typer.Argument(..., help="Task table (.parquet) from 'prefs tasks' or a re-issue."),
    qrels: Path = typer.Option(..., "--qrels", "-q", help="Graded qrels: the hidden truth the simulated workers follow."),
    output: Path = typer.Option(..., "-o", "--output", help="Answers (task_id, slot, worker, choice): .csv/.jsonl/.parquet."),
    workers: Optional[int] = typer.Option(None, "--workers", help=f"Number of simulated workers W01, W02, ... (default: {common.default_of('prefs', 'workers')})."),
    failing: List[str] = typer.Option([], "--failing", help="A worker who fails test pairs, e.g. W03 (repeatable)."),
    failing_mode: Optional[str] = typer.Option(None, "--failing-mode", help="random | inverted (default: config)."),
    error_rate: Optional[float] = typer.Option(None, "--error-rate", help="Probability a good worker picks the worse passage."),
    test_error_rate: Optional[float] = typer.Option(None, "--test-error-rate", help=f"The same on test pairs (default: {common.default_of('prefs', 'test_error_rate')})."),
    assignments: Optional[int] = typer.Option(None, "--assignments", help=f"Workers per task (default: {common.default_of('prefs', 'assignments')})."),
    ties: Optional[str] = typer.Option(None, "--ties", help="Equal grades: latent (consistent) | random."),
    seed: Optional[int] = common.SeedOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Simulated preference oracle: workers answer tasks from graded qrels, with errors and
    optionally failing workers."""
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import read_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.prefs.crowd import simulate_answers  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[tasks, qrels, config], outputs=[output])
    cfg = common.config(config)
    kw = dict(workers=int(_v(cfg, "workers", workers)), assignments=int(_v(cfg, "assignments", assignments)),
              error_rate=float(_v(cfg, "error_rate", error_rate)),
              test_error_rate=float(_v(cfg, "test_error_rate", test_error_rate)), failing=list(failing),
              failing_mode=str(_v(cfg, "failing_mode", failing_mode)), ties=str(_v(cfg, "ties", ties)),
              seed=int(_v(cfg, "seed", seed)))
    ans = simulate_answers(read_table(tasks).to_pandas(), read_qrels(qrels), **kw)
    out = _Outputs(dict(tasks=tasks, qrels=qrels, **kw))
    out.add(output, ans, "pref-answers")
    out.write()
    common.emit({"output": str(output), "answers": len(ans), "tasks": int(ans["task_id"].nunique()),
                 "workers": int(ans["worker"].nunique())}, as_json,
                f"{len(ans)} answers to {ans['task_id'].nunique()} tasks by {ans['worker'].nunique()} workers -> {output}")


@app.command("import")
def import_(
    answers: List[Path] = typer.Argument(..., help="Worker answers (.csv/.tsv/.jsonl/.parquet): task_id, slot, worker, choice."),
    tasks_files: List[Path] = typer.Option(..., "--tasks", help="Every task table issued so far (repeatable: first round and re-issues)."),
    output: Path = typer.Option(..., "-o", "--output", help="Usable judgments of real pairs (.parquet/.csv/...)."),
    workers_out: Optional[Path] = typer.Option(None, "--workers-out", help="Per-worker table: tasks, test pairs failed, excluded."),
    reissue_out: Optional[Path] = typer.Option(None, "--reissue-out", help="New tasks for the tasks to re-issue (.parquet)."),
    reissue_export: Optional[Path] = typer.Option(None, "--reissue-export", help="Crowd export of the re-issued tasks (.csv/.jsonl)."),
    reissue_list: Optional[Path] = typer.Option(None, "--reissue-list", help="The list of tasks to re-issue, with reasons."),
    assignments: Optional[int] = typer.Option(None, "--assignments", help=f"Complete answer sets each task needs (default: {common.default_of('prefs', 'assignments')})."),
    lenient: bool = typer.Option(False, "--lenient/--strict", help="Drop bad rows and report counts instead of failing."),
    seed: Optional[int] = common.SeedOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Import worker answers: exclude workers who failed a test pair, list their tasks for
    re-issue, keep the real-pair judgments, report agreement on pairs judged more than once."""
    import pandas as pd  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import read_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.prefs.tasks import JUDGMENT_SCHEMA, REISSUE_SCHEMA, TASK_SCHEMA, export_view, import_answers, normalize_tasks  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[answers, tasks_files, config], outputs=[output, workers_out, reissue_out, reissue_export, reissue_list])
    cfg = common.config(config)
    frames = [normalize_tasks(read_table(p).to_pandas(), file=str(p)) for p in tasks_files]
    t = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    n_assign = int(_v(cfg, "assignments", assignments))
    s = int(_v(cfg, "seed", seed))
    res = import_answers(answers, t, assignments=n_assign, lenient=lenient, seed=s)
    new, report = res["new_tasks"], res["report"]
    params = dict(answers=answers, tasks=tasks_files, assignments=n_assign, seed=s, config=cfg.source)
    out = _Outputs(params)
    out.add(output, res["judgments"], "pref-judgments", JUDGMENT_SCHEMA)
    out.add(workers_out, res["workers"], "pref-workers")
    out.add(reissue_list, res["reissue"], "pref-reissue-list", REISSUE_SCHEMA)
    out.add(reissue_out, new, "pref-tasks", TASK_SCHEMA, reissue=True)
    out.add(reissue_export, export_view(new), "pref-tasks-export", reissue=True)
    out.write()
    counts = {r: int(c) for r, c in zip(report["rule"], report["count"])}
    summary = {"output": str(output), **res["summary"], "agreement": res["agreement"], "rules": counts,
               "reissued_tasks": int(new["task_id"].nunique()) if len(new) else 0}
    common.report_repairs(repair_counts(counts), summary)
    ag = res["agreement"]
    ag_text = (f"; agreement on {ag['pairs_multi']} multiply judged pairs: raw {ag['raw_agreement']:.3f}, Fleiss' kappa "
               f"{ag['fleiss_kappa']:.3f}" if ag.get("raw_agreement") is not None and ag.get("fleiss_kappa") is not None else "")
    common.emit(summary, as_json,
                f"{res['summary']['judgments']} judgments of {res['summary']['pairs_judged']} pairs kept -> {output}; "
                f"excluded workers: {', '.join(res['excluded']) or 'none'}; {len(res['reissue'])} task(s) to re-issue"
                + ag_text)


@app.command("tournament")
def tournament_cmd(
    judgments: List[Path] = typer.Argument(..., help="Preference judgments (qid, doc_a, doc_b, winner), e.g. from 'prefs import'."),
    output: Path = typer.Option(..., "-o", "--output", help="Preference qrels: TREC text, or .parquet."),
    pool: Optional[Path] = typer.Option(None, "--pool", help="The top-1 pool judged (items per topic, original qrels)."),
    pairs_file: Optional[Path] = typer.Option(None, "--pairs", help="Maintenance: the round's pairs (with --best)."),
    best: Optional[Path] = typer.Option(None, "--best", help="Maintenance: the current preference qrels."),
    classes: Optional[Path] = ClassesOpt,
    log_out: Optional[Path] = typer.Option(None, "--log-out", help="Per-topic, per-round log of the tournament."),
    queries_out: Optional[Path] = typer.Option(None, "--queries-out", help="One row per topic: outcome, preference qrels, win counts."),
    pending_out: Optional[Path] = typer.Option(None, "--pending-out", help="Undecided pairs among unresolved topics' finalists (a pairs table)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Preference qrels by tournament: most wins; ties repeated among the tied; cycles keep
    every passage left (docs/protocol.md section 2; docs/prefs.md states the exact rule)."""
    from qrelkit.io.classes import read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import read_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.prefs.pairs import PAIR_SCHEMA  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.prefs.tournament import LOG_SCHEMA, QUERY_SCHEMA, tournament, update_best  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[judgments, pool, pairs_file, best, classes, config], outputs=[output, log_out, queries_out, pending_out])
    cfg = common.config(config)
    j = _judgments(judgments)
    if best is not None:
        if pairs_file is None:
            raise InputError("bad-option", "maintenance (--best) needs the round's --pairs")
        res = update_best(j, read_table(pairs_file).to_pandas(), read_qrels(best))
    else:
        if pairs_file is not None:
            raise InputError("bad-option", "--pairs is for maintenance rounds (with --best); give the --pool")
        if pool is None:
            raise InputError("bad-option", "give the judged --pool (or --best and --pairs for a maintenance round)")
        res = tournament(j, _pool(pool), classes=read_classes(classes) if classes else None)
    params = dict(judgments=judgments, pool=pool, pairs=pairs_file, best=best, classes=classes, config=cfg.source)
    out = _Outputs(params)
    out.qrels(output, res.qrels)
    out.add(log_out, res.log, "pref-tournament-log", LOG_SCHEMA)
    out.add(queries_out, res.per_query, "pref-tournament-topics", QUERY_SCHEMA)
    out.add(pending_out, res.pending, "pref-pairs", PAIR_SCHEMA)
    out.write()
    sm = res.summary
    common.emit({"output": str(output), **sm}, as_json,
                f"{sm['pref_qrels']} preference qrels for {sm['topics_with_prefs']} of {sm['topics']} topics "
                f"({sm['topics_with_cycles']} with cycles, {sm['topics_unresolved']} unresolved) -> {output}; "
                f"preference qrels win {sm['pref_win_rate'] or 0:.1%} of their pairings, original qrels "
                f"{sm['orig_win_rate'] or 0:.1%}"
                + (f"; best answers changed for {sm['topics_best_changed']} topics" if best is not None else ""))


@app.command("winratio")
def winratio(
    judgments: List[Path] = typer.Argument(..., help="Preference judgments (qid, doc_a, doc_b, winner)."),
    pool: Path = typer.Option(..., "--pool", help="The top-1 pool: each run's top passage, and the qrels (perfect run)."),
    output: Path = typer.Option(..., "-o", "--output", help="Long table: run, opponent, differ, decided, wins, ratio, p, p_corrected, significant."),
    matrix_out: Optional[Path] = typer.Option(None, "--matrix-out", help="The matrix (column's ratio over the row) with a last row of wins."),
    wins_out: Optional[Path] = typer.Option(None, "--wins-out", help="Wins per run (ratio > 0.5, and significant)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Heatmap (.png)."),
    classes: Optional[Path] = ClassesOpt,
    alpha: Optional[float] = typer.Option(None, "--alpha", help=f"Significance level (default: {common.default_of('prefs', 'alpha')})."),
    correction: Optional[str] = typer.Option(None, "--correction", help="bonferroni (default) | holm."),
    perfect: bool = typer.Option(True, "--perfect/--no-perfect", help="Include the perfect run (a qrel at rank 1)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Win ratios between runs (and the perfect run) by their top passages, binomial tests with a
    Bonferroni correction over all run pairs; table and heatmap."""
    from qrelkit.io.classes import read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.prefs.common import PERFECT  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.prefs.winratio import matrix_table, plot_heatmap, win_ratios  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[judgments, pool, classes, config], outputs=[output, matrix_out, wins_out, plot])
    cfg = common.config(config)
    a = float(_v(cfg, "alpha", alpha))
    c = str(_v(cfg, "correction", correction))
    wr = win_ratios(_judgments(judgments), _pool(pool), classes=read_classes(classes) if classes else None, alpha=a,
                    correction=c, perfect=perfect)
    params = dict(judgments=judgments, pool=pool, classes=classes, alpha=a, correction=c, perfect=perfect, config=cfg.source)
    out = _Outputs(params)
    out.add(output, wr.table, "pref-winratio")
    out.add(matrix_out, matrix_table(wr), "pref-winratio-matrix")
    out.add(wins_out, wr.wins, "pref-wins")
    out.write()
    if plot is not None:
        plot_heatmap(wr, plot)
    sig = wr.table[wr.table["significant"] & (wr.table["ratio"] > 0.5)]
    summary = {"output": str(output), "runs": len(wr.runs), "run_pairs": len(wr.table) // 2, "alpha": a, "correction": c,
               "significant": int(len(sig)), "wins": dict(zip(wr.wins["run"], wr.wins["wins"].astype(int))),
               "significant_wins": dict(zip(wr.wins["run"], wr.wins["significant_wins"].astype(int)))}
    if perfect:
        summary["beat_perfect_significantly"] = sorted(sig[sig["opponent"] == PERFECT]["run"])
    common.emit(summary, as_json, f"win ratios of {len(wr.runs)} runs: {len(sig)} significant ({c}, alpha {a}) -> {output}")


@app.command("rescore")
def rescore_cmd(
    runs: List[Path] = RunsArg,
    qrels: Path = typer.Option(..., "--qrels", "-q", help="The original qrels."),
    prefs: Path = typer.Option(..., "--prefs", help="Preference qrels from 'prefs tournament'."),
    output: Path = typer.Option(..., "-o", "--output", help="Leaderboard: MRR@10 on original and preference qrels, CIs, ranks."),
    per_query_out: Optional[Path] = typer.Option(None, "--per-query-out", help="Per-topic reciprocal ranks (run, qid, original, prefs)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Figure 5 of the paper (.png)."),
    classes: Optional[Path] = typer.Option(None, "--classes", help="Classes the pool used: every member of a winning class is relevant."),
    measure: Optional[str] = typer.Option(None, "--measure", help=f"ir-measures measure (default: {common.default_of('prefs', 'measure')})."),
    rel: Optional[int] = typer.Option(None, "--rel", help=f"Original qrels: lowest relevant grade (default: {common.default_of('prefs', 'rel')})."),
    ci: Optional[str] = typer.Option(None, "--ci", help="t (t-interval over per-topic values) | bootstrap (percentile, seeded)."),
    level: Optional[float] = typer.Option(None, "--level", help=f"Confidence level (default: {common.default_of('prefs', 'ci_level')})."),
    perfect: bool = typer.Option(True, "--perfect/--no-perfect", help="Add the perfect run (the first qrel at rank 1)."),
    perfect_min_rel: Optional[int] = typer.Option(None, "--perfect-min-rel", help="Grade a qrel needs for the perfect run (default: config [top1])."),
    perfect_mode: Optional[str] = typer.Option(None, "--perfect-mode", help="all | best (default: config [top1] perfect)."),
    perfect_qrels: Optional[Path] = typer.Option(None, "--perfect-qrels", help="Qrels the perfect run's passages come from (default: --qrels; give the qrels the top-1 pool used)."),
    lenient: Optional[bool] = LenientOpt,
    seed: Optional[int] = common.SeedOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Re-score every run: MRR@10 on preference vs original qrels, 95% confidence intervals,
    Kendall's tau between the leaderboards, Figure 5."""
    from qrelkit.io.classes import read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.prefs.rescore import BOARD_COLUMNS, plot_rescore, rescore  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[runs, qrels, prefs, classes, perfect_qrels, config], outputs=[output, per_query_out, plot])
    cfg = common.config(config)
    table, fixed = _runs(runs, cfg, lenient)
    top1 = Top1Params.from_config(cfg, perfect_min_rel=perfect_min_rel, perfect=perfect_mode)
    kw = dict(measure=str(_v(cfg, "measure", measure)), rel=int(_v(cfg, "rel", rel)), perfect=perfect,
              perfect_min_rel=top1.perfect_min_rel, perfect_mode=top1.perfect, ci=str(_v(cfg, "ci", ci)),
              level=float(_v(cfg, "ci_level", level)), n_resamples=int(_v(cfg, "bootstrap_resamples")),
              seed=int(_v(cfg, "seed", seed)))
    res = rescore(table, read_qrels(qrels), read_qrels(prefs), classes=read_classes(classes) if classes else None,
                  perfect_qrels=read_qrels(perfect_qrels) if perfect_qrels else None, **kw)
    params = dict(runs=runs, qrels=qrels, prefs=prefs, classes=classes, perfect_qrels=perfect_qrels, config=cfg.source, **kw)
    out = _Outputs(params)
    out.add(output, res.leaderboard[BOARD_COLUMNS], "pref-leaderboard")
    out.add(per_query_out, res.per_query, "pref-per-query")
    out.write()
    if plot is not None:
        plot_rescore(res, plot)
    sm = res.summary
    repaired = common.report_repairs(fixed)
    if as_json:
        common.emit({"output": str(output), **sm, "repaired": repaired, "leaderboard": common.records(res.leaderboard)}, True)
        return
    common.stderr.print(f"{sm['runs']} runs on {sm['topics']} topics with preference qrels: Kendall's tau "
                        f"{sm['kendall_tau']:.3f} between the leaderboards ({res.ci} intervals, {res.level:.0%}) -> {output}")
    cols = ["run", "mrr_original", "ci_original_low", "ci_original_high", "mrr_prefs", "ci_prefs_low", "ci_prefs_high",
            "rank_original", "rank_prefs"]
    common.print_table(res.leaderboard[cols].round(4), title=f"{res.measure}: original vs preference qrels")


@app.command("single")
def single(
    runs: List[Path] = RunsArg,
    run: str = typer.Option(..., "--run", help="The ranker to check."),
    qrels: Path = typer.Option(..., "--qrels", "-q", help="The original qrels."),
    output: Path = typer.Option(..., "-o", "--output", help="Pairs (top vs qrel, or top vs second when they agree) for 'prefs tasks'."),
    categories_out: Optional[Path] = typer.Option(None, "--categories-out", help="Category table (A: qrel at first rank, B: not)."),
    judgments: List[Path] = typer.Option([], "--judgments", help="Judgments of these pairs: adds the outcome per category (repeatable)."),
    outcomes_out: Optional[Path] = typer.Option(None, "--outcomes-out", help="Outcome per category (with --judgments)."),
    min_rel: Optional[int] = typer.Option(None, "--min-rel", help="Grade of a known relevant passage (default: config [top1] perfect_min_rel)."),
    classes: Optional[Path] = ClassesOpt,
    lenient: Optional[bool] = LenientOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Single-ranker check ("better than perfect"): per topic the ranker's top passage vs the qrel,
    or vs its second passage when the top one is a qrel; category table and, with judgments, outcomes."""
    from qrelkit.io.classes import read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.prefs.single import SINGLE_SCHEMA, single_ranker_outcomes, single_ranker_pairs  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[runs, qrels, judgments, classes, config], outputs=[output, categories_out, outcomes_out])
    cfg = common.config(config)
    table, fixed = _runs(runs, cfg, lenient)
    mr = Top1Params.from_config(cfg, perfect_min_rel=min_rel).perfect_min_rel
    p, cats = single_ranker_pairs(table, read_qrels(qrels), run, min_rel=mr, classes=read_classes(classes) if classes else None)
    out = single_ranker_outcomes(p, _judgments(judgments)) if judgments else None
    if outcomes_out is not None and out is None:
        raise InputError("bad-option", "--outcomes-out needs --judgments")
    params = dict(runs=runs, run=run, qrels=qrels, min_rel=mr, classes=classes, judgments=judgments, config=cfg.source)
    outs = _Outputs(params)
    outs.add(output, p, "pref-pairs", SINGLE_SCHEMA)
    outs.add(categories_out, cats, "pref-single-categories")
    outs.add(outcomes_out, out, "pref-single-outcomes")
    outs.write()
    summary = {"output": str(output), "run": run, "pairs": len(p),
               "categories": common.records(cats)}
    if out is not None:
        summary["outcomes"] = common.records(out)
    common.report_repairs(fixed, summary)
    if as_json:
        common.emit(summary, True)
        return
    common.print_table(cats, title=f"single-ranker check of {run}: {len(p)} pairs -> {output}")
    if out is not None:
        common.print_table(out.round(4), title="outcomes")


@app.command("sparsify")
def sparsify(
    qrels: Path = typer.Argument(..., help="Dense graded qrels (e.g. a simulated campaign's hidden qrels)."),
    output: Path = typer.Option(..., "-o", "--output", help="Sparse qrels: TREC text, or .parquet."),
    per_topic: int = typer.Option(1, "--per-topic", help="Known relevant passages kept per topic."),
    min_rel: int = typer.Option(1, "--min-rel", help="Grade a passage needs to be kept."),
    best: bool = typer.Option(False, "--best", help="Draw among each topic's highest-graded passages only."),
    seed: Optional[int] = common.SeedOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """MS MARCO-style sparse labels for simulations: keep N random relevant passages per topic (seeded)."""
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.prefs.crowd import sparsify_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[qrels, config], outputs=[output])
    cfg = common.config(config)
    s = int(_v(cfg, "seed", seed))
    t = sparsify_qrels(read_qrels(qrels), per_topic=per_topic, min_rel=min_rel, best=best, seed=s)
    out = _Outputs(dict(qrels=qrels, per_topic=per_topic, min_rel=min_rel, best=best, seed=s))
    out.qrels(output, t)
    out.write()
    common.emit({"output": str(output), "qrels": t.num_rows, "topics": len(set(t["qid"].to_pylist()))}, as_json,
                f"kept {t.num_rows} qrels for {len(set(t['qid'].to_pylist()))} topics -> {output}")
