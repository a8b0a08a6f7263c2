"""The simulator's MS MARCO v2 layout (issue #22): a folder of gzip JSONL shards whose pids are
their lines' byte offsets, several passages per document, the same ids in runs, qrels and truth.

A small call is cheap (about a second): other tests that need such a folder can make one with
``simulate_campaign(tmp, n_passages=400, n_topics=2, n_groups=1, runs_per_group=(1, 1), depth=10,
layout="msmarco-v2", shards=3)``."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from qrelkit.cli import run
from qrelkit.io.corpus import lookup_texts, read_corpus
from qrelkit.simulate.campaign import simulate_campaign

SMALL = dict(n_passages=1200, n_topics=3, n_groups=2, runs_per_group=(1, 2), depth=20, seed=5,
             layout="msmarco-v2", shards=4)
PID = re.compile(r"^msmarco_passage_(\d\d)_(\d+)$")
DOCID = re.compile(r"^msmarco_doc_(\d\d)_(\d+)$")


@pytest.fixture(scope="module")
def v2(tmp_path_factory):
    out = tmp_path_factory.mktemp("v2")
    return out, simulate_campaign(out, **SMALL)


def _records(shard: Path) -> list[tuple[int, bytes]]:
    data = gzip.decompress(shard.read_bytes())
    out, at = [], 0
    for line in data.splitlines(keepends=True):
        out.append((at, line))
        at += len(line)
    return out


def test_shards_and_offset_pids(v2):
    out, summary = v2
    folder = out / "msmarco_v2_passage"
    assert summary["files"]["corpus"] == "msmarco_v2_passage"
    assert summary["parameters"]["layout"] == "msmarco-v2" and summary["parameters"]["shards"] == 4
    shards = sorted(folder.iterdir())
    assert [p.name for p in shards] == [f"msmarco_passage_{k:02d}.gz" for k in range(4)]
    n, docs_of_shard, passages_of_doc = 0, {}, {}
    for k, shard in enumerate(shards):
        records = _records(shard)
        for at, line in records:
            rec = json.loads(line)
            assert list(rec) == ["pid", "passage", "spans", "docid"]
            m = PID.match(rec["pid"])
            assert m and int(m.group(1)) == k and int(m.group(2)) == at
            d = DOCID.match(rec["docid"])
            assert d and int(d.group(1)) == k
            docs_of_shard.setdefault(rec["docid"], set()).add(k)
            passages_of_doc[rec["docid"]] = passages_of_doc.get(rec["docid"], 0) + 1
            s, e = (int(x) for x in re.fullmatch(r"\((\d+),(\d+)\)", rec["spans"]).groups())
            assert e - s == len(rec["passage"])
            n += 1
        # random access: seek into the decompressed shard at a pid's offset, read that pid's line
        with gzip.open(shard, "rb") as fh:
            for at, line in records[::97]:
                fh.seek(at)
                got = json.loads(fh.readline())
                assert got["pid"] == f"msmarco_passage_{k:02d}_{at}"
    assert n == SMALL["n_passages"] == summary["counts"]["passages"]
    assert all(len(v) == 1 for v in docs_of_shard.values())  # a document never straddles shards
    assert len(passages_of_doc) == summary["counts"]["documents"]
    assert max(passages_of_doc.values()) > 1  # several passages per document


def test_runs_qrels_and_truth_use_the_corpus_ids(v2):
    out, _ = v2
    pids = {json.loads(line)["pid"] for shard in sorted((out / "msmarco_v2_passage").iterdir())
            for _, line in _records(shard)}
    used = set()
    for run in (out / "runs").glob("*.run"):
        used |= {line.split()[2] for line in run.read_text().splitlines()}
    qrels = [line.split() for line in (out / "qrels.txt").read_text().splitlines()]
    used |= {q[2] for q in qrels}
    truth = [line.split("\t") for line in (out / "neardup_truth.tsv").read_text().splitlines()]
    used |= {x for row in truth for x in row}
    assert used and used <= pids
    # qrels sorted by topic, then by pid as strings (as the flat layout's ids)
    assert qrels == sorted(qrels, key=lambda q: (q[0], q[2]))
    # runs list tied passages in trec_eval's order (pid string descending) unless their group does not
    summary = json.loads((out / "summary.json").read_text())
    desc = [r["run"] for r in summary["runs"] if r["tie_order"] == "desc" and r["tied_pairs"]]
    assert desc  # else the loop below checks nothing
    for name in desc:
        rows = [line.split() for line in (out / "runs" / f"{name}.run").read_text().splitlines()]
        for a, b in zip(rows, rows[1:]):
            if a[0] == b[0] and a[4] == b[4]:
                assert a[2] > b[2]


def test_the_readers_take_the_folder_and_its_offset_ids(v2):
    """What the campaign reads: the shards in order, and the ids looked up by their offsets."""
    out, _ = v2
    folder = out / "msmarco_v2_passage"
    recs = [json.loads(line) for shard in sorted(folder.iterdir()) for _, line in _records(shard)]
    t = read_corpus(folder)
    assert t["pid"].to_pylist() == [r["pid"] for r in recs]
    assert t["docid"].to_pylist() == [r["docid"] for r in recs]
    some = recs[::151]
    assert lookup_texts(folder, {r["pid"] for r in some}) == {r["pid"]: (r["passage"], r["docid"]) for r in some}


def test_deterministic_and_cli(v2, tmp_path):
    out, _ = v2
    code = run(["simulate", "campaign", "-o", str(tmp_path / "cli"), "--passages", "1200", "--topics", "3",
                "--groups", "2", "--depth", "20", "--seed", "5",
                "--msmarco-v2", "--shards", "4"])
    assert code == 0
    again = simulate_campaign(tmp_path / "again", **SMALL)
    assert again == json.loads((out / "summary.json").read_text())
    for p in sorted((out / "msmarco_v2_passage").iterdir()):
        assert (tmp_path / "again" / "msmarco_v2_passage" / p.name).read_bytes() == p.read_bytes()
        assert (tmp_path / "cli" / "msmarco_v2_passage" / p.name).is_file()


@pytest.mark.parametrize("kwargs", [dict(layout="trec"), dict(layout="msmarco-v2", shards=0),
                                    dict(layout="msmarco-v2", shards=100)])
def test_bad_layout_arguments(tmp_path, kwargs):
    with pytest.raises(ValueError):
        simulate_campaign(tmp_path / "x", n_passages=500, n_topics=2, n_groups=1, depth=10, **kwargs)
