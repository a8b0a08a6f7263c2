"""The web app's accounts and its signing secret in SQLite (:class:`~qrelkit.store.interfaces.Accounts`):
table ``campaign_accounts`` (name, token_hash — the SHA-256 of the login token —, organizer,
topics as JSON, created, revoked, generation), its login links (``campaign_links``: each link's
token hash, issued, used: a link is exchanged once for a session), the sessions
(``campaign_sessions``) and the ``web_secret`` row of ``campaign_state``."""

from __future__ import annotations

import datetime as _dt
import json
import secrets
from typing import Iterable

from qrelkit.errors import InputError
from qrelkit.store.interfaces import Accounts
from qrelkit.store.sqlite import SqliteAggregate


def now_utc() -> str:
    """The current UTC time, ISO 8601 to the second (the campaign tables' times)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class SqliteAccounts(SqliteAggregate, Accounts):
    """:class:`~qrelkit.store.interfaces.Accounts` in a campaign store file."""

    _COLUMNS = "name, organizer, topics, created, revoked, generation"

    @staticmethod
    def _account(row) -> dict | None:
        if row is None:
            return None
        return {"name": row[0], "organizer": bool(row[1]), "topics": json.loads(row[2]), "created": row[3],
                "revoked": row[4], "generation": int(row[5])}

    def add(self, name: str, token_hash: str, *, organizer: bool = False, topics: Iterable[str] = (),
            renew: bool = False) -> dict:
        tops = [str(t) for t in topics]
        with self._db.transaction() as db:
            row = db.execute("SELECT revoked, generation FROM campaign_accounts WHERE name = ?", (name,)).fetchone()
            now = now_utc()
            db.execute("INSERT INTO campaign_links VALUES (?, ?, ?, NULL)", (token_hash, name, now))
            if renew:
                if row is None or row[0] is not None:
                    raise InputError("unknown-assessor", f"no active account {name!r} to renew (add it without "
                                     "--renew)", file=str(self._db.path))
                db.execute("UPDATE campaign_accounts SET token_hash = ? WHERE name = ?", (token_hash, name))
                return self._account(db.execute(f"SELECT {self._COLUMNS} FROM campaign_accounts WHERE name = ?",
                                                (name,)).fetchone())
            if row is not None and row[0] is None:
                raise InputError("assessor-exists", f"account {name!r} exists: --renew issues a new link (the old one stops "
                                 "working)",
                                 file=str(self._db.path))
            if row is None:
                db.execute("INSERT INTO campaign_accounts VALUES (?, ?, ?, ?, ?, NULL, 1)",
                           (name, token_hash, int(organizer), json.dumps(tops), now))
            else:
                db.execute("UPDATE campaign_accounts SET token_hash = ?, organizer = ?, topics = ?, created = ?,"
                           " revoked = NULL, generation = generation + 1 WHERE name = ?",
                           (token_hash, int(organizer), json.dumps(tops), now, name))
        return self.get(name)

    def revoke(self, name: str) -> dict:
        with self._db.transaction() as db:
            cur = db.execute("UPDATE campaign_accounts SET revoked = COALESCE(revoked, ?), generation = generation + 1"
                             " WHERE name = ?", (now_utc(), name))
            if cur.rowcount == 0:
                raise InputError("unknown-assessor", f"no account {name!r} in this campaign", file=str(self._db.path))
        return self.get(name)

    def get(self, name: str) -> dict | None:
        return self._account(self._conn.execute(f"SELECT {self._COLUMNS} FROM campaign_accounts WHERE name = ?",
                                                (name,)).fetchone())

    def by_token(self, token_hash: str) -> dict | None:
        return self._account(self._conn.execute(f"SELECT {self._COLUMNS} FROM campaign_accounts"
                                                " WHERE token_hash = ? AND revoked IS NULL", (token_hash,)).fetchone())

    def link(self, token_hash: str) -> dict | None:
        row = self._conn.execute("SELECT a.name, l.issued, l.used FROM campaign_accounts a JOIN campaign_links l"
                                 " ON l.token_hash = a.token_hash WHERE a.token_hash = ? AND a.revoked IS NULL",
                                 (token_hash,)).fetchone()
        return None if row is None else {"account": self.get(row[0]), "issued": row[1], "used": row[2]}

    def open_session(self, token_hash: str, sid: str, *, issued_after: str) -> tuple[str, dict | None]:
        with self._db.transaction() as db:
            link = self.link(token_hash)
            if link is None:
                return "unknown", None
            if link["used"] is not None:
                return "used", None
            if link["issued"] < issued_after:
                return "expired", None
            acc, now = link["account"], now_utc()
            db.execute("UPDATE campaign_links SET used = ? WHERE token_hash = ?", (now, token_hash))
            db.execute("INSERT INTO campaign_sessions VALUES (?, ?, ?, ?, ?, NULL)",
                       (sid, acc["name"], acc["generation"], now, now))
            return "ok", acc

    def session(self, sid: str) -> dict | None:
        row = self._conn.execute("SELECT sid, account, generation, created, last_seen, ended FROM campaign_sessions"
                                 " WHERE sid = ?", (sid,)).fetchone()
        return None if row is None else dict(zip(("sid", "account", "generation", "created", "last_seen", "ended"), row))

    def touch_session(self, sid: str) -> None:
        with self._db.transaction() as db:
            db.execute("UPDATE campaign_sessions SET last_seen = ? WHERE sid = ?", (now_utc(), sid))

    def end_session(self, sid: str) -> None:
        with self._db.transaction() as db:
            db.execute("UPDATE campaign_sessions SET ended = COALESCE(ended, ?) WHERE sid = ?", (now_utc(), sid))

    def all(self) -> list[dict]:
        rows = self._conn.execute(f"SELECT {self._COLUMNS} FROM campaign_accounts ORDER BY name").fetchall()
        return [self._account(r) for r in rows]

    def web_secret(self) -> str:
        with self._db.transaction() as db:
            db.execute("INSERT OR IGNORE INTO campaign_state VALUES ('web_secret', ?)",
                       (json.dumps(secrets.token_urlsafe(32)),))
            return json.loads(db.execute("SELECT value FROM campaign_state WHERE key = 'web_secret'").fetchone()[0])
