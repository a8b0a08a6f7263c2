"""The depth pool groups (topic, docid) rows through 64-bit keys of the docids' bytes (issue 24):
no dictionary of every pooled docid is built, groups are confirmed as strings, and docids that
share a key fall back to the dictionary path. Either way the pool is the same, row for row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from qrelkit.io.runs import canonicalize
from qrelkit.pooler import pools
from qrelkit.pooler.pools import depth_pool, fused_pool

TWINS = ["msmarco_passage_01_0000052", "msmarco_passage_02_0000052", "msmarco_passage_03_0000052"]


def runs_of(rows) -> pa.Table:
    return canonicalize(pd.DataFrame(rows, columns=["run", "qid", "docid", "score"]))


def coded_pool(runs: pa.Table, depth: int, monkeypatch) -> pa.Table:
    """The pool through the dictionary path alone (the reference)."""
    with monkeypatch.context() as m:
        m.setattr(pools, "_keyed_order", lambda *a: None)
        return depth_pool(runs, depth)


def test_docids_sharing_a_key_are_pooled_apart(monkeypatch):
    runs = runs_of([("a", "1", TWINS[0], 3.0), ("a", "1", TWINS[1], 2.0), ("b", "1", TWINS[1], 5.0),
                    ("b", "1", TWINS[2], 4.0), ("b", "2", TWINS[0], 1.0)])
    pool = depth_pool(runs, 2)
    assert pool.select(["qid", "docid", "n_runs"]).to_pylist() == [
        {"qid": "1", "docid": TWINS[1], "n_runs": 2}, {"qid": "1", "docid": TWINS[0], "n_runs": 1},
        {"qid": "1", "docid": TWINS[2], "n_runs": 1}, {"qid": "2", "docid": TWINS[0], "n_runs": 1}]
    assert pool["runs"][0].as_py() == [{"run": "b", "rank": 1}, {"run": "a", "rank": 2}]
    assert pool.equals(coded_pool(runs, 2, monkeypatch))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcde"), st.sampled_from(["1", "2", "10", "x"]),
                          st.sampled_from(["d1", "d2", "d33", *TWINS, "a-longer-docid-of-thirty-bytes"]),
                          st.integers(0, 5)), min_size=1, max_size=60),
       st.integers(1, 4))
def test_the_keyed_pool_equals_the_dictionary_pool(rows, depth):
    frame = pd.DataFrame(rows, columns=["run", "qid", "docid", "score"]).drop_duplicates(["run", "qid", "docid"])
    runs = canonicalize(frame)
    pool = depth_pool(runs, depth)
    real = pools._keyed_order
    pools._keyed_order = lambda *a: None
    try:
        ref = depth_pool(runs, depth)
        fused_ref = fused_pool(runs, 3, method="rrf")
    finally:
        pools._keyed_order = real
    assert pool.equals(ref)
    assert fused_pool(runs, 3, method="rrf").equals(fused_ref)


def test_the_pool_builds_no_dictionary_of_the_pooled_docids(monkeypatch):
    n = 200
    runs = runs_of([(r, str(q), f"doc-{q}-{(d * (r + 3)) % 97}", float(100 - d))
                    for r in range(4) for q in range(5) for d in range(n // 5)])
    sizes: list[int] = []
    real = pc.dictionary_encode

    def spy(values, *a, **k):
        if pa.types.is_string(values.type) and values.to_pylist()[:1] and values.to_pylist()[0].startswith("doc-"):
            sizes.append(len(values))
        return real(values, *a, **k)

    monkeypatch.setattr(pc, "dictionary_encode", spy)
    pool = depth_pool(runs, 10)
    assert pool.num_rows > 0
    assert sizes == []
    assert np.array_equal(pool["position"].to_numpy()[:3], [1, 2, 3])
