"""The judging store: one SQLite file per campaign that never loses a judgment.

A store holds the topics of a campaign, its CAL threads (``fractional``, ``local``, ``all`` per
topic, docs/protocol.md section 1), the batches issued to assessors with their items, and an
**append-only judgments log**. Any number of processes may read and write one store at once.

Durability and concurrency
--------------------------
* WAL journal, ``synchronous=FULL``: every committed import is fsynced to the WAL before
  ``COMMIT`` returns, so it survives a process kill *and* a power cut (``NORMAL`` would survive a
  kill but could lose the last commits on power loss; a judgment costs a person minutes, an fsync
  costs milliseconds). ``synchronous="OFF"`` may be asked for in simulations.
* Every import is one ``BEGIN IMMEDIATE ... COMMIT`` transaction: all rows of all files, or none.
  ``BEGIN IMMEDIATE`` takes the write lock up front, so concurrent importers queue (``timeout``,
  default 60 s, ``--lock-timeout`` on the command line) instead of failing half-way; readers never
  block (WAL). The writer holding the lock is named in ``STORE.lock-holder`` (pid, host,
  operation, start time), so a writer that waits in vain fails with ``store-locked`` naming it.
* Before any use the file must be a non-empty SQLite file (``not-a-store``; an empty file is never
  given a header) and pass SQLite's ``PRAGMA quick_check`` (``store-damaged``; the full
  ``integrity_check`` also cross-checks every index, O(N log N), too slow to run on every open of a
  big store). Reading commands open the store read-only (``readonly=True``).
* Triggers make the log append-only (``UPDATE``/``DELETE`` abort) and refuse a second, different
  grade from one assessor for one topic and passage, whatever the code path.

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

Judgments
---------
Input rows are ``qid, docid, assessor, grade, batch_id`` — the judgments table written by
``qrelkit batch import`` or completed batch files (further columns are ignored; rows with an empty
grade are not judged yet and are skipped). Per row:

* the same (topic, passage, assessor, batch) with the same grade already in the store, or twice in
  the input: **repeated**, nothing written — importing a file twice changes nothing;
* the same (topic, passage, assessor) with a *different* grade, in the store (any batch) or
  within the input: **conflict**. Strict mode (default) imports nothing and raises
  :class:`ConflictError` listing every conflict; ``lenient=True`` skips the conflicting rows
  (every grade of an in-input conflict; the stored grade always stays) and reports them;
* the same grade for the same passage from the same assessor in another batch (e.g. a passage
  issued in two threads) is a new log row, so each thread sees it.

Further rules (strict: first one raises :class:`~qrelkit.errors.InputError` with file and line;
lenient: the row is skipped and counted): ``missing-column``, ``missing-value`` (empty qid,
docid, assessor or batch_id), ``grade-outside-scale``, ``unknown-topic`` (not in the store),
``unknown-item`` (the batch is an issued one and the passage was not in it, or it belongs to
another topic). A batch id the store does not know (e.g. ``<qid>-1`` from ``qrelkit batch make``)
is registered on first import as a ``pool`` batch shared by every thread.

Retraction (undo) and re-judgment
---------------------------------
A judgment is never deleted or updated. :meth:`JudgingStore.retract` appends a row to
``judgment_changes`` (grade NULL): from then on the judgment is out of every reading of the log
(:meth:`JudgingStore.judgments`, exports, labels, batch progress) and its item is owed again. The
same assessor judging the item again in the same batch (through the import path, so a retried
identical judgment stays one) appends another change with the new grade: the judgment is back,
with that grade. A conflict is decided on the grades in force: a retracted grade conflicts with
nothing. The original rows and every change stay in the file for audit.

Judging order and thread views
------------------------------
Judging order is batch issue order, then the item's position in the batch (the CAL rank), then
log order. A thread's view holds the shared ``pool`` batches plus the thread's own ``cal``
batches; the ``all`` thread sees every ``pool`` and ``cal`` batch of the topic (docs/protocol.md: it
uses every judgment available). ``sample`` batches (random samples for the target method) are in
no thread's sequence but are exported as qrels. Times are stored but never exported: exports are
ordered and byte-identical for the same judgments.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import shutil
import socket
import sqlite3
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.errors import InputError, disk_full, quoted
from qrelkit.io.order import qid_order
from qrelkit.io.paths import is_sqlite_file
from qrelkit.io.qrels import parse_grade
from qrelkit.io.tables import read_answer_table
from qrelkit.pooler.batches import judgments_to_qrels

STORE_FORMAT = "qrelkit-judging-store"
SCHEMA_VERSION = 3  # 2: judgment_changes (retractions, re-judgments) and the live_judgments view; 3: judgment_state
THREADS = ("fractional", "local", "all")
THREAD_STATES = ("active", "accepted", "rejected", "stopped")
BATCH_KINDS = ("cal", "pool", "sample")
BATCH_STATUSES = ("open", "complete")
INPUT_COLUMNS = ["qid", "docid", "assessor", "grade", "batch_id"]
LOG_COLUMNS = ["qid", "docid", "assessor", "grade", "batch_id", "thread", "kind", "iteration", "position"]

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


@dataclass
class ImportReport:
    """What an import did.

    ``imported``: log rows written. ``counts``: per rule — ``imported``, ``repeated`` (already
    stored, or twice in the input), ``ungraded`` (empty grade), ``conflict`` and, in lenient
    mode, the rows skipped per rule. ``conflicts``: one row per conflicting input row (qid,
    docid, assessor, grade, stored_grade — empty for a conflict within the input —, batch_id,
    file, line). ``batches_registered``: unknown batch ids registered as pool batches.
    """

    imported: int
    counts: dict[str, int]
    conflicts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CONFLICT_COLUMNS))
    batches_registered: int = 0


CONFLICT_COLUMNS = ["qid", "docid", "assessor", "grade", "stored_grade", "batch_id", "file", "line"]


#: further rules of an import (:meth:`JudgingStore.import_files`): called in the import's
#: transaction, where the rows are the temporary table ``temp._in (i, topic, passage, assessor,
#: grade, batch)``, it returns ``{i: (rule, message)}`` for the rows it refuses (strict: the
#: first one is raised with its file and line; lenient: they are skipped and counted by rule)
Vet = Callable[[sqlite3.Connection], dict[int, tuple[str, str]]]


class ConflictError(InputError):
    """A strict import found conflicting grades; nothing was written. ``report`` lists them."""

    def __init__(self, report: ImportReport):
        self.report = report
        cf = report.conflicts
        c = cf.iloc[0]
        if pd.isna(c["stored_grade"]):  # within the input: point at the row that contradicts the first
            same = cf[(cf["qid"] == c["qid"]) & (cf["docid"] == c["docid"]) & (cf["assessor"] == c["assessor"])]
            first, c = c, same.iloc[1]
            where = f"line {first['line']}" if first["file"] == c["file"] else f"{first['file']}:{first['line']}"
            other = f"grade {int(first['grade'])} at {where}"
        else:
            other = f"grade {int(c['stored_grade'])} in the store"
        more = len(cf) - 1
        msg = (f"assessor {c['assessor']} gave topic {c['qid']} passage {c['docid']} grade {int(c['grade'])} here and "
               f"{other}; nothing imported" + (f" ({more} more conflicting rows)" if more else "")
               + "; --lenient skips conflicting rows")
        line = None if pd.isna(c["line"]) else int(c["line"])
        super().__init__("conflict", msg, file=c["file"] or None, line=line)

    def __reduce__(self):
        return (ConflictError, (self.report,))


HOLDER_SUFFIX = ".lock-holder"


@dataclass
class _Rows:
    """Parsed judgment rows as plain lists (what an import's transaction writes)."""

    qid: list[str]
    docid: list[str]
    assessor: list[str]
    grade: list[int]
    batch: list[str]
    file: list[str]
    line: list[int | None]


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def _default_operation() -> str:
    args = [os.path.basename(sys.argv[0])] + [a for a in sys.argv[1:3] if not a.startswith("-")]
    return " ".join(args)


#: connections this process has open, per store file (device, inode): while one is open, the file
#: is never opened by Python itself. Closing any descriptor of a file drops *every* POSIX lock the
#: process holds on it (SQLite's shared lock included), after which another process closing its
#: last connection believes it is alone, checkpoints and deletes the WAL file under this
#: process's open connections: they would read a stale snapshot from the deleted file, and write
#: into it. So the header check of :func:`check_store_file` runs only for a file no connection of
#: this process has open (which has been checked already).
_OPEN_STORES: dict[tuple[int, int], int] = {}
_OPEN_STORES_LOCK = threading.Lock()
#: one write transaction per store file at a time among this process's threads: they queue on
#: this lock (woken at once when it is released) instead of in SQLite's busy handler, which
#: sleeps up to 100 ms between tries — the tail latency of a web server's concurrent writes
_WRITE_LOCKS: dict[tuple[int, int], threading.RLock] = {}


def _file_key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def check_store_file(path: str | os.PathLike) -> None:
    """``not-a-store`` unless ``path`` is a non-empty file with SQLite's header (checked without
    opening it with SQLite, which would write a header into an empty file)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("not-a-store", "no judging store here (create one with 'qrelkit cal init')", file=str(p))
    if p.stat().st_size == 0:
        raise InputError("not-a-store", "empty file (0 bytes), not a judging store", file=str(p))
    if not is_sqlite_file(p):
        raise InputError("not-a-store", "not a SQLite file, not a judging store", file=str(p))


def io_error(exc: BaseException, path: str | os.PathLike) -> InputError | None:
    """SQLite's error ``exc`` on the store at ``path`` when the cause is the disk, not the store:
    ``[disk-full]`` (SQLite says so, or an I/O error on a file system with less than 1 MiB free:
    the shared-memory index of a WAL store cannot grow) or ``[store-io-error]`` (another I/O
    error: the disk, permissions); else None."""
    msg = str(exc).lower()
    full = disk_full(exc, where=str(path))
    if full is not None:
        return InputError("disk-full", full.message, file=str(path))
    if "disk i/o error" not in msg:
        return None
    with contextlib.suppress(OSError):
        if shutil.disk_usage(Path(path).resolve().parent).free < (1 << 20):
            return InputError("disk-full", f"no space left on the device of the store ({exc}); nothing was changed: "
                              "free some space and run the command again", file=str(path))
    return InputError("store-io-error", f"SQLite could not read or write the store's files ({exc}): check the disk "
                      "and the permissions of its folder; the store was not found damaged", file=str(path))


@contextlib.contextmanager
def store_errors(path: str | os.PathLike) -> Iterator[None]:
    """Turn SQLite's errors on a store opened earlier into one-line :class:`InputError`:
    ``store-damaged`` (damage found while reading), ``store-locked``, or the disk's
    (:func:`io_error`)."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if _is_locked(exc):
            raise InputError("store-locked", f"the store stayed locked: {exc}", file=str(path)) from None
        err = io_error(exc, path)
        if err is not None:
            raise err from None
        raise
    except sqlite3.DatabaseError as exc:
        raise InputError("store-damaged", f"{exc}; restore the store from a backup", file=str(path)) from None


def _statements(script: str) -> list[str]:
    """The SQL statements of a schema script (split at a semicolon ending a line)."""
    return [stmt for stmt in script.split(";\n") if stmt.strip()]


def sql_filters(columns: Mapping[str, object], prefix: str = "") -> tuple[list[str], list[str]]:
    """``["col = ?", ...]`` (each after ``prefix``) and their parameters (as strings) for the
    columns whose value is not None: the WHERE clauses of an optional filter.

    >>> sql_filters({"b.topic": "1", "b.thread": None})
    (['b.topic = ?'], ['1'])
    """
    given = [(c, v) for c, v in columns.items() if v is not None]
    return [f"{prefix}{c} = ?" for c, _ in given], [str(v) for _, v in given]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def _topics_frame(topics: pd.DataFrame | Mapping[str, str] | Iterable[str] | None) -> pd.DataFrame:
    if topics is None:
        return pd.DataFrame({"qid": [], "text": []})
    if isinstance(topics, pd.DataFrame):
        df = topics
    elif isinstance(topics, Mapping):
        df = pd.DataFrame({"qid": list(topics.keys()), "text": list(topics.values())})
    else:
        ids = [str(t) for t in topics]
        df = pd.DataFrame({"qid": ids, "text": [""] * len(ids)})
    if "qid" not in df.columns:
        raise InputError("missing-column", "topics need a qid column")
    text = df["text"] if "text" in df.columns else pd.Series([""] * len(df))
    return pd.DataFrame({"qid": df["qid"].astype(str).tolist(), "text": text.fillna("").astype(str).tolist()})


class JudgingStore:
    """An open judging store (see the module documentation).

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
    ...     batch = store.issue_batch("1", None, ["p1", "p2"], kind="pool")
    ...     report = store.import_judgments(pd.DataFrame({
    ...         "qid": ["1", "1"], "docid": ["p1", "p2"], "assessor": ["ann", "ann"], "grade": [2, 0],
    ...         "batch_id": [batch, batch]}))
    ...     qrels = store.export_qrels()
    >>> batch, report.imported
    ('1/pool/0000', 2)
    >>> qrels.to_pydict()
    {'qid': ['1', '1'], 'docid': ['p1', 'p2'], 'rel': [2, 0]}
    """

    def __init__(self, path: str | os.PathLike, *, timeout: float = 60.0, synchronous: str = "FULL",
                 readonly: bool = False, operation: str | None = None, check_same_thread: bool = True,
                 _create: bool = False) -> None:
        self.path = Path(path)
        self.timeout = float(timeout)
        self.operation = operation or _default_operation()
        self._db = None
        self._key: tuple[int, int] | None = None
        existed = self.path.is_file() and self.path.stat().st_size > 0
        if synchronous.upper() not in ("FULL", "NORMAL", "OFF", "EXTRA"):
            raise InputError("bad-option", f"synchronous must be FULL, EXTRA, NORMAL or OFF, got {synchronous!r}")
        try:
            self._connect(readonly=readonly, check=not _create or existed, check_same_thread=check_same_thread)
            self._db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            if existed:
                self._check_integrity()
                self._check_meta()
            if not readonly:
                self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA temp_store = MEMORY")
            if _create:
                with self.transaction():
                    for stmt in _statements(_SCHEMA):
                        self._db.execute(stmt)
                    new = self._db.execute("SELECT 1 FROM meta WHERE key = 'format'").fetchone() is None
                    if new:
                        for stmt in _statements(_CHANGES_SCHEMA) + _statements(_LIVE_SCHEMA):
                            self._db.execute(stmt)
                    self._db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?), ('schema_version', ?)",
                                     (STORE_FORMAT, str(SCHEMA_VERSION)))
            self._check_meta()
            self._upgrade(readonly)
        except sqlite3.OperationalError as exc:
            self.close()
            if _is_locked(exc):
                raise self._locked() from None
            raise InputError("not-a-store", f"cannot open the judging store: {exc}", file=str(self.path)) from None
        except sqlite3.DatabaseError as exc:
            self.close()
            raise InputError("not-a-store", f"not a judging store: {exc}", file=str(self.path)) from None
        except InputError:
            self.close()
            raise

    def _connect(self, *, readonly: bool, check: bool, check_same_thread: bool) -> None:
        """Check the file (:func:`check_store_file`: before SQLite touches it, so a 0-byte or
        foreign file is never written; skipped while this process has a connection to it, see
        :data:`_OPEN_STORES`), connect, and count the connection as open."""
        with _OPEN_STORES_LOCK:
            key = _file_key(self.path)
            if check and (key is None or not _OPEN_STORES.get(key)):
                check_store_file(self.path)
            if readonly:
                self._db = sqlite3.connect(self.path.absolute().as_uri() + "?mode=ro", uri=True, timeout=self.timeout,
                                           isolation_level=None, check_same_thread=check_same_thread)
            else:
                self._db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                           check_same_thread=check_same_thread)
            self._key = _file_key(self.path)
            if self._key is not None:
                _OPEN_STORES[self._key] = _OPEN_STORES.get(self._key, 0) + 1

    def _check_integrity(self) -> None:
        """SQLite's ``PRAGMA quick_check`` (every page and record well formed, O(size); the full
        ``integrity_check`` also matches every index to its table, O(N log N) on big stores):
        ``store-damaged`` when it finds a problem, so a damaged store is never written."""
        try:
            rows = [r[0] for r in self._db.execute("PRAGMA quick_check(5)").fetchall()]
        except sqlite3.OperationalError as exc:
            if _is_locked(exc):
                raise
            err = io_error(exc, self.path)  # the disk, not the store: never said to be damaged
            if err is not None:
                raise err from None
            rows = [str(exc)]
        except sqlite3.DatabaseError as exc:
            rows = [str(exc)]
        if rows != ["ok"]:
            found = " ".join(ln.strip() for r in rows for ln in str(r).splitlines() if ln.strip() and "***" not in ln)
            raise InputError("store-damaged", f"SQLite's integrity check failed ({found[:200]}); nothing "
                             "written: restore the store from a backup", file=str(self.path))

    def _locked(self) -> InputError:
        """The lock-timeout error, naming the writer that holds the lock (from its holder file)."""
        who = "another process"
        with contextlib.suppress(OSError, ValueError, TypeError):
            h = json.loads(Path(f"{self.path}{HOLDER_SUFFIX}").read_text(encoding="utf-8"))
            who = f"'{h['operation']}' (pid {h['pid']} on {h['host']}, writing since {h['started']})"
        return InputError("store-locked", f"waited {self.timeout:g} s for the write lock held by {who}; try again "
                          "later or wait longer (--lock-timeout)", file=str(self.path))

    def _check_meta(self) -> None:
        try:
            meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.OperationalError:
            meta = {}
        if meta.get("format") != STORE_FORMAT:
            raise InputError("not-a-store", "not a qrelkit judging store", file=str(self.path))
        if int(meta.get("schema_version", 0)) > SCHEMA_VERSION:
            raise InputError("not-a-store", f"store schema {meta['schema_version']} is newer than this qrelkit "
                             f"({SCHEMA_VERSION})", file=str(self.path))

    def _upgrade(self, readonly: bool) -> None:
        """Bring a version-1 or -2 store to version 3 in one transaction: the changes log (version
        2), the grades in force kept by a trigger (3), the view and the conflict triggers on
        them. Read-only, a version-2 store's own view serves; a version-1 store gets a temporary
        view of its log (it has no changes)."""
        version = int(self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])
        if version >= SCHEMA_VERSION:
            return
        if readonly:
            if version < 2:
                self._db.execute(_V1_READONLY_VIEW)
            return
        with self.transaction() as db:
            if int(db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]) < SCHEMA_VERSION:
                for stmt in _OLD_LIVE:
                    db.execute(stmt)
                for stmt in _statements(_CHANGES_SCHEMA):
                    db.execute(stmt)
                db.execute(_FILL_STATE)
                for stmt in _statements(_LIVE_SCHEMA):
                    db.execute(stmt)
                db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))

    # -- plumbing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if getattr(self, "_db", None) is not None:
            self._db.close()
            self._db = None
            with _OPEN_STORES_LOCK:
                key = getattr(self, "_key", None)
                if key is not None and _OPEN_STORES.get(key):
                    _OPEN_STORES[key] -= 1
                    if not _OPEN_STORES[key]:
                        del _OPEN_STORES[key]

    def __enter__(self) -> "JudgingStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception).

        Waits up to ``timeout`` seconds for the write lock, then raises ``store-locked`` naming the
        holder. While the lock is held, ``STORE.lock-holder`` names this writer (pid, host,
        operation, start time) for the processes that wait. The writers of one process queue
        on a lock of their own first (:data:`_WRITE_LOCKS`)."""
        with _OPEN_STORES_LOCK:
            wlock = _WRITE_LOCKS.setdefault(self._key, threading.RLock()) if self._key is not None else None
        if wlock is not None and not wlock.acquire(timeout=self.timeout):
            raise self._locked()
        try:
            with self._transaction() as db:
                yield db
        except sqlite3.OperationalError as exc:  # a full disk is the disk's, not a bug: one line
            err = io_error(exc, self.path)
            if err is None:
                raise
            raise err from None
        finally:
            if wlock is not None:
                wlock.release()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if _is_locked(exc):
                raise self._locked() from None
            raise
        # the holder file is written and removed while the lock is held (so it is this writer's);
        # a waiting process that reads it half-written names "another process"
        holder = Path(f"{self.path}{HOLDER_SUFFIX}")
        with contextlib.suppress(OSError):
            fd = os.open(holder, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "operation": self.operation,
                                         "started": _now()}).encode())
            finally:
                os.close(fd)
        try:
            yield self._db
        except BaseException:
            with contextlib.suppress(OSError):
                holder.unlink()
            self._db.execute("ROLLBACK")
            raise
        with contextlib.suppress(OSError):
            holder.unlink()
        self._db.execute("COMMIT")

    def _query(self, sql: str, params: Sequence = ()) -> pd.DataFrame:
        cur = self._db.execute(sql, params)
        cols = [d[0] for d in cur.description]
        return pd.DataFrame(cur.fetchall(), columns=cols)

    # -- topics and threads --------------------------------------------------------------------

    def add_topics(self, topics: pd.DataFrame | Mapping[str, str] | Iterable[str], *,
                   threads: Sequence[str] = THREADS, collection_size: int | None = None) -> int:
        """Add topics (and their threads); returns how many topics were new.

        A topic already stored with another non-empty text is the error ``topic-conflict``.
        """
        df = _topics_frame(topics)
        bad = [t for t in threads if t not in THREADS]
        if bad:
            raise InputError("bad-option", f"unknown thread(s) {', '.join(bad)}; threads are {', '.join(THREADS)}")
        if df["qid"].duplicated().any():
            raise InputError("duplicate-topic", f"topic {df.loc[df['qid'].duplicated(), 'qid'].iloc[0]} given twice")
        with self.transaction() as db:
            stored = dict(db.execute("SELECT qid, text FROM topics").fetchall())
            for q, t in zip(df["qid"], df["text"]):
                if q in stored and t and stored[q] and stored[q] != t:
                    raise InputError("topic-conflict", f"topic {q} is stored with another text")
            new = [(q, t) for q, t in zip(df["qid"], df["text"]) if q not in stored]
            db.executemany("INSERT INTO topics (qid, text) VALUES (?, ?)", new)
            db.executemany("UPDATE topics SET text = ? WHERE qid = ? AND text = ''",
                           [(t, q) for q, t in zip(df["qid"], df["text"]) if q in stored and t])
            db.executemany("INSERT OR IGNORE INTO threads (topic, name, collection_size) VALUES (?, ?, ?)",
                           [(q, th, collection_size) for q in df["qid"] for th in threads])
        return len(new)

    def topics(self) -> pd.DataFrame:
        """``qid, text`` in natural topic order."""
        df = self._query("SELECT qid, text FROM topics")
        return self._order(df)

    def threads(self, topic: str | None = None) -> pd.DataFrame:
        """``qid, thread, state, reason, collection_size``: per topic (natural order) and thread
        (fractional, local, all)."""
        df = self._query("SELECT topic AS qid, name AS thread, state, reason, collection_size FROM threads"
                         + (" WHERE topic = ?" if topic is not None else ""), (topic,) if topic is not None else ())
        df["_t"] = df["thread"].map({t: i for i, t in enumerate(THREADS)})
        return self._order(df, extra=["_t"]).drop(columns="_t")

    def set_thread_state(self, topic: str, thread: str, state: str, reason: str = "", *,
                         collection_size: int | None = None) -> None:
        """Record a thread's state (``active``, ``accepted``, ``rejected``, ``stopped``) and why."""
        if state not in THREAD_STATES:
            raise InputError("bad-option", f"thread state must be one of {', '.join(THREAD_STATES)}, got {state!r}")
        with self.transaction() as db:
            cur = db.execute("UPDATE threads SET state = ?, reason = ?, collection_size = COALESCE(?, collection_size)"
                             " WHERE topic = ? AND name = ?", (state, reason, collection_size, str(topic), thread))
            if cur.rowcount == 0:
                raise InputError("unknown-thread", f"topic {topic} has no thread {thread!r}")

    # -- batches -------------------------------------------------------------------------------

    def issue_batch(self, topic: str, thread: str | None, passages: Sequence[str], *, kind: str = "cal",
                    iteration: int | None = None, batch_id: str | None = None) -> str:
        """Record a batch issued to assessors, its items in the given order; returns its id.

        ``thread`` is None for a batch shared by every thread (``pool``) and for ``sample``
        batches. ``iteration`` defaults to one more than the topic's and thread's last batch of
        this kind (0 first). The id defaults to ``<topic>/<thread or kind>/<iteration>`` with the
        iteration zero-padded to four digits.
        """
        topic = str(topic)
        if kind not in BATCH_KINDS:
            raise InputError("bad-option", f"batch kind must be one of {', '.join(BATCH_KINDS)}, got {kind!r}")
        if kind == "cal" and thread not in THREADS:
            raise InputError("bad-option", f"a cal batch needs a thread ({', '.join(THREADS)}), got {thread!r}")
        items = [str(p) for p in passages]
        if len(set(items)) != len(items):
            raise InputError("duplicate-item", f"a batch for topic {topic} lists a passage twice")
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM topics WHERE qid = ?", (topic,)).fetchone() is None:
                raise InputError("unknown-topic", f"topic {topic} is not in the store")
            if iteration is None:
                row = db.execute("SELECT MAX(iteration) FROM batches WHERE topic = ? AND thread IS ? AND kind = ?",
                                 (topic, thread, kind)).fetchone()
                iteration = 0 if row[0] is None else int(row[0]) + 1
            bid = batch_id or f"{topic}/{thread or kind}/{iteration:04d}"
            if db.execute("SELECT 1 FROM batches WHERE id = ?", (bid,)).fetchone() is not None:
                raise InputError("duplicate-batch", f"batch {bid} already exists")
            db.execute("INSERT INTO batches (id, topic, thread, iteration, kind, created, status) VALUES (?, ?, ?, ?, ?, ?, 'open')",
                       (bid, topic, thread, iteration, kind, _now()))
            db.executemany("INSERT INTO batch_items (batch, position, passage) VALUES (?, ?, ?)",
                           [(bid, i + 1, p) for i, p in enumerate(items)])
        return bid

    def batches(self, topic: str | None = None, thread: str | None = None, *, counts: bool = True) -> pd.DataFrame:
        """Issued and registered batches in issue order: ``batch_id, qid, thread, iteration, kind,
        status, items, judged`` (distinct judged items; without those two with ``counts=False``,
        which spares a count over every batch's items and judgments)."""
        where, params = sql_filters({"b.topic": topic, "b.thread": thread})
        sql = ("SELECT b.id AS batch_id, b.topic AS qid, b.thread, b.iteration, b.kind, b.status"
               + (", (SELECT COUNT(*) FROM batch_items i WHERE i.batch = b.id) AS items,"
                  " (SELECT COUNT(DISTINCT j.topic || char(31) || j.passage) FROM live_judgments j WHERE j.batch = b.id) AS judged"
                  if counts else "") + " FROM batches b" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY b.seq")
        df = self._query(sql, params)
        df["iteration"] = df["iteration"].astype("Int64")
        return df

    # -- judgments in ----------------------------------------------------------------------------

    def import_judgments(self, judgments: pd.DataFrame, *, source: str = "api", lenient: bool = False,
                         scale: Iterable[int] | None = (0, 1, 2, 3),
                         on_transaction: Callable[[str], None] | None = None) -> ImportReport:
        """Append judgments (columns ``qid, docid, assessor, grade, batch_id``) in one transaction.

        See the module documentation for the rules. ``on_transaction`` is called with
        ``"begin"`` once the write lock is held and ``"commit"`` just before ``COMMIT`` (progress
        reporting; the durability tests kill the process there).
        """
        df = judgments
        missing = [c for c in INPUT_COLUMNS if c not in df.columns]
        if missing:
            raise InputError("missing-column", f"judgments lack column(s) {', '.join(missing)}", file=source)
        rows = pd.DataFrame({
            "qid": _text(df["qid"]), "docid": _text(df["docid"]), "assessor": _text(df["assessor"]),
            "grade": df["grade"].to_numpy(), "batch_id": _text(df["batch_id"]),
            "file": df["_file"].to_numpy() if "_file" in df.columns else source,
            "line": df["_line"].to_numpy() if "_line" in df.columns else np.arange(1, len(df) + 1),
        })
        counts: dict[str, int] = {}
        return self._import_rows(rows, counts, source=source, lenient=lenient, scale=scale, on_transaction=on_transaction)

    def import_files(self, files: Sequence[str | os.PathLike], *, lenient: bool = False,
                     scale: Iterable[int] | None = (0, 1, 2, 3),
                     on_transaction: Callable[[str], None] | None = None,
                     progress: Callable[[int], None] | None = None, vet: Vet | None = None) -> ImportReport:
        """Import judgments tables / completed batch files (CSV, TSV, JSONL, Parquet), every
        file in one transaction: all of them or nothing. ``progress(1)`` is called after each
        file is read (before the write lock is taken). ``vet``: further rules a row must meet,
        checked in the transaction (:data:`Vet`)."""
        frames, counts = [], {}
        for f in files:
            frames.append(read_judgment_file(f, counts=counts, lenient=lenient, scale=scale))
            if progress is not None:
                progress(1)
        rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=INPUT_COLUMNS + ["file", "line"])
        source = ",".join(str(f) for f in files)
        return self._import_rows(rows, counts, source=None, lenient=lenient, scale=None, on_transaction=on_transaction,
                                 default_source=source, vet=vet)

    def import_judgment(self, qid: str, docid: str, assessor: str, grade: int, batch_id: str, *,
                        source: str = "api", scale: Iterable[int] | None = (0, 1, 2, 3)) -> ImportReport:
        """One judgment through the import path: the rules and the one transaction of
        :meth:`import_judgments` (strict), without building tables — what a web request writes.

        >>> import tempfile
        >>> from pathlib import Path
        >>> from qrelkit import JudgingStore, init_store
        >>> path = Path(tempfile.mkdtemp(), "one.db")
        >>> init_store(path, ["1"]).close()
        >>> with JudgingStore(path) as store:
        ...     b = store.issue_batch("1", None, ["p1"], kind="pool")
        ...     first = store.import_judgment("1", "p1", "ann", 2, b).imported
        ...     again = store.import_judgment("1", "p1", "ann", 2, b).counts["repeated"]
        >>> first, again
        (1, 1)
        """
        rows = _Rows([str(qid)], [str(docid)], [str(assessor)], [_grade(grade)], [str(batch_id)], [source], [1])
        if rows.grade[0] is None:
            raise InputError("grade-outside-scale", f"grade {grade!r} is not an integer", file=source, line=1)
        if scale is not None and rows.grade[0] not in {int(s) for s in scale}:
            raise InputError("grade-outside-scale", f"grade {rows.grade[0]} is outside the scale {sorted(scale)}",
                             file=source, line=1)
        for col in ("qid", "docid", "assessor", "batch"):
            if getattr(rows, col)[0] == "":
                raise InputError("missing-value", f"empty {col if col != 'batch' else 'batch_id'}", file=source, line=1)
        return self._write_rows(rows, [False], {"repeated": 0}, source=source, lenient=False, on_transaction=None)

    def _import_rows(self, rows: pd.DataFrame, counts: dict[str, int], *, source: str | None, lenient: bool,
                     scale: Iterable[int] | None, on_transaction, default_source: str = "api",
                     vet: Vet | None = None) -> ImportReport:
        def fail(rule: str, msg: str, i: int) -> None:
            if not lenient:
                ln = rows["line"].iat[i]
                raise InputError(rule, msg, file=str(rows["file"].iat[i]), line=None if pd.isna(ln) else int(ln))
            counts[rule] = counts.get(rule, 0) + 1

        allowed = None if scale is None else {int(s) for s in scale}
        keep = np.ones(len(rows), bool)
        grades = np.zeros(len(rows), np.int64)
        if scale is not None or not pd.api.types.is_integer_dtype(rows["grade"]):
            for i, g in enumerate(rows["grade"].tolist()):
                parsed = _grade(g)
                if parsed is None:
                    if g is None or (isinstance(g, float) and np.isnan(g)) or (isinstance(g, str) and not g.strip()) or g is pd.NA:
                        counts["ungraded"] = counts.get("ungraded", 0) + 1
                    else:
                        fail("grade-outside-scale", f"grade {g!r} is not an integer", i)
                    keep[i] = False
                elif allowed is not None and parsed not in allowed:
                    fail("grade-outside-scale", f"grade {parsed} is outside the scale {sorted(allowed)}", i)
                    keep[i] = False
                else:
                    grades[i] = parsed
        else:
            grades = rows["grade"].to_numpy().astype(np.int64)
        rows = rows.assign(grade=grades)
        for col in ("qid", "docid", "assessor", "batch_id"):
            empty = np.array([v == "" for v in rows[col].tolist()], bool)
            for i in np.flatnonzero(empty & keep):
                fail("missing-value", f"empty {col}", int(i))
                keep[i] = False
        rows = rows[keep].reset_index(drop=True)
        # identical rows twice in the input count once
        n0 = len(rows)
        rows = rows.drop_duplicates(["qid", "docid", "assessor", "batch_id", "grade"], keep="first").reset_index(drop=True)
        counts["repeated"] = counts.get("repeated", 0) + n0 - len(rows)
        # conflicts within the input: one assessor, one item, two grades
        g = rows.groupby(["qid", "docid", "assessor"], sort=False)["grade"].transform("nunique")
        inner = (g > 1).tolist()
        lines = [None if pd.isna(x) else x for x in rows["line"].tolist()]
        plain = _Rows(rows["qid"].tolist(), rows["docid"].tolist(), rows["assessor"].tolist(),
                      rows["grade"].astype(int).tolist(), rows["batch_id"].tolist(), rows["file"].tolist(), lines)
        return self._write_rows(plain, inner, counts, source=source or default_source, per_row_source=source is None,
                                lenient=lenient, on_transaction=on_transaction, vet=vet)

    def _write_rows(self, rows: "_Rows", inner: list[bool], counts: dict[str, int], *, source: str,
                    lenient: bool, on_transaction, per_row_source: bool = False, vet: Vet | None = None) -> ImportReport:
        """The transaction of every import: checked, parsed rows (``inner``: conflicting within
        the input) against the store — unknown topics and items, conflicts with the grades in
        force, repeats, re-judgments of retracted judgments — then written, batches completed."""
        def fail(rule: str, msg: str, i: int) -> None:
            if not lenient:
                raise InputError(rule, msg, file=str(rows.file[i]), line=None if rows.line[i] is None else int(rows.line[i]))
            counts[rule] = counts.get(rule, 0) + 1

        n = len(rows.qid)
        with self.transaction() as db:
            if on_transaction is not None:
                on_transaction("begin")
            db.execute("CREATE TEMP TABLE IF NOT EXISTS _in (i INTEGER PRIMARY KEY, topic TEXT, passage TEXT,"
                       " assessor TEXT, grade INTEGER, batch TEXT)")
            db.execute("DELETE FROM temp._in")
            db.executemany("INSERT INTO temp._in VALUES (?, ?, ?, ?, ?, ?)",
                           zip(range(n), rows.qid, rows.docid, rows.assessor, rows.grade, rows.batch))
            # topics and batches
            unknown_topic = {r[0] for r in db.execute("SELECT DISTINCT i FROM temp._in WHERE topic NOT IN (SELECT qid FROM topics)")}
            issued = {r[0]: (r[1], r[2]) for r in db.execute(
                "SELECT b.id, b.topic, (SELECT COUNT(*) FROM batch_items i WHERE i.batch = b.id) FROM batches b"
                " WHERE b.id IN (SELECT DISTINCT batch FROM temp._in)")}
            not_item = {r[0] for r in db.execute(
                "SELECT n.i FROM temp._in n JOIN batches b ON b.id = n.batch WHERE"
                " (b.topic IS NOT NULL AND b.topic <> n.topic) OR ((SELECT COUNT(*) FROM batch_items x WHERE x.batch = b.id) > 0"
                " AND NOT EXISTS (SELECT 1 FROM batch_items x WHERE x.batch = b.id AND x.passage = n.passage))")}
            stored = {r[0]: r[1] for r in db.execute(
                "SELECT n.i, MIN(j.grade) FROM temp._in n JOIN live_judgments j ON j.topic = n.topic AND j.passage = n.passage"
                " AND j.assessor = n.assessor AND j.grade <> n.grade GROUP BY n.i")}
            retracted = {r[0]: r[1] for r in db.execute(
                "SELECT n.i, j.seq FROM temp._in n JOIN judgments j ON j.topic = n.topic AND j.passage = n.passage"
                " AND j.assessor = n.assessor AND j.batch = n.batch JOIN judgment_state s ON s.judgment = j.seq"
                " WHERE s.grade IS NULL")}
            already = {r[0] for r in db.execute(
                "SELECT n.i FROM temp._in n JOIN live_judgments j ON j.topic = n.topic AND j.passage = n.passage"
                " AND j.assessor = n.assessor AND j.batch = n.batch AND j.grade = n.grade")}
            vetted = vet(db) if vet is not None else {}
            ok = [True] * n
            for i in range(n):
                if i in vetted:
                    fail(*vetted[i], i)
                    ok[i] = False
                elif i in unknown_topic:
                    fail("unknown-topic", f"topic {rows.qid[i]} is not in the store", i)
                    ok[i] = False
                elif i in not_item:
                    fail("unknown-item", f"topic {rows.qid[i]} passage {rows.docid[i]} was not issued in batch "
                         f"{rows.batch[i]}", i)
                    ok[i] = False
            conflict = [ok[i] and (inner[i] or i in stored) for i in range(n)]
            ci = [i for i in range(n) if conflict[i]]
            conflicts = pd.DataFrame({"qid": [rows.qid[i] for i in ci], "docid": [rows.docid[i] for i in ci],
                                      "assessor": [rows.assessor[i] for i in ci], "grade": [rows.grade[i] for i in ci],
                                      "stored_grade": pd.array([stored.get(i) for i in ci], dtype="Int64"),
                                      "batch_id": [rows.batch[i] for i in ci], "file": [rows.file[i] for i in ci],
                                      "line": [rows.line[i] for i in ci]}, columns=CONFLICT_COLUMNS)
            if ci:
                counts["conflict"] = counts.get("conflict", 0) + len(ci)
                if not lenient:
                    raise ConflictError(ImportReport(0, dict(counts), conflicts))
            rep = [ok[i] and not conflict[i] and i in already for i in range(n)]
            counts["repeated"] = counts.get("repeated", 0) + sum(rep)
            write = [i for i in range(n) if ok[i] and not conflict[i] and not rep[i]]
            # register unknown batches (shared pool batches), in order of first appearance: a
            # batch's topic when it has exactly one
            tops: dict[str, set[str]] = {}
            for i in write:
                if rows.batch[i] not in issued:
                    tops.setdefault(rows.batch[i], set()).add(rows.qid[i])
            now = _now()
            if tops:
                db.executemany("INSERT INTO batches (id, topic, thread, iteration, kind, created, status)"
                               " VALUES (?, ?, NULL, NULL, 'pool', ?, 'complete')",
                               [(b, next(iter(t)) if len(t) == 1 else None, now) for b, t in tops.items()])
            src = [str(rows.file[i]) if per_row_source else source for i in write]
            again = [retracted.get(i) for i in write]  # a retracted judgment judged again
            db.executemany("INSERT INTO judgments (topic, passage, grade, assessor, time, batch, source) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           [(rows.qid[i], rows.docid[i], rows.grade[i], rows.assessor[i], now, rows.batch[i], so)
                            for i, so, j in zip(write, src, again) if j is None])
            db.executemany("INSERT INTO judgment_changes (judgment, grade, time, source) VALUES (?, ?, ?, ?)",
                           [(j, rows.grade[i], now, so) for i, so, j in zip(write, src, again) if j is not None])
            # batches whose every item is judged are complete
            touched = [b for b in dict.fromkeys(rows.batch[i] for i in write) if b in issued and issued[b][1] > 0]
            db.executemany("UPDATE batches SET status = 'complete' WHERE id = ? AND status = 'open' AND NOT EXISTS"
                           " (SELECT 1 FROM batch_items i WHERE i.batch = batches.id AND NOT EXISTS"
                           " (SELECT 1 FROM live_judgments j WHERE j.batch = i.batch AND j.passage = i.passage))", [(b,) for b in touched])
            db.execute("DELETE FROM temp._in")
            if on_transaction is not None:
                on_transaction("commit")
        counts["imported"] = len(write)
        return ImportReport(len(write), dict(sorted(counts.items())), conflicts, len(tops))

    # -- retraction (undo) -----------------------------------------------------------------------

    def retract(self, topic: str, passage: str, assessor: str, batch: str, *, source: str = "undo") -> int | None:
        """Retract the judgment in force of ``assessor`` for ``topic``/``passage`` in ``batch``: one
        row appended to the changes log (see the module documentation), the batch open again when
        an item of it is left without a judgment. Returns the grade retracted, or None when there
        was none in force (retracting twice changes nothing)."""
        with self.transaction() as db:
            row = db.execute("SELECT seq, grade FROM live_judgments WHERE topic = ? AND passage = ? AND assessor = ?"
                             " AND batch = ?", (str(topic), str(passage), str(assessor), str(batch))).fetchone()
            if row is None:
                return None
            db.execute("INSERT INTO judgment_changes (judgment, grade, time, source) VALUES (?, NULL, ?, ?)",
                       (row[0], _now(), source))
            db.execute("UPDATE batches SET status = 'open' WHERE id = ? AND status = 'complete' AND EXISTS"
                       " (SELECT 1 FROM batch_items i WHERE i.batch = batches.id AND NOT EXISTS"
                       " (SELECT 1 FROM live_judgments j WHERE j.batch = i.batch AND j.passage = i.passage))", (str(batch),))
        return int(row[1])

    def change_judgments(self, items: Iterable[tuple], *, source: str,
                         then: Callable[[sqlite3.Connection], None] | None = None) -> dict[str, int]:
        """Change the grade in force of items, in one transaction: ``items`` are ``(topic, passage,
        assessor, grade, file, line)`` (``grade`` None: retract). Every judgment in force of the
        item (its copies in other batches too) takes the new grade — a retracted one is brought
        back — or is retracted, by rows appended to ``judgment_changes`` (source ``source``);
        batches are marked open or complete again as their items are. ``[unknown-judgment]``
        (strict: nothing changed) when the assessor never judged the item. ``then(db)`` runs in
        the transaction when anything changed. Returns ``changed`` and ``unchanged`` (judgments)."""
        now, changed, unchanged, touched = _now(), 0, 0, set()
        with self.transaction() as db:
            for topic, passage, assessor, grade, file, line in items:
                key = (str(topic), str(passage), str(assessor))
                rows = db.execute("SELECT j.seq, j.batch, CASE WHEN s.judgment IS NULL THEN j.grade ELSE s.grade END"
                                  " FROM judgments j LEFT JOIN judgment_state s ON s.judgment = j.seq WHERE j.topic = ?"
                                  " AND j.passage = ? AND j.assessor = ? ORDER BY j.seq", key).fetchall()
                if not rows:
                    raise InputError("unknown-judgment", f"{assessor} never judged passage {passage} of topic {topic}"
                                     " ('qrelkit campaign judgments list' shows the judgments)", file=file, line=line)
                live = [r for r in rows if r[2] is not None]
                todo = (live if live else rows) if grade is not None else live  # a retracted item is set back
                if all(r[2] == grade for r in todo):
                    unchanged += len(todo)
                    continue
                if grade is not None:  # retract first: two grades of one item are never in force at once
                    db.executemany("INSERT INTO judgment_changes (judgment, grade, time, source) VALUES (?, NULL, ?, ?)",
                                   [(r[0], now, source) for r in todo if r[2] is not None])
                db.executemany("INSERT INTO judgment_changes (judgment, grade, time, source) VALUES (?, ?, ?, ?)",
                               [(r[0], grade, now, source) for r in todo if grade is not None or r[2] is not None])
                changed += len(todo)
                touched.update(r[1] for r in todo)
            for b in sorted(touched):
                db.execute("UPDATE batches SET status = CASE WHEN EXISTS (SELECT 1 FROM batch_items i WHERE i.batch ="
                           " batches.id AND NOT EXISTS (SELECT 1 FROM live_judgments j WHERE j.batch = i.batch AND"
                           " j.passage = i.passage)) THEN 'open' ELSE 'complete' END WHERE id = ? AND EXISTS"
                           " (SELECT 1 FROM batch_items i WHERE i.batch = batches.id)", (b,))
            if changed and then is not None:
                then(db)
        return {"changed": changed, "unchanged": unchanged}

    def judgment_log(self, *, topic: str | None = None, assessor: str | None = None, batch: str | None = None,
                     history: bool = False) -> pd.DataFrame:
        """The judgments in force (``seq, qid, docid, assessor, grade, batch_id, source, time``) of
        ``topic``/``assessor``/``batch`` when given, in log order; with ``history``, every judgment
        and each of its changes (``change``: 0 for the judgment, then 1, 2, ...; ``grade`` None for
        a retraction), in log order."""
        where, params = sql_filters({"j.topic": topic, "j.assessor": assessor, "j.batch": batch}, prefix=" AND ")
        cols = ("j.seq, j.topic AS qid, j.passage AS docid, j.assessor, {grade} AS grade, j.batch AS batch_id, "
                "{source} AS source, {time} AS time")
        if not history:
            return self._query(f"SELECT {cols.format(grade='j.grade', source='j.source', time='j.time')} FROM"
                               " live_judgments j WHERE 1 = 1" + "".join(where) + " ORDER BY j.seq", params)
        base = cols.format(grade="j.grade", source="j.source", time="j.time") + ", 0 AS change"
        chg = (cols.format(grade="c.grade", source="c.source", time="c.time")
               + ", ROW_NUMBER() OVER (PARTITION BY c.judgment ORDER BY c.seq) AS change")
        df = self._query(f"SELECT * FROM (SELECT {base} FROM judgments j WHERE 1 = 1{''.join(where)} UNION ALL"
                         f" SELECT {chg} FROM judgment_changes c JOIN judgments j ON j.seq = c.judgment"
                         f" WHERE 1 = 1{''.join(where)}) ORDER BY seq, change", params + params)
        df["grade"] = df["grade"].astype("Int64")
        return df

    def last_judgment(self, assessor: str, topic: str | None = None, *, source: str | None = None) -> dict | None:
        """The judgment in force that ``assessor`` made (or made again) last, of ``topic`` when
        given and from ``source`` when given: ``qid, docid, grade, batch_id, time`` — or None."""
        where, params = sql_filters({"l.assessor": assessor, "l.topic": topic, "l.source": source})
        row = self._db.execute(
            "SELECT l.topic, l.passage, l.grade, l.batch, MAX(l.time, COALESCE((SELECT MAX(c.time) FROM judgment_changes c"
            " WHERE c.judgment = l.seq), '')) AS t FROM live_judgments l WHERE " + " AND ".join(where)
            + " ORDER BY t DESC, l.seq DESC LIMIT 1", params).fetchone()
        if row is None:
            return None
        return {"qid": row[0], "docid": row[1], "grade": int(row[2]), "batch_id": row[3], "time": row[4]}

    # -- judgments out ---------------------------------------------------------------------------

    def judgments(self, topic: str | None = None, thread: str | None = None, *,
                  include_sample: bool = False, max_batch_seq: int | None = None) -> pd.DataFrame:
        """The judgment log in judging order (see module docs): :data:`LOG_COLUMNS` plus
        ``batch_seq`` (issue order of the batch). ``thread`` None or ``"all"``: every pool and
        cal judgment; ``"local"``/``"fractional"``: shared pool batches plus that thread's.
        ``include_sample`` adds the sample batches; ``max_batch_seq`` keeps batches issued up to
        that one (a replay's prefix)."""
        where, params = [], []
        if topic is not None:
            where.append("j.topic = ?")
            params.append(str(topic))
        if thread not in (None, "all"):
            if thread not in THREADS:
                raise InputError("bad-option", f"thread must be one of {', '.join(THREADS)}, got {thread!r}")
            where.append("(b.kind = 'pool' OR (b.kind = 'cal' AND b.thread = ?)" + (" OR b.kind = 'sample')" if include_sample else ")"))
            params.append(thread)
        elif not include_sample:
            where.append("b.kind <> 'sample'")
        if max_batch_seq is not None:
            where.append("b.seq <= ?")
            params.append(int(max_batch_seq))
        sql = ("SELECT j.topic AS qid, j.passage AS docid, j.assessor, j.grade, j.batch AS batch_id, b.thread, b.kind,"
               " b.iteration, i.position, b.seq AS batch_seq FROM live_judgments j JOIN batches b ON b.id = j.batch"
               " LEFT JOIN batch_items i ON i.batch = j.batch AND i.passage = j.passage"
               + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY b.seq, i.position IS NULL, i.position, j.seq")
        df = self._query(sql, params)
        df["grade"] = df["grade"].astype(np.int32)
        df["iteration"] = df["iteration"].astype("Int64")
        df["position"] = df["position"].astype("Int64")
        return df

    def issued_passages(self, topic: str, thread: str | None = None, *, max_batch_seq: int | None = None) -> list[str]:
        """Passages issued in the thread's view (pool batches and the thread's cal batches;
        every cal batch of the topic for ``all``), judged or not, in issue order."""
        sql = ("SELECT i.passage FROM batch_items i JOIN batches b ON b.id = i.batch WHERE b.topic = ? AND b.kind <> 'sample'")
        params: list = [str(topic)]
        if thread not in (None, "all"):
            sql += " AND (b.kind = 'pool' OR b.thread = ?)"
            params.append(thread)
        if max_batch_seq is not None:
            sql += " AND b.seq <= ?"
            params.append(int(max_batch_seq))
        rows = self._db.execute(sql + " ORDER BY b.seq, i.position", params).fetchall()
        return list(dict.fromkeys(r[0] for r in rows))

    def issued_items(self, topic: str | None = None) -> pd.DataFrame:
        """Every item of every issued batch but the samples (of ``topic``, or of every topic), in
        issue order: ``qid, thread, kind, passage`` (the issued passages of all threads at once;
        see :meth:`issued_passages`)."""
        return self._query("SELECT b.topic AS qid, b.thread, b.kind, i.passage FROM batch_items i JOIN batches b"
                           " ON b.id = i.batch WHERE b.kind <> 'sample'" + (" AND b.topic = ?" if topic is not None else "")
                           + " ORDER BY b.seq, i.position", () if topic is None else (str(topic),))

    def judged_passages(self, topic: str, thread: str | None = None) -> set[str]:
        """Every passage of ``topic`` with at least one judgment in the thread's view (samples
        included: they are judged too)."""
        return set(self.judgments(topic, thread, include_sample=True)["docid"])

    def labels(self, topic: str, thread: str | None = None, *, combine: Any = "median_high") -> pd.DataFrame:
        """One grade per judged passage of the thread's view, in judging order (first judgment):
        ``docid, grade, batch_id, batch_seq``; several assessors' grades combined by ``combine``
        (median_high | max | min, or a rule object: :func:`combined_grades`)."""
        return combine_log(self.judgments(topic, thread), combine=combine)

    def export_qrels(self, *, combine: Any = "median_high", thread: str = "all") -> pa.Table:
        """Qrels (``qid, docid, rel``, qrels order) from the thread's view; ``all`` exports every
        judgment in the store, samples included. Several assessors' grades are combined by
        ``combine`` (:func:`combined_grades`)."""
        log = self.judgments(None, None if thread == "all" else thread, include_sample=True)
        return combined_grades(log[["qid", "docid", "assessor", "grade", "batch_id"]], combine)

    def export_log(self, *, thread: str = "all") -> pa.Table:
        """The judgment log (no times, no sources) in topic order, then judging order: columns
        ``qid, docid, assessor, grade, batch_id, thread, kind, iteration, position`` — importable
        into another store (``qrelkit cal import``)."""
        log = self.judgments(None, None if thread == "all" else thread, include_sample=True)
        log = self._order(log, extra=["batch_seq"])[LOG_COLUMNS]
        schema = pa.schema([(c, pa.int32() if c == "grade" else pa.int64() if c in ("iteration", "position") else pa.string())
                            for c in LOG_COLUMNS])
        return pa.Table.from_pandas(log, schema=schema, preserve_index=False)

    def counts(self) -> dict[str, int]:
        """Rows per table (topics, threads, batches, batch_items, judgments)."""
        return {t: int(self._db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
                for t in ("topics", "threads", "batches", "batch_items", "judgments")}

    @staticmethod
    def _order(df: pd.DataFrame, extra: Sequence[str] = ()) -> pd.DataFrame:
        """Rows in natural topic order, then by the ``extra`` columns (numeric), stably."""
        if len(df) == 0:
            return df.reset_index(drop=True)
        codes, uniques = pd.factorize(df["qid"], sort=False)
        rank = {q: i for i, q in enumerate(qid_order(uniques.tolist()))}
        key = np.array([rank[q] for q in uniques.tolist()], np.int64)[codes]
        order = np.lexsort(tuple(df[c].to_numpy() for c in reversed(list(extra))) + (key,))
        return df.take(order).reset_index(drop=True)


def combined_grades(judgments: pd.DataFrame, combine: Any = "median_high") -> pa.Table:
    """Qrels (``qid, docid, rel``) from judgments (``qid, docid, assessor, grade``), one grade per
    (topic, passage). ``combine``: a rule name — ``median_high``, ``max``, ``min``
    (:func:`qrelkit.pooler.batches.judgments_to_qrels`) — or a rule object with a
    ``grades(judgments) -> qrels table`` method, such as :class:`qrelkit.labels.VoteRule` (the
    labels' majority vote)."""
    if isinstance(combine, str):
        return judgments_to_qrels(judgments, combine=combine)
    if not callable(getattr(combine, "grades", None)):
        raise InputError("bad-option", f"combine must be a rule name or have a grades() method, got {combine!r}")
    return combine.grades(judgments)


def combine_log(log: pd.DataFrame, *, combine: Any = "median_high") -> pd.DataFrame:
    """One row per (topic, passage) of a judgment log, in the order of its first judgment:
    ``qid, docid, grade, batch_id, batch_seq`` (the batch of the first judgment); several
    judgments of a passage combined by ``combine`` (:func:`combined_grades`)."""
    cols = ["qid", "docid", "grade", "batch_id", "batch_seq"]
    if len(log) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("qid", "docid", "batch_id") else np.int64) for c in cols})
    first = log.drop_duplicates(["qid", "docid"], keep="first")
    if len(first) == len(log):  # one judgment per passage: nothing to combine
        return first[cols].reset_index(drop=True)
    if len(log.drop_duplicates(["qid", "docid", "assessor"])) == len(first):
        # one assessor per passage (its judgment copied into other batches: the same grade, the
        # store refuses another): every rule gives that grade
        return first[cols].reset_index(drop=True)
    q = combined_grades(log[["qid", "docid", "assessor", "grade", "batch_id"]], combine)
    grade = {(a, b): c for a, b, c in zip(q["qid"].to_pylist(), q["docid"].to_pylist(), q["rel"].to_pylist())}
    first = first.assign(grade=[grade[(a, b)] for a, b in zip(first["qid"], first["docid"])])
    return first[cols].reset_index(drop=True)


def _text(col: pd.Series) -> np.ndarray:
    """Identifiers as stripped strings; missing values become ``""`` (rule ``missing-value``)."""
    return np.array(["" if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else str(v).strip()
                     for v in col.tolist()], dtype=object)


def _grade(g) -> int | None:
    """An integer grade from a cell (``2``, ``"2"``, ``"2.0"``); None when empty or not integral."""
    if g is None or g is pd.NA:
        return None
    if isinstance(g, (int, np.integer)) and not isinstance(g, bool):
        return int(g)
    if isinstance(g, (float, np.floating)):
        return int(g) if np.isfinite(g) and g == int(g) else None
    s = str(g).strip()
    if not s:
        return None
    return parse_grade(s)


def read_judgment_file(path: str | os.PathLike, *, counts: dict[str, int] | None = None, lenient: bool = False,
                       scale: Iterable[int] | None = (0, 1, 2, 3)) -> pd.DataFrame:
    """Read a judgments table or completed batch file (CSV, TSV, JSONL, Parquet) in file order.

    Returns ``qid, docid, assessor, grade (int), batch_id, file, line``; rows with an empty grade
    are skipped (``counts['ungraded']``). Rules: ``missing-column``, ``grade-outside-scale``
    (strict: raised with file and line; lenient: counted and skipped).
    """
    counts = {} if counts is None else counts
    p = Path(path)
    df, offset = read_answer_table(p, INPUT_COLUMNS, what="judgments", lacks="judgments need column(s)")
    allowed = None if scale is None else {int(s) for s in scale}
    keep, grades = [], []
    for i, g in enumerate(df["grade"].tolist()):
        raw = "" if g is None or g is pd.NA or (isinstance(g, float) and np.isnan(g)) else str(g).strip()
        if raw == "":
            counts["ungraded"] = counts.get("ungraded", 0) + 1
            continue
        v = _grade(raw)
        if v is None or (allowed is not None and v not in allowed):
            msg = f"grade {quoted(raw)} is not an integer" if v is None else f"grade {v} is outside the scale {sorted(allowed)}"
            if not lenient:
                raise InputError("grade-outside-scale", msg, file=str(p), line=i + offset)
            counts["grade-outside-scale"] = counts.get("grade-outside-scale", 0) + 1
            continue
        keep.append(i)
        grades.append(v)
    out = df.iloc[keep]
    return pd.DataFrame({
        "qid": _text(out["qid"]), "docid": _text(out["docid"]), "assessor": _text(out["assessor"]),
        "grade": np.asarray(grades, np.int64), "batch_id": _text(out["batch_id"]), "file": str(p),
        "line": np.asarray(keep, np.int64) + offset,
    })


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
    ...     store.topics().to_dict("list")
    {'qid': ['1'], 'text': ['black bear attacks']}
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    store = JudgingStore(p, synchronous=synchronous, timeout=timeout, operation=operation, _create=True)
    if topics is not None:
        try:
            store.add_topics(topics, threads=threads, collection_size=collection_size)
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
