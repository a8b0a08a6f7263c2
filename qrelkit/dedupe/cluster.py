"""Near-duplicate classes of a corpus: read in chunks, tokenize, sign, band, verify, cluster.

The result is a class table (one row per passage, corpus order)::

    docid: string      the passage id
    class_id: string   the canonical member's id (NIST's convention)
    class_size: int32  members in the class

Defaults (see :class:`DedupeParams`, chosen and measured in docs/dedupe.md): word 3-gram
shingles of letters and digits, 128 permutations, 32 bands x 4 rows, candidates verified by the
exact Jaccard of their shingle sets at 0.6, **canonical linkage** (:func:`link_to_canonicals`):
every member passes verification against its class's canonical — the passage whose label it
will receive — so that chains of overlapping passages do not drift into one class, and the
canonical is the passage with most near-duplicates so that they stay together. Copies that
differ only in case, punctuation or markup are identical after normalization and always share
a class.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.dedupe import lsh
from qrelkit.dedupe._exact import exact_pairs
from qrelkit.dedupe.minhash import permutations, signatures, sorted_sets
from qrelkit.dedupe.params import CANONICAL, LINKAGE, MODES, VERIFY, DedupeParams, Normalization  # noqa: F401 - public here too
from qrelkit.errors import InputError
from qrelkit.io.classes import read_classes
from qrelkit.io.corpus import iter_corpus, passages_upper_bound
from qrelkit.io.strings import rows_with_a_repeated_key, string_keys

CLASS_TABLE_SCHEMA = pa.schema([("docid", pa.string()), ("class_id", pa.string()), ("class_size", pa.int32())])
SMALL_COMPONENT = 32  # verified components up to this size get all their pairs checked (star classes)


@dataclass
class Signed:
    """Signatures of a corpus: ids and texts' MinHash values in corpus order."""

    pids: pa.Array
    sig: np.ndarray  # uint32[n, num_perm]
    nwords: np.ndarray  # int64[n]
    shingles: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # per chunk, for exact verification


def _chunks(corpus: str | os.PathLike | pa.Table, chunk_rows: int) -> Iterator[pa.Table]:
    if isinstance(corpus, pa.Table):
        for start in range(0, max(corpus.num_rows, 1), chunk_rows):
            t = corpus.slice(start, chunk_rows)
            if t.num_rows:
                yield pa.table({"pid": pc.cast(t["pid"], pa.string()), "text": pc.cast(t["text"], pa.string())})
        return

    yield from iter_corpus(corpus, chunk_rows=chunk_rows)


@contextmanager
def _read_ahead(items: Iterator[pa.Table]) -> Iterator[Iterator[pa.Table]]:
    """The items of ``items`` in order, each next one read on a helper thread while the caller
    works on this one (reading is mostly pyarrow's and file I/O, which run beside the signing
    kernels: they let go of the GIL); a reader's error comes where its item would have. The
    first item is read from the start; leaving waits for a read under way."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="qrelkit-read")
    ahead = pool.submit(next, items, None)

    def ordered() -> Iterator[pa.Table]:
        nonlocal ahead
        while (item := ahead.result()) is not None:
            ahead = pool.submit(next, items, None)
            yield item

    try:
        yield ordered()
    finally:
        pool.shutdown(wait=True)


def _passage_estimate(corpus: str | os.PathLike | pa.Table) -> int:
    """At least the passages in the corpus (exact for tables and Parquet; the lines of a text
    file): the capacity of the signature array, trimmed afterwards."""
    if isinstance(corpus, pa.Table):
        return corpus.num_rows

    return passages_upper_bound(corpus)


def _may_repeat(pids: pa.Array) -> bool:
    """Whether the ids do not all differ (a null counts as no id): only the ids whose 64-bit key
    repeats (:func:`qrelkit.io.strings.rows_with_a_repeated_key`) are compared as strings. Hashing
    every id into a set of strings cost ten times as much."""
    if pids.null_count:
        return True
    rows = rows_with_a_repeated_key(string_keys(pids))
    if not len(rows):
        return False
    suspects = pids.take(pa.array(rows))
    return pc.count_distinct(suspects).as_py() != len(suspects)


def sign_corpus(
    corpus: str | os.PathLike | pa.Table,
    params: DedupeParams,
    *,
    keep_shingles: bool = False,
    progress: Callable[[int], None] | None = None,
) -> Signed:
    """Stream the corpus and compute every passage's signature (and keep its shingles, for exact
    verification)."""
    perms = permutations(params.num_perm, params.seed)
    nw_parts, pid_parts, shingle_parts, scratch = [], [], [], []
    n = 0
    with _read_ahead(_chunks(corpus, params.chunk_rows)) as chunks:
        cap = _passage_estimate(corpus)  # while the first chunk is read
        sig = np.empty((max(cap, 1), params.num_perm), np.uint32)
        for chunk in chunks:
            m = chunk.num_rows
            if n + m > len(sig):  # the estimate was short: grow
                grown = np.empty((max(2 * len(sig), n + m), params.num_perm), np.uint32)
                grown[:n] = sig[:n]
                sig = grown
            res = signatures(chunk["text"], ngram=params.ngram, norm=params.norm, perms=perms, out=sig[n : n + m],
                             keep_shingles=keep_shingles, scratch=scratch)
            n += m
            nw_parts.append(res[1])
            pid_parts.append(chunk["pid"].combine_chunks() if isinstance(chunk["pid"], pa.ChunkedArray) else chunk["pid"])
            if keep_shingles:
                shingle_parts.append(res[2])
            if progress:
                progress(m)
    if n == 0:
        raise InputError("empty-file", "the corpus has no passages", file=None if isinstance(corpus, pa.Table) else str(corpus))
    sig = sig[:n]
    pids = pa.concat_arrays(pid_parts)
    if _may_repeat(pids):
        vc = pc.value_counts(pids)
        bad = vc.filter(pc.greater(vc.field("counts"), 1)).field("values")[0].as_py()
        raise InputError("duplicate-id", f"passage id {bad!r} occurs twice in the corpus",
                         file=None if isinstance(corpus, pa.Table) else str(corpus))
    return Signed(pids=pids, sig=sig, nwords=np.concatenate(nw_parts), shingles=shingle_parts)


def exact_sets(signed: Signed, rows: np.ndarray, params: DedupeParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shingle sets (sorted unique 32-bit shingle hashes) of the passages ``rows`` (sorted, unique):
    ``(pos, starts, vals)`` with passage ``k``'s set in ``vals[starts[pos[k]]:starts[pos[k]+1]]``."""
    pos = np.full(len(signed.pids), -1, np.int64)
    pos[rows] = np.arange(len(rows))
    chunk_starts, vals_all = [], []
    base = offset_vals = 0
    for st_all, v_all in signed.shingles:
        n = len(st_all) - 1
        lo, hi = np.searchsorted(rows, [base, base + n])
        sub = rows[lo:hi] - base
        if len(sub):
            st, vals = sorted_sets(st_all, v_all, sub)
            chunk_starts.append(st[:-1] + offset_vals)
            vals_all.append(vals)
            offset_vals += len(vals)
        base += n
    starts = np.concatenate(chunk_starts + [np.array([offset_vals], np.int64)])
    vals = np.concatenate(vals_all) if vals_all else np.zeros(0, np.uint32)
    return pos, starts, vals


@dataclass
class Clustering:
    """A clustering result: the class table plus what produced it."""

    classes: pa.Table  # CLASS_TABLE_SCHEMA, corpus order
    params: DedupeParams
    stats: dict
    sig: np.ndarray | None = None  # the signatures (for an incremental index)


def _verify(signed: Signed, i: np.ndarray, j: np.ndarray, params: DedupeParams, sets=None) -> np.ndarray:
    if params.verify == "signature":
        return lsh.verify_signatures(signed.sig, i, j, params.threshold)
    if params.verify == "exact":
        pos, starts, vals = sets
        return exact_pairs(starts, vals, pos[i], pos[j], params.threshold)
    return np.ones(len(i), bool)


def canonicals(root: np.ndarray, pri: np.ndarray | None) -> np.ndarray:
    """Canonical member per passage: its class's root (first in corpus order), or the class's
    first priority member when it has one."""
    if pri is None or not pri.any():
        return root.copy()
    idx = np.flatnonzero(pri)
    best = np.full(len(root), -1, np.int64)
    order = idx[::-1]  # assign in reverse so that the first index wins
    best[root[order]] = order
    return np.where(best[root] >= 0, best[root], root)


def link_to_canonicals(n: int, i: np.ndarray, j: np.ndarray, pri: np.ndarray | None, params: DedupeParams,
                       pos: np.ndarray, starts: np.ndarray, vals: np.ndarray, sig: np.ndarray | None,
                       rounds: int = 10) -> tuple[np.ndarray, int, int]:
    """Canonical linkage over the verified pairs ``(i, j)``: every member passes verification
    (``params.verify``: exact Jaccard of the shingle sets ``pos, starts, vals`` or the Jaccard
    estimated from the signature rows ``sig[pos[k]]``) against its class's canonical, the
    passage whose label it receives, by construction.

    A connected component of verified pairs of up to :data:`SMALL_COMPONENT` passages gets all its
    pairs checked (:func:`lsh.star_classes`): the passage with most near-duplicates still without a
    class (``priority`` passages first) becomes a canonical and takes them, then members move to a
    canonical they pass whose class holds more of their near-duplicates. In larger components
    (:func:`lsh.canonical_assign`) passages are taken in corpus order (``priority`` first): each
    joins, among the classes of its verified neighbours whose canonical it passes, the one holding
    most of them, else founds a class; then members move likewise. Returns (canonical per passage,
    passages of a verified component outside the class of its first passage, members moved)."""
    deg = np.bincount(i, minlength=n) + np.bincount(j, minlength=n)
    nbr_starts = np.zeros(n + 1, np.int64)
    np.cumsum(deg, out=nbr_starts[1:])
    src = np.concatenate([i, j])
    dst = np.concatenate([j, i])
    nbrs = dst[np.argsort(src, kind="stable")]
    if pri is not None and pri.any():
        order = np.concatenate([np.flatnonzero(pri), np.flatnonzero(~pri)])
    else:
        order = np.arange(n)
    use_sig = params.verify == "signature"
    sig_rows = sig if use_sig else np.zeros((1, 1), np.uint32)
    root = lsh.union_components(n, i, j)
    size = np.bincount(root, minlength=n)
    small = (size[root] >= 2) & (size[root] <= SMALL_COMPONENT)
    comp_nodes = np.flatnonzero(small)
    comp_nodes = comp_nodes[np.argsort(root[comp_nodes], kind="stable")]
    comp_starts = np.concatenate([[0], np.cumsum(size[np.unique(root[comp_nodes])])]).astype(np.int64)
    canon = np.full(n, -1, np.int64)
    pri_mask = pri if pri is not None else np.zeros(n, bool)
    moved = lsh.star_classes(comp_starts, comp_nodes, pri_mask, pos, starts, vals, sig_rows, use_sig,
                             params.threshold, canon, rounds)
    canon[deg == 0] = np.flatnonzero(deg == 0)
    order = order[canon[order] < 0]  # passages of large components
    canon, moved_large = lsh.canonical_assign(n, order, nbr_starts, nbrs, pos, starts, vals, sig_rows, use_sig,
                                              params.threshold, rounds, canon)
    moved += moved_large
    detached = int(((deg > 0) & (canon != canon[root])).sum())
    return canon, detached, int(moved)


def class_table(pids: pa.Array, canon: np.ndarray, params: DedupeParams, **counts) -> tuple[pa.Table, dict]:
    """The class table and the statistics of a clustering from each passage's canonical index.
    ``counts``: empty_passages, candidate_pairs, verified_pairs, detached_from_canonical (passages of
    a verified component outside its first passage's class), moved_between_classes."""
    n = len(pids)
    sizes = np.bincount(canon, minlength=n)
    class_size = sizes[canon].astype(np.int32)
    table = pa.table(
        {"docid": pids, "class_id": pids.take(pa.array(canon)), "class_size": pa.array(class_size)},
        schema=CLASS_TABLE_SCHEMA,
    )
    stats = {
        "passages": n,
        "empty_passages": int(counts.get("empty_passages", 0)),
        "classes": int((sizes > 0).sum()),
        "duplicate_classes": int((sizes > 1).sum()),
        "passages_in_duplicate_classes": int((class_size > 1).sum()),
        "largest_class": int(sizes.max()) if n else 0,
        "candidate_pairs": int(counts.get("candidate_pairs", 0)),
        "verified_pairs": int(counts.get("verified_pairs", 0)),
        "detached_from_canonical": int(counts.get("detached_from_canonical", 0)),
        "moved_between_classes": int(counts.get("moved_between_classes", 0)),
        "s_curve": {str(k): round(v, 6) for k, v in params.s_curve().items()},
    }
    return table, stats


def cluster_signed(signed: Signed, params: DedupeParams, *, priority: Iterable[str] | None = None) -> Clustering:
    """Classes from signatures (see the module doc)."""
    n = len(signed.pids)
    empty = signed.nwords == 0
    first = lsh.first_with_key(signed.sig, params.bands, params.rows, empty)
    i, j = lsh.candidate_pairs(first)
    n_candidates = len(i)
    pri = None
    if params.canonical == "priority" and priority is not None:
        pri = pc.is_in(signed.pids, value_set=pa.array(sorted(set(priority)), pa.string())).to_numpy(zero_copy_only=False)
    detached = moved = 0
    if params.mode == "greedy":
        root = lsh.greedy_claims(first, signed.sig, params.threshold, params.verify != "none")
        n_verified = int((root != np.arange(n)).sum())
        canon = canonicals(root, pri)
    else:
        del first  # the pairs hold all that is needed of it
        sets = None
        if params.verify == "exact":
            sets = exact_sets(signed, np.unique(np.concatenate([i, j])), params)
        ok = _verify(signed, i, j, params, sets)
        i, j = i[ok], j[ok]
        n_verified = len(i)
        if params.linkage == "canonical" and params.verify != "none":
            if sets is None:
                pos, starts, vals = np.arange(n), np.zeros(1, np.int64), np.zeros(0, np.uint32)
            else:
                pos, starts, vals = sets
            canon, detached, moved = link_to_canonicals(n, i, j, pri, params, pos, starts, vals, signed.sig)
        else:
            canon = canonicals(lsh.union_components(n, i, j), pri)
    table, stats = class_table(signed.pids, canon, params, empty_passages=int(empty.sum()),
                               candidate_pairs=n_candidates, verified_pairs=n_verified,
                               detached_from_canonical=detached, moved_between_classes=moved)
    return Clustering(classes=table, params=params, stats=stats, sig=signed.sig)


def cluster_corpus(
    corpus: str | os.PathLike | pa.Table,
    params: DedupeParams | None = None,
    *,
    priority: Iterable[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> Clustering:
    """Cluster a corpus (a file any corpus reader takes, or a table with ``pid``, ``text``) into
    near-duplicate classes. ``priority`` ids become canonical first (``canonical="priority"``).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from qrelkit import cluster_corpus
    >>> corpus = pa.table({"pid": ["p1", "p2", "p3"], "text": [
    ...     "the quick brown fox jumps over the lazy dog today",
    ...     "the quick brown fox jumps over the lazy dog today!",
    ...     "an entirely different passage about solar panels"]})
    >>> clustering = cluster_corpus(corpus)
    >>> clustering.classes.to_pydict()
    {'docid': ['p1', 'p2', 'p3'], 'class_id': ['p1', 'p1', 'p3'], 'class_size': [2, 2, 1]}
    """
    params = params or DedupeParams()
    signed = sign_corpus(corpus, params, keep_shingles=params.verify == "exact", progress=progress)
    return cluster_signed(signed, params, priority=priority)


def nist_lines(classes: pa.Table, *, only_duplicates: bool = False) -> pa.Table:
    """The class table in NIST's order of columns (``class_id pid``)."""
    t = classes
    if only_duplicates:
        t = t.filter(pc.greater(t["class_size"], 1))
    return pa.table({"class_id": t["class_id"], "pid": t["docid"]})


def class_stats(classes: pa.Table, *, largest: int = 10, sample: int = 3) -> dict:
    """Number of classes, size histogram, the largest classes with sample members."""
    sizes = pc.value_counts(classes["class_id"])
    counts = sizes.field("counts").to_numpy()
    ids = sizes.field("values")
    hist_v, hist_c = np.unique(counts, return_counts=True)
    order = np.lexsort((np.array(ids.to_pylist(), dtype=object).astype(str), -counts))[:largest]
    top = []
    for k in order:
        cid = ids[int(k)].as_py()
        members = classes.filter(pc.equal(classes["class_id"], cid))["docid"].to_pylist()
        top.append({"class_id": cid, "size": int(counts[k]), "sample": members[:sample]})
    return {
        "passages": classes.num_rows,
        "classes": len(counts),
        "duplicate_classes": int((counts > 1).sum()),
        "passages_in_duplicate_classes": int(counts[counts > 1].sum()),
        "histogram": {int(v): int(c) for v, c in zip(hist_v, hist_c)},
        "largest": top,
    }


def read_nist(path: str | os.PathLike) -> pa.Table:
    """Import a NIST near-duplicate file (``class_id pid`` per line) as a class table."""
    t = read_classes(path)
    size = pc.value_counts(t["class_id"])
    m = pc.index_in(t["class_id"], value_set=size.field("values"))
    return pa.table(
        {"docid": t["docid"], "class_id": t["class_id"],
         "class_size": pc.take(size.field("counts"), m).cast(pa.int32())},
        schema=CLASS_TABLE_SCHEMA,
    )


__all__ = ["CLASS_TABLE_SCHEMA", "Clustering", "DedupeParams", "class_stats", "cluster_corpus", "cluster_signed",
           "nist_lines", "read_nist", "sign_corpus"]
