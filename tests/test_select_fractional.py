"""Pool-run selection from a manifest; fractional collections and restricted runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from qrelkit.errors import InputError
from qrelkit.io.runs import canonicalize
from qrelkit.pooler import select_pool_runs
from hypothesis import given, settings
from hypothesis import strategies as st

import qrelkit.pooler.fractional as fr
from qrelkit.pooler.fractional import fractional_ids, fractional_masks, random_keys, restrict_runs
from qrelkit.pooler.pools import depth_pool


def manifest():
    return pd.DataFrame(
        [
            ("g1r1", "g1", 1, False, "fullrank"), ("g1r2", "g1", 2, False, "fullrank"),
            ("g1r3", "g1", 3, False, "fullrank"), ("g1r4", "g1", 4, False, "fullrank"),
            ("g1x1", "g1", 1, False, "rerank"),
            ("g2b", "g2", 9, True, "fullrank"), ("g2a", "g2", 2, False, "fullrank"), ("g2c", "g2", 2, False, "fullrank"),
            ("g2d", "g2", 5, False, "fullrank"), ("g2e", "g2", 7, False, "fullrank"),
        ],
        columns=["run", "group", "priority", "baseline", "subtask"],
    )


def pooled(df):
    return set(df.loc[df["pooled"], "run"])


def test_select_baselines_plus_top3_per_group_and_subtask():
    sel = select_pool_runs(manifest())
    # g2: baseline g2b (not counted against the quota), then priorities 2, 2 (tie by name), 5
    assert pooled(sel) == {"g1r1", "g1r2", "g1r3", "g1x1", "g2b", "g2a", "g2c", "g2d"}
    assert sel.set_index("run").loc["g2b", "reason"] == "baseline"
    assert sel.set_index("run").loc["g1r4", "reason"] == "not selected"
    assert list(sel["run"]) == list(manifest()["run"])  # manifest order kept


def test_select_options():
    sel = select_pool_runs(manifest(), per_group=1, include_baselines=False, include=["g2e"], exclude=["g1r1"])
    assert pooled(sel) == {"g1x1", "g2a", "g2e"}
    sel = select_pool_runs(manifest(), per_group=1, by_subtask=False, priority_order="descending")
    assert pooled(sel) == {"g1r4", "g2b", "g2e"}
    with pytest.raises(InputError) as e:
        select_pool_runs(manifest(), include=["nope"])
    assert e.value.rule == "unknown-run"


def test_fraction_exact_size_seeded_and_order_independent():
    ids = [f"p{i:05d}" for i in range(1000)]
    a = fractional_ids(ids, 0.1, seed=7).to_pylist()
    assert len(a) == 100 and len(set(a)) == 100
    assert fractional_ids(list(reversed(ids)), 0.1, seed=7).to_pylist() == a  # query- and order-independent
    assert fractional_ids(ids, 0.1, seed=8).to_pylist() != a
    # it is the first 10% of the seeded random order
    keys = random_keys(ids, 7)
    expect = [i for _, i in sorted(zip(keys.tolist(), ids))][:100]
    assert a == expect


def test_fraction_streamed_equals_in_memory():
    ids = [f"p{i}" for i in range(500)]

    def chunks():
        for s in range(0, 500, 64):
            yield pa.array(ids[s:s + 64])

    assert fractional_ids(chunks, 0.25, 3).to_pylist() == fractional_ids(ids, 0.25, 3).to_pylist()


def _by_sort(ids, fraction, keys):
    """The definition: sort by (key, id), keep the first round(n * fraction)."""
    return [i for _, i in sorted(zip(keys, ids))][: int(round(len(ids) * fraction))]


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.text(min_size=1, max_size=4), max_size=60), fraction=st.floats(0.01, 1.0),
       chunk=st.integers(1, 9), buckets=st.sampled_from([None, 1, 3]))
def test_masks_and_ids_are_the_definition_even_when_keys_tie(ids, fraction, chunk, buckets):
    """fractional_masks (per chunk) and fractional_ids (in the random order) keep the first
    round(n * fraction) ids by (key, id), streamed in chunks of any size; with keys folded into
    a few buckets (ties at the cut everywhere) the ids decide."""
    real = fr.random_keys
    keyf = real if buckets is None else (lambda c, seed: real(c, seed) % np.uint64(buckets))
    old, fr.random_keys = fr.random_keys, keyf
    try:
        def chunks():
            for s in range(0, len(ids), chunk):
                yield pa.array(ids[s:s + chunk], pa.string())

        expect = _by_sort(ids, fraction, keyf(ids, 5).tolist() if ids else [])
        got = fractional_ids(chunks, fraction, 5).to_pylist()
        masks = fractional_masks(chunks, fraction, 5)
    finally:
        fr.random_keys = old
    assert got == expect
    kept = [i for c, m in zip(chunks(), masks) for i, k in zip(c.to_pylist(), m) if k]
    assert sorted(kept) == sorted(expect)


def test_fraction_over_deduplicated_corpus():
    ids = ["a", "b", "c", "d"]
    classes = pa.table({"docid": ["a", "b", "c"], "class_id": ["a", "a", "a"]})
    got = fractional_ids(ids, 1.0, 0, classes=classes).to_pylist()
    assert sorted(got) == ["a", "d"]
    with pytest.raises(InputError):
        fractional_ids(ids, 0.0, 0)


def test_restricted_runs_and_fractional_pool():
    t = canonicalize(pa.table({"run": ["A"] * 4 + ["B"] * 2, "qid": ["1"] * 6,
                               "docid": ["a", "b", "c", "d", "c", "e"], "score": [4.0, 3, 2, 1, 2, 1]}))
    r = restrict_runs(t, pa.array(["b", "d", "e"]))
    assert [(x["run"], x["docid"], x["rank"]) for x in r.to_pylist()] == [("A", "b", 1), ("A", "d", 2), ("B", "e", 1)]
    qrels = pa.table({"qid": ["1"], "docid": ["b"], "rel": pa.array([1], pa.int32())})
    pool = depth_pool(r, 1, qrels=qrels, judged="drop")
    assert pool["docid"].to_pylist() == ["e"]
    # with classes: a passage outside the fraction whose class is inside stays
    classes = pa.table({"docid": ["a"], "class_id": ["b"]})
    r2 = restrict_runs(t, pa.array(["b"]), classes=classes)
    assert r2["docid"].to_pylist() == ["a", "b"]
