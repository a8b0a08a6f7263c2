"""The web app in a real browser (issue 14, "Tests in a real browser"): Playwright for Python
drives the system's Chromium (Debian's ``chromium``; Playwright's own browser download is not
used) against a real uvicorn server on a free loopback port, in a thread of this process.

* judging: log in with a link, pick a topic, judge 10 passages with the keys 0-3, reload and
  find the progress kept, finish the batch while the background runner is held — the page says
  *computing* — then let it go and receive the first CAL batch; review one's judgments (``r``)
  and change one of the pool batch CAL has used, by keys alone (``ArrowDown``, a digit; ``b``
  back); judge on to the topic's decision, after which the review is read-only;
* a preference task answered with the left/right keys (ArrowLeft/ArrowRight, f/j, 1/2), one
  answer undone with the key u and answered the other way;
* passages carrying ``<script>`` and ``onerror=`` show as text and no script runs (no dialog, no
  global set, no request for the ``<img>``);
* a screenshot of each view (picker, topic, computing, next batch, review, decision, organizer,
  preference, its undo button) goes to the test's ``tmp_path`` and, when ``QRELKIT_SCREENSHOTS`` names a folder,
  there too.

Two small simulated campaigns (3 topics, assessors ann, bob, cat, pool depth 3 of 10 runs, no
screening, CAL batches of 4, 2 rounds): one fresh, judged here; one judged through its pool by the
simulator's oracle, with its first CAL batches out and its preference tasks made. Every passage
and one query end with a script payload. Skipped, with the reason, when Playwright is not
installed or no Chromium is found.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - the test extra installs it
    pytest.skip("playwright is not installed (pip install 'qrelkit[test]')", allow_module_level=True)

CHROMIUM = next((c for c in (os.environ.get("QRELKIT_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
                              "/usr/bin/chromium") if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)
if CHROMIUM is None:
    pytest.skip("no Chromium found (apt-get install chromium, or set QRELKIT_CHROMIUM): the browser tests need the "
                "system's Chromium", allow_module_level=True)

from qrelkit.campaign.accounts import add_account  # noqa: E402
from qrelkit.store import open_campaign_store  # noqa: E402
from qrelkit.cli import run as cli  # noqa: E402
from qrelkit.web import create_app  # noqa: E402
from test_web import _init, simulate_with_payload  # noqa: E402

def open_link(page, link: str) -> None:
    """A login link as a person opens it: its page, then the button that logs in (opening the
    link alone uses nothing up: a mail scanner's fetch does not lock the person out)."""
    page.goto(link)
    with page.expect_navigation():
        page.click("#login-button")


PAYLOAD = ' <script>window.__xss = "script"; alert("x")</script><img src=x onerror="window.__xss = \'img\'; alert(1)">'
CONFIG = """
[pool]
depth = 3
[campaign]
assessors = ["ann", "bob", "cat"]
skip = ["screening", "dedupe", "fractional", "evaluate", "reuse", "report"]
max_rounds = 2
[cal]
batch_size = 4
threads = ["all"]
official_thread = "all"
"""
WAIT = 120_000  # ms: the longest a page may wait for the runner (a bound, never a measurement)


@pytest.fixture(scope="module")
def sim(tmp_path_factory) -> Path:
    return simulate_with_payload(tmp_path_factory.mktemp("browsersim") / "sim", PAYLOAD, passages=1500)


@pytest.fixture(scope="module")
def truth(sim) -> dict[tuple[str, str], int]:
    rows = [ln.split() for ln in (sim / "qrels.txt").read_text().splitlines()]
    return {(q, d): int(g) for q, _, d, g in rows}


class Server:
    """``create_app`` served by uvicorn on a free loopback port, in a thread."""

    def __init__(self, camp: Path) -> None:
        self.camp = camp
        self.app = create_app(camp)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.apis: dict[str, Api] = {}

    def __enter__(self) -> "Server":
        self.thread.start()
        end = time.monotonic() + 60
        while not self.server.started:  # a wait for start-up, not a timing check
            assert self.thread.is_alive() and time.monotonic() < end, "the server did not start"
            time.sleep(0.05)
        self.idle()
        return self

    def __exit__(self, *exc) -> None:
        for a in self.apis.values():
            a.c.close()
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()

    @property
    def advancer(self):
        return self.app.state.service.advancer

    def idle(self) -> None:
        assert self.advancer.wait_idle(300)

    def link(self, name: str, **kw) -> str:
        return add_account(self.camp, name, base_url=self.url, **kw)["link"]

    def api(self, name: str) -> "Api":
        """The API client of an account (made, and logged in, on first use)."""
        if name not in self.apis:
            self.apis[name] = Api(self, name)
        return self.apis[name]


class Api:
    """An assessor who judges through the JSON API (the others, while the browser judges one topic)."""

    def __init__(self, srv: Server, name: str) -> None:
        self.c = httpx.Client(base_url=srv.url, timeout=60)
        r = self.c.post(srv.link(name).removeprefix(srv.url), follow_redirects=False)
        assert r.status_code == 303, r.text
        self.c.headers["X-CSRF-Token"] = self.c.get("/api/session").json()["csrf"]

    def judge_all(self, qid: str, truth) -> int:
        n = 0
        while (it := self.c.get(f"/api/topics/{qid}").json()["item"]):
            r = self.c.post(f"/api/topics/{qid}/judgments", json={"batch_id": it["batch_id"], "docid": it["docid"],
                                                                  "grade": truth.get((qid, it["docid"]), 0)})
            assert r.status_code == 200, r.text
            n += 1
        return n


@pytest.fixture(scope="module")
def judging(sim, tmp_path_factory):
    """A fresh campaign: its first run (at the server's start) issues the pool batches."""
    with Server(_init(sim, tmp_path_factory.mktemp("browserjudge") / "camp", CONFIG)) as srv:
        yield srv


@pytest.fixture(scope="module")
def prefs(sim, tmp_path_factory):
    """A campaign judged through its pool by the oracle, first CAL batches out, preference tasks made."""
    d = _init(sim, tmp_path_factory.mktemp("browserprefs") / "camp", CONFIG)
    assert cli(["campaign", "run", str(d), "--oracle", str(sim / "qrels.txt"), "--until", "pool-rest"]) == 0
    assert cli(["campaign", "prefs", "make", str(d)]) == 0
    with Server(d) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox"] if os.geteuid() == 0 else [])
        yield b
        b.close()


class Watched:
    """A page whose dialogs, script errors and requests are recorded (a script that ran would
    show there)."""

    def __init__(self, browser, shots: Path) -> None:
        self.ctx = browser.new_context(viewport={"width": 1100, "height": 800})
        self.page = self.ctx.new_page()
        self.shots = shots
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))

    def shot(self, name: str) -> None:
        """Screenshot to the test's folder and to $QRELKIT_SCREENSHOTS when set."""
        self.page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)
        extra = os.environ.get("QRELKIT_SCREENSHOTS")
        if extra:
            Path(extra).mkdir(parents=True, exist_ok=True)
            shutil.copy(self.shots / f"{name}.png", Path(extra) / f"{name}.png")

    def key(self, key: str) -> None:
        """Press a key that submits a form, and wait until the page is settled: the next passage
        swapped in (a judgment), or the page the form leads to loaded (judge.js marks both
        ``body[data-settled="1"]``)."""
        self.page.keyboard.press(key)
        self.page.wait_for_selector('body[data-settled="1"]', state="attached")

    def attr(self, selector: str, name: str) -> str:
        return self.page.get_attribute(selector, name)

    def no_script_ran(self) -> None:
        assert self.dialogs == [] and self.errors == [], (self.dialogs, self.errors)
        assert self.page.evaluate("typeof window.__xss") == "undefined"
        assert not [u for u in self.requests if u.rstrip("/").endswith("/x")], "the payload's <img> was loaded"

    def close(self) -> None:
        self.ctx.close()


@pytest.fixture
def watched(browser, tmp_path):
    w = Watched(browser, tmp_path)
    yield w
    w.close()


def _judge_by_keys(w: Watched, qid: str, truth, n: int | None = None) -> list[str]:
    """Judge the passages the page shows, one key each (their hidden grades), ``n`` of them or
    all; returns their ids."""
    done = []
    while w.page.query_selector("#item") and (n is None or len(done) < n):
        docid, batch = w.attr("#item", "data-docid"), w.attr("#item", "data-batch")
        judged = int(w.attr("#progress", "data-judged"))
        w.key(str(truth.get((qid, docid), 0)))
        done.append(docid)
        if w.page.query_selector("#item") and w.attr("#item", "data-batch") == batch:
            assert int(w.attr("#progress", "data-judged")) == judged + 1
    return done


def test_judge_reload_the_next_cal_batch_and_review_and_change(judging, watched, truth):
    w, srv = watched, judging
    open_link(w.page, srv.link("ann"))  # the login link: a session cookie, then the topics
    w.page.wait_for_selector('#topics tr[data-qid="1001"]')
    assert [r.get_attribute("data-qid") for r in w.page.query_selector_all("#topics tbody tr")] == ["1001"]
    w.shot("picker")
    with w.page.expect_navigation():
        w.page.click('#topics tr[data-qid="1001"] a.topic-link')
    assert w.attr("#topic", "data-state") == "judging" and w.attr("#item", "data-kind") == "pool"
    assert "<b onmouseover=alert(3)>bold</b>" in w.page.inner_text("#topic-query")
    assert w.page.inner_text("#passage-text").endswith("<img src=x onerror=\"window.__xss = 'img'; alert(1)\">")
    items = int(w.attr("#progress", "data-items"))
    assert items >= 12
    w.shot("topic")
    # ten passages with the keys 0-3
    ten = _judge_by_keys(w, "1001", truth, 10)
    assert len(set(ten)) == 10 and int(w.attr("#progress", "data-judged")) == 10
    with open_campaign_store(srv.camp) as s:
        assert list(s.judgments.assessor_grades("ann", topic="1001")["docid"]) == ten
    assert w.page.query_selector("#undo-button") is None  # review and change replace undo
    here = w.attr("#item", "data-docid")
    # a reload keeps the progress (it is in the store, not in the page)
    w.page.reload()
    assert int(w.attr("#progress", "data-judged")) == 10 and w.attr("#item", "data-docid") == here
    # the others finish their pool batches; the runner is held while ann finishes hers
    for name, qid in (("bob", "1002"), ("cat", "1003")):
        assert srv.api(name).judge_all(qid, truth) > 0
    srv.idle()
    with srv.advancer.lock:
        rest = _judge_by_keys(w, "1001", truth)
        assert len(ten) + len(rest) == items
        assert w.attr("#topic", "data-state") == "computing" and w.page.query_selector("#computing")
        w.shot("computing")
    # the runner goes on: the page polls and shows the first CAL batch by itself
    w.page.wait_for_selector('#item[data-kind="cal"]', timeout=WAIT)
    assert w.attr("#topic", "data-state") == "judging" and "/all/" in w.attr("#item", "data-batch")
    w.shot("next-batch")
    _review_and_change(w, srv, ten)
    # on to the decision: ann with the keys, the others through the API
    for _ in range(6):
        if w.page.query_selector("#decision"):
            break
        _judge_by_keys(w, "1001", truth)
        for name, qid in (("bob", "1002"), ("cat", "1003")):
            srv.api(name).judge_all(qid, truth)
        w.page.wait_for_selector("#item, #decision", timeout=WAIT)
    assert w.page.query_selector("#decision") and w.attr("#topic", "data-state") == "decided"
    w.shot("decision")
    w.key("r")  # the review stays, read-only: a correction now is the organizer's
    assert w.attr("#review", "data-state") == "decided" and not w.page.query_selector("button.change")
    assert "qrelkit campaign judgments set" in w.page.inner_text("#review-closed")
    w.shot("review-decided")
    w.no_script_ran()


def _review_and_change(w: Watched, srv: Server, ten: list[str]) -> None:
    """With the first CAL batch out (the pool batch was used by CAL), open the review of one's
    judgments with ``r``, choose the second newest with ``ArrowDown`` and give it another grade
    with its digit: the grade in force changes in the store (what the next CAL round and the qrels
    read), the history keeps the first grade; ``b`` goes back to the CAL batch."""
    w.key("r")
    assert w.attr("#review", "data-state") == "open"
    rows = w.page.query_selector_all("#review-table tbody tr")
    assert [r.get_attribute("data-docid") for r in rows][-10:] == ten[::-1]  # newest first
    assert w.page.evaluate("document.activeElement.getAttribute('data-docid')") == rows[0].get_attribute("data-docid")
    w.page.keyboard.press("ArrowDown")
    docid = w.page.evaluate("document.activeElement.getAttribute('data-docid')")
    assert docid == rows[1].get_attribute("data-docid")
    old = int(rows[1].get_attribute("data-grade"))
    new = 0 if old >= 2 else 3
    w.key(str(new))
    row = f'#review-table tr[data-docid="{docid}"]'
    assert w.attr(row, "data-grade") == str(new) and w.page.query_selector("#review-saved")
    assert w.page.evaluate("document.activeElement.getAttribute('data-docid')") == docid  # still there, for the next key
    assert w.attr(f'{row} button.change[data-grade="{new}"]', "aria-pressed") == "true"
    w.shot("review")
    with open_campaign_store(srv.camp) as s:
        batch = s.judgments.records(topic="1001", assessor="ann").set_index("docid").loc[docid]
        assert batch["grade"] == new and s.batches.all("1001").set_index("batch_id").loc[batch["batch_id"], "kind"] == "pool"
        assert (s.batches.all("1001")["kind"] == "cal").any()  # the pool batch was used by CAL
        log = s.judgments.log("1001", "all")  # what the next CAL round of the topic trains on
        assert log.loc[log["docid"] == docid, "grade"].tolist() == [new]
        hist = s.judgments.records(topic="1001", assessor="ann", history=True)
        grades = hist.loc[hist["docid"] == docid, "grade"].tolist()  # the judgment, then its changes
        assert grades[0] == old and grades[-1] == new
    w.key("b")
    assert w.attr("#item", "data-kind") == "cal"


def test_organizer_page(judging, watched):
    w = watched
    open_link(w.page, judging.link("boss", organizer=True))
    w.page.wait_for_selector("#status-table")
    assert [r.get_attribute("data-qid") for r in w.page.query_selector_all("#status-table tbody tr")] == [
        "1001", "1002", "1003"]
    assert w.page.query_selector("#report-link") and w.page.query_selector("#qrels-link")
    w.shot("organizer")
    w.no_script_ran()


def test_a_preference_task_with_the_left_and_right_keys(prefs, watched):
    w, srv = watched, prefs
    open_link(w.page, srv.link("ann"))
    w.page.wait_for_selector("#pref-tasks a.pref-link")
    task = w.page.query_selector_all("#pref-tasks tbody tr")[0].get_attribute("data-task")
    with w.page.expect_navigation():
        w.page.click(f'#pref-tasks tr[data-task="{task}"] a.pref-link')
    assert w.attr("#pref-task", "data-state") == "answering" and int(w.attr("#pref-progress", "data-total")) == 13
    assert w.page.inner_text("#pref-progress").strip() == "comparison 1 of 13"
    assert w.page.inner_text("#pref-left-text").endswith("alert(1)\">")  # the payload, as text
    w.shot("preference")
    keys = ["ArrowLeft", "ArrowRight", "f", "j", "1", "2"]
    sides = {"ArrowLeft": "left", "f": "left", "1": "left", "ArrowRight": "right", "j": "right", "2": "right"}
    with open_campaign_store(srv.camp) as s:
        rows = s.prefs.tasks(task).set_index("slot")
    given, undone = {}, False
    for i in range(13):
        assert w.page.inner_text("#pref-progress").strip() == f"comparison {i + 1} of 13"
        slot = int(w.attr("#pref-item", "data-slot"))
        test = rows.loc[slot, "kind"] == "test"  # answered right, so that ann stays in (and has more tasks)
        key = ("ArrowLeft" if rows.loc[slot, "expected"] == "left" else "ArrowRight") if test else keys[i % len(keys)]
        given[slot] = sides[key]
        w.key(key)
        if i >= 2 and not test and not undone:  # a misclick: undone with the key u, then answered the other way
            undone = True
            assert w.attr("#pref-undo-button", "data-slot") == str(slot)
            assert w.attr("#pref-undo-button", "data-choice") == given[slot]
            w.shot("preference-undo")
            w.key("u")
            assert w.page.inner_text("#pref-progress").strip() == f"comparison {i + 1} of 13"
            assert int(w.attr("#pref-item", "data-slot")) == slot
            other = "ArrowRight" if given[slot] == "left" else "ArrowLeft"
            given[slot] = sides[other]
            w.key(other)
    assert w.attr("#pref-task", "data-state") == "done" and w.page.query_selector("#pref-done")
    assert w.page.query_selector("#pref-undo-button") is None  # a finished task's answers stay
    assert w.page.query_selector("#next-task")  # ann has more tasks
    w.shot("preference-done")
    with open_campaign_store(srv.camp) as s:
        ans = s.prefs.answers("ann", task)
        log = s.prefs.answer_log(task)
    assert dict(zip(ans["slot"].astype(int), ans["choice"])) == given
    assert len(log) == 14 and log["retracted"].notna().sum() == 1  # the undone answer stays in the log
    w.no_script_ran()


def test_passages_with_script_render_as_text_and_no_script_runs(prefs, watched):
    """On the judging page (a CAL passage) and the preference page, in a real browser."""
    w, srv = watched, prefs
    open_link(w.page, srv.link("bob"))
    w.page.wait_for_selector('#topics tr[data-qid="1002"]')
    w.page.goto(f"{srv.url}/topics/1002")
    w.page.wait_for_selector("#item")
    text = w.page.inner_text("#passage-text")
    assert '<script>window.__xss = "script"; alert("x")</script>' in text and "onerror=" in text
    assert w.page.query_selector("#passage-text script") is None and w.page.query_selector("#passage-text img") is None
    task = w.page.goto(f"{srv.url}/api/prefs").json()["tasks"][0]["task_id"]
    w.page.goto(f"{srv.url}/prefs/{task}")
    for side in ("left", "right"):
        assert "<script>" in w.page.inner_text(f"#pref-{side}-text")
        assert w.page.query_selector(f"#pref-{side}-text script") is None
    w.page.wait_for_load_state("networkidle")
    w.no_script_ran()
