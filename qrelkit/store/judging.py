"""The judging store: one SQLite file per campaign that never loses a judgment.

A store holds the topics of a campaign, its CAL threads (``fractional``, ``local``, ``all`` per
topic, docs/protocol.md section 1), the batches issued to assessors with their items, and an
**append-only judgments log**. Any number of processes may read and write one store at once
(:mod:`qrelkit.store.sqlite`: WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE`` transactions, the
lock holder named, the integrity checked before any use). A :class:`JudgingStore` composes its
aggregates over the file (:mod:`qrelkit.store.interfaces`): ``store.topics``
(:class:`~qrelkit.store.topics.SqliteTopics`), ``store.batches``
(:class:`~qrelkit.store.batches.SqliteBatches`) and ``store.judgments``
(:class:`~qrelkit.store.judgments.SqliteJudgmentLog`: the import rules, undo, judging order).

Schema
------
==============  ==================================================================================
meta            key, value: ``format`` (``qrelkit-judging-store``), ``schema_version``
topics          qid (primary key), text
threads         topic, name (fractional | local | all), state (active | accepted | rejected |
                stopped), reason, collection_size (what the thread ranks; for the budget method)
batches         seq (issue order), id (unique), topic, thread (NULL: shared by every thread),
                iteration, kind (cal | pool | sample), created, status (open | complete)
batch_items     batch, position (1-based, the order the batch was issued in), passage
judgments       seq, topic, passage, grade, assessor, time (UTC, ISO 8601), batch, source;
                unique (topic, passage, assessor, batch)
judgment_changes  seq, judgment (a judgments seq), grade (NULL: retracted), time, source: the
                append-only log of retractions and re-judgments (schema version 2)
judgment_state  judgment (a judgments seq), grade (NULL: retracted): the grade in force of each
                changed judgment, its last change, kept by a trigger on judgment_changes (3)
live_judgments  a view: every judgment not retracted, with its grade in force (what every
                reader of the log reads)
==============  ==================================================================================

Triggers make the log append-only (``UPDATE``/``DELETE`` abort) and refuse a second, different
grade from one assessor for one topic and passage, whatever the code path. A store of an older
schema (1, 2) is migrated to 3 when opened for writing, in one transaction; read-only, it is read
as it is (a version-1 store gets a temporary view of its log).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pandas as pd

from qrelkit.errors import InputError
from qrelkit.store.batches import SqliteBatches
from qrelkit.store.interfaces import BATCH_KINDS, BATCH_STATUSES, THREAD_STATES, THREADS
from qrelkit.store.judgments import SqliteJudgmentLog
from qrelkit.store.sqlite import Database, SqliteStore, statements
from qrelkit.store.topics import SqliteTopics

STORE_FORMAT = "qrelkit-judging-store"
SCHEMA_VERSION = 3  # 2: judgment_changes (retractions, re-judgments) and the live_judgments view; 3: judgment_state

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS topics (qid TEXT PRIMARY KEY, text TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS threads (
    topic TEXT NOT NULL REFERENCES topics(qid),
    name TEXT NOT NULL CHECK (name IN {THREADS}),
    state TEXT NOT NULL DEFAULT 'active' CHECK (state IN {THREAD_STATES}),
    reason TEXT NOT NULL DEFAULT '',
    collection_size INTEGER,
    PRIMARY KEY (topic, name)
);
CREATE TABLE IF NOT EXISTS batches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    topic TEXT REFERENCES topics(qid),
    thread TEXT,
    iteration INTEGER,
    kind TEXT NOT NULL CHECK (kind IN {BATCH_KINDS}),
    created TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN {BATCH_STATUSES}),
    FOREIGN KEY (topic, thread) REFERENCES threads(topic, name)
);
CREATE TABLE IF NOT EXISTS batch_items (
    batch TEXT NOT NULL REFERENCES batches(id),
    position INTEGER NOT NULL,
    passage TEXT NOT NULL,
    PRIMARY KEY (batch, position),
    UNIQUE (batch, passage)
);
CREATE TABLE IF NOT EXISTS judgments (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL REFERENCES topics(qid),
    passage TEXT NOT NULL,
    grade INTEGER NOT NULL,
    assessor TEXT NOT NULL,
    time TEXT NOT NULL,
    batch TEXT NOT NULL REFERENCES batches(id),
    source TEXT NOT NULL,
    UNIQUE (topic, passage, assessor, batch)
);
CREATE INDEX IF NOT EXISTS judgments_key ON judgments(topic, passage, assessor);
CREATE INDEX IF NOT EXISTS judgments_batch ON judgments(batch);
CREATE INDEX IF NOT EXISTS batches_topic ON batches(topic, thread);
CREATE TRIGGER IF NOT EXISTS judgments_no_update BEFORE UPDATE ON judgments
    BEGIN SELECT RAISE(ABORT, 'the judgments log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS judgments_no_delete BEFORE DELETE ON judgments
    BEGIN SELECT RAISE(ABORT, 'the judgments log is append-only'); END;
"""

#: schema version 2: retractions and re-judgments (an append-only log of changes); version 3: the
#: grade in force of every changed judgment, kept by a trigger on that log (``judgment_state``),
#: so that the view every reader uses is a join on a primary key, not correlated subqueries on
#: the changes (created by a new store and by the migrations, which drop older triggers first)
_CHANGES_SCHEMA = """
CREATE TABLE IF NOT EXISTS judgment_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    judgment INTEGER NOT NULL REFERENCES judgments(seq),
    grade INTEGER,
    time TEXT NOT NULL,
    source TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS judgment_changes_judgment ON judgment_changes(judgment, seq);
CREATE TRIGGER IF NOT EXISTS judgment_changes_no_update BEFORE UPDATE ON judgment_changes
    BEGIN SELECT RAISE(ABORT, 'the judgment changes log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS judgment_changes_no_delete BEFORE DELETE ON judgment_changes
    BEGIN SELECT RAISE(ABORT, 'the judgment changes log is append-only'); END;
CREATE TABLE IF NOT EXISTS judgment_state (
    judgment INTEGER PRIMARY KEY REFERENCES judgments(seq),
    grade INTEGER
);
CREATE TRIGGER IF NOT EXISTS judgment_changes_state AFTER INSERT ON judgment_changes
    BEGIN INSERT INTO judgment_state (judgment, grade) VALUES (NEW.judgment, NEW.grade)
          ON CONFLICT (judgment) DO UPDATE SET grade = excluded.grade; END
"""

#: the view of the judgments in force and the conflict triggers on them (version 3)
_LIVE_SCHEMA = """
CREATE VIEW IF NOT EXISTS live_judgments AS
    SELECT j.seq, j.topic, j.passage, j.assessor, j.time, j.batch, j.source,
           CASE WHEN s.judgment IS NULL THEN j.grade ELSE s.grade END AS grade
    FROM judgments j LEFT JOIN judgment_state s ON s.judgment = j.seq
    WHERE s.judgment IS NULL OR s.grade IS NOT NULL;
CREATE TRIGGER IF NOT EXISTS judgments_no_conflict BEFORE INSERT ON judgments
    WHEN EXISTS (SELECT 1 FROM live_judgments WHERE topic = NEW.topic AND passage = NEW.passage
                 AND assessor = NEW.assessor AND grade <> NEW.grade)
    BEGIN SELECT RAISE(ABORT, 'conflict: another grade from this assessor is stored'); END;
CREATE TRIGGER IF NOT EXISTS judgment_changes_no_conflict BEFORE INSERT ON judgment_changes
    WHEN NEW.grade IS NOT NULL AND EXISTS (SELECT 1 FROM judgments j JOIN live_judgments l ON l.topic = j.topic
         AND l.passage = j.passage AND l.assessor = j.assessor AND l.seq <> j.seq AND l.grade <> NEW.grade
         WHERE j.seq = NEW.judgment)
    BEGIN SELECT RAISE(ABORT, 'conflict: another grade from this assessor is stored'); END
"""

#: what a migration to version 3 replaces: the version-1 or -2 conflict triggers and view
_OLD_LIVE = ("DROP TRIGGER IF EXISTS judgments_no_conflict", "DROP TRIGGER IF EXISTS judgment_changes_no_conflict",
             "DROP VIEW IF EXISTS live_judgments")

#: the grade in force of every changed judgment: its last change
_FILL_STATE = """INSERT OR REPLACE INTO judgment_state (judgment, grade)
    SELECT c.judgment, c.grade FROM judgment_changes c
    WHERE c.seq = (SELECT MAX(d.seq) FROM judgment_changes d WHERE d.judgment = c.judgment)"""

#: a version-1 store opened read-only: the same view, over a log that has no changes
_V1_READONLY_VIEW = """CREATE TEMP VIEW IF NOT EXISTS live_judgments AS
    SELECT seq, topic, passage, assessor, time, batch, source, grade FROM main.judgments"""


def check_meta(conn: sqlite3.Connection, path: str | os.PathLike) -> None:
    """``not-a-store`` unless the file's ``meta`` says it is a judging store of a schema this
    qrelkit knows."""
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.OperationalError:
        meta = {}
    if meta.get("format") != STORE_FORMAT:
        raise InputError("not-a-store", "not a qrelkit judging store", file=str(path))
    if int(meta.get("schema_version", 0)) > SCHEMA_VERSION:
        raise InputError("not-a-store", f"store schema {meta['schema_version']} is newer than this qrelkit "
                         f"({SCHEMA_VERSION})", file=str(path))


def _create(db: Database) -> None:
    """The judging store's tables in a new (or not yet initialized) file; a new store is of the
    current schema, an existing one keeps its version (:func:`_upgrade` migrates it)."""
    with db.transaction() as conn:
        for stmt in statements(_SCHEMA):
            conn.execute(stmt)
        new = conn.execute("SELECT 1 FROM meta WHERE key = 'format'").fetchone() is None
        if new:
            for stmt in statements(_CHANGES_SCHEMA) + statements(_LIVE_SCHEMA):
                conn.execute(stmt)
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?), ('schema_version', ?)",
                     (STORE_FORMAT, str(SCHEMA_VERSION)))


def _upgrade(db: Database) -> None:
    """Bring a version-1 or -2 store to version 3 in one transaction: the changes log (version
    2), the grades in force kept by a trigger (3), the view and the conflict triggers on
    them. Read-only, a version-2 store's own view serves; a version-1 store gets a temporary
    view of its log (it has no changes)."""
    version = int(db.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])
    if version >= SCHEMA_VERSION:
        return
    if db.readonly:
        if version < 2:
            db.conn.execute(_V1_READONLY_VIEW)
        return
    with db.transaction() as conn:
        if int(conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]) < SCHEMA_VERSION:
            for stmt in _OLD_LIVE:
                conn.execute(stmt)
            for stmt in statements(_CHANGES_SCHEMA):
                conn.execute(stmt)
            conn.execute(_FILL_STATE)
            for stmt in statements(_LIVE_SCHEMA):
                conn.execute(stmt)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))


def open_judging_file(path: str | os.PathLike, *, create: bool = False, **kw) -> Database:
    """The :class:`~qrelkit.store.sqlite.Database` of a judging store file (a campaign store is
    one too): checked (:func:`check_meta`: before anything is written to an existing file),
    created when ``create`` (an empty or missing file is a new store), migrated (when not
    ``readonly``). ``kw``: as for :class:`~qrelkit.store.sqlite.Database`."""

    def prepare(db: Database) -> None:
        if create:
            _create(db)
        check_meta(db.conn, db.path)
        _upgrade(db)

    return Database(path, create=create, check=lambda conn: check_meta(conn, path), prepare=prepare, **kw)


class JudgingStore(SqliteStore):
    """An open judging store (see the module documentation): ``topics``, ``batches`` and
    ``judgments`` over one SQLite file.

    One object per process (or thread): it owns one SQLite connection (``check_same_thread=False``:
    usable from a thread other than its creator's, by one thread at a time). Use as a context manager
    or call :meth:`close`. Open with :func:`open_store` / create with :func:`init_store`.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import pandas as pd
    >>> from qrelkit import JudgingStore, init_store
    >>> path = Path(tempfile.mkdtemp(), "campaign.db")
    >>> init_store(path, ["1", "2"]).close()
    >>> with JudgingStore(path) as store:
    ...     batch = store.batches.issue("1", None, ["p1", "p2"], kind="pool")
    ...     report = store.judgments.import_judgments(pd.DataFrame({
    ...         "qid": ["1", "1"], "docid": ["p1", "p2"], "assessor": ["ann", "ann"], "grade": [2, 0],
    ...         "batch_id": [batch, batch]}))
    ...     qrels = store.judgments.export_qrels()
    >>> batch, report.imported
    ('1/pool/0000', 2)
    >>> qrels.to_pydict()
    {'qid': ['1', '1'], 'docid': ['p1', 'p2'], 'rel': [2, 0]}
    """

    def __init__(self, path: str | os.PathLike, *, timeout: float = 60.0, synchronous: str = "FULL",
                 readonly: bool = False, operation: str | None = None, check_same_thread: bool = True,
                 _create: bool = False) -> None:
        self.db = open_judging_file(path, create=_create, timeout=timeout, synchronous=synchronous,
                                    readonly=readonly, operation=operation, check_same_thread=check_same_thread)
        self.topics = SqliteTopics(self.db)
        self.batches = SqliteBatches(self.db)
        self.judgments = SqliteJudgmentLog(self.db, self.batches)


def init_store(path: str | os.PathLike, topics: pd.DataFrame | Mapping[str, str] | Iterable[str] | None = None, *,
               threads: Sequence[str] = THREADS, collection_size: int | None = None,
               synchronous: str = "FULL", timeout: float = 60.0, operation: str | None = None) -> JudgingStore:
    """Create a store (or open an existing one) and add ``topics`` with ``threads`` each.

    An existing file must be a sound store (see :func:`open_store`); an empty file is taken as a
    new store. ``timeout`` and ``operation``: as for :func:`open_store`.

    ``topics``: a DataFrame with ``qid`` (and ``text``), e.g. from
    :func:`qrelkit.io.topics.read_topics`, a mapping qid -> text, or qids.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from qrelkit import init_store
    >>> with init_store(Path(tempfile.mkdtemp(), "campaign.db"), {"1": "black bear attacks"}) as store:
    ...     store.topics.all().to_dict("list")
    {'qid': ['1'], 'text': ['black bear attacks']}
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    store = JudgingStore(p, synchronous=synchronous, timeout=timeout, operation=operation, _create=True)
    if topics is not None:
        try:
            store.topics.add(topics, threads=threads, collection_size=collection_size)
        except BaseException:
            store.close()
            raise
    return store


def open_store(path: str | os.PathLike, *, timeout: float = 60.0, synchronous: str = "FULL", readonly: bool = False,
               operation: str | None = None) -> JudgingStore:
    """Open an existing store; :class:`InputError` ``not-a-store`` if the file is not one (empty,
    not SQLite, not qrelkit's), ``store-damaged`` if SQLite's integrity check fails.

    ``readonly`` opens it read-only (nothing can be written, not even a header). ``timeout``:
    seconds a writer waits for the write lock before ``store-locked``, which names the holder's
    ``operation`` (default: the command line).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from qrelkit import InputError, init_store, open_store
    >>> path = Path(tempfile.mkdtemp(), "campaign.db")
    >>> init_store(path, ["1", "2"]).close()
    >>> with open_store(path) as store:
    ...     store.counts()["topics"]
    2
    >>> try:
    ...     open_store(path.with_name("missing.db"))
    ... except InputError as exc:
    ...     exc.rule
    'not-a-store'
    """
    return JudgingStore(path, timeout=timeout, synchronous=synchronous, readonly=readonly, operation=operation)
