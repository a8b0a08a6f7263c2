"""A stored near-duplicate index and incremental assignment of new passages.

The index is a folder: ``signatures.npy`` (uint32[n, num_perm], memory-mapped on load),
``classes.parquet`` (the class table, corpus order, with the parameters in its metadata).
New passages (a new run surfaced them) are signed, banded together with the stored signatures
(band keys are cheap; nothing old is re-tokenized or re-signed) and:

* join the class of the first stored passage (corpus order) they are verified against —
  existing classes are never merged or renamed, so labels on canonicals stay valid;
* otherwise form classes among themselves (connected components, first new passage canonical).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from qrelkit.dedupe import lsh
from qrelkit.dedupe.cluster import CLASS_TABLE_SCHEMA, Clustering, DedupeParams, sign_corpus
from qrelkit.errors import InputError
from qrelkit.io.atomic import atomic_path
from qrelkit.io.tables import read_metadata, write_table


def save_index(result: Clustering, sig: np.ndarray, folder: str | os.PathLike) -> Path:
    """Write signatures and classes to ``folder`` (atomically per file)."""
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    with atomic_path(d / "signatures.npy") as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, sig)
    write_table(result.classes, d / "classes.parquet", kind="dedupe-classes", params=result.params.as_dict())
    return d


def load_index(folder: str | os.PathLike) -> tuple[pa.Table, np.ndarray, DedupeParams]:
    """A stored index (the folder described above): its class table, its signatures (memory-mapped)
    and the parameters it was built with; raises ``missing-index`` or ``bad-index``."""
    d = Path(folder)
    for name in ("signatures.npy", "classes.parquet"):
        if not (d / name).exists():
            raise InputError("missing-index", f"no {name} in the index folder", file=str(d))
    meta = read_metadata(d / "classes.parquet")
    params = DedupeParams(**meta.get("params", {}))
    sig = np.load(d / "signatures.npy", mmap_mode="r")
    classes = pq.read_table(d / "classes.parquet")
    if sig.shape != (classes.num_rows, params.num_perm):
        raise InputError("bad-index", "signatures and classes do not match", file=str(d))
    return classes, sig, params


def assign_new(corpus: str | os.PathLike | pa.Table, folder: str | os.PathLike) -> tuple[pa.Table, dict]:
    """Classes for the passages of ``corpus`` that the index does not hold yet.

    Returns the class table of the new passages (their class ids point at stored canonicals or at
    new ones) and a summary. Passages already in the index are skipped.
    """
    classes, old_sig, params = load_index(folder)
    signed = sign_corpus(corpus, params)
    known = pc.is_in(signed.pids, value_set=classes["docid"]).to_numpy(zero_copy_only=False)
    keep = ~known
    new_pids = signed.pids.filter(pa.array(keep))
    new_sig = np.ascontiguousarray(signed.sig[keep])
    new_nw = signed.nwords[keep]
    n_old, n_new = old_sig.shape[0], new_sig.shape[0]
    if n_new == 0:
        return CLASS_TABLE_SCHEMA.empty_table(), {"new_passages": 0, "joined_existing": 0, "new_classes": 0}
    allsig = np.concatenate([np.asarray(old_sig), new_sig])
    skip = np.concatenate([np.zeros(n_old, bool), new_nw == 0])
    first = lsh.first_with_key(allsig, params.bands, params.rows, skip)
    i, j = lsh.candidate_pairs(first)
    m = i >= n_old  # pairs that involve a new passage (j < i always)
    i, j = i[m], j[m]
    if params.verify != "none":
        ok = lsh.verify_signatures(allsig, i, j, params.threshold)
        i, j = i[ok], j[ok]
    old_class = classes["class_id"].combine_chunks()
    # new -> first stored passage it matches
    to_old = np.full(n_new, -1, np.int64)
    mo = j < n_old
    for a, b in zip(i[mo][::-1], j[mo][::-1]):  # reversed: the smallest j wins
        to_old[a - n_old] = b
    # new passages without a stored match: components among themselves
    mn = ~mo
    a_new, b_new = i[mn] - n_old, j[mn] - n_old
    root = lsh.union_components(n_new, a_new, b_new)
    # a new component touching a stored class joins it (via its first member with a match)
    comp_old = np.full(n_new, -1, np.int64)
    for k in range(n_new):
        if to_old[k] >= 0 and comp_old[root[k]] < 0:
            comp_old[root[k]] = to_old[k]
    target = comp_old[root]
    new_pid_arr = new_pids.combine_chunks() if isinstance(new_pids, pa.ChunkedArray) else new_pids
    class_id = [old_class[int(t)].as_py() if t >= 0 else new_pid_arr[int(r)].as_py() for t, r in zip(target, root)]
    out = pa.table({"docid": new_pid_arr, "class_id": pa.array(class_id, pa.string()),
                    "class_size": pa.array(np.zeros(n_new, np.int32))}, schema=CLASS_TABLE_SCHEMA)
    summary = {"new_passages": n_new, "joined_existing": int((target >= 0).sum()),
               "new_classes": int(len(np.unique(root[target < 0]))), "skipped_known": int(known.sum()),
               "params": params.as_dict()}
    return out, summary


def merge_index(folder: str | os.PathLike, new: pa.Table) -> pa.Table:
    """The stored class table with ``new`` appended and class sizes recomputed."""
    classes, _, _ = load_index(folder)
    t = pa.concat_tables([classes.select(["docid", "class_id"]), new.select(["docid", "class_id"])])
    vc = pc.value_counts(t["class_id"])
    size = pc.take(vc.field("counts"), pc.index_in(t["class_id"], value_set=vc.field("values"))).cast(pa.int32())
    return pa.table({"docid": t["docid"], "class_id": t["class_id"], "class_size": size}, schema=CLASS_TABLE_SCHEMA)


__all__ = ["assign_new", "load_index", "merge_index", "save_index"]
