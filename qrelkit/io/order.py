"""Canonical order, the kernels every table in topic order shares: natural topic order
(:func:`qid_order`), topic codes in that order (:func:`natural_codes`), the canonical row order
of a run (:func:`canonical_indices`: topic, score descending, docid descending) and positions
within blocks of equal values (:func:`block_ranks`, :func:`block_positions`), and the ranks of a
leaderboard, where runs that print equal share a rank (:func:`competition_ranks`).

Runs (:mod:`qrelkit.io.runs`), qrels, near-duplicate classes, pools and the campaign simulator
all order their rows with these, so that every table agrees on one order.
"""

from __future__ import annotations

import functools
from typing import Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["qid_order", "natural_codes", "canonical_indices", "canonical_order", "block_ranks", "block_positions",
           "competition_ranks"]


def qid_order(qids: Iterable[str]) -> list[str]:
    """Natural topic order: numeric when every qid is an integer, else by string."""
    uniq = sorted(set(qids))
    if all(q.isascii() and q.isdigit() for q in uniq):
        # numeric order without int(): int() refuses strings of more than 4300 digits
        return sorted(uniq, key=lambda q: (len(q.lstrip("0")), q.lstrip("0"), q))
    return uniq


def natural_codes(qid: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Codes of ``qid`` values in natural topic order (code 0 = first topic), and that order.

    >>> codes, order = natural_codes(pa.array(["10", "10", "9", "9", "11"]))
    >>> codes.tolist(), order
    ([1, 1, 0, 0, 2], ['9', '10', '11'])
    """
    n = len(qid)
    if n > 1 and qid.null_count == 0:
        # runs, qrels and pools hold each topic in one block: compare neighbours instead of hashing
        change = pc.not_equal(qid.slice(1), qid.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        starts = np.concatenate(([0], np.flatnonzero(change) + 1))
        if len(starts) * 4 <= n:  # encode one value per block (a topic may have several blocks)
            heads, order = _natural_codes_hashed(qid.take(pa.array(starts)))
            return np.repeat(heads, np.diff(np.append(starts, n))), order
    return _natural_codes_hashed(qid)


def _natural_codes_hashed(qid: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    enc = pc.dictionary_encode(qid)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    values = enc.dictionary.to_pylist()
    order, remap = _natural_remap(tuple(values))
    codes = remap[enc.indices.to_numpy(zero_copy_only=False)] if len(values) else np.zeros(0, np.int32)
    return codes, list(order)


@functools.lru_cache(maxsize=16)
def _natural_remap(values: tuple[str, ...]) -> tuple[tuple[str, ...], np.ndarray]:
    """(natural order of ``values``, the code of each value): remembered, since the run files of
    one collection share their topics (a run reader asks once per file)."""
    order = qid_order(values)
    pos = {q: i for i, q in enumerate(order)}
    remap = np.array([pos[v] for v in values], dtype=np.int32)
    remap.flags.writeable = False
    return tuple(order), remap


def canonical_indices(qcodes: np.ndarray, score: np.ndarray, docid: pa.Array) -> np.ndarray | None:
    """Row order (qid code asc, score desc, docid desc); ``None`` when already in that order."""
    return canonical_order(qcodes, score, docid)[0]


def canonical_order(qcodes: np.ndarray, score: np.ndarray, docid: pa.Array) -> tuple[np.ndarray | None, bool]:
    """(:func:`canonical_indices`, ties_only). ``ties_only``: rows are already grouped by topic
    and sorted by score, and only rows of equal (topic, score) move (by docid descending), so
    only the docid column (and row-wise side data) needs reordering."""
    n = len(qcodes)
    if n < 2:
        return None, False
    dq = np.diff(qcodes)
    same = dq == 0
    ds = np.diff(score)
    ordered = bool((dq >= 0).all()) and not bool((same & (ds > 0)).any())
    if ordered:
        tie = np.flatnonzero(same & (ds == 0))  # row i ties with row i + 1
        if len(tie) == 0:
            return None, False
        left = docid.take(pa.array(tie))
        right = docid.take(pa.array(tie + 1))
        if pc.all(pc.greater(left, right)).as_py():
            return None, False
        # sort the tied rows only: by tie group, then docid descending (stable, as the full sort)
        member = np.zeros(n, bool)
        member[tie] = True
        member[tie + 1] = True
        rows = np.flatnonzero(member)
        tied_next = np.zeros(n, bool)
        tied_next[tie] = True
        first = np.ones(len(rows), bool)
        first[1:] = ~tied_next[rows[1:] - 1]
        sub = pa.table({"g": np.cumsum(first), "d": docid.take(pa.array(rows))})
        o = pc.sort_indices(sub, sort_keys=[("g", "ascending"), ("d", "descending")]).to_numpy()
        idx = np.arange(n)
        idx[rows] = rows[o]
        return idx, True
    table = pa.table({"q": qcodes, "s": score, "d": docid})
    idx = pc.sort_indices(table, sort_keys=[("q", "ascending"), ("s", "descending"), ("d", "descending")])
    return idx.to_numpy(), False


def block_positions(groups: np.ndarray) -> np.ndarray:
    """0-based position (int64) of each element within its run of equal values (values grouped).

    >>> block_positions(np.array([7, 7, 7, 2, 2, 7])).tolist()
    [0, 1, 2, 0, 1, 0]
    """
    n = len(groups)
    if n == 0:
        return np.zeros(0, np.int64)
    starts = np.flatnonzero(np.concatenate(([True], groups[1:] != groups[:-1])))
    lengths = np.diff(np.append(starts, n))
    return np.arange(n) - np.repeat(starts, lengths)


def block_ranks(qcodes: np.ndarray) -> np.ndarray:
    """1-based position (int32) of each row within its run of equal qid codes (rows already
    grouped): the ``rank`` column of a table in canonical order.

    >>> block_ranks(np.array([0, 0, 0, 1, 1])).tolist()
    [1, 2, 3, 1, 2]
    """
    return (block_positions(qcodes) + 1).astype(np.int32)


def competition_ranks(values, decimals: int | None = 6) -> np.ndarray:
    """Leaderboard ranks (int64), rank 1 the highest value: equal values share the best rank
    ("1224" competition ranking, pandas ``rank(method="min")``), compared as written to a file,
    rounded to ``decimals`` digits (None: as they are), so that two runs that print equal share
    a rank. Missing values rank last.

    >>> competition_ranks([0.5, 1.0, 0.5, 0.25]).tolist()
    [2, 1, 2, 4]
    >>> competition_ranks([1.0, 1.0, 1.0]).tolist()
    [1, 1, 1]
    >>> competition_ranks([0.1234561, 0.1234559, float("nan")]).tolist()
    [1, 1, 3]
    """
    v = pd.Series(values, dtype="float64")
    if decimals is not None:
        v = v.round(decimals)
    return v.rank(ascending=False, method="min", na_option="bottom").to_numpy(dtype=np.int64)
