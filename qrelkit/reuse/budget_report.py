"""The budget study's report: its tables (Parquet and CSV), two figures (PNG, matplotlib's Agg
backend) and one document in Markdown and in HTML (the HTML embeds the figures: a single file).

The same :class:`~qrelkit.reuse.budget.BudgetStudy` gives the same bytes (no dates in the PNGs,
fixed number formats, the study's row order).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import pandas as pd

from qrelkit.plots import pyplot
from qrelkit.reuse.budget import BudgetStudy
from qrelkit.reuse.report import _Doc, _save, write_document, write_tables

PLOTS = {"relevant": "relevant.png", "tau": "tau.png"}
_SUMMARY_SHOWN = {
    "strategy": "strategy", "budget": "budget", "judgments_mean": "judgments per topic",
    "relevant_found_mean": "relevant found per topic", "recall": "recall", "kendall_tau": "Kendall tau_b",
    "tau_ap": "tau_ap", "max_rank_drop": "max rank drop", "significance_changes": "significance changes",
    "significance_lost": "lost", "significance_gained": "gained", "significance_reversed": "reversed",
}
_LOGO_SHOWN = {"logo_mean_abs_diff": "leave-out mean abs change", "logo_max_abs_diff": "leave-out max abs change",
               "logo_max_rank_drop": "leave-out max rank drop", "logo_kendall_tau": "leave-out Kendall tau"}


def _curves(summary: pd.DataFrame, ax, y: str, label: str) -> None:
    """One line per strategy judged by budget (x: judgments per topic), depth-K pools as points."""
    colors = pyplot().rcParams["axes.prop_cycle"].by_key()["color"]
    lines = summary[summary["kind"] != "depth"]
    for i, (name, d) in enumerate(lines.groupby("strategy", sort=False)):
        d = d.sort_values("judgments_mean", kind="stable")
        ax.plot(d["judgments_mean"], d[y], marker="o", ms=3, lw=1.4, color=colors[i % len(colors)], label=name)
    depth = summary[summary["kind"] == "depth"]
    if len(depth):
        ax.scatter(depth["judgments_mean"], depth[y], marker="s", s=28, color="black", zorder=3, label="depth-K pools")
        for _, r in depth.iterrows():
            ax.annotate(f"k={r['strategy'].split('-', 1)[1]}", (r["judgments_mean"], r[y]), textcoords="offset points",
                        xytext=(4, -10), fontsize=7)
    ax.set_xlabel("judgments per topic (mean)")
    ax.set_ylabel(label)
    ax.grid(True, lw=0.4, color="0.85")


def plot_relevant(summary: pd.DataFrame, path: str | os.PathLike, relevant_per_topic: float | None = None) -> None:
    """Relevant documents found per topic (mean) against judgments per topic, one line per
    strategy, depth-K pools as points; the qrels' relevant per topic as a dashed line."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    _curves(summary, ax, "relevant_found_mean", "relevant found per topic (mean)")
    if relevant_per_topic is not None:
        ax.axhline(relevant_per_topic, color="0.4", lw=1, ls="--", label="relevant in the qrels")
    ax.set_title("Relevant documents found against judgments")
    ax.legend(loc="lower right", fontsize=7, frameon=False)
    fig.tight_layout()
    _save(fig, path)


def plot_tau(summary: pd.DataFrame, path: str | os.PathLike) -> None:
    """Kendall's tau and tau_AP between the leaderboard under the qrels found so far and the full
    one, against judgments per topic (one line per strategy, depth-K pools as points)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.2))
    for ax, col, label in zip(axes, ("kendall_tau", "tau_ap"), ("Kendall's tau_b", "tau_AP")):
        _curves(summary, ax, col, label)
        ax.axhline(0.9, color="0.4", lw=1, ls=":")
        ax.set_title(f"{label} against the full qrels' leaderboard", fontsize=10)
    axes[0].legend(loc="lower right", fontsize=7, frameon=False)
    fig.tight_layout()
    _save(fig, path)


def _document(res: BudgetStudy, title: str) -> _Doc:
    p = res.params
    s = res.summary.to_pandas(integer_object_nulls=True)  # a count left empty stays a count
    doc = _Doc()
    doc.h(1, title)
    doc.p(f"{len(p['strategies'])} strategies ({', '.join(p['strategies'])}) replayed on {p['topics']} topics, "
          f"{p['runs']} runs ({p['pooled_runs']} pooled), a depth-{p['depth']} pool of {p['pool_mean']:.1f} documents "
          f"per topic on average, {p['relevant']} relevant documents in the qrels; leaderboards by {p['measure']}. "
          "Files: summary, topics (per topic), runs (the leaderboards) and pairs (significance changes), each as "
          ".parquet and .csv.")
    doc.h(2, "How the study was run")
    doc.ul(res.notes)
    doc.h(2, "Relevant documents found")
    doc.img(PLOTS["relevant"], "relevant documents found against judgments per topic")
    doc.h(2, "Leaderboard against the full qrels")
    doc.img(PLOTS["tau"], "Kendall's tau and tau_AP against judgments per topic")
    doc.h(2, "Summary")
    shown = dict(_SUMMARY_SHOWN, **(_LOGO_SHOWN if p.get("logo_budgets") else {}))
    doc.table(s[list(shown)], list(shown.values()),
              {"judgments_mean": 1, "relevant_found_mean": 2, "recall": 3, "kendall_tau": 3, "tau_ap": 3})
    return doc


def write_budget_report(res: BudgetStudy, out_dir: str | os.PathLike, *, title: str | None = None,
                        formats: Sequence[str] = ("parquet", "csv"), params: dict | None = None) -> dict[str, str]:
    """Write the tables (``summary``, ``topics``, ``runs``, ``pairs``; each in every format of
    ``formats``), the figures (``relevant.png``, ``tau.png``) and ``report.md`` / ``report.html``
    into ``out_dir``. ``params`` are added to the Parquet metadata. Returns ``{name: path}``."""
    out = Path(out_dir)
    written = write_tables(res.tables(), out, "budget", {**res.params, **(params or {})}, formats)
    summary = res.summary.to_pandas()
    topics = max(int(res.params.get("topics") or 0), 1)
    plot_relevant(summary, out / PLOTS["relevant"], float(res.params.get("relevant", 0)) / topics)
    plot_tau(summary, out / PLOTS["tau"])
    for f in PLOTS.values():
        written[f] = str(out / f)
    title = title or "Judging budgets: adjudication strategies against the full qrels"
    written.update(write_document(_document(res, title), out, title))
    return written
