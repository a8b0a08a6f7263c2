"""``qrelkit campaign``: init | run | import | status | report | assessor add/revoke/list — a thin
roof over :class:`qrelkit.campaign.Campaign` (and the web app's accounts,
:mod:`qrelkit.campaign.accounts`)."""

from __future__ import annotations

import contextlib
import re
import sys
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from qrelkit.cli import HELP, common
from qrelkit.config import CAMPAIGN_STAGES
from qrelkit.errors import InputError
from qrelkit.config import format_value

app = typer.Typer(help=HELP["campaign"], no_args_is_help=True)

DirArg = typer.Argument(..., help="The campaign folder (holds campaign.db and every artefact).")


@app.command("init")
@common.examples(
    "qrelkit campaign init camp -c configs/trec-dl-2022.toml --corpus corpus.jsonl -t topics.tsv --runs runs/ -m manifest.csv",
)
def init(
    directory: Path = DirArg,
    corpus: Path = typer.Option(..., "--corpus", help="The passage corpus: a file (JSONL, TSV or Parquet, optionally .gz), a folder of shards, or irds:DATASET."),
    topics: Path = typer.Option(..., "--topics", "-t", help="Topics (qid<TAB>text)."),
    runs: Path = typer.Option(..., "--runs", help="Folder (or file) of submitted runs."),
    manifest: Path = typer.Option(..., "--manifest", "-m", help="Manifest of the runs (CSV/TOML)."),
    qrels: Optional[Path] = typer.Option(None, "--qrels", "-q", help="Judgments made before the campaign."),
    lenient: Optional[bool] = typer.Option(None, "--lenient/--strict", help="Repair run defects instead of failing (default: config)."),
    force: bool = typer.Option(False, "--force", help="Adopt an existing folder that holds other files (they are kept; "
                               "none may have a name the campaign writes)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Validate every input and create the campaign: its store records each input (path, size,
    sha256) and the effective configuration. An existing campaign is never re-initialized; the
    folder must be new or empty (--force adopts one that is not)."""
    common.check_io(inputs=[corpus, topics, runs, manifest, qrels, config], folders=[directory])
    from qrelkit.campaign import Campaign  # lazy: it loads numba (cal, dedupe kernels); `--help` stays fast

    with common.progress("validating inputs", None):
        c = Campaign.init(directory, config=config, corpus=corpus, topics=topics, runs=runs, manifest=manifest,
                          qrels=qrels, lenient=lenient, force=force)
    st = c.status()
    common.emit({"campaign": str(directory), "topics": len(st)}, as_json,
                f"campaign of {len(st)} topics created in {directory}")


@app.command("run")
@common.examples(
    "qrelkit campaign run camp",
    "qrelkit campaign run camp --oracle hidden-qrels.txt --error-rate 0.05 --seed 7",
    "qrelkit campaign run camp --until pool",
)
def run(
    directory: Path = DirArg,
    oracle: Optional[Path] = typer.Option(None, "--oracle", help="Hidden qrels: a simulated assessor answers every batch."),
    error_rate: float = typer.Option(0.0, "--error-rate", help="Probability the simulated assessor gives another grade."),
    until: Optional[str] = typer.Option(None, "--until", help="Stop after this stage: " + ", ".join(CAMPAIGN_STAGES) + "."),
    seed: Optional[int] = common.SeedOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Advance every topic as far as the judgments allow, and stop: done, or waiting for
    judgments (the batches out, for whom, and their files under DIR/batches/)."""
    import pandas as pd  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[oracle], stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign import Campaign  # lazy: it loads numba (cal, dedupe kernels); `--help` stays fast

    with stage_progress(common.stderr) as say:  # the stage at work (numba compiling: said by qrelkit.cli.run)
        res = Campaign(directory).run(oracle=oracle, error_rate=error_rate, seed=seed, until=until, progress=say,
                                      on_wait=lambda msg: common.stderr.print(msg, markup=False, highlight=False))
    if as_json:
        common.emit(res, True)
        return
    common.stderr.print(f"{res['state']}; stages done: {', '.join(res['stages_done']) or 'none'}; topics: "
                        f"{res['topics']}", markup=False, highlight=False, soft_wrap=True)
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
@common.examples("qrelkit campaign import camp camp/batches/*.csv")
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
@common.examples("qrelkit campaign status camp -o status.csv")
def status(
    directory: Path = DirArg,
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Also write the table (.csv, .tsv, .jsonl, .parquet)."),
    as_json: bool = common.JsonOpt,
) -> None:
    """Per topic: stage, judged, relevant, density, screening decision, CAL thread states,
    stopping decision and rule, batches out; then why the campaign waits: the batches out and
    who owes how many items (and batches nobody can judge in the web app), an input gone or
    changed, the last run's failure, another process at work — each with what to do. Changes
    nothing."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(outputs=[output], read_stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign import Campaign, check_outputs  # lazy: it loads numba (cal, dedupe kernels); `--help` stays fast

    check_outputs(directory, [output])
    c = Campaign(directory)
    df, health = c.status(), c.health()
    if output is not None:
        write_table(pa.Table.from_pandas(df, preserve_index=False), output, kind="campaign-status", params={})
    if as_json:
        common.emit({"topics": common.records(df), **health}, True)
    else:
        common.print_table(df, title=f"campaign {directory}")
        _print_health(health)


def _print_health(h: dict) -> None:
    """The batches out (who owes how many items, with notes), each topic's budgeted judging (with
    an [adjudicate] strategy), then every problem and what to do, then the campaign's state in one
    sentence."""
    import pandas as pd  # lazy: pyarrow, pandas; `--help` stays fast
    if h["owed"]:
        owed = pd.DataFrame(h["owed"])
        common.print_table(owed[["qid", "batch_id", "kind", "assessor", "owed", "items", "file"]], title="Batches out")
        for note in dict.fromkeys(n for n in owed["note"] if n):
            common.stdout.print("note: " + note, markup=False, highlight=False, soft_wrap=True)
    if h.get("adjudication"):
        common.print_table(pd.DataFrame(h["adjudication"]), title="Judging in the adjudication order (pool-rest)")
    for p in h["inputs"]:
        common.stdout.print(f"{p['message']}\n  to do: {p['todo']}", markup=False, highlight=False, soft_wrap=True)
    if h["failure"]:
        f = h["failure"]
        common.stdout.print(f"last run failed ({f['by']}, {f['time']}, stage {f['stage']}): {f['message']}\n  to do: "
                            f"{f['todo']}", markup=False, highlight=False, soft_wrap=True)
    common.stdout.print(h["summary"], markup=False, highlight=False, soft_wrap=True)


@app.command("report")
@common.examples("qrelkit campaign report camp -o report.html")
def report(
    directory: Path = DirArg,
    output: Path = typer.Option(..., "-o", "--output", help="The report (.html; its Markdown twin .md is written beside it)."),
    force: bool = typer.Option(False, "--force", help="Let the Markdown twin replace a file that is not a campaign report."),
    as_json: bool = common.JsonOpt,
) -> None:
    """One self-contained HTML report (figures embedded) and its Markdown twin (which never
    replaces a file that is not a campaign report, unless --force)."""
    outputs = [output] + ([output.with_suffix(".md")] if output.suffix.lower() != ".md" else [])
    common.check_io(outputs=outputs, read_stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign import Campaign, check_outputs  # lazy: it loads numba (cal, dedupe kernels); `--help` stays fast

    if output.suffix.lower() not in (".html", ".htm", ".md"):
        raise InputError("unknown-format", "the report is .html (with its .md twin) or .md", file=str(output))
    check_outputs(directory, outputs)
    written = Campaign(directory).report(output, force=force)
    common.emit({"written": [str(p) for p in written]}, as_json, "report -> " + ", ".join(str(p) for p in written))


@app.command("adopt-config")
@common.examples(
    "qrelkit campaign adopt-config camp --dry-run   # what changed, and whether each change can be adopted",
    "qrelkit campaign adopt-config camp",
)
def adopt_config(
    directory: Path = DirArg,
    dry_run: bool = typer.Option(False, "--dry-run", help="List the changes and whether each can be adopted; change nothing."),
    as_json: bool = common.JsonOpt,
) -> None:
    """Adopt the values changed in the campaign's protocol file since init for the stages not run
    yet: refused (nothing changed) when a stage that reads a changed key is done or started. Then
    the file's effective configuration is the campaign's."""
    import pandas as pd  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign import Campaign  # lazy: it loads numba (cal, dedupe kernels); `--help` stays fast

    res = Campaign(directory).adopt_config(dry_run=dry_run)
    if as_json:
        common.emit(res, True)
        return
    rows = [{"key": f"[{c['section']}] {c['key']}", "old": format_value(c["old"]), "new": format_value(c["new"]),
             "read by": ", ".join(c["stages"]) or "no stage", "adoptable": f"no: {c['refused']}" if c["refused"] else "yes"}
            for c in res["changes"]]
    if rows:
        common.print_table(pd.DataFrame(rows), title="changed values")
    what = "adopted" if res["adopted"] else "nothing adopted (--dry-run)"
    common.stderr.print(f"{len(rows)} changed value(s); {what}", markup=False, highlight=False)


@app.command("export")
@common.examples(
    "qrelkit campaign export camp -o judged.txt   # then: qrelkit campaign init camp2 ... --qrels judged.txt",
)
def export(
    directory: Path = DirArg,
    output: Path = typer.Option(..., "-o", "--output", help="Qrels: TREC text (any name) or .parquet."),
    force: bool = typer.Option(False, "--force", help="Write the qrels even when there is no judgment and the output "
                               "holds rows."),
    as_json: bool = common.JsonOpt,
) -> None:
    """Export every judgment in force as qrels, one grade per topic and passage by [campaign]
    combine: give them to a new campaign ('campaign init ... --qrels FILE') so that it does not
    ask for them again."""
    from qrelkit.io.qrels import write_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(outputs=[output], read_stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign import Campaign, check_outputs  # lazy: it loads numba (cal, dedupe kernels); `--help` stays fast

    check_outputs(directory, [output])
    table = Campaign(directory).judged_qrels()
    common.refuse_empty_result([output], "the campaign holds no judgment yet" if table.num_rows == 0 else None,
                               force=force)
    if output.name.lower().endswith(".parquet"):
        write_table(table, output, kind="qrels", params={"campaign": str(directory)})
    else:
        write_qrels(table, output)
    topics = len(set(table["qid"].to_pylist()))
    common.emit({"output": str(output), "rows": table.num_rows, "topics": topics}, as_json,
                f"wrote {table.num_rows} judged passages over {topics} topics -> {output}")


assessor_app = typer.Typer(help="Accounts of the campaign's web app (qrelkit serve): login links for assessors "
                           "and organizers.", no_args_is_help=True)
app.add_typer(assessor_app, name="assessor")


@assessor_app.command("add")
@common.examples("qrelkit campaign assessor add camp ann", "qrelkit campaign assessor add camp boss --organizer",
                 "qrelkit campaign assessor add camp ann --renew")
def assessor_add(
    directory: Path = DirArg,
    name: str = typer.Argument(..., help="The account name (judgments are recorded under it)."),
    topics: Optional[str] = typer.Option(None, "--topics", help="Comma-separated topics this account may see (default: "
                                         "its assigned ones)."),
    organizer: bool = typer.Option(False, "--organizer", help="An organizer account (status, agreement, report, export)."),
    base_url: str = typer.Option("http://127.0.0.1:8765", "--base-url", help="Where assessors reach the server (the "
                                 "link's start; behind a reverse proxy, its public address)."),
    renew: bool = typer.Option(False, "--renew", help="A new link for an existing account (its old link stops "
                               "working; its role, topics and sessions stay)."),
    as_json: bool = common.JsonOpt,
) -> None:
    """Create an account and print its login link (on stdout, once: only the SHA-256 of its
    token is stored). A link opens one session and expires after [web] login_link_hours; --renew
    issues a new one. An active account is never re-created: revoke it first to change it."""
    common.check_io(stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign.accounts import add_account  # lazy: qrelkit.campaign loads numba; `--help` stays fast

    acc = add_account(directory, name, topics=(topics or "").split(",") if topics else None, organizer=organizer,
                      base_url=base_url, renew=renew)
    if as_json:
        common.emit(acc, True)
        return
    sys.stdout.write(acc["link"] + "\n")
    common.stderr.print(f"{'organizer' if acc['organizer'] else 'assessor'} {name}: give them the link above (it is "
                        "shown only now)", markup=False, highlight=False, soft_wrap=True)
    if not acc["assessor"] and not acc["organizer"]:
        common.stderr.print(f"note: {name} is not among the protocol's assessors ({', '.join(acc['assessors'])}): no "
                            "batch will be assigned to this account", markup=False, highlight=False, soft_wrap=True)


@assessor_app.command("revoke")
@common.examples("qrelkit campaign assessor revoke camp ann")
def assessor_revoke(
    directory: Path = DirArg,
    name: str = typer.Argument(..., help="The account to revoke."),
    as_json: bool = common.JsonOpt,
) -> None:
    """Revoke an account: its link and every session of it stop working at once."""
    common.check_io(stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign.accounts import revoke_account  # lazy: qrelkit.campaign loads numba; `--help` stays fast

    acc = revoke_account(directory, name)
    common.emit(acc, as_json, f"account {name} revoked at {acc['revoked']}")


@assessor_app.command("list")
@common.examples("qrelkit campaign assessor list camp --json")
def assessor_list(
    directory: Path = DirArg,
    as_json: bool = common.JsonOpt,
) -> None:
    """The accounts: name, organizer, topics, created, revoked (never their tokens)."""
    import pandas as pd  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(read_stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign.accounts import list_accounts  # lazy: qrelkit.campaign loads numba; `--help` stays fast

    accs = list_accounts(directory)
    if as_json:
        common.emit({"accounts": accs}, True)
        return
    df = pd.DataFrame(accs, columns=["name", "organizer", "topics", "created", "revoked", "generation"])
    df["topics"] = [",".join(t) for t in df["topics"]]
    common.print_table(df, title=f"accounts of {directory}")


prefs_app = typer.Typer(help="Preference tasks answered in the web app (qrelkit serve): the crowd tasks of the "
                        "preference protocol, made from the campaign and exported for 'qrelkit prefs'.",
                        no_args_is_help=True)
app.add_typer(prefs_app, name="prefs")


def _names(value: Optional[str]) -> list[str] | None:
    """A comma-separated option as a list (None when not given)."""
    return [x.strip() for x in value.split(",") if x.strip()] if value else None


@prefs_app.command("make")
@common.examples("qrelkit campaign prefs make camp --assessors ann,bob --seed 1")
def prefs_make(
    directory: Path = DirArg,
    pairs: Optional[Path] = typer.Option(None, "--pairs", help="A pairs table ('prefs pairs', 'prefs single', a "
                                         "tournament's --pending-out); default: the campaign's top-1 pool."),
    topics: Optional[str] = typer.Option(None, "--topics", help="Comma-separated topics whose pairs are judged."),
    assessors: Optional[str] = typer.Option(None, "--assessors", help="Comma-separated assessors who answer the tasks "
                                            "(default: [campaign] assessors)."),
    per_task: Optional[int] = typer.Option(None, "--per-task", help=f"Real pairs per task (default: {common.default_of('prefs', 'pairs_per_task')})."),
    test_pairs: Optional[int] = typer.Option(None, "--test-pairs", help=f"Test pairs per task (default: {common.default_of('prefs', 'test_pairs')})."),
    assignments: Optional[int] = typer.Option(None, "--assignments", help=f"Assessors per task (default: {common.default_of('prefs', 'assignments')})."),
    prefix: Optional[str] = typer.Option(None, "--prefix", help="Task id prefix (default: P, then P2-, P3-...)."),
    seed: Optional[int] = common.SeedOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Make preference tasks (10 real + 3 test pairs each, as 'prefs tasks') from the campaign's
    top-1 pool and judged passages, store them in the campaign and assign them to assessors, who
    answer them in the web app."""
    from qrelkit.io.tables import read_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[pairs], stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign.prefs import make_preference_tasks  # lazy: qrelkit.campaign loads numba; `--help` stays fast

    res = make_preference_tasks(directory, pairs=read_table(pairs).to_pandas() if pairs else None, topics=_names(topics),
                                assessors=_names(assessors), pairs_per_task=per_task, test_pairs=test_pairs,
                                assignments=assignments, seed=seed, prefix=prefix)
    common.emit(res, as_json, f"{res['tasks']} preference tasks ({res['real_pairs']} real + {res['test_pairs']} test "
                f"comparisons over {res['topics']} topics) stored in {directory}, ids {res['prefix']}...; per assessor: "
                + ", ".join(f"{a} {n}" for a, n in res["tasks_per_assessor"].items()))


@prefs_app.command("export")
@common.examples("qrelkit campaign prefs export camp -o answers.csv --tasks-out tasks.parquet")
def prefs_export(
    directory: Path = DirArg,
    output: Path = typer.Option(..., "-o", "--output", help="The answers (task_id, slot, worker, choice): .csv/.tsv/.jsonl/.parquet."),
    tasks_out: Path = typer.Option(..., "--tasks-out", help="The task table, re-issues included (.parquet)."),
    as_json: bool = common.JsonOpt,
) -> None:
    """Export the preference answers of finished tasks and the task table, the files
    'qrelkit prefs import ANSWERS --tasks TASKS' reads (then 'prefs tournament')."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(outputs=[output, tasks_out], read_stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign import check_outputs, export_preferences  # lazy: it loads numba; `--help` stays fast

    check_outputs(directory, [output, tasks_out])
    tasks, answers = export_preferences(directory)
    write_table(tasks, tasks_out, kind="pref-tasks", params={"campaign": str(directory)})
    write_table(pa.Table.from_pandas(answers, preserve_index=False), output, kind="pref-answers",
                params={"campaign": str(directory)})
    common.emit({"answers": int(len(answers)), "tasks": len(set(tasks["task_id"].to_pylist())),
                 "output": str(output), "tasks_out": str(tasks_out)}, as_json,
                f"{len(answers)} answers -> {output}; task table -> {tasks_out}")


judgments_app = typer.Typer(help="The judgments of the campaign: list them, change a grade, retract one — through the "
                            "store's append-only change log; the next CAL round and the qrels use the grades in force.",
                            no_args_is_help=True)
app.add_typer(judgments_app, name="judgments")


@judgments_app.command("list")
@common.examples(
    "qrelkit campaign judgments list camp --topic 1001",
    "qrelkit campaign judgments list camp --assessor ann --history -o ann-history.csv",
)
def judgments_list(
    directory: Path = DirArg,
    topic: Optional[str] = typer.Option(None, "--topic", help="Only this topic."),
    assessor: Optional[str] = typer.Option(None, "--assessor", help="Only this assessor."),
    batch: Optional[str] = typer.Option(None, "--batch", help="Only this batch."),
    history: bool = typer.Option(False, "--history", help="Every judgment ever made and each of its changes."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the table (.csv, .tsv, .jsonl, .parquet)."),
    as_json: bool = common.JsonOpt,
) -> None:
    """The judgments in force (seq, qid, docid, assessor, grade, batch_id, source, time), or
    with --history every judgment and its changes (retractions: empty grade)."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(outputs=[output], read_stores=[Path(directory) / "campaign.db"])
    from qrelkit.campaign import check_outputs, list_judgments  # lazy: it loads numba; `--help` stays fast

    check_outputs(directory, [output])
    df = list_judgments(directory, topic=topic, assessor=assessor, batch=batch, history=history)
    if output is not None:
        write_table(pa.Table.from_pandas(df, preserve_index=False), output, kind="campaign-judgments",
                    params={"history": history})
    if as_json:
        common.emit({"judgments": common.records(df)}, True)
    elif output is None:
        common.print_table(df, title=f"judgments of {directory}" + (" (history)" if history else ""))
    else:
        common.stderr.print(f"{len(df)} rows -> {output}", markup=False, highlight=False, soft_wrap=True)


def _corrections(topic, docid, assessor, grade, file, retract: bool):
    """The items a correction command names: one by options, or a file of them."""
    import pandas as pd  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.campaign import read_corrections  # lazy: it loads numba; `--help` stays fast

    if file is not None:
        if any(v is not None for v in (topic, docid, assessor, grade)):
            raise InputError("bad-option", "give either --file or --topic/--docid/--assessor" + ("" if retract else "/--grade"))
        return read_corrections(file, retract=retract)
    need = {"--topic": topic, "--docid": docid, "--assessor": assessor, **({} if retract else {"--grade": grade})}
    missing = [k for k, v in need.items() if v is None]
    if missing:
        raise InputError("bad-option", f"give {', '.join(missing)} (or --file with one item per row)")
    return pd.DataFrame([{"qid": topic, "docid": docid, "assessor": assessor, "grade": grade, "file": "<options>",
                          "line": None}])


def _correct(directory: Path, rows, retract: bool, reason: str, as_json: bool) -> None:
    from qrelkit.campaign import correct_judgments  # lazy: it loads numba; `--help` stays fast

    res = correct_judgments(directory, rows, retract=retract, reason=reason,
                            on_wait=lambda msg: common.stderr.print(msg, markup=False, highlight=False, soft_wrap=True))
    redo = f"; stages to run again: {', '.join(res['stages_to_redo'])}" if res["stages_to_redo"] else ""
    common.emit(res, as_json, f"{'retracted' if retract else 'changed'} {res['changed']} judgment(s) of "
                f"{res['items']} item(s) ({res['unchanged']} already so){redo}")


_ITEM = {"topic": typer.Option(None, "--topic", help="The topic."), "docid": typer.Option(None, "--docid", help="The passage."),
         "assessor": typer.Option(None, "--assessor", help="The assessor whose judgment it is."),
         "file": typer.Option(None, "--file", help="Many items: a table with qid, docid, assessor (and grade to set)."),
         "reason": typer.Option("", "--reason", help="Why (kept in the change log's source).")}


@judgments_app.command("set")
@common.examples(
    "qrelkit campaign judgments set camp --topic 1001 --docid p123 --assessor ann --grade 2 --reason 'key typo'",
    "qrelkit campaign judgments set camp --file corrections.csv   # qid, docid, assessor, grade per row",
)
def judgments_set(
    directory: Path = DirArg,
    topic: Optional[str] = _ITEM["topic"],
    docid: Optional[str] = _ITEM["docid"],
    assessor: Optional[str] = _ITEM["assessor"],
    grade: Optional[int] = typer.Option(None, "--grade", help="The new grade (on the campaign's scale)."),
    file: Optional[Path] = _ITEM["file"],
    reason: str = _ITEM["reason"],
    as_json: bool = common.JsonOpt,
) -> None:
    """Change an assessor's grade of an item (and of the copies CAL made of it): a row in the
    change log; the next CAL round, the stopping rule and the qrels use the new grade; the qrels,
    evaluation, reusability and report stages run again at the next 'campaign run'."""
    common.check_io(inputs=[file], stores=[Path(directory) / "campaign.db"])
    _correct(directory, _corrections(topic, docid, assessor, grade, file, retract=False), False, reason, as_json)


@judgments_app.command("retract")
@common.examples(
    "qrelkit campaign judgments retract camp --topic 1001 --docid p123 --assessor ann --reason 'judged the wrong topic'",
)
def judgments_retract(
    directory: Path = DirArg,
    topic: Optional[str] = _ITEM["topic"],
    docid: Optional[str] = _ITEM["docid"],
    assessor: Optional[str] = _ITEM["assessor"],
    file: Optional[Path] = _ITEM["file"],
    reason: str = _ITEM["reason"],
    as_json: bool = common.JsonOpt,
) -> None:
    """Retract an assessor's judgment of an item (and the copies CAL made of it): a row in the
    change log; the item is owed again by that assessor, and the closing stages run again."""
    common.check_io(inputs=[file], stores=[Path(directory) / "campaign.db"])
    _correct(directory, _corrections(topic, docid, assessor, None, file, retract=True), True, reason, as_json)
