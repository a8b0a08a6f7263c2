"""The closing stages of a campaign: final qrels (passages, expanded to near-duplicates,
documents), evaluation of every run (with a leaderboard and confidence intervals, and deduplicated
runs vs. expanded qrels), reusability (leave-one-group-out) — all files under the campaign folder."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.campaign.judging import Waiting
from qrelkit.campaign.stages import Context
from qrelkit.dedupe.apply import expansion_table
from qrelkit.errors import InputError
from qrelkit.evaluate import evaluate
from qrelkit.evaluate.duplicates import duplicate_effects
from qrelkit.evaluate.protocol import scoring_options
from qrelkit.io.order import competition_ranks
from qrelkit.io.qrels import read_qrels, write_qrels
from qrelkit.labels.propagate import expand_qrels, passage_document_map, propagate_to_documents
from qrelkit.pooler import pooled_flag
from qrelkit.reuse import leave_out
from qrelkit.reuse.study import leave_out_options

QRELS_PASSAGES, QRELS_EXPANDED, QRELS_DOCUMENTS = "qrels-passages.txt", "qrels-expanded.txt", "qrels-documents.txt"


def final_topics(ctx: Context) -> list[str]:
    """Topics in the final qrels: accepted by the stopping rule (CAL), else kept at screening."""
    ct = ctx.store.state.topics()
    dec = dict(zip(ct["qid"], ct["decision"]))
    if ctx.enabled("cal"):
        return [q for q in ctx.inputs.topic_ids if dec.get(q) == "accept"]
    return [q for q in ctx.inputs.topic_ids if dec.get(q) != "discarded"]


def stage_qrels(ctx: Context) -> dict | Waiting:
    """The final qrels of the campaign's accepted topics: writes the passage qrels, the qrels
    expanded to near-duplicates (and ``expansion.csv``), and the document qrels when the corpus maps
    passages to documents (else a warning); returns the counts (topics, passages, expanded, documents).
    Waits first for items owed again (a judgment retracted by a correction, ``campaign judgments
    retract``, after the judging stages were done): the qrels are made from the judgments asked for."""
    wait = ctx.judging.judge("qrels")
    if wait:
        return wait
    keep = final_topics(ctx)
    q = ctx.store.judgments.export_qrels(combine=ctx.settings.combine)
    q = q.filter(pa.compute.is_in(q["qid"], value_set=pa.array(keep, pa.string())))
    write_qrels(q, ctx.dir / QRELS_PASSAGES)
    summary = {"topics": len(keep), "passages": int(q.num_rows)}
    exp = expand_qrels(q, ctx.inputs.classes, relevant_at=min(ctx.settings.relevant))
    write_qrels(exp.qrels, ctx.dir / QRELS_EXPANDED)
    ctx.write(expansion_table(q, exp.qrels, labels=list(ctx.settings.labels.scale)), "expansion.csv",
              "qrels-expansion")
    summary["expanded"] = int(exp.qrels.num_rows)
    if exp.qrels.num_rows == 0:
        write_qrels(exp.qrels, ctx.dir / QRELS_DOCUMENTS)
        ctx.store.state.warn("qrels", "no topic accepted: the final qrels are empty")
        return summary
    try:
        mapping = passage_document_map(corpus=ctx.corpus, passages=exp.qrels["docid"].to_pylist())
        docs = propagate_to_documents(exp.qrels, mapping, rule=ctx.settings.labels.document_rule,
                                      grade_map=ctx.settings.labels.grade_map or None)
        write_qrels(docs.qrels, ctx.dir / QRELS_DOCUMENTS)
        summary["documents"] = int(docs.qrels.num_rows)
    except InputError as exc:
        ctx.store.state.warn("qrels", f"no document qrels: {exc.message}")
    return summary


def _final(ctx: Context, name: str):
    """The final qrels written by the qrels stage, or None when they are empty (no topic accepted)."""
    p = ctx.dir / name
    return read_qrels(p) if p.stat().st_size else None


def leaderboard(per_query: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per run and measure: topics, mean and a t confidence interval over the topics (scipy), and
    the run's rank: runs whose means print equal (6 digits) share a rank ("1224"); rows in rank
    order, then by run name."""
    from scipy import stats  # lazy: scipy.stats takes about a second to import; `campaign status` and `init` need none

    rows = []
    for (measure, run), g in per_query.groupby(["measure", "run"], sort=True):
        v = g["value"].to_numpy(dtype=float)
        m = float(v.mean()) if len(v) else float("nan")
        if len(v) > 1 and np.std(v) > 0:
            lo, hi = stats.t.interval(level, len(v) - 1, loc=m, scale=stats.sem(v))
        else:
            lo = hi = m
        rows.append((measure, run, len(v), m, float(lo), float(hi)))
    df = pd.DataFrame(rows, columns=["measure", "run", "topics", "mean", "ci_low", "ci_high"])
    df = df.round({"mean": 6, "ci_low": 6, "ci_high": 6})
    df = df.sort_values(["measure", "mean", "run"], ascending=[True, False, True], kind="stable")
    df["rank"] = df.groupby("measure", sort=False)["mean"].transform(competition_ranks)  # ties share a rank
    return df.reset_index(drop=True)


def stage_evaluate(ctx: Context) -> dict:
    """Score every run against the expanded final qrels: writes per-query scores, the summary
    and the leaderboard (and deduplicated runs vs. expanded qrels when there are classes); returns the
    counts of topics and runs and the measures (``{"topics": 0}`` and a warning when no topic is left)."""
    q = _final(ctx, QRELS_EXPANDED)
    if q is None:
        ctx.store.state.warn("evaluate", "no topic in the final qrels: nothing to evaluate")
        return {"topics": 0}
    opts = scoring_options(ctx.settings.eval, ctx.settings.labels)
    ev = evaluate(ctx.inputs.runset.table, q, opts["measures"], missing=opts["missing"], rel=opts["rel"],
                  run_names=ctx.inputs.runset.runs, ranking=opts["ranking"])
    for run, missing in sorted(ev.missing_by_run.items()):
        if missing:
            ctx.store.state.warn("evaluate", f"run {run}: {len(missing)} judged topic(s) not in the run "
                                 f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''}): missing = {ev.missing}")
    pq = ev.per_query.to_pandas()
    ctx.write(pq, "eval-per-query.csv", "eval-per-query")
    ctx.write(ev.summary, "eval-summary.csv", "eval-summary")
    ctx.write(leaderboard(pq), "leaderboard.csv", "campaign-leaderboard")
    out = {"topics": len(ev.topics), "runs": len(ev.runs), "measures": ev.measures}
    if ctx.inputs.classes is not None:
        passages = read_qrels(ctx.dir / QRELS_PASSAGES)
        dup_opts = scoring_options(ctx.settings.eval, ctx.settings.labels, duplicates=True)
        dup = duplicate_effects(ctx.inputs.runset.table, passages, ctx.inputs.classes, dup_opts["measures"],
                                missing=dup_opts["missing"], rel=dup_opts["rel"], ranking=dup_opts["ranking"])
        ctx.write(dup.round(6), "eval-duplicates.csv", "eval-duplicates")
    return out


def stage_reuse(ctx: Context) -> dict:
    """The reusability study on the final passage qrels (:func:`qrelkit.reuse.leave_out`, with the
    ``[reuse]`` configuration): writes ``reuse-summary|runs|units|topics.csv``; returns the number of
    left-out units and of notes (``{"topics": 0}`` and a warning when no topic is left)."""
    q = _final(ctx, QRELS_PASSAGES)
    if q is None:
        ctx.store.state.warn("reuse", "no topic in the final qrels: no reusability study")
        return {"topics": 0}
    sel = ctx.inputs.selection
    res = leave_out(ctx.inputs.runset.table, q, sel.assign(pooled=[pooled_flag(v, r) for v, r in zip(sel["pooled"], sel["run"])]),
                    pool=pa.Table.from_pandas(ctx.inputs.pool, preserve_index=False), classes=ctx.inputs.classes, workers=1,
                    **leave_out_options(ctx.settings.reuse, ctx.settings.eval, ctx.settings.labels))
    for name in ("summary", "runs", "units", "topics"):
        ctx.write(res.tables()[name], f"reuse-{name}.csv", f"reuse-{name}")
    return {"units": int(res.units.num_rows), "notes": len(res.notes)}
