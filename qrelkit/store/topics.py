"""The topics of a store and their CAL threads, in SQLite (tables ``topics`` and ``threads``;
:class:`~qrelkit.store.interfaces.Topics`)."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import pandas as pd

from qrelkit.errors import InputError
from qrelkit.store.interfaces import THREAD_STATES, THREADS, Topics
from qrelkit.store.rows import in_topic_order, topics_frame
from qrelkit.store.sqlite import SqliteAggregate


class SqliteTopics(SqliteAggregate, Topics):
    """:class:`~qrelkit.store.interfaces.Topics` in a store file."""

    def add(self, topics: pd.DataFrame | Mapping[str, str] | Iterable[str], *,
            threads: Sequence[str] = THREADS, collection_size: int | None = None) -> int:
        df = topics_frame(topics)
        bad = [t for t in threads if t not in THREADS]
        if bad:
            raise InputError("bad-option", f"unknown thread(s) {', '.join(bad)}; threads are {', '.join(THREADS)}")
        if df["qid"].duplicated().any():
            raise InputError("duplicate-topic", f"topic {df.loc[df['qid'].duplicated(), 'qid'].iloc[0]} given twice")
        with self._db.transaction() as db:
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

    def all(self) -> pd.DataFrame:
        df = self._query("SELECT qid, text FROM topics")
        return in_topic_order(df)

    def threads(self, topic: str | None = None) -> pd.DataFrame:
        df = self._query("SELECT topic AS qid, name AS thread, state, reason, collection_size FROM threads"
                         + (" WHERE topic = ?" if topic is not None else ""), (topic,) if topic is not None else ())
        df["_t"] = df["thread"].map({t: i for i, t in enumerate(THREADS)})
        return in_topic_order(df, extra=["_t"]).drop(columns="_t")

    def set_thread_state(self, topic: str, thread: str, state: str, reason: str = "", *,
                         collection_size: int | None = None) -> None:
        if state not in THREAD_STATES:
            raise InputError("bad-option", f"thread state must be one of {', '.join(THREAD_STATES)}, got {state!r}")
        with self._db.transaction() as db:
            cur = db.execute("UPDATE threads SET state = ?, reason = ?, collection_size = COALESCE(?, collection_size)"
                             " WHERE topic = ? AND name = ?", (state, reason, collection_size, str(topic), thread))
            if cur.rowcount == 0:
                raise InputError("unknown-thread", f"topic {topic} has no thread {thread!r}")

    def thread_rows(self) -> list[tuple[str, str, str, str]]:
        return [(str(q), str(t), str(st), str(r)) for q, t, st, r in
                self._conn.execute("SELECT topic, name, state, reason FROM threads")]

    def thread_states(self, qid: str) -> list[tuple[str, str]]:
        rows = self._conn.execute("SELECT name, state FROM threads WHERE topic = ?", (str(qid),)).fetchall()
        return sorted(((str(t), str(st)) for t, st in rows), key=lambda r: THREADS.index(r[0]) if r[0] in THREADS else 99)
