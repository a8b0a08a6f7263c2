"""The passage text index (qrelkit.store.textindex): the same texts as a corpus scan
(:func:`qrelkit.io.corpus.lookup_texts`) for every corpus format, without scanning; rebuilt when
missing or not the corpus's."""

from __future__ import annotations

import gzip
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qrelkit.io.corpus import lookup_texts
from qrelkit.store.textindex import INDEX_FORMAT, TextIndex, build_text_index, open_text_index

ROWS = [
    {"pid": "p1", "text": "first passage"},
    {"pid": "p2", "title": "A title", "text": "with a title"},
    {"pid": "p3", "text": "tab\there and unicode é ✓", "docid": "D3"},
    {"pid": "p1", "text": "a second p1: the first one wins"},
    {"pid": "p4", "text": "<script>alert(1)</script>"},
]


def _jsonl(path, rows, blank=True) -> None:
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    if blank:
        lines.insert(2, "")
        lines.insert(4, "   ")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _corpora(tmp_path):
    out = {}
    _jsonl(tmp_path / "c.jsonl", ROWS)
    out["jsonl"] = tmp_path / "c.jsonl"
    (tmp_path / "c.tsv").write_text("p1\tfirst\tD1\np2\tsecond\tD1\n\np3\tthird\tD2\np1\tagain\tD9\n", encoding="utf-8")
    out["tsv"] = tmp_path / "c.tsv"
    (tmp_path / "c2.tsv").write_text("p1\tfirst\np2\tsecond\n", encoding="utf-8")
    out["tsv2"] = tmp_path / "c2.tsv"
    with gzip.open(tmp_path / "c.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write("\n".join(json.dumps(r) for r in ROWS) + "\n")
    out["gz"] = tmp_path / "c.jsonl.gz"
    pq.write_table(pa.table({"pid": ["p1", "p2", "p3"], "text": ["one", "two", "three"], "docid": ["D1", None, "D2"]}),
                   tmp_path / "c.parquet", row_group_size=2)
    out["parquet"] = tmp_path / "c.parquet"
    (tmp_path / "n.jsonl").write_text('{"id": 1001, "text": "numeric id"}\n{"id": 7, "text": "seven"}\n')
    out["numeric"] = tmp_path / "n.jsonl"
    return out


@pytest.mark.parametrize("kind, mode", [("jsonl", "offsets"), ("tsv", "offsets"), ("tsv2", "offsets"), ("gz", "texts"),
                                        ("parquet", "texts"), ("numeric", "offsets")])
def test_the_index_gives_what_a_corpus_scan_gives(tmp_path, kind, mode):
    corpus = _corpora(tmp_path)[kind]
    idx = open_text_index(corpus, tmp_path / "idx.sqlite", sha256="abc")
    try:
        assert idx.mode == mode and idx.meta["format"] == INDEX_FORMAT and idx.meta["sha256"] == "abc"
        want = {"p1", "p2", "p3", "p4", "1001", "7", "missing"}
        assert idx.texts(want) == lookup_texts(corpus, want)
        assert idx.texts([]) == {}
    finally:
        idx.close()


def test_many_passages_and_a_large_lookup(tmp_path):
    rows = [{"pid": f"x{i}", "text": f"passage number {i} " * (i % 7 + 1)} for i in range(5000)]
    _jsonl(tmp_path / "big.jsonl", rows, blank=False)
    idx = open_text_index(tmp_path / "big.jsonl", tmp_path / "idx.sqlite")
    want = {f"x{i}" for i in range(0, 5000, 3)}
    assert idx.texts(want) == lookup_texts(tmp_path / "big.jsonl", want)
    assert idx.meta["passages"] == "5000"
    idx.close()


def test_rebuilt_when_missing_or_not_the_corpus(tmp_path):
    corpus = _corpora(tmp_path)["jsonl"]
    path = tmp_path / "idx.sqlite"
    open_text_index(corpus, path, sha256="h1").close()
    first = path.stat().st_mtime_ns
    open_text_index(corpus, path, sha256="h1").close()
    assert path.stat().st_mtime_ns == first  # current: kept
    idx = open_text_index(corpus, path, sha256="h2")  # another hash recorded: rebuilt
    assert idx.meta["sha256"] == "h2"
    idx.close()
    _jsonl(corpus, [{"pid": "p9", "text": "new corpus"}] + ROWS)  # the corpus changed (size, mtime)
    idx = open_text_index(corpus, path, sha256="h2")
    assert idx.texts(["p9", "p4"]) == {"p9": ("new corpus", None), "p4": ("<script>alert(1)</script>", None)}
    idx.close()
    path.unlink()
    idx = open_text_index(corpus, path)  # missing: built
    assert idx.texts(["p9"]) == {"p9": ("new corpus", None)}
    idx.close()
    path.write_bytes(b"not an index")
    idx = open_text_index(corpus, path)  # unreadable: built again
    assert idx.texts(["p9"]) == {"p9": ("new corpus", None)}
    idx.close()


def test_a_stale_offset_index_is_refused_not_misread(tmp_path):
    corpus = _corpora(tmp_path)["jsonl"]
    path = build_text_index(corpus, tmp_path / "idx.sqlite")
    st = os.stat(corpus)
    corpus.write_text(corpus.read_text().replace('"p2"', '"q2"'))
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same size and time: only a read can tell
    idx = TextIndex(path, corpus)
    with pytest.raises(Exception, match="does not match the corpus"):
        idx.texts(["p2"])
    idx.close()
