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

import gzip
import io
import json
import os
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from qrelkit.errors import InputError

CORPUS_SCHEMA = pa.schema([("pid", pa.string()), ("text", pa.string()), ("docid", pa.string())])
ID_KEYS = ("pid", "id", "_id", "doc_id", "docid", "segment_id")
TEXT_KEYS = ("passage", "text", "contents", "body", "segment")
DOC_KEYS = ("docid", "doc_id", "document_id")


def open_bytes(path: Path):
    """A binary file object reading ``path``, gunzipped when the file starts with gzip's magic bytes
    (whatever its name)."""
    fh = open(path, "rb")
    if fh.read(2) == b"\x1f\x8b":
        fh.seek(0)
        return gzip.open(fh, "rb")
    fh.seek(0)
    return fh


def line_chunks(path: Path, size: int) -> Iterator[tuple[int, int, bytes]]:
    """Yield (byte offset, first line number, bytes) chunks of a file (gunzipped when it is
    gzip: offsets in the uncompressed stream) that end at line boundaries."""
    offset, line = 0, 1
    rest = b""
    with open_bytes(path) as fh:
        while True:
            block = fh.read(size)
            if not block:
                break
            block = rest + block
            cut = block.rfind(b"\n")
            if cut < 0:
                rest = block
                continue
            chunk, rest = block[: cut + 1], block[cut + 1 :]
            yield offset, line, chunk
            offset += len(chunk)
            line += chunk.count(b"\n")
    if rest.strip():
        yield offset, line, rest + b"\n"


def _byte_chunks(path: Path, size: int) -> Iterator[tuple[int, bytes]]:
    """Yield (first line number, bytes) chunks that end at line boundaries."""
    for _, line, chunk in line_chunks(path, size):
        yield line, chunk


def _nonblank_line(chunk: bytes, first_line: int, row: int) -> int:
    """File line of the ``row``-th (0-based) non-blank line of a chunk (JSON readers skip blanks)."""
    for i, line in enumerate(chunk.split(b"\n")):
        if line.strip():
            if row == 0:
                return first_line + i
            row -= 1
    return first_line


def normalize_chunk(t: pa.Table, path: Path, first_line: int | None, chunk: bytes | None = None) -> pa.Table:
    """Corpus rows read by any reader as :data:`CORPUS_SCHEMA`: the id, text (a ``title`` prepended)
    and document fields found by their names (:data:`ID_KEYS`, :data:`TEXT_KEYS`, :data:`DOC_KEYS`).
    A missing field or a passage without id or text is an :class:`InputError` naming ``path`` and
    the line (``first_line`` of the ``chunk`` the rows were parsed from; None for Parquet)."""
    names = t.column_names
    id_key = next((k for k in ID_KEYS if k in names), None)
    text_key = next((k for k in TEXT_KEYS if k in names), None)
    if id_key is None or text_key is None:
        raise InputError(
            "missing-column",
            f"corpus needs an id field ({'/'.join(ID_KEYS)}) and a text field ({'/'.join(TEXT_KEYS)}); found {names}",
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
    text = pc.fill_null(text, "")
    docid = pc.cast(t[doc_key], pa.string()) if doc_key else pa.nulls(t.num_rows, pa.string())
    for what, null in (("id", pc.is_null(pid)), ("text", no_text)):
        # a passage without a text field used to become an empty passage silently
        if pc.any(null).as_py():
            row = pc.index(null, True).as_py()
            line = first_line if chunk is None or first_line is None else _nonblank_line(chunk, first_line, row)
            raise InputError("missing-value", f"a passage has no {what}", file=str(path), line=line)
    return pa.table({"pid": pid, "text": text, "docid": docid}, schema=CORPUS_SCHEMA)


def _read_json_chunk(chunk: bytes) -> pa.Table:
    try:
        # blocks of 4 MB parsed on pyarrow's threads (the rows come back in order) ...
        return pajson.read_json(io.BytesIO(chunk), read_options=pajson.ReadOptions(use_threads=True, block_size=4 << 20))
    except pa.ArrowInvalid:  # ... unless a line is longer than a block: the chunk as one block
        return pajson.read_json(io.BytesIO(chunk),
                                read_options=pajson.ReadOptions(use_threads=False, block_size=max(len(chunk), 1 << 20)))


def jsonl_chunk(chunk: bytes, path: Path, first_line: int) -> pa.Table:
    """Whole JSON lines of a corpus (``chunk``, starting at line ``first_line`` of ``path``) as
    :data:`CORPUS_SCHEMA` rows; numeric ids keep the text they were written as."""
    try:
        t = _read_json_chunk(chunk)
        if any(k in t.column_names and not (pa.types.is_string(t[k].type) or pa.types.is_integer(t[k].type)
                                            or pa.types.is_null(t[k].type)) for k in (*ID_KEYS, *DOC_KEYS)):
            t = None  # an id written as a fractional/exponent number (1e3, 1.0): its text is on the line
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        t = None
    if t is None:
        # find the exact line (and a numeric id's text as written): parse line by line
        rows = []
        for i, line in enumerate(chunk.split(b"\n")):
            if not line.strip():
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


def tsv_chunk(chunk: bytes, path: Path, first_line: int) -> pa.Table:
    """Whole lines of a TSV corpus (``pid<TAB>text[<TAB>docid]``, no header; ``chunk`` starts at
    line ``first_line`` of ``path``) as :data:`CORPUS_SCHEMA` rows."""
    ncol = chunk[: chunk.find(b"\n")].count(b"\t") + 1
    if ncol not in (2, 3):
        raise InputError("missing-column" if ncol < 2 else "extra-column",
                         f"TSV corpus needs pid<TAB>text[<TAB>docid], found {ncol} columns", file=str(path), line=first_line)
    names = ["pid", "text", "docid"][:ncol]
    bad = []

    def on_invalid(row):
        bad.append(row)
        return "error"

    try:
        t = pacsv.read_csv(
            io.BytesIO(chunk),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=False, block_size=max(len(chunk), 1 << 20)),
            parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False, invalid_row_handler=on_invalid),
            convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in names}, strings_can_be_null=False),
        )
    except pa.ArrowInvalid:
        for i, line in enumerate(chunk.split(b"\n")):
            if line and line.count(b"\t") + 1 != ncol:
                raise InputError("column-count", f"expected {ncol} tab-separated columns", file=str(path), line=first_line + i) from None
        raise InputError("unreadable", "cannot parse TSV corpus", file=str(path), line=first_line) from None
    return normalize_chunk(t, path, first_line)


def corpus_format(path: str | os.PathLike) -> str:
    """The format of a corpus file by its name: ``parquet``, ``jsonl`` or ``tsv`` (a ``.gz`` suffix
    is ignored); raises ``unknown-format`` for another name."""
    name = Path(path).name.lower().removesuffix(".gz")
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith((".tsv", ".txt", ".tab")):
        return "tsv"
    raise InputError("unknown-format", "corpus must be .jsonl, .tsv or .parquet (optionally .gz)", file=str(path))


def iter_corpus(path: str | os.PathLike, *, chunk_bytes: int = 32 << 20, chunk_rows: int = 200_000) -> Iterator[pa.Table]:
    """Stream a corpus as :data:`CORPUS_SCHEMA` tables, in corpus order."""
    p = Path(path)
    if not p.exists():
        raise InputError("unreadable", "no such file", file=str(p))
    fmt = corpus_format(p)
    if fmt == "parquet":
        try:
            pf = pq.ParquetFile(p)
        except Exception as exc:  # noqa: BLE001
            raise InputError("unreadable", f"not a readable Parquet file: {exc}", file=str(p)) from None
        for batch in pf.iter_batches(batch_size=chunk_rows):
            yield normalize_chunk(pa.Table.from_batches([batch]), p, None)
        return
    parse = jsonl_chunk if fmt == "jsonl" else tsv_chunk
    for first_line, chunk in _byte_chunks(p, chunk_bytes):
        yield parse(chunk, p, first_line)


def count_passages(path: str | os.PathLike) -> int:
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
        while True:
            block = fh.read(16 << 20)
            if not block:
                break
            n += block.count(b"\n") - block.count(b"\n\n")
            last = block[-1:]
        if last != b"\n":
            n += 1
    return n


def passages_upper_bound(path: str | os.PathLike) -> int:
    """At least the number of passages, cheaply: Parquet metadata, or the lines of a text corpus
    (one single-byte count; blank lines are not subtracted, unlike :func:`count_passages`)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("unreadable", "no such file", file=str(p))
    if corpus_format(p) == "parquet":
        return count_passages(p)
    n = 1
    with open_bytes(p) as fh:
        while True:
            block = fh.read(16 << 20)
            if not block:
                break
            n += block.count(b"\n")
    return n


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


def lookup_texts(path: str | os.PathLike, pids: set[str]) -> dict[str, tuple[str, str | None]]:
    """Stream the corpus once and return ``pid -> (text, docid)`` for the wanted passages."""
    wanted = pa.array(sorted(pids), pa.string())
    found: dict[str, tuple[str, str | None]] = {}
    for chunk in iter_corpus(path):
        sel = chunk.filter(pc.is_in(chunk["pid"], value_set=wanted))
        for pid, text, docid in zip(sel["pid"].to_pylist(), sel["text"].to_pylist(), sel["docid"].to_pylist()):
            found.setdefault(pid, (text, docid))
        if len(found) == len(pids):
            break
    return found
