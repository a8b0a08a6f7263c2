"""The web app on a network (issue 21, "Safe on a network"): security headers on every route
(framing refused), 413 for a body over ``[web] max_request_bytes``, logout ending the session in
the store, idle sessions expiring, login links exchanged once and expiring (``--renew`` for a new
one), "continue as NAME?" in someone else's browser, failed logins limited per client address,
no unescaped or unbounded input in any error body, the cookie ``Secure`` under a proxy's https,
the uvicorn limits of ``[web]``, and ``/healthz`` saying only ok to strangers.

Times are moved in the store (a session's ``last_seen``, a link's ``issued``), never waited for.
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from urllib.parse import quote

import pytest

pytest.importorskip("starlette")
from starlette.routing import Mount, Route  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware  # noqa: E402

from qrelkit.campaign.accounts import add_account  # noqa: E402
from qrelkit.web.app import server_options  # noqa: E402
from qrelkit.web.session import COOKIE  # noqa: E402
from test_web import Web, base, camp, sim  # noqa: E402,F401 - base, camp and sim are fixtures

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>' + "A" * 300
PARAMS = {"qid": "1001", "action": "judgments", "batch_id": "1001/screen", "task_id": "t1", "name": "answers.csv",
          "table": "status", "token": "not-a-token", "path": "judge.js"}
FIELDS = ("batch_id", "docid", "grade", "slot", "choice", "answer", "csrf")


@pytest.fixture
def web(camp):
    with Web(camp) as w:
        yield w


def token_of(acc: dict) -> str:
    return acc["link"].rsplit("/", 1)[1]


def routes(app):
    """Every (method, path template) of the app, the static files' mount as one of its files."""
    for r in app.routes:
        if isinstance(r, Mount):
            yield "GET", r.path + "/{path}"
        elif isinstance(r, Route):
            for m in sorted(r.methods - {"HEAD"}):
                yield m, r.path


def fill(path: str, value=None) -> str:
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: quote(value if value is not None else PARAMS[m[1]], safe=""), path)


def store(web):
    return sqlite3.connect(web.camp / "campaign.db", isolation_level=None)


def ago(**kw) -> str:
    return (dt.datetime.now(dt.timezone.utc) - dt.timedelta(**kw)).isoformat(timespec="seconds")


def test_every_route_carries_the_security_headers_and_refuses_framing(web):
    org = web.client("org", organizer=True)
    anon = TestClient(web.app, raise_server_exceptions=False)
    seen = 0
    for method, path in routes(web.app):
        for who in (anon, org.c):
            r = who.request(method, fill(path), headers={"X-CSRF-Token": org.csrf}, follow_redirects=False)
            assert r.status_code < 500, (method, path, r.status_code, r.text[:200])
            csp = r.headers.get("content-security-policy", "")
            assert "frame-ancestors 'none'" in csp and r.headers.get("x-frame-options") == "DENY", (method, path)
            assert "script-src 'self'" in csp and r.headers.get("x-content-type-options") == "nosniff", (method, path)
            assert r.headers.get("referrer-policy") == "no-referrer", (method, path)
            assert (r.headers.get("cache-control") == "no-store") == (not path.startswith("/static")), (method, path)
            seen += 1
    assert seen >= 2 * 27  # every route of the app, anonymous and as an organizer


def test_a_body_over_the_limit_is_413_without_echo(web):
    ann = web.client("ann")
    big = HOSTILE * 4000  # ~1.4 MB, over the 1 MB default
    r = ann.c.post("/api/topics/1001/judgments", content=big, headers={"X-CSRF-Token": ann.csrf,
                                                                         "content-type": "application/json"})
    assert r.status_code == 413 and "AAAA" not in r.text and "<script" not in r.text
    assert r.headers.get("x-frame-options") == "DENY"
    assert r.json() == {"error": "request body over 1048576 bytes", "status": 413}  # the API's JSON errors


def test_logout_ends_the_session_in_the_store(web):
    ann = web.client("ann")
    saved = ann.c.cookies.get(COOKIE)
    assert ann.c.get("/api/topics").status_code == 200
    r = ann.c.post("/logout", data={"csrf": ann.csrf}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/logged-out"
    page = ann.c.get("/logged-out").text  # says how to come back: the link opened this session
    assert 'id="logged-out-message"' in page and "new link" in page
    replay = TestClient(web.app, cookies={COOKIE: saved})  # the cookie kept from before the logout
    assert replay.get("/api/topics").status_code == 401
    assert replay.get("/topics/1001").status_code == 401


def test_an_idle_session_expires(web):
    ann = web.client("ann")
    sid = store(web).execute("SELECT sid FROM campaign_sessions WHERE account = 'ann'").fetchone()[0]
    # a request within the idle time moves last_seen on (written at most once a minute)
    store(web).execute("UPDATE campaign_sessions SET last_seen = ? WHERE sid = ?", (ago(minutes=30), sid))
    assert ann.c.get("/api/topics").status_code == 200
    assert store(web).execute("SELECT last_seen FROM campaign_sessions WHERE sid = ?", (sid,)).fetchone()[0] > ago(minutes=1)
    # idle longer than [web] session_idle_minutes (480 by default): refused
    store(web).execute("UPDATE campaign_sessions SET last_seen = ? WHERE sid = ?", (ago(minutes=481), sid))
    r = ann.c.get("/api/topics")
    assert r.status_code == 401 and "login link" in r.json()["error"]


def test_a_login_link_is_exchanged_once_and_expires(web):
    acc = add_account(web.camp, "ann")
    c = TestClient(web.app, raise_server_exceptions=False)
    assert c.post(f"/login/{token_of(acc)}", follow_redirects=False).status_code == 303
    other = TestClient(web.app, raise_server_exceptions=False)
    r = other.get(f"/login/{token_of(acc)}", headers={"accept": "text/html"})
    assert r.status_code == 403 and "used already" in r.text and "ask the organizer for a new link" in r.text
    assert 'id="error-message"' in r.text
    # the same person opening her link again goes straight in
    assert c.get(f"/login/{token_of(acc)}", follow_redirects=False).status_code == 303
    # a link not used within [web] login_link_hours (72) has expired
    bob = add_account(web.camp, "bob")
    store(web).execute("UPDATE campaign_links SET issued = ? WHERE account = 'bob'", (ago(hours=73),))
    r = other.get(f"/login/{token_of(bob)}", headers={"accept": "application/json"})
    assert r.status_code == 403 and "expired" in r.json()["error"] and "new link" in r.json()["error"]
    # --renew: a new link; the old one stops working, ann's session stays
    new = add_account(web.camp, "ann", renew=True)
    assert other.get(f"/login/{token_of(acc)}", follow_redirects=False).status_code == 403
    assert c.get("/api/topics").status_code == 200
    assert other.post(f"/login/{token_of(new)}", follow_redirects=False).status_code == 303
    assert other.get("/api/session").json()["name"] == "ann"


def test_someone_elses_link_asks_continue_as(web):
    ann = web.client("ann")
    ann_cookie = ann.c.cookies.get(COOKIE)
    bob = add_account(web.camp, "bob")
    r = ann.c.get(f"/login/{token_of(bob)}", follow_redirects=False)
    assert r.status_code == 200 and "Continue as bob?" in r.text and 'id="login-confirm"' in r.text
    assert ann.c.get("/api/session").json()["name"] == "ann"  # nothing switched yet
    assert ann.c.post(f"/login/{token_of(bob)}", data={}, follow_redirects=False).status_code == 403  # no CSRF
    r = ann.c.post(f"/login/{token_of(bob)}", data={"csrf": ann.csrf}, follow_redirects=False)
    assert r.status_code == 303
    assert ann.c.get("/api/session").json()["name"] == "bob"
    assert TestClient(web.app, cookies={COOKIE: ann_cookie}).get("/api/topics").status_code == 401  # ann's ended
    assert TestClient(web.app).get(f"/login/{token_of(bob)}").status_code == 403  # bob's link is used


def test_a_new_link_in_a_browser_of_the_revoked_account_logs_in(web):
    from qrelkit.campaign.accounts import revoke_account

    ann = web.client("ann")
    revoke_account(web.camp, "ann")
    acc = add_account(web.camp, "ann")  # added again: a new generation, the old session is dead
    assert ann.c.post(f"/login/{token_of(acc)}", follow_redirects=False).status_code == 303
    assert ann.c.get("/api/session").json()["name"] == "ann"


def test_failed_logins_are_limited_per_client_address(web):
    acc = add_account(web.camp, "ann")
    mallory = TestClient(web.app, client=("203.0.113.9", 4000))
    for i in range(10):
        assert mallory.get(f"/login/guess-{i}").status_code == 403
    r = mallory.get("/login/guess-10")
    assert r.status_code == 429 and 1 <= int(r.headers["retry-after"]) <= 60
    assert mallory.get(f"/login/{token_of(acc)}").status_code == 429  # even a good link, for now
    honest = TestClient(web.app, client=("198.51.100.7", 4000), raise_server_exceptions=False)
    assert honest.post(f"/login/{token_of(acc)}", follow_redirects=False).status_code == 303


def test_no_error_body_repeats_input_unescaped_or_unbounded(web):
    org = web.client("org", organizer=True)
    anon = TestClient(web.app, raise_server_exceptions=False)
    form = {f: HOSTILE for f in FIELDS} | {"csrf": org.csrf}
    # a hostile JSON body to the JSON API
    r = org.c.post("/api/topics/1001/judgments", json={f: HOSTILE for f in FIELDS},
                   headers={"X-CSRF-Token": org.csrf})
    assert r.status_code in (400, 404) and "A" * 81 not in r.text and len(r.json()["error"]) < 700
    checked = 0
    for method, path in sorted(routes(web.app), key=lambda mp: mp[1] == "/logout"):  # logged out last
        params = re.findall(r"\{(\w+)", path)  # each path parameter hostile in turn; else the query
        urls = [fill(re.sub(r"\{%s(?::\w+)?\}" % p, quote(HOSTILE, safe=""), path)) for p in params]
        for url in urls or [path + "?kind=" + quote(HOSTILE)]:
            for who in (anon, org.c):
                for accept in ("text/html", "application/json"):
                    if method == "POST":
                        r = who.post(url, data=form, headers={"accept": accept}, follow_redirects=False)
                    else:
                        r = who.get(url, headers={"accept": accept}, follow_redirects=False)
                    assert r.status_code < 500, (method, url[:60], r.status_code)
                    assert "A" * 81 not in r.text, (method, path, r.status_code, r.text[:300])
                    assert "<script>alert" not in r.text and "<img src=x" not in r.text, (method, path, r.text[:300])
                    checked += 1
    assert checked > 100


def test_the_cookie_is_secure_under_a_proxys_https(web):
    proxied = ProxyHeadersMiddleware(web.app, trusted_hosts="*")  # what 'qrelkit serve --proxy-headers' runs
    for proto, secure in (("https", True), ("http", False)):
        acc = add_account(web.camp, f"p-{proto}")
        c = TestClient(proxied)
        r = c.post(f"/login/{token_of(acc)}", headers={"x-forwarded-proto": proto, "x-forwarded-for": "192.0.2.1"},
                  follow_redirects=False)
        assert r.status_code == 303
        cookie = r.headers["set-cookie"]
        assert ("; secure" in cookie.lower()) == secure and "httponly" in cookie.lower()


def test_server_options_carry_the_web_limits_and_proxy_trust(web):
    opts = server_options(web.app)
    assert opts == {"timeout_keep_alive": 5, "limit_concurrency": 200, "proxy_headers": False,
                    "forwarded_allow_ips": None}
    opts = server_options(web.app, proxy_headers=True, forwarded_allow_ips="10.0.0.2")
    assert opts["proxy_headers"] is True and opts["forwarded_allow_ips"] == "10.0.0.2"


def test_healthz_tells_strangers_only_ok(web):
    r = TestClient(web.app).get("/healthz")
    assert r.json() == {"status": "ok"} and str(web.camp) not in r.text
    assert web.health()["campaign"] == str(web.camp)


def test_a_version_6_store_gets_the_links_and_sessions_tables(camp):
    """Schema 6 -> 7: the accounts' current links become one-use links issued at the migration;
    read-only, an older store is read as it is (no session, no link)."""
    from qrelkit.campaign.accounts import token_hash
    from qrelkit.store import CAMPAIGN_SCHEMA_VERSION, open_campaign_store

    acc = add_account(camp, "ann")
    with open_campaign_store(camp) as s:
        for table in ("campaign_links", "campaign_sessions"):
            s.db.conn.execute(f"DROP TABLE {table}")
        s.db.conn.execute("UPDATE meta SET value = '6' WHERE key = 'campaign_schema_version'")
    with open_campaign_store(camp, readonly=True) as s:
        assert s.schema_versions()["campaign_schema_version"] == 6
        assert s.accounts.session("x") is None and s.accounts.link(token_hash(token_of(acc))) is None
    with open_campaign_store(camp) as s:
        assert s.schema_versions()["campaign_schema_version"] == CAMPAIGN_SCHEMA_VERSION == 7
        link = s.accounts.link(token_hash(token_of(acc)))
        assert link["account"]["name"] == "ann" and link["used"] is None and link["issued"] > ago(minutes=1)
        assert s.accounts.open_session(token_hash(token_of(acc)), "s1", issued_after=ago(hours=72))[0] == "ok"
        assert s.accounts.open_session(token_hash(token_of(acc)), "s2", issued_after=ago(hours=72))[0] == "used"
        assert s.accounts.session("s1")["account"] == "ann" and s.accounts.session("s2") is None


def test_opening_a_link_does_not_use_it_up_a_button_logs_in(web):
    """A GET of a login link (a mail scanner's, a chat preview's) shows a page with a button; only
    its POST exchanges the link; a POST from another site's page (foreign Origin) is refused."""
    acc = add_account(web.camp, "ann")
    scanner = TestClient(web.app, raise_server_exceptions=False)
    for _ in range(2):
        r = scanner.get(f"/login/{token_of(acc)}", follow_redirects=False)
        assert r.status_code == 200 and 'id="login-button"' in r.text and "Log in as ann" in r.text
        assert 'method="post"' in r.text and COOKIE not in r.headers.get("set-cookie", "")
    assert scanner.get("/api/topics").status_code == 401
    evil = scanner.post(f"/login/{token_of(acc)}", headers={"origin": "https://evil.example"}, follow_redirects=False)
    assert evil.status_code == 403
    # a browser's form from another site: an Origin, no nonce (its SameSite=Strict cookie stays home)
    evil = scanner.post(f"/login/{token_of(acc)}", data={"nonce": "guess"}, headers={"origin": "null"},
                        follow_redirects=False)
    assert evil.status_code == 403
    person = TestClient(web.app, raise_server_exceptions=False)  # the login page, then its button
    page = person.get(f"/login/{token_of(acc)}").text
    nonce = re.search(r'name="nonce" value="([^"]+)"', page)[1]
    r = person.post(f"/login/{token_of(acc)}", data={"nonce": nonce}, headers={"origin": "null"},
                    follow_redirects=False)
    assert r.status_code == 303 and person.get("/api/session").json()["name"] == "ann"


def test_an_error_page_leads_back_only_where_one_can_go(web):
    anon = TestClient(web.app, raise_server_exceptions=False)
    page = anon.get("/topics/1001", headers={"accept": "text/html"}).text
    assert 'href="/">back to your topics' not in page and 'id="error-no-session"' in page
    boss = web.client("boss", organizer=True)  # an organizer without topics: back to the organizer's page
    page = boss.c.get("/topics/1001", headers={"accept": "text/html"}).text
    assert 'href="/organizer">back to the organizer' in page
    ann = web.client("ann")
    page = ann.c.get("/topics/nope", headers={"accept": "text/html"}).text
    assert 'href="/">back to your topics' in page


@pytest.mark.parametrize("grade", [" 2", "2 ", "\u0663", "2.0", True, "+2", "0x2", None, [2]])
def test_a_grade_is_plain_digits(web, grade):
    ann = web.client("ann")
    it = ann.topic("1001")["item"]
    r = ann.post("/api/topics/1001/judgments", batch_id=it["batch_id"], docid=it["docid"], grade=grade)
    assert r.status_code == 400, (grade, r.text)
    assert ann.topic("1001")["item"]["docid"] == it["docid"]  # nothing stored


@pytest.mark.parametrize("action", ["skip", "judgments"])
def test_someone_elses_topic_is_404_whatever_the_body_lacks(web, action):
    bob = web.client("bob")
    mine = {t["qid"] for t in bob.c.get("/api/topics").json()["topics"]}
    other = next(q for q in ("1001", "1002", "1003") if q not in mine)
    r = bob.post(f"/api/topics/{other}/{action}")  # no batch_id, no docid
    assert r.status_code == 404, r.text
