"""The rows a store takes and gives, whatever the backend: judgment files read and their cells
parsed (:func:`read_judgment_file`), topics as a table, rows in natural topic order."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from qrelkit.errors import InputError, quoted
from qrelkit.io.order import qid_order
from qrelkit.io.qrels import parse_grade
from qrelkit.io.tables import read_answer_table

#: the columns of the judgments an import reads (further columns are ignored)
INPUT_COLUMNS = ["qid", "docid", "assessor", "grade", "batch_id"]


def text_cells(col: pd.Series) -> np.ndarray:
    """Identifiers as stripped strings; missing values become ``""`` (rule ``missing-value``)."""
    return np.array(["" if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else str(v).strip()
                     for v in col.tolist()], dtype=object)


def grade_cell(g) -> int | None:
    """An integer grade from a cell (``2``, ``"2"``, ``"2.0"``); None when empty or not integral."""
    if g is None or g is pd.NA:
        return None
    if isinstance(g, (int, np.integer)) and not isinstance(g, bool):
        return int(g)
    if isinstance(g, (float, np.floating)):
        return int(g) if np.isfinite(g) and g == int(g) else None
    s = str(g).strip()
    if not s:
        return None
    return parse_grade(s)


def read_judgment_file(path: str | os.PathLike, *, counts: dict[str, int] | None = None, lenient: bool = False,
                       scale: Iterable[int] | None = (0, 1, 2, 3)) -> pd.DataFrame:
    """Read a judgments table or completed batch file (CSV, TSV, JSONL, Parquet) in file order.

    Returns ``qid, docid, assessor, grade (int), batch_id, file, line``; rows with an empty grade
    are skipped (``counts['ungraded']``). Rules: ``missing-column``, ``grade-outside-scale``
    (strict: raised with file and line; lenient: counted and skipped).
    """
    counts = {} if counts is None else counts
    p = Path(path)
    df, offset = read_answer_table(p, INPUT_COLUMNS, what="judgments", lacks="judgments need column(s)")
    allowed = None if scale is None else {int(s) for s in scale}
    keep, grades = [], []
    for i, g in enumerate(df["grade"].tolist()):
        raw = "" if g is None or g is pd.NA or (isinstance(g, float) and np.isnan(g)) else str(g).strip()
        if raw == "":
            counts["ungraded"] = counts.get("ungraded", 0) + 1
            continue
        v = grade_cell(raw)
        if v is None or (allowed is not None and v not in allowed):
            msg = f"grade {quoted(raw)} is not an integer" if v is None else f"grade {v} is outside the scale {sorted(allowed)}"
            if not lenient:
                raise InputError("grade-outside-scale", msg, file=str(p), line=i + offset)
            counts["grade-outside-scale"] = counts.get("grade-outside-scale", 0) + 1
            continue
        keep.append(i)
        grades.append(v)
    out = df.iloc[keep]
    return pd.DataFrame({
        "qid": text_cells(out["qid"]), "docid": text_cells(out["docid"]), "assessor": text_cells(out["assessor"]),
        "grade": np.asarray(grades, np.int64), "batch_id": text_cells(out["batch_id"]), "file": str(p),
        "line": np.asarray(keep, np.int64) + offset,
    })


def topics_frame(topics: pd.DataFrame | Mapping[str, str] | Iterable[str] | None) -> pd.DataFrame:
    """``qid, text`` (strings) of topics given as a table, a mapping qid -> text, or qids."""
    if topics is None:
        return pd.DataFrame({"qid": [], "text": []})
    if isinstance(topics, pd.DataFrame):
        df = topics
    elif isinstance(topics, Mapping):
        df = pd.DataFrame({"qid": list(topics.keys()), "text": list(topics.values())})
    else:
        ids = [str(t) for t in topics]
        df = pd.DataFrame({"qid": ids, "text": [""] * len(ids)})
    if "qid" not in df.columns:
        raise InputError("missing-column", "topics need a qid column")
    text = df["text"] if "text" in df.columns else pd.Series([""] * len(df))
    return pd.DataFrame({"qid": df["qid"].astype(str).tolist(), "text": text.fillna("").astype(str).tolist()})


def in_topic_order(df: pd.DataFrame, extra: Sequence[str] = ()) -> pd.DataFrame:
    """Rows in natural topic order, then by the ``extra`` columns (numeric), stably."""
    if len(df) == 0:
        return df.reset_index(drop=True)
    codes, uniques = pd.factorize(df["qid"], sort=False)
    rank = {q: i for i, q in enumerate(qid_order(uniques.tolist()))}
    key = np.array([rank[q] for q in uniques.tolist()], np.int64)[codes]
    order = np.lexsort(tuple(df[c].to_numpy() for c in reversed(list(extra))) + (key,))
    return df.take(order).reset_index(drop=True)
