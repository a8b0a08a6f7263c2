"""Login links and sessions on the server side (docs/web.md, "Sessions and links"): a login link
is exchanged once for a session and expires after ``[web] login_link_hours``; a session lives in
the campaign store (``campaign_sessions``), ends at logout and after ``[web]
session_idle_minutes`` without a request; failed logins are limited per client address
(:class:`FailedLogins`, in memory).

The signed cookie (:mod:`qrelkit.web.session`) names the session; this module decides whether
the store still honours it.
"""

from __future__ import annotations

import datetime as _dt
import threading
import time
from collections import deque
from typing import Callable

from qrelkit.campaign.accounts import token_hash
from qrelkit.config import WebParams
from qrelkit.web.service import Account, CampaignService, WebError
from qrelkit.web.session import Session

#: what a person is told for each refused login link (never which accounts exist)
REFUSED = {
    "unknown": "this login link is not valid (mistyped, replaced or revoked): ask the organizer for a new link",
    "used": "this login link was used already (a link opens one session): ask the organizer for a new link",
    "expired": "this login link has expired: ask the organizer for a new link",
}


class RateLimited(WebError):
    """429: too many failed logins from one client; ``retry_after`` seconds to wait."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(429, f"too many failed logins from your address: try again in {retry_after} s")
        self.retry_after = retry_after


class FailedLogins:
    """Failed logins per client address: the ``limit``-th within ``window`` seconds closes the
    door to that address until the oldest of them is ``window`` seconds old.

    >>> t = [0.0]
    >>> f = FailedLogins(limit=2, window=60, clock=lambda: t[0])
    >>> f.failed("a"); f.check("a"); f.failed("a")
    >>> f.check("b")  # another address is not affected
    >>> try:
    ...     f.check("a")
    ... except RateLimited as e:
    ...     print(e.status, e.retry_after)
    429 60
    >>> t[0] = 61.0; f.check("a")  # the window has passed
    """

    def __init__(self, limit: int = 10, window: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.window, self.clock = limit, window, clock
        self._seen: dict[str, deque] = {}
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> deque:
        q = self._seen.setdefault(client, deque())
        while q and q[0] <= now - self.window:
            q.popleft()
        if not q:
            del self._seen[client]
        return q

    def check(self, client: str) -> None:
        """Raise :class:`RateLimited` while ``client`` is over the limit."""
        with self._lock:
            now = self.clock()
            q = self._recent(client, now)
            if len(q) >= self.limit:
                raise RateLimited(max(1, int(q[0] + self.window - now + 0.999)))

    def failed(self, client: str) -> None:
        with self._lock:
            now = self.clock()
            self._recent(client, now)
            self._seen.setdefault(client, deque()).append(now)


def _utc(seconds_ago: float) -> str:
    t = _dt.datetime.now(_dt.timezone.utc) - _dt.timedelta(seconds=seconds_ago)
    return t.isoformat(timespec="seconds")


class Logins:
    """The server side of links and sessions for one campaign (``svc``'s store, ``params``)."""

    def __init__(self, svc: CampaignService, params: WebParams) -> None:
        self.svc = svc
        self.idle_s = params.session_idle_minutes * 60
        self.link_s = params.login_link_hours * 3600
        self.touch_s = min(60.0, self.idle_s / 10)  # last_seen is written at most this often per session
        self.failures = FailedLogins()

    @staticmethod
    def _account(acc: dict) -> Account:
        return Account(acc["name"], acc["organizer"], tuple(acc["topics"]), acc["generation"])

    def link(self, token: str) -> tuple[str, Account | None]:
        """What a login link is, without using it: ``("ok", account)`` or ``(unknown | used |
        expired, account or None)``."""
        link = self.svc.store().accounts.link(token_hash(token))
        if link is None:
            return "unknown", None
        acc = self._account(link["account"])
        if link["used"] is not None:
            return "used", acc
        return ("expired" if link["issued"] < _utc(self.link_s) else "ok"), acc

    def exchange(self, token: str, sid: str) -> Account:
        """Exchange a login link for the session ``sid`` (once); 403 with :data:`REFUSED`'s words."""
        why, acc = self.svc.store().accounts.open_session(token_hash(token), sid, issued_after=_utc(self.link_s))
        if acc is None:
            raise WebError(403, REFUSED[why])
        return self._account(acc)

    def alive(self, sess: Session) -> tuple[bool, bool]:
        """Whether the store honours the session (known, of its account, not ended, not idle too
        long) and whether its ``last_seen`` is due to be written (:meth:`touch`)."""
        row = self.svc.store().accounts.session(sess.sid)
        if row is None or row["ended"] is not None or row["account"] != sess.name:
            return False, False
        if row["last_seen"] < _utc(self.idle_s):
            return False, False
        return True, row["last_seen"] < _utc(self.touch_s)

    def touch(self, sid: str) -> None:
        self.svc.store().accounts.touch_session(sid)

    def end(self, sid: str) -> None:
        self.svc.store().accounts.end_session(sid)
