"""Accounts of a campaign's web app (docs/web.md): assessors and organizers, each with a login
link that carries a random token. Only the token's SHA-256 is stored (``campaign_accounts``), so
a link is printed once and can never be shown again. A link is exchanged once for a session
and expires after ``[web] login_link_hours``; ``renew`` issues a new one for an active account
(the old one stops working). Revoking an account ends its link and its sessions at once; adding
a revoked account again issues a new link.

>>> token_hash("abc")[:16]
'ba7816bf8f01cfea'
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from urllib.parse import urlsplit

from qrelkit.campaign.store import campaign_config
from qrelkit.config import CampaignParams
from qrelkit.errors import InputError
from qrelkit.store import open_campaign_store

DEFAULT_BASE_URL = "http://127.0.0.1:8765"
LOGIN_PATH = "/login/"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


def token_hash(token: str) -> str:
    """The SHA-256 hex digest of a login token (what the store keeps)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_name(name: str) -> str:
    """An account name: 1-64 letters, digits and ``. _ @ -``, starting with a letter or digit
    (the name judgments are recorded under); else ``[bad-option]``."""
    if not _NAME.match(name or ""):
        raise InputError("bad-option", f"account name {name!r}: use 1-64 letters, digits, '.', '_', '@' or '-'")
    return name


def check_base_url(base_url: str) -> str:
    """``http(s)://host[:port][/prefix]`` without a query or fragment (the login link's start)."""
    u = urlsplit(base_url)
    if u.scheme not in ("http", "https") or not u.netloc or u.query or u.fragment:
        raise InputError("bad-option", f"--base-url must be http(s)://host[:port][/prefix], got {base_url!r}")
    return base_url.rstrip("/")


def add_account(directory: str | os.PathLike, name: str, *, topics: list[str] | None = None, organizer: bool = False,
                base_url: str = DEFAULT_BASE_URL, renew: bool = False) -> dict:
    """Create the account ``name`` in the campaign at ``directory`` and return it with its login
    ``link`` (``BASE_URL/login/TOKEN``; the token is ``secrets.token_urlsafe(32)``), ``assessor``
    (whether ``name`` is one of the protocol's ``[campaign] assessors``, the names batches are
    assigned to) and those ``assessors``. ``topics`` limits the topics the account sees (they
    must be the campaign's; ``[unknown-topic]``). ``renew``: a new link for the active account
    ``name`` (its role and topics stay: ``[bad-option]`` with ``topics`` or ``organizer``; the old
    link stops working); without it an active account is ``[assessor-exists]``."""
    check_name(name)
    if renew and (topics or organizer):
        raise InputError("bad-option", "--renew keeps the account's role and topics: revoke it and add it again "
                         "to change them")
    base = check_base_url(base_url)
    with open_campaign_store(directory) as store:
        known = set(store.topics.all()["qid"])
        wanted = list(dict.fromkeys(str(t).strip() for t in (topics or []) if str(t).strip()))
        missing = [t for t in wanted if t not in known]
        if missing:
            raise InputError("unknown-topic", f"topic(s) {', '.join(missing)} are not in this campaign",
                             file=str(directory))
        cfg = campaign_config(store)
        token = secrets.token_urlsafe(32)
        acc = store.accounts.add(name, token_hash(token), organizer=organizer, topics=wanted, renew=renew)
    assessors = list(CampaignParams.from_config(cfg).assessors)
    return {**acc, "link": f"{base}{LOGIN_PATH}{token}", "assessor": name in assessors, "assessors": assessors}


def revoke_account(directory: str | os.PathLike, name: str) -> dict:
    """Revoke the account ``name``: its link and sessions stop working at once."""
    with open_campaign_store(directory) as store:
        return store.accounts.revoke(name)


def list_accounts(directory: str | os.PathLike) -> list[dict]:
    """Every account of the campaign (name, organizer, topics, created, revoked, generation)."""
    with open_campaign_store(directory) as store:
        return store.accounts.all()
