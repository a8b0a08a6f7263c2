"""Near-duplicate classes: a table ``docid -> class_id`` where the class id is the canonical
member's docid (NIST's convention). Passages missing from the table are their own class.

Formats: NIST's text format (``class_id pid`` per line, whitespace separated, ``.gz`` allowed),
or Parquet/CSV/TSV with columns ``docid`` and ``class_id``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.errors import InputError
from qrelkit.io.order import block_ranks, natural_codes
from qrelkit.io.tables import read_table
from qrelkit.io.text import Column, first_problem, parse_columns, read_bytes

CLASSES_SCHEMA = pa.schema([("docid", pa.string()), ("class_id", pa.string())])


def read_classes(path: str | os.PathLike) -> pa.Table:
    """Read a class table; each docid may belong to one class only (rule ``duplicate-member``).

    Examples
    --------
    NIST's format, ``class_id pid`` per line:

    >>> from qrelkit import read_classes
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("classes.txt", "p1 p1\\np1 p2\\np3 p3\\n")
    >>> read_classes(path).select(["docid", "class_id"]).to_pydict()
    {'docid': ['p1', 'p2', 'p3'], 'class_id': ['p1', 'p1', 'p3']}
    """
    p = Path(path)
    name = p.name.lower()
    if name.endswith((".parquet", ".csv")) or (name.endswith(".tsv") and _has_header(p)):
        t = read_table(p)
        for c in ("docid", "class_id"):
            if c not in t.column_names:
                raise InputError("missing-column", "class table needs columns docid, class_id", file=str(p))
        t = pa.table({"docid": pc.cast(t["docid"], pa.string()), "class_id": pc.cast(t["class_id"], pa.string())})
        lines = np.arange(1, t.num_rows + 1) + (0 if name.endswith(".parquet") else 1)
    else:
        parsed = parse_columns(read_bytes(p), [Column("class_id", "str"), Column("docid", "str")], str(p))
        if parsed.problems:
            rule, line, msg = first_problem(parsed.problems)
            raise InputError(rule, msg, file=str(p), line=line)
        t = parsed.table.select(["docid", "class_id"])
        lines = parsed.table["_line"].to_numpy()
    dup = pd.Series(t["docid"].to_numpy(zero_copy_only=False)).duplicated().to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        raise InputError("duplicate-member", f"passage {t['docid'][i].as_py()} is in two classes",
                         file=str(p), line=int(lines[i]))
    return t.cast(CLASSES_SCHEMA).combine_chunks()


def _has_header(p: Path) -> bool:
    with open(p, "rb") as fh:
        first = fh.readline()
    return first.strip().lower().startswith(b"docid")


def map_to_classes(docids: pa.Array | pa.ChunkedArray, classes: pa.Table | None) -> pa.Array:
    """Class id of each docid (itself when it is not in ``classes``)."""
    if isinstance(docids, pa.ChunkedArray):
        docids = docids.combine_chunks()
    if classes is None or classes.num_rows == 0:
        return docids
    idx = pc.index_in(docids, value_set=classes["docid"])
    mapped = pc.take(classes["class_id"], idx)
    if isinstance(mapped, pa.ChunkedArray):
        mapped = mapped.combine_chunks()
    return pc.if_else(pc.is_null(idx), docids, mapped)


def dedupe_runs(runs: pa.Table, classes: pa.Table | None, *, depth: int | None = None) -> pa.Table:
    """Dedupe runs as TREC 2022: optionally truncate to ``depth`` first, map each docid to its
    class id, keep the first hit per (run, qid, class) in canonical order, renumber ranks.

    ``runs`` must be in canonical order (as :func:`qrelkit.io.runs.read_runs` returns them).
    The result keeps the retrieved docid in ``docid`` and adds ``class_id``.
    """
    if depth is not None:
        runs = runs.filter(pc.less_equal(runs["rank"], depth))
    cls = map_to_classes(runs["docid"], classes)
    n = runs.num_rows
    if n == 0:
        return runs.append_column("class_id", pa.array([], pa.string()))
    key = pd.DataFrame(
        {
            "r": pc.dictionary_encode(runs["run"]).combine_chunks().indices.to_numpy(),
            "q": natural_codes(runs["qid"])[0],
            "c": pc.dictionary_encode(cls).indices.to_numpy(),
        }
    )
    first = ~key.duplicated().to_numpy()
    t = runs.append_column("class_id", cls).filter(pa.array(first))
    g = key[first]
    group = g["r"].to_numpy().astype(np.int64) * (int(g["q"].max()) + 1) + g["q"].to_numpy()
    t = t.set_column(t.column_names.index("rank"), "rank", pa.array(block_ranks(group), pa.int32()))
    return t
