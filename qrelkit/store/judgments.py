"""The append-only judgment log in SQLite (:class:`~qrelkit.store.interfaces.JudgmentLog`; the
rules of an import, undo and re-judgment, the judging order and the thread views: see
:mod:`qrelkit.store.interfaces`): tables ``judgments`` and ``judgment_changes``, the grades in
force in ``judgment_state``, read through the view ``live_judgments`` (the schema and its
versions: :mod:`qrelkit.store.judging`).

Triggers make both logs append-only (``UPDATE``/``DELETE`` abort) and refuse a second, different
grade from one assessor for one topic and passage, whatever the code path. An import registers
the batches it does not know and completes those it judges in full, in its own transaction
(:class:`~qrelkit.store.batches.SqliteBatches`).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.errors import InputError
from qrelkit.store.batches import SqliteBatches
from qrelkit.store.combine import DEFAULT_COMBINE, combine_log, combined_grades
from qrelkit.store.interfaces import (
    CONFLICT_COLUMNS, LOG_COLUMNS, THREADS, ConflictError, ImportReport, JudgmentLog,
)
from qrelkit.store.rows import INPUT_COLUMNS, grade_cell, in_topic_order, read_judgment_file, text_cells
from qrelkit.store.sqlite import Database, SqliteAggregate, now, sql_filters

#: further rules of an import (:meth:`SqliteJudgmentLog.import_files`): called in the import's
#: transaction, where the rows are the temporary table ``temp._in (i, topic, passage, assessor,
#: grade, batch)``, it returns ``{i: (rule, message)}`` for the rows it refuses (strict: the
#: first one is raised with its file and line; lenient: they are skipped and counted by rule)
Vet = Callable[[sqlite3.Connection], dict[int, tuple[str, str]]]


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


class SqliteJudgmentLog(SqliteAggregate, JudgmentLog):
    """:class:`~qrelkit.store.interfaces.JudgmentLog` in a store file, over its batches."""

    def __init__(self, db: Database, batches: SqliteBatches) -> None:
        super().__init__(db)
        self._batches = batches

    def import_judgments(self, judgments: pd.DataFrame, *, source: str = "api", lenient: bool = False,
                         scale: Iterable[int] | None = (0, 1, 2, 3),
                         on_transaction: Callable[[str], None] | None = None) -> ImportReport:
        df = judgments
        missing = [c for c in INPUT_COLUMNS if c not in df.columns]
        if missing:
            raise InputError("missing-column", f"judgments lack column(s) {', '.join(missing)}", file=source)
        rows = pd.DataFrame({
            "qid": text_cells(df["qid"]), "docid": text_cells(df["docid"]), "assessor": text_cells(df["assessor"]),
            "grade": df["grade"].to_numpy(), "batch_id": text_cells(df["batch_id"]),
            "file": df["_file"].to_numpy() if "_file" in df.columns else source,
            "line": df["_line"].to_numpy() if "_line" in df.columns else np.arange(1, len(df) + 1),
        })
        counts: dict[str, int] = {}
        return self._import_rows(rows, counts, source=source, lenient=lenient, scale=scale, on_transaction=on_transaction)

    def import_files(self, files: Sequence[str | os.PathLike], *, lenient: bool = False,
                     scale: Iterable[int] | None = (0, 1, 2, 3),
                     on_transaction: Callable[[str], None] | None = None,
                     progress: Callable[[int], None] | None = None, vet: Vet | None = None) -> ImportReport:
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
        rows = _Rows([str(qid)], [str(docid)], [str(assessor)], [grade_cell(grade)], [str(batch_id)], [source], [1])
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
                parsed = grade_cell(g)
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
        force, repeats, re-judgments of retracted judgments — then written, batches completed
        (the batches' own transaction joins this one)."""
        def fail(rule: str, msg: str, i: int) -> None:
            if not lenient:
                raise InputError(rule, msg, file=str(rows.file[i]), line=None if rows.line[i] is None else int(rows.line[i]))
            counts[rule] = counts.get(rule, 0) + 1

        n = len(rows.qid)
        with self._db.transaction() as db:
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
            stamp = now()
            self._batches.register(tops, stamp)
            src = [str(rows.file[i]) if per_row_source else source for i in write]
            again = [retracted.get(i) for i in write]  # a retracted judgment judged again
            db.executemany("INSERT INTO judgments (topic, passage, grade, assessor, time, batch, source) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           [(rows.qid[i], rows.docid[i], rows.grade[i], rows.assessor[i], stamp, rows.batch[i], so)
                            for i, so, j in zip(write, src, again) if j is None])
            db.executemany("INSERT INTO judgment_changes (judgment, grade, time, source) VALUES (?, ?, ?, ?)",
                           [(j, rows.grade[i], stamp, so) for i, so, j in zip(write, src, again) if j is not None])
            # batches whose every item is judged are complete
            touched = [b for b in dict.fromkeys(rows.batch[i] for i in write) if b in issued and issued[b][1] > 0]
            self._batches.complete(touched)
            db.execute("DELETE FROM temp._in")
            if on_transaction is not None:
                on_transaction("commit")
        counts["imported"] = len(write)
        return ImportReport(len(write), dict(sorted(counts.items())), conflicts, len(tops))

    def retract(self, topic: str, passage: str, assessor: str, batch: str, *, source: str = "undo") -> int | None:
        with self._db.transaction() as db:
            row = db.execute("SELECT seq, grade FROM live_judgments WHERE topic = ? AND passage = ? AND assessor = ?"
                             " AND batch = ?", (str(topic), str(passage), str(assessor), str(batch))).fetchone()
            if row is None:
                return None
            db.execute("INSERT INTO judgment_changes (judgment, grade, time, source) VALUES (?, NULL, ?, ?)",
                       (row[0], now(), source))
            self._batches.reopen(batch)
        return int(row[1])

    def change_judgments(self, items: Iterable[tuple], *, source: str) -> dict[str, int]:
        stamp, changed, unchanged, touched = now(), 0, 0, set()
        with self._db.transaction() as db:
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
                                   [(r[0], stamp, source) for r in todo if r[2] is not None])
                db.executemany("INSERT INTO judgment_changes (judgment, grade, time, source) VALUES (?, ?, ?, ?)",
                               [(r[0], grade, stamp, source) for r in todo if grade is not None or r[2] is not None])
                changed += len(todo)
                touched.update(r[1] for r in todo)
            self._batches.recheck(sorted(touched))
        return {"changed": changed, "unchanged": unchanged}

    def records(self, *, topic: str | None = None, assessor: str | None = None, batch: str | None = None,
                history: bool = False) -> pd.DataFrame:
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

    def last(self, assessor: str, topic: str | None = None, *, source: str | None = None) -> dict | None:
        where, params = sql_filters({"l.assessor": assessor, "l.topic": topic, "l.source": source})
        row = self._conn.execute(
            "SELECT l.topic, l.passage, l.grade, l.batch, MAX(l.time, COALESCE((SELECT MAX(c.time) FROM judgment_changes c"
            " WHERE c.judgment = l.seq), '')) AS t FROM live_judgments l WHERE " + " AND ".join(where)
            + " ORDER BY t DESC, l.seq DESC LIMIT 1", params).fetchone()
        if row is None:
            return None
        return {"qid": row[0], "docid": row[1], "grade": int(row[2]), "batch_id": row[3], "time": row[4]}

    # -- judgments out ---------------------------------------------------------------------------

    def log(self, topic: str | None = None, thread: str | None = None, *,
            include_sample: bool = False, max_batch_seq: int | None = None) -> pd.DataFrame:
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

    def labels(self, topic: str, thread: str | None = None, *, combine: Any = DEFAULT_COMBINE) -> pd.DataFrame:
        return combine_log(self.log(topic, thread), combine=combine)

    def export_qrels(self, *, combine: Any = DEFAULT_COMBINE, thread: str = "all") -> pa.Table:
        log = self.log(None, None if thread == "all" else thread, include_sample=True)
        return combined_grades(log[["qid", "docid", "assessor", "grade", "batch_id"]], combine)

    def export_log(self, *, thread: str = "all") -> pa.Table:
        log = self.log(None, None if thread == "all" else thread, include_sample=True)
        log = in_topic_order(log, extra=["batch_seq"])[LOG_COLUMNS]
        schema = pa.schema([(c, pa.int32() if c == "grade" else pa.int64() if c in ("iteration", "position") else pa.string())
                            for c in LOG_COLUMNS])
        return pa.Table.from_pandas(log, schema=schema, preserve_index=False)

    # -- what the web app reads (plain rows, no tables) ---------------------------------------------

    def topic_grades(self, qid: str) -> list[tuple[str, str, int]]:
        return [(str(d), str(a), int(g)) for d, a, g in self._conn.execute(
            "SELECT j.passage, j.assessor, j.grade FROM live_judgments j JOIN batches b ON b.id = j.batch"
            " WHERE j.topic = ? AND b.kind <> 'sample'", (str(qid),))]

    def judged_since(self, assessor: str, since: str, source: str | None = None) -> int:
        sql = "SELECT COUNT(*) FROM live_judgments WHERE assessor = ? AND time >= ?"
        args: tuple = (str(assessor), str(since))
        if source is not None:
            sql, args = sql + " AND source = ?", (*args, str(source))
        return int(self._conn.execute(sql, args).fetchone()[0])

    def judged_in_batch(self, assessor: str, batch_id: str, exclude_sources: Iterable[str] = ()) -> int:
        ex = list(exclude_sources)
        sql = "SELECT COUNT(*) FROM live_judgments WHERE assessor = ? AND batch = ?"
        if ex:
            sql += f" AND source NOT IN ({', '.join('?' * len(ex))})"
        return int(self._conn.execute(sql, (str(assessor), str(batch_id), *ex)).fetchone()[0])

    def assessor_grades(self, assessor: str, *, topic: str | None = None, batch: str | None = None) -> pd.DataFrame:
        where, params = sql_filters({"assessor": assessor, "topic": topic, "batch": batch})
        return self._query("SELECT topic AS qid, passage AS docid, batch AS batch_id, grade, source FROM live_judgments"
                           " WHERE " + " AND ".join(where) + " ORDER BY seq", params)

    def judged_counts(self, exclude_sources: Iterable[str] = ()) -> dict[str, int]:
        ex = list(exclude_sources)
        sql = "SELECT assessor, COUNT(*) FROM live_judgments"
        if ex:
            sql += f" WHERE source NOT IN ({', '.join('?' * len(ex))})"
        return {str(a): int(n) for a, n in self._conn.execute(sql + " GROUP BY assessor", ex).fetchall()}
