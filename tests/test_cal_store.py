"""The judging store: all-or-nothing imports under SIGKILL, concurrent writers, idempotent
re-imports, conflicts, thread views and judging order, exports byte for byte, and the
``qrelkit cal`` commands."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import signal
import sqlite3
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from qrelkit.store import ConflictError, init_store, open_store
from qrelkit.cli import run
from qrelkit.errors import InputError
from qrelkit.io.tables import write_table
from qrelkit.pooler.batches import import_batches, make_batches

from conftest import cli_store

CTX = mp.get_context("fork")   # children start in milliseconds; they open their own connections


def judgments(n: int, *, qid: str = "1", prefix: str = "p", assessor: str = "A1", batch: str = "1-1") -> pd.DataFrame:
    return pd.DataFrame({"qid": qid, "docid": [f"{prefix}{i:05d}" for i in range(n)], "assessor": assessor,
                         "grade": [i % 4 for i in range(n)], "batch_id": batch})


def snapshot(path: Path) -> dict[str, list]:
    """Every row of every table (what "changes nothing" compares)."""
    with sqlite3.connect(path) as db:
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
                for t in ("meta", "topics", "threads", "batches", "batch_items", "judgments")}


def count(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]


@pytest.fixture
def store_path(tmp_path) -> Path:
    p = tmp_path / "campaign.db"
    init_store(p, {"1": "first topic", "2": "second topic"}, collection_size=1000).close()
    return p


# -- durability -----------------------------------------------------------------------------------


def _import_child(path, df, stage, hang, ready, done):
    store = open_store(path)

    def hook(s):
        if s == stage:
            ready.set()
            if hang:
                time.sleep(600)

    store.judgments.import_judgments(df, source="child", on_transaction=hook)
    done.set()


def _kill_during(path: Path, df: pd.DataFrame, stage: str, hang: bool, delay: float) -> tuple[int, bool]:
    """Import ``df`` in a child; SIGKILL it ``delay`` s after it reached ``stage``. Returns the
    judgments in the store afterwards and whether the child had finished before the kill."""
    ready, done = CTX.Event(), CTX.Event()
    p = CTX.Process(target=_import_child, args=(str(path), df, stage, hang, ready, done))
    p.start()
    assert ready.wait(60), "child never reached the transaction"
    time.sleep(delay)
    finished = done.is_set()
    os.kill(p.pid, signal.SIGKILL)
    p.join(30)
    assert p.exitcode in (-signal.SIGKILL, 0)
    return count(path), finished


def test_sigkill_inside_the_transaction_leaves_nothing(store_path):
    df = judgments(10_000)
    before = snapshot(store_path)
    # the child has written all 10,000 rows and is about to COMMIT when it is killed
    n, finished = _kill_during(store_path, df, "commit", hang=True, delay=0.2)
    assert (n, finished) == (0, False)
    assert snapshot(store_path) == before                       # not even the batch registration
    with sqlite3.connect(store_path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # the store is usable at once: the lock died with the process
    with open_store(store_path, timeout=5) as s:
        assert s.judgments.import_judgments(df).imported == 10_000
    assert count(store_path) == 10_000


def test_sigkill_at_random_moments_leaves_all_or_none(tmp_path):
    df = judgments(10_000)
    with init_store(tmp_path / "probe.db", ["1"]) as s:             # how long the transaction takes here
        marks = {}
        s.judgments.import_judgments(df, on_transaction=lambda stage: marks.setdefault(stage, time.perf_counter()))
        span = time.perf_counter() - marks["begin"]   # from holding the lock to after COMMIT
    rng = random.Random(11)
    outcomes = []
    for attempt in range(16):    # kill 0 .. 1.5 x the transaction's span after the child took the lock
        path = tmp_path / f"c{attempt}.db"
        init_store(path, ["1"]).close()
        n, finished = _kill_during(path, df, "begin", hang=False, delay=rng.uniform(0, 1.5 * span))
        assert n in (0, 10_000), f"partial import: {n} rows"
        if finished:
            assert n == 10_000
        outcomes.append(n)
        if attempt >= 5 and 0 in outcomes and 10_000 in outcomes:
            break
    print("sigkill outcomes:", outcomes, f"transaction span {span:.3f}s")
    # 0 rows although the child held the write lock = killed in the middle of its transaction
    assert outcomes.count(0) >= 1, f"no kill landed inside a transaction: {outcomes}"


def _concurrent_child(path, k, start, out):
    start.wait(30)
    with open_store(path) as s:
        rep = s.judgments.import_judgments(judgments(1000, prefix=f"w{k}-", assessor=f"A{k}"), source=f"worker{k}")
    out.put((k, rep.imported))


def test_eight_processes_import_at_once(store_path):
    start, out = CTX.Event(), CTX.Queue()
    procs = [CTX.Process(target=_concurrent_child, args=(str(store_path), k, start, out)) for k in range(8)]
    for p in procs:
        p.start()
    start.set()
    results = dict(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert results == {k: 1000 for k in range(8)}
    assert count(store_path) == 8000
    with open_store(store_path) as s:
        b = s.batches.all()
        assert list(b["batch_id"]) == ["1-1"] and b["judged"].iloc[0] == 8000   # registered once, by the first writer
        assert len(s.judgments.log("1")) == 8000


# -- idempotence and conflicts --------------------------------------------------------------------


def test_reimporting_a_file_changes_nothing(store_path, tmp_path):
    f = tmp_path / "judged.csv"
    judgments(500).to_csv(f, index=False)
    with open_store(store_path) as s:
        first = s.judgments.import_files([f])
        assert first.imported == 500 and first.batches_registered == 1
        before = snapshot(store_path)
        again = s.judgments.import_files([f, f])
        assert again.imported == 0 and again.counts["repeated"] == 1000 and again.batches_registered == 0
    assert snapshot(store_path) == before


def test_conflicting_grade_is_reported_and_not_written(store_path, tmp_path):
    f = tmp_path / "a.csv"
    judgments(100).to_csv(f, index=False)
    with open_store(store_path) as s:
        s.judgments.import_files([f])
        before = snapshot(store_path)
        changed = judgments(120)
        changed.loc[7, "grade"] = (changed.loc[7, "grade"] + 1) % 4     # p00007: 3 -> 0
        g = tmp_path / "b.csv"
        changed.to_csv(g, index=False)
        with pytest.raises(ConflictError) as exc:
            s.judgments.import_files([g])
        e = exc.value
        assert e.rule == "conflict" and e.file == str(g) and e.line == 9
        assert "assessor A1 gave topic 1 passage p00007 grade 0 here and grade 3 in the store; nothing imported" in str(e)
        assert len(e.report.conflicts) == 1
        assert snapshot(store_path) == before                  # the 20 new rows were not written either
        rep = s.judgments.import_files([g], lenient=True)
        assert rep.imported == 20 and rep.counts["conflict"] == 1 and rep.counts["repeated"] == 99
        c = rep.conflicts.iloc[0]
        assert (c["docid"], c["grade"], c["stored_grade"], c["line"]) == ("p00007", 0, 3, 9)
        assert s.judgments.labels("1").set_index("docid").loc["p00007", "grade"] == 3     # the stored grade stays


def test_conflict_within_one_file(store_path, tmp_path):
    df = judgments(10)
    df = pd.concat([df, df.iloc[[3]].assign(grade=0)], ignore_index=True)   # p00003: 3 and 0
    f = tmp_path / "x.tsv"
    df.to_csv(f, sep="\t", index=False)
    with open_store(store_path) as s:
        with pytest.raises(ConflictError, match="passage p00003"):
            s.judgments.import_files([f])
        assert s.counts()["judgments"] == 0
        rep = s.judgments.import_files([f], lenient=True)
        assert rep.imported == 9 and len(rep.conflicts) == 2 and rep.conflicts["stored_grade"].isna().all()


def test_log_is_append_only_and_conflicts_are_refused_by_the_database(store_path):
    with open_store(store_path) as s:
        s.judgments.import_judgments(judgments(3))
    with sqlite3.connect(store_path) as db:
        for sql in ("UPDATE judgments SET grade = 0", "DELETE FROM judgments",
                    "INSERT INTO judgments (topic, passage, grade, assessor, time, batch, source)"
                    " VALUES ('1', 'p00001', 3, 'A1', 't', '1-1', 'x')"):
            with pytest.raises(sqlite3.DatabaseError, match="append-only|conflict"):
                db.execute(sql)
    assert count(store_path) == 3


def test_several_assessors_and_batches(store_path):
    with open_store(store_path) as s:
        loc = s.batches.issue("1", "local", ["a", "b"])
        al = s.batches.issue("1", "all", ["c", "a"])
        assert (loc, al) == ("1/local/0000", "1/all/0000")
        rows = pd.DataFrame([("1", "a", "A1", 2, al), ("1", "c", "A1", 0, al), ("1", "b", "A1", 0, loc),
                             ("1", "a", "A1", 2, loc), ("1", "a", "A2", 3, loc), ("1", "z", "A3", 1, "1-1")],
                            columns=["qid", "docid", "assessor", "grade", "batch_id"])
        rep = s.judgments.import_judgments(rows)
        assert rep.imported == 6        # the same grade of A1 for "a" in two batches: a log row each
        log = s.judgments.log("1", "local")
        assert list(zip(log["docid"], log["assessor"])) == [("a", "A1"), ("a", "A2"), ("b", "A1"), ("z", "A3")]
        log = s.judgments.log("1", "all")   # issue order, then position in the batch
        assert list(log["docid"]) == ["a", "a", "b", "c", "a", "z"]
        assert list(s.judgments.log("1", "fractional")["docid"]) == ["z"]       # pool batches are shared
        assert list(s.judgments.labels("1", "all", combine="max")["grade"]) == [3, 0, 0, 1]
        assert set(s.batches.all()["status"]) == {"complete"}
        q = {c: s.judgments.export_qrels(combine=c).to_pydict() for c in ("median_high", "max", "min")}
        assert q["max"]["rel"] == [3, 0, 0, 1] and q["min"]["rel"] == [2, 0, 0, 1] and q["median_high"]["rel"] == [2, 0, 0, 1]


def test_rules_with_file_and_line(store_path, tmp_path):
    with open_store(store_path) as s:
        bid = s.batches.issue("1", "all", ["a", "b"])
        assert s.batches.all()["status"].tolist() == ["open"]
        cases = {
            "unknown-item": [("1", "zz", "A1", "1", bid)],
            "unknown-topic": [("9", "a", "A1", "1", "9-1")],
            "grade-outside-scale": [("1", "a", "A1", "7", bid)],
            "missing-value": [("1", "a", "", "1", bid)],
        }
        for rule, bad in cases.items():
            f = tmp_path / f"{rule}.csv"
            pd.DataFrame([("1", "a", "A1", "1", bid), *bad], columns=["qid", "docid", "assessor", "grade", "batch_id"]).to_csv(f, index=False)
            with pytest.raises(InputError) as exc:
                s.judgments.import_files([f])
            assert (exc.value.rule, exc.value.file, exc.value.line) == (rule, str(f), 3)
            assert s.counts()["judgments"] == 0
        f = tmp_path / "mixed.csv"
        pd.DataFrame([("1", "a", "A1", "2.0", bid), ("1", "b", "A1", "", bid)] + [r for v in cases.values() for r in v],
                     columns=["qid", "docid", "assessor", "grade", "batch_id"]).to_csv(f, index=False)
        rep = s.judgments.import_files([f], lenient=True)
        assert rep.imported == 1 and all(rep.counts[r] == 1 for r in cases) and rep.counts["ungraded"] == 1
        assert s.batches.all()["status"].tolist() == ["open"]            # "b" is not judged yet
        (tmp_path / "nocol.csv").write_text("qid,docid,grade\n1,a,2\n")
        with pytest.raises(InputError, match=r"nocol.csv:1: \[missing-column\]"):
            s.judgments.import_files([tmp_path / "nocol.csv"])


def test_reads_every_judgment_format(store_path, tmp_path):
    df = judgments(40)
    paths = [tmp_path / "j.csv", tmp_path / "j.tsv", tmp_path / "j.jsonl", tmp_path / "j.parquet"]
    df.iloc[:10].to_csv(paths[0], index=False)
    df.iloc[10:20].to_csv(paths[1], sep="\t", index=False)
    df.iloc[20:30].to_json(paths[2], orient="records", lines=True)
    write_table(pa.Table.from_pandas(df.iloc[30:], preserve_index=False), paths[3], kind="judgments", params={})
    with open_store(store_path) as s:
        assert s.judgments.import_files(paths).imported == 40
        assert s.judgments.export_qrels()["rel"].to_pylist() == df["grade"].tolist()


def test_completed_batches_and_batch_import_output(store_path, tmp_path):
    """Completed batch files (with ungraded rows) and the judgments table of 'batch import'."""
    pool = pa.table({"qid": ["1"] * 6 + ["2"] * 4, "docid": [f"d{i}" for i in range(10)], "position": list(range(1, 7)) + list(range(1, 5))})
    batches = make_batches(pool, first_n=4, assessors=2, per_item=2, seed=1)
    batches["grade"] = [i % 4 if i % 5 else pd.NA for i in range(len(batches))]
    done = tmp_path / "done.csv"
    batches.to_csv(done, index=False)
    with open_store(store_path) as s:
        rep = s.judgments.import_files([done])
        assert rep.imported == 16 and rep.counts["ungraded"] == 4
        assert set(s.batches.all()["batch_id"]) == {"1-1", "1-2", "2-1"}
    j, _ = import_batches([done])
    out = tmp_path / "judgments.parquet"
    write_table(pa.Table.from_pandas(j, preserve_index=False), out, kind="judgments", params={})
    with open_store(store_path) as s:
        assert s.judgments.import_files([out]).counts == {"imported": 0, "repeated": 16}


def test_exports_are_byte_identical(tmp_path):
    df = pd.concat([judgments(300, assessor="A1"), judgments(300, assessor="A2").assign(grade=lambda d: (d["grade"] + 1) % 4),
                    judgments(50, qid="2", batch="2-1")], ignore_index=True)
    f1, f2 = tmp_path / "a.csv", tmp_path / "b.csv"
    df.iloc[:400].to_csv(f1, index=False)
    df.iloc[400:].to_csv(f2, index=False)
    outs = []
    for k, files in enumerate(([f1, f2], [f2], [f1])):       # other import order, other times
        p = tmp_path / f"s{k}.db"
        with init_store(p, {"1": "", "2": ""}) as s:
            if k == 0:
                s.judgments.import_files(files)
            else:
                s.judgments.import_files([f2])
                time.sleep(0.01)
                s.judgments.import_files([f1])
        for name in ("q.txt", "q.parquet", "log.parquet"):
            args = ["cal", "export", str(p), "-o", str(tmp_path / f"{k}-{name}"), "--combine", "max"]
            assert run(args + (["--log"] if name.startswith("log") else [])) == 0
        outs.append([(tmp_path / f"{k}-{n}").read_bytes() for n in ("q.txt", "q.parquet")])
    assert outs[0] == outs[1] == outs[2]
    assert outs[0][0].decode().splitlines()[:2] == ["1 0 p00000 1", "1 0 p00001 2"]


# -- opening and creating -------------------------------------------------------------------------


def test_not_a_store(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(InputError, match=r"\[not-a-store\]"):
        open_store(junk)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    with pytest.raises(InputError, match=r"\[not-a-store\]"):
        init_store(other, ["1"])
    with sqlite3.connect(other) as db:     # left as it was: not switched to WAL
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    with pytest.raises(InputError, match=r"\[not-a-store\]"):
        open_store(tmp_path / "missing.db")


def test_init_adds_topics_and_checks_them(store_path):
    with open_store(store_path) as s:
        assert s.topics.add({"2": "second topic", "3": "third"}) == 1
        assert s.topics.all()["qid"].tolist() == ["1", "2", "3"]
        assert s.topics.threads("3")["thread"].tolist() == ["fractional", "local", "all"]
        with pytest.raises(InputError, match=r"\[topic-conflict\]"):
            s.topics.add({"1": "another text"})
        with pytest.raises(InputError, match=r"\[bad-option\]"):
            s.batches.issue("1", "weird", ["a"])
        s.topics.set_thread_state("1", "all", "accepted", "density 0.1", collection_size=99)
        row = s.topics.threads("1").iloc[2]
        assert (row["state"], row["reason"], row["collection_size"]) == ("accepted", "density 0.1", 99)
        with open_store(store_path) as again:
            with again.transaction():
                pass
        assert s.db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert s.db.conn.execute("PRAGMA synchronous").fetchone()[0] == 2          # FULL


# -- command line ---------------------------------------------------------------------------------


def test_cli_end_to_end(tmp_path, capsys):
    (tmp_path / "topics.tsv").write_text("1\tfirst\n2\tsecond\n")
    db = tmp_path / "c.db"
    assert run(["cal", "init", str(db), "-t", str(tmp_path / "topics.tsv"), "--collection-size", "500", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["topics"] == 2
    f = tmp_path / "j.csv"
    rows = [("1", f"d{i}", "A1", 2 if i < 40 else 0, f"1-{i // 25}") for i in range(200)]
    pd.DataFrame(rows, columns=["qid", "docid", "assessor", "grade", "batch_id"]).to_csv(f, index=False)
    assert run(["cal", "import", str(db), str(f), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["imported"] == 200
    assert run(["cal", "status", str(db), "--json", "--thread", "all"]) == 0
    st = json.loads(capsys.readouterr().out)["threads"]
    assert [(t["qid"], t["judged"], t["relevant"], t["action"]) for t in st] == [("1", 200, 40, "accept"), ("2", 0, 0, "continue")]
    assert st[0]["reason"] == "density 40/200 = 0.2 < 0.4, 200 judged >= 150, 40 relevant >= 4"
    assert run(["cal", "replay", str(db), "--rule", "density", "--json", "--thread", "all", "-o", str(tmp_path / "r.csv")]) == 0
    rp = json.loads(capsys.readouterr().out)["threads"][0]
    assert (rp["stop_judged"], rp["stop_batch"], rp["saved"]) == (150, "1-5", 50)
    assert run(["cal", "replay", str(db), "--rule", "knee", "--set", "min_judged=100", "--json", "--thread", "all"]) == 0
    assert json.loads(capsys.readouterr().out)["threads"][0]["stop_judged"] == 175    # rho = s - 40 >= 116
    assert pd.read_csv(tmp_path / "r.csv")["stop_judged"].tolist()[0] == 150


def test_cli_errors_are_one_line_and_write_nothing(tmp_path, capsys):
    db = cli_store(tmp_path)
    f = tmp_path / "j.csv"
    f.write_text("qid,docid,assessor,grade,batch_id\n1,a,A1,2,b\n1,a,A1,3,b\n")
    capsys.readouterr()
    before = snapshot(db)
    assert run(["cal", "import", str(db), str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{f}:3: [conflict]" in err and "1 more conflicting rows" in err
    assert snapshot(db) == before
    assert run(["cal", "import", str(db), str(f), "--lenient", "--conflicts-out", str(tmp_path / "c.csv")]) == 0
    assert len(pd.read_csv(tmp_path / "c.csv")) == 2
    out = tmp_path / "q.txt"
    for args in (["cal", "export", str(tmp_path / "none.db"), "-o", str(out)],
                 ["cal", "status", str(db), "--rule", "nope"],
                 ["cal", "replay", str(db), "--rule", "knee", "--set", "rho=3", "-o", str(out)],
                 ["cal", "init", str(tmp_path / "new.db"), "-t", str(tmp_path / "missing.tsv")]):
        capsys.readouterr()
        assert run(args) == 2, args
        assert capsys.readouterr().err.count("\n") == 1
        assert not out.exists() and not (tmp_path / "new.db").exists()


# -- schema 3: the grades in force kept by a trigger ---------------------------------------------

#: the version-2 view and conflict triggers, as stores written before version 3 hold them
_V2_LIVE = """
CREATE VIEW live_judgments AS
    SELECT j.seq, j.topic, j.passage, j.assessor, j.time, j.batch, j.source,
           CASE WHEN EXISTS (SELECT 1 FROM judgment_changes c WHERE c.judgment = j.seq)
                THEN (SELECT c.grade FROM judgment_changes c WHERE c.judgment = j.seq ORDER BY c.seq DESC LIMIT 1)
                ELSE j.grade END AS grade
    FROM judgments j
    WHERE NOT EXISTS (SELECT 1 FROM judgment_changes c WHERE c.judgment = j.seq)
       OR (SELECT c.grade FROM judgment_changes c WHERE c.judgment = j.seq ORDER BY c.seq DESC LIMIT 1) IS NOT NULL;
CREATE TRIGGER judgments_no_conflict BEFORE INSERT ON judgments
    WHEN EXISTS (SELECT 1 FROM live_judgments WHERE topic = NEW.topic AND passage = NEW.passage
                 AND assessor = NEW.assessor AND grade <> NEW.grade)
    BEGIN SELECT RAISE(ABORT, 'conflict: another grade from this assessor is stored'); END;
"""


def _changed_store(path: Path) -> None:
    """Judgments, some retracted, some retracted and judged again with another grade, one
    retracted twice over (undo, judge, undo)."""
    with open_store(path) as s:
        s.judgments.import_judgments(judgments(40))
        for i in (1, 5, 9, 13):
            s.judgments.retract("1", f"p{i:05d}", "A1", "1-1")
        again = judgments(40).iloc[[5, 9]].assign(grade=[3, 0])
        s.judgments.import_judgments(again)
        s.judgments.retract("1", "p00009", "A1", "1-1")


def _readings(path: Path) -> tuple:
    with open_store(path, readonly=True) as s:
        return (s.judgments.log().to_dict("records"), s.judgments.export_qrels().to_pylist(), s.judgments.export_log().to_pylist(),
                s.batches.all().to_dict("records"), s.judgments.last("A1"))


def test_a_version_2_store_is_migrated_with_its_grades_in_force(tmp_path):
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    init_store(new, {"1": "t"}, collection_size=100).close()
    _changed_store(new)
    import shutil

    shutil.copy(new, old)  # the same rows, times included
    with sqlite3.connect(old) as db:  # the same store as version 2 wrote it
        db.executescript("DROP TRIGGER judgments_no_conflict; DROP TRIGGER judgment_changes_no_conflict;"
                         " DROP TRIGGER judgment_changes_state; DROP VIEW live_judgments; DROP TABLE judgment_state;"
                         + _V2_LIVE + "UPDATE meta SET value = '2' WHERE key = 'schema_version';")
    v2_reading = _readings(old)  # read-only: the store's own version-2 view, nothing migrated
    with sqlite3.connect(old) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "2"
    assert v2_reading == _readings(new)
    with open_store(old) as s:  # migrated in place
        live = {(r["docid"], r["grade"]) for r in s.judgments.log().to_dict("records")}
    assert ("p00005", 3) in live and not {d for d, _ in live} & {"p00001", "p00009", "p00013"} and len(live) == 37
    with sqlite3.connect(old) as db, sqlite3.connect(new) as db2:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "3"
        state = db.execute("SELECT judgment, grade FROM judgment_state ORDER BY 1").fetchall()
        assert state == db2.execute("SELECT judgment, grade FROM judgment_state ORDER BY 1").fetchall()
        assert len(state) == 4 and sum(g is None for _, g in state) == 3
    assert _readings(old) == _readings(new)
    # the migrated store goes on: undo and conflict rules on the grades in force
    with open_store(old) as s:
        assert s.judgments.retract("1", "p00005", "A1", "1-1") == 3
        with pytest.raises(ConflictError):
            s.judgments.import_judgments(judgments(40).iloc[[2]].assign(grade=1, batch_id="other"))
        assert s.judgments.import_judgments(judgments(40).iloc[[5]].assign(grade=2)).imported == 1


def test_the_state_of_changed_judgments_is_the_last_change(tmp_path):
    """judgment_state holds, for every changed judgment, the grade of its last change: the same
    as reading the changes log, after any sequence of undo and re-judging."""
    p = tmp_path / "s.db"
    init_store(p, {"1": "t"}, collection_size=100).close()
    rng = random.Random(4)
    with open_store(p) as s:
        s.judgments.import_judgments(judgments(30))
        for _ in range(200):
            i = rng.randrange(30)
            if rng.random() < 0.5:
                s.judgments.retract("1", f"p{i:05d}", "A1", "1-1")
            else:
                s.judgments.import_judgments(judgments(30).iloc[[i]].assign(grade=rng.randrange(4)), lenient=True)
    with sqlite3.connect(p) as db:
        last = db.execute("SELECT c.judgment, c.grade FROM judgment_changes c WHERE c.seq ="
                          " (SELECT MAX(seq) FROM judgment_changes d WHERE d.judgment = c.judgment) ORDER BY 1").fetchall()
        assert last and last == db.execute("SELECT judgment, grade FROM judgment_state ORDER BY 1").fetchall()
        live = db.execute("SELECT seq, grade FROM live_judgments ORDER BY 1").fetchall()
        by_log = [(seq, dict(last).get(seq, g)) for seq, g in db.execute("SELECT seq, grade FROM judgments ORDER BY 1")]
        assert live == [(seq, g) for seq, g in by_log if g is not None]


def test_the_state_follows_a_change_written_with_any_conflict_clause(tmp_path):
    """judgment_state is kept by an upsert: an outer INSERT OR IGNORE / OR REPLACE on the
    changes log (another tool writing to the file) still moves the grade in force."""
    p = tmp_path / "s.db"
    init_store(p, {"1": "t"}, collection_size=100).close()
    with open_store(p) as s:
        s.judgments.import_judgments(judgments(3))
        s.judgments.retract("1", "p00001", "A1", "1-1")
    with sqlite3.connect(p) as db:
        seq = db.execute("SELECT seq FROM judgments WHERE passage = 'p00001'").fetchone()[0]
        for clause, grade in (("OR IGNORE", 3), ("OR REPLACE", 2)):
            db.execute(f"INSERT {clause} INTO judgment_changes (judgment, grade, time, source) VALUES (?, ?, 't', 'x')",
                       (seq, grade))
            assert db.execute("SELECT grade FROM live_judgments WHERE seq = ?", (seq,)).fetchone() == (grade,)
