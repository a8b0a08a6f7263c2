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


def _non_canonical(classes: pa.Table | None) -> pa.Array | None:
    """The ids of ``classes`` that are not their class's id (the passages a deduplicated corpus
    drops): looked up once per chunk instead of every class row (a 10M-row hash per chunk made
    the fractional pool quadratic in the corpus size)."""
    if classes is None:
        return None
    d = classes["docid"]
    return pc.filter(d, pc.not_equal(d, classes["class_id"])).combine_chunks()


def _canonical_only(ids: pa.Array, drop: pa.Array | None) -> pa.Array:
    """``ids`` whose class is themselves (not in ``drop``, :func:`_non_canonical`'s ids)."""
    if drop is None or len(drop) == 0:
        return ids
    return ids.filter(pc.invert(pc.is_in(ids, value_set=drop)))


def _as_chunks(chunks: Callable[[], Iterator[pa.Array]] | pa.Array | list[str]) -> Callable[[], Iterator[pa.Array]]:
    if callable(chunks):
        return chunks
    arr = chunks if isinstance(chunks, (pa.Array, pa.ChunkedArray)) else pa.array(list(chunks), pa.string())
    fixed = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr

    def one() -> Iterator[pa.Array]:
        yield fixed

    return one


def _cut(keys: list[np.ndarray], fraction: float, ids_again: Callable[[], Iterator[pa.Array]]) -> list[np.ndarray]:
    """Per chunk, which ids are among the first ``round(n * fraction)`` by (key, id)."""
    allk = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
    want = int(round(len(allk) * fraction))
    if want == 0:
        return [np.zeros(len(k), bool) for k in keys]
    threshold = np.partition(allk, want - 1)[want - 1]
    below, tied = int((allk < threshold).sum()), int((allk == threshold).sum())
    if below + tied == want:
        return [k <= threshold for k in keys]
    # 64-bit keys tie at the cut (practically never): the smallest ids among the tied ones
    masks = [k < threshold for k in keys]
    at_cut: list[tuple[str, int, int]] = []  # (id, chunk, position)
    for ci, (c, k) in enumerate(zip(ids_again(), keys)):
        pos = np.flatnonzero(k == threshold)
        at_cut += [(pid, ci, int(p)) for pid, p in zip(c.take(pa.array(pos)).to_pylist(), pos)]
    for _pid, ci, p in sorted(at_cut)[: want - below]:
        masks[ci][p] = True
    return masks


def fractional_masks(
    chunks: Callable[[], Iterator[pa.Array]] | pa.Array | list[str],
    fraction: float,
    seed: int,
) -> list[np.ndarray]:
    """For each chunk of ids, a boolean mask of the ids in the fractional collection (the same
    ids as :func:`fractional_ids`: the first ``round(n * fraction)`` in the seeded random order,
    ties of keys broken by id). One pass over the ids computes their keys (8 bytes per id are
    held; the ids are not); a second pass reads ids only if keys tie at the cut."""
    if not 0 < fraction <= 1:
        raise InputError("bad-option", f"fraction must be in (0, 1], got {fraction}")
    chunks = _as_chunks(chunks)
    keys = [random_keys(c, seed) for c in chunks()]
    return _cut(keys, fraction, chunks)


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
    source = _as_chunks(chunks)
    drop = _non_canonical(classes)

    def canonical() -> Iterator[pa.Array]:
        for c in source():
            yield _canonical_only(c, drop)

    keys = [random_keys(c, seed) for c in canonical()]
    masks = _cut(keys, fraction, canonical)
    if not any(m.any() for m in masks):
        return pa.array([], pa.string())
    ids = pa.concat_arrays([c.filter(pa.array(m)) for c, m in zip(canonical(), masks)])
    t = pa.table({"k": np.concatenate([k[m] for k, m in zip(keys, masks)]), "id": ids})
    return ids.take(pc.sort_indices(t, sort_keys=[("k", "ascending"), ("id", "ascending")]))


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
