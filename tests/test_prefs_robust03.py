"""The whole preference flow on TREC 2003 Robust (17 real runs), from the command line, with the
official qrels' grades as the simulated oracle: one known relevant passage per topic (the
"perfect run"), top-1 pool of the 17 runs, every pair once, tasks with test pairs, simulated
answers with errors and one failing worker, re-issue, tournament, win-ratio matrix, re-scored
leaderboard and Kendall's tau."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import shared

from qrelkit.cli import run
from qrelkit.io.qrels import read_qrels

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def robust(tmp_path_factory):
    base = shared("robust03")
    out = tmp_path_factory.mktemp("robust03-prefs")
    return base / "runs", base / "qrels" / "robust03_qrels.txt.gz", out


def call(capsys, args) -> dict:
    capsys.readouterr()
    code = run([str(a) for a in args] + ["--json"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    return json.loads(cap.out)


def test_robust03_preference_flow(robust, capsys):
    runs, qrels_path, o = robust
    truth = read_qrels(qrels_path).to_pandas()
    grade = {(q, d): g for q, d, g in zip(truth["qid"], truth["docid"], truth["rel"])}

    call(capsys, ["runs", "canonicalize", runs, "--lenient", "-o", o / "runs.parquet"])
    sp = call(capsys, ["prefs", "sparsify", qrels_path, "--per-topic", "1", "--best", "--seed", "3", "-o", o / "sparse.txt"])
    assert sp["qrels"] == sp["topics"] == 100
    pool_s = call(capsys, ["pool", "top1", runs, "--lenient", "-q", o / "sparse.txt", "-o", o / "pool.parquet"])
    assert pool_s["runs_pooled"] == 17 and pool_s["topics"] == 100
    pool = pq.read_table(o / "pool.parquet").to_pandas()
    sizes = pool.groupby("qid").size()

    # pairs: every pair of every topic's pool, once; cost before export
    pairs_s = call(capsys, ["prefs", "pairs", o / "pool.parquet", "-o", o / "pairs.parquet"])
    n_pairs = int((sizes * (sizes - 1) // 2).sum())
    assert pairs_s["pairs"] == n_pairs and pairs_s["tasks"] == math.ceil(n_pairs / 10)
    assert pairs_s["cost"] == pytest.approx(pairs_s["tasks"] * 2.40)

    # tasks: 10 real + 3 test pairs, seeded
    tasks_s = call(capsys, ["prefs", "tasks", o / "pairs.parquet", "-q", qrels_path, "-o", o / "tasks.parquet",
                            "--export", o / "tasks.csv", "--seed", "1"])
    assert tasks_s["real_pairs"] == n_pairs and tasks_s["test_pairs"] == 3 * tasks_s["tasks"]
    tasks = pq.read_table(o / "tasks.parquet").to_pandas()
    test = tasks[tasks["kind"] == "test"]
    rel = np.where(test["expected"] == "left", test["left_docid"], test["right_docid"])
    off = np.where(test["expected"] == "left", test["right_docid"], test["left_docid"])
    assert all(grade.get((q, d), 0) >= 1 for q, d in zip(test["qid"], rel))
    assert all(grade.get((q, d), 0) <= 0 for q, d in zip(test["qid"], off))

    # six simulated workers, 10% errors, W06 answers at random and fails test pairs
    call(capsys, ["prefs", "simulate", o / "tasks.parquet", "-q", qrels_path, "--workers", "6", "--failing", "W06",
                  "--error-rate", "0.1", "--seed", "1", "-o", o / "answers.csv"])
    imp1 = call(capsys, ["prefs", "import", o / "answers.csv", "--tasks", o / "tasks.parquet", "-o", o / "j1.parquet",
                         "--workers-out", o / "workers1.csv", "--reissue-out", o / "tasks-r1.parquet",
                         "--reissue-list", o / "reissue1.csv"])
    assert imp1["excluded_workers"] == ["W06"]
    answers = pd.read_csv(o / "answers.csv", dtype=str)
    w6_tasks = set(answers.loc[answers["worker"] == "W06", "task_id"])
    reissue = pd.read_csv(o / "reissue1.csv", dtype=str)
    assert set(reissue["task_id"]) == w6_tasks and set(reissue["reason"]) == {"worker-excluded"}
    call(capsys, ["prefs", "simulate", o / "tasks-r1.parquet", "-q", qrels_path, "--workers", "6", "--failing", "W06",
                  "--error-rate", "0.1", "--seed", "1", "-o", o / "answers-r1.csv"])
    imp2 = call(capsys, ["prefs", "import", o / "answers.csv", o / "answers-r1.csv", "--tasks", o / "tasks.parquet",
                         "--tasks", o / "tasks-r1.parquet", "-o", o / "judgments.parquet",
                         "--workers-out", o / "workers.csv", "--reissue-out", o / "tasks-r2.parquet"])
    assert imp2["tasks_reissue"] == 0 and imp2["pairs_judged"] == n_pairs == imp2["judgments"]
    j = pq.read_table(o / "judgments.parquet").to_pandas()
    assert "W06" not in set(j["worker"])
    # the simulated errors: among pairs of different grades, about 10% went to the lower grade
    ga = np.array([grade.get((q, d), 0) for q, d in zip(j["qid"], j["doc_a"])])
    gb = np.array([grade.get((q, d), 0) for q, d in zip(j["qid"], j["doc_b"])])
    gw = np.array([grade.get((q, d), 0) for q, d in zip(j["qid"], j["winner"])])
    differ = ga != gb
    wrong = (gw[differ] < np.maximum(ga, gb)[differ]).mean()
    assert 0.06 < wrong < 0.14

    # tournament
    t = call(capsys, ["prefs", "tournament", o / "judgments.parquet", "--pool", o / "pool.parquet", "-o", o / "prefs.txt",
                      "--log-out", o / "log.csv", "--queries-out", o / "topics.csv"])
    prefs = read_qrels(o / "prefs.txt").to_pandas()
    topics = pd.read_csv(o / "topics.csv", dtype={"qid": str})
    assert t["topics"] == 100 and t["topics_with_prefs"] == 100 and t["pref_qrels"] == len(prefs)
    assert t["topics_with_cycles"] == int((topics["outcome"] == "cycle").sum())
    assert t["topics_winner"] + t["topics_with_cycles"] + t["topics_unresolved"] == 100
    assert set(zip(prefs["qid"], prefs["docid"])) <= set(zip(pool["qid"], pool["docid"]))
    assert t["pref_win_rate"] > 0.85 and t["pref_win_rate"] > t["orig_win_rate"]
    # the preference qrels are (almost always) a passage of the best grade in the topic's pool
    best_in_pool = {q: max(grade.get((q, d), 0) for d in g["docid"]) for q, g in pool.groupby("qid")}
    hit = np.mean([grade.get((q, d), 0) == best_in_pool[q] for q, d in zip(prefs["qid"], prefs["docid"])])
    assert hit > 0.8  # 10% wrong answers sometimes crown a lower grade
    log = pd.read_csv(o / "log.csv", dtype={"qid": str})
    assert set(log["qid"]) == set(pool["qid"]) and set(log["outcome"]) <= {"repeat", "winner", "cycle", "unresolved"}

    # win ratios of the 17 runs and the perfect run
    w = call(capsys, ["prefs", "winratio", o / "judgments.parquet", "--pool", o / "pool.parquet", "-o", o / "wr.csv",
                      "--matrix-out", o / "matrix.csv", "--plot", o / "wr.png"])
    assert w["runs"] == 18 and w["run_pairs"] == 153
    wr = pd.read_csv(o / "wr.csv")
    d = wr[wr["decided"] > 0]
    m = len(d) // 2
    assert np.allclose(d["p_corrected"], np.minimum(1.0, d["p"] * m))
    back = wr.set_index(["run", "opponent"])
    assert np.allclose(d["ratio"].to_numpy() + back.loc[list(zip(d["opponent"], d["run"])), "ratio"].to_numpy(), 1.0)
    assert (o / "wr.png").read_bytes()[:4] == b"\x89PNG"
    matrix = pd.read_csv(o / "matrix.csv")
    assert list(matrix.columns)[1] == "perfect" and matrix["opponent"].iloc[-1] == "wins"

    # re-scoring: MRR@10 on preference vs original qrels, Kendall's tau, CIs
    r = call(capsys, ["prefs", "rescore", o / "runs.parquet", "-q", qrels_path, "--prefs", o / "prefs.txt",
                      "--perfect-qrels", o / "sparse.txt", "-o", o / "board.csv", "--plot", o / "fig5.png"])
    board = pd.read_csv(o / "board.csv").set_index("run")
    assert len(board) == 18 and board.loc["perfect", "mrr_original"] == 1.0
    real = board[~board["perfect"]]
    from scipy.stats import kendalltau

    assert r["kendall_tau"] == pytest.approx(kendalltau(real["mrr_original"], real["mrr_prefs"]).statistic)
    assert -1 <= r["kendall_tau"] <= 1 and r["topics"] == 100
    assert ((board["ci_prefs_low"] <= board["mrr_prefs"]) & (board["mrr_prefs"] <= board["ci_prefs_high"])).all()
    from qrelkit.evaluate import evaluate

    canon = pq.read_table(o / "runs.parquet")
    direct = evaluate(canon, read_qrels(o / "prefs.txt"), ["RR@10"]).summary.to_pandas().set_index("run")["value"]
    assert np.allclose(real["mrr_prefs"], direct.reindex(real.index))
    assert r["perfect_mrr_prefs"] == pytest.approx(board.loc["perfect", "mrr_prefs"])

    # single-ranker check of one run
    s = call(capsys, ["prefs", "single", o / "runs.parquet", "--run", "pircRBa1", "-q", o / "sparse.txt", "-o",
                      o / "single.parquet", "--judgments", o / "judgments.parquet"])
    cats = {c["category"]: c for c in s["categories"]}
    assert cats["A"]["queries"] + cats["B"]["queries"] == 100 and s["pairs"] <= 100
    print(json.dumps({"pool_mean": pool_s["size_mean"], "pairs": n_pairs, "tasks": pairs_s["tasks"], "cost": pairs_s["cost"],
                      "w06_tasks": len(w6_tasks), "pref_qrels": t["pref_qrels"], "cycles": t["topics_with_cycles"],
                      "pref_win_rate": t["pref_win_rate"], "orig_win_rate": t["orig_win_rate"], "tau": r["kendall_tau"],
                      "perfect_prefs": r["perfect_mrr_prefs"], "beat_perfect": w.get("beat_perfect_significantly"),
                      "wrong": wrong, "categories": cats}, default=str))
