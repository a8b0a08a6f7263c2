"""``qrelkit reuse``: reusability studies (leave-one-group-out and its variants) and their report."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from qrelkit.cli import HELP, common
from qrelkit.cli.runs import RunsArg, load_runs
from qrelkit.evaluate.params import EvalParams
from qrelkit.labels.params import LabelsParams
from qrelkit.reuse.params import ReuseParams

app = typer.Typer(help=HELP["reuse"], no_args_is_help=True)


def _optional_inputs(classes: Optional[Path], topics: Optional[Path], official: Optional[Path]) -> dict:
    """:func:`qrelkit.reuse.leave_out`'s optional inputs, read (None when not given): the classes,
    the topics kept, the official scores."""
    from qrelkit.io.classes import read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import read_table  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.topics import read_topics  # lazy: pyarrow, pandas; `--help` stays fast
    return {"classes": read_classes(classes) if classes else None,
            "topics": read_topics(topics)["qid"].tolist() if topics else None,
            "official": read_table(official) if official is not None else None}


@app.command("leave-out")
def leave_out_cmd(
    runs: List[Path] = RunsArg,
    qrels: Path = typer.Option(..., "--qrels", "-q", help="Official qrels (TREC text, .gz, or Parquet)."),
    output: Path = typer.Option(..., "-o", "--output", help="Report folder: report.md, report.html, PNG plots, tables (.parquet and .csv)."),
    manifest: Optional[Path] = typer.Option(None, "--manifest", "-m", help="Manifest (CSV/TOML): run, group; optional pooled (true/false) and type. Without: each run is its own group."),
    pool: Optional[Path] = typer.Option(None, "--pool", help="Pool table from 'qrelkit pool depth' (.parquet): its provenance gives the pooled runs' contributions, its parameters the depths."),
    depth: Optional[int] = typer.Option(None, "--depth", "-k", help="Pool depth for recomputed provenance and the 'submitted' definition (default: the pool's, else config [pool] depth)."),
    run_depth: Optional[Path] = typer.Option(None, "--run-depth", help="CSV run,depth: per-run pool depths."),
    procedure: Optional[str] = typer.Option(None, "--procedure", help="group (leave-one-group-out, default) / run / type (manifest column 'type')."),
    uniqueness: Optional[str] = typer.Option(None, "--uniqueness", help="'Only it contributed' through the pooled runs (pooled, default) or through all submitted runs at the pool depth (submitted)."),
    orphans: Optional[str] = typer.Option(None, "--orphans", help="Judged documents no run contributed (CAL, fractional, propagation): shared (never removed, default) or retrieved (attributed to the runs that retrieved them within --orphan-depth)."),
    orphan_depth: Optional[int] = typer.Option(None, "--orphan-depth", help=f"Depth D for --orphans retrieved (default: {common.default_of('reuse', 'orphan_depth')})."),
    removal: Optional[str] = typer.Option(None, "--removal", help="remove (default) or unjudged (grade -1) the unique judged documents; same scores, different --qrels-out."),
    measure: List[str] = typer.Option([], "--measure", help="ir-measures string (repeatable; default: AP, nDCG@10, P@10, Bpref, Judged@10)."),
    missing: Optional[str] = typer.Option(None, "--missing", help="Judged topics missing from a run: zero (default) / skip / error."),
    relevant: Optional[str] = typer.Option(None, "--relevant", help="Relevant grades for binary measures, counts and density: a scheme (passage, document, '>=2') or a level (default: config [eval] relevant; none: grade 1 and above)."),
    topics: Optional[Path] = typer.Option(None, "--topics", "-t", help="Study only these topics (topics file)."),
    classes: Optional[Path] = typer.Option(None, "--classes", help="Near-duplicate classes: dedupe runs and compare documents by class id (as a class pool)."),
    all_pooled: bool = typer.Option(False, "--all-pooled", help="Treat every run as pooled (default: the manifest's pooled column, else the pool's pooled runs, else the config's selection)."),
    official: Optional[Path] = typer.Option(None, "--official", help="Official scores (run, measure, value; e.g. 'eval score --summary-out') computed with the same qrels and settings: skips the official scoring."),
    qrels_out: Optional[Path] = typer.Option(None, "--qrels-out", help="Also write each unit's reduced qrels (TREC text) into this folder."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Scoring processes (default: 2 for large inputs, else 1); results do not depend on it."),
    title: Optional[str] = typer.Option(None, "--title", help="Report title."),
    lenient: Optional[bool] = typer.Option(None, "--lenient/--strict", help="Repair run defects instead of failing."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Leave-one-group-out (or -run-, -type-out) simulation: remove the judged documents only the
    left-out unit contributed, re-score that unit's runs (pooled or not), and write the report
    (per run, per measure, per topic; plots) an organizer publishes."""
    from qrelkit.io.manifest import read_manifest  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[runs, qrels, manifest, pool, run_depth, topics, classes, official, config], folders=[output, qrels_out])
    from qrelkit.reuse import leave_out, write_report  # lazy: ir_measures (and a process pool); `--help` stays fast
    from qrelkit.reuse.study import leave_out_options, pool_setting, pooled_runs, write_reduced_qrels  # lazy: ir_measures
    cfg = common.config(config)
    rp = ReuseParams.from_config(cfg, procedure=procedure, uniqueness=uniqueness, orphans=orphans,
                                 orphan_depth=orphan_depth, removal=removal, measures=list(measure or ()) or None)
    opts = leave_out_options(rp, EvalParams.from_config(cfg, missing=missing, relevant=relevant), LabelsParams.from_config(cfg))
    man = read_manifest(manifest) if manifest else None
    q = read_qrels(qrels)
    ps = pool_setting(cfg, pool, depth=depth, run_depth=run_depth)
    rs = load_runs(runs, cfg, manifest=manifest, lenient=lenient, ties=ps.ties)
    pooled, source = pooled_runs(rs.runs, man, ps.params, cfg, all_pooled=all_pooled, pool_name=str(pool))
    with common.progress("leave-out: scoring") as advance:
        res = leave_out(rs.table, q, man, pooled=pooled, depth=ps.depth, per_run_depth=ps.per_run_depth, pool=ps.table,
                        **_optional_inputs(classes, topics, official), workers=workers, progress=advance, **opts)
    res.notes.insert(1, f"Pooled runs: {source}.")
    if official is not None:
        res.notes.append(f"Official scores read from {official}.")
    params = {"runs_input": [str(r) for r in runs], "qrels": str(qrels), "manifest": str(manifest) if manifest else None,
              "pool": str(pool) if pool else None, "classes": str(classes) if classes else None,
              "topics_file": str(topics) if topics else None, "pooled_source": source, "ties": ps.ties, "config": cfg.source}
    written = write_report(res, output, title=title, params=params)
    if qrels_out is not None:
        written.update(write_reduced_qrels(q, res, qrels_out, opts["removal"]))
    repaired = common.report_repairs(rs.repairs())
    if as_json:
        common.emit(_json_summary(res, output, source, written, repaired), True)
        return
    for line in res.notes:
        common.stderr.print(line)
    show = res.summary.to_pandas()[["measure", "mean_abs_diff", "max_abs_diff", "mean_abs_pct_diff", "max_abs_pct_diff",
                                    "max_rank_drop", "runs_rank_changed", "kendall_tau", "tau_ap"]].round(4)
    common.print_table(show, title=f"{res.params['procedure']}-out: {res.params['units']} units, "
                                   f"{res.params['runs']} runs, {res.params['topics']} topics")
    common.stderr.print(f"report -> {Path(output) / 'report.html'}")


def _json_summary(res, output: Path, source: str, written: dict, repaired: dict) -> dict:
    """The ``--json`` report of a leave-out study (NaN, e.g. tau of a constant leaderboard, -> null)."""
    return {"output": str(output), "params": res.params, "pooled_source": source,
            "summary": common.records(res.summary.to_pandas()), "notes": res.notes,
            "units": common.records(res.units.to_pandas().drop(columns=["run_names"])),
            "topics_dl_flag": int(pa_sum(res.topics["dl_flag"])),
            "topics_voorhees_flag": int(pa_sum(res.topics["voorhees_flag"])),
            "files": sorted(written), "repaired": repaired}


def pa_sum(col) -> int:
    """The sum of a numeric Arrow column (0 when empty)."""
    import pyarrow.compute as pc  # lazy: pyarrow; `--help` stays fast
    return pc.sum(col).as_py() or 0
