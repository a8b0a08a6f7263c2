"""The reusability report: tables (Parquet and CSV), plots (PNG, matplotlib's Agg backend), and one
document in Markdown and in HTML (the HTML embeds the plots, so it is a single file).

Everything is deterministic: the same :class:`~qrelkit.reuse.leaveout.LeaveOutResult` gives the
same bytes (no dates in the PNGs, fixed number formats, stable row orders).
"""

from __future__ import annotations

import base64
import html
import math
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from qrelkit.io.atomic import atomic_open, atomic_path
from qrelkit.io.tables import write_table
from qrelkit.reuse.leaveout import PROCEDURES, LeaveOutResult
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.plots import pyplot
from qrelkit.reuse.params import ReuseParams

TABLES = ("summary", "runs", "units", "topics", "removed")
PLOTS = {"density": "density.png", "scores": "scores.png", "ranks": "ranks.png"}


# ------------------------------------------------------------------------------------ plots

def _save(fig, path: str | os.PathLike) -> None:
    plt = pyplot()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None}, dpi=100)
    plt.close(fig)


@declared_defaults(ReuseParams, threshold="density_threshold", voorhees_share="voorhees_relevant_share")
def plot_density(topics: pd.DataFrame, path: str | os.PathLike, *, threshold: float = AS_DECLARED,
                 voorhees_share: float = AS_DECLARED) -> None:
    """Relevance density per topic, topics sorted by density (as Figure 7 of the TREC 2022 Deep
    Learning overview), with the DL rule's threshold and Voorhees' one-third line."""
    plt = pyplot()
    d = topics.sort_values(["density", "qid"], ascending=[False, True], kind="stable", na_position="last")
    y = d["density"].to_numpy(float)
    x = np.arange(1, len(y) + 1)
    fig, ax = plt.subplots(figsize=(7.0, 3.8))
    over = y > threshold
    ax.bar(x[~over], y[~over], width=1.0, color="#4c72b0", label=f"density <= {threshold:g}")
    if over.any():
        ax.bar(x[over], y[over], width=1.0, color="#c44e52", label=f"density > {threshold:g} (DL rule)")
    ax.axhline(threshold, color="#c44e52", lw=1, ls="--")
    ax.axhline(voorhees_share, color="0.35", lw=1, ls=":", label=f"Voorhees: {voorhees_share:g} relevant")
    ax.set_xlim(0.5, max(len(y), 1) + 0.5)
    top = float(np.nanmax(y)) if len(y) and not np.all(np.isnan(y)) else 0.0
    ax.set_ylim(0, min(1.0, max(top, threshold, voorhees_share)) * 1.1 + 0.01)
    ax.set_xlabel("topics, sorted by relevance density")
    ax.set_ylabel("relevant / judged")
    ax.set_title(f"Relevance density per topic ({len(y)} topics, {int(over.sum())} above {threshold:g})")
    ax.legend(loc="upper right", fontsize=8, frameon=False)
    fig.tight_layout()
    _save(fig, path)


def _grid(n: int):
    plt = pyplot()
    cols = min(n, 3)
    rows = int(math.ceil(n / cols)) if n else 1
    fig, axes = plt.subplots(rows, max(cols, 1), figsize=(4.0 * max(cols, 1), 3.9 * rows), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()


def plot_scores(runs: pd.DataFrame, path: str | os.PathLike, measures: Sequence[str] | None = None) -> None:
    """Official (x) against left-out (y) score per measure, one point per run (filled: pooled,
    open: not pooled), with the diagonal."""
    ms = list(measures) if measures else list(dict.fromkeys(runs["measure"]))
    fig, axes = _grid(len(ms))
    for ax, m in zip(axes, ms):
        d = runs[runs["measure"] == m]
        v = d[["official", "left_out"]].to_numpy(float)
        lo = float(np.nanmin(v)) if np.isfinite(v).any() else 0.0
        hi = float(np.nanmax(v)) if np.isfinite(v).any() else 1.0
        pad = (hi - lo) * 0.05 or 0.05
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="0.6", lw=1, zorder=1)
        p = d["pooled"].to_numpy(bool)
        ax.scatter(d["official"][p], d["left_out"][p], s=16, color="#4c72b0", zorder=2, label="pooled")
        if (~p).any():
            ax.scatter(d["official"][~p], d["left_out"][~p], s=16, facecolors="none", edgecolors="#dd8452",
                       zorder=2, label="not pooled")
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_title(m, fontsize=10)
        ax.set_xlabel("official score")
        ax.set_ylabel("left-out score")
        ax.legend(loc="upper left", fontsize=7, frameon=False)
    fig.tight_layout()
    _save(fig, path)


def plot_ranks(runs: pd.DataFrame, path: str | os.PathLike, measures: Sequence[str] | None = None) -> None:
    """Official rank (x) against left-out rank (y) per measure: dots on the left-out leaderboard
    (every run at its left-out score), crosses for the run alone at its left-out score among the
    others' official scores. Points above the diagonal dropped."""
    ms = list(measures) if measures else list(dict.fromkeys(runs["measure"]))
    fig, axes = _grid(len(ms))
    for ax, m in zip(axes, ms):
        d = runs[runs["measure"] == m]
        n = max(len(d), 1)
        ax.plot([0.5, n + 0.5], [0.5, n + 0.5], color="0.6", lw=1, zorder=1)
        ax.scatter(d["official_rank"], d["left_out_rank"], s=16, color="#4c72b0", zorder=3, label="left-out leaderboard")
        ax.scatter(d["official_rank"], d["left_out_rank_alone"], s=18, marker="x", color="#c44e52", zorder=2,
                   label="alone")
        ax.set_xlim(0.5, n + 0.5)
        ax.set_ylim(n + 0.5, 0.5)
        ax.set_title(f"{m}: max drop {int(max(0, d['rank_change'].max()) if len(d) else 0)}", fontsize=10)
        ax.set_xlabel("official rank")
        ax.set_ylabel("left-out rank")
        ax.legend(loc="lower right", fontsize=7, frameon=False)
    fig.tight_layout()
    _save(fig, path)


# --------------------------------------------------------------------------------- document

def _fmt(v: Any, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else ""
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.{digits}f}"
    return str(v)


def _cells(df: pd.DataFrame, digits: dict[str, int] | None = None) -> list[list[str]]:
    digits = digits or {}
    return [[_fmt(v, digits.get(c, 4)) for c, v in zip(df.columns, row)] for row in df.itertuples(index=False)]


class _Doc:
    """Blocks rendered both as Markdown and as HTML."""

    def __init__(self) -> None:
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def ul(self, items: Iterable[str]) -> None:
        self.blocks.append(("ul", list(items)))

    def table(self, df: pd.DataFrame, headers: Sequence[str] | None = None, digits: dict[str, int] | None = None) -> None:
        self.blocks.append(("table", list(headers or df.columns), _cells(df, digits)))

    def img(self, file: str, alt: str) -> None:
        self.blocks.append(("img", file, alt))

    def markdown(self) -> str:
        out = []
        for b in self.blocks:
            if b[0] == "h":
                out += ["#" * b[1] + " " + b[2], ""]
            elif b[0] == "p":
                out += [b[1], ""]
            elif b[0] == "ul":
                out += [f"- {x}" for x in b[1]] + [""]
            elif b[0] == "table":
                head, rows = b[1], b[2]
                esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
                out.append("| " + " | ".join(esc(h) for h in head) + " |")
                out.append("|" + "|".join("---" for _ in head) + "|")
                out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
                out.append("")
            elif b[0] == "img":
                out += [f"![{b[2]}]({b[1]})", ""]
        return "\n".join(out).rstrip() + "\n"

    def html(self, folder: Path, title: str) -> str:
        e = html.escape
        out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">', f"<title>{e(title)}</title>",
               "<style>body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;"
               "color:#222}table{border-collapse:collapse;margin:1em 0;font-size:13px}"
               "th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#f3f3f3}"
               "td:first-child,th:first-child{text-align:left}img{max-width:100%}</style>", "</head>", "<body>"]
        for b in self.blocks:
            if b[0] == "h":
                out.append(f"<h{b[1]}>{e(b[2])}</h{b[1]}>")
            elif b[0] == "p":
                out.append(f"<p>{e(b[1])}</p>")
            elif b[0] == "ul":
                out.append("<ul>" + "".join(f"<li>{e(x)}</li>" for x in b[1]) + "</ul>")
            elif b[0] == "table":
                out.append("<table><thead><tr>" + "".join(f"<th>{e(str(h))}</th>" for h in b[1]) + "</tr></thead><tbody>")
                out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in b[2]]
                out.append("</tbody></table>")
            elif b[0] == "img":
                data = base64.b64encode((folder / b[1]).read_bytes()).decode("ascii")
                out.append(f'<p><img alt="{e(b[2])}" src="data:image/png;base64,{data}"></p>')
        out += ["</body>", "</html>"]
        return "\n".join(out) + "\n"


def _document(res: LeaveOutResult, title: str) -> _Doc:
    p = res.params
    summary = res.summary.to_pandas()
    runs = res.runs.to_pandas()
    units = res.units.to_pandas()
    topics = res.topics.to_pandas()
    unit_word = {"group": "group", "run": "run", "type": "type"}[p["procedure"]]
    doc = _Doc()
    doc.h(1, title)
    n_dl = int(topics["dl_flag"].sum())
    n_v = int(topics["voorhees_flag"].sum())
    first = summary.iloc[0] if len(summary) else None
    lead = (f"{PROCEDURES[p['procedure']].capitalize()} over {p['units']} {unit_word}s, {p['runs']} runs "
            f"({p['pooled_runs']} pooled), {p['topics']} judged topics, {p['judged']} judgments "
            f"({p['relevant']} relevant).")
    if first is not None:
        lead += (f" {first['measure']}: mean absolute change {first['mean_abs_diff']:.4f} "
                 f"({first['mean_abs_pct_diff']:.2f}%), max {first['max_abs_diff']:.4f} ({first['run_max_abs_diff']}), "
                 f"max rank drop {int(first['max_rank_drop'])}, Kendall's tau {first['kendall_tau']:.4f}, "
                 f"tau_ap {first['tau_ap']:.4f}.")
    lead += (f" {n_dl} of {len(topics)} topics have a relevance density above {p['density_threshold']:g} (DL rule); "
             f"{n_v} have more than {p['voorhees_share']:g} relevant (Voorhees).")
    doc.p(lead)
    doc.h(2, "How the simulation was run")
    doc.ul(res.notes)

    doc.h(2, "Summary per measure")
    s = summary[["measure", "mean_diff", "mean_abs_diff", "max_abs_diff", "run_max_abs_diff", "mean_abs_pct_diff",
                 "max_abs_pct_diff", "max_rank_drop", "runs_rank_changed", "max_rank_drop_alone", "kendall_tau",
                 "tau_ap"]]
    doc.table(s, ["measure", "mean change", "mean abs change", "max abs change", "run (max)", "mean abs % change",
                  "max abs % change", "max rank drop", "runs whose rank changes", "max rank drop (alone)",
                  "Kendall tau_b", "tau_ap"], {"mean_abs_pct_diff": 2, "max_abs_pct_diff": 2})
    doc.img(PLOTS["scores"], "official vs left-out scores")
    doc.img(PLOTS["ranks"], "official vs left-out ranks")

    doc.h(2, f"Left-out {unit_word}s")
    u = units[["unit", "runs", "pooled_runs", "removed_judged", "removed_relevant", "topics_affected", "topics_emptied"]]
    doc.table(u, [unit_word, "runs", "pooled runs", "unique judged removed", "unique relevant removed",
                  "topics affected", "topics emptied"])

    doc.h(2, "Topics")
    doc.p(f"Relevance density = relevant / judged (relevant: grade >= {p['relevance_level']}). Flags: DL rule "
          f"(density > {p['density_threshold']:g}) and Voorhees' warning (density > {p['voorhees_share']:g}). "
          "'One group' counts relevant documents that a single group contributed.")
    doc.img(PLOTS["density"], "relevance density per topic")
    t = topics[["qid", "judged", "relevant", "density", "share_relevant_one_group", "orphans", "dl_flag", "voorhees_flag"]]
    doc.table(t, ["topic", "judged", "relevant", "density", "share relevant by one group", "no contributing run",
                  "DL rule", "Voorhees"])

    doc.h(2, "Runs")
    for m in summary["measure"]:
        d = runs[runs["measure"] == m][["run", "group", "pooled", "official", "left_out", "diff", "pct_diff",
                                        "official_rank", "left_out_rank", "left_out_rank_alone", "removed_judged",
                                        "removed_relevant"]]
        doc.h(3, m)
        doc.table(d, ["run", "group", "pooled", "official", "left-out", "difference", "% difference", "official rank",
                      "left-out rank", "left-out rank (alone)", "unique judged removed", "unique relevant removed"],
                  {"pct_diff": 2})
    return doc


def write_report(res: LeaveOutResult, out_dir: str | os.PathLike, *, title: str | None = None,
                 formats: Sequence[str] = ("parquet", "csv"), params: dict | None = None) -> dict[str, str]:
    """Write the tables (``summary``, ``runs``, ``units``, ``topics``, ``removed``; each in every
    format of ``formats``), the plots (``density.png``, ``scores.png``, ``ranks.png``) and
    ``report.md`` / ``report.html`` into ``out_dir``. ``params`` are added to the Parquet
    metadata. Returns ``{name: path}``."""
    out = Path(out_dir)
    written = write_tables(res.tables(), out, "reuse", {**res.params, **(params or {})}, formats)
    runs = res.runs.to_pandas()
    plot_density(res.topics.to_pandas(), out / PLOTS["density"], threshold=res.params["density_threshold"],
                 voorhees_share=res.params["voorhees_share"])
    plot_scores(runs, out / PLOTS["scores"], res.params["measures"])
    plot_ranks(runs, out / PLOTS["ranks"], res.params["measures"])
    for k, f in PLOTS.items():
        written[f] = str(out / f)
    title = title or f"Reusability report: {PROCEDURES[res.params['procedure']]}"
    written.update(write_document(_document(res, title), out, title))
    return written


def write_tables(tables: dict, out: Path, kind: str, meta: dict, formats: Sequence[str]) -> dict[str, str]:
    """Write each table as ``out/NAME.FORMAT`` in every format (Parquet with ``meta`` and the kind
    ``KIND-NAME`` in its metadata), ``out`` made first. Returns ``{file name: path}``."""
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    for name, table in tables.items():
        for fmt in formats:
            path = out / f"{name}.{fmt}"
            write_table(table, path, kind=f"{kind}-{name}", params=meta)
            written[f"{name}.{fmt}"] = str(path)
    return written


def write_document(doc: _Doc, out: Path, title: str) -> dict[str, str]:
    """Write ``doc`` as ``out/report.md`` and ``out/report.html`` (its figures embedded)."""
    with atomic_open(out / "report.md") as fh:
        fh.write(doc.markdown())
    with atomic_open(out / "report.html") as fh:
        fh.write(doc.html(out, title))
    return {"report.md": str(out / "report.md"), "report.html": str(out / "report.html")}
