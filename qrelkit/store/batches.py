"""Batches and their assessors, in SQLite: the batches issued to assessors and their items
(tables ``batches``, ``batch_items``; :class:`~qrelkit.store.interfaces.Batches`) and, in a
campaign store, who judges each batch (``campaign_assignments``;
:class:`~qrelkit.store.interfaces.Assignments`)."""

from __future__ import annotations

import os
from typing import Iterable, Mapping, Sequence

import pandas as pd

from qrelkit.errors import InputError
from qrelkit.store.interfaces import BATCH_KINDS, THREADS, Assignments, Batches, ImportReport, JudgmentLog
from qrelkit.store.sqlite import Database, SqliteAggregate, now, sql_filters


class SqliteBatches(SqliteAggregate, Batches):
    """:class:`~qrelkit.store.interfaces.Batches` in a store file; its status (``open``,
    ``complete``) follows the judgments in force of its items (:meth:`complete`, :meth:`reopen`,
    :meth:`recheck`, called in the judgment log's transactions)."""

    def issue(self, topic: str, thread: str | None, passages: Sequence[str], *, kind: str = "cal",
              iteration: int | None = None, batch_id: str | None = None) -> str:
        topic = str(topic)
        if kind not in BATCH_KINDS:
            raise InputError("bad-option", f"batch kind must be one of {', '.join(BATCH_KINDS)}, got {kind!r}")
        if kind == "cal" and thread not in THREADS:
            raise InputError("bad-option", f"a cal batch needs a thread ({', '.join(THREADS)}), got {thread!r}")
        items = [str(p) for p in passages]
        if len(set(items)) != len(items):
            raise InputError("duplicate-item", f"a batch for topic {topic} lists a passage twice")
        with self._db.transaction() as db:
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
                       (bid, topic, thread, iteration, kind, now()))
            db.executemany("INSERT INTO batch_items (batch, position, passage) VALUES (?, ?, ?)",
                           [(bid, i + 1, p) for i, p in enumerate(items)])
        return bid

    def exists(self, batch_id: str) -> bool:
        """Whether the store has batch ``batch_id``."""
        return self._conn.execute("SELECT 1 FROM batches WHERE id = ?", (batch_id,)).fetchone() is not None

    def all(self, topic: str | None = None, thread: str | None = None, *, counts: bool = True) -> pd.DataFrame:
        where, params = sql_filters({"b.topic": topic, "b.thread": thread})
        sql = ("SELECT b.id AS batch_id, b.topic AS qid, b.thread, b.iteration, b.kind, b.status"
               + (", (SELECT COUNT(*) FROM batch_items i WHERE i.batch = b.id) AS items,"
                  " (SELECT COUNT(DISTINCT j.topic || char(31) || j.passage) FROM live_judgments j WHERE j.batch = b.id) AS judged"
                  if counts else "") + " FROM batches b" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY b.seq")
        df = self._query(sql, params)
        df["iteration"] = df["iteration"].astype("Int64")
        return df

    def issued_passages(self, topic: str, thread: str | None = None, *, max_batch_seq: int | None = None) -> list[str]:
        sql = ("SELECT i.passage FROM batch_items i JOIN batches b ON b.id = i.batch WHERE b.topic = ? AND b.kind <> 'sample'")
        params: list = [str(topic)]
        if thread not in (None, "all"):
            sql += " AND (b.kind = 'pool' OR b.thread = ?)"
            params.append(thread)
        if max_batch_seq is not None:
            sql += " AND b.seq <= ?"
            params.append(int(max_batch_seq))
        rows = self._conn.execute(sql + " ORDER BY b.seq, i.position", params).fetchall()
        return list(dict.fromkeys(r[0] for r in rows))

    def issued_items(self, topic: str | None = None) -> pd.DataFrame:
        return self._query("SELECT b.topic AS qid, b.thread, b.kind, i.passage FROM batch_items i JOIN batches b"
                           " ON b.id = i.batch WHERE b.kind <> 'sample'" + (" AND b.topic = ?" if topic is not None else "")
                           + " ORDER BY b.seq, i.position", () if topic is None else (str(topic),))

    def items(self) -> pd.DataFrame:
        return self._query("SELECT b.id AS batch_id, b.topic AS qid, i.passage AS docid FROM batch_items i"
                           " JOIN batches b ON b.id = i.batch ORDER BY b.seq, i.position")

    def lost_copies(self) -> pd.DataFrame:
        return self._query(
            "SELECT b.id AS batch_id, b.topic AS qid, i.passage AS docid FROM batches b JOIN batch_items i ON i.batch = b.id"
            " WHERE b.kind = 'cal' AND b.status = 'open' AND NOT EXISTS (SELECT 1 FROM live_judgments j WHERE j.batch = b.id"
            " AND j.passage = i.passage) AND EXISTS (SELECT 1 FROM live_judgments j JOIN batches x ON x.id = j.batch"
            " WHERE j.topic = b.topic AND j.passage = i.passage AND x.seq < b.seq) ORDER BY b.seq, i.position")

    # -- the status of batches, as the judgment log's transactions change it -------------------------

    def register(self, topics: Mapping[str, set[str]], created: str) -> None:
        """Register batch ids an import met that the store does not know (batch id -> its rows'
        topics) as complete ``pool`` batches shared by every thread, in the order given: a
        batch's topic when it has exactly one."""
        if topics:
            with self._db.transaction() as db:
                db.executemany("INSERT INTO batches (id, topic, thread, iteration, kind, created, status)"
                               " VALUES (?, ?, NULL, NULL, 'pool', ?, 'complete')",
                               [(b, next(iter(t)) if len(t) == 1 else None, created) for b, t in topics.items()])

    def complete(self, batch_ids: Iterable[str]) -> None:
        """Mark complete the open batches among ``batch_ids`` whose every item is judged."""
        with self._db.transaction() as db:
            db.executemany("UPDATE batches SET status = 'complete' WHERE id = ? AND status = 'open' AND NOT EXISTS"
                           " (SELECT 1 FROM batch_items i WHERE i.batch = batches.id AND NOT EXISTS"
                           " (SELECT 1 FROM live_judgments j WHERE j.batch = i.batch AND j.passage = i.passage))",
                           [(b,) for b in batch_ids])

    def reopen(self, batch_id: str) -> None:
        """Mark batch ``batch_id`` open again when it is complete and an item of it is left without
        a judgment."""
        with self._db.transaction() as db:
            db.execute("UPDATE batches SET status = 'open' WHERE id = ? AND status = 'complete' AND EXISTS"
                       " (SELECT 1 FROM batch_items i WHERE i.batch = batches.id AND NOT EXISTS"
                       " (SELECT 1 FROM live_judgments j WHERE j.batch = i.batch AND j.passage = i.passage))",
                       (str(batch_id),))

    def recheck(self, batch_ids: Iterable[str]) -> None:
        """Mark each of ``batch_ids`` that has items open or complete, as its items are judged."""
        with self._db.transaction() as db:
            for b in batch_ids:
                db.execute("UPDATE batches SET status = CASE WHEN EXISTS (SELECT 1 FROM batch_items i WHERE i.batch ="
                           " batches.id AND NOT EXISTS (SELECT 1 FROM live_judgments j WHERE j.batch = i.batch AND"
                           " j.passage = i.passage)) THEN 'open' ELSE 'complete' END WHERE id = ? AND EXISTS"
                           " (SELECT 1 FROM batch_items i WHERE i.batch = batches.id)", (b,))


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


def _claimed(db, batch_id: str, names: list[str]) -> list[str]:
    """``names``, the assessors of batch ``batch_id``, with the claims of its topic applied in the
    order they were made: each gives its assessor's place to its claimer, unless the claimer has
    one already (an item is judged by distinct assessors)."""
    out = list(names)
    for who, to in db.execute("SELECT c.assessor, c.claimer FROM campaign_claims c JOIN batches b ON b.topic = c.qid"
                              " WHERE b.id = ? ORDER BY c.seq", (batch_id,)):
        if who in out and to not in out:
            out[out.index(who)] = to
    return out


class SqliteAssignments(SqliteAggregate, Assignments):
    """:class:`~qrelkit.store.interfaces.Assignments` in a campaign store file, over its batches
    and judgment log."""

    def __init__(self, db: Database, batches: SqliteBatches, judgments: JudgmentLog) -> None:
        super().__init__(db)
        self._batches, self._judgments = batches, judgments

    def issue(self, topic: str, passages: list[str], batch_id: str, assessors: list[str], *,
              kind: str = "pool", thread: str | None = None) -> str:
        if not self._batches.exists(batch_id):
            self._batches.issue(topic, thread, passages, kind=kind, batch_id=batch_id)
        self.assign({batch_id: assessors})
        return batch_id

    def assign(self, assessors: Mapping[str, list[str]]) -> None:
        if not assessors:
            return
        with self._db.transaction() as db:
            rows = []
            for b, names in assessors.items():
                if db.execute("SELECT 1 FROM campaign_assignments WHERE batch = ?", (str(b),)).fetchone() is None:
                    rows += [(str(b), a, i) for i, a in enumerate(_claimed(db, str(b), [str(n) for n in names]))]
            db.executemany("INSERT OR IGNORE INTO campaign_assignments VALUES (?, ?, ?)", rows)

    def claim(self, topic: str, assessor: str, claimer: str) -> int:
        topic, old, new = str(topic), str(assessor), str(claimer)
        with self._db.transaction() as db:
            db.execute("INSERT OR IGNORE INTO campaign_claims (qid, assessor, claimer, claimed) VALUES (?, ?, ?, ?)",
                       (topic, old, new, now()))
            cur = db.execute("UPDATE campaign_assignments SET assessor = ? WHERE assessor = ? AND batch IN"
                             " (SELECT id FROM batches WHERE topic = ?) AND NOT EXISTS (SELECT 1 FROM campaign_assignments x"
                             " WHERE x.batch = campaign_assignments.batch AND x.assessor = ?) AND NOT EXISTS"
                             " (SELECT 1 FROM live_judgments j WHERE j.batch = campaign_assignments.batch AND j.assessor = ?)",
                             (new, old, topic, new, old))
            return cur.rowcount

    def claims(self, topic: str | None = None) -> pd.DataFrame:
        where, params = sql_filters({"qid": topic})
        return self._query("SELECT qid, assessor, claimer FROM campaign_claims" + (" WHERE " + " AND ".join(where)
                           if where else "") + " ORDER BY seq", params)

    def all(self) -> pd.DataFrame:
        return self._query("SELECT a.batch AS batch_id, a.assessor, b.topic AS qid, b.thread, b.kind FROM"
                           " campaign_assignments a JOIN batches b ON b.id = a.batch ORDER BY b.seq, a.position")

    def import_files(self, files: Iterable[str | os.PathLike], *, lenient: bool = False,
                     scale: Iterable[int] | None = (0, 1, 2, 3)) -> ImportReport:
        return self._judgments.import_files(list(files), lenient=lenient, scale=scale, vet=_vet_assigned)

    #: items an assigned assessor still owes (see :meth:`pending`); ``{where}``: more conditions
    _PENDING_SQL = (
        "SELECT {columns} FROM campaign_assignments a JOIN batches b ON b.id = a.batch JOIN batch_items i ON i.batch = b.id"
        " WHERE NOT EXISTS (SELECT 1 FROM live_judgments j WHERE j.topic = b.topic AND j.passage = i.passage"
        "                   AND j.assessor = a.assessor AND j.batch = b.id)"
        " AND NOT EXISTS (SELECT 1 FROM live_judgments j WHERE j.topic = b.topic AND j.passage = i.passage"
        "                 AND j.batch <> b.id AND j.source <> 'encountered'"
        "                 AND (SELECT seq FROM batches x WHERE x.id = j.batch) < b.seq){where}")

    def pending(self, assessor: str | None = None, topic: str | None = None) -> pd.DataFrame:
        where, params = sql_filters({"a.assessor": assessor, "b.topic": topic}, prefix=" AND ")
        cols = "b.id AS batch_id, b.topic AS qid, b.thread, b.kind, a.assessor, i.position, i.passage AS docid"
        return self._query(self._PENDING_SQL.format(columns=cols, where="".join(where))
                           + " ORDER BY b.seq, a.position, i.position", params)

    def owed_in_batch(self, assessor: str, batch_id: str, docid: str | None = None) -> list[str]:
        where, params = sql_filters({"a.assessor": assessor, "b.id": batch_id, "i.passage": docid}, prefix=" AND ")
        return [str(r[0]) for r in self._conn.execute(
            self._PENDING_SQL.format(columns="i.passage", where="".join(where)) + " ORDER BY i.position", params)]

    def owed_items(self, assessor: str, topic: str) -> list[tuple[str, str, str]]:
        return [(str(b), str(k), str(d)) for b, k, d in self._conn.execute(
            self._PENDING_SQL.format(columns="b.id, b.kind, i.passage", where=" AND a.assessor = ? AND b.topic = ?")
            + " ORDER BY b.seq, a.position, i.position", (str(assessor), str(topic)))]

    def topic_owed(self, qid: str) -> bool:
        return self._conn.execute(self._PENDING_SQL.format(columns="1", where=" AND b.topic = ?") + " LIMIT 1",
                                  (str(qid),)).fetchone() is not None

    def assigned_topic_set(self, assessor: str) -> set[str]:
        rows = self._conn.execute("SELECT DISTINCT b.topic FROM campaign_assignments a JOIN batches b ON b.id = a.batch"
                                  " WHERE a.assessor = ?", (str(assessor),)).fetchall()
        return {str(r[0]) for r in rows}

    def assignment(self, batch_id: str, assessor: str) -> dict | None:
        row = self._conn.execute("SELECT b.topic, b.kind, b.status FROM campaign_assignments a JOIN batches b"
                                 " ON b.id = a.batch WHERE a.batch = ? AND a.assessor = ?",
                                 (str(batch_id), str(assessor))).fetchone()
        if row is None:
            return None
        items = [r[0] for r in self._conn.execute("SELECT passage FROM batch_items WHERE batch = ? ORDER BY position",
                                                  (str(batch_id),))]
        return {"qid": str(row[0]), "kind": row[1], "status": row[2], "items": items}

    def reassign(self, batch_id: str, old: str, new: str) -> bool:
        with self._db.transaction() as db:
            cur = db.execute("UPDATE campaign_assignments SET assessor = ? WHERE batch = ? AND assessor = ? AND NOT EXISTS"
                             " (SELECT 1 FROM campaign_assignments x WHERE x.batch = ? AND x.assessor = ?) AND NOT EXISTS"
                             " (SELECT 1 FROM live_judgments j WHERE j.batch = ? AND j.assessor = ?)",
                             (str(new), str(batch_id), str(old), str(batch_id), str(new), str(batch_id), str(old)))
            return cur.rowcount > 0
