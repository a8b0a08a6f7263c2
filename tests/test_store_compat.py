"""Store files written by a release open in this qrelkit, read the same, and take writes (issue
20: schema versions and migrations kept). The fixtures (tests/fixtures/stores/, made by
``make_stores.py`` with the release named in ``made_by.txt``): a judging store (``qrelkit cal
init``, imports, undo, a re-judgment), a finished campaign store (accounts, the web secret,
preference answers, one undone) and the web app's passage text indexes, with what that release
read from them (``expected.json``)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from qrelkit import init_store, open_store
from qrelkit.campaign import Campaign
from qrelkit.campaign.store import CAMPAIGN_SCHEMA_VERSION, open_campaign_store
from qrelkit.io.textindex import TextIndex, open_text_index

FIXTURES = Path(__file__).parent / "fixtures" / "stores"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())


def unpack(name: str, to: Path) -> Path:
    """The fixture ``name`` (kept gzipped) written to ``to``."""
    to.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(FIXTURES / f"{name}.gz", "rb") as src, open(to, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return to


def records(df: pd.DataFrame) -> list[dict]:
    return json.loads(df.to_json(orient="records"))


def judging_readings(s) -> dict:
    return {"qrels": s.export_qrels().to_pydict(), "log": s.export_log().to_pydict(), "counts": s.counts(),
            "batches": records(s.batches()), "history": records(s.judgment_log(history=True).drop(columns=["time"]))}


@pytest.mark.parametrize("readonly", [True, False])
def test_a_released_judging_store_reads_the_same(tmp_path, readonly):
    db = unpack("judging.db", tmp_path / "judging.db")
    with open_store(db, readonly=readonly) as s:
        assert judging_readings(s) == EXPECTED["judging"]


def test_a_released_judging_store_takes_writes(tmp_path):
    db = unpack("judging.db", tmp_path / "judging.db")
    with init_store(db, ["4"]) as s:  # init on an existing store adds topics
        s.import_judgment("2", "p3", "ann", 2, "2-1")  # the retracted judgment judged again
        assert s.retract("1", "p1", "bob", "1-1") == 1
        b = s.issue_batch("4", None, ["q1"], kind="pool")
        s.import_judgment("4", "q1", "cat", 1, b)
    with open_store(db, readonly=True) as s:
        q = s.export_qrels().to_pandas()
        assert s.counts()["topics"] == 4
    got = dict(zip(zip(q["qid"], q["docid"]), q["rel"]))
    assert got[("2", "p3")] == 2 and got[("4", "q1")] == 1 and got[("1", "p1")] == 2  # ann's alone now


def campaign_readings(s) -> dict:
    return {"judgments": records(s.judgments(include_sample=True)),
            "history": records(s.judgment_log(history=True).drop(columns=["time"])),
            "stages": sorted(s.stages_done()), "cal_rounds": {q: list(v) for q, v in s.cal_rounds().items()},
            "accounts": [{k: a[k] for k in ("name", "organizer", "topics", "generation")}
                         | {"revoked": a["revoked"] is not None} for a in s.accounts()],
            "pref_answers": records(s.pref_answers()),
            "pref_log": records(s.pref_answer_log().drop(columns=["answered", "retracted"])),
            "pending": records(s.pending()), "assignments": records(s.assignments()),
            "warnings": records(s.warnings()), "schema_versions": s.schema_versions()}


@pytest.fixture
def camp(tmp_path) -> Path:
    d = tmp_path / "camp"
    unpack("campaign.db", d / "campaign.db")
    return d


@pytest.mark.parametrize("readonly", [True, False])
def test_a_released_campaign_store_reads_the_same(camp, readonly):
    exp = dict(EXPECTED["campaign"])
    c = Campaign(camp)
    assert records(c.status()) == exp.pop("status")
    assert c.judged_qrels().to_pydict() == exp.pop("qrels")
    with open_campaign_store(camp, readonly=readonly) as s:
        assert campaign_readings(s) == exp


def test_a_released_campaign_store_takes_writes(camp):
    with open_campaign_store(camp) as s:
        assert s.schema_versions()["campaign_schema_version"] == CAMPAIGN_SCHEMA_VERSION
        secret = s.web_secret()
        acc = s.add_account("eve", "0" * 64, topics=["1002"])
        assert acc["generation"] == 1 and s.account_by_token("0" * 64)["name"] == "eve"
        s.revoke_account("ann")
        task = s.pref_tasks()["task_id"].iloc[0]
        assert s.answer_pref(task, 3, "ann", "right")  # the undone comparison answered again
        row = s.judgments().iloc[0]
        assert s.retract(row["qid"], row["docid"], row["assessor"], row["batch_id"]) == row["grade"]
        s.set_state(note="fixture")
        s.warn("test", "written by a later qrelkit")
    with open_campaign_store(camp, readonly=True) as s:
        assert s.get_state("web_secret") == secret  # the release's secret kept
        assert s.get_state("note") == "fixture" and s.account("ann")["revoked"] is not None
        assert len(s.pref_answers()) == len(EXPECTED["campaign"]["pref_answers"]) + 1
        assert len(s.judgments(include_sample=True)) == len(EXPECTED["campaign"]["judgments"]) - 1
        assert records(s.warnings()) == [{"stage": "test", "message": "written by a later qrelkit"}]


def test_released_text_indexes_read_the_same(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    shutil.copy(FIXTURES / "corpus.jsonl", corpus)
    exp = EXPECTED["text_index"]
    idx = TextIndex(unpack("text-index.sqlite", tmp_path / "text-index.sqlite"), corpus)
    try:
        assert idx.mode == "offsets" and idx.meta["sha256"] == "fixture"
        assert {p: list(v) for p, v in idx.texts(exp["texts"]).items()} == exp["texts"]
    finally:
        idx.close()
    idx = TextIndex(unpack("texts-index.sqlite", tmp_path / "texts-index.sqlite"), FIXTURES / "corpus.jsonl.gz")
    try:
        assert idx.mode == "texts"
        assert {p: list(v) for p, v in idx.texts(exp["gz_texts"]).items()} == exp["gz_texts"]
    finally:
        idx.close()
    # recorded for another corpus path: rebuilt when opened, the same texts
    idx = open_text_index(corpus, tmp_path / "text-index.sqlite", sha256="fixture")
    try:
        assert idx.meta["corpus"] == str(corpus.resolve())
        assert {p: list(v) for p, v in idx.texts(exp["texts"]).items()} == exp["texts"]
    finally:
        idx.close()
