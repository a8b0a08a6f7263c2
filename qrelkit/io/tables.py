"""Writing intermediate artefacts: Parquet with the parameters that made them in its metadata,
or CSV/TSV/JSONL at the edges. Every write is atomic; list columns become text in flat formats."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from qrelkit import __version__
from qrelkit.errors import InputError
from qrelkit.io.atomic import atomic_open, atomic_path

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
        with atomic_path(p) as tmp:
            pacsv.write_csv(
                flat,
                tmp,
                write_options=pacsv.WriteOptions(
                    include_header=True, delimiter="," if ext == "csv" else "\t",
                    quoting_style="needed" if ext == "csv" else "none",
                ),
            )
    elif ext == "jsonl":
        with atomic_open(p) as fh:
            for row in table.to_pylist():
                fh.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")
    else:
        raise InputError("unknown-format", "output must end in .parquet, .csv, .tsv, .txt or .jsonl", file=str(p))
    return p


def read_table(path: str | os.PathLike) -> pa.Table:
    """Read a table written by :func:`write_table` (Parquet, CSV, TSV or JSONL)."""
    p = Path(path)
    ext = p.name.lower().rsplit(".", 1)[-1]
    try:
        if ext == "parquet":
            return pq.read_table(p)
        if ext in ("csv", "tsv", "txt"):
            return pacsv.read_csv(
                p,
                parse_options=pacsv.ParseOptions(delimiter="," if ext == "csv" else "\t", quote_char='"' if ext == "csv" else False),
                convert_options=pacsv.ConvertOptions(strings_can_be_null=False),
            )
        if ext == "jsonl":
            import pyarrow.json as pajson

            return pajson.read_json(p)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError("unreadable", f"cannot read table: {exc}", file=str(p)) from None
    raise InputError("unknown-format", "expected .parquet, .csv, .tsv, .txt or .jsonl", file=str(p))


def string_column(table: pa.Table, name: str) -> pa.Array:
    return pc.cast(table[name], pa.string()).combine_chunks()
