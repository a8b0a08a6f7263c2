"""Unit tests of qrelkit.io.runs: inputs (folder, gzip, Parquet), lenient repairs, warnings,
write_trec_run, and the 17 real TREC 2003 Robust runs (checked against ir-measures)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qrelkit.errors import InputError
from qrelkit.io.manifest import read_manifest
from qrelkit.io.runs import RULES, RUN_SCHEMA, canonicalize, qid_order, read_runs, write_trec_run

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
ROBUST = DATA / "robust03"
ROBUST_RUNS = ROBUST / "runs"
ROBUST_QRELS = ROBUST / "qrels" / "robust03_qrels.txt.gz"


def write(path: Path, lines: list[str], eol: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + eol for line in lines))
    return path


def rows(t: pa.Table) -> list[tuple]:
    return list(zip(*(t[c].to_pylist() for c in ("run", "qid", "docid", "rank", "score"))))


def issue(rs, rule):
    hits = rs.issues[rs.issues["rule"] == rule]
    assert len(hits) == 1, f"{rule} not reported once:\n{rs.issues}"
    return hits.iloc[0]


RUN_A = [
    "2 Q0 dA 1 9.0 alpha",
    "2 Q0 dB 2 8.0 alpha",
    "10 Q0 dC 1 5.0 alpha",
    "10 Q0 dD 2 4.0 alpha",
]
RUN_B = [
    "10 Q0 x1 1 1.0 beta",
    "2 Q0 x2 1 3.0 beta",
    "2 Q0 x3 2 2.0 beta",
]


# ------------------------------------------------------------------ inputs
def test_single_file_canonical_table(tmp_path):
    rs = read_runs(write(tmp_path / "a.txt", RUN_A))
    assert rs.table.schema == RUN_SCHEMA
    assert rows(rs.table) == [
        ("alpha", "2", "dA", 1, 9.0), ("alpha", "2", "dB", 2, 8.0),
        ("alpha", "10", "dC", 1, 5.0), ("alpha", "10", "dD", 2, 4.0),
    ]
    assert rs.runs == ["alpha"]
    assert rs.issues.empty
    s = rs.summary.iloc[0]
    assert (s["docs"], s["topics"], s["min_depth"], s["max_depth"], s["status"]) == (4, 2, 2, 2, "ok")


def test_folder_input(tmp_path):
    folder = tmp_path / "runs"
    write(folder / "z_first_in_name_order_is_beta.txt", RUN_B)
    write(folder / "a.txt", RUN_A)
    write(folder / ".hidden", ["garbage"])
    rs = read_runs(folder)
    assert rs.runs == ["alpha", "beta"]
    assert rs.files == {"alpha": str(folder / "a.txt"), "beta": str(folder / "z_first_in_name_order_is_beta.txt")}
    t = rs.table
    assert t.column("run").to_pylist() == ["alpha"] * 4 + ["beta"] * 3
    assert t.filter(pa.compute.equal(t["run"], "beta"))["docid"].to_pylist() == ["x2", "x3", "x1"]
    # a list of files and folders gives the same
    assert read_runs([folder / "a.txt", folder / "z_first_in_name_order_is_beta.txt"]).table.equals(t)
    assert read_runs(folder, threads=1).table.equals(t)


def test_folder_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError) as info:
        read_runs(tmp_path / "empty")
    assert info.value.rule == "empty-folder"
    with pytest.raises(InputError) as info:
        read_runs(tmp_path / "nope.txt")
    assert info.value.rule == "unreadable"


def test_duplicate_run_across_files(tmp_path):
    write(tmp_path / "r" / "a.txt", RUN_A)
    write(tmp_path / "r" / "b.txt", RUN_A)
    with pytest.raises(InputError) as info:
        read_runs(tmp_path / "r")
    assert info.value.rule == "duplicate-run" and info.value.file.endswith("b.txt")
    rs = read_runs(tmp_path / "r", lenient=True)
    assert rs.table.num_rows == 4 and rs.files == {"alpha": str(tmp_path / "r" / "a.txt")}


def test_one_topic_order_across_runs(tmp_path):
    """A run with only numeric qids follows the string order when another run has a non-numeric qid."""
    write(tmp_path / "r" / "a.txt", RUN_A)
    write(tmp_path / "r" / "b.txt", RUN_B + ["q7 Q0 x9 1 1.0 beta"])
    t = read_runs(tmp_path / "r").table
    assert t.filter(pa.compute.equal(t["run"], "alpha"))["qid"].to_pylist() == ["10", "10", "2", "2"]
    assert canonicalize(t).equals(t)
    assert qid_order(["10", "2", "q7"]) == ["10", "2", "q7"]
    assert qid_order(["10", "2", "002"]) == ["002", "2", "10"]


def test_gzip_input(tmp_path):
    plain = read_runs(write(tmp_path / "a.txt", RUN_A)).table
    gz = tmp_path / "g" / "a.txt.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress("\r\n".join(RUN_A).encode()))
    assert read_runs(gz).table.equals(plain)
    # gzip is recognised by its magic bytes, not by its name
    odd = tmp_path / "g2" / "run.txt"
    odd.parent.mkdir()
    odd.write_bytes(gzip.compress("\n".join(RUN_A).encode()))
    assert read_runs(odd).table.equals(plain)


def test_parquet_round_trip(tmp_path):
    rs = read_runs([write(tmp_path / "a.txt", RUN_A), write(tmp_path / "b.txt", RUN_B)])
    for name, run in (("alpha", "a"), ("beta", "b")):
        part = rs.table.filter(pa.compute.equal(rs.table["run"], name))
        pq.write_table(part, tmp_path / f"{run}.parquet")
    back = read_runs([tmp_path / "a.parquet", tmp_path / "b.parquet"])
    assert back.table.equals(rs.table)
    assert back.runs == ["alpha", "beta"]


def test_parquet_variants(tmp_path):
    # integer qids, no rank, a "tag" column, rows out of order
    t = pa.table({"qid": [10, 2, 2], "docid": ["x1", "x3", "x2"], "score": [1.0, 2.0, 3.0], "tag": ["beta"] * 3})
    pq.write_table(t, tmp_path / "b.parquet")
    rs = read_runs(tmp_path / "b.parquet")
    assert rows(rs.table) == [("beta", "2", "x2", 1, 3.0), ("beta", "2", "x3", 2, 2.0), ("beta", "10", "x1", 1, 1.0)]
    # no run/tag column: the file's stem names the run
    pq.write_table(t.drop(["tag"]), tmp_path / "stem.parquet")
    assert read_runs(tmp_path / "stem.parquet").runs == ["stem"]
    # a Parquet run without a score column
    pq.write_table(t.drop(["score"]), tmp_path / "noscore.parquet")
    with pytest.raises(InputError) as info:
        read_runs(tmp_path / "noscore.parquet")
    assert info.value.rule == "missing-column"
    # not Parquet at all
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError) as info:
        read_runs(tmp_path / "bad.parquet")
    assert info.value.rule == "unreadable"


# ------------------------------------------------------------------ lenient repairs
def test_duplicate_keeps_first_occurrence_in_file_order(tmp_path):
    p = write(tmp_path / "a.txt", [
        "1 Q0 d1 1 1.0 r",  # first d1: the LOWER score, kept
        "1 Q0 d2 2 2.0 r",
        "1 Q0 d1 3 5.0 r",  # duplicate (higher score) dropped
        "1 Q0 d1 4 0.5 r",  # and another one
        "2 Q0 d1 1 1.0 r",  # same docid, other topic: fine
    ])
    with pytest.raises(InputError) as info:
        read_runs(p)
    assert (info.value.rule, info.value.line) == ("duplicate-docid", 3)
    rs = read_runs(p, lenient=True)
    assert rows(rs.table) == [("r", "1", "d2", 1, 2.0), ("r", "1", "d1", 2, 1.0), ("r", "2", "d1", 1, 1.0)]
    i = issue(rs, "duplicate-docid")
    assert (i["count"], i["line"], i["severity"]) == (2, 3, "error")
    assert i["repair"] == RULES["duplicate-docid"][1]
    assert rs.summary.iloc[0]["status"] == "repaired"


def test_dropped_line_does_not_make_a_duplicate(tmp_path):
    p = write(tmp_path / "a.txt", ["1 Q0 d1 1 nan r", "1 Q0 d1 2 1.0 r"])
    rs = read_runs(p, lenient=True)
    assert rows(rs.table) == [("r", "1", "d1", 1, 1.0)]
    assert set(rs.issues["rule"]) == {"score-not-finite"}


def test_max_depth_keeps_canonical_top(tmp_path):
    lines = [f"1 Q0 d{i:02d} {i} {s} r" for i, s in enumerate([1.0, 7.0, 3.0, 7.0, 9.0, 2.0], 1)]
    lines += ["2 Q0 e1 1 1.0 r", "2 Q0 e2 2 2.0 r"]
    p = write(tmp_path / "a.txt", lines)
    with pytest.raises(InputError) as info:
        read_runs(p, max_depth=3)
    assert (info.value.rule, info.value.line) == ("max-depth", 1)
    rs = read_runs(p, lenient=True, max_depth=3)
    got = [(q, d, r) for _, q, d, r, _ in rows(rs.table)]
    # score desc, ties (7.0) by docid desc: d05, d04, d02 kept; d03, d06, d01 cut
    assert got == [("1", "d05", 1), ("1", "d04", 2), ("1", "d02", 3), ("2", "e2", 1), ("2", "e1", 2)]
    i = issue(rs, "max-depth")
    assert (i["count"], i["line"]) == (3, 1)
    assert read_runs(p, max_depth=6).table.num_rows == 8


def test_unknown_and_missing_topics(tmp_path):
    p = write(tmp_path / "a.txt", RUN_A + ["77 Q0 dZ 1 1.0 alpha"])
    with pytest.raises(InputError) as info:
        read_runs(p, topics=["2", "10", "11"])
    assert (info.value.rule, info.value.line) == ("unknown-topic", 5)
    rs = read_runs(p, lenient=True, topics=["2", "10", "11"])
    assert set(rs.table["qid"].to_pylist()) == {"2", "10"}
    assert issue(rs, "missing-topic")["count"] == 1
    assert issue(rs, "missing-topic")["severity"] == "warning"


def test_manifest_checks(tmp_path):
    m = tmp_path / "m.csv"
    m.write_text("run,group,file\nalpha,g1,a.txt\nbeta,g2,b.txt\n")
    man = read_manifest(m)
    write(tmp_path / "r" / "a.txt", RUN_A)
    write(tmp_path / "r" / "b.txt", [line.replace("beta", "BETA") for line in RUN_B])
    with pytest.raises(InputError) as info:
        read_runs(tmp_path / "r", manifest=man)
    assert (info.value.rule, info.value.line) == ("tag-mismatch", 1) and info.value.file.endswith("b.txt")
    rs = read_runs(tmp_path / "r", manifest=man, lenient=True)
    assert rs.runs == ["alpha", "beta"]


def test_a_manifest_run_without_a_file(tmp_path):
    m = tmp_path / "m.csv"
    m.write_text("run,group,file\nalpha,g1,a.txt\nbeta,g2,b.txt\ngamma,g2,\n")
    write(tmp_path / "r" / "a.txt", RUN_A)
    with pytest.raises(InputError) as info:
        read_runs(tmp_path / "r", manifest=read_manifest(m))
    e = info.value
    assert (e.rule, e.file, e.line) == ("missing-run", str(m), 3)
    assert "'beta'" in e.message and "'b.txt'" in e.message and "1 other run(s)" in e.message
    rs = read_runs(tmp_path / "r", manifest=read_manifest(m), lenient=True)
    assert rs.runs == ["alpha"]
    miss = rs.issues[rs.issues["rule"] == "missing-run"]
    assert miss["run"].tolist() == ["beta", "gamma"] and miss["line"].tolist() == [3, 4]
    assert set(miss["repair"]) == {RULES["missing-run"][1]} and set(miss["file"]) == {str(m)}
    write(tmp_path / "r" / "b.txt", RUN_B)
    write(tmp_path / "r" / "c.txt", [line.replace("alpha", "gamma") for line in RUN_A])
    assert read_runs(tmp_path / "r", manifest=read_manifest(m)).runs == ["alpha", "beta", "gamma"]


# ------------------------------------------------------------------ warnings
def test_rank_zero_based_warning(tmp_path):
    p = write(tmp_path / "a.txt", ["1 Q0 d1 0 3.0 r", "1 Q0 d2 1 2.0 r", "2 Q0 d1 0 1.0 r"])
    rs = read_runs(p)  # a warning: strict mode reads the file
    assert [r[3] for r in rows(rs.table)] == [1, 2, 1]
    i = issue(rs, "rank-zero-based")
    assert (i["severity"], i["count"], i["line"]) == ("warning", 2, 1)
    assert rs.summary.iloc[0]["status"] == "warnings"
    assert rs.errors().empty


def test_tie_order_differs_warning(tmp_path):
    # equal scores ranked by docid ascending: trec_eval's order is docid descending
    p = write(tmp_path / "a.txt", ["1 Q0 a 1 2.0 r", "1 Q0 b 2 2.0 r", "1 Q0 c 3 1.0 r", "2 Q0 a 1 1.0 r"])
    rs = read_runs(p)
    assert [r[2] for r in rows(rs.table)] == ["b", "a", "c", "a"]
    i = issue(rs, "tie-order-differs")
    assert (i["severity"], i["count"]) == ("warning", 1)  # one topic
    assert "rank-order-differs" not in set(rs.issues["rule"])


def test_rank_order_differs_and_rank_not_integer(tmp_path):
    p = write(tmp_path / "a.txt", ["1 Q0 a 2 1.0 r", "1 Q0 b 1 2.0 r", "1 Q0 c x 0.5 r", "1 Q0 d 3.5 0.1 r"])
    rs = read_runs(p)
    assert [r[2] for r in rows(rs.table)] == ["b", "a", "c", "d"]
    assert issue(rs, "rank-order-differs")["severity"] == "warning"
    i = issue(rs, "rank-not-integer")
    assert i["severity"] == "warning" and i["count"] == 2


def test_shallow_topics_warning(tmp_path):
    lines = [f"1 Q0 d{i} {i} {10 - i} r" for i in range(1, 6)] + ["2 Q0 d1 1 1.0 r", "3 Q0 d1 1 1.0 r"]
    p = write(tmp_path / "a.txt", lines)
    rs = read_runs(p, expected_depth=5)
    i = issue(rs, "shallow-topics")
    assert (i["severity"], i["count"]) == ("warning", 2)
    assert "2 of 3 topics" in i["message"]
    assert read_runs(p, expected_depth=1).issues.empty


def test_blank_and_comment_lines_warn(tmp_path):
    p = write(tmp_path / "a.txt", ["# header", ""] + RUN_A[:2] + ["   ", RUN_A[2]])
    rs = read_runs(p)
    assert issue(rs, "blank-line")["count"] == 2
    assert issue(rs, "comment-line")["count"] == 1
    assert rs.table.num_rows == 3


# ------------------------------------------------------------------ writing
def test_write_trec_run_round_trip(tmp_path):
    src = write(tmp_path / "in" / "a.txt", [
        "1 Q0 d1 0 0.1 r", "1 Q0 d2 1 0.3333333333333333 r", "1 Q0 d3 2 1e-300 r",
        "1 Q0 d4 3 -0 r", "q9 Q0 d1 1 49.19109429178723 r", "q9 Q0 d0 2 49.19109429178723 r",
    ])
    t = read_runs(src).table
    out = tmp_path / "out" / "a.run"
    write_trec_run(t, out)
    text = out.read_text().splitlines()
    assert text[0].split() == ["1", "Q0", "d2", "1", "0.3333333333333333", "r"]
    assert all(len(line.split(" ")) == 6 for line in text)
    assert [line.split()[3] for line in text] == ["1", "2", "3", "4", "1", "2"]
    back = read_runs(out)
    assert back.table.equals(t)
    assert back.issues.empty  # written in canonical order: no tie/rank warnings
    assert not list(out.parent.glob(".*tmp"))  # atomic: no temporary left behind


def test_canonicalize_matches_read_runs(tmp_path):
    t = read_runs([write(tmp_path / "a.txt", RUN_A), write(tmp_path / "b.txt", RUN_B)]).table
    shuffled = t.take(pa.array(np.random.default_rng(0).permutation(t.num_rows)))
    assert canonicalize(shuffled).equals(t)
    assert canonicalize(shuffled.drop(["rank"]).to_pandas()).equals(t)


# ------------------------------------------------------------------ real data
needs_robust = pytest.mark.skipif(
    not (ROBUST_RUNS.is_dir() and ROBUST_QRELS.is_file()),
    reason=f"real TREC 2003 Robust data not found under {ROBUST}",
)


@pytest.fixture(scope="module")
def robust():
    return read_runs(ROBUST_RUNS, lenient=True, expected_depth=1000)


def _raw_ranks(path: Path) -> tuple[int, float]:
    """(line count, smallest rank) of a raw run file, read plainly."""
    n, low = 0, float("inf")
    with gzip.open(path, "rt") as fh:
        for line in fh:
            parts = line.split()
            if parts:
                n += 1
                low = min(low, float(parts[3]))
    return n, low


@pytest.mark.slow
@needs_robust
def test_robust03_runs_load(robust):
    files = sorted(ROBUST_RUNS.iterdir())
    assert len(files) == 17
    assert len(robust.runs) == 17
    assert robust.errors().empty, robust.errors()
    assert not (robust.issues["severity"] == "error").any()
    assert set(robust.summary["status"]) <= {"ok", "warnings"}
    # every line kept, ranks recomputed 1..n
    zero_based = set()
    summary = robust.summary.set_index("run")
    for f in files:
        n, low = _raw_ranks(f)
        run = f.name.removeprefix("input.").removesuffix(".gz")
        assert summary.loc[run, "docs"] == n
        if low == 0:
            zero_based.add(run)
    assert "aplrob03a" in zero_based and len(zero_based) >= 3
    reported = set(robust.issues.loc[robust.issues["rule"] == "rank-zero-based", "run"])
    assert reported == zero_based
    shallow = robust.issues[robust.issues["rule"] == "shallow-topics"].set_index("run")
    assert "NLPR03vb10" in shallow.index
    assert shallow.loc["NLPR03vb10", "count"] == 100
    assert shallow.loc["NLPR03vb10", "severity"] == "warning"
    t = robust.table
    assert canonicalize(t).equals(t)


@pytest.mark.slow
@needs_robust
def test_robust03_ap_equals_ir_measures(robust, tmp_path):
    ir_measures = pytest.importorskip("ir_measures")
    from ir_measures import AP

    qrels = list(ir_measures.read_trec_qrels(str(ROBUST_QRELS)))
    t = robust.table
    for run in robust.runs:
        raw_file = Path(robust.files[run])
        raw = {m.query_id: m.value for m in ir_measures.iter_calc([AP], qrels, ir_measures.read_trec_run(str(raw_file)))}
        part = t.filter(pa.compute.equal(t["run"], run))
        out = tmp_path / f"{run}.run"
        write_trec_run(part, out)
        canon = {m.query_id: m.value for m in ir_measures.iter_calc([AP], qrels, ir_measures.read_trec_run(str(out)))}
        assert len(raw) == 100
        assert canon == raw, run  # exact: same ranking, same floating-point sums


def test_multi_run_parquet_from_canonicalize(tmp_path):
    from qrelkit.cli import run as cli

    for name, shift in (("a", 0), ("b", 1)):
        (tmp_path / f"{name}.run").write_text("".join(f"1 Q0 d{(i + shift) % 5} {i} {5 - i} {name}\n" for i in range(5)))
    out = tmp_path / "all.parquet"
    assert cli(["runs", "canonicalize", str(tmp_path / "a.run"), str(tmp_path / "b.run"), "-o", str(out)]) == 0
    rs = read_runs(out)
    assert rs.runs == ["a", "b"]
    assert rs.table.equals(read_runs([tmp_path / "a.run", tmp_path / "b.run"]).table)


def test_ground_floor_kernels_examples_run():
    """The examples in the docstrings of the shared kernels (io.order, io.keys, io.qrels.parse_grade)."""
    import doctest

    import qrelkit.io.keys
    import qrelkit.io.order
    import qrelkit.io.qrels

    for mod in (qrelkit.io.order, qrelkit.io.keys):
        res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert res.attempted and not res.failed, mod.__name__
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner()
    for t in finder.find(qrelkit.io.qrels.parse_grade, "parse_grade", globs={"parse_grade": qrelkit.io.qrels.parse_grade}):
        runner.run(t)
    res = runner.summarize(verbose=False)
    assert res.attempted and not res.failed, "parse_grade"


def test_block_ranks_are_block_positions_plus_one():
    from qrelkit.io.order import block_positions, block_ranks

    g = np.array([3, 3, 1, 1, 1, 3, 0])
    assert block_positions(g).tolist() == [0, 1, 0, 1, 2, 0, 0] and block_positions(g).dtype == np.int64
    assert block_ranks(g).tolist() == [1, 2, 1, 2, 3, 1, 1] and block_ranks(g).dtype == np.int32
    assert block_ranks(np.zeros(0, np.int32)).dtype == np.int32 and len(block_positions(np.zeros(0))) == 0


@pytest.mark.parametrize("column", ["qid", "docid", "score", "run"])
def test_a_parquet_run_with_a_missing_value_is_refused_at_its_row(tmp_path, column):
    """A null in a Parquet run is a missing column of that row (it crashed the reader once, and
    was then read without complaint)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from qrelkit import InputError, read_runs

    cols = {"qid": ["1", "1", "1"], "q0": ["Q0"] * 3, "docid": ["a", "b", "c"], "rank": [1, 2, 3],
            "score": [3.0, 2.0, 1.0], "run": ["r", "r", "r"]}
    cols[column] = [*cols[column][:2], None]
    f = tmp_path / "r.parquet"
    pq.write_table(pa.table(cols), f)
    with pytest.raises(InputError) as e:
        read_runs(f)
    assert e.value.rule == "missing-column" and e.value.line == 3 and column in str(e.value)
