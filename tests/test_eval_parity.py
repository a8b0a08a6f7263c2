"""Evaluation as trec_eval ranks: scores held as float32 (trec_eval's ``float sim``), ties by docid
descending; measures no installed provider computes; RBP; grades off the scale; what --lenient
repaired."""

from __future__ import annotations

import json

import ir_measures
import numpy as np
import pyarrow as pa
import pytest

from qrelkit.cli import run
from qrelkit.errors import InputError
from qrelkit.evaluate import evaluate
from qrelkit.io.qrels import read_qrels
from qrelkit.io.runs import read_runs
from qrelkit.io.tables import read_metadata

from conftest import cli_store

# 0.3000000119 > 0.30000001 as 64-bit floats, but both are float32(0.3) = 0.30000001192...
assert np.float64(0.3000000119) > np.float64(0.30000001)
assert np.float32(0.3000000119) == np.float32(0.30000001)

RUN = ("1 Q0 a 1 0.3000000119 r1\n"
       "1 Q0 b 2 0.30000001 r1\n"
       "1 Q0 c 3 0.2 r1\n"
       "2 Q0 x 1 1.5 r1\n"
       "2 Q0 y 2 1.2 r1\n")
QRELS = "1 0 b 1\n1 0 a 0\n1 0 c 1\n2 0 y 2\n2 0 x 0\n"
MEASURES = ["RR", "P@1", "nDCG@2", "AP", "nDCG@10"]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "run.txt").write_text(RUN)
    (tmp_path / "qrels.txt").write_text(QRELS)
    return tmp_path


def _raw(run_path, qrels_path, measures):
    """ir-measures (pytrec_eval) on the raw files: {(qid, measure): value}."""
    q = list(ir_measures.read_trec_qrels(str(qrels_path)))
    r = list(ir_measures.read_trec_run(str(run_path)))
    ms = [ir_measures.parse_measure(m) for m in measures]
    return {(m.query_id, str(m.measure)): float(m.value) for m in ir_measures.iter_calc(ms, q, r)}


def _ours(ev):
    return {(q, m): v for q, m, v in zip(ev.per_query["qid"].to_pylist(), ev.per_query["measure"].to_pylist(),
                                          ev.per_query["value"].to_pylist())}


def test_float32_ties_ordered_by_docid_descending_as_trec_eval(files):
    rs = read_runs(files / "run.txt")
    # the run table keeps qrelkit's 64-bit canonical order: a before b
    assert rs.table["docid"].to_pylist()[:2] == ["a", "b"]
    ev = evaluate(rs.table, read_qrels(files / "qrels.txt"), MEASURES)
    assert ev.ranking == "trec_eval"
    ours = _ours(ev)
    raw = _raw(files / "run.txt", files / "qrels.txt", MEASURES)
    assert ours == pytest.approx(raw, abs=1e-12)
    # trec_eval's rule: a and b tie in float32 and b (docid descending) comes first, and b is relevant
    assert ours[("1", "RR")] == 1.0 and ours[("1", "P@1")] == 1.0
    # the 64-bit order puts a (not relevant) first: the values differ
    exact = _ours(evaluate(rs.table, read_qrels(files / "qrels.txt"), MEASURES, ranking="exact"))
    assert exact[("1", "RR")] == 0.5 and exact[("1", "P@1")] == 0.0


def test_float32_parity_random(tmp_path):
    """Many near-equal scores (equal in float32, not in float64): every per-query value equals
    ir-measures/pytrec_eval on the raw run file."""
    rng = np.random.default_rng(7)
    base = np.float32(0.3)
    # distinct float64 values inside one float32 rounding interval, and a few distinct float32 values
    near = [float(base) + k * 1e-10 for k in range(-3, 4)] + [0.5, 0.25, 0.125]
    lines, qrels = [], []
    for q in range(1, 6):
        docs = [f"D{rng.integers(0, 10**6):06d}" for _ in range(40)]
        docs = list(dict.fromkeys(docs))
        for i, d in enumerate(docs):
            lines.append(f"{q} Q0 {d} {i + 1} {near[rng.integers(0, len(near))]!r} r\n")
            if rng.random() < 0.4:
                qrels.append(f"{q} 0 {d} {rng.integers(0, 4)}\n")
        qrels.append(f"{q} 0 UNRETRIEVED{q} 1\n")
    (tmp_path / "run.txt").write_text("".join(lines))
    (tmp_path / "qrels.txt").write_text("".join(qrels))
    measures = ["RR", "P@5", "nDCG@10", "AP", "nDCG", "R@20"]
    ev = evaluate(read_runs(tmp_path / "run.txt").table, read_qrels(tmp_path / "qrels.txt"), measures)
    assert _ours(ev) == pytest.approx(_raw(tmp_path / "run.txt", tmp_path / "qrels.txt", measures), abs=1e-12)
    exact = evaluate(read_runs(tmp_path / "run.txt").table, read_qrels(tmp_path / "qrels.txt"), measures, ranking="exact")
    assert _ours(exact) != _ours(ev)  # the example does exercise the difference


def test_ranking_recorded_in_outputs(files, capsys):
    out = files / "pq.parquet"
    code = run(["eval", "score", str(files / "run.txt"), "-q", str(files / "qrels.txt"), "-o", str(out), "-m", "RR",
                "--summary-out", str(files / "s.parquet"), "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["ranking"] == "trec_eval" and "32-bit" in summary["ranking_text"]
    assert summary["summary"][0]["RR"] == pytest.approx((1.0 + 0.5) / 2)
    for p in (out, files / "s.parquet"):
        assert read_metadata(p)["params"]["ranking"] == "trec_eval"


def test_ranking_choice_from_config(files, capsys):
    cfg = files / "c.toml"
    cfg.write_text('[eval]\nranking = "exact"\n')
    out = files / "pq.parquet"
    assert run(["eval", "score", str(files / "run.txt"), "-q", str(files / "qrels.txt"), "-o", str(out), "-m", "RR",
                "-c", str(cfg), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["ranking"] == "exact" and summary["summary"][0]["RR"] == pytest.approx((0.5 + 0.5) / 2)
    assert read_metadata(out)["params"]["ranking"] == "exact"


def test_bad_ranking_is_an_input_error(files):
    with pytest.raises(InputError, match="ranking"):
        evaluate(read_runs(files / "run.txt").table, read_qrels(files / "qrels.txt"), ["RR"], ranking="float16")


# ---- measures ir-measures cannot compute; RBP -------------------------------------------------

def test_unsupported_measure_is_one_line_exit_2(files, capsys):
    out = files / "pq.csv"
    code = run(["eval", "score", str(files / "run.txt"), "-q", str(files / "qrels.txt"), "-o", str(out),
                "-m", "alpha_nDCG@10"])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert "[unsupported-measure]" in lines[0] and "alpha_nDCG@10" in lines[0]
    assert "supported measures:" in lines[0] and "nDCG" in lines[0] and "AP" in lines[0]


def test_rbp_matches_hand_computation(tmp_path, capsys):
    # one topic, ranking a b c d with relevance 1 0 2 1; binary relevance (grade >= 1), p = 0.5:
    # RBP = (1 - p) * (1 + 0 * p + p**2 + p**3) = 0.5 * (1 + 0.25 + 0.125) = 0.6875
    (tmp_path / "run.txt").write_text("1 Q0 a 1 4 r\n1 Q0 b 2 3 r\n1 Q0 c 3 2 r\n1 Q0 d 4 1 r\n")
    (tmp_path / "qrels.txt").write_text("1 0 a 1\n1 0 b 0\n1 0 c 2\n1 0 d 1\n")
    out = tmp_path / "pq.csv"
    code = run(["eval", "score", str(tmp_path / "run.txt"), "-q", str(tmp_path / "qrels.txt"), "-o", str(out),
                "-m", "RBP(p=0.5)", "--json"])
    assert code == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    assert summary["measures"] == ["RBP(p=0.5,rel=1)"]
    assert summary["summary"][0]["RBP(p=0.5,rel=1)"] == pytest.approx(0.6875, abs=1e-12)
    # relevance level 2: only c counts: 0.5 * 0.25 = 0.125
    code = run(["eval", "score", str(tmp_path / "run.txt"), "-q", str(tmp_path / "qrels.txt"), "-o", str(out),
                "-m", "RBP(p=0.5,rel=2)", "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["summary"][0]["RBP(p=0.5,rel=2)"] == pytest.approx(0.125, abs=1e-12)


# ---- grades off the configured scale ------------------------------------------------------------

def test_grade_off_scale_is_an_error_naming_file_and_line(files, capsys):
    q = files / "q99.txt"
    q.write_text("1 0 b 1\n1 0 a 99\n1 0 c 1\n")
    out = files / "pq.csv"
    code = run(["eval", "score", str(files / "run.txt"), "-q", str(q), "-o", str(out), "-m", "RR"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists()
    assert len(err.splitlines()) == 1
    assert f"{q}:2: [grade-out-of-scale]" in err and "99" in err


def test_grade_off_scale_lenient_drops_and_counts(files, capsys):
    q = files / "q99.txt"
    q.write_text("1 0 b 1\n1 0 a 99\n1 0 c 1\n")
    code = run(["eval", "score", str(files / "run.txt"), "-q", str(q), "-o", str(files / "pq.csv"), "-m", "RR",
                "--lenient", "--json"])
    cap = capsys.readouterr()
    assert code == 0
    assert json.loads(cap.out)["repaired"] == {"grade-out-of-scale": 1}
    assert "grade-out-of-scale 1" in cap.err


def test_scale_from_config_allows_grade(files, capsys):
    q = files / "q4.txt"
    q.write_text("1 0 b 4\n1 0 a 0\n")
    cfg = files / "c.toml"
    cfg.write_text("[labels]\nscale = [0, 1, 2, 3, 4]\n")
    assert run(["eval", "score", str(files / "run.txt"), "-q", str(q), "-o", str(files / "pq.csv"), "-m", "RR",
                "-c", str(cfg)]) == 0
    capsys.readouterr()
    assert run(["eval", "score", str(files / "run.txt"), "-q", str(q), "-o", str(files / "pq.csv"), "-m", "RR"]) == 2


def test_negative_grades_are_not_off_scale(tmp_path):
    q = tmp_path / "q.txt"
    q.write_text("1 0 a -1\n1 0 b 2\n")
    t = read_qrels(q, scale=[0, 1, 2, 3])
    assert t["rel"].to_pylist() == [-1, 2]


# ---- --lenient says what it repaired -----------------------------------------------------------

def _dup_run(tmp_path):
    p = tmp_path / "dup.txt"
    p.write_text("1 Q0 a 1 3 r\n1 Q0 a 2 2 r\n1 Q0 c 3 1 r\n2 Q0 x 1 1 r\n")
    (tmp_path / "qrels.txt").write_text("1 0 c 1\n2 0 x 1\n")
    return p


@pytest.mark.parametrize("cmd", [
    ["eval", "score", "{run}", "-q", "{qrels}", "-o", "{out}.csv", "-m", "RR"],
    ["pool", "depth", "{run}", "-o", "{out}.parquet", "-k", "2"],
    ["runs", "validate", "{run}"],
    ["runs", "canonicalize", "{run}", "-o", "{out}.parquet"],
    ["pool", "top1", "{run}", "-o", "{out}.parquet"],
    ["reuse", "leave-out", "{run}", "-q", "{qrels}", "-o", "{out}", "--measure", "P@1"],
])
def test_lenient_reports_counts_per_rule(tmp_path, capsys, cmd):
    r = _dup_run(tmp_path)
    args = [a.format(run=r, qrels=tmp_path / "qrels.txt", out=tmp_path / "out") for a in cmd]
    assert run(args + ["--lenient"]) == 0
    assert "repaired (--lenient): duplicate-docid 1" in capsys.readouterr().err
    assert run(args + ["--lenient", "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["repaired"] == {"duplicate-docid": 1}
    assert "duplicate-docid 1" in cap.err


def test_strict_reports_nothing_repaired(tmp_path, capsys):
    (tmp_path / "run.txt").write_text("1 Q0 a 1 3 r\n1 Q0 c 2 1 r\n")
    assert run(["pool", "depth", str(tmp_path / "run.txt"), "-o", str(tmp_path / "p.parquet"), "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["repaired"] == {} and "repaired" not in cap.err


def test_library_repair_counts(tmp_path):
    rs = read_runs(_dup_run(tmp_path), lenient=True)
    assert rs.repairs() == {"duplicate-docid": 1}
    counts: dict = {}
    q = tmp_path / "q.txt"
    q.write_text("1 0 a 7\n1 0 b 1\n1 0 b 2\n")
    t = read_qrels(q, lenient=True, scale=[0, 1, 2, 3], counts=counts)
    assert counts == {"grade-out-of-scale": 1, "duplicate-judgment": 1}
    assert t.num_rows == 1 and isinstance(t, pa.Table)


def test_imports_report_repairs_the_same_way(tmp_path, capsys):
    """batch import and cal import: the rows --lenient skipped, per rule, on stderr and as
    ``repaired`` in --json (bookkeeping counters such as ``imported`` are not repairs)."""
    f = tmp_path / "done.csv"
    f.write_text("batch_id,assessor,qid,docid,grade\nb1,A1,1,a,2\nb1,A1,1,b,9\nb1,A1,1,c,1\n")
    assert run(["batch", "import", str(f), "-o", str(tmp_path / "j.parquet"), "--lenient", "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["repaired"] == {"grade-outside-scale": 1}
    assert "repaired (--lenient): grade-outside-scale 1" in cap.err
    db = cli_store(tmp_path)
    g = tmp_path / "j.csv"
    g.write_text("qid,docid,assessor,grade,batch_id\n1,a,A1,2,b\n1,a,A1,3,b\n1,b,A1,1,b\n")
    capsys.readouterr()
    assert run(["cal", "import", str(db), str(g), "--lenient", "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["repaired"] == {"conflict": 2}
    assert "repaired (--lenient): conflict 2" in cap.err


@pytest.mark.parametrize("run_name", ["InexpC2", "oce03noXbmD"])
def test_real_runs_match_pytrec_eval_on_the_raw_files(run_name):
    """Two official Robust 2003 runs whose scores tie in float32 but not in float64: every
    per-query value equals ir-measures/pytrec_eval on the raw run file; ordering by the 64-bit
    score (the old behaviour) does not."""
    from conftest import shared

    d = shared("robust03")
    f = d / "runs" / f"input.{run_name}.gz"
    qf = d / "qrels" / "robust03_qrels.txt.gz"
    measures = ["AP", "nDCG@10", "P@10", "RR", "nDCG", "Rprec"]
    table = read_runs(f).table
    q = read_qrels(qf)
    raw = _raw(f, qf, measures)
    assert _ours(evaluate(table, q, measures)) == pytest.approx(raw, abs=1e-12)
    exact = _ours(evaluate(table, q, measures, ranking="exact"))
    assert sum(abs(exact[k] - raw[k]) > 1e-12 for k in raw) > 0


def test_unsupported_measure_in_reuse_is_one_line(files, capsys):
    out = files / "report"
    code = run(["reuse", "leave-out", str(files / "run.txt"), "-q", str(files / "qrels.txt"), "-o", str(out),
                "--measure", "alpha_nDCG@3"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists()
    assert len(err.splitlines()) == 1 and "[unsupported-measure]" in err and "alpha_nDCG@3" in err
