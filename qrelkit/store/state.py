"""A campaign's own records in SQLite (:class:`~qrelkit.store.interfaces.CampaignState`): tables
``campaign_inputs``, ``campaign_config``, ``campaign_stages``, ``campaign_state``,
``campaign_warnings``, ``campaign_cal`` and ``campaign_topics`` (see
:mod:`qrelkit.store.campaign`)."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from qrelkit.errors import InputError
from qrelkit.store.interfaces import CAL_PHASES, CampaignState, Topics
from qrelkit.store.rows import in_topic_order
from qrelkit.store.sqlite import Database, SqliteAggregate


def _config_values(config_rows: list[dict]) -> list[tuple]:
    return [(r["section"], r["key"], json.dumps(r["value"], sort_keys=True), r["origin"], r["where"]) for r in config_rows]


class SqliteCampaignState(SqliteAggregate, CampaignState):
    """:class:`~qrelkit.store.interfaces.CampaignState` in a campaign store file (``topics``: the
    store's, for the order and the set of topics)."""

    def __init__(self, db: Database, topics: Topics) -> None:
        super().__init__(db)
        self._topics = topics

    # -- inputs and configuration ------------------------------------------------------------------

    def record_inputs(self, records: Iterable[tuple[str, str, int, int, str]], config_rows: list[dict]) -> None:
        with self._db.transaction() as db:
            db.executemany("INSERT INTO campaign_inputs VALUES (?, ?, ?, ?, ?)", list(records))
            db.executemany("INSERT INTO campaign_config VALUES (?, ?, ?, ?, ?)", _config_values(config_rows))

    def inputs(self) -> pd.DataFrame:
        return self._query("SELECT name, path, size, mtime_ns, sha256 FROM campaign_inputs ORDER BY name, path")

    def config_rows(self) -> pd.DataFrame:
        df = self._query("SELECT section, key, value, origin, location FROM campaign_config")
        df["value"] = [json.loads(v) for v in df["value"]]
        return df

    def adopt_config(self, record: tuple[str, str, int, int, str], config_rows: list[dict],
                     adoption: Mapping[str, Any]) -> None:
        with self._db.transaction() as db:
            db.execute("DELETE FROM campaign_inputs WHERE name = 'config'")
            db.execute("INSERT INTO campaign_inputs VALUES (?, ?, ?, ?, ?)", record)
            db.execute("DELETE FROM campaign_config")
            db.executemany("INSERT INTO campaign_config VALUES (?, ?, ?, ?, ?)", _config_values(config_rows))
            row = db.execute("SELECT value FROM campaign_state WHERE key = 'config_adoptions'").fetchone()
            done = json.loads(row[0]) if row else []
            db.execute("INSERT OR REPLACE INTO campaign_state VALUES ('config_adoptions', ?)",
                       (json.dumps([*done, dict(adoption)], sort_keys=True, default=str),))

    # -- stages, state values, warnings, failures ---------------------------------------------------

    def stages_done(self) -> dict[str, dict]:
        return {n: json.loads(s) for n, s in self._conn.execute("SELECT name, summary FROM campaign_stages ORDER BY seq")}

    def finish_stage(self, name: str, summary: Mapping[str, Any], seconds: float | None = None) -> None:
        with self._db.transaction() as db:
            db.execute("INSERT OR IGNORE INTO campaign_stages (name, summary, seconds) VALUES (?, ?, ?)",
                       (name, json.dumps(summary, sort_keys=True, default=str), seconds))

    def stage_seconds(self) -> dict[str, float]:
        return {n: s for n, s in self._conn.execute("SELECT name, seconds FROM campaign_stages ORDER BY seq")}

    def forget_stages(self, names: Sequence[str]) -> list[str]:
        names = list(names)
        if not names:
            return []
        with self._db.transaction() as db:
            again = [r[0] for r in db.execute(
                f"SELECT name FROM campaign_stages WHERE name IN ({', '.join('?' * len(names))}) ORDER BY seq", names)]
            db.execute(f"DELETE FROM campaign_stages WHERE name IN ({', '.join('?' * len(names))})", names)
        return again

    def get(self, key: str, default: Any = None) -> Any:
        row = self._conn.execute("SELECT value FROM campaign_state WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def update(self, **values: Any) -> None:
        with self._db.transaction() as db:
            db.executemany("INSERT OR REPLACE INTO campaign_state VALUES (?, ?)",
                           [(k, json.dumps(v, sort_keys=True)) for k, v in values.items()])

    def record_failure(self, info: Mapping[str, Any]) -> None:
        self.update(last_failure=dict(info))

    def failure(self) -> dict | None:
        return self.get("last_failure")

    def clear_failure(self) -> None:
        with self._db.transaction() as db:
            db.execute("DELETE FROM campaign_state WHERE key = 'last_failure'")

    def warn(self, stage: str, message: str) -> None:
        with self._db.transaction() as db:
            db.execute("INSERT OR IGNORE INTO campaign_warnings (stage, message) VALUES (?, ?)", (stage, message))

    def warnings(self) -> pd.DataFrame:
        return self._query("SELECT stage, message FROM campaign_warnings ORDER BY seq")

    # -- per topic: CAL rounds, decisions --------------------------------------------------------------

    def cal_rounds(self) -> dict[str, tuple[int, str]]:
        rows = dict((q, (int(r), str(p))) for q, r, p in self._conn.execute("SELECT qid, round, phase FROM campaign_cal"))
        return {q: rows.get(q, (0, "judge")) for q in self._topics.all()["qid"].astype(str)}

    def set_cal_rounds(self, rows: Iterable[tuple[str, int, str]]) -> None:
        rows = [(str(q), int(r), str(p)) for q, r, p in rows]
        bad = [p for _, _, p in rows if p not in CAL_PHASES]
        if bad:
            raise InputError("bad-option", f"CAL phase must be one of {', '.join(CAL_PHASES)}, got {bad[0]!r}")
        if rows:
            with self._db.transaction() as db:
                db.executemany("INSERT OR REPLACE INTO campaign_cal VALUES (?, ?, ?)", rows)

    def set_topics(self, rows: list[dict]) -> None:
        cols = ("screening", "screened", "screened_relevant", "decision", "rule", "reason")
        with self._db.transaction() as db:
            for r in rows:
                db.execute("INSERT OR IGNORE INTO campaign_topics (qid) VALUES (?)", (str(r["qid"]),))
                sets = [c for c in cols if c in r]
                if sets:
                    db.execute(f"UPDATE campaign_topics SET {', '.join(c + ' = ?' for c in sets)} WHERE qid = ?",
                               [r[c] for c in sets] + [str(r["qid"])])

    def topics(self) -> pd.DataFrame:
        df = self._query("SELECT t.qid, c.screening, c.screened, c.screened_relevant, c.decision, c.rule, c.reason"
                         " FROM topics t LEFT JOIN campaign_topics c ON c.qid = t.qid")
        return in_topic_order(df)

    def decided_topics(self, decision: str | None = None) -> set[str]:
        sql = "SELECT qid FROM campaign_topics WHERE decision IS NOT NULL" + (" AND decision = ?" if decision else "")
        return {str(r[0]) for r in self._conn.execute(sql, (decision,) if decision else ())}

    def topic_row(self, qid: str) -> dict[str, str | None]:
        row = self._conn.execute("SELECT screening, decision, rule, reason FROM campaign_topics WHERE qid = ?",
                                 (str(qid),)).fetchone()
        return dict(zip(("screening", "decision", "rule", "reason"), row or (None,) * 4))
