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
campaign_state        key, value: the oracle used, the input paths, ...
campaign_warnings     seq, stage, message: every warning met (counted in the report)
campaign_cal          qid, round, phase: each topic's CAL round and its phase (``issue`` or
                      ``judge``; a topic without a row is at round 0, ``judge``) — schema 2
====================  ===========================================================================

Schema history: 1 (first); 2 adds ``campaign_cal`` (CAL rounds per topic instead of one round
for every topic in ``campaign_state``; a version 1 store's round and phase become every topic's).

Every write is one transaction (``BEGIN IMMEDIATE``): a kill leaves the previous state.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from qrelkit.cal.store import JudgingStore
from qrelkit.errors import InputError

CAMPAIGN_SCHEMA_VERSION = 2
STORE_NAME = "campaign.db"

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
    phase TEXT NOT NULL CHECK (phase IN ('issue', 'judge')))
"""
_CAL_TABLE = _CAMPAIGN_SCHEMA.split(";\n")[-1]
CAL_PHASES = ("issue", "judge")


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


def _migrate(db, version: int) -> None:
    """Bring a campaign store written by an older schema up to :data:`CAMPAIGN_SCHEMA_VERSION`,
    inside the opening transaction. 1 -> 2: the table ``campaign_cal``; the one CAL round and
    phase of version 1 (``campaign_state`` ``cal_round``, ``cal_phase``) become every topic's
    (version 1 advanced every topic in step), and leave ``campaign_state``."""
    if version < 2:
        db.execute(_CAL_TABLE)
        state = {k: json.loads(v) for k, v in db.execute(
            "SELECT key, value FROM campaign_state WHERE key IN ('cal_round', 'cal_phase')")}
        round_, phase = int(state.get("cal_round", 0) or 0), str(state.get("cal_phase", "judge") or "judge")
        if round_ or phase != "judge":
            db.execute("INSERT OR IGNORE INTO campaign_cal SELECT qid, ?, ? FROM topics", (round_, phase))
        db.execute("DELETE FROM campaign_state WHERE key IN ('cal_round', 'cal_phase')")
    db.execute("UPDATE meta SET value = ? WHERE key = 'campaign_schema_version'", (str(CAMPAIGN_SCHEMA_VERSION),))


class CampaignStore(JudgingStore):
    """A judging store with the campaign's tables (see the module documentation)."""

    def __init__(self, path: str | os.PathLike, *, create: bool = False, timeout: float = 60.0,
                 synchronous: str = "FULL", check_same_thread: bool = True) -> None:
        super().__init__(path, timeout=timeout, synchronous=synchronous, check_same_thread=check_same_thread,
                         _create=create)
        try:
            with self.transaction() as db:
                if create:
                    for stmt in _CAMPAIGN_SCHEMA.split(";\n"):
                        if stmt.strip():
                            db.execute(stmt)
                    db.execute("INSERT OR IGNORE INTO meta VALUES ('campaign_schema_version', ?)",
                               (str(CAMPAIGN_SCHEMA_VERSION),))
                row = db.execute("SELECT value FROM meta WHERE key = 'campaign_schema_version'").fetchone()
                if row is None:
                    raise InputError("not-a-campaign", "a judging store, but not a campaign store", file=str(self.path))
                version = int(row[0])
                if version > CAMPAIGN_SCHEMA_VERSION:
                    raise InputError("not-a-campaign", f"campaign schema {version} is newer than this qrelkit "
                                     f"({CAMPAIGN_SCHEMA_VERSION})", file=str(self.path))
                if version < CAMPAIGN_SCHEMA_VERSION:
                    _migrate(db, version)
        except BaseException:
            self.close()
            raise

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
        when its modification time moved); ``[input-missing]`` when it is gone.

        ``seen`` (path -> (size, mtime_ns), filled here): a file whose size and modification time
        are those seen at an earlier check passes without reading it again (a long-lived runner
        checks cheaply); any other is checked in full and, when it passes, remembered."""
        for name, path, size, mtime, digest in self.inputs().itertuples(index=False):
            p = Path(path)
            if not p.is_file():
                raise InputError("input-missing", f"the campaign's {name} input is gone since init", file=path)
            st = p.stat()
            now = (int(st.st_size), int(st.st_mtime_ns))
            if seen is not None and seen.get(path) == now:
                continue
            if st.st_size != size or (st.st_mtime_ns != mtime and sha256_file(p) != digest):
                raise InputError("input-changed", f"the campaign's {name} input changed on disk since init "
                                 f"(recorded sha256 {digest[:12]}...); restore it or start a new campaign", file=path)
            if seen is not None:
                seen[path] = now

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

    def get_state(self, key: str, default: Any = None) -> Any:
        row = self._db.execute("SELECT value FROM campaign_state WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def set_state(self, **values: Any) -> None:
        with self.transaction() as db:
            db.executemany("INSERT OR REPLACE INTO campaign_state VALUES (?, ?)",
                           [(k, json.dumps(v, sort_keys=True)) for k, v in values.items()])

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

    def campaign_topics(self) -> pd.DataFrame:
        df = self._query("SELECT t.qid, c.screening, c.screened, c.screened_relevant, c.decision, c.rule, c.reason"
                         " FROM topics t LEFT JOIN campaign_topics c ON c.qid = t.qid")
        return self._order(df)

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

    def pending(self) -> pd.DataFrame:
        """Items an assigned assessor still owes: ``batch_id, qid, thread, kind, assessor,
        position, docid`` in issue order. An item judged in another batch of the topic (a CAL
        batch's encountered passages) is owed by nobody."""
        return self._query(
            "SELECT b.id AS batch_id, b.topic AS qid, b.thread, b.kind, a.assessor, i.position, i.passage AS docid"
            " FROM campaign_assignments a JOIN batches b ON b.id = a.batch JOIN batch_items i ON i.batch = b.id"
            " WHERE NOT EXISTS (SELECT 1 FROM judgments j WHERE j.batch = b.id AND j.passage = i.passage"
            "                   AND j.assessor = a.assessor)"
            " AND NOT EXISTS (SELECT 1 FROM judgments j WHERE j.topic = b.topic AND j.passage = i.passage"
            "                 AND j.batch <> b.id AND j.source <> 'encountered'"
            "                 AND (SELECT seq FROM batches x WHERE x.id = j.batch) < b.seq)"
            " ORDER BY b.seq, a.position, i.position")

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
            " WHERE b.kind = 'cal' AND b.status = 'open' AND NOT EXISTS (SELECT 1 FROM judgments j WHERE j.batch = b.id"
            " AND j.passage = i.passage) AND EXISTS (SELECT 1 FROM judgments j JOIN batches x ON x.id = j.batch"
            " WHERE j.topic = b.topic AND j.passage = i.passage AND x.seq < b.seq) ORDER BY b.seq, i.position")


def campaign_path(directory: str | os.PathLike) -> Path:
    """The path of the campaign store (``campaign.db``) in the campaign folder ``directory``."""
    return Path(directory) / STORE_NAME


def open_campaign_store(directory: str | os.PathLike, *, timeout: float = 60.0,
                        check_same_thread: bool = True) -> CampaignStore:
    """Open the :class:`CampaignStore` of the campaign folder ``directory`` (``timeout``: seconds to
    wait for the write lock; ``check_same_thread=False``: the connection may be used from another
    thread than the one that opened it, one thread at a time); no store there is ``[not-a-campaign]``."""
    p = campaign_path(directory)
    if not p.is_file():
        raise InputError("not-a-campaign", "no campaign here (create one with 'qrelkit campaign init')",
                         file=str(directory))
    return CampaignStore(p, timeout=timeout, check_same_thread=check_same_thread)
