"""What the preference modules share: pair identity, pool items and run tops, stable seeding,
table conversion."""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.errors import InputError
from qrelkit.io.classes import map_to_classes
from qrelkit.io.keys import stable_int
from qrelkit.io.order import qid_order

#: Name of the "perfect run" (a known relevant passage, the qrel, at rank 1) in win-ratio tables
#: and leaderboards.
PERFECT = "perfect"

STR_LIST = pa.list_(pa.string())


def rng_for(seed: int, *parts: object) -> np.random.Generator:
    """A generator that depends only on ``seed`` and ``parts`` (not on processing order)."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFFFFFFFFFF, stable_int(*parts)])


def unit_hash(seed: int, *parts: object) -> float:
    """A number in [0, 1) fixed by ``seed`` and ``parts``."""
    return stable_int(seed, *parts) / 2.0**64


def ordered(a: str, b: str) -> tuple[str, str]:
    """The two ids of a pair in ascending order."""
    return (a, b) if a <= b else (b, a)


def pair_id(qid: str, a: str, b: str) -> str:
    """Identity of the unordered pair {a, b} for topic ``qid``: the same in every round."""
    x, y = ordered(str(a), str(b))
    return hashlib.sha256(f"{qid}\x1f{x}\x1f{y}".encode()).hexdigest()[:16]


def as_list(v: Any) -> list[str]:
    """A list of strings from a list/array cell, or a comma-joined text cell (CSV round trip)."""
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return []
    if isinstance(v, str):
        return [x for x in (s.strip() for s in v.split(",")) if x]
    return [str(x) for x in v]


def qid_rank(qids: Iterable[str]) -> dict[str, int]:
    """Topic id -> its position in natural topic order (:func:`~qrelkit.io.order.qid_order`)."""
    return {q: i for i, q in enumerate(qid_order(set(qids)))}


def sort_frame(df: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Sort by topic (natural order) then ``keys``; stable and index reset."""
    if df.empty:
        return df.reset_index(drop=True)
    order = qid_rank(df["qid"])
    return (df.assign(_q=df["qid"].map(order)).sort_values(["_q", *keys], kind="stable")
            .drop(columns="_q").reset_index(drop=True))


def need_columns(df: pd.DataFrame | pa.Table, cols: Sequence[str], what: str, file: str | None = None) -> None:
    """Raise ``missing-column`` (naming ``what`` and ``file``) unless ``df`` has every column of ``cols``."""
    names = df.column_names if isinstance(df, pa.Table) else list(df.columns)
    missing = [c for c in cols if c not in names]
    if missing:
        raise InputError("missing-column", f"{what} lacks column(s) {', '.join(missing)}", file=file)


def to_arrow(df: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """``df`` as a pyarrow table of exactly ``schema`` (list cells as lists of strings)."""
    cols = {}
    for f in schema:
        v = df[f.name] if f.name in df.columns else pd.Series([None] * len(df))
        if pa.types.is_list(f.type) and pa.types.is_string(f.type.value_type):
            cols[f.name] = pa.array([as_list(x) for x in v], f.type)
        elif pa.types.is_list(f.type):
            cols[f.name] = pa.array([None if x is None else list(x) for x in v], f.type)
        elif pa.types.is_string(f.type):
            cols[f.name] = pa.array([None if (x is None or x is pd.NA or (isinstance(x, float) and np.isnan(x)))
                                     else str(x) for x in v], f.type)
        else:
            vals = [None if (x is None or x is pd.NA or (isinstance(x, float) and np.isnan(x))) else x for x in v]
            cols[f.name] = pa.array(vals, f.type)
    return pa.table(cols, schema=schema)


# --------------------------------------------------------------------------- pools


def pool_items(pool: pa.Table, classes: pa.Table | None = None) -> pd.DataFrame:
    """One row per (topic, item) of a pool: ``qid, docid, in_qrels, runs`` where ``runs`` lists
    the runs whose first passage (rank 1) it is. With ``classes`` items are mapped to class ids
    and merged (provenance united, ``in_qrels`` if any member was a qrel). Sorted by topic
    (natural order) then docid."""
    need_columns(pool, ["qid", "docid"], "pool table")
    qids = pool["qid"].to_pylist()
    docs = map_to_classes(pc.cast(pool["docid"], pa.string()), classes).to_pylist()
    inq = pool["in_qrels"].to_pylist() if "in_qrels" in pool.column_names else [False] * pool.num_rows
    prov = pool["runs"].to_pylist() if "runs" in pool.column_names else [None] * pool.num_rows
    merged: dict[tuple[str, str], list] = {}
    for q, d, iq, pr in zip(qids, docs, inq, prov):
        ent = merged.setdefault((str(q), str(d)), [False, set()])
        ent[0] = ent[0] or bool(iq)
        if isinstance(pr, str):  # text provenance "run:rank,run:rank"
            pr = [x for x in pr.split(",") if x]
        for item in pr if pr is not None else []:
            if isinstance(item, dict):
                if item.get("rank") in (1, None):
                    ent[1].add(str(item["run"]))
            else:  # text provenance "run:rank"
                run, _, rank = str(item).rpartition(":")
                if rank == "1":
                    ent[1].add(run)
    rows = [(q, d, iq, sorted(rs)) for (q, d), (iq, rs) in merged.items()]
    df = pd.DataFrame(rows, columns=["qid", "docid", "in_qrels", "runs"])
    return sort_frame(df, ["docid"])


def run_tops(items: pd.DataFrame, *, perfect: str | None = PERFECT) -> pd.DataFrame:
    """Each run's first passage per topic (``run, qid, docid``) from :func:`pool_items`, plus the
    perfect run: per topic the first known relevant item (``in_qrels``) by docid, i.e. the first
    qrel of the (sorted) qrels file, as the paper chose one qrel per query."""
    rows = [(r, q, d) for q, d, rs in zip(items["qid"], items["docid"], items["runs"]) for r in rs]
    tops = pd.DataFrame(rows, columns=["run", "qid", "docid"])
    dup = tops.duplicated(["run", "qid"])
    if dup.any():
        r = tops[dup].iloc[0]
        raise InputError("multiple-tops", f"run {r['run']} has more than one first passage for topic {r['qid']} "
                         "(is this a top-1 pool?)")
    if perfect is not None:
        if perfect in set(tops["run"]):
            raise InputError("run-name", f"a run is named {perfect!r}, the name of the perfect run")
        q = items[items["in_qrels"]].sort_values(["qid", "docid"]).drop_duplicates("qid")
        tops = pd.concat([tops, pd.DataFrame({"run": perfect, "qid": q["qid"], "docid": q["docid"]})],
                         ignore_index=True)
    return tops.reset_index(drop=True)


def as_frame(table: pa.Table | pd.DataFrame) -> pd.DataFrame:
    """``table`` as a pandas frame (a frame is returned as it is, not copied)."""
    return table if isinstance(table, pd.DataFrame) else table.to_pandas()
