"""The corpus is validated completely at ``campaign init``, in one streaming pass
(:func:`qrelkit.io.corpus.check_corpus`): every reader rule, duplicate ids, ids TREC's
whitespace-separated formats can carry, the first defect in file order named by its line, and the
SHA-256 of the file computed from the same reads. Valid corpora come out as the readers read them.
"""

from __future__ import annotations

import builtins
import gzip
import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from qrelkit.errors import InputError
from qrelkit.io.corpus import bad_id_row, check_corpus, count_passages, iter_corpus, line_chunks, reused_line_chunks

# ids: printable, without whitespace, some of them beyond ASCII
ID = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Z", "Co", "Cn")), min_size=1, max_size=12)
# texts: anything a TSV field can hold (no tab, no line break: pyarrow's CSV reader breaks at \r too;
# no NUL: a NUL byte is not text), and anything at all in JSON
TSV_TEXT = st.text(st.characters(blacklist_characters="\t\n\r\x00", blacklist_categories=("Cs",)), max_size=30)
JSON_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@st.composite
def corpora(draw):
    """(format, rows of (pid, text, docid or None), gzip?, last line without its line break?, chunk bytes)."""
    fmt = draw(st.sampled_from(["jsonl", "tsv"]))
    pids = draw(st.lists(ID, min_size=1, max_size=25, unique=True))
    docs = draw(st.booleans())
    text = TSV_TEXT if fmt == "tsv" else JSON_TEXT
    rows = [(p, draw(text), draw(ID) if docs else None) for p in pids]
    return fmt, rows, draw(st.booleans()), draw(st.booleans()), draw(st.sampled_from([16, 64, 32 << 20]))


def _line(fmt: str, pid: str, text: str, docid: str | None, ascii_json: bool = False) -> bytes:
    if fmt == "tsv":
        return "\t".join([pid, text] + ([docid] if docid is not None else [])).encode()
    obj = {"pid": pid, "text": text, **({"docid": docid} if docid is not None else {})}
    return json.dumps(obj, ensure_ascii=ascii_json).encode()


def _write(tmp: Path, fmt: str, lines: list[bytes], gz: bool, no_last_break: bool) -> Path:
    data = b"\n".join(lines) + (b"" if no_last_break else b"\n")
    path = tmp / (f"corpus.{fmt}" + (".gz" if gz else ""))
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpora())
def test_valid_corpus_counts_and_fingerprint(tmp_path, corpus):
    fmt, rows, gz, no_break, chunk = corpus
    path = _write(tmp_path, fmt, [_line(fmt, *r) for r in rows], gz, no_break)
    c = check_corpus(path, chunk_bytes=chunk)
    assert c.passages == count_passages(path) == len(rows)
    assert c.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert c.size == path.stat().st_size and c.mtime_ns == path.stat().st_mtime_ns
    assert c.documents == (rows[0][2] is not None)
    read = pa.concat_tables(list(iter_corpus(path, chunk_bytes=chunk)))  # every chunk held to the end
    assert read["pid"].to_pylist() == [r[0] for r in rows]
    assert read["text"].to_pylist() == [r[1] for r in rows]
    assert read["docid"].to_pylist() == [r[2] for r in rows]


@pytest.mark.parametrize("fmt", ["jsonl", "tsv"])
@pytest.mark.parametrize("gz", [False, True])
def test_chunks_read_through_one_buffer_own_their_rows(tmp_path, fmt, gz):
    """The text readers read a file through one buffer, overwritten chunk after chunk: every
    chunk's rows are held until the end, and they are the rows a single chunk gives (lines of every
    length, one longer than a chunk)."""
    rows = [(f"p{i}", ("w%d " % i) * (1 + (i * 37) % 90), f"d{i % 7}") for i in range(3000)]
    rows[1500] = ("long", "x " * 5000, "d0")  # longer than a chunk: it waits for its end
    path = _write(tmp_path, fmt, [_line(fmt, *r) for r in rows], gz, False)
    whole = pa.concat_tables(list(iter_corpus(path, chunk_bytes=64 << 20)))
    chunks = list(iter_corpus(path, chunk_bytes=4096))
    assert len(chunks) > 50
    assert pa.concat_tables(chunks).equals(whole)
    assert whole["text"].to_pylist() == [r[1] for r in rows]


@pytest.mark.parametrize("gz", [False, True])
def test_a_chunk_still_viewed_is_not_written_over(tmp_path, gz):
    """A reused chunk that something still views (a reader that let go of it late) is left alone:
    the next chunk is read into a new buffer. Copied chunks and reused ones are the same bytes."""
    data = b"".join(b"line %d %s\n" % (i, b"x" * (i % 300)) for i in range(5000)) + b"last, no break"
    p = tmp_path / ("c.txt.gz" if gz else "c.txt")
    p.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    views = [(off, memoryview(chunk)) for off, _, chunk in reused_line_chunks(p, 1000)]
    assert b"".join(bytes(v) for _, v in views) == data + b"\n"
    copies = [(off, chunk) for off, _, chunk in line_chunks(p, 1000)]
    assert [(off, bytes(v)) for off, v in views] == copies
    assert all(type(c) is bytes for _, c in copies)


def test_one_buffer_serves_every_chunk_and_a_small_file_stays_small(tmp_path, monkeypatch):
    """Reused chunks are one object (nothing views it between reads), and a small file is read
    into memory as large as what it holds: the buffer is never sized to a whole block (32 MB) for
    it (a buffer made at the block's size took 24k page faults a read of a one-line file)."""
    import qrelkit.io.corpus as corpus

    p = tmp_path / "c.jsonl"
    p.write_bytes(b"".join(b'{"pid": "p%d", "text": "t %d"}\n' % (i, i) for i in range(2000)))
    chunks = [chunk for _, _, chunk in reused_line_chunks(p, 4096)]
    assert len(chunks) > 5 and all(c is chunks[0] for c in chunks)
    sized = []
    room = corpus._room
    monkeypatch.setattr(corpus, "_room", lambda buf, n: sized.append(n) or room(buf, n))
    small = tmp_path / "s.jsonl"
    small.write_bytes(b'{"pid": "p1", "text": "one"}\n')
    assert sum(t.num_rows for t in iter_corpus(small)) == 1
    assert not sized  # no read into a kept buffer: one read as large as the file, then its end
    list(reused_line_chunks(p, 4096))
    assert sized and max(sized) < 2 * 4096  # a large file: the kept buffer, a block and a line


DEFECTS = ["not-utf8", "bad-json", "space-id", "tab-id", "empty-id", "duplicate-id", "no-text", "docid-space"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpora(), st.sampled_from(DEFECTS), st.data())
def test_one_defect_is_named_at_its_line(tmp_path, corpus, defect, data):
    fmt, rows, gz, no_break, chunk = corpus
    assume(not (fmt == "tsv" and defect in ("bad-json", "no-text", "tab-id")))  # a tab in a TSV id is a column
    assume(defect != "duplicate-id" or len(rows) > 1)
    assume(defect != "docid-space" or rows[0][2] is not None)
    i = data.draw(st.integers(1 if defect == "duplicate-id" else 0, len(rows) - 1))
    lines = [_line(fmt, *r) for r in rows]
    pid, text, docid = rows[i]
    rule = {"space-id": "bad-id", "tab-id": "bad-id", "empty-id": "bad-id", "docid-space": "bad-id",
            "no-text": "missing-value"}.get(defect, defect)
    if defect == "not-utf8":
        lines[i] = lines[i][:1] + b"\xff" + lines[i][1:]
    elif defect == "bad-json":
        lines[i] = lines[i][:-1]
    elif defect in ("space-id", "tab-id", "empty-id"):
        bad = {"space-id": pid[:1] + " " + pid[1:], "tab-id": "\t" + pid, "empty-id": ""}[defect]
        lines[i] = _line(fmt, bad, text, docid, ascii_json=True)
    elif defect == "duplicate-id":
        lines[i] = _line(fmt, rows[data.draw(st.integers(0, i - 1))][0], text, docid)
    elif defect == "docid-space":
        lines[i] = _line(fmt, pid, text, docid + " x")
    else:  # no text field on this line
        lines[i] = json.dumps({"pid": pid}).encode()
    path = _write(tmp_path, fmt, lines, gz, no_break)
    with pytest.raises(InputError) as info:
        check_corpus(path, chunk_bytes=chunk)
    err = info.value
    # a chunk of lines none of which has a text field is missing-column (a corpus without text)
    assert err.rule == rule or (defect == "no-text" and err.rule == "missing-column"), str(err)
    assert err.line == i + 1, str(err)
    assert err.file == str(path)
    if rule not in ("duplicate-id",):
        with pytest.raises(InputError) as again:  # every reader: the same rule at the same line
            list(iter_corpus(path, chunk_bytes=chunk))
        assert (again.value.rule, again.value.line) == (err.rule, err.line)


@pytest.mark.parametrize("chunk", [24, 32 << 20])
def test_first_defect_in_file_order(tmp_path, chunk):
    """Two defects: the one on the earlier line is reported, whatever its kind and chunk."""
    ok = [json.dumps({"pid": f"p{i}", "text": f"t{i}"}).encode() for i in range(8)]

    def check(lines):
        p = tmp_path / "c.jsonl"
        p.write_bytes(b"\n".join(lines) + b"\n")
        with pytest.raises(InputError) as info:
            check_corpus(p, chunk_bytes=chunk)
        return info.value.rule, info.value.line

    dup_then_json = ok[:3] + [b'{"pid": "p1", "text": "again"}', ok[4], b'{"pid": "p5", "text": '] + ok[6:]
    assert check(dup_then_json) == ("duplicate-id", 4)
    id_then_json = ok[:2] + [b'{"pid": "p 2", "text": "x"}', ok[3], b"{"] + ok[5:]
    assert check(id_then_json) == ("bad-id", 3)
    json_then_id = ok[:2] + [b"{", ok[3], b'{"pid": "p 4", "text": "x"}'] + ok[5:]
    assert check(json_then_id) == ("bad-json", 3)
    text_then_id = ok[:2] + [b'{"pid": "p2"}', b'{"pid": "", "text": "x"}'] + ok[4:]
    assert check(text_then_id) == ("missing-value", 3)


def test_parquet_corpus(tmp_path):
    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"pid": ["a", "b", "c"], "text": ["x", "y", "z"]}), p)
    c = check_corpus(p)
    assert (c.passages, c.format, c.documents) == (3, "parquet", False)
    assert c.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
    pq.write_table(pa.table({"pid": ["a", "b", "a"], "text": ["x", "y", "z"]}), p)
    with pytest.raises(InputError, match=r"\[duplicate-id\] passage id 'a' already on row 1 \(this is row 3\)"):
        check_corpus(p)
    pq.write_table(pa.table({"pid": ["a", "b c"], "text": ["x", "y"]}), p)
    with pytest.raises(InputError, match=r"\[bad-id\] passage id 'b c'"):
        check_corpus(p)


def test_bad_id_row():
    assert bad_id_row(pa.array(["a", "b", "c"])) is None
    assert bad_id_row(pa.chunked_array([["a", "b"], ["c", "d\u3000e"]])) == 3
    assert bad_id_row(pa.array(["a", None, "", "x"])) == 2  # nulls are not looked at
    assert bad_id_row(pa.array(["caf\u00e9", "\u65e5\u672c", "x\u200by"])) is None  # letters and format characters
    assert bad_id_row(pa.array(["ok", "a\x85b"])) == 1  # C1 control (NEL)


def test_init_reads_the_corpus_once(tmp_path, monkeypatch):
    """campaign init opens the corpus once (the check and its SHA-256 in one pass: no count, then
    hash) and records what that pass computed."""
    from qrelkit.campaign import Campaign
    from qrelkit.store import CampaignStore, campaign_path
    from qrelkit.simulate.campaign import simulate_campaign

    sim = tmp_path / "sim"
    simulate_campaign(sim, n_passages=300, n_topics=2, n_groups=2, seed=3)
    corpus = (sim / "corpus.jsonl").resolve()
    opened = []
    real_open = builtins.open

    def spy(file, *a, **k):
        if isinstance(file, (str, Path)) and Path(file).resolve() == corpus:
            opened.append(file)
        return real_open(file, *a, **k)

    monkeypatch.setattr(builtins, "open", spy)
    Campaign.init(tmp_path / "camp", config=None, corpus=corpus, topics=sim / "topics.tsv", runs=sim / "runs",
                  manifest=sim / "manifest.csv")
    monkeypatch.undo()
    assert len(opened) == 1, opened
    store = CampaignStore(campaign_path(tmp_path / "camp"))
    try:
        rec = store.state.inputs().query("name == 'corpus'").values.tolist()
    finally:
        store.close()
    st_ = corpus.stat()
    assert rec == [["corpus", str(corpus), st_.st_size, st_.st_mtime_ns, hashlib.sha256(corpus.read_bytes()).hexdigest()]]


@pytest.mark.parametrize("break_", [b"", b"\n"])
def test_a_last_line_of_only_a_tab_is_an_empty_id_with_or_without_its_break(tmp_path, break_):
    """Found by hypothesis: a TSV corpus whose last line is a lone tab (an empty id, an empty
    text) was skipped as blank when the file did not end with a line break."""
    path = tmp_path / "corpus.tsv"
    path.write_bytes(b"\t" + break_)
    with pytest.raises(InputError) as info:
        check_corpus(path)
    assert info.value.rule == "bad-id" and info.value.line == 1
