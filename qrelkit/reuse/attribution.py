"""Who contributed each judged document: the attribution behind leave-out simulations.

A judged document (a qrels row with grade >= 0) was *contributed* by the runs that put it in the
pool. Two definitions are offered (``uniqueness``):

``pooled``
    the **pooled** runs that retrieved it within their pool depth — the pool's provenance, read
    from a qrelkit pool table or recomputed from the runs at the given per-run depths in
    canonical order (score descending, ties by docid descending);
``submitted``
    **every submitted** run (pooled or not) that retrieved it within the pool depth (a run's own
    depth when ``per_run_depth`` names it), plus the pool's provenance when a pool is given.

A document is *unique* to a unit (a group, a run, or a run type) when exactly one unit
contributed it. Documents in the qrels that no run contributed — found by CAL, fractional pools,
propagation to near-duplicates, or by runs that are not in the study — are *orphans*, attributed
by ``orphans``:

``shared`` (default)
    treated as found by everybody: never removed;
``retrieved``
    attributed to the runs (all submitted runs) that retrieved them within ``orphan_depth``; an
    orphan that exactly one unit retrieved is unique to it, one that nobody retrieved stays.

With near-duplicate ``classes`` the runs are deduplicated first (first hit per class, ranks
renumbered, as the TREC 2022 pool was built) and documents are compared by class id, so a
removed class takes every judged member of the class with it.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.errors import InputError
from qrelkit.evaluate.duplicates import deduped_runs
from qrelkit.io.classes import map_to_classes
from qrelkit.io.qrels import judged
from qrelkit.pooler.pools import depth_mask, match_rows
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.pooler.params import POOL
from qrelkit.reuse.params import ReuseParams

UNIQUENESS = {
    "pooled": "a document counts as contributed by the pooled runs that retrieved it within their pool depth",
    "submitted": "a document counts as contributed by every submitted run (pooled or not) that retrieved it "
                 "within the pool depth",
}
ORPHANS = {
    "shared": "judged documents that no run contributed (CAL, fractional pools, propagation, runs outside the "
              "study) are treated as shared by all units and never removed",
    "retrieved": "judged documents that no run contributed are attributed to the runs that retrieved them within "
                 "depth {depth}; one retrieved by a single unit is unique to it, one retrieved by none is shared",
}

ATTRIBUTION_SCHEMA = pa.schema([
    ("qid", pa.string()), ("docid", pa.string()), ("rel", pa.int32()), ("key", pa.string()),
    ("contributors", pa.int32()), ("owner", pa.string()), ("origin", pa.string()),
])


def unique_ints(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an integer array (a sort and a mask: numpy 2.4's ``np.unique``
    takes a hash path that is 20x slower on half a million int64)."""
    s = np.sort(np.asarray(x), kind="stable")
    if len(s) < 2:
        return s
    return s[np.concatenate(([True], s[1:] != s[:-1]))]


def _strings(col) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    return col if col.type == pa.string() else pc.cast(col, pa.string())


def within_depth(
    runs: pa.Table,
    depth: int,
    *,
    per_run_depth: Mapping[str, int] | None = None,
    only: Iterable[str] | None = None,
    classes: pa.Table | None = None,
) -> pa.Table:
    """``(qid, docid, run)`` of every document a run retrieved within its depth (``per_run_depth``
    overrides ``depth`` for the runs it names). ``runs`` must be in canonical order (ranks as
    :func:`qrelkit.io.runs.read_runs` recomputes them). ``only`` restricts to the named runs; with
    ``classes`` runs are deduplicated first and ``docid`` holds class ids."""
    if depth < 1:
        raise InputError("bad-option", f"depth must be >= 1, got {depth}")
    t = runs
    if only is not None:
        keep = sorted(set(only))
        if set(pc.unique(t["run"]).to_pylist()) - set(keep):  # skip the filter when it keeps every run
            t = t.filter(pc.is_in(t["run"], value_set=pa.array(keep, pa.string())))
    if classes is not None and t.num_rows:
        t = deduped_runs(t, classes)
    t = t.filter(depth_mask(t, int(depth), per_run_depth))
    return pa.table({"qid": _strings(t["qid"]), "docid": _strings(t["docid"]), "run": _strings(t["run"])})


def pool_contributions(pool: pa.Table) -> pa.Table:
    """``(qid, docid, run)`` from a pool table's provenance lists (``runs``)."""
    if "runs" not in pool.column_names:
        raise InputError("missing-column", "not a pool table (no provenance column 'runs')")
    col = pool["runs"]
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    lens = pc.fill_null(pc.list_value_length(col), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = pc.list_flatten(col)
    item = np.repeat(np.arange(pool.num_rows, dtype=np.int64), lens)
    return pa.table({
        "qid": _strings(pool["qid"]).take(pa.array(item)),
        "docid": _strings(pool["docid"]).take(pa.array(item)),
        "run": _strings(flat.field("run")),
    })


class Attribution:
    """Judged documents of the qrels with their contributing runs, ready for ownership look-ups
    under any grouping of runs into units (see :meth:`owners`).

    ``rows`` is the judged part of the qrels (``qid, docid, rel``; grade >= 0) and ``key`` the
    document key each row is compared by (its class id with classes, else its docid); ``item``
    numbers the distinct ``(qid, key)`` pairs."""

    def __init__(self, qrels: pa.Table, run_names: Sequence[str], contributions: pa.Table,
                 classes: pa.Table | None = None, orphan_contributions: pa.Table | None = None):
        q = judged(qrels)
        self.rows = pa.table({"qid": _strings(q["qid"]), "docid": _strings(q["docid"]),
                              "rel": pc.cast(q["rel"], pa.int32())})
        self.key = map_to_classes(self.rows["docid"], classes) if classes is not None else _strings(self.rows["docid"])
        keys = pa.table({"qid": self.rows["qid"], "key": self.key})
        self.items = keys.group_by(["qid", "key"], use_threads=False).aggregate([])
        self.item = match_rows(keys, self.items, ["qid", "key"])
        self.run_names = list(run_names)
        self._contrib = self._encode(contributions)
        self._orphan = self._encode(orphan_contributions) if orphan_contributions is not None else None

    @property
    def n_items(self) -> int:
        return self.items.num_rows

    def _encode(self, contrib: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """(item, run code) of every contribution to a judged item, duplicates removed."""
        if contrib.num_rows == 0 or self.n_items == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        c = pa.table({"qid": _strings(contrib["qid"]), "key": _strings(contrib["docid"])})
        it = match_rows(c, self.items, ["qid", "key"])
        rc = pc.index_in(_strings(contrib["run"]), value_set=pa.array(self.run_names, pa.string()))
        rc = pc.fill_null(rc, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        ok = (it >= 0) & (rc >= 0)
        n = max(len(self.run_names), 1)
        pair = unique_ints(it[ok] * n + rc[ok])
        return pair // n, pair % n

    @staticmethod
    def _owners(enc, unit_of_run: np.ndarray, n_units: int, n_items: int) -> tuple[np.ndarray, np.ndarray]:
        item, run = enc
        if len(item) == 0:
            return np.full(n_items, -1, np.int64), np.zeros(n_items, np.int64)
        u = unit_of_run[run]
        pair = unique_ints(item * n_units + u)
        it, un = pair // n_units, pair % n_units
        count = np.bincount(it, minlength=n_items)
        owner = np.full(n_items, -1, np.int64)
        one = count[it] == 1
        owner[it[one]] = un[one]
        return owner, count

    @declared_defaults(ReuseParams)
    def owners(self, unit_of_run: np.ndarray, n_units: int, orphans: str = AS_DECLARED) -> dict[str, np.ndarray]:
        """Per judged row: ``owner`` (the unit code that alone contributed it, -1 if none or
        several), ``contributors`` (number of contributing units) and ``origin`` code
        (0 contributed by a run, 1 orphan retrieved within the orphan depth, 2 orphan nobody
        retrieved, or any orphan under ``orphans="shared"``).

        ``unit_of_run[i]`` is the unit code of ``run_names[i]``."""
        if orphans not in ORPHANS:
            raise InputError("bad-option", f"orphans must be one of {', '.join(ORPHANS)}, got {orphans!r}")
        unit_of_run = np.asarray(unit_of_run, np.int64)
        owner, count = self._owners(self._contrib, unit_of_run, n_units, self.n_items)
        origin = np.zeros(self.n_items, np.int8)
        orphan = count == 0
        origin[orphan] = 2
        if orphans == "retrieved" and orphan.any() and self._orphan is not None:
            o_owner, o_count = self._owners(self._orphan, unit_of_run, n_units, self.n_items)
            take = orphan & (o_owner >= 0)
            owner[take] = o_owner[take]
            count[orphan] = o_count[orphan]
            origin[orphan & (o_count > 0)] = 1
        return {"owner": owner[self.item], "contributors": count[self.item], "origin": origin[self.item]}


ORIGIN_NAMES = np.array(["run", "orphan-retrieved", "orphan-shared"], dtype=object)


@declared_defaults(ReuseParams, depth=POOL["depth"])
def build_attribution(
    runs: pa.Table,
    qrels: pa.Table,
    *,
    pooled: Iterable[str] | None = None,
    uniqueness: str = AS_DECLARED,
    depth: int = AS_DECLARED,
    per_run_depth: Mapping[str, int] | None = None,
    pool: pa.Table | None = None,
    classes: pa.Table | None = None,
    orphans: str = AS_DECLARED,
    orphan_depth: int = AS_DECLARED,
) -> Attribution:
    """Collect the contributions behind ``qrels`` (see the module documentation).

    ``pooled`` names the pooled runs (default: every run). With a ``pool`` table its provenance
    gives the pooled runs' contributions; otherwise they are recomputed from ``runs`` at
    ``depth``/``per_run_depth``."""
    if uniqueness not in UNIQUENESS:
        raise InputError("bad-option", f"uniqueness must be one of {', '.join(UNIQUENESS)}, got {uniqueness!r}")
    if orphans not in ORPHANS:
        raise InputError("bad-option", f"orphans must be one of {', '.join(ORPHANS)}, got {orphans!r}")
    names = sorted(set(pc.unique(runs["run"]).to_pylist()))
    parts = []
    if pool is not None:
        parts.append(pool_contributions(pool))
    if uniqueness == "submitted":
        parts.append(within_depth(runs, depth, per_run_depth=per_run_depth, classes=classes))
    elif pool is None:
        parts.append(within_depth(runs, depth, per_run_depth=per_run_depth, classes=classes,
                                  only=names if pooled is None else pooled))
    contrib = pa.concat_tables(parts) if parts else pa.table(
        {"qid": pa.array([], pa.string()), "docid": pa.array([], pa.string()), "run": pa.array([], pa.string())})
    orphan_contrib = None
    if orphans == "retrieved":
        if orphan_depth < 1:
            raise InputError("bad-option", f"orphan depth must be >= 1, got {orphan_depth}")
        orphan_contrib = within_depth(runs, orphan_depth, classes=classes)
    return Attribution(qrels, names, contrib, classes=classes, orphan_contributions=orphan_contrib)


@declared_defaults(ReuseParams)
def attribution_table(att: Attribution, unit_of_run: np.ndarray, unit_names: Sequence[str],
                      orphans: str = AS_DECLARED) -> pa.Table:
    """One row per judged qrels row (:data:`ATTRIBUTION_SCHEMA`): its key, number of
    contributing units, the unit it is unique to (null if none) and its origin."""
    o = att.owners(unit_of_run, len(unit_names), orphans)
    names = np.asarray(list(unit_names) + [None], dtype=object)
    owner = names[np.where(o["owner"] >= 0, o["owner"], len(unit_names))]
    return pa.table({
        "qid": att.rows["qid"], "docid": att.rows["docid"], "rel": att.rows["rel"], "key": att.key,
        "contributors": pa.array(o["contributors"], pa.int32()),
        "owner": pa.array(owner, pa.string()),
        "origin": pa.array(ORIGIN_NAMES[o["origin"]], pa.string()),
    }, schema=ATTRIBUTION_SCHEMA)
