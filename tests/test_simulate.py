"""Tests of the synthetic campaign simulator (qrelkit.simulate.campaign)."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import pytest

from qrelkit.io.classes import read_classes
from qrelkit.io.corpus import read_corpus
from qrelkit.io.manifest import read_manifest
from qrelkit.io.qrels import read_qrels
from qrelkit.io.runs import read_runs
from qrelkit.io.topics import read_topics
from qrelkit.simulate.campaign import simulate_campaign

SMALL = dict(n_passages=3000, n_topics=8, n_groups=3, runs_per_group=(1, 3), depth=20, seed=7)
FILES = ["corpus.jsonl", "neardup_truth.tsv", "topics.tsv", "qrels.txt", "manifest.csv", "summary.json"]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    out = tmp_path_factory.mktemp("campaign")
    calls = []
    summary = simulate_campaign(out, progress=lambda step, frac: calls.append((step, frac)), **SMALL)
    return out, summary, calls


def _all_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _words(text: str) -> list[str]:
    return re.sub(r"[^\w\s]", "", text.lower()).split()


def _within_edits(a: list[str], b: list[str], k: int) -> bool:
    """Word-level Levenshtein distance of a and b is at most k (banded dynamic programming)."""
    if abs(len(a) - len(b)) > k:
        return False
    big = k + 1
    prev = {j: j for j in range(0, min(len(b), k) + 1)}
    for i in range(1, len(a) + 1):
        cur = {}
        for j in range(max(0, i - k), min(len(b), i + k) + 1):
            best = prev.get(j, big) + 1
            if j > 0:
                best = min(best, cur.get(j - 1, big) + 1, prev.get(j - 1, big) + (a[i - 1] != b[j - 1]))
            cur[j] = min(best, big)
        prev = cur
    return prev.get(len(b), big) <= k


def test_files_exist_and_parse(campaign):
    out, summary, _ = campaign
    for name in FILES:
        assert (out / name).is_file(), name
    corpus = read_corpus(out / "corpus.jsonl")
    pids = corpus["pid"].to_pylist()
    docids = corpus["docid"].to_pylist()
    assert len(pids) == SMALL["n_passages"] == summary["counts"]["passages"]
    assert pids == sorted(pids) and len(set(pids)) == len(pids)
    assert all(re.fullmatch(r"p\d{7}", p) for p in pids)
    assert all(re.fullmatch(r"d\d{6}", d) for d in docids)
    # passages of a document are consecutive; 1-10 passages per document
    runs_of_docs = [d for i, d in enumerate(docids) if i == 0 or d != docids[i - 1]]
    assert len(runs_of_docs) == len(set(docids)) == summary["counts"]["documents"]
    sizes = collections.Counter(docids)
    assert 1 <= min(sizes.values()) and max(sizes.values()) <= 10
    lengths = [len(t.split()) for t in corpus["text"].to_pylist()]
    assert 27 <= min(lengths) and max(lengths) <= 83
    # the raw JSONL has exactly the MS MARCO v2 keys in order
    first = (out / "corpus.jsonl").read_text().splitlines()[0]
    assert list(json.loads(first)) == ["pid", "passage", "docid"]

    topics = read_topics(out / "topics.tsv")
    assert topics["qid"].tolist() == [str(1001 + i) for i in range(SMALL["n_topics"])]
    assert all(t for t in topics["text"])

    qrels = read_qrels(out / "qrels.txt")
    rel = qrels["rel"].to_pylist()
    assert set(rel) <= {0, 1, 2, 3} and {0, 1, 2, 3} <= set(rel)
    assert set(qrels["qid"].to_pylist()) <= set(topics["qid"])
    assert set(qrels["docid"].to_pylist()) <= set(pids)
    per_topic = collections.Counter(q for q, r in zip(qrels["qid"].to_pylist(), rel) if r >= 2)
    assert max(per_topic.values()) >= 1
    for line in (out / "qrels.txt").read_text().splitlines():
        assert re.fullmatch(r"\d+ 0 p\d{7} [0-3]", line)

    manifest = read_manifest(out / "manifest.csv")
    assert (out / "manifest.csv").read_text().splitlines()[0] == "run,group,priority,baseline,subtask,file"
    assert manifest["baseline"].sum() >= 1
    assert set(manifest["subtask"]) <= {"fullrank", "rerank"}
    for _, grp in manifest.groupby("group"):
        assert sorted(grp["priority"]) == list(range(1, len(grp) + 1))
    assert all(f == f"{r}.run" for r, f in zip(manifest["run"], manifest["file"]))
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(manifest["file"])
    assert len(manifest) == summary["counts"]["runs"]

    assert json.loads((out / "summary.json").read_text()) == summary
    json.dumps(summary)  # JSON-able


def test_runs_read_strict_and_have_depth(campaign):
    out, summary, _ = campaign
    manifest = read_manifest(out / "manifest.csv")
    rs = read_runs(out / "runs", manifest=manifest, topics=read_topics(out / "topics.tsv")["qid"])
    assert rs.errors().empty
    assert sorted(rs.runs) == sorted(manifest["run"])
    counts = rs.table.group_by(["run", "qid"]).aggregate([("docid", "count")])
    assert counts.num_rows == len(manifest) * SMALL["n_topics"]
    assert set(counts["docid_count"].to_pylist()) == {SMALL["depth"]}
    ties = 0
    for path in sorted((out / "runs").glob("*.run")):
        text = path.read_text()
        assert text.endswith("\n") and "\t" not in text and "  " not in text
        by_topic = collections.defaultdict(list)
        for line in text.splitlines():
            qid, q0, pid, rank, score, tag = line.split(" ")
            assert q0 == "Q0" and tag == path.stem
            by_topic[qid].append((int(rank), float(score)))
        for rows in by_topic.values():
            assert [r for r, _ in rows] == list(range(1, SMALL["depth"] + 1))
            scores = [s for _, s in rows]
            assert all(a >= b for a, b in zip(scores, scores[1:]))
            ties += sum(a == b for a, b in zip(scores, scores[1:]))
    assert ties > 0


def test_deterministic(campaign, tmp_path):
    out, summary, _ = campaign
    again = simulate_campaign(tmp_path / "again", **SMALL)
    assert again == summary
    assert _all_files(tmp_path / "again") == _all_files(out)
    other = simulate_campaign(tmp_path / "other", **{**SMALL, "seed": SMALL["seed"] + 1})
    files = _all_files(tmp_path / "other")
    reference = _all_files(out)
    for name in ["corpus.jsonl", "qrels.txt", "neardup_truth.tsv", "topics.tsv"]:
        assert files[name] != reference[name], name
    assert other != summary


def test_neardup_truth(campaign):
    out, summary, _ = campaign
    corpus = read_corpus(out / "corpus.jsonl")
    text = dict(zip(corpus["pid"].to_pylist(), corpus["text"].to_pylist()))
    position = {p: i for i, p in enumerate(corpus["pid"].to_pylist())}
    classes: dict[str, list[str]] = collections.defaultdict(list)
    for line in (out / "neardup_truth.tsv").read_text().splitlines():
        cls, pid = line.split("\t")
        classes[cls].append(pid)
    assert sum(map(len, classes.values())) == summary["counts"]["neardup_passages"]
    assert len(classes) == summary["counts"]["neardup_classes"] > 0
    sizes = collections.Counter(len(m) for m in classes.values())
    assert min(sizes) >= 2 and sizes[2] + sizes[3] > len(classes) / 2 and max(sizes) >= 10
    copies = sum(map(len, classes.values())) - len(classes)
    assert abs(copies - 0.1 * SMALL["n_passages"]) <= 1
    edited = exact_words = 0
    for cls, members in classes.items():
        assert cls in members and all(m in text for m in members)
        assert min(members, key=position.get) == cls  # canonical = first in corpus order
        canon = _words(text[cls])
        for m in members:
            if m == cls:
                continue
            words = _words(text[m])
            assert _within_edits(canon, words, 3), (cls, m)
            if words == canon:
                exact_words += 1
            else:
                edited += 1
    assert edited > 0 and exact_words > 0
    # NIST's file format, as qrelkit reads it
    t = read_classes(out / "neardup_truth.tsv")
    assert t.num_rows == summary["counts"]["neardup_passages"]


def test_duplicates_share_grades_and_appear_in_runs(campaign):
    out, _, _ = campaign
    cls_of = {}
    for line in (out / "neardup_truth.tsv").read_text().splitlines():
        cls, pid = line.split("\t")
        cls_of[pid] = cls
    members = collections.Counter(cls_of.values())
    qrels = read_qrels(out / "qrels.txt")
    grade = {(q, d): r for q, d, r in zip(qrels["qid"].to_pylist(), qrels["docid"].to_pylist(), qrels["rel"].to_pylist())}
    by_class = collections.defaultdict(set)
    count = collections.Counter()
    for (q, d), r in grade.items():
        if d in cls_of:
            by_class[(q, cls_of[d])].add(r)
            count[(q, cls_of[d])] += 1
    assert by_class, "some graded passages have near-duplicates"
    assert all(len(g) == 1 for g in by_class.values())  # duplicates carry the same grade
    assert all(count[k] == members[k[1]] for k in count)  # every member of a graded class is graded
    assert any(min(g) >= 2 for g in by_class.values())  # some relevant passages have duplicates
    rs = read_runs(out / "runs")
    seen = collections.Counter()
    for run, qid, docid in zip(rs.table["run"].to_pylist(), rs.table["qid"].to_pylist(), rs.table["docid"].to_pylist()):
        if docid in cls_of:
            seen[(run, qid, cls_of[docid])] += 1
    assert max(seen.values()) >= 2  # runs retrieve several members of one class


def test_relevant_passages_carry_query_terms(campaign):
    out, _, _ = campaign
    corpus = read_corpus(out / "corpus.jsonl")
    text = dict(zip(corpus["pid"].to_pylist(), corpus["text"].to_pylist()))
    topics = read_topics(out / "topics.tsv")
    qrels = read_qrels(out / "qrels.txt")
    english = {"what", "is", "how", "to", "definition", "why", "does", "causes", "long", "take", "where", "safe",
               "are", "the", "effects", "of"}
    overlap_rel, overlap_random = [], []
    all_pids = list(text)
    for qid, query in zip(topics["qid"], topics["text"]):
        terms = set(query.split()) - english
        rel = [d for q, d, r in zip(qrels["qid"].to_pylist(), qrels["docid"].to_pylist(), qrels["rel"].to_pylist())
               if q == qid and r >= 2]
        overlap_rel += [len(terms & set(_words(text[d]))) for d in rel]
        overlap_random += [len(terms & set(_words(text[d]))) for d in all_pids[:: 97]]
    mean_rel = sum(overlap_rel) / len(overlap_rel)
    mean_random = sum(overlap_random) / len(overlap_random)
    assert mean_rel > 0.8 and mean_rel > 4 * mean_random, (mean_rel, mean_random)


def test_progress_and_summary(campaign):
    _, summary, calls = campaign
    assert len(calls) >= 3
    fracs = [f for _, f in calls]
    assert fracs == sorted(fracs) and fracs[0] >= 0 and fracs[-1] == 1.0
    assert summary["parameters"]["seed"] == SMALL["seed"]
    assert summary["files"]["qrels"] == "qrels.txt"
    kinds = {t["kind"] for t in summary["topics"]}
    assert {"few", "normal", "many"} <= kinds


def test_options_and_stale_runs(tmp_path):
    out = tmp_path / "c"
    (out / "runs").mkdir(parents=True)
    (out / "runs" / "old_run.run").write_text("1 Q0 p0000001 1 1.0 old_run\n")
    s = simulate_campaign(out, n_passages=500, n_docs=100, n_topics=2, n_groups=0, depth=30, dup_fraction=0.0,
                          subtasks=("rerank",), seed=3)
    assert not (out / "runs" / "old_run.run").exists()
    assert s["counts"]["runs"] == 2 and s["counts"]["neardup_classes"] == 0
    assert (out / "neardup_truth.tsv").read_text() == ""
    corpus = read_corpus(out / "corpus.jsonl")
    assert len(set(corpus["docid"].to_pylist())) == 100
    manifest = read_manifest(out / "manifest.csv")
    assert set(manifest["subtask"]) == {"rerank"} and manifest["baseline"].all()
    rs = read_runs(out / "runs", manifest=manifest)
    assert rs.errors().empty and rs.table.num_rows == 2 * 2 * 30


def test_default_size_runs(tmp_path):
    s = simulate_campaign(tmp_path / "d", seed=1)
    assert s["counts"]["passages"] == 20000
    assert 2 <= s["counts"]["largest_class"] <= 200
    assert s["counts"]["runs"] >= 2 + 6 * 2
    # runs overlap at depth 10, but far from completely
    runs = s["counts"]["runs"]
    assert 10 < s["pool"]["mean_distinct_per_topic"] < 0.8 * 10 * runs


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(n_passages=50),
        dict(depth=0),
        dict(n_topics=0),
        dict(runs_per_group=(3, 2)),
        dict(dup_fraction=0.9),
        dict(subtasks=()),
        dict(n_docs=10),
    ],
)
def test_bad_arguments(tmp_path, kwargs):
    with pytest.raises(ValueError):
        simulate_campaign(tmp_path / "x", **kwargs)
