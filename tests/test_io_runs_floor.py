"""Reading runs near the parser's floor (issue 24): what made the reader cheap is checked here,
not its speed (no timing in tests). The reader hashes no column of a file's size with Arrow (a
dictionary of every docid cost more than parsing it); duplicate docids are found through 64-bit
keys of the bytes (:mod:`qrelkit.io.strings`) and confirmed as strings, so docids that share a key
are still told apart, and the rule and its line are the same as before."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qrelkit.errors import InputError
from qrelkit.io.runs import read_runs
from qrelkit.io.strings import all_equal, string_keys


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=24), min_size=1, max_size=40),
       st.integers(0, 3))
def test_equal_strings_have_equal_keys_and_short_distinct_ones_distinct_keys(values, cut):
    arr = pa.array(values, pa.string()).slice(min(cut, len(values) - 1))  # an offset into the buffers too
    vals = values[min(cut, len(values) - 1):]
    keys = string_keys(arr).tolist()
    by_key: dict[int, set[str]] = {}
    for v, k in zip(vals, keys):
        by_key.setdefault(k, set()).add(v)
    for group in by_key.values():
        assert len(group) == 1 or all(len(v.encode()) > 16 for v in group), group
    assert string_keys(pa.array(vals, pa.string())).tolist() == keys  # the same wherever the values sit


@pytest.mark.parametrize("where", ["alone", "first", "last", "sliced"])
def test_a_value_at_either_end_of_the_bytes_keys_as_in_the_middle(where):
    """Keys are read in place from the data bytes: a value starting in the last 7 bytes, or ending
    in the first 7, has its load moved inside the buffer; its key must be the one it has amid
    other values (long neighbours on both sides)."""
    for n in range(0, 18):
        v = "".join("abcdefghijklmnopq"[i] for i in range(n))
        middle = string_keys(pa.array(["x" * 20, v, "y" * 20]))[1]
        if where == "alone":
            arr, i = pa.array([v]), 0
        elif where == "first":
            arr, i = pa.array([v, "z" * 3]), 0
        elif where == "last":
            arr, i = pa.array(["z" * 3, v]), 1
        else:  # a slice whose buffer holds bytes before and after it
            arr, i = pa.array(["w" * 30, v, "w" * 2]).slice(1, 1), 0
        assert string_keys(arr)[i] == middle, (where, n)


def test_keys_are_pinned():
    """The pool orders documents by these keys' top bits: a change of the keys would change the
    order of every pool (values computed with the code of issue 24's first reader, fb6be3f)."""
    values = ["", "d1", "D1234567", "D12345678", "msmarco_passage_01_0000052", "é"]
    want = [0, 9820028861910807848, 16420558301305147594, 2523248643938526410, 10139824614867391623,
            1979404938766729516]
    assert string_keys(pa.array(values)).tolist() == want
    assert string_keys(pa.array(values, pa.large_string())).tolist() == want
    chunked = pa.chunked_array([pa.array(values[:3]), pa.array(values[3:])])
    assert string_keys(chunked).tolist() == want
    with_nulls = pa.array(["x" * 20, None, "d1", None, ""])  # a null keys as the empty string
    assert string_keys(with_nulls).tolist()[1:] == [0, want[1], 0, 0]
    assert string_keys(pa.array(["x" * 20, ""])).tolist()[1] == 0  # an empty value at the end of the bytes


def test_keys_of_look_alike_ids_differ_even_in_their_top_bits():
    """Ids that differ in one byte (of 8, of 9 to 16 bytes, or in the last 8 of longer ones) get
    keys whose top 40 bits differ: callers keep the top bits only (the pool does)."""
    ids = [f"doc-{i}" for i in range(1000)] + [f"D{i:07d}" for i in range(1000)] + [f"d{i:07d}x" for i in range(1000)]
    ids += [f"clueweb09-en0000-00-{i:05d}" for i in range(1000)] + [f"LA0101{i:02d}-0{i % 97:03d}" for i in range(100)]
    keys = string_keys(pa.array(ids))
    assert len(set((keys >> 24).tolist())) == len(ids)


def test_all_equal_compares_every_byte():
    assert all_equal(pa.chunked_array([pa.array(["run1"] * 3)]), "run1")
    assert not all_equal(pa.array(["run1", "run1", "run2"]), "run1")
    assert not all_equal(pa.array(["run1", "run11"]), "run1")
    assert not all_equal(pa.array(["run1", None]), "run1")
    assert all_equal(pa.array(["run1", "run1", "x"]).slice(0, 2), "run1")


# docids of one length whose first and last 8 bytes agree: they share a key, and are different
TWINS = ["msmarco_passage_01_0000052", "msmarco_passage_02_0000052", "msmarco_passage_03_0000052"]


def test_docids_sharing_a_key_are_not_duplicates(tmp_path):
    assert len(set(string_keys(pa.array(TWINS)).tolist())) == 1
    lines = [f"7 Q0 {d} {i + 1} {9 - i}.0 r" for i, d in enumerate(TWINS)]
    rs = read_runs(write(tmp_path / "r.txt", lines))
    assert sorted(rs.table["docid"].to_pylist()) == TWINS
    assert rs.issues.empty


def test_a_duplicate_among_docids_sharing_a_key_is_found_at_its_line(tmp_path):
    lines = [f"7 Q0 {d} {i + 1} {9 - i}.0 r" for i, d in enumerate(TWINS)]
    lines += ["8 Q0 " + TWINS[1] + " 1 5.0 r", "7 Q0 " + TWINS[1] + " 4 1.0 r", "7 Q0 " + TWINS[0] + " 5 0.5 r"]
    path = write(tmp_path / "r.txt", lines)
    with pytest.raises(InputError) as info:
        read_runs(path)
    assert (info.value.rule, info.value.line) == ("duplicate-docid", 5)
    rs = read_runs(path, lenient=True)
    hit = rs.issues[rs.issues["rule"] == "duplicate-docid"].iloc[0]
    assert (hit["count"], hit["line"]) == (2, 5)
    assert rs.table.num_rows == 4  # the first retrieval of each kept; topic 8's is no duplicate


def test_a_dropped_line_makes_no_later_one_a_duplicate(tmp_path):
    lines = ["7 Q0 d1 1 nan r", "7 Q0 d1 2 3.0 r", "7 Q0 d2 3 2.0 r"]
    rs = read_runs(write(tmp_path / "r.txt", lines), lenient=True)
    assert set(rs.issues["rule"]) == {"score-not-finite"}
    assert rs.table["docid"].to_pylist() == ["d1", "d2"]


def test_the_reader_hashes_no_whole_column_with_arrow(tmp_path, monkeypatch):
    """Arrow's hash kernels (a dictionary, unique values, value counts) are used on a file's topic
    heads only, never on a column of every line: that was most of the reader's cost."""
    n_topics, depth = 30, 40
    lines = [f"{q} Q0 doc{q}_{d} {d + 1} {100 - d}.5 run" for q in range(n_topics) for d in range(depth)]
    path = write(tmp_path / "r.txt", lines)
    sizes: list[int] = []
    for name in ("dictionary_encode", "unique", "value_counts"):
        real = getattr(pc, name)

        def spy(values, *a, _real=real, **k):
            sizes.append(len(values))
            return _real(values, *a, **k)

        monkeypatch.setattr(pc, name, spy)
    rs = read_runs([path, write(tmp_path / "s.txt", [ln.replace(" run", " other") for ln in lines])])
    assert rs.table.num_rows == 2 * n_topics * depth and rs.issues.empty
    assert max(sizes, default=0) <= n_topics
