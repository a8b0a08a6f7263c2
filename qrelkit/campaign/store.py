"""The campaign store: the CAL judging store (:mod:`qrelkit.cal.store`) plus the campaign's own
tables, in one SQLite file (``DIR/campaign.db``).

The judging store's tables (topics, threads, batches, batch_items, the append-only judgments
log) keep their meaning; the campaign adds, under its own schema version
(``meta.campaign_schema_version``, migrated forward by :func:`_migrate`):

====================  ===========================================================================
campaign_inputs       name, path, size, mtime_ns, sha256: every input file recorded at init
campaign_config       section, key, value (JSON), origin, location: the effective configuration
campaign_stages       seq (order), name, summary (JSON), seconds: one row per completed stage
campaign_topics       qid, screening, screened, screened_relevant, decision, rule, reason
campaign_assignments  batch, assessor, position: who judges a batch (several assessors per item)
campaign_state        key, value: the oracle used, the input paths, the web app's signing secret, ...
campaign_warnings     seq, stage, message: every warning met (counted in the report)
campaign_cal          qid, round, phase: each topic's CAL round and its phase (``issue`` or
                      ``judge``; a topic without a row is at round 0, ``judge``) — schema 2
campaign_accounts     name, token_hash (SHA-256 of the login token), organizer, topics (JSON),
                      created, revoked, generation: the web app's accounts (schema 3)
campaign_pref_tasks   task_id, slot and the other columns of the preference protocol's task
                      table (:data:`qrelkit.prefs.TASK_SCHEMA`; ``exclude_workers`` as JSON):
                      the crowd tasks answered in the web app (schema 4)
campaign_pref_assign  task_id, assessor, position: who answers a preference task (schema 4)
campaign_pref_answers seq, task_id, slot, assessor, choice (left|right), answered (UTC time):
                      the append-only log of answers, one row per answer, never updated nor
                      deleted (triggers refuse both); at most one answer *in force* per
                      (task, slot, assessor), whatever the code path (a trigger) (schema 4)
campaign_pref_retractions  seq, answer (a ``campaign_pref_answers`` seq, at most once),
                      retracted_by, retracted (UTC time), source (``web-undo``): the append-only
                      log of undone answers (schema 5)
live_pref_answers     a view: the answers not retracted — the answers *in force*, what every
                      reader of the answers reads (:meth:`CampaignStore.pref_answers`) (schema 5)
====================  ===========================================================================

Schema history: 1 (first); 2 adds ``campaign_cal`` (CAL rounds per topic instead of one round
for every topic in ``campaign_state``; a version 1 store's round and phase become every topic's);
3 adds ``campaign_accounts``; 4 the preference tables; 5 the retractions of preference answers
(undo in the web app): the table, the view, the triggers, and ``campaign_pref_answers`` rebuilt
without its version-4 ``UNIQUE (task_id, slot, assessor)`` (an undone comparison may be
answered again: a second row), its rows copied as they were (same seq, same times). Steps 3, 4
and 5 create only what is missing (``CREATE ... IF NOT EXISTS``). A store of an older version is
migrated when opened for writing, in the opening transaction; opened read-only
(``readonly=True``) it is left as it is and the connection gets temporary stand-ins instead:
empty tables for those the version lacks, and a ``live_pref_answers`` view over the answers
(an older store has no retraction).

Every write is one transaction (``BEGIN IMMEDIATE``): a kill leaves the previous state.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from qrelkit.cal.store import THREADS, JudgingStore, sql_filters
from qrelkit.config import Config, changed_values, config_from_rows, format_value, load_config
from qrelkit.errors import InputError
from qrelkit.io.paths import CAMPAIGN_STORE

CAMPAIGN_SCHEMA_VERSION = 5  # 2: campaign_cal; 3: campaign_accounts; 4: campaign_pref_tasks, _assign, _answers;
#                             5: campaign_pref_retractions, live_pref_answers
STORE_NAME = CAMPAIGN_STORE  # qrelkit.io.paths: any command refuses to write in a folder holding it

#: version 2: the web app's accounts (created by a new store and by the migration of a version-1 one)
_ACCOUNTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS campaign_accounts (
    name TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, organizer INTEGER NOT NULL, topics TEXT NOT NULL,
    created TEXT NOT NULL, revoked TEXT, generation INTEGER NOT NULL DEFAULT 1)
"""

#: version 4: the preference tasks answered in the web app (qrelkit.campaign.prefs, docs/web.md); the
#: answers table as version 5 has it (version 4's held UNIQUE (task_id, slot, assessor))
_PREFS_SCHEMA = """
CREATE TABLE IF NOT EXISTS campaign_pref_tasks (
    task_id TEXT NOT NULL, slot INTEGER NOT NULL, qid TEXT NOT NULL, query TEXT NOT NULL, kind TEXT NOT NULL,
    pair_id TEXT NOT NULL, doc_a TEXT NOT NULL, doc_b TEXT NOT NULL, left_docid TEXT NOT NULL,
    right_docid TEXT NOT NULL, left_text TEXT NOT NULL, right_text TEXT NOT NULL, expected TEXT, offtopic_qid TEXT,
    exclude_workers TEXT NOT NULL, PRIMARY KEY (task_id, slot));
CREATE TABLE IF NOT EXISTS campaign_pref_assign (
    task_id TEXT NOT NULL, assessor TEXT NOT NULL, position INTEGER NOT NULL, PRIMARY KEY (task_id, assessor));
CREATE TABLE IF NOT EXISTS campaign_pref_answers (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL, slot INTEGER NOT NULL, assessor TEXT NOT NULL,
    choice TEXT NOT NULL CHECK (choice IN ('left', 'right')), answered TEXT NOT NULL,
    FOREIGN KEY (task_id, slot) REFERENCES campaign_pref_tasks (task_id, slot))
"""
_PREF_ANSWERS_TABLE = next(s for s in _PREFS_SCHEMA.split(";\n") if "campaign_pref_answers (" in s)

#: version 5: undo of preference answers — an append-only log of retractions, the view of the
#: answers in force every reader uses, and triggers keeping both logs append-only and one answer
#: in force per (task, slot, assessor)
_PREF_RETRACTIONS_SCHEMA = """
CREATE INDEX IF NOT EXISTS campaign_pref_answers_key ON campaign_pref_answers (task_id, assessor, slot);
CREATE TABLE IF NOT EXISTS campaign_pref_retractions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, answer INTEGER NOT NULL UNIQUE REFERENCES campaign_pref_answers (seq),
    retracted_by TEXT NOT NULL, retracted TEXT NOT NULL, source TEXT NOT NULL);
CREATE VIEW IF NOT EXISTS live_pref_answers AS
    SELECT a.seq, a.task_id, a.slot, a.assessor, a.choice, a.answered FROM campaign_pref_answers a
    WHERE NOT EXISTS (SELECT 1 FROM campaign_pref_retractions r WHERE r.answer = a.seq);
CREATE TRIGGER IF NOT EXISTS campaign_pref_answers_no_update BEFORE UPDATE ON campaign_pref_answers
    BEGIN SELECT RAISE(ABORT, 'the preference answers log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS campaign_pref_answers_no_delete BEFORE DELETE ON campaign_pref_answers
    BEGIN SELECT RAISE(ABORT, 'the preference answers log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS campaign_pref_answers_no_conflict BEFORE INSERT ON campaign_pref_answers
    WHEN EXISTS (SELECT 1 FROM live_pref_answers WHERE task_id = NEW.task_id AND slot = NEW.slot
                 AND assessor = NEW.assessor)
    BEGIN SELECT RAISE(ABORT, 'conflict: this assessor has an answer in force to this comparison'); END;
CREATE TRIGGER IF NOT EXISTS campaign_pref_retractions_no_update BEFORE UPDATE ON campaign_pref_retractions
    BEGIN SELECT RAISE(ABORT, 'the preference retractions log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS campaign_pref_retractions_no_delete BEFORE DELETE ON campaign_pref_retractions
    BEGIN SELECT RAISE(ABORT, 'the preference retractions log is append-only'); END
"""

_PREF_RETRACTIONS_TABLE = next(s for s in _PREF_RETRACTIONS_SCHEMA.split(";\n") if "campaign_pref_retractions (" in s)
_LIVE_PREF_VIEW = next(s for s in _PREF_RETRACTIONS_SCHEMA.split(";\n") if "VIEW IF NOT EXISTS live_pref_answers" in s)

_CAMPAIGN_SCHEMA = """
CREATE TABLE IF NOT EXISTS campaign_inputs (
    name TEXT NOT NULL, path TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL, PRIMARY KEY (name, path));
CREATE TABLE IF NOT EXISTS campaign_config (
    section TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, origin TEXT NOT NULL, location TEXT,
    PRIMARY KEY (section, key));
CREATE TABLE IF NOT EXISTS campaign_stages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, summary TEXT NOT NULL, seconds REAL);
CREATE TABLE IF NOT EXISTS campaign_topics (
    qid TEXT PRIMARY KEY REFERENCES topics(qid), screening TEXT, screened INTEGER, screened_relevant INTEGER,
    decision TEXT, rule TEXT, reason TEXT);
CREATE TABLE IF NOT EXISTS campaign_assignments (
    batch TEXT NOT NULL REFERENCES batches(id), assessor TEXT NOT NULL, position INTEGER NOT NULL,
    PRIMARY KEY (batch, assessor));
CREATE TABLE IF NOT EXISTS campaign_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS campaign_warnings (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, stage TEXT NOT NULL, message TEXT NOT NULL, UNIQUE (stage, message));
CREATE TABLE IF NOT EXISTS campaign_cal (
    qid TEXT PRIMARY KEY REFERENCES topics(qid), round INTEGER NOT NULL,
    phase TEXT NOT NULL CHECK (phase IN ('issue', 'judge')));
""" + _ACCOUNTS_SCHEMA + ";\n" + _PREFS_SCHEMA + ";\n" + _PREF_RETRACTIONS_SCHEMA
_CAL_TABLE = next(s for s in _CAMPAIGN_SCHEMA.split(";\n") if "campaign_cal (" in s)
CAL_PHASES = ("issue", "judge")


def _now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def sha256_file(path: str | os.PathLike) -> str:
    """The SHA-256 hex digest of the file at ``path`` (read in 1 MiB blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def input_record(name: str, path: str | os.PathLike) -> tuple[str, str, int, int, str]:
    """(name, absolute path, size, mtime_ns, sha256) of one input file."""
    p = Path(path).resolve()
    st = p.stat()
    return name, str(p), int(st.st_size), int(st.st_mtime_ns), sha256_file(p)


def _v1_cal_rounds(db) -> None:
    """Version 1's one CAL round and phase (``campaign_state`` ``cal_round``, ``cal_phase``) as
    every topic's row of ``campaign_cal`` (version 1 advanced every topic in step)."""
    state = {k: json.loads(v) for k, v in db.execute(
        "SELECT key, value FROM campaign_state WHERE key IN ('cal_round', 'cal_phase')")}
    round_, phase = int(state.get("cal_round", 0) or 0), str(state.get("cal_phase", "judge") or "judge")
    if round_ or phase != "judge":
        db.execute("INSERT OR IGNORE INTO campaign_cal SELECT qid, ?, ? FROM topics", (round_, phase))


def _rebuild_pref_answers(db) -> None:
    """4 -> 5: ``campaign_pref_answers`` without version 4's ``UNIQUE (task_id, slot, assessor)``
    (SQLite drops a constraint only by rebuilding the table): every row copied as it is (same
    seq, same times; the AUTOINCREMENT counter goes on from the last seq)."""
    db.execute("DROP VIEW IF EXISTS live_pref_answers")  # a view over the old table goes before the rename
    db.execute(_PREF_ANSWERS_TABLE.replace("campaign_pref_answers (", "campaign_pref_answers_v5 (", 1))
    db.execute("INSERT INTO campaign_pref_answers_v5 (seq, task_id, slot, assessor, choice, answered)"
               " SELECT seq, task_id, slot, assessor, choice, answered FROM campaign_pref_answers ORDER BY seq")
    db.execute("DROP TABLE campaign_pref_answers")
    db.execute("ALTER TABLE campaign_pref_answers_v5 RENAME TO campaign_pref_answers")


def _migrate(db, version: int) -> None:
    """Bring a campaign store written by an older schema up to :data:`CAMPAIGN_SCHEMA_VERSION`,
    inside the opening transaction. 1 -> 2: the table ``campaign_cal``; the one CAL round and
    phase of version 1 (``campaign_state`` ``cal_round``, ``cal_phase``) become every topic's
    (version 1 advanced every topic in step), and leave ``campaign_state``. 2 -> 3 adds
    ``campaign_accounts``, 3 -> 4 the preference tables (each creates only what is missing),
    4 -> 5 rebuilds ``campaign_pref_answers`` (:func:`_rebuild_pref_answers`) and adds the
    retractions, the view of the answers in force and the triggers."""
    if version < 2:
        db.execute(_CAL_TABLE)
        _v1_cal_rounds(db)
        db.execute("DELETE FROM campaign_state WHERE key IN ('cal_round', 'cal_phase')")
    if version < 3:
        db.execute(_ACCOUNTS_SCHEMA)
    if version < 4:
        for stmt in _PREFS_SCHEMA.split(";\n"):
            db.execute(stmt)
    elif version == 4:
        _rebuild_pref_answers(db)
    if version < 5:
        for stmt in _PREF_RETRACTIONS_SCHEMA.split(";\n"):
            db.execute(stmt)
    db.execute("UPDATE meta SET value = ? WHERE key = 'campaign_schema_version'", (str(CAMPAIGN_SCHEMA_VERSION),))


def _readonly_stand_ins(db, version: int) -> None:
    """A store of an older ``version`` opened read-only (nothing may be written): the tables it
    lacks as empty temporary ones (``campaign_cal`` filled as the migration would fill it; no
    retraction before version 5), and the view of the answers in force over them."""
    if version < 2:
        db.execute(_CAL_TABLE.replace("CREATE TABLE", "CREATE TEMP TABLE").replace(" REFERENCES topics(qid)", ""))
        _v1_cal_rounds(db)
    if version < 3:
        db.execute(_ACCOUNTS_SCHEMA.replace("CREATE TABLE", "CREATE TEMP TABLE"))
    if version < 4:
        for stmt in _PREFS_SCHEMA.split(";\n"):
            db.execute(stmt.replace("CREATE TABLE", "CREATE TEMP TABLE"))
    db.execute(_PREF_RETRACTIONS_TABLE.replace("CREATE TABLE", "CREATE TEMP TABLE")
               .replace(" REFERENCES campaign_pref_answers (seq)", ""))
    db.execute(_LIVE_PREF_VIEW.replace("CREATE VIEW", "CREATE TEMP VIEW"))


class CampaignStore(JudgingStore):
    """A judging store with the campaign's tables (see the module documentation)."""

    def __init__(self, path: str | os.PathLike, *, create: bool = False, timeout: float = 60.0,
                 synchronous: str = "FULL", check_same_thread: bool = True, readonly: bool = False) -> None:
        super().__init__(path, timeout=timeout, synchronous=synchronous, check_same_thread=check_same_thread,
                         readonly=readonly and not create, _create=create)
        try:
            if readonly and not create:
                self._check_campaign_version(self._db, readonly=True)
            else:
                with self.transaction() as db:
                    if create:
                        for stmt in _CAMPAIGN_SCHEMA.split(";\n"):
                            if stmt.strip():
                                db.execute(stmt)
                        db.execute("INSERT OR IGNORE INTO meta VALUES ('campaign_schema_version', ?)",
                                   (str(CAMPAIGN_SCHEMA_VERSION),))
                    self._check_campaign_version(db, readonly=False)
        except BaseException:
            self.close()
            raise

    def _check_campaign_version(self, db, *, readonly: bool) -> None:
        """``[not-a-campaign]`` for a judging store without the campaign's tables or of a newer
        campaign schema; an older one is migrated (or, read-only, given stand-ins)."""
        row = db.execute("SELECT value FROM meta WHERE key = 'campaign_schema_version'").fetchone()
        if row is None:
            raise InputError("not-a-campaign", "a judging store, but not a campaign store", file=str(self.path))
        version = int(row[0])
        if version > CAMPAIGN_SCHEMA_VERSION:
            raise InputError("not-a-campaign", f"campaign schema {version} is newer than this qrelkit "
                             f"({CAMPAIGN_SCHEMA_VERSION})", file=str(self.path))
        if version < CAMPAIGN_SCHEMA_VERSION:
            (_readonly_stand_ins if readonly else _migrate)(db, version)

    # -- inputs and configuration ------------------------------------------------------------------

    def record_inputs(self, records: Iterable[tuple[str, str, int, int, str]], config_rows: list[dict]) -> None:
        with self.transaction() as db:
            db.executemany("INSERT INTO campaign_inputs VALUES (?, ?, ?, ?, ?)", list(records))
            db.executemany("INSERT INTO campaign_config VALUES (?, ?, ?, ?, ?)",
                           [(r["section"], r["key"], json.dumps(r["value"], sort_keys=True), r["origin"], r["where"])
                            for r in config_rows])

    def inputs(self) -> pd.DataFrame:
        return self._query("SELECT name, path, size, mtime_ns, sha256 FROM campaign_inputs ORDER BY name, path")

    def config_rows(self) -> pd.DataFrame:
        df = self._query("SELECT section, key, value, origin, location FROM campaign_config")
        df["value"] = [json.loads(v) for v in df["value"]]
        return df

    def check_inputs(self, seen: dict[str, tuple[int, int]] | None = None) -> None:
        """``[input-changed]`` when a recorded input differs from what init saw (size, or content
        when its modification time moved); ``[input-missing]`` when it is gone: the first of
        :meth:`input_problems`, raised.

        ``seen`` (path -> (size, mtime_ns), filled here): a file whose size and modification time
        are those seen at an earlier check passes without reading it again (a long-lived runner
        checks cheaply); any other is checked in full and, when it passes, remembered."""
        problems = self.input_problems(seen, first=True)
        if problems:
            raise problems[0]

    def input_problems(self, seen: dict[str, tuple[int, int]] | None = None, *, first: bool = False) -> list[InputError]:
        """Every recorded input that is gone (``[input-missing]``) or changed
        (``[input-changed]``) since init, as errors naming the file (only the first with
        ``first``); ``seen`` as in :meth:`check_inputs`."""
        out: list[InputError] = []
        for name, path, size, mtime, digest in self.inputs().itertuples(index=False):
            p = Path(path)
            if not p.is_file():
                out.append(InputError("input-missing", f"the campaign's {name} input is gone since init; restore it",
                                      file=path))
            else:
                st = p.stat()
                now = (int(st.st_size), int(st.st_mtime_ns))
                if seen is not None and seen.get(path) == now:
                    continue
                if st.st_size != size or (st.st_mtime_ns != mtime and sha256_file(p) != digest):
                    if name == "config":  # the protocol file: its values count, not its bytes
                        try:
                            check_config_values(self, p)
                        except InputError as exc:
                            out.append(exc)
                    else:
                        out.append(InputError("input-changed", f"the campaign's {name} input changed on disk since "
                                              f"init (recorded sha256 {digest[:12]}...); restore it or start a new "
                                              "campaign", file=path))
                if not out and seen is not None:
                    seen[path] = now
            if out and first:
                break
        return out

    # -- stages, topics, state ---------------------------------------------------------------------

    def stages_done(self) -> dict[str, dict]:
        return {n: json.loads(s) for n, s in self._db.execute("SELECT name, summary FROM campaign_stages ORDER BY seq")}

    def finish_stage(self, name: str, summary: Mapping[str, Any], seconds: float | None = None) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR IGNORE INTO campaign_stages (name, summary, seconds) VALUES (?, ?, ?)",
                       (name, json.dumps(summary, sort_keys=True, default=str), seconds))

    def stage_seconds(self) -> dict[str, float]:
        """Seconds of each completed stage's last attempt (kept apart from every output)."""
        return {n: s for n, s in self._db.execute("SELECT name, seconds FROM campaign_stages ORDER BY seq")}

    def config(self) -> Config:
        """The campaign's effective configuration: the one recorded in the store (``campaign_config``:
        the protocol file with the overrides given at ``campaign init``, or as adopted since by
        :meth:`adopt_config`) — never the file as it is now (see :func:`check_config_values`)."""
        rows = self.config_rows().rename(columns={"location": "where"})
        return config_from_rows(rows.to_dict("records"), (self.get_state("paths") or {}).get("config"))

    def protocol_file_config(self) -> Config | None:
        """The protocol file as it is now, with the overrides of ``campaign init`` (None for a
        campaign without one); its errors are the file's (``[bad-toml]``, a rule across keys, ...)."""
        path = (self.get_state("paths") or {}).get("config")
        return None if path is None else load_config(path, self.get_state("overrides", {}))

    def adopt_config(self, record: tuple[str, str, int, int, str], config_rows: list[dict],
                     adoption: Mapping[str, Any]) -> None:
        """Make ``config_rows`` (:meth:`Config.effective`) the campaign's configuration and
        ``record`` (:func:`input_record`) its protocol file's, and append ``adoption`` to the
        state's ``config_adoptions``: one transaction."""
        with self.transaction() as db:
            db.execute("DELETE FROM campaign_inputs WHERE name = 'config'")
            db.execute("INSERT INTO campaign_inputs VALUES (?, ?, ?, ?, ?)", record)
            db.execute("DELETE FROM campaign_config")
            db.executemany("INSERT INTO campaign_config VALUES (?, ?, ?, ?, ?)",
                           [(r["section"], r["key"], json.dumps(r["value"], sort_keys=True), r["origin"], r["where"])
                            for r in config_rows])
            row = db.execute("SELECT value FROM campaign_state WHERE key = 'config_adoptions'").fetchone()
            done = json.loads(row[0]) if row else []
            db.execute("INSERT OR REPLACE INTO campaign_state VALUES ('config_adoptions', ?)",
                       (json.dumps([*done, dict(adoption)], sort_keys=True, default=str),))

    def get_state(self, key: str, default: Any = None) -> Any:
        row = self._db.execute("SELECT value FROM campaign_state WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def set_state(self, **values: Any) -> None:
        with self.transaction() as db:
            db.executemany("INSERT OR REPLACE INTO campaign_state VALUES (?, ?)",
                           [(k, json.dumps(v, sort_keys=True)) for k, v in values.items()])

    def record_failure(self, info: Mapping[str, Any]) -> None:
        """Record the campaign's last failure (``stage, time, rule, message, by``): what
        ``campaign status`` shows until an advance gets through (:meth:`clear_failure`)."""
        self.set_state(last_failure=dict(info))

    def failure(self) -> dict | None:
        """The campaign's last failure not yet behind it (:meth:`record_failure`), or None."""
        return self.get_state("last_failure")

    def clear_failure(self) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM campaign_state WHERE key = 'last_failure'")

    def change_judgments(self, items: Iterable[tuple], *, source: str, redo: Iterable[str] = ()) -> dict[str, Any]:
        """:meth:`JudgingStore.change_judgments`, and in the same transaction, when anything
        changed, the completed stages among ``redo`` (those whose files are made from the grades
        in force) forgotten so that the next run makes them again. Returns ``changed``,
        ``unchanged`` and ``stages_to_redo``."""
        redo = list(redo)
        again: list[str] = []

        def forget(db) -> None:
            again.extend(r[0] for r in db.execute(
                f"SELECT name FROM campaign_stages WHERE name IN ({', '.join('?' * len(redo))}) ORDER BY seq", redo))
            db.execute(f"DELETE FROM campaign_stages WHERE name IN ({', '.join('?' * len(redo))})", redo)

        res = super().change_judgments(items, source=source, then=forget if redo else None)
        return {**res, "stages_to_redo": again}

    def warn(self, stage: str, message: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR IGNORE INTO campaign_warnings (stage, message) VALUES (?, ?)", (stage, message))

    def warnings(self) -> pd.DataFrame:
        return self._query("SELECT stage, message FROM campaign_warnings ORDER BY seq")

    def decision_counts(self) -> dict[str, int]:
        """How many topics have each decision (``open``: none yet), by decision name."""
        ct = self.campaign_topics()
        return {str(k): int(v) for k, v in ct["decision"].fillna("open").value_counts().sort_index().items()}

    def cal_rounds(self) -> dict[str, tuple[int, str]]:
        """qid -> (CAL round, phase) of every topic (``(0, "judge")`` for a topic not in CAL yet)."""
        rows = dict((q, (int(r), str(p))) for q, r, p in self._db.execute("SELECT qid, round, phase FROM campaign_cal"))
        return {q: rows.get(q, (0, "judge")) for q in self.topics()["qid"].astype(str)}

    def set_cal_rounds(self, rows: Iterable[tuple[str, int, str]]) -> None:
        """Record (qid, round, phase) of some topics, in one transaction."""
        rows = [(str(q), int(r), str(p)) for q, r, p in rows]
        bad = [p for _, _, p in rows if p not in CAL_PHASES]
        if bad:
            raise InputError("bad-option", f"CAL phase must be one of {', '.join(CAL_PHASES)}, got {bad[0]!r}")
        if rows:
            with self.transaction() as db:
                db.executemany("INSERT OR REPLACE INTO campaign_cal VALUES (?, ?, ?)", rows)

    def set_topics(self, rows: list[dict]) -> None:
        """Upsert per-topic campaign columns (only the keys each row gives)."""
        cols = ("screening", "screened", "screened_relevant", "decision", "rule", "reason")
        with self.transaction() as db:
            for r in rows:
                db.execute("INSERT OR IGNORE INTO campaign_topics (qid) VALUES (?)", (str(r["qid"]),))
                sets = [c for c in cols if c in r]
                if sets:
                    db.execute(f"UPDATE campaign_topics SET {', '.join(c + ' = ?' for c in sets)} WHERE qid = ?",
                               [r[c] for c in sets] + [str(r["qid"])])

    def decided_topics(self, decision: str | None = None) -> set[str]:
        """The topics with a decision (that ``decision`` when given): one query, no table."""
        sql = "SELECT qid FROM campaign_topics WHERE decision IS NOT NULL" + (" AND decision = ?" if decision else "")
        return {str(r[0]) for r in self._db.execute(sql, (decision,) if decision else ())}

    def thread_rows(self) -> list[tuple[str, str, str, str]]:
        """``(qid, thread, state, reason)`` of every topic's threads (in no particular order)."""
        return [(str(q), str(t), str(st), str(r)) for q, t, st, r in
                self._db.execute("SELECT topic, name, state, reason FROM threads")]

    def campaign_topics(self) -> pd.DataFrame:
        df = self._query("SELECT t.qid, c.screening, c.screened, c.screened_relevant, c.decision, c.rule, c.reason"
                         " FROM topics t LEFT JOIN campaign_topics c ON c.qid = t.qid")
        return self._order(df)

    # -- assessors' files in ------------------------------------------------------------------------

    def import_assigned(self, files: Iterable[str | os.PathLike], *, lenient: bool = False,
                        scale: Iterable[int] | None = (0, 1, 2, 3)) -> Any:
        """Import assessors' files (:meth:`JudgingStore.import_files`: one transaction, idempotent,
        conflicts reported) where every row must name a batch the campaign issued
        (``[unknown-batch]``) and an assessor it was issued to (``[not-assigned]``: a typo
        ``Ann`` for ``ann``, a stranger, the topic's other assessor); strict: nothing imported,
        the first such row named by file and line; ``lenient``: those rows skipped and counted."""
        return self.import_files(list(files), lenient=lenient, scale=scale, vet=_vet_assigned)

    # -- batches and their assessors ---------------------------------------------------------------

    def issue_assigned(self, topic: str, passages: list[str], batch_id: str, assessors: list[str], *,
                       kind: str = "pool", thread: str | None = None) -> str:
        """Issue a batch (unless it exists: idempotent) and record its assessors."""
        exists = self._db.execute("SELECT 1 FROM batches WHERE id = ?", (batch_id,)).fetchone() is not None
        if not exists:
            self.issue_batch(topic, thread, passages, kind=kind, batch_id=batch_id)
        self.assign(batch_id, assessors)
        return batch_id

    def assign(self, batch_id: str, assessors: list[str]) -> None:
        self.assign_many({batch_id: assessors})

    def assign_many(self, assessors: Mapping[str, list[str]]) -> None:
        """Record the assessors of several batches (batch id -> names), in one transaction."""
        rows = [(b, a, i) for b, names in assessors.items() for i, a in enumerate(names)]
        if rows:
            with self.transaction() as db:
                db.executemany("INSERT OR IGNORE INTO campaign_assignments VALUES (?, ?, ?)", rows)

    def assignments(self) -> pd.DataFrame:
        return self._query("SELECT a.batch AS batch_id, a.assessor, b.topic AS qid, b.thread, b.kind FROM"
                           " campaign_assignments a JOIN batches b ON b.id = a.batch ORDER BY b.seq, a.position")

    #: items an assigned assessor still owes (see :meth:`pending`); ``{where}``: more conditions
    _PENDING_SQL = (
        "SELECT {columns} FROM campaign_assignments a JOIN batches b ON b.id = a.batch JOIN batch_items i ON i.batch = b.id"
        " WHERE NOT EXISTS (SELECT 1 FROM live_judgments j WHERE j.topic = b.topic AND j.passage = i.passage"
        "                   AND j.assessor = a.assessor AND j.batch = b.id)"
        " AND NOT EXISTS (SELECT 1 FROM live_judgments j WHERE j.topic = b.topic AND j.passage = i.passage"
        "                 AND j.batch <> b.id AND j.source <> 'encountered'"
        "                 AND (SELECT seq FROM batches x WHERE x.id = j.batch) < b.seq){where}")

    def pending(self, assessor: str | None = None, topic: str | None = None) -> pd.DataFrame:
        """Items an assigned assessor still owes: ``batch_id, qid, thread, kind, assessor,
        position, docid`` in issue order (of one ``assessor`` and one ``topic`` when given). An
        item judged in another batch of the topic (a CAL batch's encountered passages) is owed by
        nobody; a retracted judgment is owed again."""
        where, params = sql_filters({"a.assessor": assessor, "b.topic": topic}, prefix=" AND ")
        cols = "b.id AS batch_id, b.topic AS qid, b.thread, b.kind, a.assessor, i.position, i.passage AS docid"
        return self._query(self._PENDING_SQL.format(columns=cols, where="".join(where))
                           + " ORDER BY b.seq, a.position, i.position", params)

    def owed_in_batch(self, assessor: str, batch_id: str, docid: str | None = None) -> list[str]:
        """The passages of batch ``batch_id`` that ``assessor`` still owes (as :meth:`pending`),
        in position order; only ``docid`` when given (a cheap check for one item, no table)."""
        where, params = sql_filters({"a.assessor": assessor, "b.id": batch_id, "i.passage": docid}, prefix=" AND ")
        return [str(r[0]) for r in self._db.execute(
            self._PENDING_SQL.format(columns="i.passage", where="".join(where)) + " ORDER BY i.position", params)]

    def campaign_items(self) -> pd.DataFrame:
        """``batch_id, qid, docid`` of every issued batch item (samples included), in issue order.
        (Not an override of :meth:`JudgingStore.issued_items`, whose columns the CAL status code
        reads: a campaign store is a judging store wherever one is expected.)"""
        return self._query("SELECT b.id AS batch_id, b.topic AS qid, i.passage AS docid FROM batch_items i"
                           " JOIN batches b ON b.id = i.batch ORDER BY b.seq, i.position")

    def lost_copies(self) -> pd.DataFrame:
        """Items of open CAL batches with no judgment in the batch but one in an earlier batch of
        the topic: encountered passages whose copied judgments a kill lost (``batch_id, qid, docid``)."""
        return self._query(
            "SELECT b.id AS batch_id, b.topic AS qid, i.passage AS docid FROM batches b JOIN batch_items i ON i.batch = b.id"
            " WHERE b.kind = 'cal' AND b.status = 'open' AND NOT EXISTS (SELECT 1 FROM live_judgments j WHERE j.batch = b.id"
            " AND j.passage = i.passage) AND EXISTS (SELECT 1 FROM live_judgments j JOIN batches x ON x.id = j.batch"
            " WHERE j.topic = b.topic AND j.passage = i.passage AND x.seq < b.seq) ORDER BY b.seq, i.position")

    # -- what the web app reads (qrelkit/web) --------------------------------------------------------

    def assigned_topic_set(self, assessor: str) -> set[str]:
        """The topics of the batches assigned to ``assessor`` (unordered: one query, no table)."""
        rows = self._db.execute("SELECT DISTINCT b.topic FROM campaign_assignments a JOIN batches b ON b.id = a.batch"
                                " WHERE a.assessor = ?", (str(assessor),)).fetchall()
        return {str(r[0]) for r in rows}

    def assignment(self, batch_id: str, assessor: str) -> dict | None:
        """Batch ``batch_id`` if it is assigned to ``assessor``: ``qid, kind, status, items``
        (its passages in position order); else None."""
        row = self._db.execute("SELECT b.topic, b.kind, b.status FROM campaign_assignments a JOIN batches b ON b.id = a.batch"
                               " WHERE a.batch = ? AND a.assessor = ?", (str(batch_id), str(assessor))).fetchone()
        if row is None:
            return None
        items = [r[0] for r in self._db.execute("SELECT passage FROM batch_items WHERE batch = ? ORDER BY position",
                                                (str(batch_id),))]
        return {"qid": str(row[0]), "kind": row[1], "status": row[2], "items": items}

    # lean readers for one web request (plain rows, no tables)

    def owed_items(self, assessor: str, topic: str) -> list[tuple[str, str, str]]:
        """``(batch_id, kind, docid)`` of the items ``assessor`` owes on ``topic`` (as
        :meth:`pending`), in issue order."""
        return [(str(b), str(k), str(d)) for b, k, d in self._db.execute(
            self._PENDING_SQL.format(columns="b.id, b.kind, i.passage", where=" AND a.assessor = ? AND b.topic = ?")
            + " ORDER BY b.seq, a.position, i.position", (str(assessor), str(topic)))]

    def topic_owed(self, qid: str) -> bool:
        """Whether any assigned assessor still owes an item of topic ``qid`` (as :meth:`pending`)."""
        return self._db.execute(self._PENDING_SQL.format(columns="1", where=" AND b.topic = ?") + " LIMIT 1",
                                (str(qid),)).fetchone() is not None

    def topic_row(self, qid: str) -> dict[str, str | None]:
        """``screening, decision, rule, reason`` of a topic (None where unset)."""
        row = self._db.execute("SELECT screening, decision, rule, reason FROM campaign_topics WHERE qid = ?",
                               (str(qid),)).fetchone()
        return dict(zip(("screening", "decision", "rule", "reason"), row or (None,) * 4))

    def thread_states(self, qid: str) -> list[tuple[str, str]]:
        """``(thread, state)`` of a topic's CAL threads, in thread order."""
        rows = self._db.execute("SELECT name, state FROM threads WHERE topic = ?", (str(qid),)).fetchall()
        return sorted(((str(t), str(st)) for t, st in rows), key=lambda r: THREADS.index(r[0]) if r[0] in THREADS else 99)

    def topic_grades(self, qid: str) -> list[tuple[str, str, int]]:
        """``(docid, assessor, grade)`` of the judgments in force of a topic (pool and CAL
        batches, as :meth:`judgments` with ``"all"``)."""
        return [(str(d), str(a), int(g)) for d, a, g in self._db.execute(
            "SELECT j.passage, j.assessor, j.grade FROM live_judgments j JOIN batches b ON b.id = j.batch"
            " WHERE j.topic = ? AND b.kind <> 'sample'", (str(qid),))]

    def judged_in_batch(self, assessor: str, batch_id: str) -> int:
        """How many judgments in force ``assessor`` has in batch ``batch_id``."""
        return int(self._db.execute("SELECT COUNT(*) FROM live_judgments WHERE assessor = ? AND batch = ?",
                                    (str(assessor), str(batch_id))).fetchone()[0])

    def assessor_grades(self, assessor: str, *, topic: str | None = None, batch: str | None = None) -> pd.DataFrame:
        """The judgments in force of ``assessor`` (of ``topic``/``batch`` when given), in log
        order: ``qid, docid, batch_id, grade, source``."""
        where, params = sql_filters({"assessor": assessor, "topic": topic, "batch": batch})
        return self._query("SELECT topic AS qid, passage AS docid, batch AS batch_id, grade, source FROM live_judgments"
                           " WHERE " + " AND ".join(where) + " ORDER BY seq", params)

    def reassign(self, batch_id: str, old: str, new: str) -> bool:
        """Give ``old``'s place among the assessors of batch ``batch_id`` to ``new`` (one
        transaction), unless ``new`` is one of them already or ``old`` judged in it; returns
        whether it did."""
        with self.transaction() as db:
            cur = db.execute("UPDATE campaign_assignments SET assessor = ? WHERE batch = ? AND assessor = ? AND NOT EXISTS"
                             " (SELECT 1 FROM campaign_assignments x WHERE x.batch = ? AND x.assessor = ?) AND NOT EXISTS"
                             " (SELECT 1 FROM live_judgments j WHERE j.batch = ? AND j.assessor = ?)",
                             (str(new), str(batch_id), str(old), str(batch_id), str(new), str(batch_id), str(old)))
            return cur.rowcount > 0

    def judged_counts(self, exclude_sources: Iterable[str] = ()) -> dict[str, int]:
        """Judgments in force per assessor, leaving out those of the given sources."""
        ex = list(exclude_sources)
        sql = "SELECT assessor, COUNT(*) FROM live_judgments"
        if ex:
            sql += f" WHERE source NOT IN ({', '.join('?' * len(ex))})"
        return {str(a): int(n) for a, n in self._db.execute(sql + " GROUP BY assessor", ex).fetchall()}

    def schema_versions(self) -> dict[str, int]:
        """``schema_version`` (the judging store's) and ``campaign_schema_version``."""
        meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        return {k: int(meta.get(k, 0)) for k in ("schema_version", "campaign_schema_version")}

    # -- the web app's accounts (qrelkit/web, docs/web.md) ------------------------------------------

    _ACCOUNT_COLUMNS = "name, organizer, topics, created, revoked, generation"

    def _account(self, row) -> dict | None:
        if row is None:
            return None
        return {"name": row[0], "organizer": bool(row[1]), "topics": json.loads(row[2]), "created": row[3],
                "revoked": row[4], "generation": int(row[5])}

    def add_account(self, name: str, token_hash: str, *, organizer: bool = False, topics: Iterable[str] = ()) -> dict:
        """Record an account with the SHA-256 of its login token (the token itself is never
        stored). An active account of that name is ``[assessor-exists]``; a revoked one is
        given the new token and comes back with its sessions' generation moved on."""
        tops = [str(t) for t in topics]
        with self.transaction() as db:
            row = db.execute("SELECT revoked, generation FROM campaign_accounts WHERE name = ?", (name,)).fetchone()
            if row is not None and row[0] is None:
                raise InputError("assessor-exists", f"account {name!r} exists; revoke it first to issue a new link",
                                 file=str(self.path))
            now = _now_utc()
            if row is None:
                db.execute("INSERT INTO campaign_accounts VALUES (?, ?, ?, ?, ?, NULL, 1)",
                           (name, token_hash, int(organizer), json.dumps(tops), now))
            else:
                db.execute("UPDATE campaign_accounts SET token_hash = ?, organizer = ?, topics = ?, created = ?,"
                           " revoked = NULL, generation = generation + 1 WHERE name = ?",
                           (token_hash, int(organizer), json.dumps(tops), now, name))
        return self.account(name)

    def revoke_account(self, name: str) -> dict:
        """Revoke an account: its link and every session of it stop working at once
        (``[unknown-assessor]`` when there is no such account)."""
        with self.transaction() as db:
            cur = db.execute("UPDATE campaign_accounts SET revoked = COALESCE(revoked, ?), generation = generation + 1"
                             " WHERE name = ?", (_now_utc(), name))
            if cur.rowcount == 0:
                raise InputError("unknown-assessor", f"no account {name!r} in this campaign", file=str(self.path))
        return self.account(name)

    def account(self, name: str) -> dict | None:
        """The account ``name`` (revoked or not): ``name, organizer, topics, created, revoked,
        generation``; None when there is none."""
        return self._account(self._db.execute(f"SELECT {self._ACCOUNT_COLUMNS} FROM campaign_accounts WHERE name = ?",
                                              (name,)).fetchone())

    def account_by_token(self, token_hash: str) -> dict | None:
        """The active account whose login token has this SHA-256, or None."""
        return self._account(self._db.execute(f"SELECT {self._ACCOUNT_COLUMNS} FROM campaign_accounts"
                                              " WHERE token_hash = ? AND revoked IS NULL", (token_hash,)).fetchone())

    def accounts(self) -> list[dict]:
        """Every account, by name (no token hashes)."""
        rows = self._db.execute(f"SELECT {self._ACCOUNT_COLUMNS} FROM campaign_accounts ORDER BY name").fetchall()
        return [self._account(r) for r in rows]

    def web_secret(self) -> str:
        """The campaign's secret for signing web sessions: made once (random, 256 bits), kept in
        the store, never in a file of the repository."""
        with self.transaction() as db:
            db.execute("INSERT OR IGNORE INTO campaign_state VALUES ('web_secret', ?)",
                       (json.dumps(secrets.token_urlsafe(32)),))
            return json.loads(db.execute("SELECT value FROM campaign_state WHERE key = 'web_secret'").fetchone()[0])

    # -- preference tasks answered in the web app (qrelkit.campaign.prefs, docs/web.md) -----------

    _PREF_COLUMNS = ("task_id", "slot", "qid", "query", "kind", "pair_id", "doc_a", "doc_b", "left_docid", "right_docid",
                     "left_text", "right_text", "expected", "offtopic_qid", "exclude_workers")

    def add_pref_tasks(self, tasks: pd.DataFrame, assignments: Mapping[str, list[str]]) -> int:
        """Store preference tasks (rows of :data:`qrelkit.prefs.TASK_SCHEMA`) and their assessors
        (``task_id -> names``) in one transaction; a task id already stored is ``[tasks-exist]``
        and nothing is written. Returns the number of tasks stored."""
        rows = []
        for r in tasks[list(self._PREF_COLUMNS)].itertuples(index=False):
            d = r._asdict()
            d["slot"] = int(d["slot"])
            d["exclude_workers"] = json.dumps(sorted(str(w) for w in (d["exclude_workers"] or [])))
            for c in ("expected", "offtopic_qid"):
                d[c] = None if d[c] is None or pd.isna(d[c]) or d[c] == "" else str(d[c])
            rows.append(tuple(d[c] for c in self._PREF_COLUMNS))
        ids = list(dict.fromkeys(str(t) for t in tasks["task_id"]))
        with self.transaction() as db:
            for t in ids:
                if db.execute("SELECT 1 FROM campaign_pref_tasks WHERE task_id = ?", (t,)).fetchone():
                    raise InputError("tasks-exist", f"preference task {t} exists already (give another --prefix)",
                                     file=str(self.path))
            db.executemany(f"INSERT INTO campaign_pref_tasks VALUES ({', '.join('?' * len(self._PREF_COLUMNS))})", rows)
            db.executemany("INSERT OR IGNORE INTO campaign_pref_assign VALUES (?, ?, ?)",
                           [(t, a, i) for t in ids for i, a in enumerate(assignments.get(t, []))])
        return len(ids)

    def pref_tasks(self, task_id: str | None = None) -> pd.DataFrame:
        """The preference tasks (of ``task_id`` when given) in the task table's columns, in the
        order they were stored, slots in order; ``exclude_workers`` as lists."""
        where, params = sql_filters({"task_id": task_id})
        df = self._query(f"SELECT {', '.join(self._PREF_COLUMNS)} FROM campaign_pref_tasks"
                         + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY rowid", params)
        df["exclude_workers"] = [json.loads(v) for v in df["exclude_workers"]]
        return df

    def pref_assignments(self, assessor: str | None = None) -> pd.DataFrame:
        """``task_id, assessor, position`` of every preference task's assessors (of one assessor
        when given), in task order."""
        where, params = sql_filters({"a.assessor": assessor}, prefix=" AND ")
        return self._query("SELECT a.task_id, a.assessor, a.position FROM campaign_pref_assign a JOIN"
                           " (SELECT task_id, MIN(rowid) AS r FROM campaign_pref_tasks GROUP BY task_id) t"
                           " ON t.task_id = a.task_id WHERE 1 = 1" + "".join(where) + " ORDER BY t.r, a.position", params)

    def assign_pref(self, task_id: str, assessor: str, *, instead_of: str | None = None) -> bool:
        """Give preference task ``task_id`` to ``assessor`` (in place of ``instead_of`` when given:
        one transaction); returns whether anything changed."""
        with self.transaction() as db:
            if instead_of is not None:
                db.execute("DELETE FROM campaign_pref_assign WHERE task_id = ? AND assessor = ?", (task_id, instead_of))
            n = db.execute("SELECT COALESCE(MAX(position) + 1, 0) FROM campaign_pref_assign WHERE task_id = ?",
                           (task_id,)).fetchone()[0]
            cur = db.execute("INSERT OR IGNORE INTO campaign_pref_assign VALUES (?, ?, ?)", (task_id, assessor, n))
            return cur.rowcount > 0

    def answer_pref(self, task_id: str, slot: int, assessor: str, choice: str) -> bool:
        """Record one answer (``left``/``right``) in one transaction; True when stored, False
        when the same answer is in force already (a retry: nothing written). Another answer to
        the same slot by the same assessor while one is in force is ``[conflict]`` (undo it
        first: :meth:`retract_pref`); a slot that was not issued ``[unknown-item]``."""
        now = _now_utc()
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM campaign_pref_tasks WHERE task_id = ? AND slot = ?",
                          (task_id, int(slot))).fetchone() is None:
                raise InputError("unknown-item", f"task {task_id} has no comparison {slot}")
            old = db.execute("SELECT choice FROM live_pref_answers WHERE task_id = ? AND slot = ? AND assessor = ?",
                             (task_id, int(slot), assessor)).fetchone()
            if old is not None:
                if old[0] != choice:
                    raise InputError("conflict", f"comparison {slot} of task {task_id} was answered {old[0]} already")
                return False
            db.execute("INSERT INTO campaign_pref_answers (task_id, slot, assessor, choice, answered) VALUES (?, ?, ?, ?, ?)",
                       (task_id, int(slot), assessor, choice, now))
            return True

    def retract_pref(self, task_id: str, assessor: str, slot: int, *, answer: int | None = None,
                     source: str = "web-undo") -> dict[str, Any]:
        """Undo ``assessor``'s most recent answer in force of task ``task_id``, which must be
        the answer to comparison ``slot`` (the undo names what it undoes: a retried undo never
        undoes a second answer), by appending a row to ``campaign_pref_retractions`` (one
        transaction; the answer's row stays in the log). Returns ``task_id, slot, choice,
        answer`` (its log seq) and ``status``: ``retracted``, or ``repeated`` when that answer
        was undone already and nothing was answered in the task since (a retry: nothing
        written). Refused: ``[task-finished]`` once every comparison of the task is answered (the
        screening has used the answers), ``[nothing-to-undo]`` without an answer in force,
        ``[conflict]`` when the last answer in force is to another comparison, ``[unknown-item]``
        for a task that does not exist. ``answer``, when given, is the log seq of the answer the
        undo means (what the page showed): an undo replayed after that comparison was answered
        again is then ``repeated``, never an undo of the new answer."""
        slot = int(slot)
        with self.transaction() as db:
            if answer is not None:
                done = db.execute("SELECT a.slot, a.choice FROM campaign_pref_retractions r JOIN campaign_pref_answers a"
                                  " ON a.seq = r.answer WHERE r.answer = ? AND a.task_id = ? AND a.assessor = ?",
                                  (int(answer), task_id, assessor)).fetchone()
                if done is not None and int(done[0]) == slot:
                    return {"task_id": task_id, "slot": slot, "choice": done[1], "answer": int(answer),
                            "status": "repeated"}
            size = db.execute("SELECT COUNT(*) FROM campaign_pref_tasks WHERE task_id = ?", (task_id,)).fetchone()[0]
            if not size:
                raise InputError("unknown-item", f"no preference task {task_id}")
            live = db.execute("SELECT seq, slot, choice FROM live_pref_answers WHERE task_id = ? AND assessor = ?"
                              " ORDER BY seq DESC", (task_id, assessor)).fetchall()
            if len(live) >= size:
                raise InputError("task-finished", f"task {task_id} is finished (every comparison answered, the "
                                 "screening has run on it): its answers can no longer be undone")
            if live and int(live[0][1]) == slot and answer is not None and int(live[0][0]) != int(answer):
                raise InputError("conflict", f"your last answer to comparison {slot} of task {task_id} is not the "
                                 "one this undo names: reload the page")
            if live and int(live[0][1]) == slot:
                db.execute("INSERT INTO campaign_pref_retractions (answer, retracted_by, retracted, source)"
                           " VALUES (?, ?, ?, ?)", (live[0][0], assessor, _now_utc(), source))
                return {"task_id": task_id, "slot": slot, "choice": live[0][2], "answer": int(live[0][0]),
                        "status": "retracted"}
            last = db.execute("SELECT a.seq, a.slot, a.choice FROM campaign_pref_retractions r JOIN campaign_pref_answers"
                              " a ON a.seq = r.answer WHERE a.task_id = ? AND a.assessor = ? ORDER BY r.seq DESC LIMIT 1",
                              (task_id, assessor)).fetchone()
            if last is not None and int(last[1]) == slot and (not live or live[0][0] < last[0]):
                return {"task_id": task_id, "slot": slot, "choice": last[2], "answer": int(last[0]), "status": "repeated"}
            if not live:
                raise InputError("nothing-to-undo", f"you have no answer to undo in task {task_id}")
            raise InputError("conflict", f"your last answer in task {task_id} is to comparison {live[0][1]}, "
                             f"not {slot}: reload the page")

    def pref_answers(self, assessor: str | None = None, task_id: str | None = None) -> pd.DataFrame:
        """The answers in force (``task_id, slot, worker, choice``: the columns ``qrelkit prefs
        import`` reads; undone answers left out) of one assessor and/or task when given, in
        answering order."""
        where, params = sql_filters({"assessor": assessor, "task_id": task_id})
        return self._query("SELECT task_id, slot, assessor AS worker, choice FROM live_pref_answers"
                           + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY seq", params)

    def pref_answer_log(self, task_id: str | None = None) -> pd.DataFrame:
        """The audit trail: every answer ever given (of ``task_id`` when given), in log order —
        ``seq, task_id, slot, worker, choice, answered`` and, for an undone one, ``retracted``
        (time), ``retracted_by`` and ``source`` (None for an answer in force)."""
        where, params = sql_filters({"a.task_id": task_id})
        return self._query("SELECT a.seq, a.task_id, a.slot, a.assessor AS worker, a.choice, a.answered, r.retracted,"
                           " r.retracted_by, r.source FROM campaign_pref_answers a LEFT JOIN campaign_pref_retractions r"
                           " ON r.answer = a.seq" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY a.seq",
                           params)


def _vet_assigned(db) -> dict[int, tuple[str, str]]:
    """The rows of an import (``temp._in``) whose batch the campaign never issued, or whose
    assessor the batch was not issued to: ``{row: (rule, message)}``."""
    out: dict[int, tuple[str, str]] = {}
    for i, batch in db.execute("SELECT n.i, n.batch FROM temp._in n WHERE n.batch NOT IN (SELECT id FROM batches)"):
        out[i] = ("unknown-batch", f"batch {batch!r} was never issued in this campaign ('qrelkit campaign status' "
                  "lists the batches out)")
    rows = db.execute("SELECT n.i, n.batch, n.assessor, (SELECT group_concat(a.assessor, char(31)) FROM"
                      " campaign_assignments a WHERE a.batch = n.batch) FROM temp._in n JOIN batches b ON b.id = n.batch"
                      " WHERE NOT EXISTS (SELECT 1 FROM campaign_assignments a WHERE a.batch = n.batch"
                      " AND a.assessor = n.assessor)").fetchall()
    for i, batch, assessor, names in rows:
        names = sorted((names or "").split("\x1f")) if names else []
        close = [n for n in names if n.casefold() == str(assessor).casefold()]
        hint = f"; did you mean {close[0]!r}?" if close else ""
        whom = f"to {', '.join(repr(n) for n in names)}" if names else "to no assessor (it is not an assessors' batch)"
        out[i] = ("not-assigned", f"batch {batch!r} was issued {whom}, not to {assessor!r}{hint}")
    return out


def describe_change(change: Mapping[str, Any]) -> str:
    """``[pool] depth 10 -> 20``: one changed key (:func:`qrelkit.config.changed_values`)."""
    return f"[{change['section']}] {change['key']} {format_value(change['old'])} -> {format_value(change['new'])}"


def check_config_values(store: CampaignStore, path: Path) -> None:
    """The campaign's protocol file ``path`` changed on disk: nothing to say when its values are
    still the campaign's (a comment, blank lines, keys moved: :meth:`CampaignStore.config`);
    ``[input-changed]`` naming the first key whose value changed (and how many others) and how
    to go on otherwise."""
    changes = changed_values(store.config(), store.protocol_file_config())
    if not changes:
        return
    first, more = changes[0], len(changes) - 1
    others = f" (and {more} other key{'s' if more > 1 else ''})" if more else ""
    m = re.fullmatch(r"(.*):(\d+)", str(first["where"]))
    d = store.path.parent
    raise InputError("input-changed", f"the campaign's protocol file changed since init: {describe_change(first)}"
                     f"{others}; restore it, or adopt it for the stages not run yet ('qrelkit campaign adopt-config "
                     f"{d}'), or start a new campaign with this one's judgments ('qrelkit campaign export {d}', "
                     "then 'campaign init ... --qrels')", file=str(path), line=int(m.group(2)) if m else None)


def campaign_path(directory: str | os.PathLike) -> Path:
    """The path of the campaign store (``campaign.db``) in the campaign folder ``directory``."""
    return Path(directory) / STORE_NAME


def open_campaign_store(directory: str | os.PathLike, *, timeout: float = 60.0,
                        check_same_thread: bool = True, readonly: bool = False) -> CampaignStore:
    """Open the :class:`CampaignStore` of the campaign folder ``directory`` (``timeout``: seconds to
    wait for the write lock; ``check_same_thread=False``: the connection may be used from another
    thread than the one that opened it, one thread at a time; ``readonly``: nothing can be
    written, an older store is not migrated); no store there is ``[not-a-campaign]``."""
    p = campaign_path(directory)
    if not p.is_file():
        raise InputError("not-a-campaign", "no campaign here (create one with 'qrelkit campaign init')",
                         file=str(directory))
    return CampaignStore(p, timeout=timeout, check_same_thread=check_same_thread, readonly=readonly)
