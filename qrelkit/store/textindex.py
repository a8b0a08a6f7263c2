"""A passage text index: the texts of some passages of a corpus without scanning the corpus.

:func:`lookup_texts` streams the whole corpus for every lookup — fine once, not for every page an
assessor opens on a corpus of a million passages. A :class:`TextIndex` is built once from the
corpus (one pass) into a SQLite file and answers a lookup of a few hundred passages in
milliseconds:

* an uncompressed JSONL or TSV corpus: the index holds each passage's byte offset and length in
  the corpus file (``offsets``); a lookup reads those lines (``pread``) and parses them with the
  corpus readers (:func:`~qrelkit.io.corpus.jsonl_chunk`, :func:`~qrelkit.io.corpus.tsv_chunk`),
  so a text comes out exactly as :func:`~qrelkit.io.corpus.iter_corpus` gives it;
* a gzipped text corpus or a Parquet corpus (no byte offsets to seek to), or a folder of shards
  or an ir_datasets dataset without random access of its own: the index holds the texts
  themselves (``texts``);
* a source with random access of its own (:attr:`qrelkit.io.sources.CorpusSource.random_access`:
  plain MS MARCO v2 shards, whose ids are byte offsets; ir_datasets' docs store): no index at
  all, :func:`open_text_index` gives a :class:`SourceTexts` that asks the source.

The index records the corpus it was built from (absolute path, size, modification time, and the
SHA-256 given by the caller — a campaign passes the one it recorded at init): :func:`open_text_index`
rebuilds it when it is missing, unreadable, of another format, or recorded for another corpus or
hash. A build writes a temporary file and renames it; builds of one index in one process wait for
each other. The first passage of an id wins, as in :func:`lookup_texts`. The disk's errors while
building or reading are one line (``[disk-full]``, ``[store-io-error]``: :func:`~qrelkit.store.sqlite.io_error`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from qrelkit.errors import InputError
from qrelkit.io.corpus import corpus_format, jsonl_chunk, line_chunks, tsv_chunk
from qrelkit.io.sources import CorpusSource, open_corpus
from qrelkit.io.text import is_gzip
from qrelkit.store.sqlite import connect

INDEX_FORMAT = "qrelkit-text-index-1"
_BATCH = 900  # SQLite parameters per lookup query
_BUILD_LOCKS: dict[str, threading.Lock] = {}
_BUILD_LOCKS_LOCK = threading.Lock()


def index_mode(corpus: str | os.PathLike) -> str:
    """``offsets`` for an uncompressed JSONL or TSV corpus, ``texts`` otherwise (gzip, Parquet)."""
    p = Path(corpus)
    return "texts" if corpus_format(p) == "parquet" or is_gzip(p) else "offsets"


def _offset_rows(path: Path, fmt: str) -> Iterator[list[tuple[str, int, int]]]:
    """(pid, offset, length) of every passage line of an uncompressed text corpus, chunk by chunk;
    raises ``_Mismatch`` when the parsed rows do not match the non-blank lines one to one."""
    parse = jsonl_chunk if fmt == "jsonl" else tsv_chunk
    for offset, first_line, chunk in line_chunks(path, 32 << 20):
        buf = np.frombuffer(chunk, np.uint8)
        ends = np.flatnonzero(buf == 10)
        starts = np.concatenate(([0], ends[:-1] + 1))
        lines = chunk.split(b"\n")[: len(ends)]
        keep = [i for i, ln in enumerate(lines) if (ln.strip() if fmt == "jsonl" else ln not in (b"", b"\r"))]
        pids = parse(chunk, path, first_line)["pid"].to_pylist()
        if len(pids) != len(keep):
            raise _Mismatch()
        yield [(pid, offset + int(starts[i]), int(ends[i] - starts[i])) for pid, i in zip(pids, keep)]


class _Mismatch(Exception):
    """Parsed rows and lines of a text corpus do not pair up: index the texts instead."""


def _stamp(source: CorpusSource) -> tuple[str, int, int]:
    """(spec, bytes, latest modification time) of a source's files, as an index records them."""
    sts = [f.stat() for f in source.files()]
    return source.spec, sum(st.st_size for st in sts), max((st.st_mtime_ns for st in sts), default=0)


def build_text_index(corpus: "str | os.PathLike | CorpusSource", path: str | os.PathLike, *, sha256: str = "") -> Path:
    """Build the text index of ``corpus`` (a corpus source, :func:`~qrelkit.io.sources.open_corpus`)
    at ``path`` (a temporary file renamed at the end) and return ``path``. ``sha256``: the corpus
    fingerprint to record (checked by :func:`open_text_index`)."""
    source, out = open_corpus(corpus), Path(path)
    src = Path(source.spec)
    if source.kind == "file" and not src.is_file():
        raise InputError("unreadable", "no such file", file=str(src))
    mode = index_mode(src) if source.kind == "file" else "texts"
    spec, size, mtime = _stamp(source)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}.{threading.get_ident()}")
    tmp.unlink(missing_ok=True)
    db = connect(tmp, isolation_level=None)
    db.store_path = str(out)  # the disk's errors name the index, not its temporary file
    try:
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("PRAGMA synchronous = OFF")
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("BEGIN")
        if mode == "offsets":
            try:
                _fill_offsets(db, src)
            except _Mismatch:
                db.execute("ROLLBACK")
                db.execute("DROP TABLE IF EXISTS passages")
                db.execute("BEGIN")
                mode = "texts"
        if mode == "texts":
            _fill_texts(db, source)
        n = db.execute("SELECT COUNT(*) FROM passages").fetchone()[0]
        db.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("format", INDEX_FORMAT), ("mode", mode), ("corpus", spec), ("size", str(size)),
            ("mtime_ns", str(mtime)), ("sha256", sha256), ("passages", str(n))])
        db.execute("COMMIT")
    except BaseException:
        db.close()
        tmp.unlink(missing_ok=True)
        raise
    db.close()
    os.replace(tmp, out)
    return out


def _fill_offsets(db: sqlite3.Connection, src: Path) -> None:
    db.execute("CREATE TABLE passages (pid TEXT PRIMARY KEY, off INTEGER NOT NULL, len INTEGER NOT NULL) WITHOUT ROWID")
    for rows in _offset_rows(src, corpus_format(src)):
        db.executemany("INSERT OR IGNORE INTO passages VALUES (?, ?, ?)", rows)


def _fill_texts(db: sqlite3.Connection, source: CorpusSource) -> None:
    db.execute("CREATE TABLE passages (pid TEXT PRIMARY KEY, text TEXT NOT NULL, docid TEXT) WITHOUT ROWID")
    for t in source.chunks():
        db.executemany("INSERT OR IGNORE INTO passages VALUES (?, ?, ?)",
                       zip(t["pid"].to_pylist(), t["text"].to_pylist(), t["docid"].to_pylist()))


class TextIndex:
    """An open text index (see the module documentation): :meth:`texts` looks passages up.
    Usable from several threads (one connection, a lock)."""

    def __init__(self, path: str | os.PathLike, corpus: str | os.PathLike) -> None:
        self.path, self.corpus = Path(path), Path(corpus).absolute()
        self._db = connect(self.path, readonly=True, check_same_thread=False)
        self._lock = threading.Lock()
        try:
            self.meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise InputError("not-a-store", f"not a text index: {exc}", file=str(self.path)) from None
        self.mode = self.meta.get("mode")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def texts(self, pids: Iterable[str]) -> dict[str, tuple[str, str | None]]:
        """``pid -> (text, docid)`` of the wanted passages the corpus has (as :func:`lookup_texts`)."""
        want = sorted({str(p) for p in pids})
        rows: list[tuple] = []
        with self._lock:
            for i in range(0, len(want), _BATCH):
                part = want[i:i + _BATCH]
                cols = "pid, off, len" if self.mode == "offsets" else "pid, text, docid"
                rows += self._db.execute(f"SELECT {cols} FROM passages WHERE pid IN ({', '.join('?' * len(part))})",
                                         part).fetchall()
        if self.mode != "offsets":
            return {p: (t, d) for p, t, d in rows}
        return self._read_lines(sorted(rows, key=lambda r: r[1]))

    def _read_lines(self, rows: list[tuple[str, int, int]]) -> dict[str, tuple[str, str | None]]:
        if not rows:
            return {}
        fd = os.open(self.corpus, os.O_RDONLY)
        try:
            lines = [os.pread(fd, n, off) for _, off, n in rows]
        finally:
            os.close(fd)
        parse = jsonl_chunk if corpus_format(self.corpus) == "jsonl" else tsv_chunk
        t = parse(b"\n".join(lines) + b"\n", self.corpus, 1)
        out = {}
        for (pid, _, _), got, text, docid in zip(rows, t["pid"].to_pylist(), t["text"].to_pylist(), t["docid"].to_pylist()):
            if got != pid:  # the corpus changed under its index
                raise InputError("input-changed", f"the text index {self.path.name} does not match the corpus "
                                 f"(passage {pid} moved); it is rebuilt when opened again", file=str(self.corpus))
            out[pid] = (text, docid)
        return out


def _build_lock(path: Path) -> threading.Lock:
    with _BUILD_LOCKS_LOCK:
        return _BUILD_LOCKS.setdefault(str(path.resolve()), threading.Lock())


class SourceTexts:
    """Passage texts asked of a source with random access of its own (no index): the interface
    of :class:`TextIndex`."""

    mode = "source"

    def __init__(self, source: CorpusSource) -> None:
        self.source, self.corpus = source, source.spec
        self._lock = threading.Lock()

    def close(self) -> None:
        pass

    def texts(self, pids: Iterable[str]) -> dict[str, tuple[str, str | None]]:
        """``pid -> (text, docid)`` of the wanted passages the corpus has."""
        with self._lock:
            return self.source.lookup({str(p) for p in pids})


def _current(path: Path, source: CorpusSource, sha256: str) -> bool:
    """Whether the index at ``path`` was built by this format from this corpus (path, size,
    modification time, and hash when given)."""
    if not path.is_file():
        return False
    with contextlib.suppress(sqlite3.DatabaseError, InputError, OSError):
        idx = TextIndex(path, source.spec)
        try:
            m = idx.meta
            spec, size, mtime = _stamp(source)
            return (m.get("format") == INDEX_FORMAT and m.get("corpus") == spec and
                    m.get("size") == str(size) and m.get("mtime_ns") == str(mtime) and
                    (not sha256 or m.get("sha256") == sha256))
        finally:
            idx.close()
    return False


def open_text_index(corpus: "str | os.PathLike | CorpusSource", path: str | os.PathLike, *,
                    sha256: str = "") -> TextIndex | SourceTexts:
    """The text index of ``corpus`` (a corpus source) at ``path``, built first when it is missing
    or not this corpus's; the source itself when it has random access (see the module
    documentation). An ``irds:`` dataset whose fields map otherwise than by default is given as
    its source (:func:`~qrelkit.io.sources.open_corpus` with ``params``).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from qrelkit.simulate.toy import toy_file
    >>> corpus = toy_file("corpus.jsonl", '{"pid": "p1", "text": "one"}\\n\\n{"pid": "p2", "text": "two"}\\n')
    >>> idx = open_text_index(corpus, Path(tempfile.mkdtemp(), "texts.sqlite"))
    >>> idx.mode, idx.texts(["p2", "p9"])
    ('offsets', {'p2': ('two', None)})
    >>> idx.close()
    """
    p, source = Path(path), open_corpus(corpus)  # a path resolved by its source
    if source.kind != "file" and source.random_access:
        return SourceTexts(source)
    with _build_lock(p):
        if not _current(p, source, sha256):
            build_text_index(source, p, sha256=sha256)
        return TextIndex(p, source.spec)

