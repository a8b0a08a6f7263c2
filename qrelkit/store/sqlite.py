"""The SQLite file under a store: one connection, its transactions and locks, and SQLite's errors
as one-line :class:`~qrelkit.errors.InputError`.

A store file (a judging store, a campaign store) is one SQLite database; every aggregate of the
store (:mod:`qrelkit.store.interfaces`) works over the one :class:`Database` of the file, so an
operation that spans two aggregates (an import that completes batches, a correction that
forgets stages) is one transaction: :meth:`Database.transaction` called inside another
transaction of the same connection joins it.

Durability and concurrency
--------------------------
* WAL journal, ``synchronous=FULL``: every committed write is fsynced to the WAL before
  ``COMMIT`` returns, so it survives a process kill *and* a power cut (``NORMAL`` would survive a
  kill but could lose the last commits on power loss; a judgment costs a person minutes, an fsync
  costs milliseconds). ``synchronous="OFF"`` may be asked for in simulations.
* Every write is one ``BEGIN IMMEDIATE ... COMMIT`` transaction: all of it, or nothing.
  ``BEGIN IMMEDIATE`` takes the write lock up front, so concurrent writers queue (``timeout``,
  default 60 s, ``--lock-timeout`` on the command line) instead of failing half-way; readers never
  block (WAL). The writer holding the lock is named in ``STORE.lock-holder`` (pid, host,
  operation, start time), so a writer that waits in vain fails with ``store-locked`` naming it.
* Before any use the file must be a non-empty SQLite file (``not-a-store``; an empty file is never
  given a header) and pass SQLite's ``PRAGMA quick_check`` (``store-damaged``; the full
  ``integrity_check`` also cross-checks every index, O(N log N), too slow to run on every open of a
  big store). Reading commands open the store read-only (``readonly=True``).
* The disk's errors (full, an I/O error) are ``[disk-full]`` or ``[store-io-error]`` wherever a
  statement meets them (:func:`io_error`), never a damaged store.
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
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import pandas as pd

from qrelkit.errors import InputError, disk_full
from qrelkit.io.paths import is_sqlite_file

HOLDER_SUFFIX = ".lock-holder"
SYNCHRONOUS = ("FULL", "NORMAL", "OFF", "EXTRA")

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


def is_locked(exc: BaseException) -> bool:
    """Whether SQLite's error ``exc`` says another connection holds the lock."""
    return "locked" in str(exc) or "busy" in str(exc)


def default_operation() -> str:
    """What this process is doing, for the lock holder's file: the command line's first words."""
    args = [os.path.basename(sys.argv[0])] + [a for a in sys.argv[1:3] if not a.startswith("-")]
    return " ".join(args)


def now() -> str:
    """The current UTC time, ISO 8601 with microseconds (the judgment log's times)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


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
        if is_locked(exc):
            raise InputError("store-locked", f"the store stayed locked: {exc}", file=str(path)) from None
        err = io_error(exc, path)
        if err is not None:
            raise err from None
        raise
    except sqlite3.DatabaseError as exc:
        raise InputError("store-damaged", f"{exc}; restore the store from a backup", file=str(path)) from None


class _Connection(sqlite3.Connection):
    """A connection whose statements report the disk's errors as :func:`io_error` says (one line,
    naming the file ``store_path``), whatever the code path: a read outside a transaction too."""

    store_path = ""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self._said(super().execute, sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        return self._said(super().executemany, sql, parameters)

    def _said(self, run: Callable[..., sqlite3.Cursor], sql: str, parameters: Any) -> sqlite3.Cursor:
        try:
            return run(sql, parameters)
        except sqlite3.OperationalError as exc:
            err = io_error(exc, self.store_path)
            if err is None:
                raise
            raise err from None


def connect(path: str | os.PathLike, *, readonly: bool = False, **kw: Any) -> sqlite3.Connection:
    """A connection to the SQLite file ``path`` (``readonly``: opened with ``mode=ro``, nothing can
    be written, not even a header) whose statements report the disk's errors in one line
    (:func:`io_error`); ``kw`` go to :func:`sqlite3.connect`."""
    p = Path(path)
    if readonly:
        conn = sqlite3.connect(p.absolute().as_uri() + "?mode=ro", uri=True, factory=_Connection, **kw)
    else:
        conn = sqlite3.connect(p, factory=_Connection, **kw)
    conn.store_path = str(p)
    return conn


def statements(script: str) -> list[str]:
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


class Database:
    """One store file opened: its SQLite connection (``conn``), its transactions and locks (see
    the module documentation). Made by a store (:class:`~qrelkit.store.judging.JudgingStore`,
    :class:`~qrelkit.store.campaign.CampaignStore`), which gives the checks of its own format:
    ``check(conn)`` for an existing file before anything is written to it, ``prepare(db)`` once
    the connection is set up (its schema created, checked, migrated). ``create``: an empty or
    missing file is taken as a new store. One object per process (or thread): one connection
    (``check_same_thread=False``: usable from a thread other than its creator's, by one thread at
    a time)."""

    def __init__(self, path: str | os.PathLike, *, timeout: float = 60.0, synchronous: str = "FULL",
                 readonly: bool = False, operation: str | None = None, check_same_thread: bool = True,
                 create: bool = False, check: Callable[[sqlite3.Connection], None] | None = None,
                 prepare: Callable[["Database"], None] | None = None) -> None:
        self.path = Path(path)
        self.timeout = float(timeout)
        self.operation = operation or default_operation()
        self.readonly = readonly
        self.conn: sqlite3.Connection | None = None
        self._key: tuple[int, int] | None = None
        self._depth = 0  # transactions open on this connection (the outer one and those that joined it)
        existed = self.path.is_file() and self.path.stat().st_size > 0
        if synchronous.upper() not in SYNCHRONOUS:
            raise InputError("bad-option", f"synchronous must be FULL, EXTRA, NORMAL or OFF, got {synchronous!r}")
        try:
            self._connect(readonly=readonly, check=not create or existed, check_same_thread=check_same_thread)
            self.conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            if existed:
                self._check_integrity()
                if check is not None:
                    check(self.conn)
            if not readonly:
                self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.conn.execute("PRAGMA temp_store = MEMORY")
            if prepare is not None:
                prepare(self)
        except sqlite3.OperationalError as exc:
            self.close()
            if is_locked(exc):
                raise self.locked() from None
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
            self.conn = connect(self.path, readonly=readonly, timeout=self.timeout, isolation_level=None,
                                check_same_thread=check_same_thread)
            self._key = _file_key(self.path)
            if self._key is not None:
                _OPEN_STORES[self._key] = _OPEN_STORES.get(self._key, 0) + 1

    def _check_integrity(self) -> None:
        """SQLite's ``PRAGMA quick_check`` (every page and record well formed, O(size); the full
        ``integrity_check`` also matches every index to its table, O(N log N) on big stores):
        ``store-damaged`` when it finds a problem, so a damaged store is never written."""
        try:
            rows = [r[0] for r in self.conn.execute("PRAGMA quick_check(5)").fetchall()]
        except sqlite3.OperationalError as exc:
            if is_locked(exc):
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

    def locked(self) -> InputError:
        """The lock-timeout error, naming the writer that holds the lock (from its holder file)."""
        who = "another process"
        with contextlib.suppress(OSError, ValueError, TypeError):
            h = json.loads(Path(f"{self.path}{HOLDER_SUFFIX}").read_text(encoding="utf-8"))
            who = f"'{h['operation']}' (pid {h['pid']} on {h['host']}, writing since {h['started']})"
        return InputError("store-locked", f"waited {self.timeout:g} s for the write lock held by {who}; try again "
                          "later or wait longer (--lock-timeout)", file=str(self.path))

    def close(self, *, from_any_thread: bool = False) -> None:
        """Close the connection (idempotent). ``from_any_thread``: a connection made by another
        thread (which SQLite closes only in that thread) is left to it, not an error."""
        if getattr(self, "conn", None) is not None:
            try:
                self.conn.close()
            except sqlite3.ProgrammingError:
                if not from_any_thread:
                    raise
                return
            self.conn = None
            with _OPEN_STORES_LOCK:
                key = getattr(self, "_key", None)
                if key is not None and _OPEN_STORES.get(key):
                    _OPEN_STORES[key] -= 1
                    if not _OPEN_STORES[key]:
                        del _OPEN_STORES[key]

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception); inside a transaction
        of this connection, it joins that one (the outer one commits or rolls back all).

        Waits up to ``timeout`` seconds for the write lock, then raises ``store-locked`` naming the
        holder. While the lock is held, ``STORE.lock-holder`` names this writer (pid, host,
        operation, start time) for the processes that wait. The writers of one process queue
        on a lock of their own first (:data:`_WRITE_LOCKS`)."""
        if self._depth:
            self._depth += 1
            try:
                yield self.conn
            finally:
                self._depth -= 1
            return
        with _OPEN_STORES_LOCK:
            wlock = _WRITE_LOCKS.setdefault(self._key, threading.RLock()) if self._key is not None else None
        if wlock is not None and not wlock.acquire(timeout=self.timeout):
            raise self.locked()
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
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if is_locked(exc):
                raise self.locked() from None
            raise
        self._depth = 1
        # the holder file is written and removed while the lock is held (so it is this writer's);
        # a waiting process that reads it half-written names "another process"
        holder = Path(f"{self.path}{HOLDER_SUFFIX}")
        with contextlib.suppress(OSError):
            fd = os.open(holder, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "operation": self.operation,
                                         "started": now()}).encode())
            finally:
                os.close(fd)
        try:
            yield self.conn
        except BaseException:
            self._depth = 0
            with contextlib.suppress(OSError):
                holder.unlink()
            self.conn.execute("ROLLBACK")
            raise
        self._depth = 0
        with contextlib.suppress(OSError):
            holder.unlink()
        self.conn.execute("COMMIT")

    def query(self, sql: str, params: Sequence = ()) -> pd.DataFrame:
        """The rows of a query as a table (its columns named as the query names them)."""
        cur = self.conn.execute(sql, params)
        cols = [d[0] for d in cur.description]
        return pd.DataFrame(cur.fetchall(), columns=cols)

    def meta(self) -> dict[str, str]:
        """The store's ``meta`` table (format, schema versions), ``{}`` when it has none."""
        try:
            return dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.OperationalError:
            return {}


class SqliteAggregate:
    """The SQLite implementation of one aggregate of a store, over the store file's
    :class:`Database` (shared with the store's other aggregates)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    @property
    def _conn(self) -> sqlite3.Connection:
        return self._db.conn

    def _query(self, sql: str, params: Sequence = ()) -> pd.DataFrame:
        return self._db.query(sql, params)


class SqliteStore:
    """An open store file: its :class:`Database` (``db``) and the aggregates a subclass makes
    over it. Use as a context manager or call :meth:`close`."""

    db: Database

    @property
    def path(self) -> Path:
        return self.db.path

    def close(self, *, from_any_thread: bool = False) -> None:
        """Close the connection (idempotent; see :meth:`Database.close`)."""
        db = getattr(self, "db", None)
        if db is not None:
            db.close(from_any_thread=from_any_thread)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def transaction(self) -> contextlib.AbstractContextManager:
        """One transaction for operations of several aggregates (:meth:`Database.transaction`:
        theirs join it)."""
        return self.db.transaction()

    def counts(self) -> dict[str, int]:
        """Rows per table (topics, threads, batches, batch_items, judgments)."""
        return {t: int(self.db.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
                for t in ("topics", "threads", "batches", "batch_items", "judgments")}

    def schema_versions(self) -> dict[str, int]:
        """``schema_version`` (the judging store's) and ``campaign_schema_version`` (0: none)."""
        meta = self.db.meta()
        return {k: int(meta.get(k, 0)) for k in ("schema_version", "campaign_schema_version")}
