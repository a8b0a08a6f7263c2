"""Adjudication strategies on real runs: 17 TREC 2003 Robust runs (../shared/data/robust03), their
depth-100 pool on the 50 new topics 601-650, the official qrels as the oracle (a pool document
outside them is not relevant). At budgets of 10-50% of each topic's pool the published qualitative
result holds (Losada, Parapar and Barreiro, IP&M 2017): MaxMean non-stationary finds at least as
many relevant documents per topic on average as Move-To-Front, and Move-To-Front more than the
docid order. The ordering only: no threshold. The figures of every strategy are printed (``pytest
-s``) and are in docs/protocol.md, "Judging budgets on Robust 2003 (measured)", from
``benchmarks/budget_robust03.py``, whose computation this test shares."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import ROOT, shared

sys.path.insert(0, str(ROOT / "benchmarks"))
import budget_robust03 as study  # noqa: E402  (the figures of the doc, computed once)


@pytest.fixture(scope="module")
def found():
    runs, qrels = study.load(shared("robust03"), "new")
    per_topic = study.relevant_found(runs, qrels, depth=100)
    t = study.table(per_topic)
    print("\n" + study.markdown(t, per_topic))
    return runs, qrels, per_topic, t


def test_every_strategy_at_every_budget(found):
    from qrelkit.pooler import available_strategies

    _, _, per_topic, t = found
    assert list(t.index) == available_strategies() and len(t.index) >= 7
    assert list(t.columns) == list(study.FRACTIONS)
    assert per_topic["qid"].nunique() == 50
    assert (per_topic["found"] <= per_topic["relevant"]).all() and (per_topic["found"] <= per_topic["budget"]).all()
    assert (np.diff(t.to_numpy(), axis=1) >= 0).all()  # a larger budget never finds fewer


def test_published_ordering_mm_ns_mtf_docid(found):
    _, _, _, t = found
    for f in study.FRACTIONS:
        assert t.loc["mm-ns", f] >= t.loc["mtf", f] > t.loc["docid", f], (f, t[f].to_dict())


def test_docid_baseline_counted_by_hand(found):
    """The docid order's figures from the pool's sorted docids and the qrels, without the
    strategies' code."""
    from qrelkit.pooler import depth_pool

    runs, qrels, per_topic, _ = found
    pool = depth_pool(runs, 100)
    docs: dict[str, list[str]] = {}
    for q, d in zip(pool["qid"].to_pylist(), pool["docid"].to_pylist()):
        docs.setdefault(q, []).append(d)
    relevant = {(q, d) for q, d, r in zip(qrels["qid"].to_pylist(), qrels["docid"].to_pylist(),
                                          qrels["rel"].to_pylist()) if r >= 1}
    mine = per_topic[per_topic["strategy"] == "docid"]
    for row in mine.itertuples():
        first = sorted(docs[row.qid])[: round(row.fraction * len(docs[row.qid]))]
        assert row.found == sum((row.qid, d) in relevant for d in first), (row.qid, row.fraction)


def test_a_budget_is_a_prefix_of_the_whole_order(found):
    """The figures cut one whole-pool order at each budget: with one document per round, the
    order at budget b is the whole order's first b (checked on a few topics)."""
    from qrelkit.pooler import depth_pool, simulate_order, topic_pools

    runs, qrels, _, _ = found
    pools = topic_pools(depth_pool(runs, 100))
    relevant = {(q, d) for q, d, r in zip(qrels["qid"].to_pylist(), qrels["docid"].to_pylist(),
                                          qrels["rel"].to_pylist()) if r >= 1}
    for qid in ("601", "625", "650"):
        p = pools[qid]
        rel = np.array([(qid, d) in relevant for d in p.docids])
        for s in ("mtf", "hedge", "mm-ns"):
            whole = simulate_order(s, p, rel)
            b = round(0.3 * p.n_docs)
            assert simulate_order(s, p, rel, budget=b).tolist() == whole[:b].tolist(), (qid, s)
