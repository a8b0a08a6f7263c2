"""``qrelkit campaign``: init | run | import | status | report — a thin roof over
:class:`qrelkit.campaign.Campaign`."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pandas as pd
import pyarrow as pa
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from qrelkit.cli import common
from qrelkit.errors import InputError
from qrelkit.io.tables import write_table

app = typer.Typer(help="Run a whole judging campaign from one folder and its store.", no_args_is_help=True)

DirArg = typer.Argument(..., help="The campaign folder (holds campaign.db and every artefact).")


@app.command("init")
def init(
    directory: Path = DirArg,
    corpus: Path = typer.Option(..., "--corpus", help="The passage corpus (JSONL, TSV or Parquet)."),
    topics: Path = typer.Option(..., "--topics", "-t", help="Topics (qid<TAB>text)."),
    runs: Path = typer.Option(..., "--runs", help="Folder (or file) of submitted runs."),
    manifest: Path = typer.Option(..., "--manifest", "-m", help="Manifest of the runs (CSV/TOML)."),
    qrels: Optional[Path] = typer.Option(None, "--qrels", "-q", help="Judgments made before the campaign."),
    lenient: Optional[bool] = typer.Option(None, "--lenient/--strict", help="Repair run defects instead of failing (default: config)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Validate every input and create the campaign: its store records each input (path, size,
    sha256) and the effective configuration. An existing campaign is never re-initialized."""
    common.check_io(inputs=[corpus, topics, runs, manifest, qrels, config], folders=[directory])
    from qrelkit.campaign import Campaign  # lazy: it loads numba (cal, dedupe kernels); `--help` stays fast

    with common.progress("validating inputs", None):
        c = Campaign.init(directory, config=config, corpus=corpus, topics=topics, runs=runs, manifest=manifest,
                          qrels=qrels, lenient=lenient)
    st = c.status()
    common.emit({"campaign": str(directory), "topics": len(st)}, as_json,
                f"campaign of {len(st)} topics created in {directory}")


@app.command("run")
def run(
    directory: Path = DirArg,
    oracle: Optional[Path] = typer.Option(None, "--oracle", help="Hidden qrels: a simulated assessor answers every batch."),
    error_rate: float = typer.Option(0.0, "--error-rate", help="Probability the simulated assessor gives another grade."),
    until: Optional[str] = typer.Option(None, "--until", help="Stop after this stage."),
    seed: Optional[int] = common.SeedOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Advance every topic as far as the judgments allow, and stop: done, or waiting for
    judgments (the batches out, for whom, and their files under DIR/batches/)."""
    common.check_io(inputs=[oracle], stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign import Campaign  # lazy: it loads numba (cal, dedupe kernels); `--help` stays fast

    with stage_progress(common.stderr) as say:  # the stage (and CAL round) at work, on a terminal's stderr
        res = Campaign(directory).run(oracle=oracle, error_rate=error_rate, seed=seed, until=until, progress=say)
    if as_json:
        common.emit(res, True)
        return
    common.stderr.print(f"{res['state']}; stages done: {', '.join(res['stages_done']) or 'none'}; topics: "
                        f"{res['topics']}", markup=False, highlight=False)
    if res["waiting"]:
        common.print_table(pd.DataFrame(res["waiting"]), title="Batches out")


@contextlib.contextmanager
def stage_progress(console: Console) -> Iterator[Callable[[str], None] | None]:
    """A rich progress bar on ``console`` when it is a terminal (else nothing: the output stays
    clean): one step per stage this run will do, described by the stage at work and, in the CAL
    stage, its round. Yields the runner's progress callback (None without a terminal)."""
    if not console.is_terminal:
        yield None
        return
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task("campaign", total=None)
        stage = ["campaign"]

        def say(message: str) -> None:
            m = _STAGE.match(message)  # "stage NAME (k/n)", from the runner
            if m:
                stage[0] = m.group(1)
                bar.update(task, description=f"stage {stage[0]}", completed=int(m.group(2)) - 1, total=int(m.group(3)))
            else:  # within a stage: "CAL round 3: 12 topic(s)", ...
                bar.update(task, description=f"stage {stage[0]}: {message}")

        yield say


_STAGE = re.compile(r"^stage (\S+) \((\d+)/(\d+)\)$")


@app.command("import")
def import_(
    directory: Path = DirArg,
    files: List[Path] = typer.Argument(..., help="Completed batch files or judgments tables (CSV, TSV, JSONL, Parquet)."),
    lenient: bool = typer.Option(False, "--lenient", help="Skip conflicting and bad rows (counted) instead of failing."),
    as_json: bool = common.JsonOpt,
) -> None:
    """Import assessors' judgments (idempotent; conflicting grades are reported)."""
    common.check_io(inputs=files, stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign import Campaign  # lazy: it loads numba (cal, dedupe kernels); `--help` stays fast

    rep = Campaign(directory).import_judgments(files, lenient=lenient)
    common.emit({"imported": rep.imported, "counts": rep.counts, "conflicts": len(rep.conflicts)}, as_json,
                f"imported {rep.imported} judgments; {rep.counts}")


@app.command("status")
def status(
    directory: Path = DirArg,
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Also write the table (.csv, .tsv, .jsonl, .parquet)."),
    as_json: bool = common.JsonOpt,
) -> None:
    """Per topic: stage, judged, relevant, density, screening decision, CAL thread states,
    stopping decision and rule, batches out."""
    common.check_io(outputs=[output], read_stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign import Campaign  # lazy: it loads numba (cal, dedupe kernels); `--help` stays fast

    df = Campaign(directory).status()
    if output is not None:
        write_table(pa.Table.from_pandas(df, preserve_index=False), output, kind="campaign-status", params={})
    if as_json:
        common.emit({"topics": common.records(df)}, True)
    else:
        common.print_table(df, title=f"campaign {directory}")


@app.command("report")
def report(
    directory: Path = DirArg,
    output: Path = typer.Option(..., "-o", "--output", help="The report (.html; its Markdown twin .md is written beside it)."),
    as_json: bool = common.JsonOpt,
) -> None:
    """One self-contained HTML report (figures embedded) and its Markdown twin."""
    common.check_io(outputs=[output, output.with_suffix(".md")], read_stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign import Campaign  # lazy: it loads numba (cal, dedupe kernels); `--help` stays fast

    if output.suffix.lower() not in (".html", ".htm", ".md"):
        raise InputError("unknown-format", "the report is .html (with its .md twin) or .md", file=str(output))
    written = Campaign(directory).report(output)
    common.emit({"written": [str(p) for p in written]}, as_json, "report -> " + ", ".join(str(p) for p in written))
