"""Preference judgments (qrelkit.prefs): pairs and cost, crowd tasks, import and screening,
agreement, the tournament, win ratios, re-scoring, the single-ranker check, the simulated oracle."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from qrelkit.errors import InputError
from qrelkit.io.qrels import QRELS_SCHEMA, sort_qrels
from qrelkit.io.runs import canonicalize
from qrelkit.pooler import top1_pool
from qrelkit.prefs import (
    PERFECT, confidence_interval, estimate_cost, export_view, maintenance_pairs, make_tasks, pair_id,
    pair_outcomes, pool_pairs, read_answers, reissue_tasks, rescore, screen_answers, simulate_answers,
    single_ranker_outcomes, single_ranker_pairs, sparsify_qrels, tournament, tournament_topic, update_best,
    win_ratios, win_ratios_from_tops, worker_agreement,
)


def qrels(rows):
    t = pa.table({"qid": [r[0] for r in rows], "docid": [r[1] for r in rows],
                  "rel": pa.array([r[2] for r in rows], pa.int32())})
    return sort_qrels(t.cast(QRELS_SCHEMA))


def runs(spec: dict[str, dict[str, list[str]]]) -> pa.Table:
    """spec: run -> qid -> ranked docids."""
    rows = [(r, q, d, float(100 - i)) for r, per in spec.items() for q, docs in per.items() for i, d in enumerate(docs)]
    return canonicalize(pd.DataFrame(rows, columns=["run", "qid", "docid", "score"]))


def judgments(rows):
    """rows: (qid, winner, loser[, worker])."""
    out = []
    for r in rows:
        q, w, l = r[:3]
        a, b = sorted((w, l))
        out.append({"qid": q, "doc_a": a, "doc_b": b, "winner": w, "worker": r[3] if len(r) > 3 else "W01"})
    return pd.DataFrame(out)


# ------------------------------------------------------------------------------ tournament

def hand_built():
    """The documented cases (docs/prefs.md, qrelkit.prefs.tournament)."""
    j = judgments([
        # 1: A beats everyone -> winner A in round 1
        ("1", "A", "B"), ("1", "A", "C"), ("1", "A", "D"), ("1", "B", "C"), ("1", "B", "D"), ("1", "C", "D"),
        # 2: A and B tie with 2 wins; repeat among them: B beat A -> B
        ("2", "B", "A"), ("2", "A", "C"), ("2", "A", "D"), ("2", "C", "B"), ("2", "B", "D"), ("2", "D", "C"),
        # 3: 3-cycle A > B > C > A, all beat D -> D dropped, then a cycle: A, B, C
        ("3", "A", "B"), ("3", "B", "C"), ("3", "C", "A"), ("3", "A", "D"), ("3", "B", "D"), ("3", "C", "D"),
        # 6: one judgment each way -> a draw -> unresolved, both kept, the pair pending
        ("6", "A", "B", "W01"), ("6", "B", "A", "W02"),
        # 8: A and B each beat C, A-B never judged -> unresolved A, B
        ("8", "A", "C"), ("8", "B", "C"),
    ])
    items = pd.DataFrame(
        [("1", d, d == "D") for d in "ABCD"] + [("2", d, d == "A") for d in "ABCD"] + [("3", d, False) for d in "ABCD"]
        + [("5", "X", True)] + [("6", d, False) for d in "AB"] + [("7", d, False) for d in "ABC"]
        + [("8", d, False) for d in "ABC"], columns=["qid", "docid", "in_qrels"])
    return j, items


def test_tournament_hand_built_yields_documented_qrels():
    j, items = hand_built()
    res = tournament(j, items=items)
    got = sorted(zip(res.qrels["qid"].to_pylist(), res.qrels["docid"].to_pylist(), res.qrels["rel"].to_pylist()))
    assert got == [("1", "A", 1), ("2", "B", 1), ("3", "A", 1), ("3", "B", 1), ("3", "C", 1), ("5", "X", 1),
                   ("6", "A", 1), ("6", "B", 1), ("8", "A", 1), ("8", "B", 1)]
    pq = res.per_query.set_index("qid")
    assert pq["outcome"].to_dict() == {"1": "winner", "2": "winner", "3": "cycle", "5": "single-item",
                                       "6": "unresolved", "7": "unjudged", "8": "unresolved"}
    assert pq["rounds"].to_dict() == {"1": 1, "2": 2, "3": 2, "5": 1, "6": 1, "7": 1, "8": 2}
    log = res.log
    r3 = log[log["qid"] == "3"]
    assert r3["outcome"].tolist() == ["repeat", "cycle"]
    assert r3["wins"].iloc[0] == [{"docid": "A", "wins": 2}, {"docid": "B", "wins": 2}, {"docid": "C", "wins": 2},
                                  {"docid": "D", "wins": 0}]
    assert r3["kept"].iloc[0] == ["A", "B", "C"]
    r2 = log[log["qid"] == "2"]
    assert r2["kept"].tolist() == [["A", "B"], ["B"]] and r2["outcome"].tolist() == ["repeat", "winner"]
    # pending: undecided pairs among unresolved finalists
    assert sorted(zip(res.pending["qid"], res.pending["doc_a"], res.pending["doc_b"])) == [("6", "A", "B"), ("8", "A", "B")]
    s = res.summary
    assert (s["topics"], s["topics_with_prefs"], s["topics_with_cycles"], s["topics_unresolved"], s["topics_unjudged"],
            s["topics_single_item"], s["topics_winner"], s["pref_qrels"]) == (7, 6, 1, 2, 1, 1, 2, 10)
    assert s["prefs_per_topic_histogram"] == {1: 3, 2: 2, 3: 1}
    # win rates, counted by hand: preference qrels 3/3 + 2/3 + 6/9 + 2/2; original qrels (1: D 0/3, 2: A 2/3)
    assert (s["pref_wins"], s["pref_pairings"]) == (13, 17)
    assert (s["orig_wins"], s["orig_pairings"]) == (2, 6)
    assert s["topics_original_is_pref"] == 1 and s["topics_with_original_in_pool"] == 3  # topic 5: X


def test_tournament_more_wins_beat_a_cycle_and_pairs_outside_the_tied_do_not_count():
    # round 1: A 3 wins (beats B, C, E), B, C, D... ; designed so that the tied set's internal
    # results decide, not the results against dropped items
    o = {("A", "B"): "B", ("A", "C"): "A", ("A", "D"): "A", ("A", "E"): "A", ("B", "C"): "B", ("B", "D"): "D",
         ("B", "E"): "B", ("C", "D"): "C", ("C", "E"): "C", ("D", "E"): "D"}
    prefs, outcome, rounds = tournament_topic(list("ABCDE"), o)
    # wins: A 3, B 3, C 2, D 2, E 0 -> tied A, B; B beat A
    assert [r["kept"] for r in rounds] == [["A", "B"], ["B"]] and prefs == ["B"] and outcome == "winner"


def test_pair_outcomes_majority_and_draws():
    j = judgments([("1", "a", "b", "W1"), ("1", "a", "b", "W2"), ("1", "b", "a", "W3"), ("1", "c", "d", "W1"),
                   ("1", "d", "c", "W2")])
    o = pair_outcomes(j).set_index("doc_a")
    assert o.loc["a", ["votes_a", "votes_b", "judgments", "winner"]].tolist() == [2, 1, 3, "a"]
    assert o.loc["c", "winner"] is None
    with pytest.raises(InputError, match="bad-winner"):
        pair_outcomes(pd.DataFrame({"qid": ["1"], "doc_a": ["a"], "doc_b": ["b"], "winner": ["z"]}))


def test_maintenance_update_replaces_best_only_when_beaten():
    best = qrels([("1", "B", 1), ("2", "X", 1), ("3", "K", 1)])
    pairs = pd.DataFrame({"qid": ["1", "1", "2"], "doc_a": ["B", "B", "X"], "doc_b": ["N1", "N2", "Y"]})
    j = judgments([("1", "N1", "B"), ("1", "B", "N2"), ("2", "X", "Y")])
    res = update_best(j, pairs, best)
    got = sorted(zip(res.qrels["qid"].to_pylist(), res.qrels["docid"].to_pylist()))
    assert got == [("1", "N1"), ("2", "X"), ("3", "K")]
    assert res.per_query.set_index("qid")["outcome"].to_dict() == {"1": "winner", "2": "winner", "3": "unchanged"}
    assert res.summary["topics_best_changed"] == 1 and res.summary["best_changed"] == ["1"]


# ------------------------------------------------------------------------------ pairs and cost

def small_pool(classes=None, qr=None):
    r = runs({"r1": {"1": ["a", "x"], "2": ["p", "q"]}, "r2": {"1": ["b", "a"], "2": ["p", "z"]},
              "r3": {"1": ["c"], "2": ["q"]}, "r4": {"1": ["a2"], "2": ["p"]}})
    return top1_pool(r, qrels=qr if qr is not None else qrels([("1", "q1", 1), ("2", "p", 2)]), classes=classes)


def test_pool_pairs_every_pair_once_with_provenance():
    pairs = pool_pairs(small_pool())
    per = pairs.groupby("qid").size().to_dict()
    assert per == {"1": 10, "2": 1}  # topic 1: a, a2, b, c, q1 -> 5 items; topic 2: p, q -> 2 items
    assert not pairs.duplicated(["qid", "doc_a", "doc_b"]).any() and (pairs["doc_a"] < pairs["doc_b"]).all()
    row = pairs[(pairs["qid"] == "2")].iloc[0]
    assert (row["doc_a"], row["doc_b"], row["a_runs"], row["b_runs"], row["a_in_qrels"]) == ("p", "q", ["r1", "r2", "r4"], ["r3"], True)
    assert row["pair_id"] == pair_id("2", "q", "p")  # unordered, stable
    classes = pa.table({"docid": ["a", "a2"], "class_id": ["a", "a"]})
    pairs_c = pool_pairs(small_pool(), classes=classes)
    assert pairs_c.groupby("qid").size().to_dict() == {"1": 6, "2": 1}  # a2 is a copy of a
    a = pairs_c[(pairs_c["qid"] == "1") & (pairs_c["doc_a"] == "a") & (pairs_c["doc_b"] == "b")].iloc[0]
    assert a["a_runs"] == ["r1", "r4"]


def test_cost_estimate_reproduces_the_paper():
    c = estimate_cost(141887)
    assert c["tasks"] == 14189 and c["cost"] == pytest.approx(34053.60) and c["cost"] > 34000
    assert estimate_cost(4210)["cost"] == pytest.approx(1010.40)
    c = estimate_cost(25, pairs_per_task=10, test_pairs=3, price_per_task=1.0, fee_per_task=0.5, assignments=2)
    assert (c["tasks"], c["task_assignments"], c["comparisons_shown"], c["cost"]) == (3, 6, 2 * (25 + 9), 9.0)
    with pytest.raises(InputError):
        estimate_cost(10, pairs_per_task=0)


def test_maintenance_pairs_only_new_against_best():
    old_pool = small_pool()
    r = runs({"r1": {"1": ["a"], "2": ["p"], "3": ["u"]}, "r5": {"1": ["n"], "2": ["p"], "3": ["v"]},
              "r6": {"1": ["a"], "2": ["m"], "3": ["u"]}})
    new_pool = top1_pool(r)
    best = qrels([("1", "b", 1), ("1", "c", 1), ("2", "p", 1)])
    pairs = maintenance_pairs(new_pool, best, previous=[old_pool])
    got = sorted(zip(pairs["qid"], pairs["doc_a"], pairs["doc_b"]))
    # topic 1: n is new (a was surfaced before) vs b and c; topic 2: m vs p; topic 3 has no best: all new pairs
    assert got == [("1", "b", "n"), ("1", "c", "n"), ("2", "m", "p"), ("3", "u", "v")]
    assert set(pairs["source"]) == {"maintenance"}
    done = pd.DataFrame({"qid": ["1"], "doc_a": ["b"], "doc_b": ["n"]})
    pairs2 = maintenance_pairs(new_pool, best, previous=[old_pool], judged=done)
    assert ("1", "b", "n") not in set(zip(pairs2["qid"], pairs2["doc_a"], pairs2["doc_b"]))


# ------------------------------------------------------------------------------ tasks

QR = qrels([(str(q), f"rel{q}-{i}", 2 if i == 0 else 1) for q in range(1, 6) for i in range(3)]
           + [(str(q), f"junk{q}", 0) for q in range(1, 6)])


def many_pairs(n):
    return pd.DataFrame({"qid": [str(1 + i % 5) for i in range(n)], "doc_a": [f"a{i}" for i in range(n)],
                         "doc_b": [f"b{i}" for i in range(n)]})


def test_tasks_ten_real_three_test_seeded_layout():
    p = many_pairs(23)
    t = make_tasks(p, QR, seed=3)
    sizes = t.groupby("task_id")["kind"].value_counts().unstack(fill_value=0)
    assert sizes["real"].tolist() == [10, 10, 3] and sizes["test"].tolist() == [3, 3, 3]
    real = t[t["kind"] == "real"]
    assert sorted(real["doc_a"]) == sorted(p["doc_a"]) and not real["pair_id"].duplicated().any()
    assert (t.groupby("task_id")["slot"].apply(lambda s: sorted(s) == list(range(1, len(s) + 1)))).all()
    pos = {(q, d) for q, d, r in zip(QR["qid"].to_pylist(), QR["docid"].to_pylist(), QR["rel"].to_pylist()) if r > 0}
    for r in t[t["kind"] == "test"].itertuples():
        rel = r.left_docid if r.expected == "left" else r.right_docid
        off = r.right_docid if r.expected == "left" else r.left_docid
        assert (r.qid, rel) in pos and (r.qid, off) not in pos
        assert r.offtopic_qid != r.qid and (r.offtopic_qid, off) in pos
    assert set(t["expected"].dropna()) == {"left", "right"}
    # left/right placement varies, slot order is shuffled, all seeded
    assert (real["left_docid"] == real["doc_b"]).any() and (real["left_docid"] == real["doc_a"]).any()
    pd.testing.assert_frame_equal(t, make_tasks(p, QR, seed=3))
    assert not t.equals(make_tasks(p, QR, seed=4))
    ex = export_view(t)
    assert list(ex.columns) == ["task_id", "slot", "qid", "query", "left_docid", "left_text", "right_docid",
                                "right_text", "choice"]
    tx = make_tasks(p, QR, seed=3, texts={"a0": ("passage zero", None)}, queries={"1": "query one"})
    row = tx[(tx["left_docid"] == "a0") | (tx["right_docid"] == "a0")].iloc[0]
    assert "passage zero" in (row["left_text"], row["right_text"]) and row["query"] == "query one"
    with pytest.raises(InputError, match="no-test-pairs"):
        make_tasks(p, qrels([("1", "x", 1)]))


# ------------------------------------------------------------------------------ import, screening

def write(tmp_path, name, df):
    p = tmp_path / name
    df.to_csv(p, index=False)
    return p


def answer_all(tasks, worker, right=lambda r: True, task_ids=None):
    """Answers of ``worker``: correct on test pairs, 'left' on real pairs."""
    rows = []
    for r in tasks.itertuples():
        if task_ids is not None and r.task_id not in task_ids:
            continue
        c = r.expected if r.kind == "test" and right(r) else ("right" if r.kind == "test" and r.expected == "left" else "left")
        if r.kind == "real":
            c = "left"
        rows.append((r.task_id, r.slot, worker, c))
    return pd.DataFrame(rows, columns=["task_id", "slot", "worker", "choice"])


def test_import_rules_strict_and_lenient(tmp_path):
    t = make_tasks(many_pairs(12), QR, seed=1)
    good = answer_all(t, "W1")
    ans, rep = read_answers([write(tmp_path, "a.csv", good)], t)
    assert len(ans) == len(t) and dict(zip(rep["rule"], rep["count"]))["imported"] == len(t)
    assert set(ans["winner"]) <= set(t["left_docid"]) | set(t["right_docid"])
    bad = pd.concat([good, pd.DataFrame([("T99999", 1, "W1", "left")], columns=good.columns)])
    with pytest.raises(InputError) as e:
        read_answers([write(tmp_path, "b.csv", bad)], t)
    assert e.value.rule == "unknown-item" and e.value.line == len(good) + 2
    bad = good.copy()
    bad.loc[3, "choice"] = "middle"
    with pytest.raises(InputError, match="bad-choice"):
        read_answers([write(tmp_path, "c.csv", bad)], t)
    bad = pd.concat([good, good.iloc[[0]].assign(choice="right" if good.iloc[0]["choice"] == "left" else "left")])
    with pytest.raises(InputError, match="conflict"):
        read_answers([write(tmp_path, "d.csv", bad)], t)
    with pytest.raises(InputError, match="missing-column"):
        read_answers([write(tmp_path, "e.csv", good.drop(columns=["worker"]))], t)
    # lenient: bad rows dropped and counted; a repeated answer counts once; a docid is a valid choice
    mixed = pd.concat([good, good.iloc[[0]], pd.DataFrame([("T99999", 1, "W1", "left")], columns=good.columns)])
    mixed.iloc[1, 3] = t.iloc[1]["right_docid"]
    ans, rep = read_answers([write(tmp_path, "f.csv", mixed)], t, lenient=True)
    counts = dict(zip(rep["rule"], rep["count"]))
    assert counts["unknown-item"] == 1 and counts["repeated"] == 1 and len(ans) == len(t)
    assert ans.set_index(["task_id", "slot"]).loc[(t.iloc[1]["task_id"], t.iloc[1]["slot"]), "choice"] == "right"


def test_failing_worker_excluded_tasks_reissued(tmp_path):
    t = make_tasks(many_pairs(30), QR, seed=1)  # 3 tasks
    ids = sorted(set(t["task_id"]))
    a = pd.concat([answer_all(t, "W1", task_ids={ids[0], ids[1]}),
                   answer_all(t, "W2", right=lambda r: False, task_ids={ids[2]})])
    ans, _ = read_answers([write(tmp_path, "a.csv", a)], t)
    res = screen_answers(ans, t)
    assert res["excluded"] == ["W2"]
    assert res["reissue"][["task_id", "reason"]].values.tolist() == [[ids[2], "worker-excluded"]]
    assert set(res["judgments"]["worker"]) == {"W1"} and len(res["judgments"]) == 20
    w = res["workers"].set_index("worker")
    assert w.loc["W2", "excluded"] and w.loc["W2", "test_failed"] == 3 and w.loc["W1", "test_failed"] == 0
    new = reissue_tasks(t, res["reissue"], exclude_workers=res["excluded"], seed=1)
    assert set(new["task_id"]) == {ids[2] + ".r1"} and all(x == ["W2"] for x in new["exclude_workers"])
    old = t[t["task_id"] == ids[2]]
    assert sorted(new["pair_id"]) == sorted(old["pair_id"])
    # the test pairs keep their key after re-layout
    for r in new[new["kind"] == "test"].itertuples():
        o = old[old["pair_id"] == r.pair_id].iloc[0]
        assert {r.left_docid, r.right_docid} == {o.left_docid, o.right_docid}
        assert (r.left_docid if r.expected == "left" else r.right_docid) == (o.left_docid if o.expected == "left" else o.right_docid)
    # while the re-issue is unanswered, the task is pending, not re-issued again
    ans, _ = read_answers([write(tmp_path, "a.csv", a)], pd.concat([t, new], ignore_index=True))
    assert len(screen_answers(ans, pd.concat([t, new], ignore_index=True))["reissue"]) == 0
    # the re-issued task answered by W3: nothing left to re-issue, every real pair judged once
    all_t = pd.concat([t, new], ignore_index=True)
    a2 = answer_all(new, "W3")
    ans, _ = read_answers([write(tmp_path, "a.csv", a), write(tmp_path, "b.csv", a2)], all_t)
    res = screen_answers(ans, all_t)
    assert len(res["reissue"]) == 0 and len(res["judgments"]) == 30
    # an incomplete answer set is re-issued too
    part = answer_all(t, "W1", task_ids={ids[0]}).iloc[:-2]
    ans, _ = read_answers([write(tmp_path, "c.csv", part)], t)
    res = screen_answers(ans, t)
    assert res["reissue"][["task_id", "reason"]].values.tolist() == [[ids[0], "incomplete"]]
    assert res["summary"]["tasks_unanswered"] == 2


def test_agreement_matches_statsmodels():
    from statsmodels.stats.inter_rater import fleiss_kappa

    rng = np.random.default_rng(0)
    rows = []
    table = []
    for i in range(40):
        votes = rng.random(3) < (0.8 if i % 2 else 0.3)  # True: doc_a preferred
        for w, v in enumerate(votes):
            rows.append({"qid": "1", "pair_id": f"p{i}", "doc_a": f"a{i}", "doc_b": f"b{i}",
                         "winner": f"a{i}" if v else f"b{i}", "worker": f"W{w}"})
        table.append([int(votes.sum()), int(3 - votes.sum())])
    rows.append({"qid": "1", "pair_id": "single", "doc_a": "s", "doc_b": "t", "winner": "s", "worker": "W0"})
    ag = worker_agreement(pd.DataFrame(rows))
    table = np.array(table)
    assert ag["pairs_multi"] == 40 and ag["fleiss_pairs"] == 40 and ag["judgments_per_pair"] == 3
    assert ag["fleiss_kappa"] == pytest.approx(fleiss_kappa(table, method="fleiss"))
    agree = [(a * (a - 1) + b * (b - 1)) / 6 for a, b in table]
    assert ag["raw_agreement"] == pytest.approx(np.mean(agree))


# ------------------------------------------------------------------------------ oracle

def test_oracle_follows_grades_latent_ties_and_failing_workers():
    truth = qrels([("1", "g3", 3), ("1", "g2", 2), ("1", "g2b", 2), ("1", "g0", 0)] +
                  [(str(q), f"rel{q}", 1) for q in range(2, 5)])
    docs = ["g3", "g2", "g2b", "g0", "unj"]
    p = pd.DataFrame([("1", a, b) for a, b in combinations(docs, 2)], columns=["qid", "doc_a", "doc_b"])
    t = make_tasks(p, truth, pairs_per_task=4, test_pairs=3, seed=2)
    ans = simulate_answers(t, truth, workers=3, error_rate=0.0, seed=5)
    merged = ans.merge(t, on=["task_id", "slot"])
    merged["winner"] = np.where(merged["choice"] == "left", merged["left_docid"], merged["right_docid"])
    real = merged[merged["kind"] == "real"]
    w = {tuple(sorted((a, b))): x for a, b, x in zip(real["doc_a"], real["doc_b"], real["winner"])}
    assert w[("g2", "g3")] == "g3" and w[("g0", "g2")] == "g2" and w[("g2b", "g3")] == "g3"
    # latent ties: the equal-grade pairs are decided consistently (no cycle among g2, g2b and the rest)
    prefs, outcome, _ = tournament_topic(docs, w)
    assert prefs == ["g3"] and outcome == "winner"
    test = merged[merged["kind"] == "test"]
    assert (test["choice"] == test["expected"]).all()
    # a failing worker (inverted) fails every test pair; excluded workers never get a task
    t2 = t.copy()
    t2["exclude_workers"] = [["W01"]] * len(t2)
    a2 = simulate_answers(t2, truth, workers=3, failing=["W02"], failing_mode="inverted", seed=5)
    assert "W01" not in set(a2["worker"])
    m2 = a2.merge(t2, on=["task_id", "slot"])
    f = m2[(m2["worker"] == "W02") & (m2["kind"] == "test")]
    assert len(f) and (f["choice"] != f["expected"]).all()
    # answers depend on (seed, task, worker) only, not on task order
    a3 = simulate_answers(t.iloc[::-1], truth, workers=3, error_rate=0.3, seed=5)
    a4 = simulate_answers(t, truth, workers=3, error_rate=0.3, seed=5)
    pd.testing.assert_frame_equal(a3.reset_index(drop=True), a4.reset_index(drop=True))
    # error rate ~ share of real answers against the truth
    many = pd.DataFrame([("1", f"x{i}", f"y{i}") for i in range(400)], columns=["qid", "doc_a", "doc_b"])
    big_truth = qrels([("1", f"x{i}", 2) for i in range(400)] + [(str(q), f"rel{q}", 1) for q in range(2, 5)])
    tt = make_tasks(many, big_truth, seed=1)
    a = simulate_answers(tt, big_truth, workers=4, error_rate=0.2, seed=1).merge(tt, on=["task_id", "slot"])
    a = a[a["kind"] == "real"]
    wrong = (np.where(a["choice"] == "left", a["left_docid"], a["right_docid"]) != a["doc_a"]).mean()
    assert 0.15 < wrong < 0.25
    with pytest.raises(InputError):
        simulate_answers(t, truth, failing=["W09"], workers=3)


def test_sparsify_keeps_n_per_topic_seeded():
    q = qrels([(str(t), f"d{t}-{i}", g) for t in range(1, 4) for i, g in enumerate([0, 1, 2, 2, 3])])
    s = sparsify_qrels(q, per_topic=1, min_rel=2, seed=1)
    assert s.num_rows == 3 and min(s["rel"].to_pylist()) >= 2
    b = sparsify_qrels(q, per_topic=2, min_rel=1, best=True, seed=1)
    assert b["rel"].to_pylist() == [3, 3, 3]  # only one grade-3 passage per topic
    assert sparsify_qrels(q, per_topic=1, min_rel=2, seed=1).equals(s)


# ------------------------------------------------------------------------------ win ratios

def test_win_ratios_and_bonferroni_equal_direct_scipy():
    from scipy.stats import binomtest

    rng = np.random.default_rng(7)
    run_names = [PERFECT, "r1", "r2", "r3"]
    tops_rows, rows = [], []
    for q in range(60):
        qid = str(q)
        docs = {r: f"{qid}-{0 if r == PERFECT else rng.integers(0, 3)}" for r in run_names}
        for r, d in docs.items():
            tops_rows.append((r, qid, d))
        cand = sorted(set(docs.values()))
        strength = {d: rng.random() + (0.8 if d.endswith("-0") else 0) for d in cand}
        for a, b in combinations(cand, 2):
            if q % 7 == 0 and b.endswith("-2"):
                continue  # some pairs unjudged
            rows.append({"qid": qid, "doc_a": a, "doc_b": b, "winner": a if strength[a] > strength[b] else b})
    tops = pd.DataFrame(tops_rows, columns=["run", "qid", "docid"])
    j = pd.DataFrame(rows)
    wr = win_ratios_from_tops(tops, pair_outcomes(j), alpha=0.05, correction="bonferroni")
    # direct computation
    win = {(r["qid"], r["doc_a"], r["doc_b"]): r["winner"] for r in rows}
    top = {(r, q): d for r, q, d in tops_rows}
    direct = {}
    for x, y in combinations(run_names, 2):
        w = n = 0
        for q in range(60):
            dx, dy = top[(x, str(q))], top[(y, str(q))]
            if dx == dy:
                continue
            o = win.get((str(q), *sorted((dx, dy))))
            if o is None:
                continue
            n += 1
            w += o == dx
        direct[(x, y)] = (w, n)
    m = len(direct)
    t = wr.table.set_index(["run", "opponent"])
    for (x, y), (w, n) in direct.items():
        p = binomtest(w, n, 0.5).pvalue
        assert t.loc[(x, y), "wins"] == w and t.loc[(x, y), "decided"] == n
        assert t.loc[(x, y), "ratio"] == pytest.approx(w / n)
        assert t.loc[(y, x), "ratio"] == pytest.approx(1 - w / n)
        assert t.loc[(x, y), "p"] == pytest.approx(p)
        assert t.loc[(x, y), "p_corrected"] == pytest.approx(min(1.0, p * m))
        assert t.loc[(x, y), "significant"] == (min(1.0, p * m) < 0.05)
        assert wr.matrix.loc[y, x] == pytest.approx(w / n)  # column x over row y
    assert any(t["significant"])  # the example has a significant pair
    wins = wr.wins.set_index("run")["wins"]
    for r in run_names:
        assert wins[r] == sum(1 for o in run_names if o != r and t.loc[(r, o), "ratio"] > 0.5)


def test_win_ratios_from_pool_and_perfect_run():
    pool = small_pool()
    j = judgments([("1", "q1", "a"), ("1", "q1", "b"), ("1", "c", "q1"), ("1", "a", "b"), ("1", "a", "c"),
                   ("1", "b", "c"), ("1", "a2", "a"), ("1", "a2", "b"), ("1", "a2", "c"), ("1", "q1", "a2"),
                   ("2", "p", "q")])
    wr = win_ratios(j, pool)
    assert wr.runs == [PERFECT, "r1", "r2", "r3", "r4"]
    t = wr.table.set_index(["run", "opponent"])
    # r3's tops c and q against the perfect run's q1 and p: c beat q1, q lost to p
    assert t.loc[("r3", PERFECT), ["differ", "decided", "wins"]].tolist() == [2, 2, 1]
    # r1 and r2 agree in topic 2 (p): only topic 1 counts, a beat b
    assert t.loc[("r1", "r4"), ["differ", "decided", "wins"]].tolist() == [1, 1, 0]  # a2 beat a
    assert t.loc[("r1", "r2"), ["differ", "decided", "wins"]].tolist() == [1, 1, 1]


# ------------------------------------------------------------------------------ re-scoring

def test_rescore_equals_direct_evaluation_and_scipy():
    from scipy import stats

    from qrelkit.evaluate import evaluate

    r = runs({"r1": {"1": ["a", "b", "c"], "2": ["p", "q"], "3": ["u", "v"]},
              "r2": {"1": ["b", "a"], "2": ["q", "p"], "3": ["v", "w", "u"]},
              "r3": {"1": ["c", "d"], "2": ["z", "q", "p"], "3": ["w"]}})
    orig = qrels([("1", "a", 1), ("2", "p", 2), ("3", "u", 1), ("3", "v", 0)])
    pref = qrels([("1", "b", 1), ("2", "q", 1), ("3", "v", 1), ("3", "w", 1)])
    res = rescore(r, orig, pref, ci="t")
    b = res.leaderboard.set_index("run")
    ev_p = evaluate(r, pref, ["RR@10"]).summary.to_pandas().set_index("run")["value"]
    ev_o = evaluate(r, orig, ["RR@10"]).summary.to_pandas().set_index("run")["value"]
    for name in ("r1", "r2", "r3"):
        assert b.loc[name, "mrr_prefs"] == pytest.approx(ev_p[name])
        assert b.loc[name, "mrr_original"] == pytest.approx(ev_o[name])
    assert b.loc[PERFECT, "mrr_original"] == 1.0 and b.loc[PERFECT, "perfect"]
    assert b.loc[PERFECT, "mrr_prefs"] == pytest.approx(0.0)  # a, p, u are no preference qrels
    tau = stats.kendalltau([ev_o[n] for n in ("r1", "r2", "r3")], [ev_p[n] for n in ("r1", "r2", "r3")]).statistic
    assert res.summary["kendall_tau"] == pytest.approx(tau)
    pq = res.per_query[res.per_query["run"] == "r3"]["prefs"].to_numpy()  # 0, 0.5, 1
    lo, hi = stats.t.interval(0.95, len(pq) - 1, loc=pq.mean(), scale=stats.sem(pq))
    assert (b.loc["r3", "ci_prefs_low"], b.loc["r3", "ci_prefs_high"]) == (pytest.approx(lo), pytest.approx(hi))
    lo_b, hi_b = confidence_interval(np.array([0, 0.5, 1, 1, 0.25, 0.5]), method="bootstrap", seed=1, key="x")
    assert lo_b <= 0.5416 <= hi_b and (lo_b, hi_b) == confidence_interval(
        np.array([0, 0.5, 1, 1, 0.25, 0.5]), method="bootstrap", seed=1, key="x")
    # classes: a member of a winning class counts as relevant
    classes = pa.table({"docid": ["b", "a"], "class_id": ["b", "b"]})
    res_c = rescore(r, orig, pref, classes=classes)
    assert res_c.leaderboard.set_index("run").loc["r1", "mrr_prefs"] > b.loc["r1", "mrr_prefs"]


# ------------------------------------------------------------------------------ single ranker

def test_single_ranker_categories_and_outcomes():
    r = runs({"nn": {"1": ["a", "b"], "2": ["x", "y"], "3": ["k"], "4": ["m", "n"]}, "other": {"5": ["z"]}})
    q = qrels([("1", "a", 1), ("2", "q2", 1), ("2", "q3", 2), ("3", "k", 1), ("4", "n", 1), ("5", "z", 1)])
    pairs, cats = single_ranker_pairs(r, q, "nn")
    got = {(p.qid, p.category, p.top_docid, p.other_docid) for p in pairs.itertuples()}
    assert got == {("1", "A", "a", "b"), ("2", "B", "x", "q3"), ("4", "B", "m", "n")}
    c = cats.set_index("category")
    assert c.loc["A", "queries"] == 2 and c.loc["B", "queries"] == 2 and c.loc["no-second", "queries"] == 1
    assert c.loc["not-retrieved", "queries"] == 1 and c.loc["A", "share"] == 0.5
    j = judgments([("1", "a", "b"), ("2", "q3", "x"), ("4", "m", "n")])
    out = single_ranker_outcomes(pairs, j).set_index("category")
    assert out.loc["A", ["top_preferred", "other_preferred"]].tolist() == [1, 0]
    assert out.loc["B", ["top_preferred", "other_preferred", "share_top_preferred"]].tolist() == [1, 1, 0.5]
    # with classes, a copy of the qrel at rank 1 is category A, and the second passage is never a copy
    classes = pa.table({"docid": ["x", "q3", "y"], "class_id": ["x", "x", "x"]})
    r2 = runs({"nn": {"2": ["x", "y", "w"]}})
    pairs_c, _ = single_ranker_pairs(r2, q, "nn", classes=classes)
    assert pairs_c[["category", "top_docid", "other_docid"]].values.tolist() == [["A", "x", "w"]]
    with pytest.raises(InputError, match="unknown-run"):
        single_ranker_pairs(r, q, "nope")


def test_config_prefs_section():
    import tomllib
    from pathlib import Path

    from qrelkit.config import defaults_tree, load_config

    root = Path(__file__).resolve().parents[1]
    cfg = tomllib.loads((root / "configs" / "trec-dl-2022.toml").read_text())["prefs"]
    assert (cfg["pairs_per_task"], cfg["test_pairs"], cfg["alpha"]) == (10, 3, 0.05)
    assert (cfg["price_per_task"], cfg["fee_per_task"], cfg["correction"], cfg["measure"]) == (2.0, 0.4, "bonferroni", "RR@10")
    assert set(defaults_tree()["prefs"]) == set(cfg)  # every key has a built-in default
    c = load_config(None)
    assert c.get_value("prefs", "pairs_per_task") == 10 and c.get_value("prefs", "error_rate") == 0.1
