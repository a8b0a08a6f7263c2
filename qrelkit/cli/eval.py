"""``qrelkit eval``: score runs with ir-measures, duplicates in evaluation, comparisons."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from qrelkit.cli import HELP, common
from qrelkit.cli.runs import RunsArg, load_runs
from qrelkit.evaluate.params import EvalParams
from qrelkit.io.params import RunsParams
from qrelkit.labels.params import LabelsParams
from qrelkit.errors import InputError

if TYPE_CHECKING:  # names for annotations only: importing them loads pyarrow and pandas
    import pyarrow as pa
    import pandas as pd

# Imports inside the commands (qrelkit.evaluate): it loads ir_measures, too slow to pay on every
# 'qrelkit --help'; it loads when an eval command runs. Everything else is imported here.
app = typer.Typer(help=HELP["eval"], no_args_is_help=True)

QrelsOpt = typer.Option(..., "--qrels", "-q", help="Qrels (TREC text, .gz, or Parquet).")
MeasureOpt = typer.Option([], "--measure", "-m", help="ir-measures measure string, e.g. nDCG@10, 'AP(rel=2)', RR@10, Judged@10, NCG@100 (repeatable; default: config).")
MissingOpt = typer.Option(None, "--missing", help="Judged topics missing from a run: zero (default) | skip | error.")
RelevantOpt = typer.Option(None, "--relevant", help="Binary measures: relevant grades, a scheme (passage, document, '>=2') or a level (default: config).")
LenientOpt = typer.Option(None, "--lenient/--strict", help="Repair run and qrels defects (a grade off the [labels] scale: line dropped) instead of failing; counts per rule are reported.")


def read_eval_runs(runs: List[Path], cfg, lenient: Optional[bool], qrels=None) -> tuple[pa.Table, list[str], dict[str, int]]:
    """Runs for evaluation, the names of all runs and what lenient mode repaired (per rule):
    TREC run files/folders (validated by the run reader), or one Parquet table of canonical runs
    written by ``qrelkit runs canonicalize`` (already validated; only the judged topics of
    ``qrels`` are read)."""
    import pyarrow.compute as pc  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.tables import read_metadata  # lazy: pyarrow; `--help` stays fast
    from qrelkit.evaluate.core import load_canonical_runs  # lazy: qrelkit.evaluate loads ir_measures

    if len(runs) == 1 and runs[0].suffix == ".parquet" and runs[0].is_file() and read_metadata(runs[0]).get("kind") == "runs":
        topics = None if qrels is None else pc.unique(qrels["qid"]).to_pylist()
        return (*load_canonical_runs(runs[0], topics), {})
    rs = load_runs(runs, cfg, lenient=lenient)
    return rs.table, rs.runs, rs.repairs()


def _scoring(cfg, measure, missing, relevant, *, duplicates: bool = False) -> dict:
    """:func:`qrelkit.evaluate.protocol.scoring_options` of the config's ``[eval]`` with the flags
    (given measures replace the configured ones)."""
    from qrelkit.evaluate.protocol import scoring_options  # lazy: qrelkit.evaluate loads ir_measures

    key = "duplicate_measures" if duplicates else "measures"
    params = EvalParams.from_config(cfg, missing=missing, relevant=relevant, **{key: list(measure or ()) or None})
    return scoring_options(params, LabelsParams.from_config(cfg), duplicates=duplicates)


def read_eval_qrels(path: Path, cfg, lenient: Optional[bool], counts: dict[str, int]):
    """Qrels for evaluation: grades outside the config's ``[labels] scale`` are the error
    ``grade-out-of-scale`` (lenient: the line is dropped and counted in ``counts``)."""
    from qrelkit.io.qrels import read_qrels  # lazy: pyarrow, pandas; `--help` stays fast
    return read_qrels(path, lenient=RunsParams.from_config(cfg, lenient=lenient).lenient,
                      scale=LabelsParams.from_config(cfg).scale, counts=counts)


def _eval_inputs(runs: List[Path], qrels: Path, cfg, lenient: Optional[bool]):
    """Qrels, runs, run names and what lenient mode repaired in both (lines per rule)."""
    fixed: dict[str, int] = {}
    q = read_eval_qrels(qrels, cfg, lenient, fixed)
    table, names, run_fixed = read_eval_runs(runs, cfg, lenient, q)
    for rule, n in run_fixed.items():
        fixed[rule] = fixed.get(rule, 0) + n
    return q, table, names, fixed


def _summary_frame(ev) -> pd.DataFrame:
    w = ev.wide()
    w.insert(0, "run", w.index)
    return w.reset_index(drop=True)


@app.command("score")
def score(
    runs: List[Path] = RunsArg,
    qrels: Path = QrelsOpt,
    output: Path = typer.Option(..., "-o", "--output", help="Per-query table (run, qid, measure, value, missing): .parquet/.csv/.tsv/.jsonl."),
    measure: List[str] = MeasureOpt,
    summary_out: Optional[Path] = typer.Option(None, "--summary-out", help="Also write the aggregate table (run, measure, value, topics, missing_topics)."),
    missing: Optional[str] = MissingOpt,
    relevant: Optional[str] = RelevantOpt,
    lenient: Optional[bool] = LenientOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Score runs with ir-measures: runs in canonical order, filtered to judged topics, a stated
    policy for judged topics a run misses; per-query and aggregate tables."""
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[runs, qrels, config], outputs=[output, summary_out])
    from qrelkit.evaluate import RANKINGS, evaluate  # lazy: qrelkit.evaluate loads ir_measures
    cfg = common.config(config)
    so = _scoring(cfg, measure, missing, relevant)
    q, table, names, fixed = _eval_inputs(runs, qrels, cfg, lenient)
    ev = evaluate(table, q, run_names=names, **so)
    params = {"runs": [str(r) for r in runs], "qrels": str(qrels), "measures": ev.measures, "missing": so["missing"],
              "rel": so["rel"], "ranking": ev.ranking, "ranking_text": RANKINGS[ev.ranking], "config": cfg.source}
    write_table(ev.per_query, output, kind="eval-per-query", params=params)
    if summary_out is not None:
        write_table(ev.summary, summary_out, kind="eval-summary", params=params)
    repaired = common.report_repairs(fixed)
    if as_json:
        common.emit({"output": str(output), **ev.report(), "summary": _summary_frame(ev).to_dict(orient="records"),
                     "repaired": repaired}, True)
        return
    common.stderr.print(ev.policy_line())
    common.print_table(_summary_frame(ev).round(4), title=f"{len(ev.runs)} runs x {len(ev.topics)} judged topics")


def _names(value: str) -> list[str]:
    """``--tests ttest, wilcoxon`` -> ["ttest", "wilcoxon"]."""
    return [t.strip() for t in value.split(",")]


def _pairs(pair: List[str]) -> list[tuple[str, str]]:
    """``--pair A,B`` (repeatable) -> [(A, B), ...]; anything but two names is ``bad-option``."""
    pairs = []
    for p in pair:
        parts = p.split(",")
        if len(parts) != 2:
            raise InputError("bad-option", f"--pair takes A,B, got {p!r}")
        pairs.append((parts[0].strip(), parts[1].strip()))
    return pairs


def _write_frames(frames: list[tuple], params: dict) -> None:
    """Write each ``(data frame, path, kind)`` whose path is given, ``params`` in its metadata."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    for df, path, kind in frames:
        if path is not None:
            write_table(pa.Table.from_pandas(df, preserve_index=False), path, kind=kind, params=params)


@app.command("compare")
def compare(
    runs: List[Path] = RunsArg,
    qrels: Path = QrelsOpt,
    output: Path = typer.Option(..., "-o", "--output", help="Significance table: one row per measure, pair and test."),
    measure: List[str] = MeasureOpt,
    baseline: Optional[str] = typer.Option(None, "--baseline", help="Compare every run with this run (default: every pair)."),
    pair: List[str] = typer.Option([], "--pair", help="Compare only these pairs: A,B (repeatable)."),
    breakdown_out: Optional[Path] = typer.Option(None, "--breakdown-out", help="Outcome breakdown per pair (PROTOCOL section 3)."),
    cases_out: Optional[Path] = typer.Option(None, "--cases-out", help="Outcome case of every (pair, topic)."),
    k: Optional[int] = typer.Option(None, "--k", help=f"Outcome breakdown: top k (default: {common.default_of('eval', 'k')})."),
    tests: Optional[str] = typer.Option(None, "--tests", help="Comma list of ttest, wilcoxon, ranksum, randomization."),
    corrections: Optional[str] = typer.Option(None, "--corrections", help="Comma list of bonferroni, holm."),
    alpha: Optional[float] = typer.Option(None, "--alpha", help="Significance level for the corrected decisions."),
    randomizations: Optional[int] = typer.Option(None, "--randomizations", help="Resamples of the randomization test."),
    seed: Optional[int] = common.SeedOpt,
    missing: Optional[str] = MissingOpt,
    relevant: Optional[str] = RelevantOpt,
    lenient: Optional[bool] = LenientOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Compare runs: significance tests (t-test, Wilcoxon signed-rank and rank-sum, randomization)
    with Bonferroni and Holm corrections, and the outcome breakdown (neither / only one / both
    find a relevant item in the top k; ESL and RR on 'both')."""
    common.check_io(inputs=[runs, qrels, config], outputs=[output, breakdown_out, cases_out])
    from qrelkit.evaluate import evaluate, outcome_breakdown, significance  # lazy: qrelkit.evaluate loads ir_measures
    from qrelkit.evaluate.protocol import comparison_options  # lazy: qrelkit.evaluate loads ir_measures
    cfg = common.config(config)
    so = _scoring(cfg, measure, missing, relevant)
    co = comparison_options(EvalParams.from_config(cfg, tests=_names(tests) if tests else None, alpha=alpha,
                                                   randomizations=randomizations, seed=seed, k=k,
                                                   corrections=_names(corrections) if corrections else None))
    pairs = _pairs(pair) if pair else None
    q, table, names, fixed = _eval_inputs(runs, qrels, cfg, lenient)
    ev = evaluate(table, q, run_names=names, **so)
    tl, cl, kk = co["tests"], co["corrections"], co.pop("k")
    with common.progress("significance tests") as advance:
        sig = significance(ev.per_query, ev.measures, baseline=baseline, pairs=pairs, progress=advance, **co)
    with common.progress("outcome breakdown") as advance:
        bd, cases = outcome_breakdown(table, q, k=kk, rel=so["rel"] if so["rel"] is not None else 1, baseline=baseline,
                                      pairs=pairs, missing=so["missing"], ranking=ev.ranking, progress=advance)
    params = {"runs": [str(r) for r in runs], "qrels": str(qrels), "measures": ev.measures, "missing": so["missing"],
              "rel": so["rel"], "tests": tl, "corrections": cl, "alpha": co["alpha"], "randomizations": co["n_resamples"],
              "seed": co["seed"], "k": kk, "baseline": baseline, "pairs": pair, "ranking": ev.ranking, "config": cfg.source}
    _write_frames([(sig, output, "eval-significance"), (bd, breakdown_out, "eval-breakdown"),
                   (cases, cases_out, "eval-cases")], params)
    repaired = common.report_repairs(fixed)
    if as_json:
        common.emit({"output": str(output), **ev.report(), "repaired": repaired, "pairs": int(len(bd)), "tests": tl,
                     "corrections": cl, "seed": co["seed"], "significant": {c: int(sig[f"reject_{c}"].sum()) for c in cl},
                     "breakdown": bd.drop(columns=["note"]).to_dict(orient="records") if len(bd) else [],
                     "note": bd["note"].iloc[0] if len(bd) else None}, True)
        return
    common.stderr.print(ev.policy_line())
    if len(bd):
        common.stderr.print(bd["note"].iloc[0])
        cols = ["run_a", "run_b", "topics", "share_neither", "share_only_a", "share_only_b", "share_both",
                "mean_esl_a", "mean_esl_b", "p_esl_wilcoxon", "p_naive_ttest"]
        common.print_table(bd[cols].round(4), title=f"Outcome breakdown (top {kk})")
    show = sig[["measure", "run_a", "run_b", "test", "diff", "p"] + [f"p_{c}" for c in cl]].round(4)
    common.print_table(show, title=f"Significance ({len(sig)} tests)")


@app.command("duplicates")
def duplicates(
    runs: List[Path] = RunsArg,
    qrels: Path = QrelsOpt,
    classes: Path = typer.Option(..., "--classes", help="Near-duplicate classes (docid -> class id)."),
    output: Path = typer.Option(..., "-o", "--output", help="Table: run, measure, none, corpus, runs, qrels, qrels_minus_runs."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Scatter plot per measure (.png/.svg/.pdf): deduped runs vs expanded qrels."),
    measure: List[str] = MeasureOpt,
    depth: Optional[int] = typer.Option(None, "--depth", help="Truncate runs to this depth before deduplicating."),
    missing: Optional[str] = MissingOpt,
    relevant: Optional[str] = RelevantOpt,
    lenient: Optional[bool] = LenientOpt,
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Duplicates in evaluation (TREC 2022 Figure 6): every run scored with original runs and
    qrels, a deduplicated corpus, deduplicated runs, and expanded qrels."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    from qrelkit.io.classes import read_classes  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[runs, qrels, classes, config], outputs=[output, plot])
    from qrelkit.evaluate import duplicate_effects, plot_duplicates  # lazy: qrelkit.evaluate loads ir_measures
    cfg = common.config(config)
    so = _scoring(cfg, measure, missing, relevant, duplicates=True)
    d = EvalParams.from_config(cfg, depth=depth).depth
    q, table, _, fixed = _eval_inputs(runs, qrels, cfg, lenient)
    df = duplicate_effects(table, q, read_classes(classes), depth=d, **so)
    pol = so["missing"]
    params = {"runs": [str(r) for r in runs], "qrels": str(qrels), "classes": str(classes), "measures": so["measures"],
              "depth": d, "missing": pol, "rel": so["rel"], "ranking": so["ranking"], "config": cfg.source}
    write_table(pa.Table.from_pandas(df, preserve_index=False), output, kind="eval-duplicates", params=params)
    if plot is not None:
        plot_duplicates(df, plot)
    per_measure = df.groupby("measure", sort=False)["qrels_minus_runs"].agg(["mean", "min", "max"]).reset_index()
    repaired = common.report_repairs(fixed)
    if as_json:
        common.emit({"output": str(output), "plot": str(plot) if plot else None, "missing_policy": pol, "repaired": repaired,
                     "differences": per_measure.to_dict(orient="records")}, True)
        return
    common.stderr.print(f"missing-topic policy: {pol}")
    common.print_table(df.round(4), title="Scores under four treatments of near-duplicates")


@app.command("correlate")
def correlate(
    a: Path = typer.Argument(..., help="Leaderboard A: a summary table (run, measure, value) from 'eval score --summary-out'."),
    b: Path = typer.Argument(..., help="Leaderboard B (same form)."),
    measure: List[str] = MeasureOpt,
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the table (measure, runs, kendall_tau, kendall_p, tau_ap_a, tau_ap_b)."),
    config: Optional[Path] = common.ConfigOpt,
    as_json: bool = common.JsonOpt,
) -> None:
    """Kendall's tau (scipy) and tau_ap between two leaderboards, per measure. Per-query tables
    are accepted too (their values are averaged per run)."""
    import pyarrow as pa  # lazy: pyarrow; `--help` stays fast
    import pandas as pd  # lazy: pyarrow, pandas; `--help` stays fast
    from qrelkit.io.tables import read_table, write_table  # lazy: pyarrow; `--help` stays fast
    common.check_io(inputs=[a, b, config], outputs=[output])
    from qrelkit.evaluate import leaderboard_correlation  # lazy: qrelkit.evaluate loads ir_measures

    common.config(config)

    def board(path: Path) -> pd.DataFrame:
        t = read_table(path).to_pandas()
        for c in ("run", "measure", "value"):
            if c not in t.columns:
                raise InputError("missing-column", f"a leaderboard needs columns run, measure, value (missing {c!r})",
                                 file=str(path))
        t["run"] = t["run"].astype(str)
        return t.groupby(["measure", "run"], sort=False)["value"].mean().reset_index()

    ta, tb = board(a), board(b)
    ms = list(measure) if measure else [m for m in dict.fromkeys(ta["measure"]) if m in set(tb["measure"])]
    rows = []
    for m in ms:
        sa = ta[ta["measure"] == m].set_index("run")["value"]
        sb = tb[tb["measure"] == m].set_index("run")["value"]
        if sa.empty or sb.empty:
            raise InputError("unknown-measure", f"measure {m!r} is not in both leaderboards")
        r = leaderboard_correlation(sa, sb)
        rows.append({"measure": m, "runs": r["runs"], "kendall_tau": r["kendall_tau"], "kendall_p": r["kendall_p"],
                     "tau_ap_a": r["tau_ap_a"], "tau_ap_b": r["tau_ap_b"], "only_a": len(r["only_a"]),
                     "only_b": len(r["only_b"])})
    df = pd.DataFrame(rows)
    if output is not None:
        write_table(pa.Table.from_pandas(df, preserve_index=False), output, kind="eval-correlation",
                    params={"a": str(a), "b": str(b), "measures": ms})
    if as_json:
        common.emit({"correlations": df.to_dict(orient="records")}, True)
        return
    common.print_table(df.round(4), title="Leaderboard correlation")
