"""Preference tasks answered in the web app, in SQLite (:class:`~qrelkit.store.interfaces.Preferences`):
tables ``campaign_pref_tasks`` (the task table's columns, ``exclude_workers`` as JSON),
``campaign_pref_assign`` (who answers a task), ``campaign_pref_answers`` (the append-only log of
answers) and ``campaign_pref_retractions`` (the append-only log of undone answers), and the view
``live_pref_answers`` (the answers in force); see :mod:`qrelkit.store.campaign`."""

from __future__ import annotations

import json
from typing import Any, Mapping

import pandas as pd

from qrelkit.errors import InputError
from qrelkit.store.accounts import now_utc
from qrelkit.store.interfaces import Preferences
from qrelkit.store.sqlite import SqliteAggregate, sql_filters


class SqlitePreferences(SqliteAggregate, Preferences):
    """:class:`~qrelkit.store.interfaces.Preferences` in a campaign store file."""

    _COLUMNS = ("task_id", "slot", "qid", "query", "kind", "pair_id", "doc_a", "doc_b", "left_docid", "right_docid",
                     "left_text", "right_text", "expected", "offtopic_qid", "exclude_workers")

    def add_tasks(self, tasks: pd.DataFrame, assignments: Mapping[str, list[str]]) -> int:
        rows = []
        for r in tasks[list(self._COLUMNS)].itertuples(index=False):
            d = r._asdict()
            d["slot"] = int(d["slot"])
            d["exclude_workers"] = json.dumps(sorted(str(w) for w in (d["exclude_workers"] or [])))
            for c in ("expected", "offtopic_qid"):
                d[c] = None if d[c] is None or pd.isna(d[c]) or d[c] == "" else str(d[c])
            rows.append(tuple(d[c] for c in self._COLUMNS))
        ids = list(dict.fromkeys(str(t) for t in tasks["task_id"]))
        with self._db.transaction() as db:
            for t in ids:
                if db.execute("SELECT 1 FROM campaign_pref_tasks WHERE task_id = ?", (t,)).fetchone():
                    raise InputError("tasks-exist", f"preference task {t} exists already (give another --prefix)",
                                     file=str(self._db.path))
            db.executemany(f"INSERT INTO campaign_pref_tasks VALUES ({', '.join('?' * len(self._COLUMNS))})", rows)
            db.executemany("INSERT OR IGNORE INTO campaign_pref_assign VALUES (?, ?, ?)",
                           [(t, a, i) for t in ids for i, a in enumerate(assignments.get(t, []))])
        return len(ids)

    def tasks(self, task_id: str | None = None) -> pd.DataFrame:
        where, params = sql_filters({"task_id": task_id})
        df = self._query(f"SELECT {', '.join(self._COLUMNS)} FROM campaign_pref_tasks"
                         + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY rowid", params)
        df["exclude_workers"] = [json.loads(v) for v in df["exclude_workers"]]
        return df

    def assignments(self, assessor: str | None = None) -> pd.DataFrame:
        where, params = sql_filters({"a.assessor": assessor}, prefix=" AND ")
        return self._query("SELECT a.task_id, a.assessor, a.position FROM campaign_pref_assign a JOIN"
                           " (SELECT task_id, MIN(rowid) AS r FROM campaign_pref_tasks GROUP BY task_id) t"
                           " ON t.task_id = a.task_id WHERE 1 = 1" + "".join(where) + " ORDER BY t.r, a.position", params)

    def assign(self, task_id: str, assessor: str, *, instead_of: str | None = None) -> bool:
        with self._db.transaction() as db:
            if instead_of is not None:
                db.execute("DELETE FROM campaign_pref_assign WHERE task_id = ? AND assessor = ?", (task_id, instead_of))
            n = db.execute("SELECT COALESCE(MAX(position) + 1, 0) FROM campaign_pref_assign WHERE task_id = ?",
                           (task_id,)).fetchone()[0]
            cur = db.execute("INSERT OR IGNORE INTO campaign_pref_assign VALUES (?, ?, ?)", (task_id, assessor, n))
            return cur.rowcount > 0

    def answer(self, task_id: str, slot: int, assessor: str, choice: str) -> bool:
        now = now_utc()
        with self._db.transaction() as db:
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

    def retract(self, task_id: str, assessor: str, slot: int, *, answer: int | None = None,
                     source: str = "web-undo") -> dict[str, Any]:
        slot = int(slot)
        with self._db.transaction() as db:
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
                           " VALUES (?, ?, ?, ?)", (live[0][0], assessor, now_utc(), source))
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

    def answers(self, assessor: str | None = None, task_id: str | None = None) -> pd.DataFrame:
        where, params = sql_filters({"assessor": assessor, "task_id": task_id})
        return self._query("SELECT task_id, slot, assessor AS worker, choice FROM live_pref_answers"
                           + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY seq", params)

    def answer_log(self, task_id: str | None = None) -> pd.DataFrame:
        where, params = sql_filters({"a.task_id": task_id})
        return self._query("SELECT a.seq, a.task_id, a.slot, a.assessor AS worker, a.choice, a.answered, r.retracted,"
                           " r.retracted_by, r.source FROM campaign_pref_answers a LEFT JOIN campaign_pref_retractions r"
                           " ON r.answer = a.seq" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY a.seq",
                           params)
