"""Evaluation with ir-measures: NCG@k, tie order, judged topics, missing-topic policy, parity with
trec_eval's own expected outputs and with the official Robust 2003 MAP."""

from __future__ import annotations

import math

import ir_measures
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from qrelkit.errors import InputError
from qrelkit.evaluate import evaluate, parse_measures
from qrelkit.io.qrels import QRELS_SCHEMA, read_qrels
from qrelkit.io.runs import canonicalize, read_runs

from conftest import shared


def runs_table(rows):
    """rows: (run, qid, docid, score) -> canonical run table."""
    return canonicalize(pd.DataFrame(rows, columns=["run", "qid", "docid", "score"]))


def qrels_table(rows):
    return pa.table({"qid": [r[0] for r in rows], "docid": [r[1] for r in rows],
                     "rel": pa.array([r[2] for r in rows], pa.int32())}).cast(QRELS_SCHEMA)


def value(ev, run, measure, qid=None):
    t = ev.summary.to_pandas() if qid is None else ev.per_query.to_pandas()
    t = t[(t["run"] == run) & (t["measure"] == measure)]
    if qid is not None:
        t = t[t["qid"] == qid]
    assert len(t) == 1, (run, measure, qid)
    return t["value"].iloc[0]


# ----------------------------------------------------------------------------------- NCG


def test_ncg_is_registered_with_ir_measures_and_matches_a_hand_computed_example():
    m = ir_measures.parse_measure("NCG@3")
    assert str(m) == "NCG@3"
    # topic 1 judged: a=3, b=2, c=1, d=0, e=-1 (unjudged); run: d, c, x, a, b
    q = qrels_table([("1", "a", 3), ("1", "b", 2), ("1", "c", 1), ("1", "d", 0), ("1", "e", -1),
                     ("2", "p", 1)])
    r = runs_table([("r", "1", "d", 5), ("r", "1", "c", 4), ("r", "1", "x", 3), ("r", "1", "a", 2), ("r", "1", "b", 1),
                    ("r", "2", "p", 1)])
    ev = evaluate(r, q, ["NCG@3", "NCG@4", "NCG"])
    # NCG@3: CG = 0 + 1 + 0 = 1; ideal top-3 gains 3 + 2 + 1 = 6
    assert value(ev, "r", "NCG@3", "1") == pytest.approx(1 / 6)
    # NCG@4: CG = 0 + 1 + 0 + 3 = 4; ideal 3 + 2 + 1 + 0 = 6
    assert value(ev, "r", "NCG@4", "1") == pytest.approx(4 / 6)
    # no cutoff: CG over the whole run 6, ideal over all judged 6
    assert value(ev, "r", "NCG", "1") == pytest.approx(1.0)
    assert value(ev, "r", "NCG@3", "2") == pytest.approx(1.0)
    assert value(ev, "r", "NCG@3") == pytest.approx((1 / 6 + 1) / 2)


def test_unknown_measure_is_an_input_error():
    with pytest.raises(InputError) as e:
        parse_measures(["nDCG@10", "NoSuchMeasure@5"])
    assert e.value.rule == "unknown-measure"
    assert [str(m) for m in parse_measures(["ndcg_cut_10", "map"])] == ["nDCG@10", "AP"]


def test_checking_a_measure_asks_only_the_providers_that_support_it(monkeypatch):
    """Whether a provider is installed is found out by importing it (ranx imports scipy and
    matplotlib: seconds on the first evaluation of a process): computable() asks it only of the
    providers that support the measure, in ir-measures' pipeline order, as the pipeline does."""
    from qrelkit.evaluate import computable

    asked = []
    for p in ir_measures.DefaultPipeline.providers:
        monkeypatch.setattr(p, "is_available", lambda p=p: asked.append(p.NAME) or True)
    assert [str(m) for m in computable(parse_measures(["nDCG@10", "AP"]))] == ["nDCG@10", "AP"]
    assert set(asked) == {"pytrec_eval"}


# ----------------------------------------------------------------------------------- ties


def test_ties_are_broken_by_docid_descending_for_every_provider():
    # d1 (relevant) and d2 tie; trec_eval order is docid descending: d2 first, d1 second
    q = qrels_table([("1", "d1", 1), ("1", "d2", 0)])
    raw = {"1": {"d1": 1.0, "d2": 1.0}}
    # ir-measures on the raw scores: RR@10 (msmarco provider) and RR (pytrec_eval) disagree
    direct = ir_measures.calc_aggregate([ir_measures.parse_measure("RR@10"), ir_measures.RR],
                                        [ir_measures.Qrel("1", "d1", 1), ir_measures.Qrel("1", "d2", 0)], raw)
    assert direct[ir_measures.parse_measure("RR@10")] == 1.0 and direct[ir_measures.RR] == 0.5
    ev = evaluate(runs_table([("r", "1", "d1", 1.0), ("r", "1", "d2", 1.0)]), q, ["RR@10", "RR", "nDCG@1", "Judged@1"])
    assert value(ev, "r", "RR@10") == 0.5 and value(ev, "r", "RR") == 0.5
    assert value(ev, "r", "nDCG@1") == 0.0


def test_a_table_not_in_canonical_order_is_put_in_it():
    rows = [("r", "1", f"d{i}", float(i % 3)) for i in range(9)] + [("s", "1", "d1", 2.0), ("s", "1", "d0", 2.0)]
    q = qrels_table([("1", "d2", 1), ("1", "d5", 2), ("1", "d0", 1)])
    good = evaluate(runs_table(rows), q, ["AP", "nDCG@3", "RR@2"])
    shuffled = pa.Table.from_pandas(pd.DataFrame(rows[::-1], columns=["run", "qid", "docid", "score"]).assign(rank=0))
    bad = evaluate(shuffled, q, ["AP", "nDCG@3", "RR@2"])
    assert good.per_query.equals(bad.per_query)


def test_top_k_measures_on_cut_runs_equal_ir_measures_on_full_runs():
    """The evaluation hands cutoff measures only the first k documents: same values."""
    rng = np.random.default_rng(3)
    rows, qrels = [], []
    for q in range(1, 9):
        docs = [f"d{q}_{i}" for i in range(40)]
        for i, d in enumerate(docs):
            if rng.random() < 0.5:
                qrels.append((str(q), d, int(rng.integers(0, 4))))
        for run in ("a", "b"):
            scores = rng.permutation(40).astype(float)  # distinct: no tie question here
            rows += [(run, str(q), d, s) for d, s in zip(docs[:30], scores[:30])]
    ms = ["P@5", "nDCG@5", "RR@5", "RR(rel=2)@5", "AP@5", "R@5", "Judged@5", "Success@5", "AP", "nDCG", "Rprec",
          "NCG@5", "P(judged_only=True)@5"]
    ev = evaluate(runs_table(rows), qrels_table(qrels), ms)
    qrel_objs = [ir_measures.Qrel(q, d, r) for q, d, r in qrels]
    for run in ("a", "b"):
        rd = {}
        for r, q, d, s in rows:
            if r == run:
                rd.setdefault(q, {})[d] = s
        direct = ir_measures.calc_aggregate([ir_measures.parse_measure(m) for m in ms], qrel_objs, rd)
        for m in ms:
            assert value(ev, run, str(ir_measures.parse_measure(m))) == pytest.approx(direct[ir_measures.parse_measure(m)], abs=1e-12), m


# ------------------------------------------------------------------- judged topics, missing


def test_runs_are_filtered_to_judged_topics_and_unjudged_topics_are_reported():
    q = qrels_table([("1", "a", 1), ("2", "b", 1)])
    r = runs_table([("r", "1", "a", 2), ("r", "2", "b", 1), ("r", "3", "c", 5), ("r", "3", "d", 4)])
    ev = evaluate(r, q, ["P@1"])
    assert ev.topics == ["1", "2"] and ev.unjudged_topics == 1 and ev.unjudged_rows == 2
    assert set(ev.per_query["qid"].to_pylist()) == {"1", "2"}
    assert value(ev, "r", "P@1") == 1.0
    assert "1 unjudged topics (2 run lines) not scored" in ev.policy_line()


def test_negative_grades_are_not_judged():
    q = qrels_table([("1", "a", 1), ("1", "b", -1), ("1", "c", 0)])
    ev = evaluate(runs_table([("r", "1", "a", 3), ("r", "1", "b", 2), ("r", "1", "c", 1)]), q, ["Judged@3", "Judged@2"])
    assert value(ev, "r", "Judged@3") == pytest.approx(2 / 3)
    assert value(ev, "r", "Judged@2") == pytest.approx(1 / 2)


@pytest.fixture
def missing_case():
    q = qrels_table([("1", "a", 1), ("2", "b", 1), ("3", "c", 1)])
    r = runs_table([("full", "1", "a", 1), ("full", "2", "b", 1), ("full", "3", "c", 1),
                    ("part", "1", "a", 1), ("part", "2", "x", 1)])
    return r, q


def test_missing_topic_policy_zero_is_the_default(missing_case):
    r, q = missing_case
    ev = evaluate(r, q, ["P@1", "NumQ"])
    assert ev.missing == "zero" and ev.missing_by_run == {"full": [], "part": ["3"]}
    assert value(ev, "part", "P@1") == pytest.approx(1 / 3)  # 1, 0, and 0 for the missing topic
    pq = ev.per_query.to_pandas()
    row = pq[(pq["run"] == "part") & (pq["qid"] == "3") & (pq["measure"] == "P@1")].iloc[0]
    assert row["missing"] and row["value"] == 0.0
    assert "missing-topic policy: zero" in ev.policy_line() and "1 missing (run, topic) pairs in 1 of 2 runs" in ev.policy_line()


def test_missing_topic_policy_skip_and_error(missing_case):
    r, q = missing_case
    ev = evaluate(r, q, ["P@1"], missing="skip")
    assert value(ev, "part", "P@1") == pytest.approx(1 / 2)
    s = ev.summary.to_pandas().set_index("run")
    assert s.loc["part", "topics"] == 2 and s.loc["part", "missing_topics"] == 1 and s.loc["full", "topics"] == 3
    pq = ev.per_query.to_pandas()
    assert pd.isna(pq[(pq["run"] == "part") & (pq["qid"] == "3")]["value"].iloc[0])
    with pytest.raises(InputError) as e:
        evaluate(r, q, ["P@1"], missing="error")
    assert e.value.rule == "missing-topic" and "part" in str(e.value)
    with pytest.raises(InputError):
        evaluate(r, q, ["P@1"], missing="maybe")


def test_rel_level_applies_to_binary_measures_without_one():
    q = qrels_table([("1", "a", 1), ("1", "b", 2)])
    ev = evaluate(runs_table([("r", "1", "a", 2), ("r", "1", "b", 1)]), q, ["RR@10", "AP(rel=1)", "nDCG@2"], rel=2)
    assert ev.measures == ["RR(rel=2)@10", "AP", "nDCG@2"]  # AP(rel=1) is AP: rel=1 is its default
    assert value(ev, "r", "RR(rel=2)@10") == 0.5


# --------------------------------------------------------------------- trec_eval parity

_TE = "trec_eval_tests"


def _expected(path):
    """out.test* -> {(measure, qid): printed value string}."""
    out = {}
    for line in open(path):
        name, qid, val = line.split()
        out[(name, qid)] = val
    return out


def _shared_measures(names):
    """trec_eval names that ir-measures also implements -> the ir-measures measure."""
    out = {}
    for n in names:
        try:
            ms = ir_measures.parse_trec_measure(n)
        except (ValueError, KeyError):
            continue
        if len(ms) == 1:
            out[n] = ms[0]
    return out


def _iprec_rule_differs(cut: float, num_rel: int) -> bool:
    """trec_eval 10 turns a recall level into a rank by rounding; 9.x (pytrec_eval's, hence
    ir-measures') added 0.9 and truncated (see trec_eval's m_iprec_at_recall.c)."""
    return int(cut * num_rel + 0.9) != int(math.floor(cut * num_rel + 0.5))


def _check(ev, expected, shared, per_query, num_rel, skip=()):
    pq = ev.per_query.to_pandas().set_index(["qid", "measure"])["value"]
    sm = ev.summary.to_pandas().set_index("measure")["value"]
    equal, explained = 0, []
    for (name, qid), printed in expected.items():
        if name not in shared or (qid != "all" and not per_query) or (name, qid) in skip:
            continue
        m = str(shared[name])
        ours = sm[m] if qid == "all" else pq[(qid, m)]
        decimals = len(printed.split(".")[1]) if "." in printed else 0
        if abs(ours - float(printed)) <= 0.5 * 10 ** -decimals + 1e-9:
            equal += 1
            continue
        # the only accepted difference: iprec_at_recall at a level where the two rules differ
        assert name.startswith("iprec_at_recall_"), (name, qid, ours, printed)
        cut = float(name.rsplit("_", 1)[1])
        topics = list(num_rel) if qid == "all" else [qid]
        assert any(_iprec_rule_differs(cut, num_rel[t]) for t in topics), (name, qid, ours, printed)
        explained.append((name, qid))
    return equal, explained


def _num_rel(qrels):
    q = qrels.to_pandas()
    return q[q["rel"] >= 1].groupby("qid").size().to_dict()


def test_trec_eval_parity_out_test_a_and_aq():
    d = shared(_TE)
    rs = read_runs(d / "results.test")
    q = read_qrels(d / "qrels.test")
    nr = _num_rel(q)
    for out_file, per_query in (("out.test", False), ("out.test.a", False), ("out.test.aq", True)):
        exp = _expected(d / out_file)
        shared_m = _shared_measures({n for n, _ in exp})
        ev = evaluate(rs.table, q, list(dict.fromkeys(shared_m.values())))
        equal, explained = _check(ev, exp, shared_m, per_query, nr)
        compared = sum(1 for n, qid in exp if n in shared_m and (qid == "all" or per_query))
        # out.test: 28 values shared with ir-measures; out.test.a: 65; out.test.aq: 257 (per topic too)
        assert compared == {"out.test": 28, "out.test.a": 65, "out.test.aq": 257}[out_file]
        assert equal + len(explained) == compared
        assert sorted(explained) == sorted(
            [("iprec_at_recall_0.10", "all"), ("iprec_at_recall_0.60", "all")]
            + ([("iprec_at_recall_0.10", "301"), ("iprec_at_recall_0.60", "302")] if per_query else [])), explained


def test_trec_eval_parity_out_test_aqc_missing_topic_scores_zero(tmp_path):
    """results.trunc has no line for topic 302 and junk after the sixth column (which trec_eval
    ignores and qrelkit's reader rejects as extra-column): the test keeps the first six columns.
    trec_eval -c averages over every judged topic with 0 for the missing one: qrelkit's default."""
    d = shared(_TE)
    lines = [" ".join(line.split()[:6]) for line in (d / "results.trunc").read_text().splitlines() if line.strip()]
    (tmp_path / "trunc.run").write_text("\n".join(lines) + "\n")
    rs = read_runs(tmp_path / "trunc.run")
    q = read_qrels(d / "qrels.test")
    exp = _expected(d / "out.test.aqc")
    shared_m = _shared_measures({n for n, _ in exp})
    ev = evaluate(rs.table, q, list(dict.fromkeys(shared_m.values())))
    assert ev.missing_by_run["STANDARD"] == ["302"]
    # num_rel and num_q of the missing topic: trec_eval counts the qrels' relevant documents and
    # the topic itself; qrelkit's policy gives a missing topic 0 for every measure (stated)
    skip = {("num_rel", "302"), ("num_rel", "all"), ("num_q", "all")}
    equal, explained = _check(ev, exp, shared_m, True, _num_rel(q), skip=skip)
    compared = sum(1 for k in exp if k[0] in shared_m and k not in skip)
    assert compared == 254 and equal == 253 and explained == [("iprec_at_recall_0.10", "301")]
    assert value(ev, "STANDARD", "AP") == pytest.approx(0.1016, abs=5e-5)


def test_robust03_official_map_of_all_17_runs():
    d = shared("robust03")
    rs = read_runs(d / "runs")
    q = read_qrels(d / "qrels" / "robust03_qrels.txt.gz")
    ev = evaluate(rs.table, q, ["AP"])
    off = pd.read_csv(d / "trec2003_robust_official_summary.tsv", sep="\t")
    official = off[off["measure"] == "map"].set_index("run")["value"]
    ours = ev.summary.to_pandas().set_index("run")["value"]
    assert len(ours) == 17 and all(ev.missing_by_run[r] == [] for r in ev.runs)
    for run, v in ours.items():
        assert round(v, 4) == pytest.approx(official[run], abs=1e-9), run


@pytest.mark.parametrize("missing", ["zero", "skip"])
def test_topic_of_scores_several_judgment_sets_of_a_topic_as_each_alone(missing):
    """Issue 23: ``topic_of`` scores each qrels topic on another topic's lists; every value is the
    one evaluate() gives that judgment set alone under the lists' own topic."""
    rows = [("a", "1", "x", 3.0), ("a", "1", "y", 2.0), ("a", "1", "z", 2.0), ("b", "1", "z", 5.0),
            ("b", "1", "w", 1.0), ("a", "2", "y", 1.0), ("c", "2", "y", 4.0), ("c", "2", "x", 3.0)]
    runs = runs_table(rows)
    sets = {"v1": ("1", [("x", 1), ("z", 0)]), "v2": ("1", [("z", 2), ("w", 1), ("q", 1)]),
            "v3": ("2", [("x", 1)]), "v4": ("1", [("y", 0)])}
    variants = qrels_table([(v, d, g) for v, (_, js) in sets.items() for d, g in js])
    measures = ["AP", "nDCG@2", "P@1", "Bpref"]
    ev = evaluate(runs, variants, measures, missing=missing, topic_of={v: t for v, (t, _) in sets.items()})
    got = ev.per_query.to_pandas().set_index(["run", "qid", "measure"])
    assert ev.topics == ["v1", "v2", "v3", "v4"] and ev.runs == ["a", "b", "c"]
    for v, (t, js) in sets.items():
        alone = evaluate(runs, qrels_table([(t, d, g) for d, g in js]), measures, missing=missing,
                         run_names=["a", "b", "c"]).per_query.to_pandas()
        for r in alone.itertuples():
            mine = got.loc[(r.run, v, r.measure)]
            assert bool(mine["missing"]) == r.missing and (mine["value"] == r.value or (r.value != r.value and
                                                                                       mine["value"] != mine["value"]))
    assert ev.missing_by_run["c"] == ["v1", "v2", "v4"] and ev.missing_by_run["b"] == ["v3"]
    with pytest.raises(InputError, match=r"\[bad-option\].*v4"):
        evaluate(runs, variants, ["AP"], topic_of={"v1": "1", "v2": "1", "v3": "2"})


def test_a_measure_is_hashed_once_per_evaluation_not_once_per_value(monkeypatch):
    """Issue 24: ir-measures hashes a measure through its repr for every value it yields; evaluate()
    hands its evaluators measures that hash once (fails before: a repr per value). Same values."""
    from ir_measures.measures.base import Measure

    from qrelkit.evaluate.measures import hashed_once

    rows = [(f"r{i}", str(t), f"d{d}", float(100 - d)) for i in range(3) for t in range(40) for d in range(12)]
    qrels = qrels_table([(str(t), f"d{d}", (t + d) % 3) for t in range(40) for d in range(0, 12, 2)])
    measures = ["AP", "nDCG@10", "P@5", "Bpref", "Judged@10"]
    before = evaluate(runs_table(rows), qrels, measures, rel=2)
    calls = []
    real = Measure.__repr__
    monkeypatch.setattr(Measure, "__repr__", lambda self: calls.append(1) or real(self))
    again = evaluate(runs_table(rows), qrels, measures, rel=2)
    assert again.per_query.equals(before.per_query) and again.summary.equals(before.summary)
    values = 3 * 40 * len(measures)
    assert len(calls) < values / 4, f"{len(calls)} reprs for {values} values"
    ap = parse_measures(["AP(rel=2)"])[0]
    copy = hashed_once(ap)
    assert copy == ap and hash(copy) == hash(ap) and str(copy) == "AP(rel=2)" and isinstance(copy, type(ap))
    assert {copy: 1}[ap] == 1 and copy.NAME == "AP" and copy(cutoff=5) == ap(cutoff=5)


def test_qrels_dict_keeps_topic_order_and_the_last_grade_of_a_repeat():
    from qrelkit.evaluate.core import qrels_dict

    q = qrels_table([("2", "a", 1), ("10", "b", 0), ("2", "c", 2), ("2", "a", 3), ("10", "d", -1), ("1", "e", 1)])
    got = qrels_dict(q)
    assert list(got) == ["2", "10", "1"] and got == {"2": {"a": 3, "c": 2}, "10": {"b": 0}, "1": {"e": 1}}
    assert list(got["2"]) == ["a", "c"] and qrels_dict(qrels_table([("1", "x", -1)])) == {}


@pytest.mark.parametrize("missing", ["zero", "skip", "error"])
@pytest.mark.parametrize("ranking", ["trec_eval", "exact"])
def test_evaluate_sets_gives_each_set_what_evaluate_gives_it_alone(missing, ranking):
    """Issue 24: evaluate_sets() reads the runs once for several judgment sets (leave-one-group-out
    scores official and left-out judgments together); each set's Evaluation is evaluate()'s for that
    set alone: values, missing flags, unjudged counts, policy line. Sets judge different topics."""
    from qrelkit.evaluate import Judgments, evaluate_sets

    rows = [("a", "1", "x", 3.0), ("a", "1", "y", 2.0), ("a", "1", "z", 2.0), ("b", "1", "z", 5.0),
            ("b", "1", "w", 1.0), ("a", "2", "y", 1.0), ("c", "2", "y", 4.0), ("c", "2", "x", 3.0),
            ("b", "3", "x", 1.0), ("a", "3", "q", 0.5)]
    runs = runs_table(rows)
    sets = [qrels_table([("1", "x", 1), ("1", "z", 2), ("2", "y", 1), ("3", "x", 0)]),
            qrels_table([("1", "x", 1), ("2", "y", 0), ("2", "x", 2)]),
            qrels_table([("3", "q", 1), ("3", "x", 2), ("1", "w", -1), ("1", "z", 1)])]
    measures = ["AP", "nDCG@2", "P@1", "Bpref", "Judged@2", "RR@1", "NumRet"]
    names = ["a", "b", "c", "d"]
    if missing == "error":  # run b misses topic 2 of the second set given: the error evaluate() gives it alone
        with pytest.raises(InputError) as e:
            evaluate_sets(runs, sets[2:] + sets, measures, missing=missing, run_names=names, ranking=ranking)
        with pytest.raises(InputError) as alone:
            evaluate(runs, sets[0], measures, missing=missing, run_names=names, ranking=ranking)
        assert e.value.rule == "missing-topic" and str(e.value) == str(alone.value) and "'b'" in str(e.value)
        return
    official = Judgments(sets[0], measures, rel=2)
    got = evaluate_sets(runs, [official] + sets[1:] + [official], measures, missing=missing, rel=2, run_names=names,
                        ranking=ranking)
    assert len(got) == 4
    for ev, q in zip(got, sets + [sets[0]]):
        alone = evaluate(runs, q, measures, missing=missing, rel=2, run_names=names, ranking=ranking)
        assert ev.per_query.equals(alone.per_query) and ev.summary.equals(alone.summary)
        assert (ev.topics, ev.runs, ev.missing_by_run, ev.unjudged_rows, ev.unjudged_topics, ev.policy_line()) == \
               (alone.topics, alone.runs, alone.missing_by_run, alone.unjudged_rows, alone.unjudged_topics,
                alone.policy_line())
    got[0].topics.append("zzz")  # an evaluation's lists are its own: the prepared judgments are unchanged
    again = evaluate_sets(runs, [official], measures, missing=missing, rel=2, run_names=names, ranking=ranking)
    assert again[0].summary.equals(got[0].summary) and again[0].topics == got[0].topics[:-1]
    with pytest.raises(InputError, match=r"\[bad-option\].*prepared for measures"):
        evaluate_sets(runs, [official], measures)  # prepared with rel=2, scored without
