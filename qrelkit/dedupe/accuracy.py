"""Quality of a clustering against ground-truth classes.

* Pair precision and recall over all pairs of passages that share a class.
* Copy recall by number of word edits: for every true copy (a non-canonical member of a true
  class), whether it shares a found class with its source (the true canonical), grouped by the
  word-level edit distance between the two after normalization (0 = differs only in case,
  punctuation or markup).
"""

from __future__ import annotations

import numba as nb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.dedupe._exact import jaccard_pairs
from qrelkit.dedupe.minhash import shingle_sets
from qrelkit.dedupe.tokenize import Normalization, word_hashes
from qrelkit.io.corpus import iter_corpus
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.dedupe.params import DedupeParams


@nb.njit(cache=True)
def _levenshtein(a, b, cap):
    n, m = len(a), len(b)
    if abs(n - m) > cap:
        return cap + 1
    prev = np.arange(m + 1)
    cur = np.empty(m + 1, np.int64)
    for i in range(1, n + 1):
        cur[0] = i
        best = cur[0]
        for j in range(1, m + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            v = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            cur[j] = v
            if v < best:
                best = v
        if best > cap:
            return cap + 1
        prev, cur = cur, prev
    return min(prev[m], cap + 1)


@nb.njit(parallel=True, cache=True)
def _edit_distances(starts, words, src, dst, cap):
    out = np.empty(len(src), np.int64)
    for p in nb.prange(len(src)):
        a = words[starts[src[p]] : starts[src[p] + 1]]
        b = words[starts[dst[p]] : starts[dst[p] + 1]]
        out[p] = _levenshtein(a, b, cap)
    return out


def pair_scores(found: pa.Table, truth: pa.Table) -> dict:
    """Pair precision/recall. ``found`` and ``truth`` map docid -> class_id; passages missing from
    ``truth`` are singletons there."""
    f = pd.DataFrame({"d": found["docid"].to_numpy(zero_copy_only=False), "c": found["class_id"].to_numpy(zero_copy_only=False)})
    t = pd.DataFrame({"d": truth["docid"].to_numpy(zero_copy_only=False), "t": truth["class_id"].to_numpy(zero_copy_only=False)})
    m = f.merge(t, on="d", how="left")
    m["t"] = m["t"].fillna(m["d"])

    def pairs(sizes: pd.Series) -> int:
        s = sizes.to_numpy(np.int64)
        return int((s * (s - 1) // 2).sum())

    tp = pairs(m.groupby(["c", "t"]).size())
    p = pairs(m.groupby("c").size())
    r = pairs(m.groupby("t").size())
    return {"found_pairs": p, "true_pairs": r, "true_positive_pairs": tp,
            "precision": tp / p if p else 1.0, "recall": tp / r if r else 1.0}


def copy_recall_by_edits(
    found: pa.Table, truth: pa.Table, texts: pa.Table, *, norm: Normalization = Normalization(), cap: int = 5
) -> pd.DataFrame:
    """Per word-edit distance (0 .. cap, and ``cap+1`` meaning more): copies, copies found in
    their source's class, recall. ``texts`` has ``pid`` and ``text`` for (at least) the truth's
    members."""
    members = truth.filter(pc.not_equal(truth["docid"], truth["class_id"]))
    need = pa.concat_arrays([members["docid"].combine_chunks(), members["class_id"].combine_chunks()])
    sel = texts.filter(pc.is_in(texts["pid"], value_set=pc.unique(need)))
    pid_pos = {p: i for i, p in enumerate(sel["pid"].to_pylist())}
    starts, words = word_hashes(sel["text"], norm)
    src = np.array([pid_pos[d] for d in members["docid"].to_pylist()], np.int64)
    dst = np.array([pid_pos[c] for c in members["class_id"].to_pylist()], np.int64)
    dist = _edit_distances(starts, words, src, dst, cap)
    fmap = dict(zip(found["docid"].to_pylist(), found["class_id"].to_pylist()))
    same = np.array([fmap.get(d, d) == fmap.get(c, c) for d, c in zip(members["docid"].to_pylist(), members["class_id"].to_pylist())])
    df = pd.DataFrame({"edits": np.minimum(dist, cap + 1), "found": same})
    out = df.groupby("edits").agg(copies=("found", "size"), found=("found", "sum")).reset_index()
    out["recall"] = (out["found"] / out["copies"]).round(4)
    out["edits"] = out["edits"].map(lambda e: f"{e}" if e <= cap else f">{cap}")
    return out


def evaluate_classes(found: pa.Table, truth: pa.Table, corpus, *, norm: Normalization = Normalization()) -> tuple[dict, pd.DataFrame]:
    """:func:`pair_scores` and :func:`copy_recall_by_edits`, reading only the texts needed from
    ``corpus`` (a path, streamed)."""
    need = pc.unique(pa.concat_arrays([truth["docid"].combine_chunks(), truth["class_id"].combine_chunks()]))
    parts = [c.filter(pc.is_in(c["pid"], value_set=need)).select(["pid", "text"]) for c in iter_corpus(corpus)]
    texts = pa.concat_tables(parts) if parts else pa.table({"pid": pa.array([], pa.string()), "text": pa.array([], pa.string())})
    return pair_scores(found, truth), copy_recall_by_edits(found, truth, texts, norm=norm)


# ---------------------------------------------------------------------------------------------
# Exact truth: every pair of passages whose exact Jaccard of shingle sets reaches a threshold.


@declared_defaults(DedupeParams)
def shingle_matrix(texts: pa.Array | pa.ChunkedArray, *, ngram: int = AS_DECLARED, norm: Normalization = Normalization()):
    """Sparse binary passage x shingle matrix (``scipy.sparse.csr_matrix``, int32) of the shingle
    sets qrelkit clusters (32-bit shingle hashes; columns ordered by document frequency, rarest
    first) and the set sizes."""
    import scipy.sparse as sp  # lazy: scipy takes ~0.3 s to import, only accuracy studies need it

    n = len(texts)
    starts, vals = shingle_sets(texts, np.arange(n), ngram=ngram, norm=norm)
    uniq, col, df = np.unique(vals, return_inverse=True, return_counts=True)
    rank = np.empty(len(uniq), np.int64)
    rank[np.lexsort((uniq, df))] = np.arange(len(uniq))  # rarest first, then by hash
    x = sp.csr_matrix((np.ones(len(vals), np.int32), rank[col], starts), shape=(n, len(uniq)))
    x.sort_indices()
    return x, np.diff(starts)


def _pairs_of_product(a, bt, sizes_a_rows: np.ndarray, sizes: np.ndarray, row0: int, threshold: float):
    """Pairs (row0 + r, c), c > row0 + r, of the product ``a @ bt`` (shared shingles) whose
    Jaccard reaches ``threshold``."""
    prod = (a @ bt).tocoo()
    r, c, inter = prod.row.astype(np.int64), prod.col.astype(np.int64), prod.data.astype(np.int64)
    keep = c > r + row0
    r, c, inter = r[keep], c[keep], inter[keep]
    jac = inter / (sizes_a_rows[r] + sizes[c] - inter)
    ok = jac >= threshold
    return r[ok] + row0, c[ok], jac[ok]


@declared_defaults(DedupeParams)
def exact_similar_pairs(
    texts: pa.Array | pa.ChunkedArray,
    threshold: float,
    *,
    ngram: int = AS_DECLARED,
    norm: Normalization = Normalization(),
    chunk_rows: int = 2000,
    method: str = "product",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair ``i < j`` of passages whose exact Jaccard of shingle sets is at least
    ``threshold`` (passages without words have no pairs): ``(i, j, jaccard)`` sorted by (i, j).

    ``method="product"``: brute force, ``X @ X.T`` of the binary shingle matrix in row chunks.
    ``method="prefix"``: the same pairs, exactly, with the prefix filter of all-pairs similarity
    joins (Bayardo et al. 2007; Chaudhuri et al. 2006): with shingles ordered rarest first, two
    sets of Jaccard >= t share a shingle among the first ``|a| - ceil(t |a|) + 1`` of each, so
    only pairs sharing a prefix shingle are scored (for corpora too large for the full product).
    """
    import scipy.sparse as sp  # lazy: scipy takes ~0.3 s to import, only accuracy studies need it

    if method not in ("product", "prefix"):
        raise ValueError("method must be 'product' or 'prefix'")
    x, sizes = shingle_matrix(texts, ngram=ngram, norm=norm)
    n = x.shape[0]
    out_i, out_j, out_s = [], [], []
    if method == "product":
        xt = x.T.tocsr()  # once, not per chunk
        for r0 in range(0, n, chunk_rows):
            blk = x[r0 : r0 + chunk_rows]
            i, j, s = _pairs_of_product(blk, xt, sizes[r0 : r0 + chunk_rows], sizes, r0, threshold)
            out_i.append(i), out_j.append(j), out_s.append(s)
    else:
        plen = np.where(sizes > 0, sizes - np.ceil(threshold * sizes - 1e-9).astype(np.int64) + 1, 0)
        plen = np.minimum(np.maximum(plen, 0), sizes)
        indptr = x.indptr
        take = np.concatenate([np.arange(indptr[k], indptr[k] + plen[k]) for k in range(n)]) if n else np.zeros(0, np.int64)
        pre = sp.csr_matrix((np.ones(len(take), np.int32), x.indices[take], np.concatenate([[0], np.cumsum(plen)])),
                            shape=x.shape)
        pre_t = pre.T.tocsr()
        for r0 in range(0, n, chunk_rows):
            cand = (pre[r0 : r0 + chunk_rows] @ pre_t).tocoo()
            r, c = cand.row.astype(np.int64) + r0, cand.col.astype(np.int64)
            keep = c > r
            r, c = r[keep], c[keep]
            if len(r) == 0:
                continue
            jac = jaccard_pairs(x.indptr, x.indices, r, c)  # rows of x are sorted column indices
            ok = jac >= threshold
            out_i.append(r[ok]), out_j.append(c[ok]), out_s.append(jac[ok])
    if not out_i:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    i, j, s = np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_s)
    order = np.lexsort((j, i))
    return i[order], j[order], s[order]


@declared_defaults(DedupeParams)
def exact_scores(
    class_of: np.ndarray,
    texts: pa.Array | pa.ChunkedArray,
    threshold: float,
    *,
    ngram: int = AS_DECLARED,
    norm: Normalization = Normalization(),
    truth: tuple[np.ndarray, np.ndarray] | None = None,
    method: str = "product",
) -> dict:
    """A clustering against the exact truth at its own threshold and shingling.

    ``class_of[k]``: index (into ``texts``) of passage k's canonical. Returns edge precision (the
    share of class members whose exact Jaccard to their canonical reaches ``threshold``) and the
    lowest such Jaccard; pair recall (true pairs — exact Jaccard >= threshold — placed in one
    class) and pair precision (pairs placed in one class that are true pairs). ``truth``: the
    true pairs ``(i, j)`` when already known (else :func:`exact_similar_pairs`)."""
    class_of = np.asarray(class_of, np.int64)
    n = len(class_of)
    if truth is None:
        ti, tj, _ = exact_similar_pairs(texts, threshold, ngram=ngram, norm=norm, method=method)
    else:
        ti, tj = truth
    members = np.flatnonzero(class_of != np.arange(n))
    starts, vals = shingle_sets(texts, np.arange(n), ngram=ngram, norm=norm)
    jm = jaccard_pairs(starts, vals, members, class_of[members])
    sizes = np.bincount(class_of, minlength=n).astype(np.int64)
    found_pairs = int((sizes * (sizes - 1) // 2).sum())
    together = class_of[ti] == class_of[tj]
    tp = int(together.sum())
    return {
        "passages": n, "threshold": threshold, "members": len(members),
        "members_below_threshold": int((jm < threshold).sum()),
        "edge_precision": float((jm >= threshold).mean()) if len(members) else 1.0,
        "lowest_member_jaccard": float(jm.min()) if len(members) else 1.0,
        "true_pairs": len(ti), "found_pairs": found_pairs, "true_pairs_in_one_class": tp,
        "pair_recall": tp / len(ti) if len(ti) else 1.0,
        "pair_precision": tp / found_pairs if found_pairs else 1.0,
    }
