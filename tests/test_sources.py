"""Corpus sources (issue #22): a folder of shards read as one corpus — MS MARCO v2's layout (gzip
JSON lines without a suffix, ids naming their shard and byte offset) — by every reader, check,
lookup, command and the campaign, with the same outputs as the same passages in one file."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from qrelkit.campaign import Campaign, open_campaign_store
from qrelkit.cli import run as cli
from qrelkit.errors import InputError
from qrelkit.io.corpus import check_corpus, count_passages, iter_corpus, lookup_texts, read_corpus
from qrelkit.io.sources import ShardCorpus, open_corpus, shards_digest
from qrelkit.store.textindex import SourceTexts, TextIndex, open_text_index

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "configs" / "trec-dl-2022.toml"


def write_msmarco_v2(folder: Path, shards: int = 3, per_shard: int = 40, *, gz: bool = True) -> list[dict]:
    """A small MS MARCO v2-shaped passage folder: ``msmarco_passage_NN[.gz]`` of JSON lines
    ``{"pid", "passage", "spans", "docid"}``, each pid ``msmarco_passage_NN_<offset of its line>``,
    four passages a document; returns the records in corpus order."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(shards):
        name, data, offset = f"msmarco_passage_{k:02d}", bytearray(), 0
        for i in range(per_shard):
            rec = {"pid": f"{name}_{offset}", "passage": f"shard {k} passage {i} about topic {i % 7} words é",
                   "spans": "(0,10),(11,20)", "docid": f"msmarco_doc_{k:02d}_{(i // 4) * 1000}"}
            line = (json.dumps(rec, ensure_ascii=False) + "\n").encode()
            data += line
            offset += len(line)
            out.append(rec)
        (folder / (name + (".gz" if gz else ""))).write_bytes(gzip.compress(bytes(data), mtime=0) if gz else bytes(data))
    return out


@pytest.mark.parametrize("gz", [True, False])
def test_msmarco_v2_folder_reads_in_shard_order(tmp_path, gz):
    recs = write_msmarco_v2(tmp_path / "c", gz=gz)
    src = open_corpus(tmp_path / "c")
    assert isinstance(src, ShardCorpus) and src.kind == "shards" and len(src.parts()) == 3
    t = read_corpus(tmp_path / "c")
    assert t["pid"].to_pylist() == [r["pid"] for r in recs]
    assert t["text"].to_pylist() == [r["passage"] for r in recs]
    assert t["docid"].to_pylist() == [r["docid"] for r in recs]
    assert count_passages(tmp_path / "c") == len(recs) and src.upper_bound() >= len(recs)
    assert src.random_access is (not gz)  # plain shards: the ids are byte offsets


@pytest.mark.parametrize("gz", [True, False])
def test_lookup_by_offset_ids(tmp_path, gz, monkeypatch):
    recs = write_msmarco_v2(tmp_path / "c", gz=gz)
    want = {recs[5]["pid"], recs[77]["pid"], recs[119]["pid"], "msmarco_passage_01_999999", "elsewhere"}
    import qrelkit.io.sources as sources

    real = sources.find_texts
    # the ids name their shard and offset: no shard is parsed through (a gzipped one is only
    # decompressed up to its last offset); only the ids that name no shard are looked for everywhere
    monkeypatch.setattr(sources, "find_texts", lambda chunks, pids: real(chunks, pids) if pids == {"elsewhere"} else {})
    got = lookup_texts(tmp_path / "c", want)
    assert got == {r["pid"]: (r["passage"], r["docid"]) for r in (recs[5], recs[77], recs[119])}


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("block", [7, 64, 1 << 20])
def test_lines_at_offsets_across_blocks(tmp_path, gz, block):
    from qrelkit.io.sources import _lines_at

    recs = write_msmarco_v2(tmp_path / "c", shards=1, per_shard=30, gz=gz)
    shard = next((tmp_path / "c").iterdir())
    offsets = [int(r["pid"].rsplit("_", 1)[1]) for r in recs]
    pick = [offsets[0], offsets[3], offsets[3], offsets[17], offsets[29], offsets[29] + 5, 10 ** 9]
    lines = _lines_at(shard, pick, block=block)
    assert [json.loads(x)["pid"] for x in lines[:5]] == [recs[0]["pid"], recs[3]["pid"], recs[3]["pid"], recs[17]["pid"],
                                                      recs[29]["pid"]]
    assert not lines[5].startswith(b"{") and lines[6] == b""


def test_check_fingerprints_every_shard(tmp_path):
    write_msmarco_v2(tmp_path / "c")
    c = check_corpus(tmp_path / "c")
    assert c.kind == "shards" and c.passages == 120 and c.documents and len(c.parts) == 3
    assert c.sha256 == shards_digest([(p.path.name, p.sha256) for p in c.parts])
    assert c.sha256 == open_corpus(tmp_path / "c").fingerprint()
    (tmp_path / "c" / "msmarco_passage_02.gz").write_bytes(gzip.compress(b'{"pid": "x", "passage": "y"}\n'))
    assert check_corpus(tmp_path / "c").sha256 != c.sha256


def test_errors_name_the_shard_and_line(tmp_path):
    recs = write_msmarco_v2(tmp_path / "c", gz=False)
    shard = tmp_path / "c" / "msmarco_passage_01"
    lines = shard.read_bytes().splitlines(keepends=True)
    lines[6] = b'{"pid": "bad id", "passage": "x"}\n'
    shard.write_bytes(b"".join(lines))
    with pytest.raises(InputError) as e:
        check_corpus(tmp_path / "c")
    assert (e.value.rule, e.value.file, e.value.line) == ("bad-id", str(shard.resolve()), 7)
    with pytest.raises(InputError) as e:
        list(iter_corpus(tmp_path / "c"))
    assert (e.value.rule, e.value.line) == ("bad-id", 7) and e.value.file.endswith("msmarco_passage_01")
    # an id of an earlier shard, used again in a later one: the later one's line
    lines[6] = (json.dumps({"pid": recs[3]["pid"], "passage": "again"}) + "\n").encode()
    shard.write_bytes(b"".join(lines))
    with pytest.raises(InputError) as e:
        check_corpus(tmp_path / "c")
    assert (e.value.rule, e.value.line) == ("duplicate-id", 7) and "msmarco_passage_00 (line 4)" in e.value.message


def test_what_a_folder_may_hold(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="empty-folder"):
        open_corpus(tmp_path / "empty")
    write_msmarco_v2(tmp_path / "c", shards=1)
    (tmp_path / "c" / ".hidden").write_text("ignored")
    assert len(open_corpus(tmp_path / "c").parts()) == 1
    (tmp_path / "c" / "SHA256SUMS").write_text("abc  msmarco_passage_00.gz\n")  # no suffix, not JSON: refused
    with pytest.raises(InputError, match=r"unknown-format.*SHA256SUMS|SHA256SUMS.*unknown-format"):
        open_corpus(tmp_path / "c")
    (tmp_path / "c" / "SHA256SUMS").unlink()
    (tmp_path / "c" / "sub").mkdir()
    with pytest.raises(InputError, match="unknown-format"):
        open_corpus(tmp_path / "c")


def test_text_index_of_a_folder(tmp_path):
    recs = write_msmarco_v2(tmp_path / "plain", gz=False)
    idx = open_text_index(tmp_path / "plain", tmp_path / "t1.sqlite")
    assert isinstance(idx, SourceTexts) and not (tmp_path / "t1.sqlite").exists()  # the source itself
    assert idx.texts([recs[50]["pid"]]) == {recs[50]["pid"]: (recs[50]["passage"], recs[50]["docid"])}
    write_msmarco_v2(tmp_path / "gz")
    idx = open_text_index(tmp_path / "gz", tmp_path / "t2.sqlite")
    assert isinstance(idx, TextIndex) and idx.mode == "texts"
    assert idx.texts([recs[50]["pid"]]) == {recs[50]["pid"]: (recs[50]["passage"], recs[50]["docid"])}
    idx.close()


# -- the same passages as one file and as a folder: the same outputs ------------------------------


@pytest.fixture(scope="module")
def sim(sim4) -> Path:
    return sim4  # conftest: 3000 passages, 4 topics, 3 groups, seed 1


def _split(corpus: Path, folder: Path, parts: int = 3, gz: bool = True) -> Path:
    lines = corpus.read_bytes().splitlines(keepends=True)
    folder.mkdir(parents=True)
    step = -(-len(lines) // parts)
    for k in range(parts):
        data = b"".join(lines[k * step:(k + 1) * step])
        (folder / f"part-{k}.jsonl{'.gz' if gz else ''}").write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return folder


def test_commands_give_the_same_outputs_from_a_folder(sim, tmp_path):
    folder = _split(sim / "corpus.jsonl", tmp_path / "shards")
    for src, out in ((sim / "corpus.jsonl", tmp_path / "file"), (folder, tmp_path / "folder")):
        out.mkdir()
        assert cli(["dedupe", "cluster", str(src), "-o", str(out / "classes.parquet")]) == 0
        assert cli(["cal", "features", str(src), "-o", str(out / "features")]) == 0
        assert cli(["pool", "fractional", str(sim / "runs"), "-m", str(sim / "manifest.csv"), "--corpus", str(src),
                    "--fraction", "0.05", "--seed", "3", "--ids-out", str(out / "kept.tsv"), "-o", str(out / "frac.tsv")]) == 0
    a, b = tmp_path / "file", tmp_path / "folder"
    assert (a / "kept.tsv").read_bytes() == (b / "kept.tsv").read_bytes()
    import pyarrow.parquet as pq

    assert pq.read_table(a / "classes.parquet").equals(pq.read_table(b / "classes.parquet"))
    for f in sorted(p.relative_to(a / "features") for p in (a / "features").rglob("*") if p.is_file()):
        if f.suffix != ".json":
            assert (a / "features" / f).read_bytes() == (b / "features" / f).read_bytes(), f


def test_campaign_on_a_folder_of_shards(sim, tmp_path, capsys):
    folder = _split(sim / "corpus.jsonl", tmp_path / "shards")
    runs = {}
    dask_cfg = tmp_path / "dask.toml"  # the folder's campaign: near-duplicates on a Dask LocalCluster
    dask_cfg.write_text(CFG.read_text().replace('combine = "vote"', 'combine = "vote"\nworkers = 2'))
    for name, corpus, cfg in (("file", sim / "corpus.jsonl", CFG), ("folder", folder, dask_cfg)):
        d = tmp_path / name
        assert cli(["campaign", "init", str(d), "-c", str(cfg), "--corpus", str(corpus), "-t", str(sim / "topics.tsv"),
                    "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]) == 0
        runs[name] = Campaign(d).run(oracle=sim / "qrels.txt", error_rate=0.1, seed=7)
        assert runs[name]["state"] == "done"
    with open_campaign_store(tmp_path / "folder", readonly=True) as s:
        inputs = s.state.inputs()
    rec = inputs[inputs["name"] == "corpus"].iloc[0]
    assert rec["path"] == str(folder.resolve()) and rec["size"] == 3
    assert (inputs["name"] == "corpus shard").sum() == 3
    for f in ("qrels-passages.txt", "qrels-documents.txt", "eval-summary.csv", "leaderboard.csv", "reuse-summary.csv",
              "classes.parquet"):
        assert (tmp_path / "file" / f).read_bytes() == (tmp_path / "folder" / f).read_bytes(), f
    # a shard added, changed or gone: refused, naming it; restored: the campaign goes on
    extra = folder / "part-9.jsonl"
    extra.write_text('{"pid": "new1", "text": "new"}\n')
    assert cli(["campaign", "run", str(tmp_path / "folder")]) == 2
    assert "part-9.jsonl is new" in capsys.readouterr().err
    extra.unlink()
    shard = folder / "part-1.jsonl.gz"
    keep = shard.read_bytes()
    shard.write_bytes(gzip.compress(gzip.decompress(keep) + b'{"pid": "z9", "text": "z"}\n'))
    assert cli(["campaign", "run", str(tmp_path / "folder")]) == 2
    err = capsys.readouterr().err
    assert "[input-changed]" in err and "part-1.jsonl.gz" in err
    shard.unlink()
    assert cli(["campaign", "run", str(tmp_path / "folder")]) == 2
    assert "part-1.jsonl.gz is gone" in capsys.readouterr().err
    shard.write_bytes(keep)
    assert cli(["campaign", "run", str(tmp_path / "folder")]) == 0


def test_outputs_never_go_into_a_corpus_folder(sim, tmp_path, capsys):
    folder = _split(sim / "corpus.jsonl", tmp_path / "shards", gz=False)
    assert cli(["dedupe", "cluster", str(folder), "-o", str(folder / "classes.parquet")]) == 2
    assert "[output-is-input]" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == ["part-0.jsonl", "part-1.jsonl", "part-2.jsonl"]
    shutil.rmtree(folder)


@pytest.mark.parametrize("gz", [True, False])
def test_document_qrels_from_the_source_docid(tmp_path, gz):
    """MS MARCO v2: a passage's document is its ``docid`` field — no mapping file; a document's
    grade is the highest of its judged passages (DL 2022)."""
    import pyarrow as pa

    from qrelkit.labels.propagate import passage_document_map, propagate_to_documents

    recs = write_msmarco_v2(tmp_path / "c", gz=gz)
    judged = [recs[0], recs[1], recs[2], recs[45], recs[90]]  # the first three: one document
    qrels = pa.table({"qid": ["1"] * 5, "docid": [r["pid"] for r in judged], "rel": pa.array([1, 3, 0, 2, 0], pa.int32())})
    mapping = passage_document_map(corpus=tmp_path / "c", passages=[r["pid"] for r in judged])
    docs = propagate_to_documents(qrels, mapping, rule="max").qrels.to_pydict()
    assert dict(zip(docs["docid"], docs["rel"])) == {recs[0]["docid"]: 3, recs[45]["docid"]: 2, recs[90]["docid"]: 0}


def test_status_of_a_campaign_whose_folder_gained_junk(sim, tmp_path, capsys):
    """A file of no corpus format or a sub-folder put into the corpus folder after init: ``campaign
    status`` still shows the topics and says the folder changed, naming what is new (it used to
    stop at ``[unknown-format]``: the corpus was opened before the inputs were checked)."""
    folder = _split(sim / "corpus.jsonl", tmp_path / "shards", gz=False)
    d = tmp_path / "camp"
    assert cli(["campaign", "init", str(d), "-c", str(CFG), "--corpus", str(folder), "-t", str(sim / "topics.tsv"),
                "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]) == 0
    capsys.readouterr()
    (folder / "README").write_text("the shards of our corpus\n")
    assert cli(["campaign", "status", str(d)]) == 0
    out = capsys.readouterr()
    assert "[input-changed]" in out.out + out.err and "README is new" in out.out + out.err
    (folder / "README").unlink()
    (folder / "old").mkdir()
    assert cli(["campaign", "status", str(d)]) == 0
    out = capsys.readouterr()
    assert "[input-changed]" in out.out + out.err and "old" in out.out + out.err and "is gone" not in out.out + out.err


def test_a_damaged_or_empty_shard_without_a_suffix(tmp_path):
    """MS MARCO v2's shards have no format suffix (``msmarco_passage_01.gz``): a damaged gzip
    stream is ``bad-gzip`` naming the shard (it used to be ``unknown-format``, "must be ... .gz"),
    an empty one an empty shard of JSON lines, as an empty ``.jsonl`` shard is."""
    recs = write_msmarco_v2(tmp_path / "c")
    shard = tmp_path / "c" / "msmarco_passage_01.gz"
    shard.write_bytes(shard.read_bytes()[:30])
    with pytest.raises(InputError) as e:
        open_corpus(tmp_path / "c")
    assert (e.value.rule, Path(e.value.file).name) == ("bad-gzip", "msmarco_passage_01.gz")
    shard.write_bytes(b"")
    assert count_passages(tmp_path / "c") == 80
    shard.write_bytes(gzip.compress(b""))
    assert read_corpus(tmp_path / "c")["pid"].to_pylist() == [r["pid"] for r in recs[:40] + recs[80:]]


@pytest.mark.parametrize("gz", [True, False])
def test_an_id_missing_from_msmarco_v2_shards_reads_no_other_shard(tmp_path, gz, monkeypatch):
    """In MS MARCO v2's layout (each shard's first id ``<shard>_0``) an id is at its shard and
    offset or not in the corpus: a run's id that the corpus lacks reads no shard but the one it names
    (with one seek when plain, decompressed up to the offset when gzipped), not every shard (138M passages, for each page of the web app that shows it)."""
    recs = write_msmarco_v2(tmp_path / "c", gz=gz)
    read = []
    real = ShardCorpus.chunks

    def spy(self, **kw):
        read.append("all")
        return real(self, **kw)

    import qrelkit.io.sources as sources

    real_file = sources.FileCorpus.chunks
    monkeypatch.setattr(ShardCorpus, "chunks", spy)
    monkeypatch.setattr(sources.FileCorpus, "chunks", lambda self, **kw: read.append(self.path.name) or real_file(self, **kw))
    want = {recs[45]["pid"], "msmarco_passage_01_7", "msmarco_passage_09_0", "p123"}
    assert open_corpus(tmp_path / "c").lookup(want) == {recs[45]["pid"]: (recs[45]["passage"], recs[45]["docid"])}
    assert read == []  # no shard parsed through: a gzipped one is only decompressed up to its ids' offsets


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_a_truncated_gzip_shard_names_its_line(tmp_path, cut):
    """A gzip shard cut short: ``bad-gzip`` naming the shard and the first line it could not read
    whole (the lines before it were read), by every reader and by the check."""
    recs = write_msmarco_v2(tmp_path / "c", shards=2, per_shard=2000)
    shard = tmp_path / "c" / "msmarco_passage_01.gz"
    data = shard.read_bytes()
    shard.write_bytes(data[: int(len(data) * cut)])
    for read in (lambda: list(iter_corpus(tmp_path / "c", chunk_bytes=1 << 14)), lambda: check_corpus(tmp_path / "c")):
        with pytest.raises(InputError) as e:
            read()
        assert e.value.rule == "bad-gzip" and e.value.file.endswith("msmarco_passage_01.gz")
        assert e.value.line is not None and 1 <= e.value.line <= len(recs) // 2


def test_topic_and_qrels_sources_of_files(sim):
    """One place defines the topic and qrels sources as it does the corpus's: a file's read is
    the reader's, its fingerprint its bytes' SHA-256 (what a campaign records)."""
    import hashlib

    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.sources import open_qrels, open_topics
    from qrelkit.io.topics import read_topics

    t, q = open_topics(sim / "topics.tsv"), open_qrels(sim / "qrels.txt")
    assert t.kind == q.kind == "file" and t.files() == [(sim / "topics.tsv").resolve()]
    assert t.read().equals(read_topics(sim / "topics.tsv")) and q.read().equals(read_qrels(sim / "qrels.txt"))
    assert t.fingerprint() == hashlib.sha256((sim / "topics.tsv").read_bytes()).hexdigest()
    assert q.fingerprint() == hashlib.sha256((sim / "qrels.txt").read_bytes()).hexdigest()


@pytest.mark.parametrize("gz", [True, False])
def test_passage_texts_come_from_the_recorded_shards(sim, tmp_path, gz):
    """A file put into a corpus folder after init blocks the campaign's runs ([input-changed]) but
    not the passages' texts: the batch files and the web app read the shards recorded at init (an
    assessor's page was a 400 [unknown-format] naming the file)."""
    pytest.importorskip("starlette")
    from qrelkit.campaign.judging import text_index
    from qrelkit.web.service import CampaignService

    folder = _split(sim / "corpus.jsonl", tmp_path / "shards", gz=gz)
    d = tmp_path / "camp"
    assert cli(["campaign", "init", str(d), "-c", str(CFG), "--corpus", str(folder), "-t", str(sim / "topics.tsv"),
                "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]) == 0
    first = json.loads((sim / "corpus.jsonl").read_text().splitlines()[7])
    (folder / "README").write_text("notes about this corpus\n")
    with open_campaign_store(d) as s:
        idx = text_index(d, s)
        assert idx.texts([first["pid"]])[first["pid"]][0] == first["passage"]
        idx.close()
    svc = CampaignService(d)
    try:
        assert svc.texts.get(first["pid"], set()) == first["passage"]
    finally:
        svc.close()
    assert cli(["campaign", "run", str(d)]) == 2  # the runs stay blocked until the folder is as recorded
