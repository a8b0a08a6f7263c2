"""Passage corpora, read in a streaming way (chunks of rows), so that any size works.

Formats (chosen by the file name; ``.gz`` allowed for text formats):

* JSONL: MS MARCO v2 ``{"pid", "passage", "docid"}``, or ``{"id"|"_id"|"doc_id", "text"}``;
  a ``title`` key is prepended to the text when present;
* TSV: ``pid<TAB>text`` with an optional third column ``docid``, no header;
* Parquet: columns ``pid`` (or ``id``), ``text`` (or ``passage``), optional ``docid``.

Every chunk is a pyarrow table ``pid: string, text: string, docid: string`` (``docid`` null when
the corpus has no document field).
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import gzip
import hashlib
import json
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from qrelkit.errors import InputError, printable, quoted
from qrelkit.io.text import check_utf8

CORPUS_SCHEMA = pa.schema([("pid", pa.string()), ("text", pa.string()), ("docid", pa.string())])
ID_KEYS = ("pid", "id", "_id", "doc_id", "docid", "segment_id")
TEXT_KEYS = ("passage", "text", "contents", "body", "segment")
DOC_KEYS = ("docid", "doc_id", "document_id")


#: what a reader skips as a blank line: pyarrow's JSON reader (JSON whitespace) and CSV reader
BLANK_JSON = b" \t\r"
BLANK_TSV = b"\r"
# an id character TREC's whitespace-separated files cannot carry: a control character (C0, C1:
# tab, newline, escape, ...) or a Unicode separator (space, no-break space, line separator, ...)
_BAD_ID_CHARS = r"[\p{Cc}\p{Z}]"


def open_bytes(path: Path):
    """A binary file object reading ``path``, gunzipped when the file starts with gzip's magic bytes
    (whatever its name)."""
    fh = open(path, "rb")
    if fh.read(2) == b"\x1f\x8b":
        fh.seek(0)
        return gzip.open(fh, "rb")
    fh.seek(0)
    return fh


def blocks(fh, size: int, path: str | os.PathLike) -> Iterator[bytes]:
    """``fh.read(size)`` until the end of the binary stream ``fh`` (of the file ``path``); a damaged
    or truncated gzip stream is ``bad-gzip``."""
    while block := _read_some(fh, size, path):
        yield block


def _read_some(fh, into: int | memoryview, path: str | os.PathLike, line: int | None = None) -> bytes | int:
    """``fh.read(into)`` (a size) or ``fh.readinto(into)`` (a view); a damaged or truncated gzip
    stream is ``bad-gzip`` (at ``line`` when given: the first line not read whole)."""
    try:
        return fh.read(into) if isinstance(into, int) else fh.readinto(into)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        where = " (read up to here, no further)" if line is not None else ""
        raise InputError("bad-gzip", f"cannot decompress: {printable(exc, 120)}{where}", file=str(path),
                         line=line) from None


def _counted_chunks(fh, size: int, path: Path) -> Iterator[tuple[int, int, bytes, int]]:
    """:func:`chunks_of` with the number of lines of each chunk (each byte copied once)."""
    offset, line = 0, 1
    rest = b""
    while block := _read_some(fh, size, path, line):
        cut = block.rfind(b"\n")
        if cut < 0:
            rest += block
            continue
        chunk = b"".join((rest, memoryview(block)[: cut + 1])) if rest else block[: cut + 1]
        rest = block[cut + 1 :]
        lines = chunk.count(b"\n")
        yield offset, line, chunk, lines
        offset += len(chunk)
        line += lines
    if rest:  # the last line without its break: as it would be with one (a TSV line "\t" is no blank)
        yield offset, line, rest + b"\n", 1


def _room(buf: bytearray, n: int) -> bytearray:
    """``buf`` at length ``n`` (cut, or grown with zeros), or a new buffer of that length when
    ``buf`` cannot be resized: something still holds a view of it (seen once, in a Dask feature
    build; the holder was not found), and the next read must not write under it."""
    try:
        buf.append(0)  # a resize: refused while a view of the buffer is held
    except BufferError:
        return bytearray(n)
    if len(buf) > n:
        del buf[n:]
    else:
        buf.extend(bytes(n - len(buf)))
    return buf


def _reused_chunks(fh, size: int, path: Path) -> Iterator[tuple[int, int, bytes | bytearray, int]]:
    """:func:`_counted_chunks` through a buffer kept from chunk to chunk: each chunk is that
    ``bytearray``, overwritten when the next one is asked for (for a caller done with a chunk by
    then; the last line without its break comes as ``bytes``). Fresh memory costs a page fault per
    4 KiB: reading every block into fresh memory, then copying the chunk out, was a third of a
    clustering's page faults at 4M passages. The first read, and the one after a short read (for a
    file or a gzip stream, its end), go to fresh memory as large as what they read, so a small file
    stays small; a new buffer also comes when the kept one is still viewed (:func:`_room`)."""
    offset, line = 0, 1
    buf, rest, full = bytearray(), b"", False
    while True:
        if full:  # the last read filled its room: read into the buffer again
            buf = _room(buf, len(rest) + size)
            buf[: len(rest)] = rest
            with memoryview(buf) as view:
                got = _read_some(fh, view[len(rest):], path, line)
            del buf[len(rest) + got:]
        else:
            block = _read_some(fh, size, path, line)
            buf, got = bytearray(rest), len(block)
            buf += block
        full = got == size
        if not got:
            break
        cut = buf.rfind(b"\n", len(rest))
        with memoryview(buf) as view:
            rest = bytes(view[cut + 1:])
        if cut < 0:  # no line ends in this block
            continue
        del buf[cut + 1:]  # no view of it is held: the allocation stays (CPython only shrinks below half)
        lines = buf.count(b"\n")
        yield offset, line, buf, lines
        offset += cut + 1
        line += lines
    if rest:  # the last line without its break: as it would be with one (a TSV line "\t" is no blank)
        yield offset, line, rest + b"\n", 1


def chunks_of(fh, size: int, path: Path) -> Iterator[tuple[int, int, bytes]]:
    """Yield (byte offset, first line number, bytes) chunks of the binary stream ``fh`` (of the file
    ``path``) that end at line boundaries; the last one gets its missing line break."""
    for offset, line, chunk, _ in _counted_chunks(fh, size, path):
        yield offset, line, chunk


def line_chunks(path: Path, size: int) -> Iterator[tuple[int, int, bytes]]:
    """Yield (byte offset, first line number, bytes) chunks of a file (gunzipped when it is
    gzip: offsets in the uncompressed stream) that end at line boundaries."""
    with open_bytes(path) as fh:
        yield from chunks_of(fh, size, path)


def reused_line_chunks(path: Path, size: int) -> Iterator[tuple[int, int, bytes | bytearray]]:
    """:func:`line_chunks` through one buffer (:func:`_reused_chunks`): each chunk is a
    ``bytearray`` overwritten when the next one is asked for, for a caller done with it by then."""
    with open_bytes(path) as fh:
        for offset, line, chunk, _ in _reused_chunks(fh, size, path):
            yield offset, line, chunk


def row_lines(chunk: bytes, first_line: int, blank: bytes = BLANK_JSON) -> np.ndarray:
    """The file line of every row parsed from ``chunk`` (which starts at line ``first_line``): its
    lines but the blank ones (made of ``blank`` bytes only), as the readers skip them."""
    lines = chunk.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return np.array([first_line + i for i, ln in enumerate(lines) if ln.strip(blank)], np.int64)


def _row_line(chunk: bytes | None, first_line: int | None, row: int, blank: bytes) -> int | None:
    if chunk is None or first_line is None:
        return first_line
    lines = row_lines(chunk, first_line, blank)
    return int(lines[row]) if row < len(lines) else first_line


def _line_start(chunk: bytes, first_line: int, line: int | None) -> int:
    """Offset in ``chunk`` of the start of file line ``line`` (0 before the chunk, its length after)."""
    at = 0
    for _ in range((line or first_line) - first_line):
        at = chunk.find(b"\n", at) + 1
        if at == 0:
            return len(chunk)
    return at


def _plain_ids(ids: pa.Array) -> bool:
    """Whether every id is non-empty and only printable ASCII other than space: the usual case,
    told by the min and max byte without a regular expression."""
    _, off, data = ids.buffers()
    if data is None or off is None:
        return False
    offsets = np.frombuffer(off, np.int32)[ids.offset: ids.offset + len(ids) + 1]
    if (np.diff(offsets) == 0).any():
        return False
    a = np.frombuffer(data, np.uint8)[offsets[0]: offsets[-1]]
    return bool(a.min() >= 0x21 and a.max() <= 0x7E)


def bad_id_row(ids: pa.Array | pa.ChunkedArray) -> int | None:
    """The row of the first id that TREC's whitespace-separated runs and qrels cannot carry (empty,
    or holding whitespace or a control character), or None; nulls are not looked at."""
    start = 0
    for c in ids.chunks if isinstance(ids, pa.ChunkedArray) else [ids]:
        if len(c) and not _plain_ids(c):
            bad = pc.or_(pc.equal(pc.binary_length(c), 0), pc.match_substring_regex(c, _BAD_ID_CHARS))
            if pc.any(bad).as_py():
                return start + pc.index(bad, True).as_py()
        start += len(c)
    return None


def _id_problem(ids: pa.ChunkedArray, what: str) -> tuple[int, str, str] | None:
    row = bad_id_row(ids)
    if row is None:
        return None
    value = ids[row].as_py()
    why = "is empty" if value == "" else "holds whitespace or a control character"
    return row, "bad-id", f"{what} {quoted(value)} {why}: TREC runs and qrels are whitespace-separated"


def _utf8_problem(t: pa.Table) -> tuple[int, str, str] | None:
    """Rows read from Parquet are checked to be UTF-8 (the Parquet reader does not check)."""
    for name in t.column_names:
        for start, c in zip(np.cumsum([0] + [len(c) for c in t[name].chunks]), t[name].chunks):
            try:
                c.validate(full=True)
            except pa.ArrowInvalid:
                row = next(i for i, v in enumerate(c.cast(pa.binary()).to_pylist()) if v is not None and not _decodes(v))
                return int(start) + row, "not-utf8", f"row {int(start) + row + 1}: the {name} is not UTF-8"
    return None


def _decodes(v: bytes) -> bool:
    try:
        v.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def normalize_chunk(t: pa.Table, path: Path, first_line: int | None, chunk: bytes | None = None,
                    blank: bytes = BLANK_JSON) -> pa.Table:
    """Corpus rows read by any reader as :data:`CORPUS_SCHEMA`: the id, text (a ``title`` prepended)
    and document fields found by their names (:data:`ID_KEYS`, :data:`TEXT_KEYS`, :data:`DOC_KEYS`).
    A missing field is ``missing-column``; the first row (in file order) without id or text is
    ``missing-value``, with an id TREC formats cannot carry ``bad-id`` (passage and document ids:
    :func:`bad_id_row`), each an :class:`InputError` naming ``path`` and the line (``first_line``
    of the ``chunk`` the rows were parsed from, whose lines made only of ``blank`` bytes were
    skipped; None for Parquet, whose text is checked to be UTF-8 here)."""
    names = t.column_names
    id_key = next((k for k in ID_KEYS if k in names), None)
    text_key = next((k for k in TEXT_KEYS if k in names), None)
    if id_key is None or text_key is None:
        raise InputError(
            "missing-column",
            f"corpus needs an id field ({'/'.join(ID_KEYS)}) and a text field ({'/'.join(TEXT_KEYS)}); "
            f"found {printable(names, 200)}",
            file=str(path),
            line=first_line,
        )
    doc_key = next((k for k in DOC_KEYS if k in names and k != id_key), None)
    pid = pc.cast(t[id_key], pa.string())
    text = pc.cast(t[text_key], pa.string())
    no_text = pc.is_null(text)
    if "title" in names and text_key != "title":
        title = pc.cast(t["title"], pa.string())
        no_text = pc.and_(no_text, pc.is_null(title))
        both = pc.binary_join_element_wise(pc.fill_null(title, ""), pc.fill_null(text, ""), " ")
        text = pc.utf8_trim_whitespace(both)
    docid = pc.cast(t[doc_key], pa.string()) if doc_key else pa.nulls(t.num_rows, pa.string())
    problems = [_utf8_problem(pa.table({"id": pid, "text": text, "docid": docid})) if chunk is None else None]
    for what, null in (("id", pc.is_null(pid)), ("text", no_text)):
        # a passage without a text field used to become an empty passage silently
        if pc.any(null).as_py():
            problems.append((pc.index(null, True).as_py(), "missing-value", f"a passage has no {what}"))
    problems += [_id_problem(pid, "passage id"), _id_problem(docid, "document id") if doc_key else None]
    found = [x for x in problems if x is not None]
    if found:
        row, rule, message = min(found, key=lambda x: x[0])
        raise InputError(rule, message, file=str(path), line=_row_line(chunk, first_line, row, blank))
    return pa.table({"pid": pid, "text": pc.fill_null(text, ""), "docid": docid}, schema=CORPUS_SCHEMA)


def _read_json_chunk(chunk: bytes) -> pa.Table:
    try:
        # blocks of 4 MB parsed on pyarrow's threads (the rows come back in order) ...
        return pajson.read_json(pa.BufferReader(chunk), read_options=pajson.ReadOptions(use_threads=True, block_size=4 << 20))
    except pa.ArrowInvalid:  # ... unless a line is longer than a block: the chunk as one block
        return pajson.read_json(pa.BufferReader(chunk),
                                read_options=pajson.ReadOptions(use_threads=False, block_size=max(len(chunk), 1 << 20)))


def _earliest(parse, chunk: bytes, path: Path, first_line: int) -> pa.Table:
    """``parse(chunk, path, first_line)``, whose error is the first defect of the chunk in line
    order: a line that cannot be parsed (bad JSON, a wrong column count) is found before the rows
    are looked at, so the lines before it are parsed alone for an earlier defect. Bytes that are
    not UTF-8 are reported before any other defect of the chunk (it is not text)."""
    try:
        return parse(chunk, path, first_line)
    except InputError as err:
        cut = _line_start(chunk, first_line, err.line)
        if 0 < cut < len(chunk) and err.rule != "not-utf8":  # bytes that are not text: that is the news
            _earliest(parse, chunk[:cut], path, first_line)
        raise


def _jsonl_rows(chunk: bytes, path: Path, first_line: int) -> pa.Table:
    # pyarrow's JSON reader lets bytes that are not UTF-8 through (a NUL it refuses: looked for below)
    check_utf8(chunk, path, first_line, nul=False)
    try:
        t = _read_json_chunk(chunk)
        if any(k in t.column_names and not (pa.types.is_string(t[k].type) or pa.types.is_integer(t[k].type)
                                            or pa.types.is_null(t[k].type)) for k in (*ID_KEYS, *DOC_KEYS)):
            t = None  # an id written as a fractional/exponent number (1e3, 1.0): its text is on the line
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        t = None
    if t is None:
        # find the exact line (and a numeric id's text as written): parse line by line
        check_utf8(chunk, path, first_line)  # a NUL byte: binary data or UTF-16, not bad JSON
        rows = []
        for i, line in enumerate(chunk.split(b"\n")):
            if not line.strip(BLANK_JSON):
                continue
            try:
                obj = json.loads(line, parse_int=str, parse_float=str)
            except json.JSONDecodeError as exc:
                raise InputError("bad-json", f"not JSON: {exc.msg}", file=str(path), line=first_line + i) from None
            if not isinstance(obj, dict):
                raise InputError("bad-json", "a line is not a JSON object", file=str(path), line=first_line + i)
            rows.append({k: (v if isinstance(v, str) or v is None else json.dumps(v) if isinstance(v, (dict, list)) else str(v)) for k, v in obj.items()})
        t = pa.Table.from_pylist(rows)
    return normalize_chunk(t, path, first_line, chunk)


def jsonl_chunk(chunk: bytes, path: Path, first_line: int) -> pa.Table:
    """Whole JSON lines of a corpus (``chunk``, starting at line ``first_line`` of ``path``) as
    :data:`CORPUS_SCHEMA` rows; numeric ids keep the text they were written as. The chunk's first
    defect in line order is the error (``not-utf8``, ``bad-json``, ``missing-column``,
    ``missing-value``, ``bad-id``)."""
    return _earliest(_jsonl_rows, chunk, path, first_line)


def _tsv_rows(chunk: bytes, path: Path, first_line: int) -> pa.Table:
    check_utf8(chunk, path, first_line)
    ncol = chunk[: chunk.find(b"\n")].count(b"\t") + 1
    if ncol not in (2, 3):
        raise InputError("missing-column" if ncol < 2 else "extra-column",
                         f"TSV corpus needs pid<TAB>text[<TAB>docid], found {ncol} columns", file=str(path), line=first_line)
    names = ["pid", "text", "docid"][:ncol]
    try:
        t = pacsv.read_csv(
            pa.BufferReader(chunk),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=False, block_size=max(len(chunk), 1 << 20)),
            parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
            convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in names}, strings_can_be_null=False),
        )
    except pa.ArrowInvalid:
        for i, line in enumerate(chunk.split(b"\n")):
            if line and line.count(b"\t") + 1 != ncol:
                raise InputError("column-count", f"expected {ncol} tab-separated columns", file=str(path), line=first_line + i) from None
        raise InputError("unreadable", "cannot parse TSV corpus", file=str(path), line=first_line) from None
    return normalize_chunk(t, path, first_line, chunk, BLANK_TSV)


def tsv_chunk(chunk: bytes, path: Path, first_line: int) -> pa.Table:
    """Whole lines of a TSV corpus (``pid<TAB>text[<TAB>docid]``, no header; ``chunk`` starts at
    line ``first_line`` of ``path``) as :data:`CORPUS_SCHEMA` rows; the chunk's first defect in
    line order is the error."""
    return _earliest(_tsv_rows, chunk, path, first_line)


def corpus_format(path: str | os.PathLike) -> str:
    """The format of a corpus file by its name: ``parquet``, ``jsonl`` or ``tsv`` (a ``.gz`` suffix
    is ignored). A name without a suffix (MS MARCO v2's ``msmarco_passage_00.gz``) is JSON lines
    when its first byte that is not blank (gunzipped) is ``{``, or when it holds none (an empty
    shard, as an empty ``.jsonl`` is); ``unknown-format`` otherwise, and for another name; a gzip
    stream that does not decompress is ``bad-gzip``."""
    name = Path(path).name.lower().removesuffix(".gz")
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith((".tsv", ".txt", ".tab")):
        return "tsv"
    if "." not in name.lstrip(".") and _starts_json(Path(path)):
        return "jsonl"
    raise InputError("unknown-format", "corpus must be .jsonl, .tsv or .parquet (optionally .gz), or JSON lines "
                     "in a file without a suffix", file=str(path))


def _starts_json(path: Path) -> bool:
    """Whether the file's first byte that is not blank (gunzipped) is ``{``, or it has none;
    ``bad-gzip`` when its gzip stream does not decompress."""
    try:
        with open_bytes(path) as fh:
            head = next(blocks(fh, 4096, path), b"")
    except OSError:
        return False
    return head.lstrip(b" \t\r\n")[:1] in (b"{", b"")


def iter_corpus(spec: str | os.PathLike, *, chunk_bytes: int = 32 << 20, chunk_rows: int = 200_000) -> Iterator[pa.Table]:
    """Stream a corpus as :data:`CORPUS_SCHEMA` tables, in corpus order: a file, a folder of shards
    or an ``irds:`` dataset (:func:`qrelkit.io.sources.open_corpus`)."""
    from qrelkit.io.sources import open_corpus  # lazy: the sources are built on this module

    return open_corpus(spec).chunks(chunk_bytes=chunk_bytes, chunk_rows=chunk_rows)


def iter_corpus_file(path: str | os.PathLike, *, chunk_bytes: int = 32 << 20, chunk_rows: int = 200_000) -> Iterator[pa.Table]:
    """Stream one corpus file as :data:`CORPUS_SCHEMA` tables, in file order."""
    p = Path(path)
    if not p.exists():
        raise InputError("unreadable", "no such file", file=str(p))
    fmt = corpus_format(p)
    if fmt == "parquet":
        try:
            pf = pq.ParquetFile(p)
        except Exception as exc:  # noqa: BLE001
            raise InputError("unreadable", f"not a readable Parquet file: {exc}", file=str(p)) from None
        batches = pf.iter_batches(batch_size=chunk_rows)
        while True:
            try:
                batch = next(batches, None)
            except (OSError, pa.ArrowException) as exc:  # a damaged file found while reading it
                raise InputError("unreadable", f"not a readable Parquet file: {printable(exc, 200)}", file=str(p)) from None
            if batch is None:
                return
            yield normalize_chunk(pa.Table.from_batches([batch]), p, None)
    parse = jsonl_chunk if fmt == "jsonl" else tsv_chunk
    for _, first_line, chunk in reused_line_chunks(p, chunk_bytes):  # the rows own their memory
        yield parse(chunk, p, first_line)


@dataclass(frozen=True)
class CorpusCheck:
    """What :func:`check_corpus` found in a corpus that every reader accepts."""

    path: Path  # absolute
    format: str  # jsonl, tsv or parquet
    passages: int
    documents: bool  # whether some passage names its document (a docid field)
    size: int  # bytes on disk
    mtime_ns: int
    sha256: str  # the fingerprint: of the file's bytes on disk (compressed, for a gzip file); of a
    # folder, of its shards' names and SHA-256s; of an ir_datasets dataset, its documented sample
    kind: str = "file"  # file, shards or irds (qrelkit.io.sources)
    spec: str = ""  # what the source was opened from: the absolute path, or irds:<id>
    parts: tuple = ()  # a folder's shards, each a CorpusCheck of its file


class _Hashing:
    """A binary file read through SHA-256: each block is hashed on a helper thread (hashlib lets go
    of the GIL) while the caller parses the one before; ``progress(n)`` counts the bytes read."""

    def __init__(self, fh, progress: Callable[..., Any] | None):
        self.fh, self.progress, self.sha = fh, progress, hashlib.sha256()
        self.pool, self.pending = ThreadPoolExecutor(1, thread_name_prefix="sha256"), None

    def read(self, n: int = -1) -> bytes:
        block = self.fh.read(n)
        if self.pending is not None:
            self.pending.result()
        self.pending = self.pool.submit(self.sha.update, block) if block else None
        if block and self.progress is not None:
            self.progress(len(block))
        return block

    def hexdigest(self) -> str:
        while self.read(8 << 20):  # what the readers left (a gzip stream's padding, a Parquet footer)
            pass
        return self.sha.hexdigest()

    def close(self) -> None:
        self.pool.shutdown()


class IdIndex:
    """The 64-bit hash of every passage id in corpus order, and where each chunk's rows start: the
    duplicate ids of a corpus of any size for 8 bytes a passage (equal hashes are only candidates:
    the ids are read again, then, to compare them)."""

    def __init__(self, path: Path, fmt: str):
        self.path, self.fmt = path, fmt
        self.hashes: list[np.ndarray] = []
        self.starts: list[int] = []  # first row of each chunk
        self.lines: list[tuple[int, np.ndarray | None]] = []  # its first line, or every row's line
        self.rows = 0

    def add(self, pids: pa.ChunkedArray, first_line: int | None, chunk: bytes | None = None, blank: bytes = b"",
            lines: int | None = None) -> None:
        from qrelkit.io.idhash import pid_hashes  # lazy: numba's import (0.8 s) only for a corpus checked in full

        if not len(pids):
            return
        self.hashes.append(pid_hashes(pids))
        self.starts.append(self.rows)
        n_lines = chunk.count(b"\n") if chunk is not None and lines is None else lines
        every = None if chunk is None or n_lines == len(pids) else row_lines(chunk, first_line, blank)
        self.lines.append((first_line, every))
        self.rows += len(pids)

    def line(self, row: int) -> int | None:
        i = bisect.bisect_right(self.starts, row) - 1
        first_line, every = self.lines[i]
        if first_line is None:
            return None
        return int(every[row - self.starts[i]]) if every is not None else first_line + row - self.starts[i]

    def duplicate(self, before_line: int | None = None) -> InputError | None:
        """``duplicate-id`` at the first row whose id an earlier row has (of the rows added, read
        again from the file up to ``before_line``), or None."""
        hashes = np.concatenate(self.hashes) if self.hashes else np.zeros(0, np.uint64)
        s = np.sort(hashes)
        same = s[1:][s[1:] == s[:-1]]
        if not len(same):
            return None
        rows = np.flatnonzero(np.isin(hashes, same))
        first: dict[str, int] = {}
        for row, pid in zip(rows.tolist(), self._ids(rows, before_line)):
            if pid in first:
                at, was = self.line(row), self.line(first[pid])
                where = f"line {was}" if was is not None else f"row {first[pid] + 1} (this is row {row + 1})"
                return InputError("duplicate-id", f"passage id {quoted(pid)} already on {where}", file=str(self.path),
                                  line=at)
            first[pid] = row
        return None

    def _ids(self, rows: np.ndarray, before_line: int | None) -> list[str]:
        """The ids of ``rows`` (ascending), read again from the file (the lines before ``before_line``)."""
        out: list[str] = []
        start = 0
        for t in _tables(self.path, self.fmt, before_line):
            mine = rows[(rows >= start) & (rows < start + t.num_rows)] - start
            out += t["pid"].take(pa.array(mine)).to_pylist()
            start += t.num_rows
            if start > rows[-1]:
                break
        return out


def _tables(p: Path, fmt: str, before_line: int | None = None) -> Iterator[pa.Table]:
    """The corpus's rows chunk by chunk (as :func:`iter_corpus`), only the lines before
    ``before_line`` when given."""
    if fmt == "parquet":
        yield from iter_corpus_file(p)
        return
    parse = jsonl_chunk if fmt == "jsonl" else tsv_chunk
    for _, first_line, chunk in line_chunks(p, 32 << 20):
        if before_line is not None:
            chunk = chunk[: _line_start(chunk, first_line, before_line)]
            if not chunk:
                return
        yield parse(chunk, p, first_line)


def _settle(item: tuple, parse, p: Path, ids: IdIndex, blank: bytes) -> pa.Table:
    """A chunk's parsed rows (``item``: first line, bytes, lines, the parse's future), their ids
    added to ``ids``; its defect raised, or an id repeated before it (the first error then)."""
    first_line, chunk, lines, parsed = item
    try:
        t = parsed.result()
    except InputError as err:
        head = chunk[: _line_start(chunk, first_line, err.line)] if err.rule != "not-utf8" else b""
        if head:  # the lines before the defect parse (the defect is the chunk's first)
            ids.add(parse(head, p, first_line)["pid"], first_line, head, blank)
        raise (ids.duplicate(before_line=err.line) or err) from None
    ids.add(t["pid"], first_line, chunk, blank, lines)
    return t


def _check_text(p: Path, fmt: str, fh, ids: IdIndex, chunk_bytes: int) -> tuple[int, bool]:
    """Every chunk of a text corpus through the reader's rules, its ids into ``ids``; the first
    defect in line order is raised (an id seen before it counts: a repeated id before a bad line
    is the first error). Two chunks are parsed at a time (pyarrow lets go of the GIL), settled in
    order."""
    parse, blank = (jsonl_chunk, BLANK_JSON) if fmt == "jsonl" else (tsv_chunk, BLANK_TSV)
    n, documents = 0, False
    with ThreadPoolExecutor(2, thread_name_prefix="corpus-check") as pool:
        ahead: collections.deque = collections.deque()
        for _, first_line, chunk, lines in _counted_chunks(fh, chunk_bytes, p):
            ahead.append((first_line, chunk, lines, pool.submit(parse, chunk, p, first_line)))
            while len(ahead) > 1:
                t = _settle(ahead.popleft(), parse, p, ids, blank)
                n, documents = n + t.num_rows, documents or t["docid"].null_count < t.num_rows
        while ahead:
            t = _settle(ahead.popleft(), parse, p, ids, blank)
            n, documents = n + t.num_rows, documents or t["docid"].null_count < t.num_rows
    return n, documents


def check_corpus(spec: str | os.PathLike, progress: Callable[..., Any] | None = None, *,
                 chunk_bytes: int = 32 << 20) -> CorpusCheck:
    """Validate a corpus completely in one streaming pass and fingerprint it (what ``campaign
    init`` records): every rule of the readers (:func:`iter_corpus`: ``not-utf8``, ``bad-json``,
    ``missing-column``, ``missing-value``, ``bad-id``, ``column-count``, ``bad-gzip``, ...) and
    ``duplicate-id`` (a passage id used twice anywhere in the file, which only this check looks
    for), the first defect in file order raised as an :class:`InputError` naming its line. The
    SHA-256 of the file is computed from the same reads, on a helper thread. ``progress(n)`` is
    called with the bytes read (compressed, for a gzip file) as they are read.

    Examples
    --------
    >>> from qrelkit.io.corpus import check_corpus
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("corpus.jsonl", '{"pid": "p1", "text": "a"}\\n{"pid": "p2", "text": "b"}\\n')
    >>> c = check_corpus(path)
    >>> c.passages, c.format, len(c.sha256)
    (2, 'jsonl', 64)
    >>> bad = toy_file("bad.jsonl", '{"pid": "p1", "text": "a"}\\n{"pid": "p 2", "text": "b"}\\n{"pid": "p1", "text": "c"}\\n')
    >>> check_corpus(bad)
    Traceback (most recent call last):
    ...
    qrelkit.errors.InputError: ...bad.jsonl:2: [bad-id] passage id 'p 2' holds whitespace or a control character: ...
    """
    from qrelkit.io.sources import open_corpus  # lazy: the sources are built on this module

    return open_corpus(spec).check(progress, chunk_bytes=chunk_bytes)


def check_corpus_file(path: str | os.PathLike, progress: Callable[..., Any] | None = None, *,
                      chunk_bytes: int = 32 << 20, duplicates: bool = True) -> tuple[CorpusCheck, IdIndex]:
    """:func:`check_corpus` of one file, with the hashes of its ids (for a check across files:
    ``duplicates=False`` leaves ids used twice to the caller)."""
    p = Path(path)
    fmt = corpus_format(p)
    try:
        raw = open(p, "rb")
    except OSError as exc:
        raise InputError("unreadable", exc.strerror or str(exc), file=str(p)) from None
    ids = IdIndex(p, fmt)
    with raw, contextlib.closing(_Hashing(raw, progress)) as fh:
        st = os.fstat(raw.fileno())
        if fmt == "parquet":
            sha = fh.hexdigest()
            n = documents = 0
            for t in iter_corpus_file(p):
                ids.add(t["pid"], None)
                n, documents = n + t.num_rows, documents or t["docid"].null_count < t.num_rows
        else:
            gz = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            with gzip.GzipFile(fileobj=fh, mode="rb") if gz else contextlib.nullcontext(fh) as text:
                n, documents = _check_text(p, fmt, text, ids, chunk_bytes)
            sha = fh.hexdigest()
    dup = ids.duplicate() if duplicates else None
    if dup is not None:
        raise dup
    return CorpusCheck(path=p.resolve(), format=fmt, passages=n, documents=bool(documents), size=int(st.st_size),
                       mtime_ns=int(st.st_mtime_ns), sha256=sha), ids


def count_passages(spec: str | os.PathLike) -> int:
    """Number of passages of a corpus (a file, a folder of shards, an ``irds:`` dataset)."""
    from qrelkit.io.sources import open_corpus  # lazy: the sources are built on this module

    return open_corpus(spec).count()


def count_passages_file(path: str | os.PathLike) -> int:
    """Number of passages: Parquet metadata, or non-empty lines of a text corpus (one pass)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("unreadable", "no such file", file=str(p))
    if corpus_format(p) == "parquet":
        try:
            return pq.ParquetFile(p).metadata.num_rows
        except Exception as exc:  # noqa: BLE001 - any reader failure is bad input
            raise InputError("unreadable", f"not a readable Parquet file: {exc}", file=str(p)) from None
    n = 0
    with open_bytes(p) as fh:
        last = b"\n"
        for block in blocks(fh, 16 << 20, p):
            n += block.count(b"\n") - block.count(b"\n\n")
            last = block[-1:]
        if last != b"\n":
            n += 1
    return n


def passages_upper_bound(spec: str | os.PathLike) -> int:
    """At least the number of passages of a corpus, cheaply (:func:`passages_upper_bound_file`
    per file)."""
    from qrelkit.io.sources import open_corpus  # lazy: the sources are built on this module

    return open_corpus(spec).upper_bound()


def passages_upper_bound_file(path: str | os.PathLike) -> int:
    """At least the number of passages, cheaply: Parquet metadata, or the lines of a text corpus
    (one single-byte count; blank lines are not subtracted, unlike :func:`count_passages`)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("unreadable", "no such file", file=str(p))
    if corpus_format(p) == "parquet":
        return count_passages_file(p)
    with open_bytes(p) as fh:
        return 1 + sum(block.count(b"\n") for block in blocks(fh, 16 << 20, p))


def read_corpus(path: str | os.PathLike) -> pa.Table:
    """The whole corpus as one table (for corpora that fit in memory).

    Examples
    --------
    >>> from qrelkit import read_corpus
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("corpus.jsonl", '{"pid": "p1", "text": "a passage"}\\n{"pid": "p2", "text": "another one"}\\n')
    >>> corpus = read_corpus(path)
    >>> corpus.column_names
    ['pid', 'text', 'docid']
    >>> corpus["pid"].to_pylist()
    ['p1', 'p2']
    """
    chunks = list(iter_corpus(path))
    return pa.concat_tables(chunks) if chunks else CORPUS_SCHEMA.empty_table()


def lookup_texts(spec: str | os.PathLike, pids: set[str]) -> dict[str, tuple[str, str | None]]:
    """``pid -> (text, docid)`` for the wanted passages of a corpus (the first passage of an id
    wins): by the source's random access when it has one, else one streaming pass
    (:meth:`qrelkit.io.sources.CorpusSource.lookup`)."""
    from qrelkit.io.sources import open_corpus  # lazy: the sources are built on this module

    return open_corpus(spec).lookup(set(pids))


def find_texts(chunks: Iterable[pa.Table], pids: set[str]) -> dict[str, tuple[str, str | None]]:
    """``pid -> (text, docid)`` of the wanted passages among ``chunks`` (read until all are found)."""
    wanted = pa.array(sorted(pids), pa.string())
    found: dict[str, tuple[str, str | None]] = {}
    for chunk in chunks:
        sel = chunk.filter(pc.is_in(chunk["pid"], value_set=wanted))
        for pid, text, docid in zip(sel["pid"].to_pylist(), sel["text"].to_pylist(), sel["docid"].to_pylist()):
            found.setdefault(pid, (text, docid))
        if len(found) == len(pids):
            break
    return found
