"""CAL as a judging strategy over a pool (issue 23, qrelkit.cal.budget): the order holds each pool
document once, starts with the judged depth-k pool, covers the whole pool without a budget, is
cut to a budget as a prefix, is deterministic for a seed, and finds relevant documents earlier
than docid order on a collection whose relevant documents share words with their query."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from qrelkit.cal.budget import cal_pool_order, cal_pool_orders, seed_order
from qrelkit.cal.features import build_features
from qrelkit.cal.params import CalParams
from qrelkit.errors import InputError
from qrelkit.pooler.adjudication import pool_from_lists


@pytest.fixture(scope="module")
def coll(tmp_path_factory):
    """A simulated campaign (4 topics, 9 runs) pooled at depth 50 (130-220 documents a topic),
    grade 3 relevant (1-68 relevant pool documents a topic); its queries are made of the topic
    terms its relevant passages carry."""
    from qrelkit.io.qrels import read_qrels  # lazy: as the other fixtures, only for this module
    from qrelkit.io.runs import read_runs
    from qrelkit.io.topics import read_topics
    from qrelkit.pooler import depth_pool, topic_pools
    from qrelkit.simulate.campaign import simulate_campaign

    d = tmp_path_factory.mktemp("calbudget")
    simulate_campaign(d, n_passages=4000, n_topics=4, n_groups=2, depth=50, seed=5)
    pools = topic_pools(depth_pool(read_runs(d / "runs").table, 50))
    q = read_qrels(d / "qrels.txt")
    rel: dict[str, set[str]] = {}
    for qid, doc, g in zip(q["qid"].to_pylist(), q["docid"].to_pylist(), q["rel"].to_pylist()):
        if g >= 3:
            rel.setdefault(qid, set()).add(doc)
    work = d / "work"
    orders = cal_pool_orders(d / "corpus.jsonl", read_topics(d / "topics.tsv"), pools, rel, workdir=work)
    return {"dir": d, "pools": pools, "rel": rel, "topics": read_topics(d / "topics.tsv"), "orders": orders,
            "work": work}


@pytest.fixture(scope="module")
def feats(coll):
    """The features of the pools' documents, built once for the calls that pass ``features=``."""
    universe = sorted({doc for p in coll["pools"].values() for doc in p.docids})
    return build_features(coll["dir"] / "corpus.jsonl", universe=pa.array(universe, pa.string()))


def test_without_a_budget_the_order_is_the_whole_pool_each_document_once(coll):
    assert list(coll["orders"]) == list(coll["pools"])
    for qid, pool in coll["pools"].items():
        order = coll["orders"][qid]
        assert len(order) == pool.n_docs and sorted(order) == list(pool.docids), qid


def test_the_order_starts_with_the_depth_k_pool(coll, feats):
    for qid, pool in coll["pools"].items():
        top1 = {docs[0] for docs in pool.lists().values()}
        assert set(coll["orders"][qid][: len(top1)]) == top1, qid
    orders3 = cal_pool_orders(None, coll["topics"], coll["pools"], coll["rel"], budget=60, seed_k=3, features=feats)
    for qid, pool in coll["pools"].items():
        top3 = {doc for docs in pool.lists().values() for doc in docs[:3]}
        assert set(orders3[qid][: len(top3)]) == top3 and len(orders3[qid]) == 60, qid


def test_the_temporary_features_are_removed(coll):
    assert coll["work"].is_dir() and list(coll["work"].iterdir()) == []


def test_a_budget_cuts_the_order_without_changing_what_comes_before(coll, feats):
    """The order at a budget is the first documents of the order without one (and the features
    passed give what the features built gave)."""
    for b in (0, 3, 45, 100):
        cut = cal_pool_orders(None, coll["topics"], coll["pools"], coll["rel"], budget=b, features=feats)
        for qid, pool in coll["pools"].items():
            assert cut[qid] == coll["orders"][qid][: min(b, pool.n_docs)], (b, qid)


def test_deterministic_for_a_seed(coll, feats):
    pools = {q: coll["pools"][q] for q in ("1002", "1004")}
    again = cal_pool_orders(None, coll["topics"], pools, coll["rel"], features=feats)
    assert again == {q: coll["orders"][q] for q in pools}
    other = cal_pool_orders(None, coll["topics"], pools, coll["rel"], features=feats, params=CalParams(seed=9))
    assert other != again  # the seed draws the random negatives


def test_cal_finds_more_relevant_documents_in_the_first_half_than_docid_order(coll):
    """Qualitative: the queries share words with the relevant documents, so CAL's first half of
    each pool holds more of them (summed over the topics) than the docid order's first half, and
    than the same seed followed by docid order (the gain is CAL's, not the seed's)."""
    cal = docid = seeded = 0
    for qid, pool in coll["pools"].items():
        rel, half = coll["rel"].get(qid, set()), pool.n_docs // 2
        seed = seed_order(pool, 1)
        cal += sum(d in rel for d in coll["orders"][qid][:half])
        docid += sum(d in rel for d in pool.docids[:half])
        seeded += sum(d in rel for d in (seed + [d for d in pool.docids if d not in set(seed)])[:half])
    assert cal > docid and cal > seeded, (cal, docid, seeded)


TOY = pa.table({"pid": ["d1", "d2", "d3", "d4"], "text": ["red apple pie", "blue sky", "apple tart recipe", "green grass"]})
TOY_POOL = pool_from_lists("7", {"a": ["d2", "d1", "d4"], "b": ["d4", "d3", "d9"]})  # d9 is not in the corpus


def test_pool_documents_cal_cannot_rank_come_last_in_docid_order():
    topics = pd.DataFrame({"qid": ["7"], "text": ["apple"]})
    order = cal_pool_orders(TOY, topics, {"7": TOY_POOL}, {"7": {"d1"}}, params=CalParams(batch_size=1))["7"]
    assert order[:2] == ["d2", "d4"] and order[-1] == "d9" and sorted(order) == list(TOY_POOL.docids)
    # no relevant document in the features: nothing to learn, the seed then docid order
    feats = build_features(TOY)
    assert cal_pool_order(feats, "7", "apple", TOY_POOL, {"d9"}) == ["d2", "d4", "d1", "d3", "d9"]
    assert cal_pool_order(feats, "7", "apple", TOY_POOL, {"d1"}, budget=1, seed_k=2) == ["d2"]


def test_seed_order_is_rank_order():
    assert seed_order(TOY_POOL, 2) == ["d2", "d4", "d1", "d3"]
    assert seed_order(TOY_POOL, 0) == []


def test_bad_input():
    topics = pd.DataFrame({"qid": ["8"], "text": ["apple"]})
    with pytest.raises(InputError) as e:
        cal_pool_orders(TOY, topics, {"7": TOY_POOL}, {})
    assert e.value.rule == "unknown-topic"
    for kw in ({"budget": -1}, {"seed_k": -2}):
        with pytest.raises(InputError) as e:
            cal_pool_orders(TOY, topics, {"7": TOY_POOL}, {}, **kw)
        assert e.value.rule == "bad-option"
