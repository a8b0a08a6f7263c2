"""The storage package (issue 20, "storage split by concern, composed, one package"): one
interface per aggregate and its SQLite implementation; the judging and the campaign store compose
them over one file; an operation spanning two aggregates is one transaction; SQLite's disk errors
are one-line InputError whatever the statement (the command line no longer catches SQLite's)."""

from __future__ import annotations

import doctest
import inspect
import sqlite3
from abc import ABC

import pandas as pd
import pytest

from qrelkit.errors import InputError
from qrelkit.store import CampaignStore, JudgingStore, init_store, interfaces
from qrelkit.store import accounts, batches, campaign, combine, judging, judgments, prefs, rows, sqlite, state, topics
from qrelkit.store.sqlite import connect

JUDGING = {"topics": interfaces.Topics, "batches": interfaces.Batches, "judgments": interfaces.JudgmentLog}
CAMPAIGN = {**JUDGING, "assignments": interfaces.Assignments, "state": interfaces.CampaignState,
            "accounts": interfaces.Accounts, "prefs": interfaces.Preferences}


@pytest.fixture
def camp(tmp_path):
    with CampaignStore(tmp_path / "campaign.db", create=True) as s:
        s.topics.add({"1": "one", "2": "two"})
        s.assignments.issue("1", ["p1", "p2"], "1/pool", ["ann"])
        s.judgments.import_judgments(pd.DataFrame({"qid": ["1"], "docid": ["p1"], "assessor": ["ann"], "grade": [2],
                                                   "batch_id": ["1/pool"]}))
        s.state.finish_stage("qrels", {})
        yield s


def test_the_stores_compose_one_implementation_per_interface(tmp_path, camp):
    """Not a class with every method: an attribute per aggregate, each implementing its interface
    (nothing abstract left), all over the store's one connection."""
    with init_store(tmp_path / "j.db", ["1"]) as js:
        for store, wanted in ((js, JUDGING), (camp, CAMPAIGN)):
            for name, iface in wanted.items():
                agg = getattr(store, name)
                assert isinstance(agg, iface) and issubclass(iface, ABC) and not inspect.isabstract(type(agg)), name
                assert agg._db is store.db
        assert not hasattr(js, "state") and not hasattr(js, "assignments")
    assert not issubclass(CampaignStore, JudgingStore)  # composed, not inherited
    public = {n for n in dir(CampaignStore) if not n.startswith("_")}
    assert public == {"close", "counts", "path", "schema_versions", "transaction"}  # and the aggregates


def test_an_operation_over_two_aggregates_is_one_transaction(camp):
    """A correction forgets the closing stages in its transaction: both, or neither."""
    item = [("1", "p1", "ann", 1, None, None)]
    with pytest.raises(RuntimeError):
        with camp.transaction():
            assert camp.judgments.change_judgments(item, source="fix")["changed"] == 1
            assert camp.state.forget_stages(["qrels"]) == ["qrels"]
            raise RuntimeError("the disk, say")
    assert camp.judgments.log()["grade"].tolist() == [2] and "qrels" in camp.state.stages_done()
    with camp.transaction():
        camp.judgments.change_judgments(item, source="fix")
        camp.state.forget_stages(["qrels"])
    assert camp.judgments.log()["grade"].tolist() == [1] and camp.state.stages_done() == {}


def test_a_full_disk_is_one_line_whatever_the_statement(tmp_path):
    """SQLite's ``database or disk is full`` — here a write outside any transaction, on a
    database not allowed to grow — is ``[disk-full]`` naming the file; other errors stay SQLite's."""
    path = tmp_path / "s.db"
    db = connect(path, isolation_level=None)
    try:
        db.execute("CREATE TABLE t (x TEXT)")
        db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
        with pytest.raises(InputError) as e:
            db.executemany("INSERT INTO t VALUES (?)", [("x" * 5000,)] * 10)
        assert e.value.rule == "disk-full" and e.value.file == str(path)
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            db.execute("SELECT * FROM missing")
    finally:
        db.close()


def test_a_connection_of_another_thread_is_left_to_it(tmp_path):
    """The web app lets go of its threads' connections: closing one made by another thread is
    not an error when asked so (SQLite closes a connection only in its own thread)."""
    import threading

    made = []
    t = threading.Thread(target=lambda: made.append(init_store(tmp_path / "t.db", ["1"])))
    t.start()
    t.join()
    with pytest.raises(sqlite3.ProgrammingError):
        made[0].close()
    made[0].close(from_any_thread=True)


@pytest.mark.parametrize("module", [accounts, batches, campaign, combine, interfaces, judging, judgments, prefs, rows,
                                    sqlite, state, topics])
def test_the_examples_of_the_storage_package_run(module, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    res = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert not res.failed, module.__name__


def test_a_claimed_place_is_given_at_once_and_as_batches_are_assigned(camp):
    """Issue 21: a claim moves the places where the named assessor judged nothing (never where
    she judged, never a second place for the claimer), and every batch of the topic assigned later
    goes to the claimer; a batch issued again keeps the assessors it has (a stage run again gave
    the unclaimed name its place back before, and the topic waited for him forever)."""
    a = camp.assignments
    a.issue("1", ["p3"], "1/rest", ["ann", "bob"])
    a.issue("2", ["q1"], "2/pool", ["ann"])
    assert a.claim("1", "ann", "eve") == 1  # 1/rest; not 1/pool, where ann judged p1
    assert a.claim("1", "ann", "eve") == 0 and a.claim("1", "bob", "eve") == 0  # eve is in 1/rest already
    a.issue("1", ["p3"], "1/rest", ["ann", "bob"])  # as a stage run again does
    a.issue("1", ["p4"], "1/cal", ["bob", "ann"])  # the claims in their order: ann's place to eve
    a.issue("2", ["q2"], "2/cal", ["ann"])  # another topic: not claimed
    got = a.all().groupby("batch_id")["assessor"].apply(list).to_dict()
    assert got == {"1/pool": ["ann"], "1/rest": ["eve", "bob"], "1/cal": ["bob", "eve"], "2/pool": ["ann"],
                   "2/cal": ["ann"]}
    assert a.claims().values.tolist() == [["1", "ann", "eve"], ["1", "bob", "eve"]]
    assert a.pending("ann", "1")["docid"].tolist() == ["p2"] and a.claims("2").empty  # 1/pool: hers
