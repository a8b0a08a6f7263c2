"""``batch make --corpus`` never hands an assessor an empty passage (issue 19): a pool passage
the corpus lacks, or holds with an empty text, is ``[missing-passage]`` (one line naming the
corpus, how many, the first ids; exit 2, nothing written); ``--lenient`` drops those rows and
reports the count (stderr and ``--json``)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qrelkit.cli import run as cli


@pytest.fixture
def pool_and_corpus(tmp_path) -> tuple[Path, Path]:
    pool = tmp_path / "pool.parquet"
    pq.write_table(pa.table({"qid": ["1", "1", "1", "2", "2"], "docid": ["p1", "p2", "p3", "p3", "p4"],
                             "position": pa.array([1, 2, 3, 1, 2], pa.int32())}), pool)
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"pid": "p1", "text": "one"}, {"pid": "p2", "text": "two"}, {"pid": "p4", "text": "   "}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))  # p3 missing, p4 empty
    return pool, corpus


def test_missing_or_empty_passages_refused(pool_and_corpus, tmp_path, capsys):
    pool, corpus = pool_and_corpus
    out = tmp_path / "batches.csv"
    assert cli(["batch", "make", str(pool), "--corpus", str(corpus), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"qrelkit: error: {corpus}: [missing-passage] 3 pool items (2 passages)")
    assert "first: p3, p4" in err[0]
    assert not out.exists()


def test_lenient_drops_and_counts(pool_and_corpus, tmp_path, capsys):
    pool, corpus = pool_and_corpus
    out = tmp_path / "batches.csv"
    assert cli(["batch", "make", str(pool), "--corpus", str(corpus), "-o", str(out), "--lenient", "--json"]) == 0
    cap = capsys.readouterr()
    summary = json.loads(cap.out)
    assert summary["repaired"] == {"missing-passage": 3} and summary["rows"] == 2
    assert "missing-passage 3" in cap.err
    b = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert sorted(b["docid"]) == ["p1", "p2"] and (b["text"].str.strip() != "").all()


def test_complete_corpus_and_no_corpus_unchanged(pool_and_corpus, tmp_path, capsys):
    pool, corpus = pool_and_corpus
    corpus.write_text("".join(json.dumps({"pid": p, "text": f"text {p}"}) + "\n" for p in ("p1", "p2", "p3", "p4")))
    out = tmp_path / "batches.csv"
    assert cli(["batch", "make", str(pool), "--corpus", str(corpus), "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["repaired"] == {}
    assert len(pd.read_csv(out)) == 5
    assert cli(["batch", "make", str(pool), "-o", str(tmp_path / "b2.csv")]) == 0  # no corpus: no texts, no rule
