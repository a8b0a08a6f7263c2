"""Judgment pools with provenance.

Every pool is a table with one row per (topic, pooled item)::

    qid: string        docid: string (the class id when near-duplicate classes are given)
    position: int32    1-based place in the assessor order within the topic
    min_rank: int32    the smallest rank at which any contributing run retrieved it (null if none)
    n_runs: int32      how many runs retrieved it within their pool depth
    runs: list<struct<run: string, rank: int32>>  every (run, rank), by rank then run name

plus, when qrels are given, ``judged: bool`` and ``rel: int32`` (null when unjudged).

**Assessor order** (``position``) within a topic: smallest rank first, then the number of
retrieving runs (more first), then docid ascending. Topics come in natural order.

Runs must be in canonical order (score descending, docid descending; see
:mod:`qrelkit.io.runs`), which is what makes "rank" well defined.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.errors import InputError
from qrelkit.io.classes import dedupe_runs, map_to_classes
from qrelkit.io.qrels import judged as judged_only
from qrelkit.io.order import block_ranks, natural_codes, qid_order
from qrelkit.io.strings import string_keys
from qrelkit.pooler.params import FusedParams, PoolParams, Top1Params, declared

PROVENANCE_TYPE = pa.list_(pa.struct([("run", pa.string()), ("rank", pa.int32())]))
JUDGED_POLICIES = ("keep", "mark", "drop")


def filter_runs(runs: pa.Table, names: Iterable[str]) -> pa.Table:
    """Only the rows of the named runs (canonical order is kept)."""
    return runs.filter(pc.is_in(runs["run"], value_set=pa.array(sorted(set(names)), pa.string())))


def depth_mask(runs: pa.Table, depth: int, per_run_depth: Mapping[str, int] | None) -> pa.Array:
    """Rows of ``runs`` within the pool depth: ``rank <= depth``, or the run's own depth in
    ``per_run_depth``."""
    if not per_run_depth:
        return pc.less_equal(runs["rank"], pa.scalar(depth, pa.int32()))  # no cast of the column
    names = sorted(per_run_depth)
    idx = pc.index_in(runs["run"], value_set=pa.array(names, pa.string()))
    depths = pa.array([int(per_run_depth[n]) for n in names], pa.int32())
    limit = pc.fill_null(pc.take(depths, idx), depth)
    return pc.less_equal(runs["rank"], limit)


def _codes(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    enc = pc.dictionary_encode(values)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    return enc.indices.to_numpy()


def group_provenance(cand: pa.Table) -> pa.Table:
    """Group (run, qid, docid, rank) rows by (qid, docid): min rank, run count, provenance list
    (by rank, then run name). Rows come grouped by topic (natural order); call
    :func:`order_pool` for the assessor order."""
    if cand.num_rows == 0:
        return pa.table(
            {
                "qid": pa.array([], pa.string()),
                "docid": pa.array([], pa.string()),
                "min_rank": pa.array([], pa.int32()),
                "n_runs": pa.array([], pa.int32()),
                "runs": pa.array([], PROVENANCE_TYPE),
            }
        )
    qcodes, topics = natural_codes(cand["qid"])
    renc = pc.dictionary_encode(cand["run"]).combine_chunks()
    names = renc.dictionary.to_pylist()
    by_name = np.empty(len(names), np.int32)
    by_name[np.argsort(np.array(names, dtype=object), kind="stable")] = np.arange(len(names), dtype=np.int32)
    rcodes = by_name[renc.indices.to_numpy()]
    rank_np = cand["rank"].to_numpy()
    docid = cand["docid"].combine_chunks()
    found = _keyed_order(docid, qcodes, rank_np, rcodes, len(names))
    order, new = found if found is not None else _coded_order(docid, qcodes, rank_np, rcodes, len(names))
    n = len(order)
    starts = np.flatnonzero(new)
    offsets = np.append(starts, n).astype(np.int32)
    heads = order[starts]
    rank = pa.array(rank_np[order]).cast(pa.int32())
    # strings from the few distinct values (topics, run names): no gather from the whole column
    run = pa.array(sorted(names), pa.string()).take(pa.array(rcodes[order]))
    prov = pa.ListArray.from_arrays(
        pa.array(offsets), pa.StructArray.from_arrays([run, rank], names=["run", "rank"])
    ).cast(PROVENANCE_TYPE)
    return pa.table(
        {
            "qid": pa.array(topics, pa.string()).take(pa.array(qcodes[heads])),
            "docid": docid.take(pa.array(heads)),
            "min_rank": rank.take(pa.array(starts)),
            "n_runs": pa.array(np.diff(offsets), pa.int32()),
            "runs": prov,
        }
    )


def _keyed_order(docid, qcodes: np.ndarray, rank: np.ndarray, rcodes: np.ndarray,
                 nruns: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The row order of :func:`group_provenance` (by topic, document, rank, run name) and where
    each (topic, document) group starts, from one uint64 key per row: the topic code, a key of the
    docid's bytes (:func:`qrelkit.io.strings.string_keys`, cut to the bits left) and (rank, run).
    Groups are then checked to hold one docid each (compared as strings); ``None`` when a key is
    shared by two docids, or the parts do not fit in 64 bits (then :func:`_coded_order`)."""
    if int(rank.min()) < 0:
        return None
    sec_bits = max(1, int((int(rank.max()) + 1) * nruns - 1).bit_length())
    q_bits = max(1, int(qcodes.max()).bit_length())
    h_bits = 64 - q_bits - sec_bits
    if h_bits < 32:
        return None
    h = string_keys(docid) >> np.uint64(64 - h_bits)  # its top bits: every byte moves them
    key = qcodes.astype(np.uint64) << np.uint64(64 - q_bits)
    key |= h << np.uint64(sec_bits)
    key |= rank.astype(np.uint64) * np.uint64(nruns) + rcodes.astype(np.uint64)
    order = np.argsort(key)
    group = key[order] >> np.uint64(sec_bits)
    n = len(order)
    new = np.ones(n, dtype=bool)
    new[1:] = group[1:] != group[:-1]
    inside = ~new[1:]
    if inside.any():
        d = pc.take(docid, pa.array(order))
        same = pc.equal(d.slice(1), d.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        if not same[inside].all():
            return None
    return order, new


def _coded_order(docid, qcodes: np.ndarray, rank: np.ndarray, rcodes: np.ndarray,
                 nruns: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_keyed_order` with the docids dictionary-encoded: exact whatever the docids."""
    dcodes = _codes(docid)
    # integer keys: group by (topic, docid), provenance by (rank, run name); one int64 key when
    # the four fit in 62 bits, else lexsort
    spans = [int(qcodes.max()) + 1, int(dcodes.max()) + 1, int(rank.max()) + 1, nruns]
    if int(rank.min()) >= 0 and spans[0] * spans[1] * spans[2] * spans[3] < (1 << 62):
        key = ((qcodes.astype(np.int64) * spans[1] + dcodes) * spans[2] + rank) * spans[3] + rcodes
        order = np.argsort(key, kind="stable")
    else:
        order = np.lexsort((rcodes, rank, dcodes, qcodes))
    q = qcodes[order]
    dc = dcodes[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (q[1:] != q[:-1]) | (dc[1:] != dc[:-1])
    return order, new


def order_pool(pool: pa.Table) -> pa.Table:
    """Sort a pool into assessor order and (re)number ``position`` within each topic."""
    if pool.num_rows == 0:
        cols = {name: pool[name] for name in pool.column_names if name != "position"}
        out = pa.table(cols)
        return out.add_column(2, "position", pa.array([], pa.int32()))
    qcodes, _ = natural_codes(pool["qid"])
    big = np.iinfo(np.int32).max
    min_rank = pc.fill_null(pool["min_rank"], big).to_numpy()
    key = pa.table(
        {"q": qcodes, "m": min_rank, "n": pc.negate(pool["n_runs"]), "d": pool["docid"]}
    )
    idx = pc.sort_indices(key, sort_keys=[("q", "ascending"), ("m", "ascending"), ("n", "ascending"), ("d", "ascending")])
    out = pool.take(idx)
    if "position" in out.column_names:
        out = out.drop_columns(["position"])
    pos = block_ranks(qcodes[idx.to_numpy()])
    return out.add_column(2, "position", pa.array(pos, pa.int32()))


def match_rows(left: pa.Table, right: pa.Table, keys: list[str]) -> np.ndarray:
    """For each row of ``left``, the index of the row of ``right`` with equal ``keys`` (-1 if
    none). ``right`` must be unique on ``keys``."""
    lt = pa.table({k: left[k] for k in keys}).append_column("_l", pa.array(np.arange(left.num_rows, dtype=np.int64)))
    rt = pa.table({k: right[k] for k in keys}).append_column("_r", pa.array(np.arange(right.num_rows, dtype=np.int64)))
    j = lt.join(rt, keys=keys, join_type="inner", use_threads=False)
    out = np.full(left.num_rows, -1, dtype=np.int64)
    out[j["_l"].to_numpy()] = j["_r"].to_numpy()
    return out


def attach_judgments(pool: pa.Table, qrels: pa.Table | None, *, judged: str | None = None,
                     classes: pa.Table | None = None) -> pa.Table:
    """Mark (``judged``, ``rel``) or drop pool items already judged in ``qrels`` (``judged`` None:
    the declared ``[pool] judged``, mark).

    Negative grades ("pooled, unjudged") do not count as judged. With ``classes`` the qrels are
    mapped to class ids first, so a judged member marks its whole class (the highest grade wins).
    """
    judged = declared(PoolParams, judged=judged)["judged"]
    if judged not in JUDGED_POLICIES:
        raise InputError("bad-option", f"judged must be one of {JUDGED_POLICIES}")
    if qrels is None or judged == "keep":
        return pool
    q = judged_only(qrels)
    docs = map_to_classes(q["docid"], classes) if classes is not None else q["docid"]
    qk = pa.table({"qid": q["qid"], "docid": docs, "rel": q["rel"]}).group_by(["qid", "docid"]).aggregate(
        [("rel", "max")]
    ).rename_columns(["qid", "docid", "rel"])
    m = match_rows(pool, qk, ["qid", "docid"])
    found = m >= 0
    rel = pc.take(qk["rel"], pa.array(np.where(found, m, 0))).to_numpy(zero_copy_only=False)
    base = pool.drop_columns([c for c in ("rel", "judged") if c in pool.column_names])
    joined = base.append_column("judged", pa.array(found)).append_column(
        "rel", pa.array(rel, pa.int32(), mask=~found)
    )
    if judged == "drop":
        joined = joined.filter(pc.invert(joined["judged"])).drop_columns(["rel", "judged"])
    return order_pool(joined)


def depth_pool(
    runs: pa.Table,
    depth: int | None = None,
    *,
    per_run_depth: Mapping[str, int] | None = None,
    classes: pa.Table | None = None,
    qrels: pa.Table | None = None,
    judged: str | None = None,
) -> pa.Table:
    """Depth-k pool of ``runs`` (already restricted to the pooled runs) with provenance.

    ``per_run_depth`` overrides ``depth`` for the runs it names. With ``classes`` (docid ->
    class id), runs are deduplicated first as TREC 2022 did (first hit per class kept, ranks
    renumbered) and the pool holds class ids. With ``qrels``, already judged items are marked
    (``judged="mark"``) or removed (``"drop"``). ``depth`` and ``judged`` left None are the
    declared ``[pool] depth`` and ``judged`` (10, mark).

    Examples
    --------
    Two runs that rank ``p1 p2 p3`` and ``p3 p2 p1`` on three topics:

    >>> from qrelkit import depth_pool
    >>> from qrelkit.simulate.toy import toy_runs
    >>> pool = depth_pool(toy_runs(), 1)
    >>> pool.column_names
    ['qid', 'docid', 'position', 'min_rank', 'n_runs', 'runs']
    >>> pool["docid"].to_pylist()
    ['p1', 'p3', 'p1', 'p3', 'p1', 'p3']
    >>> pool["runs"][0].as_py()
    [{'run': 'a', 'rank': 1}]
    """
    depth = declared(PoolParams, depth=depth)["depth"]
    if depth < 1:
        raise InputError("bad-option", f"pool depth must be >= 1, got {depth}")
    if classes is not None:
        runs = dedupe_runs(runs, classes)
        runs = runs.set_column(runs.column_names.index("docid"), "docid", runs["class_id"]).drop_columns(["class_id"])
    cand = runs.select(["run", "qid", "docid", "rank"]).filter(depth_mask(runs, depth, per_run_depth))
    pool = order_pool(group_provenance(cand))
    return attach_judgments(pool, qrels, judged=judged, classes=classes)


PERFECT_RUN = "qrels"


def top1_pool(
    runs: pa.Table,
    *,
    qrels: pa.Table | None = None,
    perfect_min_rel: int | None = None,
    perfect: str | None = None,
    classes: pa.Table | None = None,
) -> pa.Table:
    """Shallow top-1 pool: every run's first passage per topic, plus (with ``qrels``) each topic's
    known relevant passages (grade >= ``perfect_min_rel``), the "perfect run".

    ``perfect="all"`` adds every such qrel (sparse MS MARCO-style labels: usually one per topic);
    ``"best"`` only those with the topic's highest grade (graded collections). Left None, they are
    the declared ``[top1]`` values (1, all).

    Adds ``in_qrels: bool``. A passage only the qrels contribute has ``n_runs`` 0 and a null
    ``min_rank``; ``runs`` lists real runs only.

    Examples
    --------
    Two runs that rank ``p1 p2 p3`` and ``p3 p2 p1`` on three topics; ``p2`` and ``p3`` are
    relevant to topic 3:

    >>> from qrelkit import top1_pool
    >>> from qrelkit.simulate.toy import toy_qrels, toy_runs
    >>> pool = top1_pool(toy_runs(), qrels=toy_qrels())
    >>> pool.slice(4).select(["qid", "docid", "n_runs", "in_qrels"]).to_pydict()  # topic 3
    {'qid': ['3', '3', '3'], 'docid': ['p1', 'p3', 'p2'], 'n_runs': [1, 1, 0], 'in_qrels': [False, True, True]}
    """
    pool = depth_pool(runs, 1, classes=classes)
    p = declared(Top1Params, perfect_min_rel=perfect_min_rel, perfect=perfect)
    perfect_min_rel, perfect = p["perfect_min_rel"], p["perfect"]
    if qrels is None:
        return pool.append_column("in_qrels", pa.array(np.zeros(pool.num_rows, bool)))
    if perfect not in ("all", "best"):
        raise InputError("bad-option", f"perfect must be 'all' or 'best', got {perfect!r}")
    rel = qrels.filter(pc.greater_equal(qrels["rel"], perfect_min_rel))
    if perfect == "best" and rel.num_rows:
        best = rel.group_by("qid").aggregate([("rel", "max")])
        m = match_rows(rel, best, ["qid"])
        rel = rel.filter(pc.equal(rel["rel"], pc.take(best["rel_max"], pa.array(m))))
    docs = map_to_classes(rel["docid"], classes) if classes is not None else rel["docid"]
    perfect = pa.table({"qid": rel["qid"], "docid": docs}).group_by(["qid", "docid"]).aggregate([])
    m = match_rows(perfect, pool, ["qid", "docid"])
    in_qrels = np.zeros(pool.num_rows, bool)
    in_qrels[m[m >= 0]] = True
    extra = perfect.filter(pa.array(m < 0))
    n = extra.num_rows
    add = pa.table(
        {
            "qid": extra["qid"],
            "docid": extra["docid"],
            "min_rank": pa.nulls(n, pa.int32()),
            "n_runs": pa.array(np.zeros(n, np.int32)),
            "runs": pa.array([[]] * n, PROVENANCE_TYPE),
            "in_qrels": pa.array(np.ones(n, bool)),
        }
    )
    base = pool.drop_columns(["position"]).append_column("in_qrels", pa.array(in_qrels))
    return order_pool(pa.concat_tables([base, add.cast(base.schema)]))


def pool_size_distribution(pool: pa.Table) -> dict:
    """Pool sizes per topic: a ``{"sizes": {qid: n}, "histogram": {size: topics}, "mean",
    "median", "min", "max", "topics", "total"}`` summary (docs/protocol.md section 2)."""
    vc = pc.value_counts(pool["qid"])
    qids = vc.field("values").to_pylist()
    counts = vc.field("counts").to_numpy()
    if len(counts) == 0:
        return {"sizes": {}, "histogram": {}, "mean": 0.0, "median": 0.0, "min": 0, "max": 0, "topics": 0, "total": 0}
    sizes = dict(zip(qids, counts.tolist()))
    hist_vals, hist_counts = np.unique(counts, return_counts=True)
    return {
        "sizes": {q: sizes[q] for q in qid_order(qids)},
        "histogram": {int(v): int(c) for v, c in zip(hist_vals, hist_counts)},
        "mean": float(counts.mean()),
        "median": float(np.median(counts)),
        "min": int(counts.min()),
        "max": int(counts.max()),
        "topics": len(counts),
        "total": int(counts.sum()),
    }


def fused_pool(
    runs: pa.Table,
    take: int,
    *,
    method: str | None = None,
    k: float | None = None,
    p: float | None = None,
    classes: pa.Table | None = None,
    qrels: pa.Table | None = None,
    judged: str | None = None,
) -> pa.Table:
    """Take-N pool by rank fusion over all runs' full rankings, per topic.

    ``rrf``: score = sum over runs of 1 / (k + rank); ``rbp``: score = sum of (1 - p) p^(rank-1)
    (the RBP weight of the rank). The ``take`` items with the highest fused score per topic
    enter the pool (ties by docid ascending). Adds ``fused_score``; ``position`` follows the
    fused score, and provenance lists every run that retrieved the item at any rank.
    Works with any qid (strings included). ``method``, ``k``, ``p`` and ``judged`` left None are
    the declared ``[fused] method``, ``rrf_k``, ``rbp_p`` and ``[pool] judged``.

    Examples
    --------
    Two runs that rank ``p1 p2 p3`` and ``p3 p2 p1``: ``p1`` and ``p3`` (ranks 1 and 3) fuse
    above ``p2`` (rank 2 twice):

    >>> from qrelkit import fused_pool
    >>> from qrelkit.simulate.toy import toy_runs
    >>> pool = fused_pool(toy_runs(), 2, method="rrf")
    >>> pool["docid"].to_pylist()
    ['p1', 'p3', 'p1', 'p3', 'p1', 'p3']
    """
    f = declared(FusedParams, method=method, rrf_k=k, rbp_p=p)
    method, k, p, judged = f["method"], f["rrf_k"], f["rbp_p"], declared(PoolParams, judged=judged)["judged"]
    if method not in ("rrf", "rbp"):
        raise InputError("bad-option", f"fusion method must be rrf or rbp, got {method!r}")
    if take < 1:
        raise InputError("bad-option", f"take must be >= 1, got {take}")
    if classes is not None:
        runs = dedupe_runs(runs, classes)
        runs = runs.set_column(runs.column_names.index("docid"), "docid", runs["class_id"]).drop_columns(["class_id"])
    rank = runs["rank"].to_numpy().astype(np.float64)
    w = 1.0 / (k + rank) if method == "rrf" else (1.0 - p) * np.power(p, rank - 1.0)
    grouped = group_provenance(runs)
    scores = (
        pa.table({"qid": runs["qid"], "docid": runs["docid"], "w": pa.array(w)})
        .group_by(["qid", "docid"], use_threads=False)
        .aggregate([("w", "sum")])
        .rename_columns(["qid", "docid", "fused_score"])
    )
    m = match_rows(grouped, scores, ["qid", "docid"])
    pool = grouped.append_column("fused_score", pc.take(scores["fused_score"], pa.array(m)))
    qcodes, _ = natural_codes(pool["qid"])
    # round away float summation-order noise before ranking
    fs = np.round(pool["fused_score"].to_numpy(), 12)
    key = pa.table({"q": qcodes, "s": fs, "d": pool["docid"]})
    idx = pc.sort_indices(key, sort_keys=[("q", "ascending"), ("s", "descending"), ("d", "ascending")])
    pool = pool.take(idx)
    pos = block_ranks(qcodes[idx.to_numpy()])
    keep = pos <= take
    pool = pool.filter(pa.array(keep))
    pool = pool.set_column(pool.column_names.index("fused_score"), "fused_score", pa.array(fs[idx.to_numpy()][keep]))
    pool = pool.add_column(2, "position", pa.array(pos[keep], pa.int32()))
    out = pool.select(["qid", "docid", "position", "min_rank", "n_runs", "runs", "fused_score"])
    if qrels is not None and judged != "keep":
        marked = attach_judgments(out, qrels, judged=judged, classes=classes)
        # attach_judgments re-sorts by rank; restore fused order
        qc, _ = natural_codes(marked["qid"])
        key = pa.table({"q": qc, "s": marked["fused_score"], "d": marked["docid"]})
        idx = pc.sort_indices(key, sort_keys=[("q", "ascending"), ("s", "descending"), ("d", "ascending")])
        marked = marked.take(idx).drop_columns(["position"])
        out = marked.add_column(2, "position", pa.array(block_ranks(qc[idx.to_numpy()]), pa.int32()))
    return out
