"""Assessor batches: what each assessor judges, in which order, and reading their labels back.

Batch table schema (CSV, JSONL or Parquet; one row per item shown to one assessor):

==============  ======  ===================================================================
batch_id        string  ``<qid>-1`` (the first ``first_n`` items of the topic's pool) or
                        ``<qid>-2`` (the remainder)
assessor        string  who judges this row
qid             string  topic id
query           string  topic text (empty when no topics file was given)
part            int32   1 or 2
position        int32   1-based display order within this assessor's batch (randomized)
pool_position   int32   the item's place in the pool's assessor order
docid           string  passage id (the canonical passage when the pool holds class ids)
text            string  passage text from the corpus (empty when no corpus was given)
grade           int32   empty; the assessor fills it in
==============  ======  ===================================================================

Every topic goes to ``assessors_per_item`` distinct assessors (so no assessor ever sees an item
twice), chosen greedily to balance the number of items per assessor; each assessor sees the
items of a batch in their own seeded random order.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.errors import InputError, fail_or_count, quoted
from qrelkit.io.keys import stable_int
from qrelkit.io.order import qid_order
from qrelkit.io.qrels import parse_grade
from qrelkit.io.tables import read_answer_table
from qrelkit.pooler.params import BatchParams, declared

BATCH_COLUMNS = ["batch_id", "assessor", "qid", "query", "part", "position", "pool_position", "docid", "text", "grade"]
JUDGMENT_COLUMNS = ["qid", "docid", "assessor", "grade", "batch_id"]


def assessor_names(assessors: int | Sequence[str]) -> list[str]:
    """Assessor names: ``A01``, ``A02``, ... for a count, else the given names as strings; raises
    ``bad-option`` for fewer than one or duplicate names."""
    if isinstance(assessors, int):
        if assessors < 1:
            raise InputError("bad-option", "need at least one assessor")
        return [f"A{i + 1:02d}" for i in range(assessors)]
    names = [str(a) for a in assessors]
    if not names or len(set(names)) != len(names):
        raise InputError("bad-option", "assessor names must be distinct and non-empty")
    return names


def make_batches(
    pool: pa.Table,
    *,
    first_n: int | None = None,
    assessors: int | Sequence[str] = 1,
    per_item: int | None = None,
    seed: int | None = None,
    texts: dict[str, tuple[str, str | None]] | None = None,
    queries: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Split each topic's pool into batches and assign them to assessors (see module doc).

    ``pool`` must carry ``qid``, ``docid`` and ``position`` (assessor order). ``texts`` maps
    passage id -> (text, source docid), e.g. from :func:`qrelkit.io.corpus.lookup_texts`.
    ``first_n``, ``per_item`` and ``seed`` left None are the declared ``[batch] first_n``,
    ``assessors_per_item`` and ``seed`` (:class:`~qrelkit.pooler.params.BatchParams`).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from qrelkit import make_batches
    >>> pool = pa.table({"qid": ["1", "1", "1"], "docid": ["d1", "d2", "d3"], "position": [1, 2, 3]})
    >>> batches = make_batches(pool, assessors=["ann"])
    >>> batches[["batch_id", "assessor", "docid"]].to_dict("list")
    {'batch_id': ['1-1', '1-1', '1-1'], 'assessor': ['ann', 'ann', 'ann'], 'docid': ['d3', 'd1', 'd2']}
    """
    d = declared(BatchParams, first_n=first_n, assessors_per_item=per_item, seed=seed)
    first_n, per_item, seed = d["first_n"], d["assessors_per_item"], d["seed"]
    names = assessor_names(assessors)
    if per_item < 1 or per_item > len(names):
        raise InputError("bad-option", f"assessors per item must be between 1 and {len(names)} (the assessors)")
    if first_n < 1:
        raise InputError("bad-option", "first_n must be >= 1")
    df = pool.select(["qid", "docid", "position"]).to_pandas()
    order = {q: i for i, q in enumerate(qid_order(df["qid"].unique()))}
    df = df.assign(_q=df["qid"].map(order)).sort_values(["_q", "position"], kind="stable")
    df["part"] = np.where(df["position"] <= first_n, 1, 2).astype(np.int32)
    df["batch_id"] = df["qid"] + "-" + df["part"].astype(str)

    load = {a: 0 for a in names}
    topic_assessors: dict[str, list[str]] = {}
    for qid, size in df.groupby("_q", sort=True)["qid"].agg(["first", "size"]).itertuples(index=False):
        chosen = sorted(names, key=lambda a: (load[a], names.index(a)))[:per_item]
        for a in chosen:
            load[a] += int(size)
        topic_assessors[qid] = chosen

    out = []
    for (bid, qid), items in df.groupby(["batch_id", "qid"], sort=False):
        for a in topic_assessors[qid]:
            rng = np.random.default_rng([seed, stable_int("batch", bid, a)])
            perm = rng.permutation(len(items))
            shown = items.iloc[perm]
            out.append(
                pd.DataFrame(
                    {
                        "batch_id": bid,
                        "assessor": a,
                        "qid": qid,
                        "part": shown["part"].to_numpy(),
                        "position": np.arange(1, len(shown) + 1, dtype=np.int32),
                        "pool_position": shown["position"].to_numpy().astype(np.int32),
                        "docid": shown["docid"].to_numpy(),
                    }
                )
            )
    if out:
        res = pd.concat(out, ignore_index=True)
    else:
        res = pd.DataFrame(columns=[c for c in BATCH_COLUMNS if c not in ("query", "text", "grade")])
    res["query"] = [(queries or {}).get(q, "") for q in res["qid"]] if len(res) else ""
    res["text"] = [(texts or {}).get(d, ("", None))[0] for d in res["docid"]] if len(res) else ""
    res["grade"] = pd.array([pd.NA] * len(res), dtype="Int32")
    res = res[BATCH_COLUMNS]
    res = res.astype({"batch_id": str, "assessor": str, "qid": str, "query": str, "docid": str, "text": str,
                      "part": np.int32, "position": np.int32, "pool_position": np.int32})
    return res.reset_index(drop=True)


def require_texts(pool: pa.Table, texts: dict[str, tuple[str, str | None]], *, corpus: str | os.PathLike,
                  lenient: bool = False) -> tuple[pa.Table, int]:
    """The pool rows an assessor can judge: a passage missing from the corpus, or present with an
    empty text, would be handed out blank. Strict: an ``[missing-passage]`` error naming the
    corpus, how many pool items and the first few passage ids. Lenient: those rows dropped;
    returns ``(pool, rows dropped)``. ``texts`` is :func:`qrelkit.io.corpus.lookup_texts`'s map.

    >>> import pyarrow as pa
    >>> pool = pa.table({"qid": ["1", "1", "2"], "docid": ["p1", "p2", "p2"], "position": [1, 2, 1]})
    >>> kept, dropped = require_texts(pool, {"p1": ("a text", None), "p2": (" ", None)}, corpus="c.jsonl",
    ...                               lenient=True)
    >>> kept["docid"].to_pylist(), dropped
    (['p1'], 2)
    >>> require_texts(pool, {"p1": ("a text", None)}, corpus="c.jsonl")
    Traceback (most recent call last):
    ...
    qrelkit.errors.InputError: c.jsonl: [missing-passage] 2 pool items (1 passages) have no text in this corpus (missing or empty), first: p2; --lenient drops them
    """
    docids = pool["docid"].to_pylist()
    blank = sorted({d for d in docids if not str((texts.get(d) or ("",))[0] or "").strip()})
    if not blank:
        return pool, 0
    bad = set(blank)
    keep = [d not in bad for d in docids]
    dropped = len(docids) - sum(keep)
    if not lenient:
        raise InputError("missing-passage", f"{dropped} pool items ({len(blank)} passages) have no text in this corpus "
                         f"(missing or empty), first: {', '.join(blank[:5])}; --lenient drops them", file=str(corpus))
    return pool.filter(pa.array(keep)), dropped


def batch_summary(batches: pd.DataFrame) -> pd.DataFrame:
    """Items per (assessor, batch)."""
    return (
        batches.groupby(["assessor", "batch_id"], sort=True).size().rename("items").reset_index()
    )


def import_batches(
    files: Sequence[str | os.PathLike],
    *,
    issued: pd.DataFrame | None = None,
    scale: Sequence[int] = (0, 1, 2, 3),
    lenient: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read completed batches back into a judgments table.

    Returns ``(judgments, report)``: judgments with :data:`JUDGMENT_COLUMNS` (one row per
    topic, passage and assessor), and a report with the count per rule. Rules:
    ``missing-column``, ``grade-outside-scale`` (not an integer of ``scale``), ``unknown-item``
    (not issued to that assessor in that batch; checked when ``issued`` is given), ``conflict``
    (one assessor gave one item two different grades). Rows with an empty grade are not yet
    judged and are skipped (counted as ``ungraded``). The same label imported twice counts once.
    Strict mode raises :class:`InputError` at the first error; lenient mode drops such rows
    (both grades of a conflict).

    Examples
    --------
    A batch file as :func:`make_batches` writes it, with the assessor's grades filled in:

    >>> from qrelkit import import_batches
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("ann.tsv", "batch_id\\tassessor\\tqid\\tdocid\\tgrade\\n"
    ...                 "1-1\\tann\\t1\\td1\\t2\\n1-1\\tann\\t1\\td2\\t0\\n")
    >>> judgments, report = import_batches([path])
    >>> judgments.to_dict("list")
    {'qid': ['1', '1'], 'docid': ['d1', 'd2'], 'assessor': ['ann', 'ann'], 'grade': [2, 0], 'batch_id': ['1-1', '1-1']}
    >>> report.to_dict("list")
    {'rule': ['imported', 'repeated'], 'count': [2, 0]}
    """
    allowed = {int(s) for s in scale}
    counts: dict[str, int] = {}
    frames = []
    issued_keys = None
    if issued is not None:
        issued_keys = set(
            zip(issued["batch_id"].astype(str), issued["assessor"].astype(str), issued["qid"].astype(str), issued["docid"].astype(str))
        )

    def fail(rule: str, msg: str, path: Path, line: int | None) -> None:
        fail_or_count(counts, lenient, rule, msg, str(path), line)

    for f in files:
        path = Path(f)
        df, offset = read_answer_table(path, ("batch_id", "assessor", "qid", "docid", "grade"),
                                       what="completed batch", lacks="completed batch lacks column(s)")
        keep = []
        for i, (bid, a, q, d, g) in enumerate(
            zip(df["batch_id"], df["assessor"], df["qid"], df["docid"], df["grade"])
        ):
            line = i + offset
            g = "" if g is None or (isinstance(g, float) and np.isnan(g)) or g is pd.NA else str(g).strip()
            if g == "":
                counts["ungraded"] = counts.get("ungraded", 0) + 1
                continue
            grade = parse_grade(g)
            if grade is None:
                fail("grade-outside-scale", f"grade {quoted(g)} is not an integer of the scale {sorted(allowed)}", path, line)
                continue
            if grade not in allowed:
                fail("grade-outside-scale", f"grade {grade} is outside the scale {sorted(allowed)}", path, line)
                continue
            if issued_keys is not None and (str(bid), str(a), str(q), str(d)) not in issued_keys:
                fail("unknown-item", f"topic {q} passage {d} was not issued to {a} in batch {bid}", path, line)
                continue
            keep.append((str(q), str(d), str(a), grade, str(bid), str(path), line))
        frames.append(pd.DataFrame(keep, columns=JUDGMENT_COLUMNS + ["_file", "_line"]))
    all_rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=JUDGMENT_COLUMNS + ["_file", "_line"])
    n_before = len(all_rows)
    all_rows = all_rows.drop_duplicates(["qid", "docid", "assessor", "grade"], keep="first")
    counts["repeated"] = n_before - len(all_rows)
    dup = all_rows.duplicated(["qid", "docid", "assessor"], keep=False)
    if dup.any():
        first = all_rows[dup].iloc[1]
        if not lenient:
            raise InputError(
                "conflict",
                f"assessor {first['assessor']} gave topic {first['qid']} passage {first['docid']} two different grades",
                file=first["_file"], line=int(first["_line"]),
            )
        counts["conflict"] = counts.get("conflict", 0) + int(dup.sum())
        all_rows = all_rows[~dup]
    order = {q: i for i, q in enumerate(qid_order(all_rows["qid"].unique()))}
    out = (
        all_rows.assign(_q=all_rows["qid"].map(order))
        .sort_values(["_q", "docid", "assessor"], kind="stable")[JUDGMENT_COLUMNS]
        .astype({"grade": np.int32})
        .reset_index(drop=True)
    )
    counts["imported"] = len(out)
    report = pd.DataFrame(sorted(counts.items()), columns=["rule", "count"])
    return out, report


def import_empty_reason(judgments: pd.DataFrame, counts: dict[str, int]) -> str | None:
    """Why an import (:func:`import_batches`) gave no judgment, from its report's ``counts``
    (rule -> count), or ``None`` when it gave some.

    >>> import_empty_reason(pd.DataFrame(columns=JUDGMENT_COLUMNS), {"ungraded": 12, "repeated": 0})
    'no judgment imported (12 rows ungraded)'
    """
    if len(judgments):
        return None
    why = ", ".join(f"{n} rows {r}" for r, n in sorted(counts.items()) if int(n))
    return "no judgment imported" + (f" ({why})" if why else " (no rows)")


