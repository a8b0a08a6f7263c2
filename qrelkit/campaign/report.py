"""The campaign report: one self-contained HTML file (figures embedded as base64 PNG) and its
Markdown twin, from the store and the artefacts of the campaign folder. Sections: stages and
warnings; pool sizes per topic and per run; screening outcomes; judged per topic by stage and
thread; with an ``[adjudicate] strategy``, the judging in its order per topic; relevance density vs. judged (the stopping rule's density line — the density rule's 0.4,
as Figure 7 of the TREC 2022 Deep Learning overview — or, for a rule without one, what the rule
needs in words); the stopping decision per topic with its rule; near-duplicate expansion per grade (as
its Table 4); inter-assessor agreement; the leaderboard with confidence intervals; deduplicated
runs vs. expanded qrels (as its Figure 6); leave-one-group-out. The same store gives the same
bytes (no times, no absolute paths)."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.cal.stopping import JudgingState
from qrelkit.campaign.adjudication import ROUND, adjudication_progress, describe
from qrelkit.campaign.rounds import campaign_rule
from qrelkit.campaign.settings import combine_rule
from qrelkit.config import ProtocolParams
from qrelkit.io.atomic import atomic_open
from qrelkit.io.manifest import read_manifest
from qrelkit.io.tables import read_frame
from qrelkit.plots import pyplot
from qrelkit.evaluate.params import EvalParams
from qrelkit.labels.aggregate import assessor_agreement
from qrelkit.labels.params import LabelsParams
from qrelkit.pooler import pool_stats
from qrelkit.store import combine_log


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None}, dpi=90)
    pyplot().close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


class _Doc:
    """HTML and Markdown built side by side."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.html: list[str] = []
        self.md: list[str] = [f"# {title}", ""]

    def h(self, text: str) -> None:
        self.html.append(f"<h2>{html.escape(text)}</h2>")
        self.md += [f"## {text}", ""]

    def p(self, text: str) -> None:
        self.html.append(f"<p>{html.escape(text)}</p>")
        self.md += [text, ""]

    def table(self, df: pd.DataFrame, digits: int = 4) -> None:
        if df is None or not len(df):
            self.p("(nothing)")
            return
        cells = [[_fmt(v, digits) for v in row] for row in df.itertuples(index=False)]
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in cells)
        self.html.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        self.md.append("| " + " | ".join(str(c) for c in df.columns) + " |")
        self.md.append("|" + "---|" * len(df.columns))
        self.md += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in cells]
        self.md.append("")

    def figure(self, fig, alt: str) -> None:
        data = _png(fig)
        self.html.append(f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"/>'
                         f"<figcaption>{html.escape(alt)}</figcaption></figure>")
        self.md += [f"![{alt}](data:image/png;base64,{data})", ""]

    def render_html(self) -> str:
        style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse;"
                 "margin:1em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}img{max-width:100%}")
        return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(self.title)}</title>"
                f"<style>{style}</style></head><body><h1>{html.escape(self.title)}</h1>\n" + "\n".join(self.html)
                + "\n</body></html>\n")

    def render_md(self) -> str:
        return "\n".join(self.md) + "\n"


def _fmt(v: Any, digits: int) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return ""
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.{digits}f}"
    return str(v)


def _read(directory: Path, name: str) -> pd.DataFrame | None:
    p = directory / name
    return read_frame(p, what=name) if p.exists() else None


def _stage_of(batch_id: str, kind: str, thread: Any) -> str:
    if kind == "cal":
        return f"cal:{thread}"
    last = str(batch_id).rsplit("/", 1)[-1]
    return "pool-rest" if last.startswith(ROUND) else last  # every adjudication round is the pool-rest stage's


def adjudication_section(doc: _Doc, directory: Path, store, cfg) -> None:
    """With an ``[adjudicate] strategy``: the strategy, budget and batch, and per kept topic the
    judging in its order (:func:`qrelkit.campaign.adjudication.adjudication_progress`). Nothing
    with ``strategy = "none"``."""
    adj = describe(cfg)
    if adj is None:
        return
    doc.h("Judging in the adjudication order")
    budget = f"{adj['budget']} judgments per topic" if adj["budget"] else "the whole pool"
    doc.p(f"Strategy {adj['strategy']}: the rest of each kept topic's pool judged in its order, {adj['batch']} "
          f"documents per round, until {budget} made in that order (documents judged before, at screening or in "
          "the initial qrels, are the strategy's prior: not judged again, not counted).")
    doc.table(adjudication_progress(directory, store, cfg))


def _density_figure(log: pd.DataFrame, relevant: set[int], threshold: float | None, topics: list[str]):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for q in topics:
        g = log[log["qid"] == q].drop_duplicates("docid")
        if not len(g):
            continue
        rel = np.cumsum(g["grade"].isin(relevant).to_numpy())
        n = np.arange(1, len(g) + 1)
        ax.plot(n, rel / n, lw=1, label=q)
    if threshold is not None:  # the stopping rule's density (the density rule's 0.4)
        ax.axhline(threshold, color="red", ls="--", lw=1, label=f"density {threshold:g}")
    ax.set_xlabel("judged passages")
    ax.set_ylabel("relevance density")
    ax.set_ylim(0, 1)
    if len(topics) <= 12:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _leaderboard_figure(lb: pd.DataFrame, measure: str):
    plt = pyplot()
    g = lb[lb["measure"] == measure].sort_values("mean", ascending=True, kind="stable")
    fig, ax = plt.subplots(figsize=(7, max(2.5, 0.25 * len(g) + 1)))
    y = np.arange(len(g))
    ax.errorbar(g["mean"], y, xerr=[g["mean"] - g["ci_low"], g["ci_high"] - g["mean"]], fmt="o", ms=3, capsize=2)
    ax.set_yticks(y, g["run"].astype(str).tolist(), fontsize=7)
    ax.set_xlabel(f"{measure} (95% CI)")
    fig.tight_layout()
    return fig


def _duplicates_figure(dup: pd.DataFrame):
    plt = pyplot()
    ms = list(dict.fromkeys(dup["measure"]))
    fig, axes = plt.subplots(1, len(ms), figsize=(4 * len(ms), 4), squeeze=False)
    for ax, m in zip(axes[0], ms):
        g = dup[dup["measure"] == m]
        ax.scatter(g["runs"], g["qrels"], s=10)
        lo = float(min(g["runs"].min(), g["qrels"].min()))
        hi = float(max(g["runs"].max(), g["qrels"].max()))
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8)
        ax.set_xlabel(f"{m}: deduplicated runs")
        ax.set_ylabel(f"{m}: expanded qrels")
    fig.tight_layout()
    return fig


def _agreement(log: pd.DataFrame, labels: LabelsParams) -> pd.DataFrame | None:
    per_item = log.groupby(["qid", "docid"])["assessor"].nunique()
    if not (per_item >= 2).any():
        return None
    j = log[log["kind"] != "cal"].drop_duplicates(["qid", "docid", "assessor"])
    summary, _pairs = assessor_agreement(j[["qid", "docid", "assessor", "grade"]],
                                         threshold=min(labels.passage_relevant), scale=labels.scale,
                                         level=labels.agreement_level)
    return pd.DataFrame([{"statistic": k, "value": v} for k, v in summary.items() if not isinstance(v, (dict, list))])


def leaderboard_section(doc: _Doc, lb: pd.DataFrame | None, measure: str) -> None:
    """The leaderboard as written (leaderboard.csv: runs that print equal share a rank), its rank
    next to the measure and its values with the file's 6 digits, so that equal ranks show equal
    values; the figure of ``measure`` (else of the first measure)."""
    doc.h("Leaderboard (95% confidence intervals)")
    if lb is not None and "rank" in lb.columns:
        lb = lb[["measure", "rank"] + [c for c in lb.columns if c not in ("measure", "rank")]]
    doc.table(lb, digits=6)
    if lb is not None and len(lb):
        m = measure if measure in set(lb["measure"]) else str(lb["measure"].iat[0])
        doc.figure(_leaderboard_figure(lb, m), f"leaderboard: {m} with 95% confidence intervals")


def build(campaign, store, cfg) -> _Doc:
    """The report document of ``campaign`` (stages and warnings, pools, screening, judging effort,
    stopping decisions, near-duplicate expansion, agreement, leaderboard, duplicates,
    leave-one-group-out) from its ``store``, configuration ``cfg`` and the artefacts in its folder;
    rendered by :func:`write_report`."""
    d = campaign.dir
    name = ProtocolParams.from_config(cfg).name
    doc = _Doc("Campaign report" + (f": {name}" if name else ""))
    done = store.state.stages_done()
    warnings = store.state.warnings()
    doc.h("Stages")
    doc.table(pd.DataFrame([{"stage": k, "summary": ", ".join(f"{a}={b}" for a, b in v.items())} for k, v in done.items()]))
    doc.p(f"{len(warnings)} warning(s).")
    doc.table(warnings)
    ct = store.state.topics()
    topics = ct["qid"].astype(str).tolist()
    pool = _read(d, "pool.parquet")
    if pool is not None:
        ps = pool_stats(pa.Table.from_pandas(pool, preserve_index=False),
                        read_manifest(store.state.get("paths")["manifest"]))
        doc.h("Pool sizes per topic")
        doc.table(ps["topics"])
        doc.h("Pool items contributed per run")
        doc.table(ps["runs"])
    rule = campaign_rule(cfg).describe(JudgingState((), np.zeros(0, bool)))  # what the campaign's rule needs
    doc.h("Screening outcomes")
    doc.table(ct[["qid", "screening", "screened", "screened_relevant"]])
    log = store.judgments.log(None, "all")
    doc.h("Judged per topic by stage and thread")
    if len(log):
        lab = log.drop_duplicates(["qid", "docid", "batch_id"])
        lab = lab.assign(stage=[_stage_of(b, k, t) for b, k, t in zip(lab["batch_id"], lab["kind"], lab["thread"])])
        piv = lab.pivot_table(index="qid", columns="stage", values="docid", aggfunc="count", fill_value=0)
        piv = piv.reindex([q for q in topics if q in piv.index]).reset_index()
        doc.table(piv)
        adjudication_section(doc, d, store, cfg)
        relevant = {int(g) for g in LabelsParams.from_config(cfg).passage_relevant}
        doc.h("Relevance density vs. judged")
        labels = combine_log(log, combine=combine_rule(cfg))  # one grade per passage, as the stopping rule sees it
        line = "" if rule.density_line is None else f"; the {rule.density_line:g} line"
        doc.figure(_density_figure(labels, relevant, rule.density_line, topics),
                   f"relevance density vs. judged per topic{line}")
    else:
        doc.p("No judgment yet.")
    doc.h("Stopping decision per topic")
    if rule.density_line is None:  # what the rule needs, when the figure has no line of it
        doc.p(f"Stopping rule {rule.rule}: {rule.needs}.")
    doc.table(ct[["qid", "decision", "rule", "reason"]])
    exp = _read(d, "expansion.csv")
    doc.h("Near-duplicate expansion per grade")
    doc.table(exp)
    doc.h("Inter-assessor agreement")
    agr = _agreement(log, LabelsParams.from_config(cfg)) if len(log) else None
    if agr is None:
        doc.p("One assessor per item: no agreement to measure.")
    else:
        doc.table(agr)
    leaderboard_section(doc, _read(d, "leaderboard.csv"), str(EvalParams.from_config(cfg).measures[0]))
    dup = _read(d, "eval-duplicates.csv")
    doc.h("Deduplicated runs vs. expanded qrels")
    doc.table(dup)
    if dup is not None and len(dup):
        doc.figure(_duplicates_figure(dup), "deduplicated runs vs. expanded qrels (as Figure 6 of the TREC 2022 overview)")
    doc.h("Leave-one-group-out")
    doc.table(_read(d, "reuse-summary.csv"))
    return doc


def write_report(campaign, output: Path, *, store, cfg) -> list[Path]:
    """Write ``output`` (.html) and its ``.md`` twin (or only the .md); returns the paths."""
    doc = build(campaign, store, cfg)
    output = Path(output)
    md_path = output.with_suffix(".md")
    written = []
    if output.suffix.lower() != ".md":
        with atomic_open(output) as fh:
            fh.write(doc.render_html())
        written.append(output)
    with atomic_open(md_path) as fh:
        fh.write(doc.render_md())
    written.append(md_path)
    return written
