"""Win ratios between runs by their top passages (docs/protocol.md section 2; the paper's Table 3).

Each run's top passage per topic comes from the top-1 pool's provenance (the run ranked it
first); the *perfect run* places a known relevant passage first: per topic, the first
``in_qrels`` item by id (the first qrel of the sorted qrels file, as the paper took "the first
qrel in the file" when a query had several).

For runs X and Y: ``differ`` counts the topics where both have a top passage and the two differ;
among those, ``decided`` counts the topics whose pair has a decided outcome (judged, not a draw:
see :func:`qrelkit.prefs.tournament.pair_outcomes`), and ``wins`` the topics where X's passage
was preferred. ``ratio = wins / decided``. The p-value is the two-sided exact binomial test of
``wins`` out of ``decided`` against 1/2 (``scipy.stats.binomtest``); it is corrected over all
unordered run pairs with a decided topic (Bonferroni by default, via
:func:`qrelkit.evaluate.compare.correct`) and is significant when the corrected p-value is below
``alpha``. The matrix follows the paper: the cell in column X and row Y is X's win ratio over Y.
``wins`` per run counts the opponents it beats more often than not (ratio > 0.5), as the paper's
last row; ``significant_wins`` those it beats significantly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.errors import InputError
from qrelkit.evaluate.compare import correct
from qrelkit.io.atomic import atomic_path
from qrelkit.prefs.common import PERFECT, ordered, pool_items, run_tops
from qrelkit.prefs.tournament import pair_outcomes
from qrelkit.plots import pyplot
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.prefs.params import PrefsParams

RATIO_COLUMNS = ["run", "opponent", "differ", "decided", "wins", "losses", "ratio", "p", "p_corrected", "significant"]


@dataclass
class WinRatios:
    """What :func:`win_ratios` returns: the ratio ``table`` (both directions of every run pair), the same
    as an opponent-by-run ``matrix``, each run's (significant) ``wins``, the ``runs`` in order, and the
    multiple-testing ``correction`` and ``alpha`` used."""
    table: pd.DataFrame  # RATIO_COLUMNS, both directions of every run pair
    matrix: pd.DataFrame  # rows = opponent, columns = run: ratio of the column over the row
    wins: pd.DataFrame  # run, wins, significant_wins, significant_losses
    runs: list[str]
    correction: str
    alpha: float


@declared_defaults(PrefsParams)
def win_ratios_from_tops(tops: pd.DataFrame, outcomes: pd.DataFrame, *, alpha: float = AS_DECLARED,
                         correction: str = AS_DECLARED, order: Sequence[str] | None = None) -> WinRatios:
    """Win ratios from each run's top passage per topic (``run, qid, docid``) and pair outcomes
    (``qid, doc_a, doc_b, winner``)."""
    from scipy.stats import binomtest  # lazy: scipy.stats takes ~1-2 s to import

    runs = list(order) if order is not None else sorted(set(tops["run"]), key=lambda r: (r != PERFECT, r))
    missing = set(tops["run"]) - set(runs)
    if missing:
        raise InputError("unknown-run", f"run order lacks {', '.join(sorted(missing))}")
    pos = {r: i for i, r in enumerate(runs)}
    res = {(q, a, b): w for q, a, b, w in zip(outcomes["qid"], outcomes["doc_a"], outcomes["doc_b"], outcomes["winner"])}
    m = tops.merge(tops, on="qid", suffixes=("_x", "_y"))
    m = m[(m["run_x"].map(pos) < m["run_y"].map(pos)) & (m["docid_x"] != m["docid_y"])]
    rows = []
    for (x, y), g in m.groupby(["run_x", "run_y"], sort=False):
        wins = dec = 0
        for q, dx, dy in zip(g["qid"], g["docid_x"], g["docid_y"]):
            a, b = ordered(dx, dy)
            w = res.get((q, a, b))
            if w is None or (isinstance(w, float) and np.isnan(w)):
                continue
            dec += 1
            wins += int(w == dx)
        rows.append((x, y, len(g), dec, wins))
    have = {(x, y) for x, y, *_ in rows}
    for i, x in enumerate(runs):
        for y in runs[i + 1:]:
            if (x, y) not in have:
                rows.append((x, y, 0, 0, 0))
    rows.sort(key=lambda r: (pos[r[0]], pos[r[1]]))
    p = np.array([binomtest(w, d, 0.5).pvalue if d > 0 else np.nan for _, _, _, d, w in rows], float)
    pc_, rej = correct(p, correction, alpha) if len(p) else (p, np.zeros(0, bool))
    out = []
    for (x, y, n, d, w), pv, pcv, r in zip(rows, p, pc_, rej):
        ratio = w / d if d else np.nan
        out.append((x, y, n, d, w, d - w, ratio, pv, pcv, bool(r)))
        out.append((y, x, n, d, d - w, w, 1 - ratio if d else np.nan, pv, pcv, bool(r)))
    table = pd.DataFrame(out, columns=RATIO_COLUMNS)
    table = table.assign(_r=table["run"].map(pos), _o=table["opponent"].map(pos)).sort_values(["_r", "_o"]).drop(
        columns=["_r", "_o"]).reset_index(drop=True)
    matrix = table.pivot(index="opponent", columns="run", values="ratio").reindex(index=runs, columns=runs)
    wrows = []
    for r in runs:
        t = table[table["run"] == r]
        wrows.append((r, int((t["ratio"] > 0.5).sum()), int(((t["ratio"] > 0.5) & t["significant"]).sum()),
                      int(((t["ratio"] < 0.5) & t["significant"]).sum()), int(t["decided"].sum())))
    wins = pd.DataFrame(wrows, columns=["run", "wins", "significant_wins", "significant_losses", "decided"])
    return WinRatios(table=table, matrix=matrix, wins=wins, runs=runs, correction=correction, alpha=alpha)


@declared_defaults(PrefsParams)
def win_ratios(judgments: pd.DataFrame | pa.Table, pool: pa.Table, *, classes: pa.Table | None = None,
               alpha: float = AS_DECLARED, correction: str = AS_DECLARED, perfect: bool = True,
               order: Sequence[str] | None = None) -> WinRatios:
    """Win-ratio matrix of the pool's runs (and the perfect run) from preference judgments
    (see the module documentation)."""
    items = pool_items(pool, classes)
    tops = run_tops(items, perfect=PERFECT if perfect else None)
    return win_ratios_from_tops(tops, pair_outcomes(judgments), alpha=alpha, correction=correction, order=order)


def matrix_table(wr: WinRatios) -> pd.DataFrame:
    """The matrix as a flat table: ``opponent`` then one column per run, and a last row ``wins``."""
    m = wr.matrix.copy()
    m.insert(0, "opponent", m.index)
    wins = {"opponent": "wins", **{r: float(w) for r, w in zip(wr.wins["run"], wr.wins["wins"])}}
    return pd.concat([m.reset_index(drop=True), pd.DataFrame([wins])], ignore_index=True)


def plot_heatmap(wr: WinRatios, path, *, title: str | None = None) -> None:
    """Heatmap of the win-ratio matrix (column over row), significant cells in bold, wins per run
    under each column (matplotlib, Agg; PNG without a timestamp so equal inputs give equal bytes)."""
    plt = pyplot()

    runs = wr.runs
    n = len(runs)
    sig = wr.table.pivot(index="opponent", columns="run", values="significant").reindex(index=runs, columns=runs)
    size = max(4.0, 0.55 * n + 2)
    fig, ax = plt.subplots(figsize=(size, size * 0.9), dpi=100)
    vals = wr.matrix.to_numpy(float)
    im = ax.imshow(np.ma.masked_invalid(vals), cmap="RdBu", vmin=0, vmax=1)
    fs = max(5, 10 - n // 4)
    for i in range(n):
        for j in range(n):
            if not np.isnan(vals[i, j]):
                bold = bool(sig.iloc[i, j]) if not pd.isna(sig.iloc[i, j]) else False
                ax.text(j, i, f"{100 * vals[i, j]:.0f}", ha="center", va="center", fontsize=fs,
                        fontweight="bold" if bold else "normal", color="black")
    ax.set_xticks(range(n), [f"{r}\n({w})" for r, w in zip(runs, wr.wins["wins"])], rotation=90, fontsize=fs)
    ax.set_yticks(range(n), runs, fontsize=fs)
    ax.set_xlabel("run (wins): % of decided topics where its top passage beat the row's")
    ax.set_ylabel("opponent")
    ax.set_title(title or f"Win ratios (bold: significant, binomial test, {wr.correction}, alpha={wr.alpha})",
                 fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.04)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
    plt.close(fig)
