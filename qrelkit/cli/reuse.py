"""``qrelkit reuse``: reusability studies (leave-one-group-out and its variants) and their report."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional

import pandas as pd
import typer

from qrelkit.cli import common
from qrelkit.cli.runs import RunsArg, load_runs
from qrelkit.errors import InputError

app = typer.Typer(help="Reusability studies: leave-one-group-out simulation and its report.", no_args_is_help=True)

def _opt(cfg, key: str, override=None):
    """A [reuse] value: the flag, else the config's, else the schema's default (qrelkit.config)."""
    return cfg.get_value("reuse", key, override)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name) or "_"


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
    orphan_depth: Optional[int] = typer.Option(None, "--orphan-depth", help="Depth D for --orphans retrieved (default 100)."),
    removal: Optional[str] = typer.Option(None, "--removal", help="remove (default) or unjudged (grade -1) the unique judged documents; same scores, different --qrels-out."),
    measure: List[str] = typer.Option([], "--measure", help="ir-measures string (repeatable; default: AP, nDCG@10, P@10, Bpref, Judged@10)."),
    missing: Optional[str] = typer.Option(None, "--missing", help="Judged topics missing from a run: zero (default) / skip / error."),
    relevant: Optional[str] = typer.Option(None, "--relevant", help="Relevant grades for binary measures, counts and density: a scheme (passage, document, '>=2') or a level (default: config [eval] relevant, else 1)."),
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
    common.check_io(inputs=[runs, qrels, manifest, pool, run_depth, topics, classes, official, config], folders=[output, qrels_out])
    from qrelkit.cli.eval import _relevance
    from qrelkit.io.classes import read_classes
    from qrelkit.io.manifest import read_manifest
    from qrelkit.io.qrels import read_qrels, write_qrels
    from qrelkit.io.tables import read_metadata, read_table
    from qrelkit.io.topics import read_topics
    from qrelkit.reuse import DEFAULT_MEASURES, leave_out, reduced_qrels, write_report

    cfg = common.config(config)
    proc = str(_opt(cfg, "procedure", procedure))
    uniq = str(_opt(cfg, "uniqueness", uniqueness))
    orph = str(_opt(cfg, "orphans", orphans))
    odepth = int(_opt(cfg, "orphan_depth", orphan_depth))
    rem = str(_opt(cfg, "removal", removal))
    ms = list(measure) if measure else list(_opt(cfg, "measures") or DEFAULT_MEASURES)
    pol = str(cfg.get_value("eval", "missing", missing))
    rel = _relevance(cfg, relevant)
    dens = float(_opt(cfg, "density_threshold"))
    vshare = float(_opt(cfg, "voorhees_relevant_share"))

    man = read_manifest(manifest) if manifest else None
    q = read_qrels(qrels)
    pool_t, pool_meta = None, {}
    if pool is not None:
        pool_t = read_table(pool)
        if "runs" not in pool_t.column_names:
            raise InputError("missing-column", "not a pool table (no provenance column 'runs')", file=str(pool))
        if pool.suffix == ".parquet":
            pool_meta = read_metadata(pool).get("params", {}) or {}
    k = depth if depth is not None else pool_meta.get("depth") or cfg.get_value("pool", "depth")
    k = int(k)
    per_run = None
    if run_depth:
        from qrelkit.io.manifest import read_run_depths

        per_run = read_run_depths(run_depth)
    elif pool_meta.get("per_run_depth"):
        per_run = {str(a): int(b) for a, b in pool_meta["per_run_depth"].items()}
    # ranks for recomputed provenance follow the pool's tie rule (else the config's)
    ties = str(pool_meta.get("ties") or cfg.get_value("pool", "ties"))
    rs = load_runs(runs, cfg, manifest=manifest, lenient=lenient, ties=ties)
    table = rs.table

    # which runs were pooled: stated in the report
    pooled = None
    if all_pooled:
        source = "every run counts as pooled (--all-pooled)"
        pooled = rs.runs
    elif man is not None and "pooled" in man.columns:
        source = "the manifest's pooled column"
    elif pool_meta.get("pooled_runs"):
        pooled = [str(r) for r in pool_meta["pooled_runs"]]
        source = f"the pool's parameters ({pool})"
    elif man is not None:
        from qrelkit.cli.pool import pooled_selection

        sel = pooled_selection(cfg, man)
        pooled = sel.loc[sel["pooled"], "run"].tolist()
        source = "the config's pool-run selection (as 'qrelkit pool select')"
    else:
        source = "no manifest: every run counts as pooled and is its own group"
    off = None
    if official is not None:
        off = read_table(official)
    with common.progress("leave-out: scoring") as advance:
        res = leave_out(
            table, q, man, procedure=proc, uniqueness=uniq, pooled=pooled, depth=k, per_run_depth=per_run, pool=pool_t,
            classes=read_classes(classes) if classes else None, orphans=orph, orphan_depth=odepth, removal=rem,
            measures=ms, missing=pol, rel=rel, topics=read_topics(topics)["qid"].tolist() if topics else None,
            official=off, density_threshold=dens, voorhees_share=vshare, workers=workers,
            ranking=str(cfg.get_value("eval", "ranking")), progress=advance,
        )
    res.notes.insert(1, f"Pooled runs: {source}.")
    if official is not None:
        res.notes.append(f"Official scores read from {official}.")
    params = {"runs_input": [str(r) for r in runs], "qrels": str(qrels), "manifest": str(manifest) if manifest else None,
              "pool": str(pool) if pool else None, "classes": str(classes) if classes else None,
              "topics_file": str(topics) if topics else None, "pooled_source": source, "ties": ties, "config": cfg.source}
    written = write_report(res, output, title=title, params=params)
    if qrels_out is not None:
        for u in res.units["unit"].to_pylist():
            path = qrels_out / f"qrels-{_safe(u)}.txt"
            write_qrels(reduced_qrels(q, res.removed, u, rem), path)
            written[f"qrels-{_safe(u)}.txt"] = str(path)
    summary = res.summary.to_pandas()
    repaired = common.report_repairs(rs.repairs())
    if as_json:
        def records(df: pd.DataFrame) -> list[dict]:  # NaN (e.g. tau of a constant leaderboard) -> null
            return df.astype(object).where(df.notna(), None).to_dict(orient="records")

        common.emit({"output": str(output), "params": res.params, "pooled_source": source,
                     "summary": records(summary), "notes": res.notes,
                     "units": records(res.units.to_pandas().drop(columns=["run_names"])),
                     "topics_dl_flag": int(pa_sum(res.topics["dl_flag"])),
                     "topics_voorhees_flag": int(pa_sum(res.topics["voorhees_flag"])),
                     "files": sorted(written), "repaired": repaired}, True)
        return
    for line in res.notes:
        common.stderr.print(line)
    show = summary[["measure", "mean_abs_diff", "max_abs_diff", "mean_abs_pct_diff", "max_abs_pct_diff",
                    "max_rank_drop", "runs_rank_changed", "kendall_tau", "tau_ap"]].round(4)
    common.print_table(show, title=f"{res.params['procedure']}-out: {res.params['units']} units, "
                                   f"{res.params['runs']} runs, {res.params['topics']} topics")
    common.stderr.print(f"report -> {Path(output) / 'report.html'}")


def pa_sum(col) -> int:
    import pyarrow.compute as pc

    return pc.sum(col).as_py() or 0
