"""Every malformed fixture is refused with the rule and line listed in ``EXPECTED.tsv``.

``tests/fixtures/malformed/EXPECTED.tsv``: ``file reader rule line`` (line ``-`` = no line).
``tests/fixtures/malformed/OPTIONS.tsv``: ``file option value`` — what a run fixture is read with
(``manifest`` / ``topics``: a path relative to the folder, ``max_depth``: an integer).
``tests/fixtures/valid/EXPECTED.tsv``: ``file reader rows warnings`` — files that must be accepted
(CRLF, tabs, mixed whitespace, blank lines, BOM, ...), their row count and the warning rules
(comma separated, ``-`` = none) that read_runs reports.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from qrelkit.errors import InputError
from qrelkit.io.corpus import read_corpus
from qrelkit.io.manifest import read_manifest
from qrelkit.io.qrels import read_qrels
from qrelkit.io.runs import RULES, read_runs
from qrelkit.io.topics import read_topics

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MALFORMED = FIXTURES / "malformed"
VALID = FIXTURES / "valid"


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


EXPECTED = _rows(MALFORMED / "EXPECTED.tsv")
OPTIONS: dict[str, dict[str, str]] = {}
for _row in _rows(MALFORMED / "OPTIONS.tsv"):
    OPTIONS.setdefault(_row["file"], {})[_row["option"]] = _row["value"]


def run_kwargs(name: str) -> dict:
    kw = {}
    for opt, value in OPTIONS.get(name, {}).items():
        if opt == "manifest":
            kw["manifest"] = read_manifest(MALFORMED / value)
        elif opt == "topics":
            kw["topics"] = list(read_topics(MALFORMED / value)["qid"])
        elif opt == "max_depth":
            kw["max_depth"] = int(value)
        else:  # pragma: no cover - a typo in OPTIONS.tsv
            raise AssertionError(f"unknown option {opt!r} in OPTIONS.tsv")
    return kw


READERS = {
    "runs": lambda p, **kw: read_runs(p, **kw),
    "qrels": lambda p, **kw: read_qrels(p, **kw),
    "manifest": lambda p, **kw: read_manifest(p),
    "topics": lambda p, **kw: read_topics(p),
    "corpus": lambda p, **kw: read_corpus(p),
}


def test_index_is_complete():
    listed = [r["file"] for r in EXPECTED]
    assert len(listed) >= 30
    assert len(set(listed)) == len(listed), "a fixture is listed twice"
    on_disk = {p.name for p in MALFORMED.iterdir() if p.is_file()} - {"EXPECTED.tsv", "OPTIONS.tsv"}
    assert on_disk == set(listed), "every fixture file is listed in EXPECTED.tsv and vice versa"
    assert {r["reader"] for r in EXPECTED} == set(READERS)
    for name, opts in OPTIONS.items():
        assert name in listed
        for opt, value in opts.items():
            if opt in ("manifest", "topics"):
                assert (MALFORMED / value).is_file()


@pytest.mark.parametrize("case", EXPECTED, ids=[r["file"] for r in EXPECTED])
def test_strict_reader_raises(case):
    path = MALFORMED / case["file"]
    kw = run_kwargs(case["file"]) if case["reader"] == "runs" else {}
    with pytest.raises(InputError) as info:
        READERS[case["reader"]](path, **kw)
    err = info.value
    line = None if case["line"] == "-" else int(case["line"])
    assert (err.rule, err.line) == (case["rule"], line), str(err)
    text = str(err)
    assert "\n" not in text and "\r" not in text
    assert case["file"] in text
    assert f"[{case['rule']}]" in text
    if line is not None:
        assert f"{case['file']}:{line}:" in text
    assert isinstance(err, ValueError)  # callers may catch ValueError


RUN_CASES = [r for r in EXPECTED if r["reader"] == "runs"]


@pytest.mark.parametrize("case", RUN_CASES, ids=[r["file"] for r in RUN_CASES])
def test_lenient_runs_report_rule(case):
    path = MALFORMED / case["file"]
    rs = read_runs(path, lenient=True, **run_kwargs(case["file"]))
    rule = case["rule"]
    hits = rs.issues[rs.issues["rule"] == rule]
    assert len(hits) == 1, rs.issues
    hit = hits.iloc[0]
    assert hit["count"] >= 1
    assert hit["severity"] == RULES[rule][0] == "error"
    assert hit["repair"] == RULES[rule][1]
    if case["line"] != "-":
        assert int(hit["line"]) == int(case["line"])
    assert hit["file"] == str(path)
    # the error shows in the summary too
    assert rs.summary["errors"].sum() >= 1


def test_lenient_repairs_on_fixtures():
    """What lenient mode keeps, on a few of the fixtures."""
    rs = read_runs(MALFORMED / "runs_duplicate_docid.txt", lenient=True)
    t = rs.table.to_pandas()
    assert len(t) == 4
    assert t.loc[(t.qid == "301") & (t.docid == "d2"), "score"].tolist() == [2.0]  # the first one

    rs = read_runs(MALFORMED / "runs_more_than_max_depth.txt", lenient=True, max_depth=3)
    t = rs.table.to_pandas()
    assert t[t.qid == "301"].docid.tolist() == ["d2", "d3", "d4"]
    assert rs.issues.set_index("rule").loc["max-depth", "count"] == 2

    rs = read_runs(MALFORMED / "runs_several_tags.txt", lenient=True)
    assert rs.runs == ["runA"] and rs.table.num_rows == 4

    rs = read_runs(MALFORMED / "runs_tag_mismatch.txt", lenient=True, **run_kwargs("runs_tag_mismatch.txt"))
    assert rs.runs == ["runA"]  # the manifest's name

    rs = read_runs(MALFORMED / "runs_unknown_topic.txt", lenient=True, **run_kwargs("runs_unknown_topic.txt"))
    assert sorted(set(rs.table["qid"].to_pylist())) == ["301", "302", "303"]
    assert rs.issues.set_index("rule").loc["unknown-topic", "count"] == 2

    for name in ("runs_empty.txt", "runs_truncated.gz"):
        rs = read_runs(MALFORMED / name, lenient=True)
        assert rs.table.num_rows == 0
        assert rs.summary["status"].tolist() == ["skipped"]

    rs = read_runs(MALFORMED / "runs_not_utf8.txt", lenient=True)
    assert rs.table.num_rows == 3
    assert "d\ufffd3" in rs.table["docid"].to_pylist()


def test_lenient_folder_reports_every_file(tmp_path):
    """A folder of bad runs: strict mode names the first file (by name), lenient reads them all."""
    names = ["runs_duplicate_docid.txt", "runs_extra_column.txt", "runs_score_nan.txt", "runs_empty.txt"]
    tags = {"runs_duplicate_docid.txt": "a", "runs_extra_column.txt": "b", "runs_score_nan.txt": "c"}
    for n in names:
        data = (MALFORMED / n).read_text()
        if n in tags:
            data = data.replace("runA", tags[n])
        (tmp_path / n).write_text(data)
    with pytest.raises(InputError) as info:
        read_runs(tmp_path)
    assert info.value.rule == "duplicate-docid"
    rs = read_runs(tmp_path, lenient=True)
    assert set(rs.issues["rule"]) >= {"duplicate-docid", "extra-column", "score-not-finite", "empty-file"}
    assert rs.runs[:3] == ["a", "b", "c"]


VALID_CASES = _rows(VALID / "EXPECTED.tsv")


def _count(reader: str, path: Path) -> int:
    if reader == "runs":
        return read_runs(path).table.num_rows
    if reader == "qrels":
        return read_qrels(path).num_rows
    if reader == "manifest":
        return len(read_manifest(path))
    if reader == "topics":
        return len(read_topics(path))
    return read_corpus(path).num_rows


@pytest.mark.parametrize("case", VALID_CASES, ids=[r["file"] for r in VALID_CASES])
def test_valid_files_accepted(case):
    path = VALID / case["file"]
    assert _count(case["reader"], path) == int(case["rows"])
    if case["reader"] == "runs":
        rs = read_runs(path, lenient=True)
        assert rs.errors().empty
        want = set() if case["warnings"] == "-" else set(case["warnings"].split(","))
        assert set(rs.issues["rule"]) == want


def test_valid_runs_same_table():
    """CRLF, tabs, gzip, mixed whitespace, blank lines and a BOM do not change the table."""
    ref = read_runs(VALID / "runs_crlf.txt").table
    assert set(ref["qid"].to_pylist()) == {"301", "302"}
    for p in sorted(VALID.glob("runs_*")):
        if "zero_based" in p.name or "odd_number" in p.name:
            continue
        assert read_runs(p).table.equals(ref), p.name
    odd = read_runs(VALID / "runs_odd_number_spellings.txt").table
    assert sorted(odd["score"].to_pylist()) == [-0.0, 0.001, 0.5, 3.0, 1e5]


def test_valid_misc_content():
    q = read_qrels(VALID / "qrels_crlf_tabs.txt").to_pandas()
    assert q.rel.tolist() == [1, 0, 2, -1] and q.docid.tolist() == ["d1", "d2", "d1", "d5"]
    m = read_manifest(VALID / "manifest.toml")
    assert m.priority.tolist() == [2, 1] and m.baseline.tolist() == [True, False]
    m = read_manifest(VALID / "manifest.csv")
    assert m.priority.tolist() == [1, 1] and m.subtask.tolist() == ["rerank", ""]
    t = read_topics(VALID / "topics.jsonl")
    assert t.qid.tolist() == ["301", "302"] and t.text.tolist() == ["first", "second"]
    t = read_topics(VALID / "topics_crlf.tsv")
    assert t.text.tolist() == ["first topic", "second \u2028topic"]
    c = read_corpus(VALID / "corpus.jsonl")
    assert c["text"].to_pylist() == ["alpha", "", "T gamma"]
