"""Near-duplicates in evaluation (TREC 2022 Deep Learning, Figure 6; docs/protocol.md section 1).

Four ways to treat duplicates, each a (runs, qrels) pair scored with :func:`evaluate`:

``none``         original runs, original qrels (do nothing);
``corpus``       runs with every non-canonical passage removed (ranks renumbered) — the same as
                 deduplicating the corpus before retrieval — original qrels;
``runs``         deduplicated runs: each passage mapped to its class id, the first hit per class
                 kept, ranks renumbered (optionally truncated to ``depth`` first) — original qrels;
``qrels``        original runs, expanded qrels (every member of a class gets the class's label).

The track compares ``runs`` with ``qrels`` per run for P@10 and nDCG@10; :func:`plot_duplicates`
draws that scatter plot, one panel per measure.
"""

from __future__ import annotations

import os
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.errors import InputError
from qrelkit.evaluate.core import evaluate
from qrelkit.io.atomic import atomic_path
from qrelkit.io.classes import dedupe_runs, map_to_classes
from qrelkit.io.runs import RUN_SCHEMA, canonicalize
from qrelkit.labels.propagate import expand_qrels
from qrelkit.plots import pyplot
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.evaluate.params import EvalParams

TREATMENTS = ("none", "corpus", "runs", "qrels")


def deduped_runs(runs: pa.Table, classes: pa.Table | None, *, depth: int | None = None) -> pa.Table:
    """Runs deduplicated as TREC 2022 did, with the class id (canonical passage) as docid."""
    t = dedupe_runs(runs, classes, depth=depth)
    return pa.table({"run": t["run"], "qid": t["qid"], "docid": t["class_id"], "rank": t["rank"],
                     "score": t["score"]}, schema=RUN_SCHEMA)


def canonical_only_runs(runs: pa.Table, classes: pa.Table | None, *, depth: int | None = None) -> pa.Table:
    """Runs restricted to canonical passages (a deduplicated corpus), ranks renumbered."""
    if depth is not None:
        runs = runs.filter(pc.less_equal(runs["rank"], depth))
    cls = map_to_classes(runs["docid"], classes)
    keep = pc.equal(cls, runs["docid"].combine_chunks() if isinstance(runs["docid"], pa.ChunkedArray) else runs["docid"])
    return canonicalize(runs.filter(keep))


@declared_defaults(EvalParams)
def duplicate_effects(
    runs: pa.Table,
    qrels: pa.Table,
    classes: pa.Table | None,
    measures: Iterable[str],
    *,
    depth: int | None = None,
    missing: str = AS_DECLARED,
    rel: int | None = None,
    treatments: Sequence[str] = TREATMENTS,
    ranking: str = AS_DECLARED,
) -> pd.DataFrame:
    """One row per (run, measure), one column per treatment, plus ``qrels_minus_runs`` (expanded
    qrels minus deduplicated runs: Figure 6's distance from the diagonal). ``ranking``: as
    :func:`~qrelkit.evaluate.evaluate`."""
    measures = list(measures)
    names = sorted(set(pc.unique(runs["run"]).to_pylist()))
    base = runs if depth is None else runs.filter(pc.less_equal(runs["rank"], depth))
    kw = dict(missing=missing, rel=rel, run_names=names, ranking=ranking)
    cols = {}
    for t in treatments:
        if t == "none":
            ev = evaluate(base, qrels, measures, **kw)
        elif t == "corpus":
            ev = evaluate(canonical_only_runs(runs, classes, depth=depth), qrels, measures, **kw)
        elif t == "runs":
            ev = evaluate(deduped_runs(runs, classes, depth=depth), qrels, measures, **kw)
        elif t == "qrels":
            ev = evaluate(base, expand_qrels(qrels, classes).qrels, measures, **kw)
        else:
            raise InputError("bad-option", f"treatment must be one of {', '.join(TREATMENTS)}, got {t!r}")
        s = ev.summary.to_pandas().set_index(["run", "measure"])["value"]
        cols[t] = s
        measure_names = ev.measures
    df = pd.DataFrame(cols).reset_index()
    order_m = {m: i for i, m in enumerate(measure_names)}
    df = df.assign(_m=df["measure"].map(order_m)).sort_values(["_m", "run"], kind="mergesort").drop(columns="_m")
    if "runs" in df.columns and "qrels" in df.columns:
        df["qrels_minus_runs"] = df["qrels"] - df["runs"]
    return df.reset_index(drop=True)


def plot_duplicates(table: pd.DataFrame, path: str | os.PathLike, *, x: str = "runs", y: str = "qrels") -> None:
    """Scatter plot per measure: ``x`` (deduplicated runs, original qrels) against ``y`` (original
    runs, expanded qrels), one point per run, with the diagonal. PNG, SVG or PDF by extension;
    the file holds no date, so the same table gives the same bytes."""
    plt = pyplot()

    measures = list(dict.fromkeys(table["measure"]))
    n = len(measures)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 4.2), squeeze=False)
    for ax, m in zip(axes[0], measures):
        d = table[table["measure"] == m]
        lo = float(np.nanmin(d[[x, y]].to_numpy())) if len(d) else 0.0
        hi = float(np.nanmax(d[[x, y]].to_numpy())) if len(d) else 1.0
        pad = (hi - lo) * 0.05 or 0.05
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="0.6", lw=1, zorder=1)
        ax.scatter(d[x], d[y], s=18, zorder=2)
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_title(m)
        ax.set_xlabel(f"{m}: deduplicated runs, original qrels")
        ax.set_ylabel(f"{m}: original runs, expanded qrels")
        ax.set_aspect("equal")
    fig.tight_layout()
    p = str(path)
    ext = p.rsplit(".", 1)[-1].lower()
    meta = {"png": {"Software": None}, "svg": {"Date": None, "Creator": None},
            "pdf": {"CreationDate": None, "ModDate": None, "Creator": None, "Producer": None}}.get(ext, {})
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=ext if ext in ("png", "svg", "pdf") else "png", metadata=meta, dpi=100)
    plt.close(fig)
