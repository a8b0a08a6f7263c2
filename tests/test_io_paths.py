"""qrelkit.io.paths.check_io: the library check every command makes before its work."""

from __future__ import annotations

import os
import sqlite3

import pytest

from qrelkit.errors import InputError
from qrelkit.io.paths import check_io, check_writable, is_sqlite_file, same_file


def _rule(**kw) -> str:
    with pytest.raises(InputError) as e:
        check_io(**kw)
    return e.value.rule


def test_output_is_input_by_path_symlink_hardlink_and_folder(tmp_path):
    src = tmp_path / "corpus.jsonl"
    src.write_text("{}\n")
    link, hard = tmp_path / "link.jsonl", tmp_path / "hard.jsonl"
    link.symlink_to(src)
    os.link(src, hard)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "alias").symlink_to(tmp_path)  # a folder symlink: the real path is compared
    for out in (src, link, hard, tmp_path / "sub" / "alias" / "corpus.jsonl"):
        assert _rule(inputs=[src], outputs=[out]) == "output-is-input", out
    assert same_file(hard, src) and same_file(link, src)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "a.run").write_text("1 Q0 d 1 1 a\n")
    assert _rule(inputs=[runs], outputs=[runs / "pool.parquet"]) == "output-is-input"  # would be read as a run
    assert _rule(inputs=[runs / "a.run"], folders=[runs]) == "output-is-input"  # a folder written holds an input
    assert _rule(inputs=[src], stores=[tmp_path / "s.db"], outputs=[tmp_path / "s.db"]) == "output-is-input"
    check_io(inputs=[src, [runs], None], outputs=[tmp_path / "out" / "x.parquet", None], folders=[tmp_path / "rep"])


def test_store_is_never_an_output_and_two_outputs_differ(tmp_path):
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE t (x)")
    assert is_sqlite_file(db)
    assert _rule(outputs=[db]) == "output-is-store"
    assert _rule(outputs=[tmp_path / "a.txt", tmp_path / "a.txt"]) == "duplicate-output"


def test_unwritable_outputs(tmp_path):
    assert _rule(outputs=["/sys/qrelkit-probe.parquet"]) == "unwritable-output"
    f = tmp_path / "file"
    f.write_text("x")
    assert _rule(outputs=[f / "deeper" / "x.csv"]) == "unwritable-output"
    assert _rule(outputs=[tmp_path]) == "unwritable-output"  # a folder where a file goes
    assert _rule(folders=[f]) == "unwritable-output"  # a file where a folder goes
    check_writable(tmp_path / "new" / "deeper" / "x.csv")  # missing folders are created later
    assert not (tmp_path / "new").exists()  # ... not by the check
    assert list(tmp_path.iterdir()) == [f]  # the probe file is gone


def test_missing_inputs(tmp_path):
    assert _rule(inputs=[tmp_path / "nope.tsv"]) == "unreadable"
    assert _rule(read_stores=[tmp_path / "nope.db"]) == "not-a-store"
