"""Fractional collections (docs/protocol.md section 1, "Fractional collection").

The whole deduplicated corpus is put in one seeded, query-independent random order and the first
``fraction`` of it is kept. The random order is that of a keyed 64-bit SipHash of each passage id
(key derived from the seed), ties broken by id, so the selection is reproducible, needs no
permutation of the corpus in memory (8 bytes per passage), and does not depend on corpus order.
Exactly ``round(n * fraction)`` passages are kept.

*Restricted runs* drop every retrieved passage outside the fraction and renumber their ranks;
the fractional pool is the depth-k pool of the restricted runs minus what is already judged.
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.errors import InputError
from qrelkit.io.classes import map_to_classes
from qrelkit.io.corpus import iter_corpus
from qrelkit.io.order import block_ranks, natural_codes
from qrelkit.io.runs import RUN_SCHEMA


def _hash_key(seed: int) -> str:
    return f"{int(seed) % 10**16:016d}"


def random_keys(ids: pa.Array | Iterable[str], seed: int) -> np.ndarray:
    """The seeded random sort key (uint64) of each id."""
    arr = ids.to_numpy(zero_copy_only=False) if isinstance(ids, (pa.Array, pa.ChunkedArray)) else np.asarray(list(ids), dtype=object)
    if len(arr) == 0:
        return np.zeros(0, np.uint64)
    return pd.util.hash_array(arr.astype(object), hash_key=_hash_key(seed), categorize=False)


def _canonical_only(ids: pa.Array, classes: pa.Table | None) -> pa.Array:
    if classes is None:
        return ids
    return ids.filter(pc.equal(map_to_classes(ids, classes), ids))


def fractional_ids(
    chunks: Callable[[], Iterator[pa.Array]] | pa.Array | list[str],
    fraction: float,
    seed: int,
    *,
    classes: pa.Table | None = None,
) -> pa.Array:
    """Ids of the fractional collection, sorted by the random order.

    ``chunks`` is an array of ids, or a callable returning a fresh iterator over id arrays
    (the corpus is then streamed twice and never held whole). With ``classes`` only canonical
    passages (class ids) take part: the fraction is of the deduplicated corpus.
    """
    if not 0 < fraction <= 1:
        raise InputError("bad-option", f"fraction must be in (0, 1], got {fraction}")
    if not callable(chunks):
        arr = chunks if isinstance(chunks, (pa.Array, pa.ChunkedArray)) else pa.array(list(chunks), pa.string())
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        fixed = arr

        def chunks() -> Iterator[pa.Array]:  # noqa: F811 - one code path for both inputs
            yield fixed

    keys = [random_keys(_canonical_only(c, classes), seed) for c in chunks()]
    allk = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
    n = len(allk)
    want = int(round(n * fraction))
    if want == 0:
        return pa.array([], pa.string())
    threshold = np.partition(allk, want - 1)[want - 1]
    picked_ids, picked_keys = [], []
    for c in chunks():
        c = _canonical_only(c, classes)
        k = random_keys(c, seed)
        m = k <= threshold
        picked_ids.append(c.filter(pa.array(m)))
        picked_keys.append(k[m])
    ids = pa.concat_arrays(picked_ids) if picked_ids else pa.array([], pa.string())
    ks = np.concatenate(picked_keys)
    t = pa.table({"k": ks, "id": ids})
    idx = pc.sort_indices(t, sort_keys=[("k", "ascending"), ("id", "ascending")])
    return ids.take(idx).slice(0, want)


def fractional_ids_from_corpus(path: str | os.PathLike, fraction: float, seed: int, *,
                               classes: pa.Table | None = None) -> pa.Array:
    """:func:`fractional_ids` over a corpus file, streamed."""
    def chunks() -> Iterator[pa.Array]:
        for t in iter_corpus(path):
            yield t["pid"].combine_chunks()

    return fractional_ids(chunks, fraction, seed, classes=classes)


def restrict_runs(runs: pa.Table, kept: pa.Array, *, classes: pa.Table | None = None) -> pa.Table:
    """Drop retrieved passages outside ``kept`` (by class id when ``classes`` is given) and
    renumber ranks; canonical order is preserved."""
    docs = map_to_classes(runs["docid"], classes) if classes is not None else runs["docid"]
    t = runs.filter(pc.is_in(docs, value_set=kept))
    if t.num_rows == 0:
        return RUN_SCHEMA.empty_table()
    r = pc.dictionary_encode(t["run"]).combine_chunks().indices.to_numpy().astype(np.int64)
    q, _ = natural_codes(t["qid"])
    rank = block_ranks(r * (int(q.max()) + 1) + q)
    return t.set_column(t.column_names.index("rank"), "rank", pa.array(rank, pa.int32()))
