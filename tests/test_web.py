"""The assessor web app (issue 14) through Starlette's ASGI test client (no server, no browser):
login links and sessions, the topic picker, judging one passage at a time through the store's
import path up to the next batch issued by the background runner and the topics' decisions,
review and change (tests/test_web_review.py), skip, escaping, every security rule (404 for another's topic or batch, 403 for the
organizer pages and a bad CSRF token, a revoked account refused at once), bad requests as 4xx
with a message (never a 500), the organizer's views and the qrels export, ``/healthz``.

The campaign is small (2,000 passages, 3 topics, screening 4 passages, pool depth 3, CAL batches
of 4 in one thread, 2 rounds at most) and judged by three assessors, two per batch, with the
grades of the simulator's hidden qrels. Every passage and one query carry a script payload.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from qrelkit.campaign.accounts import add_account, revoke_account  # noqa: E402
from qrelkit.store import CAMPAIGN_SCHEMA_VERSION, open_campaign_store  # noqa: E402
from qrelkit.cli import run as cli  # noqa: E402
from qrelkit.web import create_app  # noqa: E402

PAYLOAD = ' <script>alert("x")</script><img src=x onerror="alert(1)">'
CONFIG = """
[pool]
depth = 3
[screen]
first_n = 4
discard_if_relevant_share_at_least = 1.0
discard_if_no_relevant = false
[batch]
assessors_per_item = 2
[campaign]
assessors = ["ann", "bob", "cat"]
skip = ["dedupe", "fractional", "evaluate", "reuse", "report"]
max_rounds = 2
[cal]
batch_size = 4
threads = ["all"]
official_thread = "all"
[stopping]
accept_min_judged = 10
accept_min_relevant = 1
reject_min_judged = 12
"""
# topic i is owned by assessor i mod 3, with the next one: 1001 ann+bob, 1002 bob+cat, 1003 cat+ann
TOPICS = {"ann": ["1001", "1003"], "bob": ["1001", "1002"], "cat": ["1002", "1003"]}


def simulate_with_payload(d: Path, payload: str = PAYLOAD, passages: int = 2000) -> Path:
    """A simulated campaign (3 topics) in ``d`` whose passages all end with ``payload`` (and the
    first query with a ``<b onmouseover=...>``)."""
    assert cli(["simulate", "campaign", "-o", str(d), "--passages", str(passages), "--topics", "3", "--groups", "2",
                "--seed", "1"]) == 0
    lines = []
    for ln in (d / "corpus.jsonl").read_text().splitlines():
        obj = json.loads(ln)
        obj["passage"] += payload
        lines.append(json.dumps(obj))
    (d / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    topics = (d / "topics.tsv").read_text().splitlines()
    topics[0] += " <b onmouseover=alert(3)>bold</b>"
    (d / "topics.tsv").write_text("\n".join(topics) + "\n")
    return d


@pytest.fixture(scope="module")
def sim(tmp_path_factory) -> Path:
    """A simulated campaign whose passages all end with a script payload (and one query too)."""
    return simulate_with_payload(tmp_path_factory.mktemp("websim") / "sim")


@pytest.fixture(scope="module")
def truth(sim) -> dict[tuple[str, str], int]:
    out = {}
    for ln in (sim / "qrels.txt").read_text().splitlines():
        q, _, d, g = ln.split()
        out[(q, d)] = int(g)
    return out


def _init(sim: Path, d: Path, config: str = CONFIG) -> Path:
    cfg = d.parent / f"{d.name}.toml"
    cfg.write_text(config)
    assert cli(["campaign", "init", str(d), "-c", str(cfg), "--corpus", str(sim / "corpus.jsonl"), "-t",
                str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]) == 0
    return d


@pytest.fixture(scope="module")
def base(sim, tmp_path_factory) -> Path:
    return _init(sim, tmp_path_factory.mktemp("webbase") / "camp")


@pytest.fixture
def camp(base, tmp_path) -> Path:
    """A fresh copy of the initialized campaign (nothing run yet)."""
    d = tmp_path / "camp"
    shutil.copytree(base, d)
    return d


class Web:
    """The app of a campaign with its background runner, and one test client per person."""

    _org: TestClient | None = None  # the organizer's client of :meth:`health`, made at first use

    def __init__(self, camp: Path) -> None:
        self.camp = camp
        self.app = create_app(camp)
        self.main = TestClient(self.app)

    def __enter__(self) -> "Web":
        self.main.__enter__()  # lifespan: the runner starts and issues the first batches
        self.idle()
        return self

    def __exit__(self, *exc) -> None:
        self.main.__exit__(*exc)

    def idle(self) -> None:
        assert self.app.state.service.advancer.wait_idle(300)

    def health(self) -> dict:
        """``/healthz``'s details, as an organizer sees them (anonymous, it says only ok)."""
        if self._org is None:
            self._org = self.client("health-org", organizer=True).c
        r = self._org.get("/healthz")
        assert r.status_code == 200 and "stages_done" in r.json(), r.text
        return r.json()

    def client(self, name: str, *, organizer: bool = False, topics: list[str] | None = None) -> "Person":
        if open_campaign_store(self.camp).accounts.get(name) is None:
            acc = add_account(self.camp, name, organizer=organizer, topics=topics)
            token = acc["link"].rsplit("/", 1)[1]
        else:
            raise AssertionError("one client per account in these tests")
        c = TestClient(self.app, raise_server_exceptions=False)
        r = c.post(f"/login/{token}", follow_redirects=False)
        assert r.status_code == 303, r.text
        return Person(c, token)


class Person:
    def __init__(self, client: TestClient, token: str) -> None:
        self.c, self.token = client, token
        self.csrf = client.get("/api/session").json()["csrf"]

    def post(self, url: str, **body):
        return self.c.post(url, json=body, headers={"X-CSRF-Token": self.csrf})

    def topic(self, qid: str) -> dict:
        r = self.c.get(f"/api/topics/{qid}")
        assert r.status_code == 200, r.text
        return r.json()

    def judge_all(self, qid: str, truth) -> int:
        """Judge every passage this person owes on a topic (the hidden qrels' grades); returns how many."""
        n = 0
        while (v := self.topic(qid))["item"]:
            it = v["item"]
            r = self.post(f"/api/topics/{qid}/judgments", batch_id=it["batch_id"], docid=it["docid"],
                          grade=truth.get((qid, it["docid"]), 0))
            assert r.status_code == 200 and r.json()["status"] == "stored", r.text
            n += 1
        return n


@pytest.fixture
def web(camp):
    with Web(camp) as w:
        yield w


def test_login_link_sets_a_signed_httponly_samesite_session(web):
    acc = add_account(web.camp, "ann")
    assert re.fullmatch(r"http://127\.0\.0\.1:8765/login/[A-Za-z0-9_-]{43}", acc["link"])
    c = TestClient(web.app)
    assert c.get("/", follow_redirects=False).status_code == 401
    r = c.post("/login/" + acc["link"].rsplit("/", 1)[1], follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie and "path=/" in cookie
    assert c.get("/").status_code == 200
    with open_campaign_store(web.camp) as s:  # only the SHA-256 of the token is stored
        row = s.db.conn.execute("SELECT token_hash FROM campaign_accounts WHERE name = 'ann'").fetchone()[0]
    assert acc["link"].rsplit("/", 1)[1] not in row and len(row) == 64
    # a forged cookie is no session
    forged = TestClient(web.app, cookies={"qrelkit_session": r.cookies["qrelkit_session"][:-3] + "xyz"})
    assert forged.get("/api/session").status_code == 401
    assert TestClient(web.app, cookies={"qrelkit_session": r.cookies["qrelkit_session"]}).get("/api/session").status_code == 200
    assert TestClient(web.app).get("/login/not-a-token", follow_redirects=False).status_code == 403


def test_picker_shows_the_assigned_topics_only(web):
    for name, topics in TOPICS.items():
        p = web.client(name)
        page = p.c.get("/")
        assert re.findall(r'<tr data-qid="(\d+)"', page.text) == topics
        assert [t["qid"] for t in p.c.get("/api/topics").json()["topics"]] == topics
        other = sorted({"1001", "1002", "1003"} - set(topics))[0]
        assert p.c.get(f"/topics/{other}").status_code == 404
        assert p.c.get(f"/api/topics/{other}").status_code == 404
        assert p.c.get(f"/api/topics/{other}/state").status_code == 404
        assert p.c.get("/topics/9999").status_code == 404


def test_an_accounts_topics_limit_what_it_sees(web):
    p = web.client("ann", topics=["1003"])
    assert [t["qid"] for t in p.c.get("/api/topics").json()["topics"]] == ["1003"]
    assert p.c.get("/topics/1001").status_code == 404


def test_topic_page_escapes_every_text(web):
    p = web.client("ann")
    page = p.c.get("/topics/1001").text
    assert 'id="passage-text"' in page and 'data-state="judging"' in page
    assert "<script>alert" not in page and "<img src=x" not in page and "<b onmouseover" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page
    assert "&lt;b onmouseover=alert(3)&gt;bold&lt;/b&gt;" in page
    for g, name in [(0, "Irrelevant"), (1, "Related"), (2, "Highly relevant"), (3, "Perfectly relevant")]:
        assert re.search(rf'id="grade-{g}"[^>]*data-key="{g}">\s*<kbd>{g}</kbd> {name}', page)
    assert 'src="/static/judge.js"' in page
    # a JSONL topics file's description and narrative, escaped too
    web.app.state.service.details = {"1001": {"description": "<i>what</i> is asked", "narrative": "only <u>this</u>"}}
    page = p.c.get("/topics/1001").text
    assert re.search(r'id="topic-description"><b>Description.</b> &lt;i&gt;what&lt;/i&gt; is asked<', page)
    assert re.search(r'id="topic-narrative"><b>Narrative.</b> only &lt;u&gt;this&lt;/u&gt;<', page)
    js = p.c.get("/static/judge.js")
    assert js.status_code == 200 and "keydown" in js.text


def test_judging_through_batches_to_the_decisions(web, truth):
    """Screening, the rest of the pool, CAL rounds computed in the background, decisions; the
    form path (HTML) and the JSON path store the same way; a judgment is acknowledged after commit."""
    people = {n: web.client(n) for n in TOPICS}
    # one judgment through the HTML form, the rest through the JSON API
    v = people["ann"].topic("1001")
    assert v["item"]["kind"] == "pool" and v["item"]["batch_id"] == "1001/screen" and v["item"]["batch_judged"] == 0
    r = people["ann"].c.post("/topics/1001/judge", data={"csrf": people["ann"].csrf, "batch_id": "1001/screen",
                                                         "docid": v["item"]["docid"],
                                                         "grade": str(truth.get(("1001", v["item"]["docid"]), 0))},
                             follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/topics/1001"
    with open_campaign_store(web.camp) as s:  # acknowledged: committed
        assert len(s.judgments.assessor_grades("ann", topic="1001")) == 1
    assert people["ann"].topic("1001")["item"]["batch_judged"] == 1
    kinds = set()
    for _ in range(8):  # rounds of: everyone judges what they owe, then the runner advances
        for name, p in people.items():
            for q in TOPICS[name]:
                v = p.topic(q)
                if v["item"]:
                    kinds.add(v["item"]["kind"])
                p.judge_all(q, truth)
        web.idle()
        if web.health()["topics_decided"] == 3:
            break
    h = web.health()
    assert h["topics_decided"] == 3 and h["batches_out"] == 0 and h["runner"] == "idle" and h["runner_error"] is None
    assert {"validate", "select", "pool", "screening", "pool-rest", "cal", "qrels"} <= set(h["stages_done"])
    assert kinds == {"pool", "cal"}
    with open_campaign_store(web.camp) as s:
        b = s.batches.all()
        assert set(b["kind"]) == {"pool", "cal"} and (b["status"] == "complete").all()
        log = s.judgments.log(None, "all")
    assert not log.duplicated(["qid", "docid", "assessor", "batch_id"]).any()
    for name, p in people.items():
        for q in TOPICS[name]:
            v = p.topic(q)
            assert v["state"] == "decided" and v["item"] is None and v["status"]["decision"]
            page = p.c.get(f"/topics/{q}").text
            assert 'id="decision"' in page and f'data-decision="{v["status"]["decision"]}"' in page
        mine = p.c.get("/api/judgments").json()["judgments"]
        assert mine and {j["qid"] for j in mine} <= set(TOPICS[name])
        assert len(mine) == int((log["assessor"] == name).sum())


def test_a_retried_judgment_is_stored_once_and_another_grade_is_a_conflict(web):
    p = web.client("bob")
    it = p.topic("1002")["item"]
    url = "/api/topics/1002/judgments"
    first = p.post(url, batch_id=it["batch_id"], docid=it["docid"], grade=1)
    again = p.post(url, batch_id=it["batch_id"], docid=it["docid"], grade=1)
    assert first.json()["status"] == "stored" and again.status_code == 200 and again.json()["status"] == "repeated"
    other = p.post(url, batch_id=it["batch_id"], docid=it["docid"], grade=3)
    assert other.status_code == 409 and "review" in other.json()["error"]
    with open_campaign_store(web.camp) as s:
        assert s.counts()["judgments"] == 1


def test_undo_is_gone_for_review_and_change(web):
    """The old undo (the last judgment only, refused once the runner used it) answers 410 and
    points to the review of one's judgments; the topic page offers no undo."""
    p = web.client("cat")
    a = p.topic("1002")["item"]
    assert p.post("/api/topics/1002/judgments", batch_id=a["batch_id"], docid=a["docid"], grade=0).status_code == 200
    r = p.post("/api/topics/1002/undo")
    assert r.status_code == 410 and "review" in r.json()["error"]
    assert {"href": "/topics/1002/review", "label": "your judgments on it"} in r.json()["links"]
    assert 'id="undo-button"' not in p.c.get("/topics/1002").text


def test_a_change_waits_for_no_runner_of_another_process(web):
    """A `campaign run` in another process holds the campaign's advance lock: a change of a
    judgment then is 409 (it would race that runner's decision), and goes through once it is free."""
    import os
    import subprocess
    import sys

    p = web.client("cat")
    a = p.topic("1002")["item"]
    assert p.post("/api/topics/1002/judgments", batch_id=a["batch_id"], docid=a["docid"], grade=0).status_code == 200
    holder = subprocess.Popen([sys.executable, "-c", (
        "import time; from qrelkit.campaign.lock import advance_lock\n"
        f"with advance_lock({str(web.camp)!r}):\n    print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    try:
        assert holder.stdout.readline().strip() == "held"
        r = p.post("/api/topics/1002/change", docid=a["docid"], grade=2)
        assert r.status_code == 409 and "another process" in r.json()["error"]
    finally:
        holder.kill()
        holder.wait()
    r = p.post("/api/topics/1002/change", docid=a["docid"], grade=2)
    assert r.status_code == 200 and r.json()["status"] == "changed"


def test_skip_moves_the_passage_to_the_end_of_the_session_queue(web):
    p = web.client("ann")
    first = p.topic("1001")["item"]
    r = p.post("/api/topics/1001/skip", batch_id=first["batch_id"], docid=first["docid"])
    assert r.status_code == 200 and r.json()["status"] == "skipped"
    seen = []
    while (it := p.topic("1001")["item"])["docid"] != first["docid"]:
        seen.append(it["docid"])
        assert p.post("/api/topics/1001/judgments", batch_id=it["batch_id"], docid=it["docid"], grade=0).status_code == 200
    assert seen and first["docid"] not in seen
    # the form path
    r = p.c.post("/topics/1001/skip", data={"csrf": p.csrf, "batch_id": first["batch_id"], "docid": first["docid"]},
                 follow_redirects=False)
    assert r.status_code == 303


def test_bad_requests_are_4xx_with_a_message_never_a_500(web):
    ann = web.client("ann")
    it = ann.topic("1001")["item"]
    bob_batch = "1002/screen"
    url = "/api/topics/1001/judgments"
    cases = [
        (ann.post(url, batch_id=it["batch_id"], docid="no-such-passage", grade=1), 404, "not in this batch"),
        (ann.post(url, batch_id=it["batch_id"], docid=it["docid"], grade=7), 400, "outside the scale"),
        (ann.post(url, batch_id=it["batch_id"], docid=it["docid"], grade="two"), 400, "not an integer"),
        (ann.post(url, batch_id=it["batch_id"], docid=it["docid"]), 400, "lacks grade"),
        (ann.post(url, batch_id=bob_batch, docid=it["docid"], grade=1), 404, "no batch"),
        (ann.post("/api/topics/1002/judgments", batch_id=bob_batch, docid=it["docid"], grade=1), 404, "no topic"),
        (ann.post(url, batch_id="1001/all/0007", docid=it["docid"], grade=1), 404, "no batch"),
        (ann.c.post(url, json={"batch_id": it["batch_id"], "docid": it["docid"], "grade": 1}), 403, "CSRF"),
        (ann.c.post(url, json={"batch_id": it["batch_id"], "docid": it["docid"], "grade": 1},
                    headers={"X-CSRF-Token": "forged"}), 403, "CSRF"),
        (ann.c.post("/topics/1001/judge", data={"batch_id": it["batch_id"], "docid": it["docid"], "grade": "1"}), 403,
         "CSRF"),
        (ann.c.post(url, content=b"{not json", headers={"X-CSRF-Token": ann.csrf, "content-type": "application/json"}),
         400, "not JSON"),
        (ann.post("/api/topics/1001/frobnicate"), 404, "no action"),
        (ann.c.get("/api/topics/1001/batches/1002/screen"), 404, "no batch"),
        (ann.c.get("/organizer"), 403, "organizers"),
        (ann.c.get("/organizer/qrels"), 403, "organizers"),
        (ann.c.get("/organizer/report"), 403, "organizers"),
        (ann.c.get("/nowhere"), 404, ""),
        (TestClient(web.app).get("/api/topics"), 401, "not logged in"),
        (TestClient(web.app).post(url, json={}), 401, "not logged in"),
    ]
    for r, status, words in cases:
        assert r.status_code == status, (r.request.url, r.status_code, r.text)
        assert "Traceback" not in r.text and words in r.text, r.text
    # HTML for a browser, JSON for a script
    html = ann.c.post("/topics/1001/judge", data={"csrf": ann.csrf, "batch_id": it["batch_id"], "docid": "x",
                                                   "grade": "1"}, headers={"accept": "text/html"})
    assert html.status_code == 404 and 'id="error-message"' in html.text and "passage x is not in this batch" in html.text
    js = ann.c.get("/topics/1002", headers={"accept": "application/json"})
    assert js.status_code == 404 and js.json()["error"] == "no topic 1002 for you"
    # one's own batch, and nothing of it judged by these refused requests
    assert ann.c.get(f"/api/topics/1001/batches/{it['batch_id']}").json()["items"][0]["grade"] is None


def test_an_internal_error_is_a_plain_500_without_traceback(web, monkeypatch):
    ann = web.client("ann")

    def boom(acc):
        raise RuntimeError("secret detail")
    monkeypatch.setattr(web.app.state.service, "topics_overview", boom)
    r = ann.c.get("/api/topics")
    assert r.status_code == 500 and "Traceback" not in r.text and "secret detail" not in r.text


def test_a_revoked_account_is_refused_at_once(web):
    p = web.client("ann")
    assert p.c.get("/api/topics").status_code == 200
    revoke_account(web.camp, "ann")
    assert p.c.get("/api/topics").status_code == 401
    assert p.c.get("/topics/1001").status_code == 401
    assert p.post("/api/topics/1001/change", docid="x", grade=1).status_code == 401
    assert TestClient(web.app).get(f"/login/{p.token}", follow_redirects=False).status_code == 403
    # added again: a new link; the old one and the old session stay dead
    acc = add_account(web.camp, "ann")
    assert TestClient(web.app).get(f"/login/{p.token}", follow_redirects=False).status_code == 403
    assert p.c.get("/api/topics").status_code == 401
    c = TestClient(web.app)
    assert c.post("/login/" + acc["link"].rsplit("/", 1)[1], follow_redirects=False).status_code == 303
    assert c.get("/api/topics").status_code == 200


def test_healthz(web, monkeypatch):
    """Anonymous, /healthz says only ok (503 not ok); its details are an organizer's."""
    assert web.main.get("/healthz").json() == {"status": "ok"}
    ann = web.client("ann")
    assert ann.c.get("/healthz").json() == {"status": "ok"}
    d = web.health()
    assert d["status"] == "ok" and d["schema_version"] == 3 and d["campaign_schema_version"] == CAMPAIGN_SCHEMA_VERSION
    assert d["stages_done"] == ["validate", "select", "pool"] and d["topics"] == 3 and d["topics_decided"] == 0
    assert d["batches_out"] == 3 and d["runner"] == "idle" and d["campaign"] == str(web.camp)

    def boom():
        raise RuntimeError("secret detail")
    monkeypatch.setattr(web.app.state.service, "health", boom)
    r = web.main.get("/healthz")
    assert r.status_code == 503 and r.json() == {"status": "not ok"}


def test_organizer_views_report_and_qrels(web, truth):
    boss = web.client("boss", organizer=True)
    people = {n: web.client(n) for n in TOPICS}
    for name, p in people.items():
        for q in TOPICS[name]:
            p.judge_all(q, truth)
    web.idle()
    page = boss.c.get("/organizer")
    assert page.status_code == 200 and 'id="status-table"' in page.text and 'id="progress-table"' in page.text
    d = boss.c.get("/api/organizer").json()
    assert [r["qid"] for r in d["status"]] == ["1001", "1002", "1003"]
    prog = {r["assessor"]: r for r in d["progress"]}
    assert prog["ann"]["judged"] == 8 and prog["boss"]["account"] == "organizer" and prog["ann"]["account"] == "assessor"
    assert d["agreement"]["note"] is None and d["agreement"]["summary"]["items"] == 12
    assert d["agreement"]["summary"]["assessors"] == 3 and len(d["agreement"]["pairs"]) == 3
    assert boss.c.get("/organizer/status.csv").text.startswith("qid,stage,")
    # the qrels so far: the current labels of every judged passage
    q = boss.c.get("/organizer/qrels")
    assert q.status_code == 200 and 'filename="qrels-current.txt"' in q.headers["content-disposition"]
    rows = [ln.split() for ln in q.text.splitlines()]
    assert len(rows) == 12 and all(r[1] == "0" and int(r[3]) in (0, 1, 2, 3) for r in rows)
    assert boss.c.get("/organizer/qrels?kind=expanded").status_code == 409
    assert boss.c.get("/organizer/qrels?kind=bogus").status_code == 400
    # the report, one click away, written in the campaign folder
    r = boss.c.get("/organizer/report")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html") and "<html" in r.text.lower()
    assert (web.camp / "report-live.html").is_file() and (web.camp / "report-live.md").is_file()


def test_final_qrels_are_exported_once_the_qrels_stage_is_done(web, truth):
    boss = web.client("boss", organizer=True)
    people = {n: web.client(n) for n in TOPICS}
    for _ in range(8):
        for name, p in people.items():
            for q in TOPICS[name]:
                p.judge_all(q, truth)
        web.idle()
        if "qrels" in web.health()["stages_done"]:
            break
    q = boss.c.get("/organizer/qrels")
    assert q.status_code == 200 and q.content == (web.camp / "qrels-passages.txt").read_bytes()
    assert 'filename="qrels-passages.txt"' in q.headers["content-disposition"]
    assert boss.c.get("/organizer/qrels?kind=expanded").content == (web.camp / "qrels-expanded.txt").read_bytes()


def test_free_topic_choice_lists_every_topic_and_one_takes_an_unstaffed_one(sim, tmp_path, truth):
    camp = _init(sim, tmp_path / "free", CONFIG + "[web]\nfree_topic_choice = true\n")
    with Web(camp) as w:
        ann, cat = w.client("ann"), w.client("cat")  # bob has no account
        assert [t["qid"] for t in ann.c.get("/api/topics").json()["topics"]] == ["1001", "1002", "1003"]
        v = ann.topic("1002")  # bob's and cat's topic: bob's place is free
        assert v["item"] is None and v["state"] == "free" and v["can_take"]
        assert 'id="take-button"' in ann.c.get("/topics/1002").text
        assert cat.topic("1001")["state"] == "free"  # ann and bob's: bob's place
        r = ann.post("/api/topics/1002/take")
        assert r.status_code == 200 and r.json() == {"qid": "1002", "status": "taken", "batches": 1}
        assert ann.post("/api/topics/1002/take").status_code == 409  # ann has it; cat has an account
        assert ann.topic("1002")["item"]["batch_id"] == "1002/screen"
        with open_campaign_store(camp) as s:
            a = s.assignments.all()
            assert sorted(a.loc[a["batch_id"] == "1002/screen", "assessor"]) == ["ann", "cat"]
            s.assignments.issue("1002", ["p-new"], "1002/extra", ["bob", "cat"])  # as the runner would, later
            a = s.assignments.all()  # the claim is honoured as the batch is assigned
            assert sorted(a.loc[a["batch_id"] == "1002/extra", "assessor"]) == ["ann", "cat"]
            assert s.assignments.claims().values.tolist() == [["1002", "bob", "ann"]]
        assert ann.judge_all("1002", truth) == 5


def test_take_needs_free_topic_choice(web):
    ann = web.client("ann")
    r = ann.post("/api/topics/1001/take")
    assert r.status_code == 404 and "free_topic_choice is off" in r.json()["error"]


def test_a_version_2_campaign_store_gets_the_accounts_table(camp):
    with open_campaign_store(camp) as s:
        s.db.conn.execute("DROP TABLE campaign_accounts")
        s.db.conn.execute("UPDATE meta SET value = '2' WHERE key = 'campaign_schema_version'")
    with open_campaign_store(camp) as s:
        assert s.schema_versions()["campaign_schema_version"] == CAMPAIGN_SCHEMA_VERSION and s.accounts.all() == []
    acc = add_account(camp, "ann")
    assert acc["name"] == "ann" and acc["generation"] == 1


def test_a_version_1_judging_store_is_migrated_and_a_change_works(camp):
    with open_campaign_store(camp) as s:
        s.db.conn.executescript("""DROP VIEW live_judgments; DROP TRIGGER judgments_no_conflict;
            DROP TRIGGER judgment_changes_no_conflict; DROP TRIGGER judgment_changes_no_update;
            DROP TRIGGER judgment_changes_no_delete; DROP TABLE judgment_changes;
            UPDATE meta SET value = '1' WHERE key = 'schema_version';""")
    db = sqlite3.connect(camp / "campaign.db")
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "1"
    db.close()
    with Web(camp) as w:
        p = w.client("ann")
        it = p.topic("1001")["item"]
        assert p.post("/api/topics/1001/judgments", batch_id=it["batch_id"], docid=it["docid"], grade=2).status_code == 200
        assert p.post("/api/topics/1001/change", docid=it["docid"], grade=0).json()["status"] == "changed"
        assert w.health()["schema_version"] == 3


def test_a_failing_runner_leaves_the_server_up_and_says_why(camp):
    from qrelkit.web import Advancer

    def boom(directory):
        raise RuntimeError("the corpus moved")
    app = create_app(camp, advancer=Advancer(camp, advance=boom))
    with TestClient(app) as c:
        assert app.state.service.advancer.wait_idle(60)
        acc = add_account(camp, "boss", organizer=True)
        c.post("/login/" + acc["link"].rsplit("/", 1)[1])
        h = c.get("/healthz").json()
        assert h["runner"] == "idle" and h["runner_error"] == "RuntimeError: the corpus moved"
        assert "last run failed: RuntimeError: the corpus moved" in c.get("/organizer").text


def test_a_failed_run_is_tried_again_by_itself_until_the_cause_is_fixed(tmp_path):
    """Issue 19: once the cause of a failed run is fixed, the web app's runner goes on without
    anyone asking (retries after 2 s, then twice as long each time, up to 5 min)."""
    import time

    from qrelkit.web import Advancer

    calls = []

    def flaky(directory):
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise RuntimeError("the corpus moved")
        return {"state": "waiting for judgments", "seconds": {}}

    adv = Advancer(tmp_path, advance=flaky)
    adv.RETRY_FIRST_S = 0.05
    adv.start()
    try:
        adv.request()  # one request: the retries come by themselves
        end = time.monotonic() + 20
        while (len(calls) < 3 or adv.state != "idle") and time.monotonic() < end:
            time.sleep(0.01)
        assert len(calls) == 3 and adv.last_error is None
        assert calls[2] - calls[1] >= calls[1] - calls[0] - 0.01  # backing off
        time.sleep(0.3)
        assert len(calls) == 3  # a run that went through is not repeated
    finally:
        adv.stop()


def test_batch_progress_counts_only_what_the_assessor_judges_there(web):
    """A CAL batch's encountered passages (their judgments copied in from another thread, under
    the assessor's name) are no part of her progress: neither judged by her in it nor owed."""
    ann = web.client("ann")
    it = ann.topic("1001")["item"]
    assert (it["batch_judged"], it["batch_items"]) == (0, 4)
    with open_campaign_store(web.camp) as s:
        other = [d for d in s.assignments.assignment(it["batch_id"], "ann")["items"] if d != it["docid"]][0]
        s.judgments.import_judgments(pd.DataFrame({"qid": ["1001"], "docid": [other], "assessor": ["ann"], "grade": [1],
                                                   "batch_id": [it["batch_id"]]}), source="encountered")
    it = ann.topic("1001")["item"]
    assert (it["batch_judged"], it["batch_items"]) == (0, 3)
    r = ann.post("/api/topics/1001/judgments", batch_id=it["batch_id"], docid=it["docid"], grade=0)
    assert r.status_code == 200
    it = ann.topic("1001")["item"]
    assert (it["batch_judged"], it["batch_items"]) == (1, 3)


def test_screening_skipped_says_so(sim, tmp_path):
    camp = _init(sim, tmp_path / "noscreen", CONFIG.replace('skip = ["dedupe",', 'skip = ["screening", "dedupe",'))
    with Web(camp) as w:
        ann = w.client("ann", organizer=True)  # the topic's status is the organizer's to see
        assert ann.topic("1001")["status"]["screening"] == "skipped"
        page = ann.c.get("/topics/1001").text
        assert "screening: skipped" in page
        # the status line states every condition of the rule, the minimum relevant included
        assert "accepted below density 0.4 with at least 10 judged and 1 relevant" in page


def test_every_response_carries_the_security_headers(web, monkeypatch):
    """Pages, the API, downloads, static files, errors (404, 403, 500): a CSP without inline
    script and no framing, nosniff, no referrer; nothing but the static files may be cached."""
    org, ann = web.client("org", organizer=True), web.client("ann")
    anon = TestClient(web.app, raise_server_exceptions=False)
    got = {"/healthz": anon.get("/healthz"), "/": ann.c.get("/"), "/topics/1001": ann.c.get("/topics/1001"),
           "/api/topics/1001": ann.c.get("/api/topics/1001"), "/organizer": org.c.get("/organizer"),
           "/organizer/assessors.csv": org.c.get("/organizer/assessors.csv"), "404": ann.c.get("/nowhere"),
           "403": ann.c.get("/organizer"), "login": anon.get("/login/not-a-token", follow_redirects=False),
           "static": anon.get("/static/judge.js")}

    def boom(acc):
        raise RuntimeError("secret detail")
    monkeypatch.setattr(web.app.state.service, "topics_overview", boom)
    got["500"] = ann.c.get("/api/topics")
    assert got["500"].status_code == 500 and got["404"].status_code == 404
    for name, r in got.items():
        csp = r.headers.get("content-security-policy", "")
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline'; img" in csp, name
        assert "'unsafe-inline'" not in csp.split("script-src", 1)[1].split(";", 1)[0], name
        assert r.headers.get("x-content-type-options") == "nosniff" and r.headers.get("x-frame-options") == "DENY"
        assert r.headers.get("referrer-policy") == "no-referrer", name
        assert (r.headers.get("cache-control") == "no-store") == (name != "static"), name
    # no inline script in any page the app renders: no script element without src, no on... attribute
    from html.parser import HTMLParser  # lazy: this test only

    class Inline(HTMLParser):
        found: list = []

        def handle_starttag(self, tag, attrs):
            names = {k for k, _ in attrs}
            if (tag == "script" and "src" not in names) or any(k.startswith("on") for k in names):
                self.found.append((tag, sorted(names)))

    for name in ("/", "/topics/1001", "/organizer"):
        parser = Inline()
        parser.found = []
        parser.feed(got[name].text)
        assert not parser.found, (name, parser.found)


def test_a_body_over_the_limit_is_refused_unread_and_not_echoed(web):
    """[web] max_request_bytes (default 1 MiB): by its Content-Length, or as a body without one
    arrives; the 413 carries the security headers and none of the body; a normal request passes."""
    ann = web.client("ann")
    big = "x" * (1_048_576 + 10)
    r = ann.c.post("/api/topics/1001/judgments", content='{"grade": "' + big + '"}',
                   headers={"X-CSRF-Token": ann.csrf, "content-type": "application/json"})
    assert r.status_code == 413 and "xxxx" not in r.text and len(r.text) < 200
    assert int(r.request.headers["content-length"]) > 1_048_576  # refused by its Content-Length
    assert r.headers.get("x-content-type-options") == "nosniff"

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(40):
            yield b"y" * 65536

    r = ann.c.post("/api/topics/1001/judgments", content=chunks(),
                   headers={"X-CSRF-Token": ann.csrf, "content-type": "application/json"})
    assert r.status_code == 413 and "yyyy" not in r.text
    it = ann.topic("1001")["item"]
    assert ann.post("/api/topics/1001/judgments", batch_id=it["batch_id"], docid=it["docid"], grade=0).status_code == 200


def test_the_organizer_page_shows_values_not_raw_structures(web, truth):
    """The campaign's name, not a server path; densities to 3 decimals; tables as 'key: value'."""
    org, ann, bob = web.client("org", organizer=True), web.client("ann"), web.client("bob")
    ann.judge_all("1001", truth)
    bob.judge_all("1001", truth)  # two assessors on the same passages: the agreement table has values
    web.idle()
    page = org.c.get("/organizer").text
    assert 'id="agreement-pairs"' in page
    assert f"<h1>Campaign {web.camp.name}</h1>" in page and str(web.camp.parent) not in page
    assert not re.search(r"<td>[^<]*[{\[]", page), "a raw dict or list in a cell"  # grades_per_item: {2: 4}
    density = re.search(r'<tr data-qid="1001">(?:<td>[^<]*</td>){4}<td>([^<]*)</td>', page).group(1)
    assert re.fullmatch(r"\d\.\d{3}", density), density  # was 1.0 (4 of 4 relevant) or 0.3333
