"""Near-duplicate pipeline on a simulated campaign and real passages; CLI; incremental mode."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from qrelkit.cli import run
from qrelkit.dedupe import DedupeParams, cluster_corpus, read_nist
from qrelkit.dedupe.accuracy import copy_recall_by_edits, pair_scores
from qrelkit.dedupe.incremental import assign_new, save_index
from qrelkit.io.classes import read_classes
from qrelkit.io.corpus import read_corpus
from qrelkit.simulate.campaign import simulate_campaign

from conftest import shared


@pytest.fixture(scope="module")
def camp(tmp_path_factory):
    d = tmp_path_factory.mktemp("camp")
    simulate_campaign(d, n_passages=30000, n_topics=5, n_groups=3, seed=11)
    return d


def test_accuracy_on_simulated_truth(camp):
    res = cluster_corpus(camp / "corpus.jsonl")
    truth = read_classes(camp / "neardup_truth.tsv")
    s = pair_scores(res.classes, truth)
    assert s["precision"] >= 0.99 and s["recall"] >= 0.95
    by_edits = copy_recall_by_edits(res.classes, truth, read_corpus(camp / "corpus.jsonl"))
    rec = dict(zip(by_edits["edits"], by_edits["recall"]))
    assert rec["0"] == 1.0  # every case/punctuation-only copy merged
    for e in ("1", "2", "3"):
        assert rec[e] >= 0.95, by_edits


def test_incremental_assignment(camp, tmp_path):
    corpus = read_corpus(camp / "corpus.jsonl").select(["pid", "text"])
    n = corpus.num_rows
    first, second = corpus.slice(0, n // 2), corpus.slice(n // 2)
    res = cluster_corpus(first)
    save_index(res, res.sig, tmp_path / "idx")
    new, summary = assign_new(second, tmp_path / "idx")
    assert summary["new_passages"] == second.num_rows
    full = dict(zip(*[cluster_corpus(corpus).classes[c].to_pylist() for c in ("docid", "class_id")]))
    got = dict(zip(new["docid"].to_pylist(), new["class_id"].to_pylist()))
    agree = sum(full[d] == c for d, c in got.items()) / len(got)
    assert agree >= 0.999  # only where the full run merges two old classes may they differ
    assert summary["joined_existing"] > 0
    again, s2 = assign_new(first, tmp_path / "idx")
    assert s2["new_passages"] == 0 and again.num_rows == 0


def test_cli_dedupe_commands_deterministic(camp, tmp_path, capsys):
    outs = []
    for k in range(2):
        d = tmp_path / f"r{k}"
        assert run(["dedupe", "cluster", str(camp / "corpus.jsonl"), "-o", str(d / "classes.parquet"),
                    "--nist-out", str(d / "nist.txt"), "--index-out", str(d / "idx"), "--json"]) == 0
        outs.append(d)
    assert (outs[0] / "classes.parquet").read_bytes() == (outs[1] / "classes.parquet").read_bytes()
    assert (outs[0] / "nist.txt").read_bytes() == (outs[1] / "nist.txt").read_bytes()
    summary = json.loads(capsys.readouterr().out.strip().split("\n}\n")[0] + "\n}")
    assert summary["passages"] == 30000 and "s_curve" in summary
    d = outs[0]
    # NIST import gives the same classes
    assert run(["dedupe", "import-nist", str(d / "nist.txt"), "-o", str(d / "imported.parquet")]) == 0
    a, b = pq.read_table(d / "classes.parquet"), pq.read_table(d / "imported.parquet")
    assert dict(zip(a["docid"].to_pylist(), a["class_id"].to_pylist())) == dict(zip(b["docid"].to_pylist(), b["class_id"].to_pylist()))
    assert run(["dedupe", "stats", str(d / "classes.parquet"), "--json", "--corpus", str(camp / "corpus.jsonl")]) == 0
    capsys.readouterr()
    assert run(["dedupe", "runs", str(camp / "runs"), "--classes", str(d / "nist.txt"), "--depth", "20",
                "-o", str(d / "dd.parquet"), "--lenient"]) == 0
    dd = pq.read_table(d / "dd.parquet")
    key = pc.binary_join_element_wise(dd["run"], dd["qid"], dd["class_id"], "|")
    assert pc.count_distinct(key).as_py() == dd.num_rows  # one hit per (run, topic, class)
    assert run(["dedupe", "expand-qrels", str(camp / "qrels.txt"), "--classes", str(d / "classes.parquet"),
                "-o", str(d / "expanded.txt"), "--table-out", str(d / "table.csv"), "--json"]) == 0
    exp = json.loads(capsys.readouterr().out)
    assert exp["expanded"] >= exp["judged"]
    # the classes feed the pool and batch commands
    assert run(["pool", "depth", str(camp / "runs"), "--classes", str(d / "classes.parquet"), "--lenient",
                "-o", str(d / "pool.parquet")]) == 0
    canon = set(pc.unique(a["class_id"]).to_pylist())
    assert set(pq.read_table(d / "pool.parquet")["docid"].to_pylist()) <= canon
    assert run(["dedupe", "assign", str(camp / "corpus.jsonl"), "--index", str(d / "idx"), "-o", str(d / "new.parquet")]) == 0


def test_bad_parameters(camp, capsys):
    assert run(["dedupe", "cluster", str(camp / "corpus.jsonl"), "-o", "/tmp/x.parquet", "--bands", "64", "--rows", "4"]) == 2
    assert "[bad-option]" in capsys.readouterr().err


def test_msmarco_passages_identical_after_normalization_share_a_class():
    path = shared("msmarco_dl19_passages", "collection.tsv")
    corpus = read_corpus(path)
    res = cluster_corpus(corpus)
    from qrelkit.dedupe import words

    by_norm: dict[tuple, list[str]] = {}
    for pid, text in zip(corpus["pid"].to_pylist(), corpus["text"].to_pylist()):
        by_norm.setdefault(tuple(words(text)), []).append(pid)
    cls = dict(zip(res.classes["docid"].to_pylist(), res.classes["class_id"].to_pylist()))
    groups = [g for k, g in by_norm.items() if len(g) > 1 and k]
    assert groups, "the collection has exact duplicates after normalization"
    for g in groups:
        assert len({cls[p] for p in g}) == 1, g
    assert res.stats["duplicate_classes"] >= len(groups)


def test_canonical_linkage_every_member_near_its_canonical():
    path = shared("msmarco_dl19_passages", "collection.tsv")
    corpus = read_corpus(path)
    from qrelkit.dedupe.accuracy import exact_scores

    for linkage, expect_all in (("canonical", True), ("single", False)):
        res = cluster_corpus(corpus, DedupeParams(linkage=linkage))
        canon = pc.index_in(res.classes["class_id"], value_set=corpus["pid"]).to_numpy()
        p = res.params
        s = exact_scores(canon, corpus["text"], p.threshold, ngram=p.ngram, norm=p.norm)
        assert (s["edge_precision"] == 1.0) == expect_all  # single linkage chains overlapping web passages together


def test_cli_evaluate(camp, tmp_path, capsys):
    out = tmp_path / "classes.parquet"
    assert run(["dedupe", "cluster", str(camp / "corpus.jsonl"), "-o", str(out)]) == 0
    capsys.readouterr()
    assert run(["dedupe", "evaluate", str(out), "--truth", str(camp / "neardup_truth.tsv"),
                "--corpus", str(camp / "corpus.jsonl"), "--json", "-o", str(tmp_path / "by_edits.csv")]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["precision"] >= 0.99 and res["recall"] >= 0.95
    assert {r["edits"] for r in res["by_edits"]} >= {"0", "1", "2", "3"}


def test_missing_corpus_is_input_error(tmp_path, capsys):
    assert run(["dedupe", "cluster", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "c.parquet")]) == 2
    assert "[unreadable]" in capsys.readouterr().err


def test_corpus_reader_blocks_long_lines_and_blank_lines(tmp_path):
    """JSONL is parsed in 4 MB blocks on threads; a passage longer than a block still reads (the
    chunk is re-read as one block), rows keep corpus order, blank lines are skipped, and the
    signature array's capacity (an upper bound) is trimmed to the passages."""
    from qrelkit.io.corpus import count_passages, passages_upper_bound

    p = tmp_path / "c.jsonl"
    rows = [{"id": f"d{i}", "text": ("w%d " % i) * (1_500_000 if i == 3 else 20)} for i in range(300)]
    with open(p, "w") as fh:
        for i, r in enumerate(rows):
            fh.write(json.dumps(r) + "\n" + ("\n" if i % 50 == 0 else ""))
    t = read_corpus(p)
    assert t["pid"].to_pylist() == [r["id"] for r in rows]
    assert len(t["text"][3].as_py()) > (4 << 20)
    assert count_passages(p) == 300 and passages_upper_bound(p) >= 300
    res = cluster_corpus(p, DedupeParams())
    assert res.classes.num_rows == 300
    assert res.sig.shape[0] == 300  # the capacity (lines + 1, blank lines included) is trimmed
