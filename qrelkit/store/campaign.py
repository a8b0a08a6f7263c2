"""The campaign store: a judging store (:mod:`qrelkit.store.judging`) plus the campaign's own
tables, in one SQLite file (``DIR/campaign.db``), and the aggregates a :class:`CampaignStore`
composes over it: ``topics``, ``batches``, ``judgments`` (a judging store's), ``assignments``
(:class:`~qrelkit.store.batches.SqliteAssignments`), ``state``
(:class:`~qrelkit.store.state.SqliteCampaignState`), ``accounts``
(:class:`~qrelkit.store.accounts.SqliteAccounts`) and ``prefs``
(:class:`~qrelkit.store.prefs.SqlitePreferences`).

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
                      reader of the answers reads (:meth:`~qrelkit.store.interfaces.Preferences.answers`) (schema 5)
campaign_claims       seq (order), qid, assessor, claimer, claimed (UTC time): the place of ``assessor``
                      on topic ``qid`` taken by ``claimer`` (the web app's free topic choice),
                      honoured whenever a batch of the topic is assigned
                      (:meth:`~qrelkit.store.interfaces.Assignments.claim`) (schema 6)
campaign_links        token_hash, account, issued, used (UTC times): every login link issued; a
                      link is exchanged once for a session (``used``) (schema 7)
campaign_sessions     sid, account, generation, created, last_seen, ended (UTC times): the web
                      app's sessions; logout ends one, an idle one expires (schema 7)
====================  ===========================================================================

Schema history: 1 (first); 2 adds ``campaign_cal`` (CAL rounds per topic instead of one round
for every topic in ``campaign_state``; a version 1 store's round and phase become every topic's);
3 adds ``campaign_accounts``; 4 the preference tables; 5 the retractions of preference answers
(undo in the web app): the table, the view, the triggers, and ``campaign_pref_answers`` rebuilt
without its version-4 ``UNIQUE (task_id, slot, assessor)`` (an undone comparison may be
answered again: a second row), its rows copied as they were (same seq, same times); 6 adds
``campaign_claims``, filled from the claims version 5 kept in ``campaign_state`` (``web_claims``:
``[qid, assessor, claimer]`` lists), which leave it; 7 adds ``campaign_links`` (the accounts'
current links, issued at the migration: an older link becomes one-use from then) and
``campaign_sessions`` (sessions made before have no row: their people log in again). Steps 3 to 7
create only what is missing (``CREATE ... IF NOT EXISTS``). A store of an older version is
migrated when opened for writing, in the opening transaction; opened read-only
(``readonly=True``) it is left as it is and the connection gets temporary stand-ins instead:
empty tables for those the version lacks, and a ``live_pref_answers`` view over the answers
(an older store has no retraction).

Every write is one transaction (``BEGIN IMMEDIATE``): a kill leaves the previous state.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from qrelkit.errors import InputError
from qrelkit.io.paths import CAMPAIGN_STORE
from qrelkit.store.accounts import SqliteAccounts, now_utc
from qrelkit.store.batches import SqliteAssignments, SqliteBatches
from qrelkit.store.judging import open_judging_file
from qrelkit.store.judgments import SqliteJudgmentLog
from qrelkit.store.prefs import SqlitePreferences
from qrelkit.store.sqlite import Database, SqliteStore, now
from qrelkit.store.state import SqliteCampaignState
from qrelkit.store.topics import SqliteTopics

STORE_NAME = CAMPAIGN_STORE  # qrelkit.io.paths: any command refuses to write in a folder holding it

CAMPAIGN_SCHEMA_VERSION = 7  # 2: campaign_cal; 3: campaign_accounts; 4: campaign_pref_tasks, _assign, _answers;
#                             5: campaign_pref_retractions, live_pref_answers; 6: campaign_claims;
#                             7: campaign_links, campaign_sessions

#: version 7: the login links (exchanged once for a session) and the web app's sessions
_SESSIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS campaign_links (
    token_hash TEXT PRIMARY KEY, account TEXT NOT NULL, issued TEXT NOT NULL, used TEXT);
CREATE TABLE IF NOT EXISTS campaign_sessions (
    sid TEXT PRIMARY KEY, account TEXT NOT NULL, generation INTEGER NOT NULL, created TEXT NOT NULL,
    last_seen TEXT NOT NULL, ended TEXT)
"""

#: version 6: the places of assessors taken by others on a topic (the web app's free topic choice)
_CLAIMS_SCHEMA = """
CREATE TABLE IF NOT EXISTS campaign_claims (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, qid TEXT NOT NULL REFERENCES topics(qid), assessor TEXT NOT NULL,
    claimer TEXT NOT NULL, claimed TEXT NOT NULL, UNIQUE (qid, assessor, claimer))
"""

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
""" + ";\n".join([_ACCOUNTS_SCHEMA, _PREFS_SCHEMA, _PREF_RETRACTIONS_SCHEMA, _CLAIMS_SCHEMA, _SESSIONS_SCHEMA])
_CAL_TABLE = next(s for s in _CAMPAIGN_SCHEMA.split(";\n") if "campaign_cal (" in s)


def _v1_cal_rounds(db) -> None:
    """Version 1's one CAL round and phase (``campaign_state`` ``cal_round``, ``cal_phase``) as
    every topic's row of ``campaign_cal`` (version 1 advanced every topic in step)."""
    state = {k: json.loads(v) for k, v in db.execute(
        "SELECT key, value FROM campaign_state WHERE key IN ('cal_round', 'cal_phase')")}
    round_, phase = int(state.get("cal_round", 0) or 0), str(state.get("cal_phase", "judge") or "judge")
    if round_ or phase != "judge":
        db.execute("INSERT OR IGNORE INTO campaign_cal SELECT qid, ?, ? FROM topics", (round_, phase))


def _v5_claims(db) -> None:
    """Version 5's claims (``campaign_state`` ``web_claims``: ``[qid, assessor, claimer]`` lists,
    in the order they were made) as rows of ``campaign_claims``."""
    row = db.execute("SELECT value FROM campaign_state WHERE key = 'web_claims'").fetchone()
    claims = json.loads(row[0]) if row else []
    db.executemany("INSERT OR IGNORE INTO campaign_claims (qid, assessor, claimer, claimed) VALUES (?, ?, ?, ?)",
                   [(str(q), str(a), str(c), now()) for q, a, c in claims])


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
    retractions, the view of the answers in force and the triggers; 5 -> 6 adds ``campaign_claims``
    with version 5's claims (:func:`_v5_claims`), which leave ``campaign_state``; 6 -> 7 the links
    (every account's current one, issued now) and the sessions."""
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
    if version < 6:
        db.execute(_CLAIMS_SCHEMA)
        _v5_claims(db)
        db.execute("DELETE FROM campaign_state WHERE key = 'web_claims'")
    if version < 7:
        for stmt in _SESSIONS_SCHEMA.split(";\n"):
            db.execute(stmt)
        db.execute("INSERT OR IGNORE INTO campaign_links SELECT token_hash, name, ?, NULL FROM campaign_accounts",
                   (now_utc(),))
    db.execute("UPDATE meta SET value = ? WHERE key = 'campaign_schema_version'", (str(CAMPAIGN_SCHEMA_VERSION),))


def _readonly_stand_ins(db, version: int) -> None:
    """A store of an older ``version`` opened read-only (nothing may be written): the tables it
    lacks as empty temporary ones (``campaign_cal`` and ``campaign_claims`` filled as the migration
    would fill them; no retraction before version 5), and the view of the answers in force over them."""
    if version < 2:
        db.execute(_CAL_TABLE.replace("CREATE TABLE", "CREATE TEMP TABLE").replace(" REFERENCES topics(qid)", ""))
        _v1_cal_rounds(db)
    if version < 3:
        db.execute(_ACCOUNTS_SCHEMA.replace("CREATE TABLE", "CREATE TEMP TABLE"))
    if version < 4:
        for stmt in _PREFS_SCHEMA.split(";\n"):
            db.execute(stmt.replace("CREATE TABLE", "CREATE TEMP TABLE"))
    if version < 6:
        db.execute(_CLAIMS_SCHEMA.replace("CREATE TABLE", "CREATE TEMP TABLE").replace(" REFERENCES topics(qid)", ""))
        _v5_claims(db)
    if version < 7:
        for stmt in _SESSIONS_SCHEMA.split(";\n"):
            db.execute(stmt.replace("CREATE TABLE", "CREATE TEMP TABLE"))
    if version < 5:
        db.execute(_PREF_RETRACTIONS_TABLE.replace("CREATE TABLE", "CREATE TEMP TABLE")
                   .replace(" REFERENCES campaign_pref_answers (seq)", ""))
        db.execute(_LIVE_PREF_VIEW.replace("CREATE VIEW", "CREATE TEMP VIEW"))


def _check_campaign_version(db, path: Path, *, readonly: bool) -> None:
        """``[not-a-campaign]`` for a judging store without the campaign's tables or of a newer
        campaign schema; an older one is migrated (or, read-only, given stand-ins)."""
        row = db.execute("SELECT value FROM meta WHERE key = 'campaign_schema_version'").fetchone()
        if row is None:
            raise InputError("not-a-campaign", "a judging store, but not a campaign store", file=str(path))
        version = int(row[0])
        if version > CAMPAIGN_SCHEMA_VERSION:
            raise InputError("not-a-campaign", f"campaign schema {version} is newer than this qrelkit "
                             f"({CAMPAIGN_SCHEMA_VERSION})", file=str(path))
        if version < CAMPAIGN_SCHEMA_VERSION:
            (_readonly_stand_ins if readonly else _migrate)(db, version)


class CampaignStore(SqliteStore):
    """A campaign's store (see the module documentation): a judging store's ``topics``,
    ``batches`` and ``judgments``, and the campaign's ``assignments``, ``state``, ``accounts`` and
    ``prefs``, over one SQLite file. Open with :func:`open_campaign_store`.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from qrelkit.store import CampaignStore
    >>> path = Path(tempfile.mkdtemp(), "campaign.db")
    >>> with CampaignStore(path, create=True) as store:
    ...     store.topics.add(["1"])
    ...     bid = store.assignments.issue("1", ["p1", "p2"], "1/pool", ["ann"])
    ...     store.assignments.pending("ann")["docid"].tolist()
    1
    ['p1', 'p2']
    """

    def __init__(self, path: str | os.PathLike, *, create: bool = False, timeout: float = 60.0,
                 synchronous: str = "FULL", check_same_thread: bool = True, readonly: bool = False) -> None:
        self.db = open_judging_file(path, create=create, timeout=timeout, synchronous=synchronous,
                                    check_same_thread=check_same_thread, readonly=readonly and not create)
        try:
            _open_campaign_tables(self.db, create=create, readonly=readonly)
        except BaseException:
            self.close()
            raise
        self.topics = SqliteTopics(self.db)
        self.batches = SqliteBatches(self.db)
        self.judgments = SqliteJudgmentLog(self.db, self.batches)
        self.assignments = SqliteAssignments(self.db, self.batches, self.judgments)
        self.state = SqliteCampaignState(self.db, self.topics)
        self.accounts = SqliteAccounts(self.db)
        self.prefs = SqlitePreferences(self.db)


def _open_campaign_tables(db: Database, *, create: bool, readonly: bool) -> None:
    """The campaign's tables of a judging store file: created (``create``), checked (a judging
    store without them, or of a newer campaign schema, is ``[not-a-campaign]``), migrated from an
    older schema — or, read-only, given stand-ins (:func:`_readonly_stand_ins`)."""
    if readonly and not create:
        _check_campaign_version(db.conn, db.path, readonly=True)
        return
    with db.transaction() as conn:
        if create:
            for stmt in _CAMPAIGN_SCHEMA.split(";\n"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('campaign_schema_version', ?)",
                         (str(CAMPAIGN_SCHEMA_VERSION),))
        _check_campaign_version(conn, db.path, readonly=False)


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
