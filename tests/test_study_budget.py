"""The budget study (issue 23, ``qrelkit study budget``): against counts and Kendall's tau worked
by hand on a toy collection, against evaluate() and significance() called directly on the qrels
found so far, and the command line (its failures, a happy path, byte-identical outputs)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from qrelkit.cli import run as cli_run
from qrelkit.errors import InputError
from qrelkit.evaluate import evaluate, significance
from qrelkit.io.qrels import QRELS_SCHEMA
from qrelkit.io.runs import canonicalize
from qrelkit.pooler import depth_pool, simulate_order, topic_pools
from qrelkit.reuse import leave_out
from qrelkit.reuse.budget import PLACEHOLDER_DOCID, Budget, budget_study, parse_budgets

# ---------------------------------------------------------------------------- the toy, by hand
#
# Topic 1: a = d1 d2 d3 d4, b = d3 d5 d1 d6, c = d6 d2 d5 d7; qrels d3 d5 d7 relevant (d7 only at c's
#          rank 4, outside the depth-3 pool), d1 d2 d6 not. Depth-3 pool: d1 d2 d3 d5 d6 (5 documents).
# Topic 2: a = e1 e2 e3, b = e2 e4 e5, c = e5 e6 e1; qrels e1 (1) and e4 (2) relevant, e3 e6 not.
#          Depth-3 pool: e1 .. e6 (6 documents; e5 is outside the qrels: not relevant).
#
# docid order judges the pool alphabetically:
#   budget 2:   T1 d1 d2 (0 relevant)       T2 e1 e2 (1: e1)    -> mean found 0.5, cost 2
#   budget 50%: T1 ceil(2.5)=3 d1 d2 d3 (1) T2 3 e1 e2 e3 (1)   -> mean found 1.0, cost 3
#   budget 100%: T1 5 (2: d3 d5)            T2 6 (2: e1 e4)     -> mean found 2.0, cost 5.5
# AP (rel 1; unjudged = not relevant), per topic, then the mean:
#   full qrels:  T1 a 1/9, b 2/3, c (1/3 + 1/2)/3;  T2 a 1/2, b 1/4, c 1/6  -> b .458 > a .306 > c .222
#   budget 2:    T1 nothing relevant: 0, 0, 0;      T2 (R=1) a 1, b 0, c 1/3 -> a .5 > c .167 > b 0
#                pairs against the full order: (a,b) discordant, (a,c) concordant, (b,c) discordant:
#                tau = (1 - 2) / 3 = -1/3; ranks a 1 c 2 b 3 against b 1 a 2 c 3: max drop 2 (b)
#   budget 50%:  T1 (R=1: d3) a 1/3, b 1, c 0;      T2 (R=1) a 1, b 0, c 1/3 -> a .667 > b .5 > c .167
#                (a,b) discordant, (a,c), (b,c) concordant: tau = 1/3; max drop 1 (b)
#   budget 100%: T1 (R=2: d3 d5) a 1/6, b 1, c 1/6; T2 as the full qrels -> b > a > c: tau = 1, drop 0
# depth-1 judges a's, b's and c's first documents: T1 d1 d3 d6 (1 relevant), T2 e1 e2 e5 (1): cost 3,
#   found 1, the same positive documents as docid at 50%: tau 1/3. depth-2: T1 d1 d2 d3 d5 d6 (2),
#   T2 e1 e2 e4 e5 e6 (2): cost 5, found 2.

TOY = {
    "a": {"1": ["d1", "d2", "d3", "d4"], "2": ["e1", "e2", "e3"]},
    "b": {"1": ["d3", "d5", "d1", "d6"], "2": ["e2", "e4", "e5"]},
    "c": {"1": ["d6", "d2", "d5", "d7"], "2": ["e5", "e6", "e1"]},
}
TOY_QRELS = [("1", "d1", 0), ("1", "d2", 0), ("1", "d3", 1), ("1", "d5", 1), ("1", "d6", 0), ("1", "d7", 1),
             ("2", "e1", 1), ("2", "e3", 0), ("2", "e4", 2), ("2", "e6", 0)]


def make_runs(spec: dict[str, dict[str, list[str]]]) -> pa.Table:
    rows = [(run, q, d, i + 1, float(1000 - i)) for run, per in spec.items() for q, docs in per.items()
            for i, d in enumerate(docs)]
    return canonicalize(pa.Table.from_pandas(pd.DataFrame(rows, columns=["run", "qid", "docid", "rank", "score"]),
                                             preserve_index=False))


def make_qrels(rows) -> pa.Table:
    return pa.table({"qid": [r[0] for r in rows], "docid": [r[1] for r in rows],
                     "rel": pa.array([r[2] for r in rows], pa.int32())}).cast(QRELS_SCHEMA)


@pytest.fixture(scope="module")
def toy():
    return make_runs(TOY), make_qrels(TOY_QRELS)


@pytest.fixture(scope="module")
def toy_study(toy):
    runs, qrels = toy
    return budget_study(runs, qrels, strategies=["docid", "depth-1"], depths=[2], budgets="2,50%,100%", depth=3)


def _row(res, strategy: str, budget: str) -> dict:
    s = res.summary.to_pandas()
    return s[(s["strategy"] == strategy) & (s["budget"] == budget)].iloc[0].to_dict()


def test_relevant_found_at_each_budget_is_the_count_by_hand(toy_study):
    t = toy_study.topics.to_pandas()
    found = {(r.strategy, r.budget, r.qid): (r.judged, r.relevant_found) for r in t.itertuples()}
    assert found[("docid", "2", "1")] == (2, 0) and found[("docid", "2", "2")] == (2, 1)
    assert found[("docid", "50%", "1")] == (3, 1) and found[("docid", "50%", "2")] == (3, 1)
    assert found[("docid", "100%", "1")] == (5, 2) and found[("docid", "100%", "2")] == (6, 2)
    assert t.loc[t["strategy"] == "docid", "relevant"].tolist() == [3, 2] * 3  # d7 is relevant outside the pool
    assert t.loc[t["strategy"] == "docid", "pool"].tolist() == [5, 6] * 3
    for budget, cost, mean in (("2", 2.0, 0.5), ("50%", 3.0, 1.0), ("100%", 5.5, 2.0)):
        row = _row(toy_study, "docid", budget)
        assert (row["judgments_mean"], row["relevant_found_mean"]) == (cost, mean), budget
    assert _row(toy_study, "docid", "100%")["recall"] == pytest.approx(4 / 5)


def test_kendall_tau_rank_drop_and_tau_ap_are_the_values_by_hand(toy_study):
    expected = {"2": (-1 / 3, 2, 0.0), "50%": (1 / 3, 1, 0.0), "100%": (1.0, 0, 1.0)}
    for budget, (tau, drop, tau_ap) in expected.items():
        row = _row(toy_study, "docid", budget)
        assert row["kendall_tau"] == pytest.approx(tau), budget
        assert row["max_rank_drop"] == drop and row["tau_ap"] == pytest.approx(tau_ap), budget
    runs = toy_study.runs.to_pandas()
    full = runs[(runs["strategy"] == "docid") & (runs["budget"] == "2")].set_index("run")
    assert full["score_full"].to_dict() == pytest.approx({"a": (1 / 9 + 1 / 2) / 2, "b": (2 / 3 + 1 / 4) / 2,
                                                          "c": ((1 / 3 + 1 / 2) / 3 + 1 / 6) / 2})
    assert full["score"].to_dict() == pytest.approx({"a": 0.5, "b": 0.0, "c": 1 / 6})
    assert full["rank"].to_dict() == {"a": 1, "b": 3, "c": 2} and full["rank_change"].to_dict() == {"a": -1, "b": 2, "c": -1}


def test_depth_k_costs_its_pool_and_is_judged_whole(toy_study):
    d1, d2 = _row(toy_study, "depth-1", "pool"), _row(toy_study, "depth-2", "pool")
    assert (d1["kind"], d1["judgments_mean"], d1["relevant_found_mean"]) == ("depth", 3.0, 1.0)
    assert d1["kendall_tau"] == pytest.approx(1 / 3)
    assert (d2["judgments_mean"], d2["relevant_found_mean"]) == (5.0, 2.0)
    assert toy_study.summary["strategy"].to_pylist() == ["docid"] * 3 + ["depth-1", "depth-2"]


def test_budgets_as_shares_round_up_and_stop_at_the_pool():
    assert [b.label for b in parse_budgets("10%, 12.5%,100,10%")] == ["10%", "12.5%", "100"]
    b = parse_budgets(["12.5%"])[0]
    assert b.share == Fraction(1, 8) and b.judgments(9) == 2 and b.judgments(8) == 1
    assert Budget("10%", share=Fraction(1, 10)).judgments(1000) == 100  # exact: no 100.00000000000001 -> 101
    assert parse_budgets("500")[0].judgments(120) == 120 and parse_budgets("100%")[0].judgments(7) == 7
    for bad in ("0", "0%", "101%", "-5", "1.5", "abc", "", "10%,,x"):
        with pytest.raises(InputError, match=r"\[bad-budget\]"):
            parse_budgets(bad)


def test_an_extra_order_is_a_strategy_judged_in_its_order(toy):
    runs, qrels = toy
    # d7 is judged although outside the pool; d9 is in no run and not in the qrels; e-topic order is short
    mine = {"1": ["d7", "d5", "d9", "d3"], "2": ["e4", "e1"]}
    res = budget_study(runs, qrels, strategies=[], extra_orders={"mine": mine}, budgets="2,50%,100%", depth=3)
    t = res.topics.to_pandas().set_index(["budget", "qid"])
    assert t.loc[("2", "1"), ["judged", "relevant_found"]].tolist() == [2, 2]
    assert t.loc[("50%", "1"), ["judged", "relevant_found"]].tolist() == [3, 2]
    assert t.loc[("50%", "2"), ["judged", "relevant_found"]].tolist() == [2, 2]  # its order holds two
    assert t.loc[("100%", "1"), ["judged", "relevant_found"]].tolist() == [4, 3]
    full = _row(res, "mine", "100%")  # every relevant document found: the full leaderboard
    assert full["kind"] == "order" and full["kendall_tau"] == 1.0 and full["recall"] == 1.0
    r = res.runs.to_pandas()
    r = r[r["budget"] == "100%"]
    assert r["score"].tolist() == pytest.approx(r["score_full"].tolist())
    for bad, rule in (({"mine": {"1": ["d1"]}}, "missing-topic"), ({"mine": {"1": ["d1", "d1"], "2": []}}, "bad-order"),
                      ({"mtf": mine}, "bad-option"), ({"depth-3": mine}, "bad-option")):
        with pytest.raises(InputError, match=rf"\[{rule}\]"):
            budget_study(runs, qrels, strategies=[], extra_orders=bad, budgets="2", depth=3)


def test_unknown_strategies_and_options_are_refused(toy):
    runs, qrels = toy
    for kw, rule in (({"strategies": ["nope"]}, "bad-option"), ({"strategies": ["depth-0"]}, "bad-option"),
                     ({"strategies": ["depth-x"]}, "bad-option"), ({"measure": "NoSuch@3"}, "unknown-measure"),
                     ({"rel": 0}, "bad-option"), ({"budgets": "0%"}, "bad-budget"), ({"pooled": []}, "no-pooled-runs")):
        with pytest.raises(InputError, match=rf"\[{rule}\]"):
            budget_study(runs, qrels, depth=3, **{"budgets": "2", **kw})


def test_refusals_that_name_the_mistake(toy):
    runs, qrels = toy
    for kw, text in (({"strategies": ["depth-0"]}, "at least 1"), ({"workers": 0}, "workers must be at least 1"),
                     ({"strategies": ["cal"]}, "--corpus, --topics")):
        with pytest.raises(InputError, match=text):
            budget_study(runs, qrels, depth=3, **{"budgets": "2", **kw})
    elsewhere = make_qrels([("999", "x1", 1), ("999", "x2", 0)])  # topics no run retrieved
    with pytest.raises(InputError, match=r"\[no-pool\]"):
        budget_study(runs, elsewhere, depth=3, budgets="2", strategies=["docid"])


def test_tau_ap_is_blank_while_every_run_ties_and_empty_pools_are_noted(toy):
    runs, qrels = toy
    more = pa.concat_tables([qrels, make_qrels([("999", "x1", 1)])])
    res = budget_study(runs, more, depth=3, budgets="1,100%", strategies=["docid"])
    assert any("empty pool" in n and "999" in n for n in res.notes)
    # docid order judges d1 (not relevant) first: after one judgment every run scores 0
    tie_runs = make_runs({"a": {"1": ["d2", "d1"]}, "b": {"1": ["d1", "d2"]}, "c": {"1": ["d2", "d3"]}})
    res = budget_study(tie_runs, make_qrels([("1", "d1", 0), ("1", "d2", 1), ("1", "d3", 1)]), depth=2,
                       budgets="1,100%", strategies=["docid"])
    s = res.summary.to_pandas().set_index("budget")
    assert s.loc["1", "relevant_found_mean"] == 0 and np.isnan(s.loc["1", "tau_ap"])
    assert s.loc["100%", "tau_ap"] == pytest.approx(1.0)


# ---------------------------------------------- against evaluate() and significance() themselves

def random_collection(seed: int, n_runs: int = 7, n_topics: int = 6):
    """Runs with score ties, a run missing a topic, documents outside the qrels; graded qrels."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(n_runs):
        for t in range(n_topics):
            if r == 2 and t == 3:
                continue  # run r2 retrieved nothing for topic 3
            docs = rng.choice(60, size=int(rng.integers(12, 30)), replace=False)
            # many ties, and scores that differ only beyond float32 (trec_eval's ranking ties them)
            scores = np.round(np.sort(rng.random(len(docs)))[::-1], 1) + rng.integers(0, 3, len(docs)) * 1e-9
            rows += [(f"r{r}", str(t + 1), f"D{d}", i + 1, float(s)) for i, (d, s) in enumerate(zip(docs, scores))]
    runs = canonicalize(pa.Table.from_pandas(pd.DataFrame(rows, columns=["run", "qid", "docid", "rank", "score"]),
                                             preserve_index=False))
    pool = depth_pool(runs, 8)
    q = [(qid, d, int(rng.choice([0, 0, 1, 2]))) for qid, d in zip(pool["qid"].to_pylist(), pool["docid"].to_pylist())]
    q += [(str(t + 1), f"X{t}", 1) for t in range(n_topics)]  # relevant, retrieved by no run
    return runs, make_qrels(q)


def found_qrels(runs, qrels, name: str, n: int, depth: int, batch: int) -> pa.Table:
    """The qrels found so far by strategy ``name`` after ``n`` judgments per topic, built here from
    the adjudication module's own replay."""
    truth = {(q, d): g for q, d, g in zip(qrels["qid"].to_pylist(), qrels["docid"].to_pylist(), qrels["rel"].to_pylist())}
    rows = []
    for qid in sorted({q for q, _ in truth}):
        tp = topic_pools(depth_pool(runs, depth)).get(qid)
        order = simulate_order(name, tp, np.array([truth.get((qid, d), 0) >= 1 for d in tp.docids]), budget=n,
                               batch=batch)
        got = [(qid, tp.docids[i], max(truth.get((qid, tp.docids[i]), 0), 0)) for i in order]
        rows += got or [(qid, PLACEHOLDER_DOCID, 0)]
    return make_qrels(rows)


@pytest.mark.parametrize("measure", ["AP", "nDCG@5", "RR(rel=2)", "P@3", "Bpref"])
def test_the_leaderboards_are_evaluate_on_the_qrels_found_so_far(measure):
    from qrelkit.pooler import AdjudicateParams

    runs, qrels = random_collection(1)
    res = budget_study(runs, qrels, strategies=["mtf", "hedge"], budgets="5", depth=8, measure=measure,
                       params=AdjudicateParams.from_config(None, batch=2))
    got = res.runs.to_pandas()
    full = evaluate(runs, qrels, [measure], rel=1).summary.to_pandas().set_index("run")["value"]
    for name in ("mtf", "hedge"):
        want = evaluate(runs, found_qrels(runs, qrels, name, 5, 8, 2), [measure], rel=1).summary.to_pandas()
        mine = got[got["strategy"] == name].set_index("run")
        assert mine["score"].to_dict() == pytest.approx(want.set_index("run")["value"].to_dict(), abs=1e-12), name
        assert mine["score_full"].to_dict() == pytest.approx(full.to_dict(), abs=1e-12)


def test_significance_changes_are_the_pairs_significance_finds():
    runs, qrels = random_collection(5, n_runs=8, n_topics=12)
    res = budget_study(runs, qrels, strategies=["docid"], budgets="3", depth=8, params=None)
    partial = found_qrels(runs, qrels, "docid", 3, 8, 10)

    def sig(q):
        s = significance(evaluate(runs, q, ["AP"], rel=1).per_query, tests=["ttest"], corrections=[])
        return {(a, b): (p < 0.05, d) for a, b, p, d in zip(s["run_a"], s["run_b"], s["p"], s["diff"])}

    full, now = sig(qrels), sig(partial)
    want = {k: "lost" if full[k][0] and not now[k][0] else "gained" if now[k][0] and not full[k][0] else "reversed"
            for k in full if full[k][0] != now[k][0] or (full[k][0] and np.sign(full[k][1]) != np.sign(now[k][1]))}
    pairs = res.pairs.to_pandas()
    assert {(a, b): c for a, b, c in zip(pairs["run_a"], pairs["run_b"], pairs["change"])} == want
    assert sorted(want.values()) == ["gained"] * 3 + ["lost"] * 3
    assert _row(res, "docid", "3")["significance_changes"] == len(want)


def test_logo_bias_is_leave_out_on_the_qrels_found_so_far():
    runs, qrels = random_collection(3)
    manifest = pd.DataFrame({"run": [f"r{i}" for i in range(7)], "group": ["g1", "g1", "g2", "g2", "g3", "g3", "g4"]})
    res = budget_study(runs, qrels, manifest, strategies=["mm-ns"], budgets="4", logo_budgets="50%", depth=8)
    assert res.summary["budget"].to_pylist() == ["4", "50%"] and res.summary["logo_kendall_tau"][0].as_py() is None
    n = {q: -(-tp.n_docs // 2) for q, tp in topic_pools(depth_pool(runs, 8)).items()}
    assert len(set(n.values())) > 1  # shares differ per topic
    rows = []
    for qid, k in n.items():
        rows += found_qrels(runs, qrels.filter(pa.compute.equal(qrels["qid"], qid)), "mm-ns", k, 8, 10).to_pylist()
    lo = leave_out(runs, pa.Table.from_pylist(rows, QRELS_SCHEMA), manifest, depth=8, pool=depth_pool(runs, 8),
                   measures=["AP"], rel=1).summary.to_pylist()[0]
    row = _row(res, "mm-ns", "50%")
    assert row["logo_mean_abs_diff"] == pytest.approx(lo["mean_abs_diff"]) and lo["mean_abs_diff"] > 0
    assert row["logo_max_rank_drop"] == lo["max_rank_drop"] and row["logo_kendall_tau"] == pytest.approx(lo["kendall_tau"])


def test_one_or_two_workers_give_the_same_tables():
    runs, qrels = random_collection(4)
    manifest = pd.DataFrame({"run": [f"r{i}" for i in range(7)], "group": [f"g{i // 2}" for i in range(7)]})
    kw = dict(strategies=["docid", "mtf", "mm-ns", "depth-2"], budgets="3,25%,100%", logo_budgets="3", depth=8)
    one = budget_study(runs, qrels, manifest, workers=1, **kw)
    two = budget_study(runs, qrels, manifest, workers=2, **kw)
    assert two.timings["evaluate_calls"] > 1 and two.timings["workers"] == 2
    for name, table in one.tables().items():
        assert table.equals(two.tables()[name]), name
    assert one.params == two.params and one.notes == two.notes


# ----------------------------------------------------------------------------- command line

def write_toy(tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    for run, per in TOY.items():
        (d / f"{run}.txt").write_text("".join(f"{q} Q0 {doc} {i + 1} {1000 - i} {run}\n"
                                              for q, docs in per.items() for i, doc in enumerate(docs)))
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 {doc} {r}\n" for q, doc, r in TOY_QRELS))
    pd.DataFrame({"run": ["a", "b", "c"], "group": ["G1", "G1", "G2"]}).to_csv(tmp_path / "manifest.csv", index=False)
    return d


def test_cli_json_report_and_byte_identical_outputs(tmp_path, capsys):
    d = write_toy(tmp_path)
    args = [str(d), "-q", str(tmp_path / "qrels.txt"), "-m", str(tmp_path / "manifest.csv"), "-k", "3", "-s", "docid",
            "--depths", "1,2", "--budgets", "2,50%,100%", "--logo-budgets", "50%"]
    assert cli_run(["study", "budget", *args, "-o", str(tmp_path / "o1"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {(r["strategy"], r["budget"]): r for r in out["summary"]}
    assert rows[("docid", "2")]["kendall_tau"] == pytest.approx(-1 / 3) and rows[("depth-2", "pool")]["judgments_mean"] == 5
    assert rows[("docid", "50%")]["logo_max_rank_drop"] is not None and rows[("docid", "2")]["logo_max_rank_drop"] is None
    assert out["params"]["strategies"] == ["docid", "depth-1", "depth-2"] and out["params"]["depth"] == 3
    names = sorted(p.name for p in (tmp_path / "o1").iterdir())
    assert names == sorted(["relevant.png", "tau.png", "report.md", "report.html"]
                           + [f"{t}.{e}" for t in ("summary", "topics", "runs", "pairs") for e in ("parquet", "csv")])
    assert out["files"] == names
    assert (tmp_path / "o1" / "report.html").read_text().count("data:image/png;base64,") == 2
    assert cli_run(["study", "budget", *args, "-o", str(tmp_path / "o2")]) == 0
    capsys.readouterr()
    for n in names:
        assert (tmp_path / "o1" / n).read_bytes() == (tmp_path / "o2" / n).read_bytes(), n
    from qrelkit.io.tables import read_metadata

    meta = read_metadata(tmp_path / "o1" / "summary.parquet")
    assert meta["kind"] == "budget-summary" and meta["params"]["budgets"] == ["2", "50%", "100%"]


@pytest.mark.parametrize("case", ["bad runs file", "bad qrels", "unknown strategy", "bad budget spec",
                                  "unwritable output", "output = input"])
def test_cli_failures_are_one_line_and_write_nothing(tmp_path, capsys, case):
    d = write_toy(tmp_path)
    out = tmp_path / "out"
    argv = ["study", "budget", str(d), "-q", str(tmp_path / "qrels.txt"), "-k", "3", "-o", str(out)]
    rule = {"bad runs file": "score-not-numeric", "bad qrels": "grade-not-numeric", "unknown strategy": "bad-option",
            "bad budget spec": "bad-budget", "unwritable output": "unwritable-output",
            "output = input": "output-is-input"}[case]
    if case == "bad runs file":
        (d / "a.txt").write_text("1 Q0 d1 1 high a\n")
    elif case == "bad qrels":
        (tmp_path / "qrels.txt").write_text("1 0 d1 x\n")
    elif case == "unknown strategy":
        argv += ["--strategy", "mtf,nope"]
    elif case == "bad budget spec":
        argv += ["--budgets", "10%,abc"]
    elif case == "unwritable output":
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "out"
        argv[-1] = str(out)
    else:
        out = tmp_path / "qrels.txt"
        argv[-1] = str(out)
    before = (tmp_path / "qrels.txt").read_bytes()
    assert cli_run(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("qrelkit: error: ") and f"[{rule}]" in err, err
    assert (tmp_path / "qrels.txt").read_bytes() == before
    if case != "output = input":
        assert not out.exists()


def test_cli_reads_adjudicate_eval_and_pool_from_the_config_and_flags_win(tmp_path, capsys):
    d = write_toy(tmp_path)
    cfg = tmp_path / "protocol.toml"
    cfg.write_text("[adjudicate]\nbatch = 1\nhedge_beta = 0.5\n\n[eval]\nalpha = 0.1\nrelevant = 2\n\n[pool]\ndepth = 2\n")
    base = ["study", "budget", str(d), "-q", str(tmp_path / "qrels.txt"), "-c", str(cfg), "-s", "hedge", "--budgets", "2"]
    assert cli_run([*base, "-o", str(tmp_path / "o1"), "--json"]) == 0
    p = json.loads(capsys.readouterr().out)["params"]
    assert (p["batch"], p["constants"]["hedge_beta"], p["alpha"], p["relevance_level"], p["depth"]) == (1, 0.5, 0.1, 2, 2)
    assert p["measure"] == "AP(rel=2)"
    assert cli_run([*base, "-o", str(tmp_path / "o2"), "--json", "--batch", "3", "--rel", "1", "-k", "3"]) == 0
    p = json.loads(capsys.readouterr().out)["params"]
    assert (p["batch"], p["relevance_level"], p["depth"], p["measure"]) == (3, 1, 3, "AP")


def test_cal_is_a_strategy_with_a_corpus_and_topics(sim4, tmp_path, capsys):
    """``--corpus`` and ``--topics`` add CAL ('cal'); its relevant found at each budget is the count
    over cal_pool_orders' order, computed here on its own."""
    from qrelkit.cal.budget import cal_pool_orders
    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.runs import read_runs
    from qrelkit.io.topics import read_topics

    out = tmp_path / "study"
    args = ["study", "budget", str(sim4 / "runs"), "-q", str(sim4 / "qrels.txt"), "-m", str(sim4 / "manifest.csv"),
            "--corpus", str(sim4 / "corpus.jsonl"), "--topics", str(sim4 / "topics.tsv"), "-s", "docid",
            "--depth", "10", "--budgets", "5,15", "-o", str(out), "--json"]
    assert cli_run(args) == 0
    summary = {(r["strategy"], r["budget"]): r for r in json.loads(capsys.readouterr().out)["summary"]}
    assert {s for s, _ in summary} == {"docid", "cal"}
    q = read_qrels(sim4 / "qrels.txt")
    rel: dict[str, set[str]] = {}
    for qid, doc, g in zip(q["qid"].to_pylist(), q["docid"].to_pylist(), q["rel"].to_pylist()):
        if g >= 1:
            rel.setdefault(qid, set()).add(doc)
    runs = read_runs(sim4 / "runs").table
    from qrelkit.io.manifest import read_manifest
    from qrelkit.reuse.study import pooled_runs

    pooled = set(pooled_runs(sorted(set(runs["run"].to_pylist())), read_manifest(sim4 / "manifest.csv"), {}, None)[0])
    pools = topic_pools(depth_pool(runs.filter(pa.array([r in pooled for r in runs["run"].to_pylist()])), 10))
    pools = {t: p for t, p in pools.items() if t in {str(x) for x in q["qid"].to_pylist()}}
    orders = cal_pool_orders(sim4 / "corpus.jsonl", read_topics(sim4 / "topics.tsv"), pools, rel, budget=15)
    for b in (5, 15):
        found = np.mean([len(set(orders[t][:b]) & rel.get(t, set())) for t in pools])
        assert summary[("cal", str(b))]["relevant_found_mean"] == pytest.approx(found)
    assert cli_run(args[:-3] + ["--seed", "11", "-o", str(tmp_path / "s11"), "--json"]) == 0  # CAL's seed reaches it
    assert json.loads(capsys.readouterr().out)["params"]["cal"]["seed"] == 11
    assert cli_run(args[:-3] + ["-s", "cal", "-o", str(tmp_path / "only"), "--json"]) == 0  # cal named among -s
    assert [r["strategy"] for r in json.loads(capsys.readouterr().out)["summary"]] == ["docid", "docid", "cal", "cal"]
    i = args.index("--topics")
    no_topics = args[:i] + args[i + 2:-3] + ["-o", str(tmp_path / "x")]
    assert cli_run(no_topics) == 2  # --corpus without --topics
    assert "--corpus and --topics" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
