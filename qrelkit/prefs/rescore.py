"""Re-scoring runs on preference qrels (docs/protocol.md section 2; the paper's Table 2 and Figure 5).

Every run (and the perfect run) is scored with MRR@10 (ir-measures ``RR@10``, through
:func:`qrelkit.evaluate.evaluate`, missing topics scoring 0) three ways:

* ``prefs``: on the preference qrels (grade 1; with ``classes``, every member of a winning class
  counts as relevant, since the pool compared canonical passages);
* ``original``: on the original qrels restricted to the topics that have preference qrels (the
  paper's "selected queries"), binary relevance at grade >= ``rel``;
* ``original_all``: on all topics of the original qrels.

The *perfect run* puts one known relevant passage at rank 1 for each topic: the first, by
passage id, of the qrels with grade >= ``perfect_min_rel`` (with ``perfect_mode="best"``, of
those with the topic's highest grade), the same passage the win ratios use when the top-1 pool
was built with the same settings and qrels (``perfect_qrels``, default: the original qrels; give
the sparse qrels the pool used when they differ from the qrels scored against). It scores 1 on
the original qrels by construction when they contain its passages.

**Confidence intervals** (95% by default) of each mean over topics: ``t`` (default): the
Student t interval over the per-topic reciprocal ranks, mean +- t(n-1) * sd / sqrt(n);
``bootstrap``: the percentile interval of ``scipy.stats.bootstrap`` with a seeded generator.

**Correlation**: Kendall's tau (tau-b, scipy) and tau_ap between the two leaderboards
(``original`` vs ``prefs``) over the real runs, the perfect run left out
(:func:`qrelkit.evaluate.compare.leaderboard_correlation`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ir_measures
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.errors import InputError
from qrelkit.evaluate import evaluate, leaderboard_correlation, per_query_matrix
from qrelkit.io.atomic import atomic_path
from qrelkit.io.keys import stable_int
from qrelkit.io.order import competition_ranks
from qrelkit.io.qrels import QRELS_SCHEMA, judged, sort_qrels
from qrelkit.io.runs import RUN_SCHEMA, canonicalize
from qrelkit.prefs.common import PERFECT
from qrelkit.plots import pyplot
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.pooler.params import TOP1
from qrelkit.prefs.params import PrefsParams

CI_METHODS = ("t", "bootstrap")
BOARD_COLUMNS = ["run", "perfect", "mrr_original", "ci_original_low", "ci_original_high", "rank_original", "mrr_prefs",
                 "ci_prefs_low", "ci_prefs_high", "rank_prefs", "mrr_original_all", "topics_original", "topics_prefs",
                 "topics_all"]


@dataclass
class Rescored:
    """What :func:`rescore` returns: the ``leaderboard`` by original and preference qrels, per-topic
    scores, their ``correlation``, the ``measure``, the confidence interval method ``ci`` and
    ``level``, and a ``summary``."""
    leaderboard: pd.DataFrame  # BOARD_COLUMNS
    per_query: pd.DataFrame  # run, qid, original, prefs
    correlation: dict
    measure: str
    ci: str
    level: float
    summary: dict = field(default_factory=dict)


def perfect_run(qrels: pa.Table, *, min_rel: int = 1, mode: str = "all", name: str = PERFECT) -> pa.Table:
    """The perfect run (module documentation) as a run table (:data:`RUN_SCHEMA`)."""
    if mode not in ("all", "best"):
        raise InputError("bad-option", f"perfect must be 'all' or 'best', got {mode!r}")
    q = qrels.filter(pc.greater_equal(qrels["rel"], min_rel)).to_pandas()
    if mode == "best" and len(q):
        q = q[q["rel"] == q.groupby("qid")["rel"].transform("max")]
    q = q.sort_values(["qid", "docid"]).drop_duplicates("qid")
    n = len(q)
    t = pa.table({"run": pa.array([name] * n, pa.string()), "qid": pa.array(q["qid"].tolist(), pa.string()),
                  "docid": pa.array(q["docid"].tolist(), pa.string()),
                  "rank": pa.array(np.ones(n, np.int32), pa.int32()),
                  "score": pa.array(np.ones(n, float), pa.float64())}, schema=RUN_SCHEMA)
    return canonicalize(t) if n else t


def expand_to_classes(qrels: pa.Table, classes: pa.Table | None) -> pa.Table:
    """Every member of a class whose id is in ``qrels`` gets that qrel's grade."""
    if classes is None or qrels.num_rows == 0:
        return qrels
    q = qrels.to_pandas()
    members = pd.DataFrame({"docid": classes["docid"].to_pylist(), "class_id": classes["class_id"].to_pylist()})
    x = q.merge(members, left_on="docid", right_on="class_id", how="inner", suffixes=("_c", ""))
    x = x[["qid", "docid", "rel"]]
    out = pd.concat([q[["qid", "docid", "rel"]], x]).sort_values("rel", ascending=False).drop_duplicates(["qid", "docid"])
    t = pa.table({"qid": out["qid"].astype(str).tolist(), "docid": out["docid"].astype(str).tolist(),
                  "rel": pa.array(out["rel"].astype(np.int32).to_numpy(), pa.int32())})
    return sort_qrels(t.cast(QRELS_SCHEMA))


@declared_defaults(PrefsParams)
def confidence_interval(values: np.ndarray, *, method: str = "t", level: float = 0.95, n_resamples: int = 10000,
                        seed: int = AS_DECLARED, key: str = "") -> tuple[float, float]:
    """The ``method`` interval of the mean of ``values`` (module documentation)."""
    from scipy import stats  # lazy: scipy.stats takes ~1-2 s to import

    x = np.asarray(values, float)
    x = x[~np.isnan(x)]
    n = len(x)
    if n < 2:
        return (float("nan"), float("nan"))
    if method == "t":
        m = float(x.mean())
        half = float(stats.t.ppf(0.5 + level / 2, n - 1) * x.std(ddof=1) / np.sqrt(n))
        return (m - half, m + half)
    if method == "bootstrap":
        if np.all(x == x[0]):
            return (float(x[0]), float(x[0]))
        res = stats.bootstrap((x,), np.mean, n_resamples=n_resamples, confidence_level=level, method="percentile",
                              vectorized=True, rng=np.random.default_rng([seed, stable_int("ci", key)]))
        return (float(res.confidence_interval.low), float(res.confidence_interval.high))
    raise InputError("bad-option", f"confidence interval must be one of {', '.join(CI_METHODS)}, got {method!r}")


def _cutoff(measure: str) -> int | None:
    try:
        m = ir_measures.parse_measure(measure)
    except (ValueError, NameError, SyntaxError, TypeError) as exc:
        raise InputError("bad-measure", f"not an ir-measures measure: {measure!r} ({exc})") from None
    k = m.params.get("cutoff")
    return int(k) if k is not None else None


def _ranks(values: pd.Series) -> pd.Series:
    """Rank 1 = highest value; equal values share the best rank ("1224"), compared as the
    leaderboard writes them (in full)."""
    return pd.Series(competition_ranks(values, decimals=None), index=values.index, dtype="Int64")


@declared_defaults(PrefsParams, perfect_min_rel=TOP1["perfect_min_rel"], perfect_mode=TOP1["perfect"])
def rescore(
    runs: pa.Table,
    original: pa.Table,
    prefs: pa.Table,
    *,
    measure: str = AS_DECLARED,
    rel: int = AS_DECLARED,
    classes: pa.Table | None = None,
    perfect: bool = True,
    perfect_min_rel: int = AS_DECLARED,
    perfect_mode: str = AS_DECLARED,
    perfect_qrels: pa.Table | None = None,
    ci: str = AS_DECLARED,
    level: float = 0.95,
    n_resamples: int = 10000,
    seed: int = AS_DECLARED,
) -> Rescored:
    """MRR@10 of every run on preference vs original qrels, intervals and tau (module doc)."""
    if ci not in CI_METHODS:
        raise InputError("bad-option", f"confidence interval must be one of {', '.join(CI_METHODS)}, got {ci!r}")
    if not 0 < level < 1:
        raise InputError("bad-option", f"confidence level must be in (0, 1), got {level}")
    pq_ = prefs.filter(pc.greater(prefs["rel"], 0)).select(["qid", "docid", "rel"]).cast(QRELS_SCHEMA)
    if pq_.num_rows == 0:
        raise InputError("no-judgments", "the preference qrels are empty")
    pq_ = expand_to_classes(pq_, classes)
    topics = sorted(set(pq_["qid"].to_pylist()))
    orig_sel = original.filter(pc.is_in(original["qid"], value_set=pa.array(topics, pa.string())))
    if judged(orig_sel).num_rows == 0:
        raise InputError("no-judgments", "the original qrels judge none of the preference qrels' topics")
    table = runs.select(RUN_SCHEMA.names).cast(RUN_SCHEMA)
    cutoff = _cutoff(measure)
    if cutoff is not None:  # a measure with a cutoff k never looks below rank k: score the top k only
        table = table.filter(pc.less_equal(table["rank"], pa.scalar(cutoff, pa.int32())))
    names = sorted(set(table["run"].to_pylist()))
    if perfect:
        if PERFECT in names:
            raise InputError("run-name", f"a run is named {PERFECT!r}, the name of the perfect run")
        src = original if perfect_qrels is None else perfect_qrels
        table = pa.concat_tables([table, perfect_run(src, min_rel=perfect_min_rel, mode=perfect_mode)])
    all_names = names + ([PERFECT] if perfect else [])
    ev_p = evaluate(table, pq_, [measure], run_names=all_names)
    ev_o = evaluate(table, orig_sel, [measure], rel=rel, run_names=all_names)
    ev_a = evaluate(table, original, [measure], rel=rel, run_names=all_names)
    wp = per_query_matrix(ev_p.per_query, ev_p.measures[0], all_names)
    wo = per_query_matrix(ev_o.per_query, ev_o.measures[0], all_names)
    sp = dict(zip(*[ev_p.summary[c].to_pylist() for c in ("run", "value")]))
    so = dict(zip(*[ev_o.summary[c].to_pylist() for c in ("run", "value")]))
    sa = dict(zip(*[ev_a.summary[c].to_pylist() for c in ("run", "value")]))
    rows = []
    for r in all_names:
        lo_o, hi_o = confidence_interval(wo[r].to_numpy(), method=ci, level=level, n_resamples=n_resamples, seed=seed,
                                         key=f"original\x1f{r}")
        lo_p, hi_p = confidence_interval(wp[r].to_numpy(), method=ci, level=level, n_resamples=n_resamples, seed=seed,
                                         key=f"prefs\x1f{r}")
        rows.append((r, r == PERFECT and perfect, so[r], lo_o, hi_o, pd.NA, sp[r], lo_p, hi_p, pd.NA, sa[r],
                     len(ev_o.topics), len(ev_p.topics), len(ev_a.topics)))
    board = pd.DataFrame(rows, columns=BOARD_COLUMNS)
    real = ~board["perfect"]
    board.loc[real, "rank_original"] = _ranks(board.loc[real, "mrr_original"])
    board.loc[real, "rank_prefs"] = _ranks(board.loc[real, "mrr_prefs"])
    board["rank_original"] = board["rank_original"].astype("Int64")
    board["rank_prefs"] = board["rank_prefs"].astype("Int64")
    board = board.sort_values(["perfect", "mrr_original", "run"], ascending=[False, False, True], kind="stable")
    board = board.reset_index(drop=True)
    corr = leaderboard_correlation({r: so[r] for r in names}, {r: sp[r] for r in names})
    pq_rows = []
    for r in all_names:
        for q in wp.index:
            pq_rows.append((r, q, float(wo[r].get(q, np.nan)) if q in wo.index else np.nan, float(wp[r][q])))
    per_query = pd.DataFrame(pq_rows, columns=["run", "qid", "original", "prefs"])
    summary = {
        "measure": ev_p.measures[0], "measure_original": ev_o.measures[0], "topics": len(ev_p.topics),
        "topics_original": len(ev_o.topics), "topics_original_all": len(ev_a.topics), "runs": len(names),
        "pref_qrels": pq_.num_rows, "ci": ci, "level": level,
        "kendall_tau": corr.get("kendall_tau"), "kendall_p": corr.get("kendall_p"),
        "tau_ap_original": corr.get("tau_ap_a"), "tau_ap_prefs": corr.get("tau_ap_b"),
        "policy": ev_p.policy_line(),
    }
    if perfect:
        summary["perfect_mrr_prefs"] = sp[PERFECT]
        summary["perfect_mrr_original"] = so[PERFECT]
    return Rescored(leaderboard=board, per_query=per_query, correlation=corr, measure=ev_p.measures[0], ci=ci,
                    level=level, summary=summary)


def plot_rescore(res: Rescored, path, *, title: str | None = None) -> None:
    """Figure 5 of the paper: MRR@10 on preference vs original qrels (one point per run, the
    perfect run's preference score as a dashed line), then both leaderboards with confidence
    intervals, runs in the original order. PNG without a timestamp."""
    plt = pyplot()

    b = res.leaderboard
    real = b[~b["perfect"]]
    name = f"M{res.measure}" if res.measure.startswith("RR") else f"mean {res.measure}"
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), dpi=100)
    ax = axes[0]
    ax.scatter(real["mrr_original"], real["mrr_prefs"], s=18, zorder=3)
    for r, x, y in zip(real["run"], real["mrr_original"], real["mrr_prefs"]):
        ax.annotate(r, (x, y), fontsize=6, xytext=(2, 2), textcoords="offset points")
    if b["perfect"].any():
        p = b[b["perfect"]].iloc[0]
        ax.axhline(p["mrr_prefs"], color="tab:green", ls="--", lw=1,
                   label=f"perfect run on preference qrels ({p['mrr_prefs']:.3f})")
        ax.legend(fontsize=7, loc="lower right")
    tau = res.correlation.get("kendall_tau")
    ax.set_title(f"{name}: preference vs original qrels (Kendall's tau = {tau:.2f})" if tau == tau else
                 f"{name}: preference vs original qrels", fontsize=9)
    ax.set_xlabel(f"{name}, original qrels")
    ax.set_ylabel(f"{name}, preference qrels")
    order = list(b["run"])
    x = np.arange(len(order))
    for ax, col, lab in ((axes[1], "original", "original qrels"), (axes[2], "prefs", "preference qrels")):
        m = b[f"mrr_{col}"].to_numpy(float)
        lo = m - b[f"ci_{col}_low"].to_numpy(float)
        hi = b[f"ci_{col}_high"].to_numpy(float) - m
        ax.errorbar(x, m, yerr=np.vstack([np.nan_to_num(lo), np.nan_to_num(hi)]), fmt="o", ms=3, capsize=2)
        ax.set_xticks(x, order, rotation=90, fontsize=6)
        ax.set_title(f"{name} on {lab}, {int(res.level * 100)}% CI ({res.ci})", fontsize=9)
        ax.set_ylim(0, 1.05)
    fig.suptitle(title or "Re-scoring on preference qrels", fontsize=10)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
    plt.close(fig)
