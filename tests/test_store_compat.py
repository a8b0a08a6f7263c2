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
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from qrelkit import init_store, open_store
from qrelkit.campaign import Campaign
from qrelkit.store import CAMPAIGN_SCHEMA_VERSION, open_campaign_store
from qrelkit.store.textindex import TextIndex, open_text_index

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
    return {"qrels": s.judgments.export_qrels().to_pydict(), "log": s.judgments.export_log().to_pydict(), "counts": s.counts(),
            "batches": records(s.batches.all()), "history": records(s.judgments.records(history=True).drop(columns=["time"]))}


@pytest.mark.parametrize("readonly", [True, False])
def test_a_released_judging_store_reads_the_same(tmp_path, readonly):
    db = unpack("judging.db", tmp_path / "judging.db")
    with open_store(db, readonly=readonly) as s:
        assert judging_readings(s) == EXPECTED["judging"]


def test_a_released_judging_store_takes_writes(tmp_path):
    db = unpack("judging.db", tmp_path / "judging.db")
    with init_store(db, ["4"]) as s:  # init on an existing store adds topics
        s.judgments.import_judgment("2", "p3", "ann", 2, "2-1")  # the retracted judgment judged again
        assert s.judgments.retract("1", "p1", "bob", "1-1") == 1
        b = s.batches.issue("4", None, ["q1"], kind="pool")
        s.judgments.import_judgment("4", "q1", "cat", 1, b)
    with open_store(db, readonly=True) as s:
        q = s.judgments.export_qrels().to_pandas()
        assert s.counts()["topics"] == 4
    got = dict(zip(zip(q["qid"], q["docid"]), q["rel"]))
    assert got[("2", "p3")] == 2 and got[("4", "q1")] == 1 and got[("1", "p1")] == 2  # ann's alone now


def campaign_readings(s) -> dict:
    return {"judgments": records(s.judgments.log(include_sample=True)),
            "history": records(s.judgments.records(history=True).drop(columns=["time"])),
            "stages": sorted(s.state.stages_done()), "cal_rounds": {q: list(v) for q, v in s.state.cal_rounds().items()},
            "accounts": [{k: a[k] for k in ("name", "organizer", "topics", "generation")}
                         | {"revoked": a["revoked"] is not None} for a in s.accounts.all()],
            "pref_answers": records(s.prefs.answers()),
            "pref_log": records(s.prefs.answer_log().drop(columns=["answered", "retracted"])),
            "pending": records(s.assignments.pending()), "assignments": records(s.assignments.all()),
            "warnings": records(s.state.warnings()), "schema_versions": s.schema_versions()}


@pytest.fixture
def camp(tmp_path) -> Path:
    d = tmp_path / "camp"
    unpack("campaign.db", d / "campaign.db")
    return d


@pytest.mark.parametrize("readonly", [True, False])
def test_a_released_campaign_store_reads_the_same(camp, readonly):
    exp = dict(EXPECTED["campaign"])
    if not readonly:  # opened for writing, it is migrated: the readings are the same but for its version
        exp["schema_versions"] = {**exp["schema_versions"], "campaign_schema_version": CAMPAIGN_SCHEMA_VERSION}
    c = Campaign(camp)
    assert records(c.status()) == exp.pop("status")
    assert c.judged_qrels().to_pydict() == exp.pop("qrels")
    with open_campaign_store(camp, readonly=readonly) as s:
        assert campaign_readings(s) == exp


def test_a_released_campaign_store_takes_writes(camp):
    with open_campaign_store(camp) as s:
        assert s.schema_versions()["campaign_schema_version"] == CAMPAIGN_SCHEMA_VERSION
        secret = s.accounts.web_secret()
        acc = s.accounts.add("eve", "0" * 64, topics=["1002"])
        assert acc["generation"] == 1 and s.accounts.by_token("0" * 64)["name"] == "eve"
        s.accounts.revoke("ann")
        task = s.prefs.tasks()["task_id"].iloc[0]
        assert s.prefs.answer(task, 3, "ann", "right")  # the undone comparison answered again
        row = s.judgments.log().iloc[0]
        assert s.judgments.retract(row["qid"], row["docid"], row["assessor"], row["batch_id"]) == row["grade"]
        s.state.update(note="fixture")
        s.state.warn("test", "written by a later qrelkit")
    with open_campaign_store(camp, readonly=True) as s:
        assert s.state.get("web_secret") == secret  # the release's secret kept
        assert s.state.get("note") == "fixture" and s.accounts.get("ann")["revoked"] is not None
        assert len(s.prefs.answers()) == len(EXPECTED["campaign"]["pref_answers"]) + 1
        assert len(s.judgments.log(include_sample=True)) == len(EXPECTED["campaign"]["judgments"]) - 1
        assert records(s.state.warnings()) == [{"stage": "test", "message": "written by a later qrelkit"}]


@pytest.mark.parametrize("readonly", [True, False])
def test_a_released_stores_topic_claims_are_kept(camp, readonly):
    """Version 5 kept the web app's claims (topics taken with [web] free_topic_choice) in
    ``campaign_state``; version 6 has them in ``campaign_claims``, honoured when a batch is assigned."""
    conn = sqlite3.connect(camp / "campaign.db")
    with conn:
        conn.execute("INSERT INTO campaign_state VALUES ('web_claims', ?)",
                     (json.dumps([["1002", "bob", "eve"], ["1002", "cat", "eve"], ["1002", "bob", "dan"]]),))
    conn.close()
    with open_campaign_store(camp, readonly=readonly) as s:
        assert s.assignments.claims().values.tolist() == [["1002", "bob", "eve"], ["1002", "cat", "eve"],
                                                          ["1002", "bob", "dan"]]
    if readonly:
        return
    with open_campaign_store(camp) as s:
        assert s.state.get("web_claims") is None
        s.assignments.issue("1002", ["p-new"], "1002/extra", ["bob", "cat"])
        a = s.assignments.all()
        assert a.loc[a["batch_id"] == "1002/extra", "assessor"].tolist() == ["eve", "cat"]


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
