"""``qrelkit study``: studies of an existing collection (judging budgets and adjudication strategies)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from qrelkit.cli import HELP, common
from qrelkit.cli.runs import RunsArg, load_runs
from qrelkit.cal.params import CalParams
from qrelkit.errors import InputError
from qrelkit.evaluate.params import EvalParams
from qrelkit.io.params import SourcesParams
from qrelkit.labels.params import LabelsParams
from qrelkit.pooler.params import AdjudicateParams
from qrelkit.reuse.params import ReuseParams

app = typer.Typer(help=HELP["study"], no_args_is_help=True)


@app.command("budget")
@common.examples(
    "qrelkit study budget runs/ -q qrels.txt -m manifest.csv --depth 100 -o study",
    "qrelkit study budget runs/ -q qrels.txt -k 100 -s mtf,mm-ns --depths 10,20,50 --budgets 100,200,500 -o study --json",
    "qrelkit study budget runs/ -q qrels.txt -m manifest.csv -k 100 --logo-budgets 20% --batch 1 -o study",
)
def budget(
    runs: List[Path] = RunsArg,
    qrels: Path = typer.Option(..., "--qrels", "-q", help="Qrels (TREC text, .gz, or Parquet): the oracle, and the leaderboard every budget is compared with."),
    output: Path = typer.Option(..., "-o", "--output", help="Report folder: report.html, report.md, PNG figures, tables (.parquet and .csv)."),
    manifest: Optional[Path] = typer.Option(None, "--manifest", "-m", help="Manifest (CSV/TOML): run, group; optional pooled (true/false). Without: every run is pooled and its own group."),
    strategy: List[str] = typer.Option([], "--strategy", "-s", help="Strategies (repeatable, or comma lists): registered adjudication strategies (docid, rank, mtf, hedge, mm, mm-ns, ucb, a plugin's) and depth-K (the depth-K pool judged whole). Default: every registered strategy."),
    depths: Optional[str] = typer.Option(None, "--depths", help="Depth-K pools as strategies too, after --strategy: a list of K (5,10,20)."),
    budgets: Optional[str] = typer.Option(None, "--budgets", "-b", help="Budgets: judgments per topic (100,200,500) or shares of each topic's pool, rounded up (10%,20%). Default: every 10% up to 100%."),
    depth: Optional[int] = typer.Option(None, "--depth", "-k", help=f"Depth of the pool the strategies judge (default: {common.default_of('pool', 'depth')})."),
    measure: Optional[str] = typer.Option(None, "--measure", help="The leaderboards' measure (ir-measures; default: AP)."),
    rel: Optional[int] = typer.Option(None, "--rel", help="Relevant from this grade, for the oracle and the measure (default: config [eval] relevant; none: 1)."),
    batch: Optional[int] = typer.Option(None, "--batch", help=f"Judgments per round of a strategy (default: {common.default_of('adjudicate', 'batch')}); 1 replays the papers' one judgment at a time."),
    logo_budgets: Optional[str] = typer.Option(None, "--logo-budgets", help="Budgets (as --budgets, added to them) at which leave-one-group-out bias is measured as 'reuse leave-out' measures it."),
    corpus: Optional[str] = typer.Option(None, "--corpus", help="Corpus (file, shard folder or irds:): with --topics, CAL is a strategy too ('cal': the judged depth-1 pool, then CAL over the pool's documents; [cal] parameters)."),
    topics: Optional[str] = typer.Option(None, "--topics", "-t", help="Topics (qid<TAB>text, JSONL or irds:): CAL's queries, with --corpus."),
    seed: Optional[int] = typer.Option(None, "--seed", help="CAL's seed (default: the config's [cal] seed, else 0); the other strategies are not random."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Processes that replay and score (default: 2 for large inputs, else 1); results do not depend on it."),
    lenient: Optional[bool] = typer.Option(None, "--lenient/--strict", help="Repair run defects instead of failing."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Replay each adjudication strategy (and depth-K pools) on an existing collection with its
    qrels as the oracle, and report per strategy and budget: relevant documents found, the
    leaderboard against the full qrels' (Kendall's tau, tau_AP, largest rank drop, pairs whose
    significant difference changes) and, at --logo-budgets, leave-one-group-out bias. [adjudicate]
    gives the strategies' constants; [eval] the missing-topic policy, ranking and alpha; [reuse] the
    leave-out procedure."""
    from qrelkit.evaluate.protocol import scoring_options  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.manifest import read_manifest  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    common.check_io(inputs=[runs, qrels, manifest, config, corpus, topics], folders=[output])
    from qrelkit.reuse.budget import budget_study  # lazy: ir_measures, scipy and numba; `--help` stays fast
    from qrelkit.reuse.budget_report import write_budget_report  # lazy: matplotlib
    from qrelkit.reuse.study import pool_setting, pooled_runs  # lazy: ir_measures
    cfg = common.config(config)
    ev = EvalParams.from_config(cfg)
    opts = scoring_options(ev, LabelsParams.from_config(cfg))
    man = read_manifest(manifest) if manifest else None
    q = read_qrels(qrels)
    ps = pool_setting(cfg, None, depth=depth)
    rs = load_runs(runs, cfg, manifest=manifest, lenient=lenient, ties=ps.ties)
    pooled, source = pooled_runs(rs.runs, man, {}, cfg)
    given = {k: v for k, v in (("strategies", strategy or None), ("budgets", budgets), ("measure", measure)) if v}
    given.update(_cal_strategy(corpus, topics, cfg, seed))
    with common.progress("budget study: scoring") as advance:
        res = budget_study(rs.table, q, man, pooled=pooled, depths=_items(depths), depth=ps.depth, alpha=ev.alpha,
                           rel=rel if rel is not None else opts["rel"], missing=opts["missing"], ranking=opts["ranking"],
                           logo_budgets=logo_budgets or (), reuse=ReuseParams.from_config(cfg),
                           params=AdjudicateParams.from_config(cfg, batch=batch), workers=workers, progress=advance,
                           **given)
    res.notes.insert(1, f"Pooled runs: {source}.")
    written = write_budget_report(res, output, params={"runs_input": [str(r) for r in runs], "qrels": str(qrels),
                                                       "manifest": str(manifest) if manifest else None,
                                                       "pooled_source": source, "config": cfg.source})
    repaired = common.report_repairs(rs.repairs())
    if as_json:
        common.emit({"output": str(output), "params": res.params, "notes": res.notes, "files": sorted(written),
                     "summary": common.records(res.summary.to_pandas(integer_object_nulls=True)), "repaired": repaired}, True)
        return
    _print(res, output)


def _cal_strategy(corpus: Optional[Path], topics: Optional[Path], cfg, seed: Optional[int]) -> dict:
    """``{"cal": CalStrategy}`` when --corpus and --topics are given (CAL as a strategy), else nothing."""
    if (corpus is None) != (topics is None):
        raise InputError("bad-option", "CAL as a strategy needs both --corpus and --topics")
    if corpus is None:
        return {}
    from qrelkit.io.sources import open_corpus  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.topics import read_topics  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.reuse.budget import CalStrategy  # lazy: ir_measures, scipy and numba; `--help` stays fast
    return {"cal": CalStrategy(open_corpus(corpus, params=SourcesParams.from_config(cfg)),
                               read_topics(topics, params=SourcesParams.from_config(cfg)),
                               CalParams.from_config(cfg, seed=seed))}


def _items(text: Optional[str]) -> list[str]:
    """A comma list given to a flag, its items stripped (none: empty)."""
    return [s.strip() for s in (text or "").split(",") if s.strip()]


def _print(res, output: Path) -> None:
    """The notes on stderr and the summary as a table on stdout."""
    for line in res.notes:
        common.stderr.print(line)
    cols = ["strategy", "budget", "judgments_mean", "relevant_found_mean", "recall", "kendall_tau", "tau_ap",
            "max_rank_drop", "significance_changes"]
    if res.params.get("logo_budgets"):
        cols += ["logo_mean_abs_diff", "logo_max_rank_drop"]
    show = res.summary.to_pandas(integer_object_nulls=True)[cols].round(4)
    show = show.astype(object).where(show.notna(), "")  # not measured at this budget: blank, not nan
    common.print_table(show, title=f"budget study: {res.params['runs']} runs, {res.params['topics']} topics, "
                                   f"{res.params['measure']}")
    common.stderr.print(f"report -> {Path(output) / 'report.html'}")
