"""Dask mode of the near-duplicate clustering: exactly the classes of the local mode.

One LocalCluster (2 worker processes, 1 thread each) serves the module; the CLI test lets
``cluster_corpus_dask`` start and close its own. Small ``chunk_rows`` make many parts, key
buckets and verification ranges out of 20k passages.
"""

from __future__ import annotations

import gzip
import logging

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed")

from qrelkit.cli import run  # noqa: E402
from qrelkit.dedupe import DedupeParams, cluster_corpus  # noqa: E402
from qrelkit.dedupe.distributed import cluster_corpus_dask  # noqa: E402
from qrelkit.io.corpus import read_corpus  # noqa: E402
from qrelkit.io.qrels import judged, read_qrels  # noqa: E402
from qrelkit.io.tables import write_table  # noqa: E402
from qrelkit.simulate.campaign import simulate_campaign  # noqa: E402

from conftest import shared  # noqa: E402

CHUNK = 2500


@pytest.fixture(scope="module")
def scheduler():
    try:
        lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                      silence_logs=logging.CRITICAL)
    except Exception as exc:  # noqa: BLE001 - no processes, no sockets, ...
        pytest.skip(f"dask.distributed cannot start a LocalCluster here: {exc!r}")
    with lc:
        yield lc.scheduler_address


@pytest.fixture(scope="module")
def camp(tmp_path_factory):
    d = tmp_path_factory.mktemp("dask-camp")
    simulate_campaign(d, n_passages=20000, n_topics=5, n_groups=3, seed=5)
    return d


def assert_same(local, dask, params, tmp_path):
    assert dask.classes.schema == local.classes.schema
    assert dask.classes.equals(local.classes)
    stats = dict(dask.stats)
    stats.pop("dask")
    assert stats == local.stats
    a = write_table(local.classes, tmp_path / "local.parquet", kind="dedupe-classes", params=params.as_dict())
    b = write_table(dask.classes, tmp_path / "dask.parquet", kind="dedupe-classes", params=params.as_dict())
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("verify", ["signature", "none"])
def test_same_classes_as_local(camp, scheduler, tmp_path, verify):
    params = DedupeParams(verify=verify, chunk_rows=CHUNK)
    local = cluster_corpus(camp / "corpus.jsonl", params)
    dask = cluster_corpus_dask(camp / "corpus.jsonl", params, scheduler=scheduler, spill_dir=tmp_path / "spill")
    assert_same(local, dask, params, tmp_path)
    info = dask.stats["dask"]
    assert info["parts"] >= 6 and info["band_groups"] == 4 and info["key_buckets"] >= 2
    assert local.stats["duplicate_classes"] > 500  # the test means something
    assert list((tmp_path / "spill").iterdir()) == []  # the spill folder is cleaned up


def test_priority_canonicals(camp, scheduler, tmp_path):
    params = DedupeParams(canonical="priority", chunk_rows=CHUNK)
    pids = read_corpus(camp / "corpus.jsonl")["pid"].to_pylist()
    priority = set(judged(read_qrels(camp / "qrels.txt"))["docid"].to_pylist()) | set(pids[1::3])
    local = cluster_corpus(camp / "corpus.jsonl", params, priority=priority)
    dask = cluster_corpus_dask(camp / "corpus.jsonl", params, priority=priority, scheduler=scheduler, bands_per_task=5)
    assert_same(local, dask, params, tmp_path)
    first = cluster_corpus(camp / "corpus.jsonl", DedupeParams(chunk_rows=CHUNK))
    assert not first.classes["class_id"].equals(dask.classes["class_id"])  # priority moved canonicals


def test_other_formats(camp, scheduler, tmp_path):
    t = read_corpus(camp / "corpus.jsonl").select(["pid", "text"])
    pq.write_table(t, tmp_path / "c.parquet", row_group_size=1000)
    pacsv.write_csv(t, tmp_path / "c.tsv", write_options=pacsv.WriteOptions(include_header=False, delimiter="\t",
                                                                           quoting_style="none"))
    with open(tmp_path / "c.tsv", "rb") as src, gzip.open(tmp_path / "c.tsv.gz", "wb") as dst:
        dst.write(src.read())
    params = DedupeParams(chunk_rows=4000)
    local = cluster_corpus(camp / "corpus.jsonl", params)
    for corpus in (tmp_path / "c.parquet", tmp_path / "c.tsv.gz"):
        assert_same(local, cluster_corpus_dask(corpus, params, scheduler=scheduler), params, tmp_path)


def test_modes_on_a_table_with_empty_and_tiny_passages(scheduler, tmp_path):
    texts = ["", "a b c d e", "A B, C D E!", "", "x", "x", "<p>a b c d e</p>", "a b c d f",
             "one two three four five six", "one two three four five seven", "1 2 3"] * 40
    table = pa.table({"pid": [f"q{i}" for i in range(len(texts))], "text": texts})
    for kw in ({"verify": "exact"}, {"mode": "greedy"}, {"mode": "greedy", "verify": "none"}, {"linkage": "single"},
               {"bands": 16, "rows": 8, "threshold": 0.9}):
        params = DedupeParams(chunk_rows=100, **kw)
        local = cluster_corpus(table, params)
        dask = cluster_corpus_dask(table, params, scheduler=scheduler, bands_per_task=6, return_signatures=True)
        assert_same(local, dask, params, tmp_path)
        assert np.array_equal(dask.sig, local.sig)
        assert local.stats["empty_passages"] == 80  # "" only: digits are words by default ("1 2 3")


def test_real_passages(scheduler, tmp_path):
    path = shared("msmarco_dl19_passages", "collection.tsv")
    for verify in ("signature", "exact"):
        params = DedupeParams(verify=verify, chunk_rows=500)
        assert_same(cluster_corpus(path, params), cluster_corpus_dask(path, params, scheduler=scheduler), params, tmp_path)


def test_errors_match_local(scheduler, tmp_path):
    lines = [f'{{"pid": "p{i}", "text": "passage number {i} of the corpus"}}' for i in range(3000)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines[:2222] + ['{"pid": "x", "text": '] + lines[2222:]) + "\n")
    dup = tmp_path / "dup.jsonl"
    dup.write_text("\n".join(lines + [lines[1500]]))
    params = DedupeParams(chunk_rows=300)
    msgs = []
    for path in (bad, dup):
        with pytest.raises(ValueError) as local:
            cluster_corpus(path, params)
        with pytest.raises(ValueError) as dask:
            cluster_corpus_dask(path, params, scheduler=scheduler)
        assert str(dask.value) == str(local.value)
        msgs.append(str(dask.value))
    assert ":2223: [bad-json]" in msgs[0] and "[duplicate-id] passage id 'p1500'" in msgs[1]


def test_cli_dask_starts_its_own_cluster(camp, tmp_path, monkeypatch):
    monkeypatch.setenv("QRELKIT_DASK_SPILL", str(tmp_path / "spill"))
    corpus = str(camp / "corpus.jsonl")
    assert run(["dedupe", "cluster", corpus, "-o", str(tmp_path / "local.parquet")]) == 0
    assert run(["dedupe", "cluster", corpus, "-o", str(tmp_path / "dask.parquet"), "--dask", "--workers", "2"]) == 0
    assert (tmp_path / "dask.parquet").read_bytes() == (tmp_path / "local.parquet").read_bytes()
    assert list((tmp_path / "spill").iterdir()) == []
