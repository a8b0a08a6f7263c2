"""Writing intermediate artefacts: Parquet with the parameters that made them in its metadata,
or CSV/TSV/JSONL at the edges. Every write is atomic; list columns become text in flat formats."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from qrelkit import __version__
from qrelkit.errors import InputError, printable
from qrelkit.io.atomic import atomic_open, atomic_path
from qrelkit.io.text import read_utf8

if TYPE_CHECKING:
    import pandas as pd

META_KEY = b"qrelkit"


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = [_jsonable(v) for v in obj]
        return sorted(items, key=str) if isinstance(obj, (set, frozenset)) else items
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item"):
        return obj.item()
    return obj


def with_metadata(table: pa.Table, kind: str, params: dict[str, Any]) -> pa.Table:
    """``table`` with the ``qrelkit`` schema metadata set: ``kind``, the qrelkit version and ``params``
    (JSON, keys sorted), read back by :func:`read_metadata`."""
    meta = dict(table.schema.metadata or {})
    meta[META_KEY] = json.dumps(
        {"kind": kind, "qrelkit_version": __version__, "params": _jsonable(params)}, sort_keys=True
    ).encode()
    return table.replace_schema_metadata(meta)


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The ``qrelkit`` metadata (kind, version, params) stored in a Parquet file."""
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(META_KEY)
    return json.loads(raw) if raw else {}


def flatten_for_text(table: pa.Table) -> pa.Table:
    """Turn list<struct<run, rank>> provenance columns into ``run:rank,run:rank`` strings."""
    cols = {}
    for name in table.column_names:
        col = table[name]
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
            vals = []
            for row in col.to_pylist():
                if row is None:
                    vals.append("")
                elif row and isinstance(row[0], dict):
                    vals.append(",".join(":".join(str(v) for v in item.values()) for item in row))
                else:
                    vals.append(",".join(str(v) for v in row))
            cols[name] = pa.array(vals, pa.string())
        else:
            cols[name] = col
    return pa.table(cols)


def write_table(table: pa.Table, path: str | os.PathLike, *, kind: str, params: dict[str, Any]) -> Path:
    """Write ``table`` by the file's extension: ``.parquet`` (with metadata), ``.csv``, ``.tsv``/
    ``.txt`` (tab-separated with a header), ``.jsonl``."""
    p = Path(path)
    ext = p.name.lower().rsplit(".", 1)[-1] if "." in p.name else ""
    if ext == "parquet":
        with atomic_path(p) as tmp:
            pq.write_table(with_metadata(table, kind, params), tmp, compression="zstd")
    elif ext in ("csv", "tsv", "txt"):
        flat = flatten_for_text(table)
        tsv = ext != "csv"
        with atomic_path(p) as tmp:
            with open(tmp, "wb") as fh:
                if tsv:  # pyarrow quotes header names even with quoting "none": a TSV header is plain
                    fh.write(("\t".join(flat.column_names) + "\n").encode())
                pacsv.write_csv(
                    flat,
                    fh,
                    write_options=pacsv.WriteOptions(
                        include_header=not tsv, delimiter="\t" if tsv else ",",
                        quoting_style="none" if tsv else "needed",
                    ),
                )
    elif ext == "jsonl":
        with atomic_open(p) as fh:
            for row in table.to_pylist():
                fh.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")
    else:
        raise InputError("unknown-format", "output must end in .parquet, .csv, .tsv, .txt or .jsonl", file=str(p))
    return p


#: Columns that name things (topics, passages, documents, assessors, runs, groups, batches, workers,
#: pairs, tasks, classes) or hold free text. Every reader takes them as strings, never as numbers,
#: whatever they look like: ``01001``, ``1e3``, ``1.0``, ``NA`` and ``null`` are kept as written.
ID_COLUMNS = frozenset({
    "qid", "docid", "pid", "id", "_id", "query_id", "doc_id", "document", "document_id", "passage", "passage_id",
    "segment_id", "assessor", "assessor_a", "assessor_b", "batch", "batch_id", "run", "run_a", "run_b", "tag",
    "group", "worker", "worker_id", "pair_id", "task_id", "base_task", "class_id", "canonical", "doc_a", "doc_b",
    "left_docid", "right_docid", "offtopic_qid", "winner", "loser", "top_docid", "other_docid", "thread",
    "query", "text", "title", "left_text", "right_text",
})
_ID_SUFFIXES = ("_id", "qid", "docid", "pid", "_run", "_group", "_assessor", "_worker", "_batch")

#: ``strings=`` of :func:`read_table`: only the id and text columns, or every column.
STRING_MODES = ("ids", "all")


def is_id_column(name: str) -> bool:
    """Whether a column of this name holds identifiers or text (read as strings): the names of
    :data:`ID_COLUMNS` and names ending in ``_id``, ``qid``, ``docid``, ``pid``, ``_run``, ..."""
    n = str(name).strip().lower()
    return n in ID_COLUMNS or n.endswith(_ID_SUFFIXES)


def table_format(path: str | os.PathLike) -> str:
    """``parquet``, ``csv``, ``tsv`` (also ``.txt``) or ``jsonl`` by the file's extension."""
    p = Path(path)
    ext = p.name.lower().rsplit(".", 1)[-1] if "." in p.name else ""
    fmt = {"parquet": "parquet", "csv": "csv", "tsv": "tsv", "txt": "tsv", "jsonl": "jsonl"}.get(ext)
    if fmt is None:
        raise InputError("unknown-format", "expected .parquet, .csv, .tsv, .txt or .jsonl", file=str(p))
    return fmt


def first_row_line(path: str | os.PathLike) -> int:
    """The line (or row) number of a table's first data row: 2 below a CSV/TSV header, else 1."""
    return 2 if table_format(path) in ("csv", "tsv") else 1


def read_answer_table(path: str | os.PathLike, columns: Sequence[str], *, what: str,
                      lacks: str) -> tuple[pd.DataFrame, int]:
    """A table of answers (completed assessor batches, judgments, crowd workers' answers) in file
    order: every column as text exactly as written (:func:`read_frame` with ``strings="all"``),
    header names stripped, and the line of its first row (for error messages). A missing one of
    ``columns`` is ``missing-column``: "``lacks`` a, b" at line 1."""
    p = Path(path)
    df = read_frame(p, strings="all", what=what)
    df.columns = [str(c).strip() for c in df.columns]
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError("missing-column", f"{lacks} {', '.join(missing)}", file=str(p), line=1)
    return df, first_row_line(p)


class _Number(str):
    """A JSON number kept as the text it was written as."""


def _json_text(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v  # a _Number is its literal text
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def _json_plain(v: Any) -> Any:
    if isinstance(v, _Number):
        try:
            return int(v)
        except ValueError:  # 2.5, 1e3, NaN, Infinity
            return float(v)
    if isinstance(v, list):
        return [_json_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _json_plain(x) for k, x in v.items()}
    return v


def _read_jsonl_exact(p: Path, raw: bytes, strings: str) -> pa.Table:
    """JSON lines parsed one by one, numbers kept as written for the string columns."""
    rows = []
    for lineno, line in enumerate(raw.decode("utf-8").removeprefix("\ufeff").split("\n"), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, parse_int=_Number, parse_float=_Number, parse_constant=_Number)
        except json.JSONDecodeError as exc:
            raise InputError("bad-json", f"not JSON: {exc.msg}", file=str(p), line=lineno) from None
        if not isinstance(obj, dict):
            raise InputError("bad-json", "a line is not a JSON object", file=str(p), line=lineno)
        rows.append(obj)
    names = list(dict.fromkeys(k for r in rows for k in r))
    cols = {}
    for n in names:
        vals = [r.get(n) for r in rows]
        if strings == "all" or is_id_column(n):
            cols[n] = pa.array([_json_text(v) for v in vals], pa.string())
        else:
            try:
                cols[n] = pa.array([_json_plain(v) for v in vals])
            except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, OverflowError) as exc:
                raise InputError("unreadable", f"column {n!r} mixes types: {exc}", file=str(p)) from None
    return pa.table(cols)


def _read_jsonl(p: Path, raw: bytes, strings: str) -> pa.Table:
    if strings == "ids":
        try:  # fast path: ids written as JSON strings
            t = pajson.read_json(pa.BufferReader(raw))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            t = None
        if t is not None and all(pa.types.is_string(f.type) or pa.types.is_null(f.type)
                                 for f in t.schema if is_id_column(f.name)):
            return t
    return _read_jsonl_exact(p, raw, strings)


def _first_line(raw: bytes) -> str:
    """The header line as text (its line break kept): read once for the delimiter and the names."""
    end = raw.find(b"\n")
    return raw[: len(raw) if end < 0 else end + 1].decode("utf-8-sig")


def _csv_header(line: str, delimiter: str) -> list[str]:
    first = line.rstrip("\r\n")
    if delimiter == "\t":
        return first.split("\t")
    return next(csv.reader([first], delimiter=delimiter), [])


def _unquote(name: str) -> str:
    return name[1:-1] if len(name) >= 2 and name[0] == name[-1] == '"' else name


def _sniff(first: str) -> str:
    try:
        return csv.Sniffer().sniff(first, delimiters=",\t;|").delimiter
    except csv.Error:
        return ","


def _read_delimited(p: Path, raw: bytes, delimiter: str, strings: str, what: str) -> pa.Table:
    first = _first_line(raw)
    if delimiter == "auto":
        delimiter = _sniff(first)
    header = _csv_header(first, delimiter)
    types = {n: pa.string() for n in header if strings == "all" or is_id_column(_unquote(n))}
    bad: list[str] = []

    def on_invalid(row) -> str:
        bad.append(row.text or "")
        return "error"

    try:
        t = pacsv.read_csv(  # the text is UTF-8 (checked): the row handler can always decode a row
            pa.BufferReader(raw),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, quote_char='"' if delimiter != "\t" else False,
                                             invalid_row_handler=on_invalid),
            convert_options=pacsv.ConvertOptions(strings_can_be_null=False, column_types=types),
        )
        # a TSV header written quoted (as qrelkit did before): the names without their quotes
        return t.rename_columns([_unquote(n) for n in t.column_names]) if delimiter == "\t" else t
    except pa.ArrowInvalid as exc:
        if not bad:
            raise
        lines = raw.decode("utf-8").removeprefix("\ufeff").split("\n")
        line = next((i for i, text in enumerate(lines, 1) if text.rstrip("\r") == bad[0]), None)
        raise InputError("unreadable", f"cannot read {what}: {_arrow_message(exc)}", file=str(p), line=line) from None


def _arrow_message(exc: Exception) -> str:
    """A reader's exception as a short message: one line, what it quotes of the input cut."""
    return printable(" ".join(str(exc).split()), 200)


def read_table(path: str | os.PathLike, *, strings: str = "ids", fmt: str | None = None,
               delimiter: str | None = None, what: str = "table") -> pa.Table:
    """Read a table (Parquet, CSV, TSV/``.txt`` with a header, or JSONL): the one table reader
    of qrelkit for inputs with id columns.

    Id and text columns (:func:`is_id_column`) come back as strings exactly as written, in
    every format: ``01001``, ``1e3``, ``1.0``, ``NA`` stay strings (CSV/TSV: read as text, never
    as missing; JSONL: a number keeps its literal text; Parquet: integer ids cast to text).
    ``strings="all"``: every column is text (for files whose values are validated row by row
    with line numbers, e.g. completed batches). ``fmt``: the format whatever the extension (see
    :func:`table_format`). ``delimiter``: for a CSV/TSV file, ``"auto"`` sniffs it from the header
    line (default: by the format). ``what`` names the file in errors.
    """
    if strings not in STRING_MODES:
        raise ValueError(f"strings must be one of {STRING_MODES}")
    p = Path(path)
    fmt = fmt or table_format(p)
    raw = b"" if fmt == "parquet" else read_utf8(p)
    try:
        if fmt == "parquet":
            t = pq.read_table(p)
        elif fmt == "jsonl":
            t = _read_jsonl(p, raw, strings)
        else:
            d = delimiter or ("," if fmt == "csv" else "\t")
            t = _read_delimited(p, raw, d, strings, what)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as exc:
        raise InputError("unreadable", f"cannot read {what}: {_arrow_message(exc)}", file=str(p)) from None
    return _ids_as_strings(t, strings)


def _ids_as_strings(t: pa.Table, strings: str) -> pa.Table:
    for i, f in enumerate(t.schema):
        if not (strings == "all" or is_id_column(f.name)) or pa.types.is_string(f.type):
            continue
        if pa.types.is_nested(f.type) or pa.types.is_binary(f.type):
            continue
        col = t.column(i)
        if pa.types.is_dictionary(f.type):
            col = pc.cast(col, f.type.value_type)
        t = t.set_column(i, f.name, pc.cast(col, pa.string()))
    return t


def read_frame(path: str | os.PathLike, *, strings: str = "ids", fmt: str | None = None,
               delimiter: str | None = None, what: str = "table") -> "pd.DataFrame":
    """:func:`read_table` as a pandas frame. With ``strings="all"`` every text column is ``str``
    and a missing value is ``""`` (as a CSV cell left empty)."""
    t = read_table(path, strings=strings, fmt=fmt, delimiter=delimiter, what=what)
    if strings == "all":
        t = pa.table({
            n: pc.fill_null(c, "") if pa.types.is_string(c.type) else c for n, c in zip(t.column_names, t.columns)
        })
    return t.to_pandas()


def string_column(table: pa.Table, name: str) -> pa.Array:
    """Column ``name`` of ``table`` as one string array (ids are strings)."""
    return pc.cast(table[name], pa.string()).combine_chunks()
