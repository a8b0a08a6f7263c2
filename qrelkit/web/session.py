"""Sessions of the web app: a signed cookie (itsdangerous, the campaign's secret), HttpOnly,
SameSite=Lax (Secure behind https), holding the account name, the account's generation (a
revoked or re-issued account has moved on: its sessions stop at once, since every request
re-reads the account from the store), a session id (its row in the store, which logout and
idleness end: :mod:`qrelkit.web.logins`; and the skip queue) and the CSRF token every POST must
carry (form field ``csrf`` or header ``X-CSRF-Token``)."""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeTimedSerializer

COOKIE = "qrelkit_session"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
MAX_AGE = 30 * 24 * 3600  # seconds a session lasts


def new_sid() -> str:
    """A new session id (random, 144 bits)."""
    return secrets.token_urlsafe(18)


@dataclass(frozen=True)
class Session:
    """What the cookie holds (``name``, ``generation``, session id ``sid``, ``csrf``)."""

    name: str
    generation: int
    sid: str
    csrf: str


class Sessions:
    """Signs and reads session cookies with the campaign's secret."""

    def __init__(self, secret: str) -> None:
        self._s = URLSafeTimedSerializer(secret, salt="qrelkit-web-session")

    def new(self, name: str, generation: int, sid: str | None = None) -> tuple[Session, str]:
        """A fresh session of an account (id ``sid``, else a new one) and its cookie value."""
        sess = Session(name, generation, sid or new_sid(), secrets.token_urlsafe(24))
        return sess, self._s.dumps({"n": sess.name, "g": sess.generation, "s": sess.sid, "c": sess.csrf})

    def read(self, value: str | None) -> Session | None:
        """The session of a cookie value; None when missing, forged or older than :data:`MAX_AGE`."""
        if not value:
            return None
        try:
            d = self._s.loads(value, max_age=MAX_AGE)
            return Session(str(d["n"]), int(d["g"]), str(d["s"]), str(d["c"]))
        except (BadSignature, KeyError, TypeError, ValueError):
            return None


def csrf_ok(session: Session, given: str | None) -> bool:
    """The CSRF token of a POST matches the session's (compared in constant time)."""
    return bool(given) and hmac.compare_digest(str(given), session.csrf)
