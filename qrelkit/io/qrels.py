"""Qrels: ``qid iteration docid rel`` text (plain or gzip) and Parquet.

The qrels table (:data:`QRELS_SCHEMA`) is ``qid: string, docid: string, rel: int32``, sorted by
topic (natural order) then docid. Grades must be integers: a fractional grade is an error
(trec_eval silently truncates it). Negative grades mean "pooled, not judged" and are kept;
:func:`judged` drops them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from qrelkit.errors import InputError
from qrelkit.io.atomic import atomic_path
from qrelkit.io.order import natural_codes
from qrelkit.io.sources import IRDS, is_irds
from qrelkit.io.text import Column, first_problem, parse_columns, read_bytes
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.io.params import RunsParams

QRELS_SCHEMA = pa.schema([("qid", pa.string()), ("docid", pa.string()), ("rel", pa.int32())])

QRELS_TEXT_COLUMNS = [
    Column("qid", "str"),
    Column("iteration", "skip"),
    Column("docid", "str"),
    Column("rel", "float", rule="grade-not-numeric"),
]


def sort_qrels(table: pa.Table) -> pa.Table:
    """Order qrels by topic (natural order), then docid."""
    if table.num_rows == 0:
        return table
    codes, _ = natural_codes(table["qid"])
    t = table.append_column("_q", pa.array(codes))
    idx = pc.sort_indices(t, sort_keys=[("_q", "ascending"), ("docid", "ascending")])
    return table.take(idx)


def parse_grade(g: str) -> int | None:
    """An integer grade from its text, or None; spreadsheet spellings such as ``2.0`` are
    accepted, ``2.5``, ``1_0``, ``inf`` are not.

    >>> parse_grade("2"), parse_grade("2.0"), parse_grade("2.5"), parse_grade("high")
    (2, 2, None, None)
    """
    try:
        v = float(g)
    except ValueError:
        return None
    if not np.isfinite(v) or v != int(v) or "_" in g:
        return None
    return int(v)


@declared_defaults(RunsParams)
def read_qrels(path: str | os.PathLike, *, lenient: bool = AS_DECLARED, scale: Iterable[int] | None = None,
               counts: dict[str, int] | None = None) -> pa.Table:
    """Read qrels (TREC text, ``.gz`` or Parquet, or ``irds:<dataset-id>``: the qrels of an
    ir_datasets dataset, :func:`qrelkit.io.irds.read_irds_qrels`) into :data:`QRELS_SCHEMA`.

    Rules: ``missing-column``/``extra-column``, ``grade-not-numeric``, ``grade-not-integer``
    (a fractional grade), ``grade-out-of-range`` (not a 32-bit integer), ``grade-out-of-scale``
    (with ``scale``: a grade >= 0 that is not one of the scale's grades; negative grades,
    "pooled, not judged", are always allowed), ``duplicate-judgment`` (same topic and docid
    twice), ``empty-file``.
    Strict mode raises :class:`InputError`; lenient mode drops bad lines (a grade outside the
    scale included: no grade is invented) and keeps the first of duplicate judgments, and adds
    the lines dropped per rule to ``counts``.

    Examples
    --------
    >>> from qrelkit import read_qrels
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("qrels.txt", "1 0 d1 2\\n1 0 d2 0\\n2 0 d3 1\\n")
    >>> qrels = read_qrels(path)
    >>> qrels.to_pydict()
    {'qid': ['1', '1', '2'], 'docid': ['d1', 'd2', 'd3'], 'rel': [2, 0, 1]}
    """
    counts = {} if counts is None else counts

    def count(rule: str, n: int) -> None:
        if n:
            counts[rule] = counts.get(rule, 0) + int(n)

    p = Path(path)
    if is_irds(path):
        from qrelkit.io.irds import read_irds_qrels  # lazy: ir_datasets is an optional extra

        p, t, problems = str(path), read_irds_qrels(str(path)[len(IRDS):]), []
    elif p.suffix == ".parquet":
        try:
            t = pq.read_table(p)
        except Exception as exc:  # noqa: BLE001
            raise InputError("unreadable", f"not a readable Parquet file: {exc}", file=str(p)) from None
        for c in ("qid", "docid", "rel"):
            if c not in t.column_names:
                raise InputError("missing-column", f"Parquet qrels need column {c!r}", file=str(p))
        t = pa.table(
            {
                "qid": pc.cast(t["qid"], pa.string()),
                "docid": pc.cast(t["docid"], pa.string()),
                "rel": pc.cast(t["rel"], pa.float64()),
                "_line": pa.array(np.arange(1, t.num_rows + 1, dtype=np.int64)),
            }
        )
        problems = []
    else:
        parsed = parse_columns(read_bytes(p), QRELS_TEXT_COLUMNS, str(p))
        t = parsed.table
        problems = parsed.problems
    if problems and not lenient:
        rule, line, msg = first_problem(problems)
        raise InputError(rule, msg, file=str(p), line=line)
    for rule, _, _ in problems:
        count(rule, 1)
    if t.num_rows == 0:
        raise InputError("empty-file", "no judgments", file=str(p))
    rel = t["rel"].to_numpy()
    lines = t["_line"].to_numpy()
    keep = np.ones(len(rel), bool)
    bad = ~np.isfinite(rel) | (rel != np.floor(rel))
    if bad.any():
        if not lenient:
            i = int(np.flatnonzero(bad)[0])
            raise InputError("grade-not-integer", f"grade {float(rel[i])!r} is not an integer", file=str(p), line=int(lines[i]))
        count("grade-not-integer", int(bad.sum()))
        keep &= ~bad
    with np.errstate(invalid="ignore"):
        i32 = np.iinfo(np.int32)
        huge = keep & ((rel > i32.max) | (rel < i32.min))  # would wrap around in the int32 cast
    if huge.any():
        if not lenient:
            i = int(np.flatnonzero(huge)[0])
            raise InputError("grade-out-of-range", f"grade {float(rel[i])!r} does not fit in 32 bits",
                             file=str(p), line=int(lines[i]))
        count("grade-out-of-range", int(huge.sum()))
        keep &= ~huge
    if scale is not None:
        grades = sorted({int(g) for g in scale})
        outside = keep & (rel >= 0) & ~np.isin(rel, grades)
        if outside.any():
            if not lenient:
                i = int(np.flatnonzero(outside)[0])
                raise InputError("grade-out-of-scale", f"grade {int(rel[i])} is not on the scale "
                                 f"{', '.join(map(str, grades))} ([labels] scale)", file=str(p), line=int(lines[i]))
            count("grade-out-of-scale", int(outside.sum()))
            keep &= ~outside
    key = pd.DataFrame({"q": t["qid"].to_numpy(zero_copy_only=False), "d": t["docid"].to_numpy(zero_copy_only=False)})
    dup = key.duplicated().to_numpy() & keep
    if dup.any():
        if not lenient:
            i = int(np.flatnonzero(dup)[0])
            raise InputError("duplicate-judgment", f"topic {key.q[i]} docid {key.d[i]} judged twice",
                             file=str(p), line=int(lines[i]))
        count("duplicate-judgment", int(dup.sum()))
        keep &= ~dup
    out = pa.table(
        {"qid": t["qid"], "docid": t["docid"], "rel": pa.array(np.where(keep, rel, 0).astype(np.int32))}
    ).filter(pa.array(keep))
    return sort_qrels(out.cast(QRELS_SCHEMA))


def judged(qrels: pa.Table) -> pa.Table:
    """Only the judged rows (grade >= 0)."""
    return qrels.filter(pc.greater_equal(qrels["rel"], 0))


def write_qrels(table: pa.Table, path: str | os.PathLike) -> None:
    """Write qrels as TREC text (``qid 0 docid rel``), atomically, in qrels order.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import pyarrow as pa
    >>> from qrelkit import write_qrels
    >>> path = Path(tempfile.mkdtemp(), "qrels.txt")
    >>> write_qrels(pa.table({"qid": ["2", "1"], "docid": ["d3", "d1"], "rel": pa.array([1, 2], pa.int32())}), path)
    >>> print(path.read_text(), end="")
    1 0 d1 2
    2 0 d3 1
    """
    t = sort_qrels(table.select(["qid", "docid", "rel"]).cast(QRELS_SCHEMA))
    n = t.num_rows
    out = pa.table({"qid": t["qid"], "it": pa.array(np.zeros(n, np.int32)), "docid": t["docid"], "rel": t["rel"]})
    with atomic_path(path) as tmp:
        pacsv.write_csv(out, tmp, write_options=pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none"))
