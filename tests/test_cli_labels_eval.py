"""``qrelkit labels`` and ``qrelkit eval``: options, config, --json, determinism, error contract."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from qrelkit.cli import run
from qrelkit.io.tables import read_metadata

from conftest import ROOT, write_three_runs

CFG = str(ROOT / "configs" / "trec-dl-2022.toml")


@pytest.fixture
def camp(tmp_path):
    write_three_runs(tmp_path / "runs", (0, 1, 3))
    # topic 4 judged but retrieved by no run
    (tmp_path / "qrels.txt").write_text("1 0 D0 2\n1 0 D1 0\n1 0 D2 3\n2 0 D3 1\n2 0 D4 2\n3 0 D5 3\n4 0 D9 2\n")
    (tmp_path / "corpus.jsonl").write_text(
        "".join(f'{{"pid": "D{i}", "passage": "text {i}", "docid": "doc{i // 3}"}}\n' for i in range(12)))
    (tmp_path / "classes.tsv").write_text("D0\tD0\nD0\tD6\nD3\tD3\nD3\tD7\n")
    (tmp_path / "judgments.csv").write_text(
        "qid,docid,assessor,grade,batch_id\n1,D0,A,3,1-1\n1,D0,B,2,1-1\n1,D0,C,0,1-1\n1,D1,A,0,1-1\n1,D1,B,3,1-1\n"
        "1,D2,A,,1-1\n1,D2,B,1,1-1\n2,D3,A,2,2-1\n2,D3,B,2,2-1\n")
    return tmp_path


def jrun(args, capsys):
    code = run(args + ["--json"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    return json.loads(cap.out)


def test_labels_aggregate_agreement_json_and_determinism(camp, capsys):
    out1, out2 = camp / "l1.parquet", camp / "l2.parquet"
    s = jrun(["labels", "aggregate", str(camp / "judgments.csv"), "-o", str(out1), "--qrels-out", str(camp / "q.txt"),
              "--min-assessors", "2", "-c", CFG], capsys)
    assert s["items"] == 4 and s["ties"] == 1 and s["topics_included"] == 2
    assert s["params"]["fallback"] == ["original", "lowest"] and s["params"]["threshold"] == 2
    jrun(["labels", "aggregate", str(camp / "judgments.csv"), "-o", str(out2), "--min-assessors", "2", "-c", CFG], capsys)
    assert out1.read_bytes() == out2.read_bytes()
    assert read_metadata(out1)["kind"] == "labels"
    assert (camp / "q.txt").read_text().splitlines()[0] == "1 0 D0 2"
    a = jrun(["labels", "agreement", str(camp / "judgments.csv"), "-o", str(camp / "pairs.csv"), "-c", CFG], capsys)
    assert a["assessors"] == 3 and a["items"] == 4 and "krippendorff_alpha" in a and "fleiss_kappa" in a
    assert (camp / "pairs.csv").read_text().startswith('"assessor_a"')


def test_labels_binarize_expand_propagate_compare(camp, capsys):
    b = jrun(["labels", "binarize", str(camp / "qrels.txt"), "--scheme", "document", "-c", CFG, "-o", str(camp / "b.txt")], capsys)
    assert b["relevant_grades"] == [1, 2, 3] and b["relevant"] == 6
    e = jrun(["labels", "expand", str(camp / "qrels.txt"), "--classes", str(camp / "classes.tsv"), "-o", str(camp / "x.txt"),
              "--report-out", str(camp / "x.csv"), "-c", CFG], capsys)
    assert e["added"] == 2 and e["added_relevant"] == 1
    assert "1 0 D6 2" in (camp / "x.txt").read_text() and "2 0 D7 1" in (camp / "x.txt").read_text()
    p = jrun(["labels", "propagate", str(camp / "qrels.txt"), "--corpus", str(camp / "corpus.jsonl"), "-o", str(camp / "d.txt"),
              "--disagree-out", str(camp / "dis.csv"), "-c", CFG], capsys)
    assert p["documents"] == 4 and p["documents_disagree"] == 2 and p["examples"][0] == {
        "qid": "1", "docid": "doc0", "grades": "3,2,0", "label": 3}
    assert (camp / "d.txt").read_text().splitlines()[0] == "1 0 doc0 3"
    g = jrun(["labels", "propagate", str(camp / "qrels.txt"), "--corpus", str(camp / "corpus.jsonl"), "--grade-map", "1=0,3=2",
              "-o", str(camp / "d2.txt")], capsys)
    assert g["grade_map"] == {"1": 0, "3": 2} and g["labels"] == {"2": 4}
    c = jrun(["labels", "compare", str(camp / "d.txt"), str(camp / "d2.txt"), "--scheme", "document",
              "-o", str(camp / "conf.csv")], capsys)
    assert c["common"] == 4 and c["exact_agreement"] == 0.5 and c["relevant_a"] == 4 and c["relevant_b"] == 4


def test_eval_score_policy_config_json_and_determinism(camp, capsys):
    o1, o2 = camp / "s1.parquet", camp / "s2.parquet"
    s = jrun(["eval", "score", str(camp / "runs"), "-q", str(camp / "qrels.txt"), "-c", CFG, "-o", str(o1),
              "--summary-out", str(camp / "sum.csv")], capsys)
    # the config's relevant = "passage" makes binary measures count grades 2, 3
    assert s["measures"] == ["nDCG@10", "AP(rel=2)", "RR(rel=2)@10", "P(rel=2)@10", "Judged@10"]
    assert s["missing_policy"] == "zero" and s["judged_topics"] == 4 and s["missing_pairs"] == 3
    assert s["runs_with_missing_topics"] == {"alpha": ["4"], "beta": ["4"], "gamma": ["4"]}
    jrun(["eval", "score", str(camp / "runs"), "-q", str(camp / "qrels.txt"), "-c", CFG, "-o", str(o2)], capsys)
    assert o1.read_bytes() == o2.read_bytes()
    meta = read_metadata(o1)
    assert meta["kind"] == "eval-per-query" and meta["params"]["missing"] == "zero" and meta["params"]["rel"] == 2
    t = pq.read_table(o1).to_pandas()
    assert len(t) == 3 * 5 * 4 and t[t["qid"] == "4"]["missing"].all() and (t[t["qid"] == "4"]["value"] == 0).all()
    # the human report states the policy
    assert run(["eval", "score", str(camp / "runs"), "-q", str(camp / "qrels.txt"), "-m", "NCG@5", "--missing", "skip",
                "-o", str(camp / "s3.csv")]) == 0
    err = capsys.readouterr().err
    assert "missing-topic policy: skip" in err
    sk = jrun(["eval", "score", str(camp / "runs"), "-q", str(camp / "qrels.txt"), "-m", "P@1", "--missing", "skip",
               "-o", str(camp / "s4.csv")], capsys)
    assert sk["summary"][0]["P@1"] == pytest.approx(1 / 3)  # alpha: D0 at 1 on topic 1 only; topic 4 skipped


def test_eval_from_canonical_parquet_equals_text(camp, capsys):
    assert run(["runs", "canonicalize", str(camp / "runs"), "-o", str(camp / "runs.parquet")]) == 0
    capsys.readouterr()
    a = jrun(["eval", "score", str(camp / "runs"), "-q", str(camp / "qrels.txt"), "-o", str(camp / "a.parquet")], capsys)
    b = jrun(["eval", "score", str(camp / "runs.parquet"), "-q", str(camp / "qrels.txt"), "-o", str(camp / "b.parquet")], capsys)
    assert a["summary"] == b["summary"]
    assert pq.read_table(camp / "a.parquet").equals(pq.read_table(camp / "b.parquet"))


def test_eval_compare_seeded_breakdown_duplicates_and_correlate(camp, capsys):
    args = ["eval", "compare", str(camp / "runs"), "-q", str(camp / "qrels.txt"), "-m", "nDCG@10", "--baseline", "alpha",
            "--breakdown-out", str(camp / "bd.csv"), "--randomizations", "200"]
    s = jrun(args + ["--seed", "3", "-o", str(camp / "t1.csv")], capsys)
    jrun(args + ["--seed", "3", "-o", str(camp / "t2.csv")], capsys)
    assert (camp / "t1.csv").read_bytes() == (camp / "t2.csv").read_bytes()
    assert s["pairs"] == 2 and s["seed"] == 3 and "first relevant item" in s["note"]
    assert s["breakdown"][0]["run_a"] == "beta" and s["breakdown"][0]["run_b"] == "alpha"
    assert s["breakdown"][0]["topics"] == 4
    assert (camp / "bd.csv").read_text().startswith('"run_a"')
    d = jrun(["eval", "duplicates", str(camp / "runs"), "-q", str(camp / "qrels.txt"), "--classes", str(camp / "classes.tsv"),
              "-o", str(camp / "dup.csv"), "--plot", str(camp / "dup.png"), "-c", CFG], capsys)
    assert [x["measure"] for x in d["differences"]] == ["P(rel=2)@10", "nDCG@10"]
    assert (camp / "dup.png").read_bytes()[:4] == b"\x89PNG"
    jrun(["eval", "score", str(camp / "runs"), "-q", str(camp / "qrels.txt"), "-o", str(camp / "p.parquet"),
          "--summary-out", str(camp / "A.csv"), "-m", "nDCG@10", "-m", "P@3"], capsys)
    jrun(["eval", "score", str(camp / "runs"), "-q", str(camp / "x.txt") if (camp / "x.txt").exists() else str(camp / "qrels.txt"),
          "-o", str(camp / "p2.parquet"), "--summary-out", str(camp / "B.parquet"), "-m", "nDCG@10", "-m", "P@3"], capsys)
    c = jrun(["eval", "correlate", str(camp / "A.csv"), str(camp / "B.parquet"), "-o", str(camp / "corr.csv")], capsys)
    assert [r["measure"] for r in c["correlations"]] == ["nDCG@10", "P@3"]
    assert c["correlations"][0]["kendall_tau"] == pytest.approx(1.0) and c["correlations"][0]["runs"] == 3


@pytest.mark.parametrize("args,rule", [
    (["eval", "score", "{runs}", "-q", "{qrels}", "-m", "nDCG@ten", "-o", "{out}"], "unknown-measure"),
    (["eval", "score", "{runs}", "-q", "{qrels}", "--missing", "error", "-o", "{out}"], "missing-topic"),
    (["eval", "score", "{runs}", "-q", "{bad_qrels}", "-o", "{out}"], "grade-not-integer"),
    (["labels", "aggregate", "{bad_judgments}", "-o", "{out}"], "grade-not-integer"),
    (["labels", "binarize", "{qrels}", "--scheme", "nope", "-o", "{out}"], "bad-scheme"),
    (["labels", "propagate", "{qrels}", "-o", "{out}"], "bad-option"),
    (["eval", "compare", "{runs}", "-q", "{qrels}", "--baseline", "zeta", "-o", "{out}"], "unknown-run"),
])
def test_bad_input_is_one_line_exit_2_and_no_output(camp, capsys, args, rule):
    (camp / "bad_qrels.txt").write_text("1 0 D0 1.5\n")
    (camp / "bad_judgments.csv").write_text("qid,docid,assessor,grade\n1,D0,A,2.5\n")
    out = camp / "out.parquet"
    fill = {"runs": camp / "runs", "qrels": camp / "qrels.txt", "out": out, "bad_qrels": camp / "bad_qrels.txt",
            "bad_judgments": camp / "bad_judgments.csv"}
    code = run([a.format(**fill) for a in args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and f"[{rule}]" in err
    assert not out.exists()
