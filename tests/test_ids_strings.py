"""Ids are strings, always: every table reader keeps ``01001``, ``1e3``, ``1.0``, ``NA`` and ids of
mixed width as written, through every command's round trip (CSV, TSV, JSONL, Parquet)."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qrelkit.cli import run
from qrelkit.io.corpus import read_corpus
from qrelkit.io.manifest import read_manifest, read_run_depths
from qrelkit.io.qrels import read_qrels
from qrelkit.io.tables import read_frame, read_table, write_table
from qrelkit.io.topics import read_topics

from conftest import write_run

# topics, passages, runs, groups and assessors whose names a number parser would change
QIDS = ["01001", "1e3", "007", "12", "1.0"]
DOCS = ["0012", "12", "1.0", "2e5", "NA", "null", "d7", "000", "0x1F", "1_000", "nan", "inf"]
RUNS = {"01": "007", "1e2": "007", "run3": "1.0"}  # run -> group


def cli(*args: str) -> int:
    code = run([str(a) for a in args])
    assert code == 0, args
    return code


def rows_of(path: Path) -> list[dict]:
    """A CSV/TSV table as strings, read without qrelkit."""
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t" if path.suffix in (".tsv", ".txt") else ","))


def qrels_dict(path: Path) -> dict[tuple[str, str], int]:
    out = {}
    for line in path.read_text().splitlines():
        q, _, d, r = line.split()
        out[(q, d)] = int(r)
    return out


@pytest.fixture
def camp(tmp_path):
    """A small campaign whose every id looks like a number (or a missing value)."""
    rng = np.random.default_rng(3)
    runs = tmp_path / "runs"
    runs.mkdir()
    for k, r in enumerate(RUNS):
        rows = []
        for q in QIDS:
            order = rng.permutation(len(DOCS))
            rows += [(q, DOCS[j], float(len(DOCS) - i)) for i, j in enumerate(order)]
        write_run(runs / f"{r}.run", rows, tag=r)
    (tmp_path / "manifest.csv").write_text(
        "run,group,priority,baseline,subtask,file\n"
        + "".join(f"{r},{g},1,false,fullrank,{r}.run\n" for r, g in RUNS.items()))
    hidden = {(q, d): int(rng.integers(0, 4)) for q in QIDS for d in DOCS}
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 {d} {g}\n" for (q, d), g in hidden.items()))
    (tmp_path / "topics.tsv").write_text("".join(f"{q}\ttopic {q}\n" for q in QIDS))
    # near-duplicate classes: "12" is a copy of "0012", "1.0" of "000"
    (tmp_path / "classes.csv").write_text("docid,class_id\n0012,0012\n12,0012\n000,000\n1.0,000\n")
    (tmp_path / "mapping.csv").write_text("pid,docid\n" + "".join(f"{d},0{i % 3}\n" for i, d in enumerate(DOCS)))
    (tmp_path / "depths.csv").write_text("run,depth\n01,2\n1e2,1\nrun3,3\n")
    return tmp_path, hidden


# --------------------------------------------------------------------------- the reader itself

ID_TEXT = st.one_of(
    st.from_regex(r"0[0-9]{1,7}", fullmatch=True),  # leading zeros
    st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3})?[eE][+-]?[0-9]{1,2}", fullmatch=True),  # exponent-like
    st.from_regex(r"[0-9]{1,4}\.[0-9]{1,3}", fullmatch=True),  # float-looking
    st.sampled_from(["NA", "null", "nan", "NaN", "inf", "-0", "true", "1", "2"]),
    st.text(alphabet="abcdefXYZ0123456789-_.:", min_size=1, max_size=12),  # mixed, whitespace-free
)
JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
ID_COLS = ["qid", "docid", "assessor", "batch_id", "run", "group", "worker", "pair_id", "task_id", "class_id", "pid"]


def _write(path: Path, cols: dict[str, list], bare_numbers: bool = False) -> None:
    names = list(cols)
    n = len(cols[names[0]])
    if path.suffix == ".parquet":
        pq.write_table(pa.table({k: pa.array(v) for k, v in cols.items()}), path)
    elif path.suffix == ".jsonl":
        with open(path, "w") as fh:
            for i in range(n):
                parts = []
                for k in names:
                    v = cols[k][i]
                    bare = isinstance(v, int) or (bare_numbers and JSON_NUMBER.fullmatch(v))
                    parts.append(f'"{k}": {v if bare else json.dumps(v)}')
                fh.write("{" + ", ".join(parts) + "}\n")
    else:
        sep = "," if path.suffix == ".csv" else "\t"
        path.write_text(sep.join(names) + "\n" + "".join(sep.join(str(cols[k][i]) for k in names) + "\n" for i in range(n)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=st.lists(st.tuples(*[ID_TEXT] * len(ID_COLS)), min_size=1, max_size=8),
       fmt=st.sampled_from(["csv", "tsv", "txt", "jsonl", "jsonl-bare", "parquet"]))
def test_read_frame_keeps_every_id_as_written(tmp_path_factory, ids, fmt):
    d = tmp_path_factory.mktemp("rf")
    cols = {c: [row[i] for row in ids] for i, c in enumerate(ID_COLS)}
    cols["grade"] = [i % 4 for i in range(len(ids))]
    path = d / f"t.{fmt.split('-')[0]}"
    _write(path, cols, bare_numbers=fmt == "jsonl-bare")
    df = read_frame(path)
    for c in ID_COLS:
        assert df[c].tolist() == cols[c], (c, fmt)
    assert [int(g) for g in df["grade"]] == cols["grade"]  # other columns keep their types
    every = read_frame(path, strings="all")
    for c in ID_COLS:
        assert every[c].tolist() == cols[c]
    assert every["grade"].tolist() == [str(g) for g in cols["grade"]]


def test_read_table_parquet_integer_ids_become_text(tmp_path):
    p = tmp_path / "t.parquet"
    pq.write_table(pa.table({"qid": pa.array([1001, 7], pa.int64()), "docid": pa.array([3, 4], pa.int32()),
                             "rel": pa.array([1, 2], pa.int32())}), p)
    t = read_table(p)
    assert t.schema.field("qid").type == pa.string() and t["qid"].to_pylist() == ["1001", "7"]
    assert t["docid"].to_pylist() == ["3", "4"] and t.schema.field("rel").type == pa.int32()


def test_jsonl_mixed_number_and_string_ids(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"qid": 1001, "docid": "01", "grade": 2}\n{"qid": "01001", "docid": 1e3, "grade": 1}\n')
    df = read_frame(p)
    assert df["qid"].tolist() == ["1001", "01001"] and df["docid"].tolist() == ["01", "1e3"]
    assert df["grade"].tolist() == [2, 1]
    p.write_text('{"qid": -0, "docid": 1.0, "score": 1e3}\n')  # bare JSON numbers: the literal text
    df = read_frame(p)
    assert df["qid"].tolist() == ["-0"] and df["docid"].tolist() == ["1.0"] and df["score"].tolist() == [1000.0]


def test_manifest_topics_run_depths_keep_ids(tmp_path):
    (tmp_path / "m.csv").write_text("run,group,priority\n01,007,1\n1e2,1.0,2\n")
    m = read_manifest(tmp_path / "m.csv")
    assert m["run"].tolist() == ["01", "1e2"] and m["group"].tolist() == ["007", "1.0"]
    assert m["priority"].tolist() == [1, 2]
    (tmp_path / "m.tsv").write_text("run\tgroup\n01\t007\n")
    assert read_manifest(tmp_path / "m.tsv")["group"].tolist() == ["007"]
    (tmp_path / "t.jsonl").write_text('{"qid": 1e3, "query": "x"}\n{"qid": "01001", "query": "y"}\n')
    assert read_topics(tmp_path / "t.jsonl")["qid"].tolist() == ["1e3", "01001"]
    (tmp_path / "d.csv").write_text("run,depth\n01,2\n1e2,1\n")
    assert read_run_depths(tmp_path / "d.csv") == {"01": 2, "1e2": 1}
    (tmp_path / "c.jsonl").write_text('{"pid": 1e3, "text": "a", "docid": 0.5}\n{"pid": "01001", "text": "b", "docid": 7}\n'
                                      '{"pid": 12, "text": "c", "docid": "007"}\n')
    c = read_corpus(tmp_path / "c.jsonl")
    assert c["pid"].to_pylist() == ["1e3", "01001", "12"] and c["docid"].to_pylist() == ["0.5", "7", "007"]


# --------------------------------------------------------------------------- the simulated assessor


@pytest.mark.parametrize("ext", ["csv", "tsv", "jsonl", "parquet"])
def test_simulated_assessor_agrees_with_hidden_qrels_at_one_minus_error_rate(tmp_path, ext):
    """CSV and Parquet batches alike: the grade equals the hidden one with probability 1 - error_rate
    (the old CSV reader turned ``01001`` into 1001 and matched no hidden judgment: grades were 0)."""
    rng = np.random.default_rng(11)
    n, err = 600, 0.1
    qids = [f"{q:05d}" if q % 2 else f"{q}e1" for q in rng.integers(1, 40, n)]
    docs = [f"{d:0{int(w)}d}" for d, w in zip(rng.integers(0, 10**6, n), rng.integers(6, 10, n))]
    keys = list(dict.fromkeys(zip(qids, docs)))
    truth = {k: int(rng.integers(0, 4)) for k in keys}
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 {d} {g}\n" for (q, d), g in truth.items()))
    batches = pa.table({"batch_id": [f"{q}-1" for q, _ in keys], "assessor": ["01"] * len(keys),
                        "qid": [q for q, _ in keys], "query": [""] * len(keys), "part": [1] * len(keys),
                        "position": list(range(1, len(keys) + 1)), "pool_position": list(range(1, len(keys) + 1)),
                        "docid": [d for _, d in keys], "text": [""] * len(keys),
                        "grade": pa.array([None] * len(keys), pa.int32())})
    b = tmp_path / f"batches.{ext}"
    write_table(batches, b, kind="batches", params={})
    out = tmp_path / f"done.{ext}"
    cli("simulate", "judge", b, "-q", tmp_path / "qrels.txt", "--error-rate", err, "--seed", 5, "-o", out)
    done = read_frame(out, strings="all")
    assert done["qid"].tolist() == [q for q, _ in keys] and done["docid"].tolist() == [d for _, d in keys]
    agree = np.mean([int(g) == truth[(q, d)] for q, d, g in zip(done["qid"], done["docid"], done["grade"])])
    tol = 4 * math.sqrt(err * (1 - err) / len(keys))
    assert abs(agree - (1 - err)) <= tol, agree


# --------------------------------------------------------------------------- command round trips


def test_pool_batches_judge_import_roundtrip(camp):
    d, hidden = camp
    cli("pool", "select", "-m", d / "manifest.csv", "-o", d / "selection.csv")
    assert sorted(r["run"] for r in rows_of(d / "selection.csv")) == sorted(RUNS)
    assert {r["group"] for r in rows_of(d / "selection.csv")} == set(RUNS.values())
    cli("pool", "depth", d / "runs", "-m", d / "manifest.csv", "--depth", 4, "--run-depth", d / "depths.csv",
        "-o", d / "pool.csv")
    cli("pool", "depth", d / "runs", "-m", d / "manifest.csv", "--depth", 4, "--run-depth", d / "depths.csv",
        "-o", d / "pool.parquet")
    pool = rows_of(d / "pool.csv")
    assert {r["qid"] for r in pool} == set(QIDS) and {r["docid"] for r in pool} <= set(DOCS)
    # per-run depths 2/1/3, read with run names as written: at most 2 + 1 + 3 passages per topic
    assert max(sum(r["qid"] == q for r in pool) for q in QIDS) <= 6
    pooled = {(r["qid"], r["docid"]) for r in pool}
    for ext in ("csv", "jsonl", "tsv"):
        cli("batch", "make", d / "pool.csv", "-t", d / "topics.tsv", "--assessor-names", "01,1e1",
            "-o", d / f"batches.{ext}")
        b = read_frame(d / f"batches.{ext}", strings="all")
        assert set(zip(b["qid"], b["docid"])) == pooled and set(b["assessor"]) <= {"01", "1e1"}
        assert set(b["query"]) == {f"topic {q}" for q in QIDS}
        cli("simulate", "judge", d / f"batches.{ext}", "-q", d / "qrels.txt", "-o", d / f"done.{ext}")
        cli("batch", "import", d / f"done.{ext}", "--issued", d / f"batches.{ext}", "-o", d / f"judgments.{ext}",
            "--qrels-out", d / f"round1-{ext}.txt")
        got = qrels_dict(d / f"round1-{ext}.txt")
        assert got == {k: hidden[k] for k in pooled}, ext
    # labels aggregate from a CSV judgments table
    cli("labels", "aggregate", d / "judgments.csv", "-o", d / "labels.csv", "--qrels-out", d / "agg.txt")
    assert qrels_dict(d / "agg.txt") == qrels_dict(d / "round1-csv.txt")
    assert {r["qid"] for r in rows_of(d / "labels.csv")} == set(QIDS)
    # the judging store: import a CSV judgments table and a completed batch, export the qrels
    cli("cal", "init", d / "store.db", "-t", d / "topics.tsv")
    cli("cal", "import", d / "store.db", d / "judgments.csv")
    cli("cal", "export", d / "store.db", "-o", d / "cal.txt")
    assert qrels_dict(d / "cal.txt") == qrels_dict(d / "round1-csv.txt")
    # leave-one-group-out: per-run depths and official scores (eval score's CSV summary) by run name
    cli("eval", "score", d / "runs", "-q", d / "round1-csv.txt", "-m", "AP", "-m", "nDCG@10", "-o", d / "per-query.parquet",
        "--summary-out", d / "official.csv")
    assert {r["run"] for r in rows_of(d / "official.csv")} == set(RUNS)
    cli("reuse", "leave-out", d / "runs", "-m", d / "manifest.csv", "-q", d / "round1-csv.txt", "--pool", d / "pool.parquet",
        "--run-depth", d / "depths.csv", "--official", d / "official.csv", "--measure", "AP", "--measure", "nDCG@10",
        "-o", d / "reuse")
    assert {r["unit"] for r in rows_of(d / "reuse" / "units.csv")} == set(RUNS.values())
    assert {r["run"] for r in rows_of(d / "reuse" / "runs.csv")} == set(RUNS)
    assert {r["qid"] for r in rows_of(d / "reuse" / "topics.csv")} == set(QIDS)
    official = {(r["run"], r["measure"]): float(r["value"]) for r in rows_of(d / "official.csv")}
    for r in rows_of(d / "reuse" / "runs.csv"):
        assert float(r["official"]) == pytest.approx(official[(r["run"], r["measure"])])


def test_labels_expand_and_propagate_keep_ids(camp):
    d, _ = camp
    (d / "q.txt").write_text("01001 0 0012 3\n1e3 0 000 2\n007 0 d7 1\n")
    cli("labels", "expand", d / "q.txt", "--classes", d / "classes.csv", "-o", d / "exp.txt")
    assert qrels_dict(d / "exp.txt") == {("01001", "0012"): 3, ("01001", "12"): 3, ("1e3", "000"): 2,
                                         ("1e3", "1.0"): 2, ("007", "d7"): 1}
    cli("labels", "propagate", d / "q.txt", "--mapping", d / "mapping.csv", "-o", d / "docs.txt")
    want_doc = {p: f"0{i % 3}" for i, p in enumerate(DOCS)}
    assert qrels_dict(d / "docs.txt") == {("01001", want_doc["0012"]): 3, ("1e3", want_doc["000"]): 2,
                                          ("007", want_doc["d7"]): 1}


def test_prefs_round_trip_keeps_ids(camp):
    d, hidden = camp
    cli("pool", "top1", d / "runs", "-m", d / "manifest.csv", "-q", d / "qrels.txt", "-o", d / "top1.parquet")
    cli("prefs", "pairs", d / "top1.parquet", "-o", d / "pairs.csv")
    pairs = rows_of(d / "pairs.csv")
    assert pairs and {r["qid"] for r in pairs} <= set(QIDS)
    assert {r["doc_a"] for r in pairs} | {r["doc_b"] for r in pairs} <= set(DOCS)
    cli("prefs", "tasks", d / "pairs.csv", "-q", d / "qrels.txt", "-o", d / "tasks.csv")
    cli("prefs", "simulate", d / "tasks.csv", "-q", d / "qrels.txt", "--workers", 3, "-o", d / "answers.csv")
    cli("prefs", "import", d / "answers.csv", "--tasks", d / "tasks.csv", "-o", d / "judged.csv")
    judged = rows_of(d / "judged.csv")
    assert judged and {r["qid"] for r in judged} <= set(QIDS)
    assert {(r["qid"], r["doc_a"]) for r in judged} <= set(hidden)


def test_aggregate_empty_result_is_a_warning(camp, capsys):
    d, _ = camp
    (d / "j.csv").write_text("qid,docid,assessor,grade\n01001,0012,01,2\n1e3,000,01,0\n")
    out, q = d / "labels.csv", d / "agg.txt"
    assert run(["labels", "aggregate", str(d / "j.csv"), "--min-assessors", "3", "-o", str(out),
                "--qrels-out", str(q), "--json"]) == 0
    cap = capsys.readouterr()
    s = json.loads(cap.out)
    assert s["empty"] is True and "1 assessor(s) < 3" in s["reason"] and "2 topics" in s["reason"]
    assert "warning" in cap.err and "1 assessor(s) < 3" in cap.err and cap.err.count("\n") == 1
    assert q.exists() and q.read_text() == "" and out.exists()
    assert run(["labels", "aggregate", str(d / "j.csv"), "-o", str(out), "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["empty"] is False and json.loads(cap.out)["reason"] is None and cap.err == ""
