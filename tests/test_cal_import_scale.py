"""``cal import`` is O(rows): importing many small batches (a new batch id every few rows) costs
time in proportion to the rows, not rows x batches (issue 11, section 8: 100k rows in small
batches took 97 s holding the write lock). The figure is measured by ``benchmarks/bench_store.py``
(docs/benchmarks.md); tests make no timing assertion, they check the large import is right."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qrelkit.store import init_store


def judgments(n: int, per_batch: int = 10, topics: int = 50) -> pd.DataFrame:
    i = np.arange(n)
    return pd.DataFrame({"qid": [f"q{x:03d}" for x in (i // per_batch) % topics], "docid": [f"d{x}" for x in i],
                         "assessor": "A1", "grade": i % 4, "batch_id": [f"b{x}" for x in i // per_batch]})


def check_import(path, n: int) -> None:
    df = judgments(n)
    with init_store(path, [f"q{x:03d}" for x in range(50)], synchronous="OFF") as s:
        rep = s.judgments.import_judgments(df)
        assert rep.imported == n and rep.batches_registered == n // 10
        assert s.counts()["batches"] == n // 10
        # each registered batch belongs to its single topic
        b = s.batches.all()
        assert b.set_index("batch_id").at["b7", "qid"] == "q007" and (b["kind"] == "pool").all()


def test_100k_rows_in_10k_small_batches(tmp_path):
    """The issue's case: 100k rows, a new batch every 10 rows, in one import (old code: ~12 s of
    CPU, a scan of every row per new batch; now ~2 s, see docs/benchmarks.md)."""
    check_import(tmp_path / "b.db", 100_000)


def test_a_batch_spanning_topics_is_registered_without_one(tmp_path):
    df = pd.DataFrame({"qid": ["1", "2", "1"], "docid": ["a", "b", "c"], "assessor": "A", "grade": [1, 2, 3],
                       "batch_id": ["mixed", "mixed", "one"]})
    with init_store(tmp_path / "s.db", ["1", "2"]) as s:
        assert s.judgments.import_judgments(df).batches_registered == 2
        b = s.batches.all().set_index("batch_id")
        assert pd.isna(b.at["mixed", "qid"]) and b.at["one", "qid"] == "1"
        assert list(b.index) == ["mixed", "one"]      # order of first appearance
