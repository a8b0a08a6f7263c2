"""Relevant documents found per topic by every adjudication strategy at judging budgets of 10-50%
of each topic's pool, on TREC 2003 Robust (../shared/data/robust03: 17 real runs, official qrels).

    python benchmarks/budget_robust03.py [--topics new|all] [--depth 100] [--json-out FILE]

The pool: the depth-``--depth`` pool of the 17 runs (``depth_pool``, all runs pooled) on the 50
new topics 601-650 (``--topics new``, the ones TREC 2003 pooled from its own runs) or on all 100.
The oracle: the official qrels, grade >= 1 relevant; a pool document outside them is not relevant
(as in the papers). Each strategy judges every topic's whole pool one document at a time
(``qrelkit.pooler.adjudication``, budget None); with one document per round a strategy's first
``b`` choices are its choices at budget ``b``, so the budget ``round(f * pool size)`` of a topic
is a prefix of that order. Prints a Markdown table (mean relevant found per topic, each strategy
by budget) and, with ``--json-out``, the figures per topic. docs/protocol.md, "Judging budgets on
Robust 2003 (measured)", holds its output. tests/test_adjudication_robust03.py asserts the published
ordering (mm-ns >= mtf > docid) on the same figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "robust03"
NEW_TOPICS = [str(q) for q in range(601, 651)]
FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5)


def load(data: Path = DATA, topics: str = "new") -> tuple[pa.Table, pa.Table]:
    """The 17 runs (lenient: real defects) and the official qrels, restricted to ``topics``."""
    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.runs import read_runs

    runs = read_runs(data / "runs", lenient=True).table
    qrels = read_qrels(data / "qrels" / "robust03_qrels.txt.gz")
    if topics == "new":
        keep = pa.array(NEW_TOPICS)
        runs = runs.filter(pc.is_in(runs["qid"], value_set=keep))
        qrels = qrels.filter(pc.is_in(qrels["qid"], value_set=keep))
    return runs, qrels


def relevant_found(runs: pa.Table, qrels: pa.Table, *, depth: int = 100, fractions=FRACTIONS,
                   strategies=None, rel: int = 1) -> pd.DataFrame:
    """One row per (strategy, fraction, qid): ``pool`` (the topic's pool size), ``budget``
    (``round(fraction * pool)``), ``found`` (relevant documents among the first ``budget``
    judged) and ``relevant`` (relevant documents in the pool)."""
    from qrelkit.pooler import adjudicate, available_strategies, depth_pool

    pool = depth_pool(runs, depth)
    sizes = pool.group_by("qid").aggregate([("docid", "count")]).to_pandas().set_index("qid")["docid_count"]
    rows = []
    for s in strategies or available_strategies():
        order = adjudicate(pool, qrels, s, budget=None, rel=rel).to_pandas()
        total = order.groupby("qid")["relevant"].sum()
        for f in fractions:
            budget = (sizes * f).round().astype(int)
            judged = order[order["step"] <= order["qid"].map(budget)]
            found = judged.groupby("qid")["relevant"].sum().reindex(sizes.index, fill_value=0)
            rows += [{"strategy": s, "fraction": f, "qid": q, "pool": int(sizes[q]), "budget": int(budget[q]),
                      "found": int(found[q]), "relevant": int(total.get(q, 0))} for q in sizes.index]
    return pd.DataFrame(rows)


def table(per_topic: pd.DataFrame) -> pd.DataFrame:
    """Mean relevant found per topic: strategies (rows, in registration order) by fraction."""
    t = per_topic.pivot_table(index="strategy", columns="fraction", values="found", aggfunc="mean")
    return t.loc[list(dict.fromkeys(per_topic["strategy"]))]


def markdown(t: pd.DataFrame, per_topic: pd.DataFrame) -> str:
    one = per_topic.drop_duplicates("qid")
    head = "| strategy | " + " | ".join(f"{f:.0%} of the pool" for f in t.columns) + " |"
    lines = [f"{len(one)} topics; pool {one['pool'].mean():.1f} documents per topic on average "
             f"({one['pool'].min()}-{one['pool'].max()}), {one['relevant'].mean():.2f} of them relevant "
             f"({one['relevant'].sum()} in all); mean relevant documents found per topic:", "",
             head, "|---" * (len(t.columns) + 1) + "|"]
    for s, row in t.iterrows():
        lines.append(f"| `{s}` | " + " | ".join(f"{v:.2f}" for v in row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topics", choices=["new", "all"], default="new")
    p.add_argument("--depth", type=int, default=100)
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--json-out", type=Path, default=None)
    a = p.parse_args(argv)
    if not a.data.exists():
        print(f"no data at {a.data}", file=sys.stderr)
        return 2
    runs, qrels = load(a.data, a.topics)
    per_topic = relevant_found(runs, qrels, depth=a.depth)
    t = table(per_topic)
    print(markdown(t, per_topic))
    mm_ns, mtf, docid = (t.loc[s].to_numpy() for s in ("mm-ns", "mtf", "docid"))
    holds = bool(np.all(mm_ns >= mtf) and np.all(mtf > docid))
    print(f"\nmm-ns >= mtf > docid at every budget: {'holds' if holds else 'DOES NOT HOLD'}")
    if a.json_out:
        a.json_out.write_text(json.dumps({"topics": a.topics, "depth": a.depth, "ordering_holds": holds,
                                          "per_topic": per_topic.to_dict(orient="records")}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
