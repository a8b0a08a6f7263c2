"""``qrelkit runs``: validate and canonicalize submitted runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from qrelkit.cli import HELP, common
from qrelkit.io.params import RunsParams

if TYPE_CHECKING:  # names for annotations only: importing them loads pyarrow and pandas
    from qrelkit.io.runs import RunSet

app = typer.Typer(help=HELP["runs"], no_args_is_help=True)

RunsArg = typer.Argument(..., help="Run files (TREC text, .gz, Parquet) or folders of them.")


def load_runs(runs: List[Path], cfg, *, lenient: Optional[bool] = None, max_depth: Optional[int] = None,
              expected_depth: Optional[int] = None, **options) -> RunSet:
    """:func:`qrelkit.io.runsets.load_runs` with the config's ``[runs]`` (the flags given win:
    :class:`~qrelkit.io.params.RunsParams`) and a progress bar on stderr; ``options`` are its
    other keyword arguments."""
    from qrelkit.io import runsets  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.runs import expand_sources  # lazy: pyarrow, pandas; `--help` stays fast
    params = RunsParams.from_config(cfg, lenient=lenient, max_depth=max_depth, expected_depth=expected_depth)
    paths = expand_sources(runs)
    with common.progress("reading runs", len(paths)) as advance:
        return runsets.load_runs(paths, params, progress=advance, **options)


@app.command("validate")
def validate(
    runs: List[Path] = RunsArg,
    manifest: Optional[Path] = typer.Option(None, "--manifest", "-m", help="Manifest (CSV/TOML): known runs, file -> run."),
    topics: Optional[Path] = typer.Option(None, "--topics", "-t", help="Topics file: other topics are errors."),
    max_depth: Optional[int] = typer.Option(None, "--max-depth", help="Most documents allowed per topic."),
    expected_depth: Optional[int] = typer.Option(None, "--expected-depth", help="Warn on topics with fewer documents."),
    lenient: Optional[bool] = typer.Option(None, "--lenient/--strict", help="Repair and report instead of failing."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the issues table (.csv/.tsv/.parquet/.jsonl)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Check runs against every rule; print a per-run table and the issues found.

    Strict (default): the first error stops with FILE:LINE: [rule] and exit code 2.
    Lenient: repairs what can be repaired and reports counts per rule.
    """
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[runs, manifest, topics, config], outputs=[output])
    cfg = common.config(config)
    rs = load_runs(runs, cfg, manifest=manifest, topics=topics, lenient=lenient, max_depth=max_depth,
                   expected_depth=expected_depth)
    if output is not None:
        write_table(_issues_table(rs), output, kind="run-issues", params={"runs": [str(r) for r in runs]})
    summary = {
        "runs": len(rs.summary),
        "documents": rs.table.num_rows,
        "errors": int(rs.errors()["count"].sum()) if len(rs.issues) else 0,
        "per_run": rs.summary.drop(columns=["file"]).to_dict(orient="records"),
        "issues": common.records(rs.issues),
    }
    common.report_repairs(rs.repairs(), summary)
    if as_json:
        common.emit(summary, True)
        return
    common.print_table(rs.summary.drop(columns=["file"]), title="Runs")
    if len(rs.issues):
        common.print_table(rs.issues[["run", "rule", "severity", "count", "line", "message", "repair"]], title="Issues")
    else:
        common.stdout.print("No issues.")


def _issues_table(rs: RunSet):
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    df = rs.issues.copy()
    df["line"] = df["line"].astype("float").astype("Int64")
    return pa.Table.from_pandas(df, preserve_index=False)


@app.command("canonicalize")
def canonicalize(
    runs: List[Path] = RunsArg,
    output: Path = typer.Option(..., "-o", "--output", help="Output: .parquet (all runs) or a TREC text file."),
    manifest: Optional[Path] = typer.Option(None, "--manifest", "-m", help="Manifest (CSV/TOML): known runs, file -> run."),
    topics: Optional[Path] = typer.Option(None, "--topics", "-t", help="Topics file: other topics are errors."),
    lenient: Optional[bool] = typer.Option(None, "--lenient/--strict", help="Repair and report instead of failing."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Write runs in canonical order (score desc, docid desc) with recomputed ranks."""
    from qrelkit.io.runs import write_trec_run  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[runs, manifest, topics, config], outputs=[output])
    cfg = common.config(config)
    rs = load_runs(runs, cfg, manifest=manifest, topics=topics, lenient=lenient)
    if output.suffix == ".parquet":
        write_table(rs.table, output, kind="runs", params={"runs": [str(r) for r in runs], "lenient": bool(lenient)})
    else:
        write_trec_run(rs.table, output)
    summary = {"runs": len(rs.summary), "documents": rs.table.num_rows, "output": str(output)}
    common.report_repairs(rs.repairs(), summary)
    common.emit(summary, as_json,
                f"wrote {rs.table.num_rows} lines of {len(rs.summary)} runs to {output}")
