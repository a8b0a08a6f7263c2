"""``irds:<dataset-id>`` inputs through ir_datasets (issue 22; qrelkit/io/irds.py), offline: every
dataset is registered into ir_datasets' registry from files written here, and ir_datasets' home is
a temporary folder (set before ir_datasets is first imported: its modules ask for it then)."""

from __future__ import annotations

import atexit
import builtins
import itertools
import json
import os
import shutil
import sys
import tempfile
from typing import NamedTuple

import pytest

if "IR_DATASETS_HOME" not in os.environ:  # before ir_datasets' first import: nothing written in ~/.ir_datasets
    _HOME = tempfile.mkdtemp(prefix="qrelkit-irds-home-")
    atexit.register(shutil.rmtree, _HOME, True)
    os.environ["IR_DATASETS_HOME"] = _HOME
    os.environ.setdefault("IR_DATASETS_TMP", os.path.join(_HOME, "tmp"))

ir_datasets = pytest.importorskip("ir_datasets", reason="the irds extra is not installed (pip install 'qrelkit[irds]')")

from ir_datasets.datasets.base import Dataset  # noqa: E402
from ir_datasets.formats import JsonlDocs, TrecQrels, TsvQueries  # noqa: E402
from ir_datasets.util import LocalDownload  # noqa: E402

from qrelkit.errors import InputError  # noqa: E402
from qrelkit.io.corpus import CORPUS_SCHEMA, read_corpus  # noqa: E402
from qrelkit.io.irds import IrdsCorpus, sample_indexes  # noqa: E402
from qrelkit.io.params import SourcesParams  # noqa: E402
from qrelkit.io.qrels import read_qrels  # noqa: E402
from qrelkit.io.sources import open_corpus  # noqa: E402
from qrelkit.io.topics import read_topics  # noqa: E402


class Passage(NamedTuple):
    """As MS MARCO v2 passages: the passage id, its text, its document."""

    doc_id: str
    text: str
    msmarco_document_id: str

    def default_text(self):
        return self.text


class Doc(NamedTuple):
    doc_id: str
    title: str
    body: str


_ids = itertools.count()


def register(tmp_path, passages, *, queries=None, qrels=None, cls=Passage) -> str:
    """Register a dataset of local files (docs JSONL, queries TSV, qrels TREC) under a new id."""
    tmp = tmp_path / f"ds{next(_ids)}"
    tmp.mkdir()
    docs = tmp / "docs.jsonl"
    docs.write_text("".join(json.dumps(p) + "\n" for p in passages), encoding="utf-8", errors="surrogatepass")
    parts = [JsonlDocs(LocalDownload(docs), doc_cls=cls)]
    if queries is not None:
        (tmp / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries))
        parts.append(TsvQueries(LocalDownload(tmp / "queries.tsv")))
    if qrels is not None:
        (tmp / "qrels.txt").write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in qrels))
        parts.append(TrecQrels(LocalDownload(tmp / "qrels.txt"), {}))
    dataset_id = f"qrelkit-test/{tmp_path.name}/{tmp.name}"
    ir_datasets.registry.register(dataset_id, Dataset(*parts))
    return dataset_id


def passages(n: int) -> list[dict]:
    return [{"doc_id": f"msmarco_passage_00_{i * 100}", "text": f"passage number {i}",
             "msmarco_document_id": f"msmarco_doc_00_{i // 3}"} for i in range(n)]


def test_home_is_a_temporary_folder():
    assert os.environ["IR_DATASETS_HOME"] != os.path.expanduser("~/.ir_datasets")
    assert str(ir_datasets.util.home_path()) == os.environ["IR_DATASETS_HOME"]


def test_chunks_count_and_lookup(tmp_path):
    ds = register(tmp_path, passages(7))
    src = open_corpus(f"irds:{ds}")
    assert isinstance(src, IrdsCorpus) and src.kind == "irds" and src.spec == f"irds:{ds}" and src.files() == []
    chunks = list(src.chunks(chunk_rows=3))
    assert [c.num_rows for c in chunks] == [3, 3, 1]
    assert all(c.schema == CORPUS_SCHEMA for c in chunks)
    t = read_corpus(f"irds:{ds}")
    assert t["pid"].to_pylist() == [f"msmarco_passage_00_{i * 100}" for i in range(7)]
    assert t["text"][4].as_py() == "passage number 4"
    assert t["docid"].to_pylist()[:4] == ["msmarco_doc_00_0"] * 3 + ["msmarco_doc_00_1"]
    assert src.count() == 7
    import pickle

    again = pickle.loads(pickle.dumps(src))  # a Dask worker opens it again from the id and the field mapping
    assert again.spec == src.spec and read_corpus(again).equals(t)
    assert src.random_access
    assert src.lookup({"msmarco_passage_00_200", "msmarco_passage_00_600", "nope"}) == {
        "msmarco_passage_00_200": ("passage number 2", "msmarco_doc_00_0"),
        "msmarco_passage_00_600": ("passage number 6", "msmarco_doc_00_2"),
    }


def test_the_field_mapping_comes_from_the_config(tmp_path):
    docs = [{"doc_id": "d1", "title": "Bears", "body": "They attack."}, {"doc_id": "d2", "title": "", "body": "No title."}]
    ds = register(tmp_path, docs, cls=Doc)
    with pytest.raises(InputError) as e:  # a Doc has no default_text() nor a text field
        open_corpus(f"irds:{ds}")
    assert e.value.rule == "missing-column" and "text_fields" in str(e.value) and "title, body" in str(e.value)
    params = SourcesParams.from_config({"sources": {"text_fields": ["title", "body"]}})
    t = pa_table(open_corpus(f"irds:{ds}", params=params))
    assert t["text"].to_pylist() == ["Bears They attack.", "No title."]
    assert t["docid"].null_count == 2  # no document field: auto finds none
    t = pa_table(open_corpus(f"irds:{ds}", params=SourcesParams(text_fields=["body"], docid_field="doc_id")))
    assert t["text"].to_pylist() == ["They attack.", "No title."] and t["docid"].to_pylist() == ["d1", "d2"]
    with pytest.raises(InputError) as e:  # an empty document id, as in a file
        pa_table(open_corpus(f"irds:{ds}", params=SourcesParams(text_fields=["body"], docid_field="title")))
    assert (e.value.rule, e.value.line) == ("bad-id", 2)
    with pytest.raises(InputError, match="docid_field"):
        open_corpus(f"irds:{ds}", params=SourcesParams(text_fields=["body"], docid_field="url"))


def pa_table(src):
    import pyarrow as pa

    return pa.concat_tables(list(src.chunks()))


def test_the_sources_section_is_declared_and_checked():
    from qrelkit.config import SCHEMA, load_config

    assert set(SCHEMA["sources"]) == {"text_fields", "docid_field", "query_field"}
    with pytest.raises(InputError, match="unknown key"):
        load_config(None, overrides=["sources.text_field=x"])


def test_check_and_fingerprint(tmp_path):
    rows = passages(2500)
    ds = register(tmp_path, rows)
    src = open_corpus(f"irds:{ds}")
    c = src.check()
    assert (c.passages, c.documents, c.kind, c.spec, c.format) == (2500, True, "irds", f"irds:{ds}", "irds")
    assert c.sha256 == src.fingerprint() == open_corpus(f"irds:{ds}").fingerprint()
    # a record outside the sample changes nothing; one in it (index 0, the first 1000, or k * 2500 // 1000) changes it
    assert 1001 not in sample_indexes(2500) and 1002 in sample_indexes(2500)
    docs = ir_datasets.load(ds).docs_path()
    for index, changed in ((1001, False), (1002, True), (5, True)):
        other = [dict(r) for r in rows]
        other[index]["text"] += "!"
        docs.write_text("".join(json.dumps(p) + "\n" for p in other))
        assert (open_corpus(f"irds:{ds}").fingerprint() != c.sha256) is changed, index
    docs.write_text("".join(json.dumps(p) + "\n" for p in rows[:-1]))  # one record fewer
    assert open_corpus(f"irds:{ds}").fingerprint() != c.sha256
    docs.write_text("".join(json.dumps(p) + "\n" for p in rows))
    assert open_corpus(f"irds:{ds}").fingerprint() == c.sha256
    # the field mapping is part of it
    assert open_corpus(f"irds:{ds}", params=SourcesParams(docid_field="none")).fingerprint() != c.sha256


def test_fingerprint_is_the_same_by_slicing_a_built_docs_store(tmp_path):
    ds = register(tmp_path, passages(1500))
    src = open_corpus(f"irds:{ds}")
    scanned = src.fingerprint()
    assert not src._sliceable()
    src.dataset.docs_store().build()
    assert src._sliceable()
    assert src.fingerprint() == scanned == src.check().sha256


def test_bad_records_name_the_source_and_record(tmp_path):
    rows = passages(5)
    rows[3]["doc_id"] = "p 3"
    ds = register(tmp_path, rows)
    with pytest.raises(InputError) as e:
        list(open_corpus(f"irds:{ds}").chunks(chunk_rows=2))
    assert (e.value.rule, e.value.file, e.value.line) == ("bad-id", f"irds:{ds}", 4)
    assert str(e.value).startswith(f"irds:{ds}:4: [bad-id] passage id 'p 3'")
    rows = passages(5)
    rows[4]["msmarco_document_id"] = ""
    with pytest.raises(InputError) as e:
        open_corpus(f"irds:{register(tmp_path, rows)}").check()
    assert (e.value.rule, e.value.line) == ("bad-id", 5) and "document id" in e.value.message
    rows = passages(5)
    rows[4]["doc_id"] = rows[1]["doc_id"]
    ds = register(tmp_path, rows)
    assert len(list(open_corpus(f"irds:{ds}").chunks())[0]) == 5  # only the check looks for ids used twice
    with pytest.raises(InputError) as e:
        open_corpus(f"irds:{ds}").check()
    assert (e.value.rule, e.value.file, e.value.line) == ("duplicate-id", f"irds:{ds}", 5)
    assert "already on line 2" in e.value.message


def test_topics_and_qrels(tmp_path):
    ds = register(tmp_path, passages(3), queries=[("1", "black  bear attacks"), ("2", "solar")],
                  qrels=[("2", "msmarco_passage_00_0", 1), ("1", "msmarco_passage_00_100", 2), ("1", "msmarco_passage_00_0", 0)])
    topics = read_topics(f"irds:{ds}")
    assert topics.to_dict("list") == {"qid": ["1", "2"], "text": ["black bear attacks", "solar"]}
    assert list(topics.dtypes) == list(read_topics(write(tmp_path, "t.tsv", "1\tx\n")).dtypes)
    qrels = read_qrels(f"irds:{ds}")
    assert qrels.schema == read_qrels(write(tmp_path, "q.txt", "1 0 d 1\n")).schema
    assert qrels.to_pydict() == {"qid": ["1", "1", "2"], "docid": ["msmarco_passage_00_0", "msmarco_passage_00_100",
                                                                 "msmarco_passage_00_0"], "rel": [0, 2, 1]}
    with pytest.raises(InputError) as e:
        read_qrels(f"irds:{ds}", scale=[0, 1])
    assert (e.value.rule, e.value.file, e.value.line) == ("grade-out-of-scale", f"irds:{ds}", 2)
    with pytest.raises(InputError, match="query_field"):
        read_topics(f"irds:{ds}", params=SourcesParams(query_field="title"))


def test_duplicate_topics_and_judgments(tmp_path):
    ds = register(tmp_path, passages(1), queries=[("1", "a"), ("1", "b")], qrels=[("1", "d", 1), ("1", "d", 0)])
    with pytest.raises(InputError) as e:
        read_topics(f"irds:{ds}")
    assert (e.value.rule, e.value.line) == ("duplicate-topic", 2)
    with pytest.raises(InputError) as e:
        read_qrels(f"irds:{ds}")
    assert (e.value.rule, e.value.line) == ("duplicate-judgment", 2)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_unknown_dataset_and_missing_parts(tmp_path):
    with pytest.raises(InputError) as e:
        open_corpus("irds:no-such/dataset")
    assert e.value.rule == "unknown-dataset" and "no-such/dataset" in str(e.value) and "\n" not in str(e.value)
    ds = register(tmp_path, passages(1))
    for read in (read_topics, read_qrels):
        with pytest.raises(InputError) as e:
            read(f"irds:{ds}")
        assert e.value.rule == "missing-part" and "(it has: docs)" in str(e.value)


def test_documents_not_on_this_machine_are_not_fetched(tmp_path):
    ds = f"qrelkit-test/{tmp_path.name}/absent"
    ir_datasets.registry.register(ds, Dataset(JsonlDocs(LocalDownload(tmp_path / "absent.jsonl"), doc_cls=Passage)))
    with pytest.raises(InputError) as e:
        open_corpus(f"irds:{ds}")
    assert e.value.rule == "not-downloaded" and "absent.jsonl" in str(e.value)


def test_missing_extra_is_one_line(monkeypatch):
    real = builtins.__import__

    def no_irds(name, *args, **kwargs):
        if name == "ir_datasets" or name.startswith("ir_datasets."):
            raise ImportError("No module named 'ir_datasets'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_irds)
    for read in (open_corpus, read_topics, read_qrels):
        with pytest.raises(InputError) as e:
            read("irds:msmarco-passage-v2")
        assert e.value.rule == "missing-extra" and "pip install 'qrelkit[irds]'" in str(e.value)
        assert "\n" not in str(e.value)


def doc_example(tmp_path):
    """docs/campaign.md's dataset of local files, as written there: ``mydata.py`` (returned) and its
    files (the bash block's lines up to the first command of qrelkit, run in ``tmp_path``)."""
    import re
    import subprocess
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "campaign.md").read_text()
    section = text[text.index("### A dataset of local files"):text.index("### TREC DL 2022 on MS MARCO v2")]
    module = re.search(r"```python\n(# mydata\.py.*?)```", section, re.S).group(1)
    script = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    (tmp_path / "mydata.py").write_text(module)
    setup = script[:script.index("export ")]
    subprocess.run(["bash", "-euc", setup], cwd=tmp_path, check=True)
    return tmp_path / "mydata.py"


def test_the_documented_dataset_of_local_files(tmp_path):
    import runpy

    module = doc_example(tmp_path)
    runpy.run_path(str(module))
    try:
        src = open_corpus("irds:mydata")
        assert src.check().passages == 3
        assert src.lookup({"p3"}) == {"p3": ("bears in the park", None)}
        assert read_topics("irds:mydata")["qid"].tolist() == ["1", "2"]
        assert read_qrels("irds:mydata").num_rows == 3
    finally:
        ir_datasets.registry._registered.pop("mydata", None)


SIM_PLUGIN = '''
"""Registers the simulated campaign of $QRELKIT_TEST_SIM as the ir_datasets dataset "qrelkit-sim"."""
import os
from pathlib import Path
from typing import NamedTuple

import ir_datasets
from ir_datasets.formats import JsonlDocs, TrecQrels, TsvQueries
from ir_datasets.util import LocalDownload


class Passage(NamedTuple):
    doc_id: str
    text: str
    docid: str

    def default_text(self):
        return self.text


SIM = Path(os.environ["QRELKIT_TEST_SIM"])
if "qrelkit-sim" not in ir_datasets.registry:
    ir_datasets.registry.register("qrelkit-sim", ir_datasets.Dataset(
        JsonlDocs(LocalDownload(SIM / "corpus.jsonl"), doc_cls=Passage,
                  mapping={"doc_id": "pid", "text": "passage", "docid": "docid"}),
        TsvQueries(LocalDownload(SIM / "topics.tsv")),
        TrecQrels(LocalDownload(SIM / "qrels.txt"), {}),
    ))
'''


def test_a_campaign_from_irds_sources(tmp_path):
    """``campaign init`` and ``campaign run --oracle`` on a small registered dataset (corpus and
    topics ``irds:``, the dataset registered by a plugin module in every process) give the same
    outputs as the same campaign from the files; a changed record of the fingerprint's sample is
    ``[input-changed]`` at the next command."""
    import subprocess
    from pathlib import Path

    from qrelkit.cli import run as cli

    root = Path(__file__).resolve().parents[1]
    sim = tmp_path / "sim"
    qrelkit = [sys.executable, "-c", "import sys; from qrelkit.cli import run; sys.exit(run(sys.argv[1:]))"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)]), "QRELKIT_PLUGINS": "simplugin",
           "QRELKIT_TEST_SIM": str(sim)}

    def run(*args, code=0):
        r = subprocess.run([*qrelkit, *map(str, args)], env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == code, r.stderr[-2000:]
        return r

    assert cli(["simulate", "campaign", "-o", str(sim), "--passages", "1500", "--topics", "3", "--groups", "3",
                "--seed", "1"]) == 0
    (tmp_path / "simplugin.py").write_text(SIM_PLUGIN)
    common = ["-c", root / "configs" / "trec-dl-2022.toml", "--runs", sim / "runs", "-m", sim / "manifest.csv"]
    run("campaign", "init", tmp_path / "irds", "--corpus", "irds:qrelkit-sim", "-t", "irds:qrelkit-sim", *common)
    run("campaign", "run", tmp_path / "irds", "--oracle", "irds:qrelkit-sim", "--seed", "7")  # the dataset's qrels
    assert cli(["campaign", "init", str(tmp_path / "files"), "--corpus", str(sim / "corpus.jsonl"), "-t",
                str(sim / "topics.tsv"), *map(str, common)]) == 0
    assert cli(["campaign", "run", str(tmp_path / "files"), "--oracle", str(sim / "qrels.txt"), "--seed", "7"]) == 0
    for name in ("qrels-passages.txt", "qrels-documents.txt", "leaderboard.csv", "eval-summary.csv"):
        assert (tmp_path / "irds" / name).read_bytes() == (tmp_path / "files" / name).read_bytes(), name
    # the campaign recorded the dataset's fingerprint: a record of its sample changed is seen (once
    # ir_datasets reads the file again: the docs store it built at the first lookup holds the records)
    corpus = sim / "corpus.jsonl"
    assert (sim / "corpus.jsonl.pklz4").is_dir()
    run("campaign", "run", tmp_path / "irds", "--oracle", "irds:qrelkit-sim", "--seed", "7")  # nothing to do
    # [sources] reaches every step of the campaign: passages without documents here, recorded with
    # that mapping's fingerprint, checked with it (no false [input-changed]), no document qrels
    cfg = tmp_path / "mapped.toml"
    cfg.write_text((root / "configs" / "trec-dl-2022.toml").read_text() + '\n[sources]\ndocid_field = "none"\n')
    mapped = ["-c", cfg, *common[2:]]
    run("campaign", "init", tmp_path / "mapped", "--corpus", "irds:qrelkit-sim", "-t", "irds:qrelkit-sim", *mapped)
    r = run("campaign", "run", tmp_path / "mapped", "--oracle", "irds:qrelkit-sim", "--seed", "7")
    assert not (tmp_path / "mapped" / "qrels-documents.txt").exists()
    assert "no document qrels" in (tmp_path / "mapped" / "report.md").read_text()
    assert (tmp_path / "irds" / "qrels-documents.txt").read_text() != "" and "[input-changed]" not in r.stderr
    lines = corpus.read_text().splitlines(keepends=True)
    corpus.write_text(lines[0].replace('"passage": "', '"passage": "changed ') + "".join(lines[1:]))
    shutil.rmtree(sim / "corpus.jsonl.pklz4")
    r = run("campaign", "run", tmp_path / "irds", "--oracle", "irds:qrelkit-sim", "--seed", "7", code=2)
    assert "[input-changed]" in r.stderr and "irds:qrelkit-sim" in r.stderr and len(r.stderr.strip().splitlines()) == 1

def test_a_download_is_refused_not_started(tmp_path, monkeypatch):
    """Topics whose file ir_datasets would fetch: one line ``not-downloaded``, and no request made
    (outside qrelkit's reads, ir_datasets downloads as before)."""
    from ir_datasets.util import Download, RequestsDownload

    asked = []
    monkeypatch.setattr(RequestsDownload, "__iter__", lambda self: asked.append(self.url) or iter([b"1\tq\n"]))
    url = "https://example.invalid/queries.tsv"
    ds = f"qrelkit-test/{tmp_path.name}/remote"
    ir_datasets.registry.register(ds, Dataset(TsvQueries(Download([RequestsDownload(url)],
                                                                  cache_path=str(tmp_path / "q.tsv")))))
    with pytest.raises(InputError) as e:
        read_topics(f"irds:{ds}")
    assert e.value.rule == "not-downloaded" and url in str(e.value) and asked == []
    assert [q.text for q in ir_datasets.load(ds).queries_iter()] == ["q"] and asked == [url]


def test_a_plugin_module_registers_the_dataset_before_it_is_read(tmp_path, monkeypatch):
    """``$QRELKIT_PLUGINS`` names the module that registers a dataset of local files: a process
    that reads ``irds:`` before loading any configuration (a command without one, a Dask worker)
    imports it when the id is not registered yet."""
    doc_example(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("QRELKIT_PLUGINS", "mydata")
    try:
        assert read_qrels("irds:mydata").num_rows == 3
    finally:
        ir_datasets.registry._registered.pop("mydata", None)
        sys.modules.pop("mydata", None)


class Topic(NamedTuple):
    query_id: str
    title: str
    description: str
    narrative: str


def test_topic_details_of_trec_like_queries(tmp_path):
    from ir_datasets.formats import JsonlQueries

    from qrelkit.io.topics import read_topic_details

    f = tmp_path / "topics.jsonl"
    f.write_text(json.dumps({"query_id": "301", "title": "bears", "description": "Bear\nattacks?", "narrative": ""})
                 + "\n")
    ds = f"qrelkit-test/{tmp_path.name}/trec"
    ir_datasets.registry.register(ds, Dataset(JsonlQueries(LocalDownload(f), query_cls=Topic)))
    assert read_topics(f"irds:{ds}", params=SourcesParams(query_field="title")).to_dict("list") == \
        {"qid": ["301"], "text": ["bears"]}
    assert read_topic_details(f"irds:{ds}") == {"301": {"description": "Bear attacks?"}}
    ds2 = register(tmp_path, passages(1), queries=[("1", "a")])
    assert read_topic_details(f"irds:{ds2}") == {}


def test_a_bad_record_before_one_ir_datasets_cannot_read_is_the_error(tmp_path):
    """The first defect in record order is the error: a record with a bad id before a record
    ir_datasets fails on (records are pulled from it in batches) is named, not the later one."""
    tmp = tmp_path / "raw"
    tmp.mkdir()
    good = json.dumps(passages(1)[0])
    (tmp / "docs.jsonl").write_text(good + "\n" + json.dumps({**passages(2)[1], "doc_id": "p 2"}) + "\n{not json\n")
    ds = f"qrelkit-test/{tmp_path.name}/raw"
    ir_datasets.registry.register(ds, Dataset(JsonlDocs(LocalDownload(tmp / "docs.jsonl"), doc_cls=Passage)))
    for read in (lambda s: list(s.chunks()), lambda s: s.check()):
        with pytest.raises(InputError) as e:
            read(open_corpus(f"irds:{ds}"))
        assert (e.value.rule, e.value.line) == ("bad-id", 2), str(e.value)
