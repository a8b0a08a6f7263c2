"""Adjudication strategies (issue 23): each against a hand-worked example whose judging order is
written here, worked out on paper from the formulas of docs/protocol.md ("Judging budgets"); and
properties every strategy holds on any pool (each document judged at most once; the whole budget
judges the whole pool; a smaller budget is a prefix; a campaign's rounds replay the same order)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qrelkit.errors import InputError
from qrelkit.pooler import AdjudicateParams
from qrelkit.pooler.adjudication import (adjudicate, available_strategies, next_round, pool_from_lists,
                                       register_strategy, run_strategy, simulate_order, topic_pools)

# Three runs over eight documents of one topic; p7, p5, p2 and p8 are relevant.
LISTS = {"A": ["p7", "p3", "p5", "p1"], "B": ["p2", "p7", "p8", "p3"], "C": ["p4", "p2", "p5", "p6"]}
RELEVANT = {"p7", "p5", "p2", "p8"}


def order(name: str, **kw) -> list[str]:
    pool = pool_from_lists("401", LISTS)
    rel = np.array([d in RELEVANT for d in pool.docids])
    return [pool.docids[i] for i in simulate_order(name, pool, rel, **kw)]


def test_docid_judges_in_docid_order():
    assert order("docid") == ["p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"]


def test_rank_is_round_robin_by_rank():
    # rank 1: A p7, B p2, C p4; rank 2: A p3 (B's p7 and C's p2 taken); rank 3: A p5, B p8 (C's p5
    # taken); rank 4: A p1 (B's p3 taken), C p6
    assert order("rank") == ["p7", "p2", "p4", "p3", "p5", "p8", "p1", "p6"]


def test_mtf_stays_with_a_run_while_it_finds_relevant_documents():
    # all runs at priority 0, ties to the first run: A p7 (rel) stays, p3 (not) -> A at -1.
    # B (0): p2 (rel), p7 passed over (judged), p8 (rel), p3 passed over: B is exhausted.
    # C (0): p4 (not) -> C at -1.  A and C at -1: A p5 (rel), p1 (not).  C: p6.
    assert order("mtf") == ["p7", "p3", "p2", "p8", "p4", "p5", "p1", "p6"]


def test_mm_takes_the_run_with_the_largest_posterior_mean():
    # (1 + relevant) / (2 + judged) over each run's judged prefix, ties to the first run:
    # A 1/2 -> p7 (rel); A 2/3 -> p3 (not); A 2/4 ties B, C at 1/2 -> A p5 (rel); A 3/5 -> p1 (not);
    # A exhausted; B 1/2 -> p2 (rel); B sees p2, p7: 3/4 -> p8 (rel); B exhausted; C: p4, then p6.
    assert order("mm") == ["p7", "p3", "p5", "p1", "p2", "p8", "p4", "p6"]


def test_mm_ns_weighs_older_judgments_less():
    # discount 0.5: each new observation a = 0.5 a + rel, b = 0.5 b + 1; mean (1 + a) / (2 + b).
    # A p7 (rel): A 2/3 -> p3 (not): A = (1 + 0.5) / (2 + 1.5) = 0.43 < B, C 1/2 -> B p2 (rel);
    # B sees p2, p7: a = b = 1.5, 0.71 -> p8 (rel); B sees p8, p3: 1.875 / 3.875 = 0.48, exhausted;
    # C 1/2 > A 0.43 -> p4 (not); C sees p4, p2: a = 1, b = 1.5, 2 / 3.5 = 0.57 -> p5 (rel);
    # C sees p5: 2.5 / 3.75 = 0.67; A sees p5: a = 1.25, b = 1.75, 2.25 / 3.75 = 0.6 -> C p6; A p1.
    params = AdjudicateParams(mm_ns_discount=0.5)
    assert order("mm-ns", params=params) == ["p7", "p3", "p2", "p8", "p4", "p5", "p6", "p1"]


def test_ucb_explores_every_run_then_takes_the_largest_bound():
    # mean + sqrt(2 ln n / n_k), an unseen run first: A p7, B p2, C p4 (n = 5: A 1 + 1.79, B seen
    # p2 p7: 1 + 1.27, C seen p4 p2: 0.5 + 1.27) -> A p3 (not); n = 6: B 1 + 1.34 -> p8 (rel); B
    # exhausted; n = 8: A and C 0.5 + 1.44, tie -> A p5 (rel); A and C both 2/3 + 1.24 -> A p1; C p6.
    assert order("ucb") == ["p7", "p2", "p4", "p3", "p8", "p5", "p1", "p6"]


def test_hedge_judges_the_largest_weighted_belief():
    # u at ranks 1-4 of 4: 1, 13/25, 7/25, 3/25; beliefs with weights 1: p2 = p7 = 1.52 (tie: docid
    # order) -> p2 (rel; losses A 0.5, B 0, C 0.24; weights 0.1**loss); p7 0.84 -> p7 (rel);
    # p3 0.23 -> p3 (not); p4 0.058 > p8 0.044 -> p4 (not); p8 0.014 -> p8 (rel); p5 -> p1 -> p6.
    assert order("hedge") == ["p2", "p7", "p3", "p4", "p8", "p5", "p1", "p6"]


def test_a_round_is_chosen_before_its_outcomes_are_seen():
    # MTF in rounds of 2: A p7, p3 (A's p3 chosen before p7's outcome); p3 not relevant -> A at -1;
    # then B p2, p8 (both relevant: B stays at 0) ...; budget 5 cuts the third round to 1: C p4.
    assert order("mtf", batch=2, budget=5) == ["p7", "p3", "p2", "p8", "p4"]


def test_documents_judged_before_are_never_chosen_and_inform_the_bandits():
    pool = pool_from_lists("401", LISTS)
    rel = np.array([d in RELEVANT for d in pool.docids])
    prior = np.array([d in {"p7", "p3"} for d in pool.docids])  # judged before (e.g. screening)
    got = [pool.docids[i] for i in simulate_order("mm", pool, rel, prior=prior)]
    assert set(got) == set(pool.docids) - {"p7", "p3"}
    # A has seen p7 (rel), p3 (not): 2/4; B and C 1/2: the tie goes to A -> p5 first
    assert got[0] == "p5"


@pytest.mark.parametrize("name", ["docid", "rank", "mtf", "hedge", "mm", "mm-ns", "ucb"])
def test_every_strategy_is_registered(name):
    assert name in available_strategies()


def test_a_plugin_strategy_registers_and_is_checked(registries):
    def reverse(pool, known, prior, batches):
        return np.arange(pool.n_docs - 1, -1, -1, dtype=np.int32)[: int(sum(batches))]

    def twice(pool, known, prior, batches):
        return np.zeros(2, np.int32)

    register_strategy("test-reverse", reverse)
    register_strategy("test-twice", twice)
    assert order("test-reverse")[:2] == ["p8", "p7"]
    assert "test-reverse" in available_strategies()
    with pytest.raises(InputError) as e:
        order("test-twice")
    assert e.value.rule == "bad-strategy"
    with pytest.raises(InputError) as e:
        order("no-such")
    assert e.value.rule == "bad-option"


def test_next_round_continues_the_campaign_order_and_refuses_a_changed_one():
    pool = pool_from_lists("401", LISTS)
    full = order("mtf", batch=3)
    first = next_round("mtf", pool, [], {}, size=3)
    assert first == full[:3]
    assert next_round("mtf", pool, [first], {first[0]: True}, size=3) == []  # the round is not all judged
    labels = {d: d in RELEVANT for d in first}
    second = next_round("mtf", pool, [first], labels, size=3)
    assert second == full[3:6]
    labels.update({d: d in RELEVANT for d in second})
    assert next_round("mtf", pool, [first, second], labels, size=3, budget=6) == []  # budget spent
    with pytest.raises(InputError) as e:
        next_round("docid", pool, [first], labels, size=3)
    assert e.value.rule == "adjudication-changed"


def test_adjudicate_replays_a_collection_with_the_qrels_as_oracle():
    import pyarrow as pa

    from qrelkit.pooler import depth_pool
    from qrelkit.simulate.toy import toy_qrels, toy_runs

    runs, qrels = toy_runs(), toy_qrels()
    pool = depth_pool(runs, 3)
    out = adjudicate(pool, qrels, "mtf", budget=2)
    assert out.column_names == ["qid", "docid", "step", "relevant"]
    assert set(out["step"].to_pylist()) <= {1, 2}
    truth = {(q, d): g for q, d, g in zip(*(qrels[c].to_pylist() for c in ("qid", "docid", "rel")))}
    for q, d, r in zip(*(out[c].to_pylist() for c in ("qid", "docid", "relevant"))):
        assert r == (truth.get((q, d), 0) >= 1)  # outside the qrels: not relevant
    assert isinstance(out, pa.Table)


# ----------------------------------------------------------------------------------- properties

POOLS = st.dictionaries(st.sampled_from("ABCDE"),
                        st.lists(st.sampled_from([f"d{i}" for i in range(12)]), min_size=1, max_size=8),
                        min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(lists=POOLS, seed=st.integers(0, 2**16), batch=st.integers(1, 4),
       name=st.sampled_from(["docid", "rank", "mtf", "hedge", "mm", "mm-ns", "ucb"]))
def test_each_document_once_and_the_whole_budget_judges_the_whole_pool(lists, seed, batch, name):
    pool = pool_from_lists("q", lists)
    rel = np.random.default_rng(seed).random(pool.n_docs) < 0.4
    full = simulate_order(name, pool, rel, batch=batch)
    assert sorted(full.tolist()) == list(range(pool.n_docs))  # every document, each once
    for budget in (0, 1, pool.n_docs // 2, pool.n_docs + 3):
        part = simulate_order(name, pool, rel, budget=budget, batch=batch)
        assert len(part) == min(budget, pool.n_docs)
        assert part.tolist() == full[: len(part)].tolist()  # a smaller budget is a prefix


@settings(max_examples=40, deadline=None)
@given(lists=POOLS, seed=st.integers(0, 2**16), size=st.integers(1, 4),
       name=st.sampled_from(["docid", "rank", "mtf", "hedge", "mm", "mm-ns", "ucb"]))
def test_campaign_rounds_replay_the_simulated_order(lists, seed, size, name):
    pool = pool_from_lists("q", lists)
    rng = np.random.default_rng(seed)
    rel = rng.random(pool.n_docs) < 0.4
    prior = [d for d in pool.docids if rng.random() < 0.2]
    pri = np.array([d in prior for d in pool.docids])
    expect = [pool.docids[i] for i in simulate_order(name, pool, rel, batch=size, prior=pri)]
    issued: list[list[str]] = []
    labels = {d: bool(rel[pool.docids.index(d)]) for d in prior}
    while True:
        r = next_round(name, pool, issued, labels, size=size, prior=prior)
        if not r:
            break
        issued.append(r)
        labels.update({d: bool(rel[pool.docids.index(d)]) for d in r})
    assert [d for r in issued for d in r] == expect
    assert not set(expect) & set(prior)


def test_topic_pools_follow_the_depth_pool_provenance():
    from qrelkit.pooler import depth_pool
    from qrelkit.simulate.toy import toy_runs

    pools = topic_pools(depth_pool(toy_runs(), 2))
    first = next(iter(pools.values()))
    assert first.runs == ("a", "b")
    assert first.lists() == {"a": ["p1", "p2"], "b": ["p3", "p2"]}


def test_run_strategy_stops_after_a_round_with_an_unknown_outcome():
    pool = pool_from_lists("401", LISTS)
    known = np.full(pool.n_docs, -1, np.int8)
    got = run_strategy("mm", pool, known, None, [2, 2, 2])
    assert len(got) == 2


def test_a_plugin_strategy_is_gone_after_its_test():
    """The registries fixture restores the strategies (a plugin registered in one test would
    otherwise be replayed by every later test that takes every strategy)."""
    assert not {"test-reverse", "test-twice"} & set(available_strategies())
