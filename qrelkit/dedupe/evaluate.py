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

from qrelkit.dedupe.tokenize import Normalization, word_hashes


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
    from qrelkit.io.corpus import iter_corpus

    need = pc.unique(pa.concat_arrays([truth["docid"].combine_chunks(), truth["class_id"].combine_chunks()]))
    parts = [c.filter(pc.is_in(c["pid"], value_set=need)).select(["pid", "text"]) for c in iter_corpus(corpus)]
    texts = pa.concat_tables(parts) if parts else pa.table({"pid": pa.array([], pa.string()), "text": pa.array([], pa.string())})
    return pair_scores(found, truth), copy_recall_by_edits(found, truth, texts, norm=norm)
