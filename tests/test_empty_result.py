"""An empty result never replaces a good file (issue 19): an aggregation that includes no topic,
an import with no judgment, a propagation where no passage maps to a document stop with one line
``[empty-result]`` naming the output and why, exit 2 and nothing written, when an output already
holds rows; ``--force`` writes the empty result; new outputs are written as before."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qrelkit.cli import run as cli
from qrelkit.io.paths import holds_rows

GOOD = "1 0 p1 2\n1 0 p2 0\n"


@pytest.fixture
def one_assessor(tmp_path):
    """Judgments by one assessor per item (so no topic has 3), and a good qrels file."""
    j = tmp_path / "judgments.parquet"
    pq.write_table(pa.table({"qid": ["1", "1", "2"], "docid": ["p1", "p2", "p3"], "assessor": ["A01"] * 3,
                             "grade": pa.array([2, 0, 1], pa.int32())}), j)
    q = tmp_path / "qrels.txt"
    q.write_text(GOOD)
    return j, q


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_aggregate_including_nothing_keeps_a_good_qrels_file(one_assessor, tmp_path, capsys):
    j, q = one_assessor
    labels = tmp_path / "labels.parquet"
    argv = ["labels", "aggregate", str(j), "--min-assessors", "3", "-o", str(labels), "--qrels-out", str(q)]
    assert cli(argv) == 2
    line = _one_line(capsys)
    assert line.startswith(f"qrelkit: error: {q}: [empty-result] no topic is included")
    assert "1 assessor(s) < 3" in line and f"{q} not replaced" in line and "--force" in line
    assert q.read_text() == GOOD and not labels.exists()  # nothing written
    assert cli(argv + ["--force"]) == 0
    assert q.read_text() == "" and labels.exists()


def test_aggregate_guards_its_label_table_too(one_assessor, tmp_path, capsys):
    j, _ = one_assessor
    labels = tmp_path / "labels.parquet"
    assert cli(["labels", "aggregate", str(j), "-o", str(labels)]) == 0  # a good label table
    before = labels.read_bytes()
    capsys.readouterr()
    assert cli(["labels", "aggregate", str(j), "--min-assessors", "2", "-o", str(labels)]) == 2
    assert f"{labels}: [empty-result]" in _one_line(capsys)
    assert labels.read_bytes() == before


def test_new_outputs_are_written_with_a_warning(one_assessor, tmp_path, capsys):
    j, _ = one_assessor
    q = tmp_path / "new-qrels.txt"
    assert cli(["labels", "aggregate", str(j), "--min-assessors", "3", "-o", str(tmp_path / "l.parquet"),
                "--qrels-out", str(q)]) == 0
    assert q.read_text() == "" and "warning: the aggregated qrels are empty" in capsys.readouterr().err


def test_import_without_a_grade_keeps_good_outputs(one_assessor, tmp_path, capsys):
    _, q = one_assessor
    completed = tmp_path / "completed.csv"
    completed.write_text("batch_id,assessor,qid,docid,grade\n1-1,A01,1,p1,\n1-1,A01,1,p2,\n")
    out = tmp_path / "judgments-new.parquet"
    assert cli(["batch", "import", str(completed), "-o", str(out), "--qrels-out", str(q)]) == 2
    line = _one_line(capsys)
    assert "[empty-result] no judgment imported (2 rows ungraded)" in line and f"{q} not replaced" in line
    assert q.read_text() == GOOD and not out.exists()
    assert cli(["batch", "import", str(completed), "-o", str(out), "--qrels-out", str(q), "--force"]) == 0
    assert q.read_text() == ""


def test_propagate_mapping_nothing_keeps_good_document_qrels(one_assessor, tmp_path, capsys):
    _, q = one_assessor
    mapping = tmp_path / "mapping.csv"
    mapping.write_text("pid,docid\nzz,D9\n")
    docs = tmp_path / "doc-qrels.txt"
    docs.write_text("1 0 D1 2\n")
    assert cli(["labels", "propagate", str(q), "--mapping", str(mapping), "-o", str(docs)]) == 2
    assert "[empty-result] none of the 2 judged passages maps to a document" in _one_line(capsys)
    assert docs.read_text() == "1 0 D1 2\n"


def test_holds_rows(tmp_path):
    (tmp_path / "h.csv").write_text("qid,docid\n")
    (tmp_path / "r.csv").write_text("qid,docid\n1,p1\n")
    (tmp_path / "e.txt").write_text("")
    pq.write_table(pa.table({"a": pa.array([], pa.int32())}), tmp_path / "e.parquet")
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "r.parquet")
    assert [holds_rows(tmp_path / n) for n in ("h.csv", "r.csv", "e.txt", "e.parquet", "r.parquet", "none.txt")] == \
        [False, True, False, False, True, False]
