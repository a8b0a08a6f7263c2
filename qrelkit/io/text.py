"""Reading whitespace-separated TREC text files (runs, qrels, near-duplicate lists).

Two parsers stand behind one function, :func:`parse_columns`:

* a **fast path** (pyarrow's multithreaded CSV reader) for files whose whitespace is regular
  (single spaces or single tabs, no blank or comment lines), where row ``i`` is line ``i + 1``;
* an **exact path** (line by line) that is the reference: it accepts any run of spaces and tabs,
  CRLF, blank lines and ``#`` comment lines, and names the line of every defect.

The fast path falls back to the exact path whenever the input is not regular or pyarrow rejects a
row, so both give the same table for every input (this is tested with hypothesis).
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from qrelkit.errors import InputError, quoted

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
# The number grammars are pyarrow's (ASCII digits only; nan/inf/infinity in any letter case; a
# "nan(...)" payload), so that the fast and the exact path accept exactly the same tokens.
_INT = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|[nN][aA][nN](?:\([0-9A-Za-z_]*\))?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)"
)
_NAN_PAYLOAD = re.compile(r"\(.*")
# whitespace that str.split() splits on but that is part of a token here: fields are separated by
# spaces and tabs only (as in the fast path); "\r" is a separator too (CRLF line ends)
_OTHER_SPACE = "\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
_SEP = re.compile(r"[ \t\r]+")


def is_gzip(path: str | os.PathLike) -> bool:
    """Whether the file at ``path`` starts with gzip's magic bytes (whatever its name)."""
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def sha256_file(path: str | os.PathLike) -> str:
    """The SHA-256 hex digest of the file at ``path`` (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_bytes(path: str | os.PathLike) -> bytes:
    """Read a whole file, decompressing gzip (detected by its magic bytes, not its name)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except IsADirectoryError:
        raise InputError("unreadable", "is a directory, expected a file", file=str(p)) from None
    except OSError as exc:
        raise InputError("unreadable", exc.strerror or str(exc), file=str(p)) from None
    if raw[:2] == GZIP_MAGIC:
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError("bad-gzip", f"cannot decompress: {exc}", file=str(p)) from None
    return raw


def utf8_error(data: bytes, path: str | os.PathLike, first_line: int = 1, *, nul: bool = True) -> InputError | None:
    """The ``not-utf8`` error of ``data`` (text starting at line ``first_line`` of ``path``), or None:
    the line and column of its first byte that is not UTF-8 text (an undecodable byte, or a NUL:
    binary data, or UTF-16 without a byte order mark; ``nul=False`` leaves NULs to a parser that
    refuses them anyway). Fast on valid text: an ASCII scan, then Arrow's UTF-8 validation, and the
    exact position only when there is an error.

    Examples
    --------
    >>> from qrelkit.io.text import utf8_error
    >>> utf8_error(b"ok\\n", "a.txt") is None
    True
    >>> print(utf8_error(b"1 x\\n2 caf\\xe9\\n", "a.txt"))
    a.txt:2: [not-utf8] byte 0xe9 at column 6 is not UTF-8 (Latin-1 or another encoding?): the file must be UTF-8 text
    """
    text = data.isascii() or _valid_utf8(data)
    nul = data.find(b"\x00") if nul or not text else -1
    if text and nul < 0:
        return None
    try:
        data.decode("utf-8")
        bad = len(data)
    except UnicodeDecodeError as exc:
        bad = exc.start
    at = min(bad, nul) if nul >= 0 else bad
    line = first_line + data.count(b"\n", 0, at)
    column = at - (data.rfind(b"\n", 0, at) + 1) + 1
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) and at == 0:
        what = "the file is UTF-16 (it starts with UTF-16's byte order mark)"
    elif at == nul:
        what = f"a NUL byte at column {column} (binary data, or UTF-16)"
    else:
        what = f"byte 0x{data[at]:02x} at column {column} is not UTF-8 (Latin-1 or another encoding?)"
    return InputError("not-utf8", f"{what}: the file must be UTF-8 text", file=str(path), line=line)


def _valid_utf8(data: bytes) -> bool:
    """Whether ``data`` is UTF-8 (Arrow's validation: faster than decoding, nothing allocated)."""
    offsets = pa.py_buffer(np.array([0, len(data)], np.int64))
    try:
        pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(data)]).validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def check_utf8(data: bytes, path: str | os.PathLike, first_line: int = 1, *, nul: bool = True) -> None:
    """Raise :func:`utf8_error`'s ``not-utf8`` error when ``data`` is not UTF-8 text."""
    err = utf8_error(data, path, first_line, nul=nul)
    if err is not None:
        raise err


def read_utf8(path: str | os.PathLike) -> bytes:
    """A whole text file's bytes (gzip decompressed, see :func:`read_bytes`), checked to be UTF-8
    text: else ``not-utf8`` at the line of the first bad byte."""
    data = read_bytes(path)
    check_utf8(data, path)
    return data


def read_text(path: str | os.PathLike) -> str:
    """A whole text file as ``str`` (:func:`read_utf8`, decoded)."""
    return read_utf8(path).decode("utf-8")


def parse_float(token: str) -> float | None:
    """Parse a score the way the fast path does; ``None`` when it is not a number."""
    if _NUMBER.fullmatch(token) is None:
        return None
    return float(_NAN_PAYLOAD.sub("", token))  # float() rejects "nan(...)"


@dataclass
class Column:
    """One column of a text table: its name, its arrow type in the fast path, and the rule
    broken when a token cannot be converted."""

    name: str
    kind: str  # "str", "float", "int", "skip"
    rule: str = ""  # rule named when conversion fails ("" = never fails)
    soft: bool = False  # a failed conversion gives NaN/None and is counted, not an error


@dataclass
class Parsed:
    """Result of :func:`parse_columns`."""

    table: pa.Table  # the converted columns plus ``_line`` (int64, 1-based line numbers)
    problems: list[tuple[str, int, str]] = field(default_factory=list)  # (rule, line, message)
    soft: dict[str, list[int]] = field(default_factory=dict)  # rule -> lines (soft failures)
    blank_lines: int = 0
    comment_lines: int = 0
    fast: bool = False


def _fast_ready(data: bytes) -> tuple[bytes, bytes] | None:
    """Return (data, delimiter) when the fast path applies, else ``None``."""
    if not data or data.startswith(UTF8_BOM):  # pyarrow drops a BOM silently; the exact path too
        return None
    if not data.isascii():  # the fast path's only UTF-8 check: pyarrow is told not to check again
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
        if b"\r" in data:
            return None
    has_tab = b"\t" in data
    has_space = b" " in data
    if has_tab and has_space:
        return None
    delim = b"\t" if has_tab else b" "
    # Only single-byte scans here (multi-byte searches cost more than parsing). Doubled or
    # leading/trailing delimiters and blank lines make rows with a wrong column count or an empty
    # field, and comment lines a qid starting with '#': _parse_fast sends those files on.
    if data[:1] in (delim, b"\n", b"#") or data.endswith(delim) or b"\x00" in data:
        return None
    return data, delim


def _arrow_type(col: Column) -> pa.DataType:
    return {"str": pa.string(), "float": pa.float64(), "int": pa.int64()}[col.kind]


def _read_type(col: Column) -> pa.DataType:
    if col.kind == "skip":
        return pa.string()
    # int columns are read as text and checked against _INT: pyarrow's own integer parser takes
    # "0x1f" (hex) and refuses "+5", the exact path does the opposite
    return pa.string() if col.kind == "int" else _arrow_type(col)


def _parse_fast(data: bytes, delim: bytes, columns: Sequence[Column]) -> pa.Table | None:
    names = [c.name for c in columns]
    bad = []

    def on_invalid(row):  # any malformed row sends the whole file to the exact path
        bad.append(row)
        return "error"

    try:
        table = pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 22, use_threads=False),
            parse_options=pacsv.ParseOptions(
                delimiter=delim.decode(),
                quote_char=False,
                double_quote=False,
                escape_char=False,
                newlines_in_values=False,
                ignore_empty_lines=False,
                invalid_row_handler=on_invalid,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={c.name: _read_type(c) for c in columns},
                include_columns=names,
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                null_values=[],
                true_values=[],
                false_values=[],
                check_utf8=False,  # _fast_ready has checked the data is UTF-8 (ASCII, or it decoded)
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError):
        return None
    if bad:
        return None
    for c in columns:
        if c.kind in ("str", "skip"):
            col = table[c.name]
            # an empty field means doubled, leading or trailing whitespace: the exact path decides
            if table.num_rows and pc.min(pc.binary_length(col)).as_py() == 0:
                return None
    first = columns[0]
    if (first.kind in ("str", "skip") and table.num_rows and b"#" in data  # one byte scan, then each value
            and pc.any(pc.starts_with(table[first.name], "#")).as_py()):
        return None  # comment lines
    table = table.drop_columns([c.name for c in columns if c.kind == "skip"])
    for c in columns:
        if c.kind == "float":
            # pyarrow accepts a few spellings the exact path does not; keep the paths equal
            if table[c.name].null_count:
                return None
        elif c.kind == "int":
            col = table[c.name]
            # ASCII digits only (a test per value, no pattern), else the pattern (a minus sign)
            if not (pc.all(pc.ascii_is_decimal(col)).as_py()
                    or pc.all(pc.match_substring_regex(col, r"^-?[0-9]+$")).as_py()):
                return None
            try:
                table = table.set_column(table.column_names.index(c.name), c.name, pc.cast(col, pa.int64()))
            except pa.ArrowInvalid:  # out of the int64 range
                return None
    table = table.combine_chunks()
    return table.append_column("_line", pa.array(np.arange(1, table.num_rows + 1, dtype=np.int64)))


def _parse_exact(data: bytes, columns: Sequence[Column], path: str) -> Parsed:
    ncol = len(columns)
    expected = " ".join(c.name for c in columns)
    out: list[list] = [[] for _ in columns]
    lines_kept: list[int] = []
    parsed = Parsed(table=pa.table({}))
    bad = utf8_error(data, path)
    if bad is None:
        text = data.decode("utf-8")
    else:  # lenient readers go on with U+FFFD in place of each bad byte (and NUL)
        parsed.problems.append(("not-utf8", bad.line, bad.message))
        text = data.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    # str.split() is fast but also splits on \v, \f, NBSP, ...; use it only when none occurs
    plain = not any(c in text for c in (_OTHER_SPACE[:6] if text.isascii() else _OTHER_SPACE))
    for lineno, raw in enumerate(lines, 1):
        tokens = raw.split() if plain else [t for t in _SEP.split(raw) if t]
        if not tokens:
            parsed.blank_lines += 1
            continue
        if tokens[0].startswith("#"):
            parsed.comment_lines += 1
            continue
        if len(tokens) != ncol:
            rule = "missing-column" if len(tokens) < ncol else "extra-column"
            parsed.problems.append(
                (rule, lineno, f"expected {ncol} columns ({expected}), found {len(tokens)}")
            )
            continue
        values = []
        ok = True
        for col, tok in zip(columns, tokens):
            if col.kind == "str" or col.kind == "skip":
                values.append(tok)
            elif col.kind == "float":
                v = parse_float(tok)
                if v is None:
                    if col.soft:
                        parsed.soft.setdefault(col.rule, []).append(lineno)
                        v = math.nan
                    else:
                        parsed.problems.append((col.rule, lineno, f"{col.name} {quoted(tok)} is not a number"))
                        ok = False
                        break
                values.append(v)
            elif col.kind == "int":
                if _INT.fullmatch(tok) and len(tok.lstrip("+-0")) <= 19 and -(2**63) <= int(tok) < 2**63:
                    values.append(int(tok))
                else:
                    if col.soft:
                        parsed.soft.setdefault(col.rule, []).append(lineno)
                        values.append(None)
                    else:
                        parsed.problems.append((col.rule, lineno, f"{col.name} {quoted(tok)} is not an integer"))
                        ok = False
                        break
        if not ok:
            continue
        for i, v in enumerate(values):
            out[i].append(v)
        lines_kept.append(lineno)
    arrays = {}
    for col, vals in zip(columns, out):
        if col.kind == "skip":
            continue
        if col.kind == "int":
            arrays[col.name] = pa.array(vals, type=pa.int64())
        else:
            arrays[col.name] = pa.array(vals, type=_arrow_type(col))
    arrays["_line"] = pa.array(lines_kept, type=pa.int64())
    parsed.table = pa.table(arrays)
    return parsed


def first_problem(problems: Sequence[tuple[str, int, str]]) -> tuple[str, int, str]:
    """The problem a strict reader reports: ``not-utf8`` (the file is not text: whatever else its
    lines break is no news), else the one on the first line."""
    return min(problems, key=lambda x: (x[0] != "not-utf8", x[1]))


def parse_columns(
    data: bytes, columns: Sequence[Column], path: str, *, force_exact: bool = False
) -> Parsed:
    """Parse whitespace-separated text into typed columns plus a ``_line`` column.

    Structural defects (wrong column count, unconvertible hard columns, non-UTF-8 bytes) are
    returned in ``Parsed.problems``; rows with them are left out. Callers decide whether a
    problem is fatal (strict mode) or counted (lenient mode).
    """
    if not force_exact:
        ready = _fast_ready(data)
        if ready is not None:
            fast_data, delim = ready
            table = _parse_fast(fast_data, delim, columns)
            if table is not None:
                return Parsed(table=table, fast=True)
    return _parse_exact(data, columns, path)

