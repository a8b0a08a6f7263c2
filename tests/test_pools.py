"""Pools on hand-built runs: provenance, assessor order, depth, classes, judged handling."""

from __future__ import annotations

import pyarrow as pa
import pytest

from qrelkit.errors import InputError
from qrelkit.io.classes import dedupe_runs
from qrelkit.io.runs import canonicalize
from qrelkit.pooler import filter_runs
from qrelkit.pooler.pools import depth_pool, fused_pool, pool_size_distribution, top1_pool


def runs_table(rows):
    """rows: (run, qid, docid, score)"""
    return canonicalize(pa.table({
        "run": [r[0] for r in rows], "qid": [r[1] for r in rows],
        "docid": [r[2] for r in rows], "score": [float(r[3]) for r in rows],
    }))


@pytest.fixture
def runs():
    return runs_table([
        ("A", "1", "d1", 3), ("A", "1", "d2", 2), ("A", "1", "d3", 1),
        ("B", "1", "d2", 9), ("B", "1", "d4", 8), ("B", "1", "d1", 7),
        ("C", "1", "d5", 5), ("C", "1", "d2", 4),
        ("A", "2", "x", 1), ("B", "2", "y", 1),
        ("A", "10", "z", 1),
    ])


def test_depth_pool_provenance_and_order(runs):
    pool = depth_pool(runs, 2)
    rows = [(r["qid"], r["docid"], r["position"], r["min_rank"], r["n_runs"], [(p["run"], p["rank"]) for p in r["runs"]])
            for r in pool.to_pylist()]
    assert rows == [
        # topic 1: rank-1 items first; d2 (2 runs) before d1 and d5 (1 run each); then docid
        ("1", "d2", 1, 1, 3, [("B", 1), ("A", 2), ("C", 2)]),
        ("1", "d1", 2, 1, 1, [("A", 1)]),
        ("1", "d5", 3, 1, 1, [("C", 1)]),
        ("1", "d4", 4, 2, 1, [("B", 2)]),
        ("2", "x", 1, 1, 1, [("A", 1)]),
        ("2", "y", 2, 1, 1, [("B", 1)]),
        ("10", "z", 1, 1, 1, [("A", 1)]),  # natural topic order: 1, 2, 10
    ]


def test_depth_uses_canonical_tie_order():
    # equal scores: docid descending decides, as trec_eval: "b" before "a"
    t = runs_table([("A", "1", "a", 1.0), ("A", "1", "b", 1.0), ("A", "1", "c", 0.5)])
    pool = depth_pool(t, 1)
    assert pool["docid"].to_pylist() == ["b"]


def test_per_run_depth(runs):
    pool = depth_pool(runs, 1, per_run_depth={"B": 3})
    got = {(r["qid"], r["docid"]) for r in pool.to_pylist()}
    assert ("1", "d1") in got and ("1", "d4") in got  # B's ranks 2, 3
    assert ("1", "d2") in got
    assert all(r["min_rank"] <= 3 for r in pool.to_pylist())
    assert ("1", "d3") not in got  # A only to depth 1


def test_bad_depth(runs):
    with pytest.raises(InputError) as e:
        depth_pool(runs, 0)
    assert e.value.rule == "bad-option"


def test_classes_pool_class_ids(runs):
    classes = pa.table({"docid": ["d1", "d2", "d5"], "class_id": ["d1", "d1", "d5"]})
    pool = depth_pool(runs, 2, classes=classes)
    items = {r["docid"]: r for r in pool.filter(pa.compute.equal(pool["qid"], "1")).to_pylist()}
    # B: d2->d1 (rank 1), d4 (rank 2); d1 is a duplicate of the class and dropped. A: d1, d2 dup -> d1, d3
    assert set(items) == {"d1", "d4", "d5", "d3"}
    assert items["d1"]["n_runs"] == 3
    assert [(p["run"], p["rank"]) for p in items["d1"]["runs"]] == [("A", 1), ("B", 1), ("C", 2)]
    assert items["d3"]["min_rank"] == 2  # A deduped: d1, d3 (renumbered)


def test_dedupe_runs_renumbers():
    t = runs_table([("A", "1", "a", 3), ("A", "1", "b", 2), ("A", "1", "c", 1)])
    classes = pa.table({"docid": ["a", "b"], "class_id": ["a", "a"]})
    d = dedupe_runs(t, classes)
    assert d["docid"].to_pylist() == ["a", "c"]
    assert d["rank"].to_pylist() == [1, 2]
    assert d["class_id"].to_pylist() == ["a", "c"]
    d = dedupe_runs(t, classes, depth=1)
    assert d["docid"].to_pylist() == ["a"]


def test_judged_mark_and_drop(runs):
    qrels = pa.table({"qid": ["1", "1", "2"], "docid": ["d2", "d4", "x"], "rel": pa.array([2, -1, 0], pa.int32())})
    marked = depth_pool(runs, 2, qrels=qrels, judged="mark")
    m = {(r["qid"], r["docid"]): (r["judged"], r["rel"]) for r in marked.to_pylist()}
    assert m[("1", "d2")] == (True, 2)
    assert m[("1", "d4")] == (False, None)  # negative grade = pooled, not judged
    assert m[("2", "x")] == (True, 0)
    dropped = depth_pool(runs, 2, qrels=qrels, judged="drop")
    keys = [(r["qid"], r["docid"], r["position"]) for r in dropped.to_pylist()]
    assert ("1", "d2", 1) not in keys and ("2", "x", 1) not in keys
    assert [k for k in keys if k[0] == "1"] == [("1", "d1", 1), ("1", "d5", 2), ("1", "d4", 3)]
    assert "judged" not in dropped.column_names


def test_top1_with_perfect_run(runs):
    qrels = pa.table({"qid": ["1", "1", "2"], "docid": ["d2", "q1", "x"], "rel": pa.array([1, 2, 0], pa.int32())})
    pool = top1_pool(runs, qrels=qrels)
    rows = {(r["qid"], r["docid"]): r for r in pool.to_pylist()}
    assert set(rows) == {("1", "d1"), ("1", "d2"), ("1", "d5"), ("1", "q1"), ("2", "x"), ("2", "y"), ("10", "z")}
    assert rows[("1", "d2")]["in_qrels"] and rows[("1", "d2")]["n_runs"] == 1
    assert rows[("1", "q1")]["n_runs"] == 0 and rows[("1", "q1")]["min_rank"] is None
    assert rows[("1", "q1")]["position"] == 4  # items no run retrieved come last
    assert not rows[("2", "x")]["in_qrels"]  # grade 0 is not a relevant "perfect" answer
    dist = pool_size_distribution(pool)
    assert dist["sizes"] == {"1": 4, "2": 2, "10": 1}
    assert dist["histogram"] == {1: 1, 2: 1, 4: 1}
    assert dist["median"] == 2.0


def test_fused_rrf_and_rbp_any_qid():
    t = runs_table([
        ("A", "q-b", "a", 3), ("A", "q-b", "b", 2), ("A", "q-b", "c", 1),
        ("B", "q-b", "c", 3), ("B", "q-b", "b", 2), ("B", "q-b", "a", 1),
        ("B", "q-a", "z", 1),
    ])
    rrf = fused_pool(t, 2, method="rrf", k=60)
    got = [(r["qid"], r["docid"]) for r in rrf.to_pylist()]
    # b: 2/(62); a, c: 1/61 + 1/63 > 2/62 -> a and c tie, docid ascending
    assert got == [("q-a", "z"), ("q-b", "a"), ("q-b", "c")]
    rbp = fused_pool(t, 1, method="rbp", p=0.5)
    assert [(r["qid"], r["docid"]) for r in rbp.to_pylist()] == [("q-a", "z"), ("q-b", "a")]
    assert rbp["fused_score"].to_pylist()[1] == pytest.approx(0.5 + 0.5 * 0.25)


def test_filter_runs(runs):
    assert set(filter_runs(runs, ["A"])["run"].to_pylist()) == {"A"}


def test_top1_perfect_best_only(runs):
    qrels = pa.table({"qid": ["1", "1", "1"], "docid": ["q1", "q2", "q3"], "rel": pa.array([3, 3, 2], pa.int32())})
    pool = top1_pool(runs, qrels=qrels, perfect="best")
    extra = {r["docid"] for r in pool.to_pylist() if r["in_qrels"]}
    assert extra == {"q1", "q2"}
    with pytest.raises(InputError):
        top1_pool(runs, qrels=qrels, perfect="some")
