"""Labels: aggregation of several assessors, agreement, binarization schemes, propagation to
near-duplicates and documents (synthetic examples, TREC RAG 2024 and DL-HARD)."""

from __future__ import annotations

import krippendorff
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from qrelkit.config import load_config
from qrelkit.errors import InputError
from qrelkit.labels.params import LabelsParams
from qrelkit.io.qrels import QRELS_SCHEMA, read_qrels
from qrelkit.labels import (
    aggregate_judgments, assessor_agreement, binarize, compare_labels, expand_qrels, max_rule_feasibility,
    parse_grade_map, passage_document_map, propagate_to_documents, scheme_grades, threshold_of,
)

from conftest import ROOT, shared


def q(rows):
    return pa.table({"qid": [r[0] for r in rows], "docid": [r[1] for r in rows],
                     "rel": pa.array([r[2] for r in rows], pa.int32())}).cast(QRELS_SCHEMA)


def judgments(rows):
    return pd.DataFrame(rows, columns=["qid", "docid", "assessor", "grade"])


# ------------------------------------------------------------------------ aggregation


@pytest.fixture
def grades():
    return judgments([
        ("1", "p1", "A", 3), ("1", "p1", "B", 2), ("1", "p1", "C", 0),  # 2 of 3 relevant
        ("1", "p2", "A", 0), ("1", "p2", "B", 3),                       # tie 1:1 -> fallback
        ("1", "p3", "A", 1), ("1", "p3", "B", None), ("1", "p3", "C", 0),  # missing grade ignored
        ("1", "p4", "A", 2), ("1", "p4", "B", 1),                       # tie, original says relevant
        ("2", "p9", "A", 3),
    ])


def label(agg, docid, col):
    row = agg.labels[agg.labels["docid"] == docid]
    assert len(row) == 1
    return row[col].iloc[0]


def test_majority_vote_ties_fallback_and_ceiled_median(grades):
    orig = q([("1", "p4", 1), ("1", "p1", 1)])
    agg = aggregate_judgments(grades, threshold=2, original=orig)  # default chain: original, lowest
    assert (label(agg, "p1", "vote"), bool(label(agg, "p1", "relevant")), label(agg, "p1", "source")) == ("relevant", True, "majority")
    assert label(agg, "p1", "grade") == 2  # ceil(median(0, 2, 3)) = 2
    assert label(agg, "p2", "vote") == "tie" and label(agg, "p2", "source") == "lowest" and not label(agg, "p2", "relevant")
    assert label(agg, "p2", "grade") == 2  # ceil(median(0, 3)) = ceil(1.5): a grade nobody gave
    assert label(agg, "p3", "n_grades") == 2 and label(agg, "p3", "grades") == "0,1" and label(agg, "p3", "grade") == 1
    assert label(agg, "p4", "source") == "original" and bool(label(agg, "p4", "relevant"))
    assert agg.summary()["ties"] == 2 and agg.summary()["labels_by_source"] == {"lowest": 1, "majority": 3, "original": 1}


def test_median_high_and_other_fallbacks(grades):
    agg = aggregate_judgments(grades, graded="median_high", fallback="highest")
    assert label(agg, "p2", "grade") == 3 and label(agg, "p1", "grade") == 2
    assert bool(label(agg, "p2", "relevant")) and label(agg, "p2", "source") == "highest"
    dropped = aggregate_judgments(grades, fallback=["drop"])
    assert set(dropped.qrels()["docid"].to_pylist()) == {"p1", "p3", "p9"}
    assert aggregate_judgments(grades, fallback="relevant").qrels("binary").to_pandas().set_index("docid").loc["p2", "rel"] == 1
    with pytest.raises(InputError):
        aggregate_judgments(grades, fallback="original")  # the chain must end in a rule that always applies
    with pytest.raises(InputError):
        aggregate_judgments(grades, fallback="coin")
    with pytest.raises(InputError):
        aggregate_judgments(grades, graded="mean")


def test_topic_inclusion_rules(grades):
    agg = aggregate_judgments(grades, min_assessors=3)
    t = agg.topics.set_index("qid")
    assert t.loc["1", "assessors"] == 3 and bool(t.loc["1", "included"])
    assert not t.loc["2", "included"] and "1 assessor(s) < 3" in t.loc["2", "reason"]
    assert set(agg.qrels()["qid"].to_pylist()) == {"1"}
    # the original relevant qrel of topic 1 (p2) was not judged relevant by the vote: excluded
    orig = q([("1", "p2", 1), ("2", "p9", 1)])
    agg2 = aggregate_judgments(grades, original=orig, fallback="lowest", require_original_relevant=True)
    t2 = agg2.topics.set_index("qid")
    assert not t2.loc["1", "included"] and bool(t2.loc["2", "included"])
    assert set(agg2.qrels()["qid"].to_pylist()) == {"2"}
    with pytest.raises(InputError):
        aggregate_judgments(grades, require_original_relevant=True)


def test_bad_grades_are_input_errors():
    with pytest.raises(InputError) as e:
        aggregate_judgments(judgments([("1", "p", "A", 1.5)]))
    assert e.value.rule == "grade-not-integer"
    with pytest.raises(InputError) as e:
        aggregate_judgments(judgments([("1", "p", "A", 1), ("1", "p", "A", 2)]))
    assert e.value.rule == "conflict"


def test_agreement_statistics_come_from_the_libraries():
    rng = np.random.default_rng(2)
    truth = rng.integers(0, 4, 40)
    rows = []
    for a, noise in (("A", 0.1), ("B", 0.3), ("C", 0.5)):
        g = np.where(rng.random(40) < noise, rng.integers(0, 4, 40), truth)
        rows += [("1", f"p{i}", a, int(x)) for i, x in enumerate(g)]
    rows = [r for r in rows if not (r[2] == "C" and r[1] in ("p0", "p1"))]  # two items with 2 grades only
    j = judgments(rows)
    s, pairs = assessor_agreement(j, threshold=2, scale=[0, 1, 2, 3], level="ordinal")
    wide = j.pivot(index="docid", columns="assessor", values="grade")
    wide = wide.loc[sorted(wide.index)]
    assert s["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=wide.to_numpy(float).T, level_of_measurement="ordinal"))
    full = wide.dropna().to_numpy(int)
    assert s["fleiss_items"] == 38 and s["fleiss_raters"] == 3
    assert s["fleiss_kappa"] == pytest.approx(fleiss_kappa(aggregate_raters(full)[0]))
    ab = wide[["A", "B"]].dropna().astype(int)
    row = pairs[(pairs["assessor_a"] == "A") & (pairs["assessor_b"] == "B")].iloc[0]
    assert row["cohen_kappa"] == pytest.approx(cohen_kappa_score(ab["A"], ab["B"], labels=[0, 1, 2, 3]))
    assert row["cohen_kappa_binary"] == pytest.approx(cohen_kappa_score(ab["A"] >= 2, ab["B"] >= 2))
    assert s["cohen_kappa_mean"] == pytest.approx(pairs["cohen_kappa"].mean())
    perfect, _ = assessor_agreement(judgments([("1", f"p{i}", a, i % 4) for i in range(8) for a in "AB"]))
    assert perfect["krippendorff_alpha"] == pytest.approx(1.0) and perfect["fleiss_kappa"] == pytest.approx(1.0)


# ---------------------------------------------------------------------- binarization


def test_binarization_schemes_are_named_in_the_config():
    cfg = LabelsParams.from_config(load_config(ROOT / "configs" / "trec-dl-2022.toml"))
    assert scheme_grades("passage", cfg) == [2, 3] and scheme_grades("document", cfg) == [1, 2, 3]
    assert scheme_grades("strict", cfg) == [3] and scheme_grades(">=2", cfg) == [2, 3] and scheme_grades("1,3", cfg) == [1, 3]
    assert threshold_of([2, 3], [0, 1, 2, 3]) == 2 and threshold_of([1, 2, 3]) == 1
    with pytest.raises(InputError):
        threshold_of([1, 3], [0, 1, 2, 3])
    with pytest.raises(InputError):
        scheme_grades("lenient-ish", cfg)
    b = binarize(q([("1", "a", 3), ("1", "b", 1), ("1", "c", -1), ("1", "d", 2)]), scheme_grades("passage", cfg))
    assert dict(zip(b["docid"].to_pylist(), b["rel"].to_pylist())) == {"a": 1, "b": 0, "c": -1, "d": 1}


# ----------------------------------------------------------------------- propagation


@pytest.fixture
def classes():
    # class c1 = {c1, m1, m2}; class k1 = {k1, k2}
    return pa.table({"docid": ["c1", "m1", "m2", "k1", "k2"], "class_id": ["c1", "c1", "c1", "k1", "k1"]})


def test_expanded_qrels_and_report(classes):
    qr = q([("1", "c1", 2), ("1", "m2", 1), ("1", "k2", 3), ("1", "z", 0), ("1", "u", -1), ("2", "m1", 1)])
    exp = expand_qrels(qr, classes, relevant_at=2)
    got = {(a, b): r for a, b, r in zip(exp.qrels["qid"].to_pylist(), exp.qrels["docid"].to_pylist(), exp.qrels["rel"].to_pylist())}
    # canonical judged: members get its grade; a directly judged member keeps its own (m2 = 1)
    assert got[("1", "m1")] == 2 and got[("1", "m2")] == 1
    # canonical not judged: the highest judged member's grade (k2 = 3 -> k1 = 3)
    assert got[("1", "k1")] == 3
    assert got[("2", "c1")] == 1 and got[("2", "m2")] == 1
    assert got[("1", "u")] == -1 and ("1", "x") not in got
    r = exp.report.set_index("qid")
    assert (r.loc["1", "judged"], r.loc["1", "added"], r.loc["1", "added_relevant"]) == (4, 2, 2)
    assert (r.loc["2", "judged"], r.loc["2", "added"], r.loc["2", "expanded"]) == (1, 2, 3)
    assert len(exp.conflicts) == 1 and exp.conflicts.iloc[0]["class_id"] == "c1"
    src = exp.source.to_pandas().set_index(["qid", "docid"])["source"]
    assert src[("1", "m1")] == "expanded" and src[("1", "m2")] == "judged" and src[("1", "u")] == "unjudged"


def test_documents_by_max_grade_map_and_duplicates(classes):
    mapping = pa.table({"pid": ["c1", "m1", "m2", "k1", "k2", "z", "y"],
                        "docid": ["D1", "D2", "D1", "D3", "D3", "D1", "D4"]})
    qr = q([("1", "c1", 1), ("1", "z", 0), ("1", "k1", 3), ("1", "y", 2), ("1", "w", 2), ("1", "u", -1)])
    res = propagate_to_documents(qr, mapping)
    d = res.documents.set_index("docid")
    assert d.loc["D1", "label"] == 1 and d.loc["D1", "grades"] == "1,0" and bool(d.loc["D1", "disagree"])
    assert d.loc["D3", "label"] == 3 and d.loc["D4", "label"] == 2 and "D2" not in d.index
    assert res.summary["passages_unmapped"] == 1  # "w" has no document; "u" is not judged
    # duplicates of a judged passage count with its label: m1 (in D2) and m2 (in D1) copy c1's 1
    dup = propagate_to_documents(qr, mapping, classes=classes).documents.set_index("docid")
    assert dup.loc["D2", "label"] == 1 and dup.loc["D1", "passages"] == 3 and dup.loc["D3", "passages"] == 2
    # a grade map applied first: a "related" passage (1) no longer makes its document relevant
    mapped = propagate_to_documents(qr, mapping, grade_map=parse_grade_map("1=0")).documents.set_index("docid")
    assert mapped.loc["D1", "label"] == 0 and not mapped.loc["D1", "disagree"]
    assert propagate_to_documents(qr, mapping, rule="min").documents.set_index("docid").loc["D1", "label"] == 0
    with pytest.raises(InputError):
        propagate_to_documents(qr, mapping, rule="mean")


def test_passage_document_map_sources(tmp_path):
    ids = ["msmarco_v2.1_doc_00_1#3_77", "msmarco_v2.1_doc_00_1#4_90", "plain"]
    m = passage_document_map(id_separator="#", passages=ids)
    assert dict(zip(m["pid"].to_pylist(), m["docid"].to_pylist())) == {
        ids[0]: "msmarco_v2.1_doc_00_1", ids[1]: "msmarco_v2.1_doc_00_1", "plain": "plain"}
    (tmp_path / "c.jsonl").write_text('{"pid": "p1", "passage": "x", "docid": "d1"}\n{"pid": "p2", "passage": "y", "docid": "d1"}\n')
    m2 = passage_document_map(corpus=tmp_path / "c.jsonl", passages=["p2"])
    assert m2.to_pylist() == [{"pid": "p2", "docid": "d1"}]
    (tmp_path / "m.csv").write_text("pid,docid\np1,d1\np1,d2\n")
    with pytest.raises(InputError) as e:
        passage_document_map(mapping=tmp_path / "m.csv")
    assert e.value.rule == "duplicate-member"
    with pytest.raises(InputError):
        passage_document_map(corpus=tmp_path / "c.jsonl", id_separator="#", passages=["p1"])


def test_rag24_segment_labels_to_documents_by_max():
    qr = read_qrels(shared("trec_dl", "qrels", "qrels.rag24.test.txt"))
    m = passage_document_map(id_separator="#", passages=qr["docid"].to_pylist())
    res = propagate_to_documents(qr, m)
    s = res.summary
    assert (s["passages"], s["documents"], s["documents_multi_passage"], s["documents_disagree"]) == (20429, 11021, 4019, 1779)
    assert s["labels"] == {"0": 4607, "1": 2985, "2": 2376, "3": 1053}
    dis = res.disagreements()
    first = dis.iloc[0]
    assert first["qid"] == "2024-105741" and first["docid"] == "msmarco_v2.1_doc_00_1534870566"
    assert all(int(g.split(",")[0]) == lab for g, lab in zip(dis["grades"], dis["label"]))  # max = first listed


def test_dl_hard_passage_inferred_documents_against_direct_judgments():
    d = shared("dl_hard", "annotations", "new_judgements")
    passages = read_qrels(d / "new_judgements-passage.passage-level.qrels")
    inferred = read_qrels(d / "new_judgements-doc.passage-level.qrels")
    direct = read_qrels(d / "new_judgements-doc.doc-level.qrels")
    s, conf = compare_labels(inferred, direct, relevant=[1, 2, 3])
    assert (s["pairs_a"], s["pairs_b"], s["common"], s["only_a"], s["only_b"]) == (559, 224, 133, 426, 91)
    assert s["exact_agreement"] == pytest.approx(55 / 133)
    assert s["cohen_kappa"] == pytest.approx(0.2159, abs=5e-5)
    assert s["krippendorff_alpha_ordinal"] == pytest.approx(0.3610, abs=5e-5)
    assert s["cohen_kappa_binary"] == pytest.approx(0.4397, abs=5e-5)
    assert int(conf["count"].sum()) == 133
    # the dataset ships no passage -> document mapping: every inferred label is consistent with max
    feas = max_rule_feasibility(passages, inferred)
    assert feas["feasible"].all() and int(feas["documents"].sum()) == 559
    # under max, a topic's best document label is its best passage grade: true for all 110 topics
    pm = passages.to_pandas().groupby("qid")["rel"].max()
    im = inferred.to_pandas().groupby("qid")["rel"].max()
    assert len(im) == 110 and (pm[im.index] == im).all()
    # the 2 topics with passage judgments but no inferred document are the 2 topics DL-HARD's
    # changelog says were added to the passage qrels later (20 May 2021, issue #1)
    assert sorted(set(passages["qid"].to_pylist()) - set(inferred["qid"].to_pylist())) == ["1056416", "1103153"]
