"""Assessor batches: split, assignment, per-assessor order, export and import rules."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from qrelkit.errors import InputError
from qrelkit.pooler.batches import import_batches, make_batches


def pool(n_per_topic=(5, 3)):
    rows = []
    for t, n in enumerate(n_per_topic, 1):
        for i in range(1, n + 1):
            rows.append((str(t), f"t{t}d{i}", i))
    return pa.table({"qid": [r[0] for r in rows], "docid": [r[1] for r in rows],
                     "position": pa.array([r[2] for r in rows], pa.int32())})


def test_split_first_n_then_rest():
    b = make_batches(pool(), first_n=3, assessors=1)
    sizes = b.groupby("batch_id").size().to_dict()
    assert sizes == {"1-1": 3, "1-2": 2, "2-1": 3}
    assert set(b.loc[b["batch_id"] == "1-1", "pool_position"]) == {1, 2, 3}
    assert set(b.loc[b["batch_id"] == "1-2", "part"]) == {2}


def test_k_assessors_distinct_and_balanced():
    b = make_batches(pool((10, 10, 10, 10)), first_n=100, assessors=4, per_item=2, seed=1)
    per_item = b.groupby(["qid", "docid"])["assessor"].agg(["nunique", "size"])
    assert (per_item["nunique"] == 2).all() and (per_item["size"] == 2).all()  # never one assessor twice
    load = b.groupby("assessor").size()
    assert load.max() - load.min() <= 10
    with pytest.raises(InputError):
        make_batches(pool(), assessors=2, per_item=3)


def test_per_assessor_random_order_seeded():
    p = pool((40,))
    b1 = make_batches(p, assessors=2, per_item=2, seed=5)
    b2 = make_batches(p, assessors=2, per_item=2, seed=5)
    pd.testing.assert_frame_equal(b1, b2)
    a = b1[b1["assessor"] == "A01"].sort_values("position")["docid"].tolist()
    c = b1[b1["assessor"] == "A02"].sort_values("position")["docid"].tolist()
    assert sorted(a) == sorted(c) and a != c  # same items, own order
    assert a != [f"t1d{i}" for i in range(1, 41)]
    b3 = make_batches(p, assessors=2, per_item=2, seed=6)
    assert b3[b3["assessor"] == "A01"].sort_values("position")["docid"].tolist() != a


def test_texts_and_queries_joined():
    b = make_batches(pool((2,)), texts={"t1d1": ("hello", "D1")}, queries={"1": "what"})
    assert b.set_index("docid").loc["t1d1", "text"] == "hello"
    assert b.set_index("docid").loc["t1d2", "text"] == ""
    assert set(b["query"]) == {"what"}


@pytest.fixture
def issued():
    return make_batches(pool(), first_n=3, assessors=2, per_item=2, seed=0)


def done(tmp_path, df, name="done.csv"):
    p = tmp_path / name
    df.to_csv(p, index=False)
    return p


def test_import_roundtrip_and_idempotent(tmp_path, issued):
    d = issued.copy()
    d["grade"] = [i % 4 for i in range(len(d))]
    d.loc[0, "grade"] = None  # not yet judged
    f = done(tmp_path, d)
    j, report = import_batches([f, f], issued=issued)
    assert len(j) == len(d) - 1
    r = dict(zip(report["rule"], report["count"]))
    assert r["ungraded"] == 2 and r["repeated"] == len(d) - 1 and r["imported"] == len(d) - 1
    assert list(j.columns) == ["qid", "docid", "assessor", "grade", "batch_id"]


@pytest.mark.parametrize("grade", ["4", "-1", "2.5", "x"])
def test_import_rejects_grade_outside_scale(tmp_path, issued, grade):
    d = issued.copy().astype({"grade": object})
    d["grade"] = "1"
    d.loc[3, "grade"] = grade
    f = done(tmp_path, d)
    with pytest.raises(InputError) as e:
        import_batches([f], issued=issued)
    assert e.value.rule == "grade-outside-scale" and e.value.line == 5  # header + 0-based row 3
    j, report = import_batches([f], issued=issued, lenient=True)
    assert len(j) == len(d) - 1


def test_import_rejects_unknown_items_and_conflicts(tmp_path, issued):
    d = issued.copy()
    d["grade"] = 1
    d.loc[0, "docid"] = "not-issued"
    with pytest.raises(InputError) as e:
        import_batches([done(tmp_path, d)], issued=issued)
    assert e.value.rule == "unknown-item"
    d = issued.copy()
    d["grade"] = 1
    d2 = d.copy()
    d2.loc[2, "grade"] = 0
    with pytest.raises(InputError) as e:
        import_batches([done(tmp_path, d, "a.csv"), done(tmp_path, d2, "b.csv")], issued=issued)
    assert e.value.rule == "conflict"
    j, report = import_batches([done(tmp_path, d, "a.csv"), done(tmp_path, d2, "b.csv")], issued=issued, lenient=True)
    assert dict(zip(report["rule"], report["count"]))["conflict"] == 2
    assert len(j) == len(d) - 1


def test_import_missing_column(tmp_path, issued):
    f = done(tmp_path, issued.drop(columns=["grade"]))
    with pytest.raises(InputError) as e:
        import_batches([f])
    assert e.value.rule == "missing-column"


def test_judgments_to_qrels():
    from qrelkit.store.combine import judgments_to_qrels

    j = pd.DataFrame({"qid": ["2", "2", "2", "10"], "docid": ["a", "a", "a", "b"], "assessor": ["x", "y", "z", "x"],
                      "grade": [0, 3, 2, 1], "batch_id": ["2-1"] * 3 + ["10-1"]})
    q = judgments_to_qrels(j)
    assert q.to_pylist() == [{"qid": "2", "docid": "a", "rel": 2}, {"qid": "10", "docid": "b", "rel": 1}]
    assert judgments_to_qrels(j, combine="max")["rel"].to_pylist() == [3, 1]
    assert judgments_to_qrels(j, combine="min")["rel"].to_pylist() == [0, 1]
    with pytest.raises(InputError):
        judgments_to_qrels(j, combine="mean")


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["1", "2", "10"]), st.sampled_from(["a", "b", "c", "d"]),
                          st.integers(0, 3)), min_size=1, max_size=40),
       st.sampled_from(["median_high", "max", "min"]))
def test_combined_grade_is_the_rule_per_topic_and_passage(rows, combine):
    """One grade per (topic, passage): the higher middle grade (statistics.median_high), the max or
    the min of its grades, whatever the order of the rows."""
    import statistics

    from qrelkit.store.combine import judgments_to_qrels

    df = pd.DataFrame(rows, columns=["qid", "docid", "grade"])
    rule = {"median_high": statistics.median_high, "max": max, "min": min}[combine]
    expect = {k: rule(list(g["grade"])) for k, g in df.groupby(["qid", "docid"])}
    got = judgments_to_qrels(df, combine=combine).to_pandas()
    assert {(q, d): r for q, d, r in zip(got["qid"], got["docid"], got["rel"])} == expect
    assert judgments_to_qrels(df.iloc[::-1], combine=combine).equals(judgments_to_qrels(df, combine=combine))


def test_combined_grade_rejects_missing_grades_and_skips_missing_keys():
    from qrelkit.store.combine import judgments_to_qrels

    with pytest.raises(InputError, match="missing-value"):
        judgments_to_qrels(pd.DataFrame({"qid": ["1", "1"], "docid": ["a", "a"], "grade": [float("nan"), 1.0]}))
    with pytest.raises(InputError, match="missing-value"):
        judgments_to_qrels(pd.DataFrame({"qid": ["1"], "docid": ["a"], "grade": pd.array([None], "Int64")}))
    with pytest.raises(InputError, match="not a number"):
        judgments_to_qrels(pd.DataFrame({"qid": ["1"], "docid": ["a"], "grade": ["high"]}))
    # numbers written as text compare as numbers; a row without a topic is no group's, as with max
    df = pd.DataFrame({"qid": ["1", "1", None], "docid": ["a", "a", "a"], "grade": ["10", "2", "3"]})
    for rule, rel in (("median_high", 10), ("max", 10), ("min", 2)):
        got = judgments_to_qrels(df, combine=rule)
        assert got["qid"].to_pylist() == ["1"] and got["docid"].to_pylist() == ["a"] and got["rel"].to_pylist() == [rel]
