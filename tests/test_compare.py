"""Comparisons: outcome breakdown on a hand-computed example, p-values equal scipy's, corrections
equal statsmodels', Kendall's tau and tau_ap; duplicates in evaluation (TREC 2022 Figure 6)."""

from __future__ import annotations

import math
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import stats

from qrelkit.evaluate import (
    duplicate_effects, evaluate, leaderboard_correlation, outcome_breakdown, per_query_matrix, plot_duplicates,
    significance, tau_ap,
)
from qrelkit.evaluate.compare import ESL_NOTE

from test_evaluate import qrels_table, runs_table

# topic -> rank of the relevant document "rel" in run A and in run B (None: not in the top 5)
RANKS = {"1": (1, 3), "2": (None, 2), "3": (4, None), "4": (None, None), "5": (2, 2), "6": (5, 1)}


@pytest.fixture
def two_runs():
    rows = []
    for q, ranks in RANKS.items():
        for run, rank in zip("AB", ranks):
            docs = [f"n{i}" for i in range(1, 8)]
            if rank is not None:
                docs.insert(rank - 1, "rel")
            else:
                docs.insert(6, "rel")  # at rank 7: outside the top 5
            rows += [(run, q, d, 100.0 - i) for i, d in enumerate(docs)]
    q = qrels_table([(q, "rel", 1) for q in RANKS] + [(q, "n1", 0) for q in RANKS])
    return runs_table(rows), q


def test_outcome_breakdown_hand_computed(two_runs):
    runs, q = two_runs
    bd, cases = outcome_breakdown(runs, q, k=5, rel=1, pairs=[("A", "B")])
    r = bd.iloc[0]
    assert (r["neither"], r["only_a"], r["only_b"], r["both"]) == (1, 1, 1, 3)
    assert r["share_both"] == 0.5 and r["share_neither"] == pytest.approx(1 / 6)
    assert (r["both_a_better"], r["both_b_better"], r["both_tied"]) == (1, 1, 1)
    # both: topics 1, 5, 6 -> ESL A = 1, 2, 5; ESL B = 3, 2, 1
    assert r["mean_esl_a"] == pytest.approx(8 / 3) and r["mean_esl_b"] == pytest.approx(2.0)
    assert r["mean_rr_both_a"] == pytest.approx((1 + 1 / 2 + 1 / 5) / 3)
    assert r["mean_rr_both_b"] == pytest.approx((1 / 3 + 1 / 2 + 1) / 3)
    assert r["p_esl_wilcoxon"] == stats.wilcoxon([1, 2, 5], [3, 2, 1]).pvalue
    assert r["p_esl_ttest"] == stats.ttest_rel([1, 2, 5], [3, 2, 1]).pvalue
    rr_a = [1, 0, 1 / 4, 0, 1 / 2, 1 / 5]
    rr_b = [1 / 3, 1 / 2, 0, 0, 1 / 2, 1]
    assert r["mean_rr_a"] == pytest.approx(np.mean(rr_a))
    assert r["p_naive_ranksum"] == pytest.approx(stats.ranksums(rr_a, rr_b).pvalue, abs=1e-15)
    assert r["p_naive_wilcoxon"] == pytest.approx(stats.wilcoxon(rr_a, rr_b).pvalue, abs=1e-15)
    assert r["p_naive_ttest"] == pytest.approx(stats.ttest_rel(rr_a, rr_b).pvalue, abs=1e-15)
    assert r["note"] == ESL_NOTE and "first relevant" in ESL_NOTE
    c = cases.set_index("qid")
    assert list(c["case"]) == ["both", "only_b", "only_a", "neither", "both", "both"]
    assert c.loc["6", "esl_a"] == 5 and c.loc["6", "esl_b"] == 1 and pd.isna(c.loc["2", "esl_a"])


@pytest.fixture
def three_runs():
    rng = np.random.default_rng(7)
    rows, qrels = [], []
    for q in range(1, 13):
        docs = [f"d{i}" for i in range(20)]
        qrels += [(str(q), d, 2 if i < 6 else int(rng.integers(0, 2))) for i, d in enumerate(docs[:12])]
        for run, skill in (("a", 1.0), ("b", 0.6), ("c", 0.2)):
            s = rng.random(20) + skill * np.array([1.0 if i < 6 else 0.0 for i in range(20)])
            rows += [(run, str(q), d, float(v)) for d, v in zip(docs, s)]
    return runs_table(rows), qrels_table(qrels)


def test_pvalues_equal_scipy_and_corrections_equal_statsmodels(three_runs):
    from statsmodels.stats.multitest import multipletests

    runs, q = three_runs
    ev = evaluate(runs, q, ["nDCG@10", "AP"])
    sig = significance(ev.per_query, seed=11, n_resamples=999)
    assert len(sig) == 2 * 3 * 4  # measures x pairs x tests
    for _, row in sig.iterrows():
        w = per_query_matrix(ev.per_query, row["measure"])  # topics in natural order, as the tests see them
        x, y = w[row["run_a"]].to_numpy(), w[row["run_b"]].to_numpy()
        if row["test"] == "ttest":
            expected = stats.ttest_rel(x, y).pvalue
        elif row["test"] == "wilcoxon":
            expected = stats.wilcoxon(x, y).pvalue
        elif row["test"] == "ranksum":
            expected = stats.ranksums(x, y).pvalue
        else:
            expected = stats.permutation_test((x, y), lambda u, v, axis=-1: np.mean(u - v, axis=axis),
                                              permutation_type="samples", vectorized=True, n_resamples=999,
                                              rng=np.random.default_rng(11)).pvalue
        assert row["p"] == pytest.approx(expected, rel=1e-12, abs=1e-15), row.to_dict()
    fam = sig[(sig["measure"] == "AP") & (sig["test"] == "ttest")]
    assert np.allclose(fam["p_bonferroni"], np.minimum(fam["p"] * 3, 1.0))
    assert np.allclose(fam["p_holm"], multipletests(fam["p"], method="holm")[1])
    # same seed, same randomization p-values; another seed, other ones
    again = significance(ev.per_query, seed=11, n_resamples=999)
    assert sig.equals(again)
    other = significance(ev.per_query, seed=12, n_resamples=999, tests=["randomization"])
    assert not np.allclose(other["p"], sig[sig["test"] == "randomization"]["p"])


def test_significance_against_a_baseline(three_runs):
    runs, q = three_runs
    ev = evaluate(runs, q, ["nDCG@10"])
    sig = significance(ev.per_query, baseline="c", tests=["ttest"])
    assert list(zip(sig["run_a"], sig["run_b"])) == [("a", "c"), ("b", "c")]
    assert sig["reject_bonferroni"].iloc[0]  # "a" is far better than "c" on 12 topics


def test_tau_ap_published_example_and_kendall():
    # the ircor package's README example: tauAP(x, y) = 0.7491182, tau(x, y) = 0.7777778
    x = [0.06, 0.2, 0.27, 0.37, 0.57, 0.63, 0.66, 0.9, 0.91, 0.94]
    y = [0.37, 0.06, 0.2, 0.27, 0.57, 0.66, 0.63, 0.91, 0.9, 0.94]
    assert tau_ap(x, y) == pytest.approx(0.7491182, abs=5e-8)
    assert tau_ap(x, x) == pytest.approx(1.0) and tau_ap(x, [-v for v in x]) == pytest.approx(-1.0)
    runs = [f"r{i}" for i in range(10)]
    r = leaderboard_correlation(dict(zip(runs, x)), dict(zip(runs, y)))
    assert r["kendall_tau"] == pytest.approx(0.7777778, abs=5e-8)
    assert r["kendall_tau"] == stats.kendalltau(x, y).statistic
    assert r["tau_ap_a"] == pytest.approx(0.7491182, abs=5e-8)


def test_tau_ap_agrees_with_the_tau_ap_package():
    ext = pytest.importorskip("tau_ap")
    rng = np.random.default_rng(5)
    for n in (5, 17, 40):
        x, y = rng.permutation(n).astype(float), rng.permutation(n).astype(float)
        order = np.argsort(-y)  # the package reads the items in the order of the ranking judged
        assert tau_ap(x, y) == pytest.approx(ext.tau_ap(x[order], y[order]), abs=1e-12)


# ----------------------------------------------------------------------- duplicates


def test_four_treatments_of_duplicates_hand_computed(tmp_path):
    # class p1 = {p1 (canonical), p2}; the run ranks p2, p1, p3; only canonical passages judged
    runs = runs_table([("r", "1", "p2", 3), ("r", "1", "p1", 2), ("r", "1", "p3", 1)])
    q = qrels_table([("1", "p1", 2), ("1", "p3", 0)])
    classes = pa.table({"docid": ["p1", "p2"], "class_id": ["p1", "p1"]})
    df = duplicate_effects(runs, q, classes, ["P(rel=2)@1", "P(rel=2)@2"]).set_index("measure")
    assert list(df.columns) == ["run", "none", "corpus", "runs", "qrels", "qrels_minus_runs"]
    assert df.loc["P(rel=2)@1", ["none", "corpus", "runs", "qrels"]].tolist() == [0.0, 1.0, 1.0, 1.0]
    assert df.loc["P(rel=2)@2", ["none", "corpus", "runs", "qrels"]].tolist() == [0.5, 0.5, 0.5, 1.0]
    assert df.loc["P(rel=2)@2", "qrels_minus_runs"] == 0.5
    png1, png2 = tmp_path / "a.png", tmp_path / "b.png"
    plot_duplicates(df.reset_index(), png1)
    plot_duplicates(df.reset_index(), png2)
    assert png1.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png1.read_bytes() == png2.read_bytes()


def test_benchmark_values_agree_with_ir_measures_on_small_data(tmp_path):
    """bench_eval.py on a small run set: qrelkit's values equal ir-measures' on the files
    (differences only in RR@10 of lists with tied scores) and the Parquet path equals the text one."""
    import json
    import sys

    from conftest import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_eval

    out = tmp_path / "bench.json"
    code = bench_eval.main(["--data-dir", str(tmp_path / "runs"), "--out-dir", str(tmp_path / "work"), "--runs", "6",
                            "--topics", "30", "--depth", "40", "--judged-topics", "9", "--judged-docs", "40",
                            "--repeats", "1", "--peer-repeats", "1", "--wait-idle", "0", "--json-out", str(out),
                            "--one-size", "--skip-command"])
    assert code == 0
    checks = json.loads(out.read_text())["checks"]
    assert checks["parquet_equals_files"] and checks["vs_ir_measures"]["n_unexplained"] == 0
    assert checks["vs_ir_measures"]["values_compared"] == 6 * 9 * 3


def test_tau_ap_ranked_by_a_flat_leaderboard_is_nan():
    """Every run tied orders them by name alone: no tau_AP that way (the other way still has one)."""
    from qrelkit.evaluate.compare import leaderboard_correlation

    r = leaderboard_correlation({"a": 0.3, "b": 0.2, "c": 0.1}, {"a": 0.0, "b": 0.0, "c": 0.0})
    assert math.isnan(r["tau_ap_a"]) and math.isnan(r["kendall_tau"]) and not math.isnan(r["tau_ap_b"])
