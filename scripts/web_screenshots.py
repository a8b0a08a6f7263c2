"""Screenshots of every view of the assessor web app, for docs/web.md ("Screenshots").

    python scripts/web_screenshots.py                 # into docs/img/web/
    python scripts/web_screenshots.py --out /tmp/shots --full-page

Builds two small simulated campaigns in a temporary folder (3 topics, 1,500 passages, a depth-3
pool, a 4-passage screening, CAL batches of 4), serves each with uvicorn on a free loopback port
(in a thread of this process) and photographs every view with the system's Chromium (Playwright,
as tests/test_web_browser.py launches it) at 1280x800 and at a phone's 390x844:

* campaign A (``[web] free_topic_choice = true``; its protocol's assessors have no account):
  the topic picker, a free topic (*take this topic*), a passage to judge, the waiting page (the
  screening waits for the other topics), the review of her judgments, the campaign *paused* (an
  input moved away: the assessor's page and the organizer's, then the input put back),
  *computing the next batch* (the runner held while the last batch is judged), the keyboard
  help and the guidelines;
* campaign B (judged by the simulator's oracle to the end, preference tasks made before): a
  topic's decision, a preference task, the organizer's page.

Each view is ``NAME-desktop.png`` and ``NAME-phone.png`` (the viewport, not the whole page, unless
``--full-page``; PNGs reduced to a 64-colour palette when Pillow is installed, to keep them
small). A view the app does not have (the guidelines, the help overlay) is left out and said so.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from playwright.sync_api import Error as PlaywrightError, sync_playwright  # noqa: E402

from qrelkit.campaign.accounts import add_account  # noqa: E402
from qrelkit.cli import run as cli  # noqa: E402
from qrelkit.web import create_app  # noqa: E402

VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
BASE = """
[pool]
depth = 3
[screen]
first_n = 4
discard_if_relevant_share_at_least = 1.0
discard_if_no_relevant = false
[batch]
assessors_per_item = 1
[campaign]
assessors = [{names}]
owner_judges_cal = true
skip = ["dedupe", "evaluate", "reuse", "report"]
max_rounds = 2
[cal]
batch_size = 4
threads = ["all"]
official_thread = "all"
[stopping]
accept_min_judged = 20
accept_min_relevant = 1
reject_min_judged = 40
"""
FREE = BASE.format(names='"p1", "p2", "p3"') + '[web]\nfree_topic_choice = true\nguidelines = "guide.md"\n'
GUIDE = """# Judging guide

Read the **query** and the passage; choose the grade that fits the passage *on its own*.

* *Perfectly relevant*: the passage answers the question, and nothing more is needed.
* *Highly relevant*: it answers, with some extra reading or unclear parts.
* *Related*: on the topic, but it does not answer.
* *Irrelevant*: off the topic.

When unsure between two grades, choose the lower one and move on.
"""
ORACLE = BASE.format(names='"ann", "bob", "cat"')


def chromium() -> str:
    for c in (os.environ.get("QRELKIT_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
              "/usr/bin/chromium"):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    sys.exit("no Chromium found (apt-get install chromium, or set QRELKIT_CHROMIUM)")


def make_campaign(work: Path, name: str, protocol: str) -> Path:
    sim = work / "sim"
    if not sim.exists():
        assert cli(["simulate", "campaign", "-o", str(sim), "--passages", "1500", "--topics", "3", "--groups", "2",
                    "--seed", "4"]) == 0
    (work / f"{name}.toml").write_text(protocol)
    (work / "guide.md").write_text(GUIDE)
    camp = work / name
    assert cli(["campaign", "init", str(camp), "-c", str(work / f"{name}.toml"), "--corpus", str(sim / "corpus.jsonl"),
                "-t", str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]) == 0
    return camp


class Served:
    """``create_app`` served by uvicorn on a free loopback port, in a thread."""

    def __init__(self, camp: Path) -> None:
        self.camp, self.app = camp, create_app(camp)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> "Served":
        self.thread.start()
        end = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > end:
                raise RuntimeError("the server did not start")
            time.sleep(0.05)
        self.advancer.wait_idle(300)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()

    @property
    def advancer(self):
        return self.app.state.service.advancer

    def link(self, name: str, **kw) -> str:
        return add_account(self.camp, name, base_url=self.url, **kw)["link"]


class Camera:
    """A browser context (one account, logged in once) that photographs its page at every size."""

    def __init__(self, browser, out: Path, full_page: bool) -> None:
        self.browser = browser
        self.ctx = browser.new_context(viewport=VIEWPORTS["desktop"])
        self.page = self.ctx.new_page()
        self.out, self.full_page = out, full_page
        self.taken: list[str] = []

    def shoot(self, name: str) -> None:
        for size, vp in VIEWPORTS.items():
            self.page.set_viewport_size(vp)
            self.page.wait_for_timeout(150)  # the layout after the resize
            path = self.out / f"{name}-{size}.png"
            self.page.screenshot(path=str(path), full_page=self.full_page)
            _shrink(path)
            self.taken.append(path.name)
        self.page.set_viewport_size(VIEWPORTS["desktop"])

    def login(self, link: str, selector: str = "main, body") -> None:
        """Open a login link and press its button (opening alone logs nobody in)."""
        self.page.goto(link)
        with self.page.expect_navigation():
            self.page.click("#login-button")
        self.page.wait_for_selector(selector)

    def goto(self, url: str, selector: str = "main, body") -> None:
        self.page.goto(url)
        self.page.wait_for_selector(selector)

    def close(self) -> None:
        self.ctx.close()


def _shrink(path: Path) -> None:
    """A 64-colour palette PNG (text pages lose nothing visible), when Pillow is installed."""
    try:
        from PIL import Image  # lazy: optional, only to make the files small
    except ImportError:
        return
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def _judge_all(c: httpx.Client, qid: str, truth: dict, keep: int = 0) -> None:
    """Judge through the API every passage owed on ``qid`` but the last ``keep``."""
    while True:
        v = c.get(f"/api/topics/{qid}").json()
        it = v.get("item")
        if not it or v["owed"] <= keep:
            return
        r = c.post(f"/api/topics/{qid}/judgments", json={"batch_id": it["batch_id"], "docid": it["docid"],
                                                         "grade": truth.get((qid, it["docid"]), 0)})
        r.raise_for_status()


def _api(srv: Served, name: str) -> httpx.Client:
    c = httpx.Client(base_url=srv.url, timeout=60)
    r = c.post(srv.link(name).removeprefix(srv.url), follow_redirects=False)  # an API client: POST the link
    assert r.status_code == 303, r.text
    c.headers["X-CSRF-Token"] = c.get("/api/session").json()["csrf"]
    return c


def _shown(cam: Camera) -> str | None:
    """The passage the page shows (None: none), read again after the page's own reloads."""
    for _ in range(100):
        try:
            cam.page.wait_for_selector("#topic", state="attached", timeout=10_000)
            return cam.page.evaluate("() => { const i = document.querySelector('#item'); return i ? i.dataset.docid : null; }")
        except PlaywrightError:
            cam.page.wait_for_timeout(50)
    raise RuntimeError("the page did not settle")


def _judge_shown(cam: Camera, qid: str, truth: dict) -> None:
    """Judge with the keys every passage the page shows (each judgment done when the page shows
    another passage or none: a reload or an update in place)."""
    while (docid := _shown(cam)) is not None:
        cam.page.keyboard.press(str(truth.get((qid, docid), 0)))
        end = time.monotonic() + 60
        while _shown(cam) == docid:
            if time.monotonic() > end:
                raise RuntimeError(f"passage {docid} stayed on the page")
            cam.page.wait_for_timeout(20)


def campaign_a(browser, work: Path, out: Path, truth: dict, full_page: bool, notes: list[str]) -> list[str]:
    """Picker, free topic, judging, help, guidelines, waiting, review, paused (the assessor's and
    the organizer's page), computing."""
    camp = make_campaign(work, "free", FREE)
    with Served(camp) as srv:
        cam = Camera(browser, out, full_page)
        cam.login(srv.link("ann"), "#topics")
        cam.shoot("picker")
        cam.goto(f"{srv.url}/topics/1001", "#topic")
        cam.shoot("free-topic")
        with cam.page.expect_navigation():
            cam.page.click("#take-button")
        cam.page.wait_for_selector("#item")
        cam.shoot("judging")
        cam.page.keyboard.press("?")  # the keyboard help, when the page has one
        cam.page.wait_for_timeout(300)
        help_ = cam.page.query_selector("#help, #keyboard-help, #keys-help, [role=dialog]")
        if help_ is not None and help_.is_visible():
            cam.shoot("keyboard-help")
            cam.page.keyboard.press("Escape")
        else:
            notes.append("keyboard help: no overlay on '?' in this version")
        g = cam.page.goto(f"{srv.url}/guidelines")
        if g is not None and g.status == 200:
            cam.shoot("guidelines")
        else:
            notes.append(f"guidelines: /guidelines answered {None if g is None else g.status} in this version")
        cam.goto(f"{srv.url}/topics/1001", "#topic")
        _judge_shown(cam, "1001", truth)  # ann's screening batch, with the keys
        cam.page.wait_for_selector("#waiting")
        cam.shoot("waiting")
        with cam.page.expect_navigation():
            cam.page.keyboard.press("r")  # the review of her judgments on the topic
        cam.page.wait_for_selector("#review-table")
        cam.shoot("review")
        cam.goto(f"{srv.url}/topics/1001", "#waiting")
        manifest = work / "sim" / "manifest.csv"  # an input gone: the runner fails, the campaign pauses
        manifest.rename(manifest.with_suffix(".away"))
        srv.advancer.request()
        cam.page.wait_for_selector('#topic[data-state="paused"]', timeout=60_000)
        cam.shoot("paused")
        org = Camera(cam.browser, out, full_page)
        org.login(srv.link("boss", organizer=True))
        org.goto(f"{srv.url}/organizer", "#runner-error")
        org.shoot("organizer-paused")
        cam.taken += org.taken
        org.close()
        manifest.with_suffix(".away").rename(manifest)  # back: the runner sees it and goes on
        cam.page.wait_for_selector('#topic[data-state="waiting"]', timeout=60_000)
        bob = _api(srv, "bob")
        for q in ("1002", "1003"):
            bob.post(f"/api/topics/{q}/take").raise_for_status()
            _judge_all(bob, q, truth, keep=1 if q == "1003" else 0)
        srv.advancer.wait_idle(300)
        with srv.advancer.lock:  # the runner held: the last judgment leaves it asked for, not done
            _judge_all(bob, "1003", truth)
            cam.page.wait_for_selector("#computing", timeout=30_000)
            cam.shoot("computing")
        bob.close()
        cam.page.wait_for_selector("#item", timeout=120_000)
        cam.close()
        return cam.taken


def campaign_b(browser, work: Path, out: Path, full_page: bool) -> list[str]:
    """A decision, a preference task, the organizer's page."""
    camp = make_campaign(work, "oracle", ORACLE)
    qrels = str(work / "sim" / "qrels.txt")
    assert cli(["campaign", "run", str(camp), "--oracle", qrels, "--until", "pool-rest"]) == 0
    assert cli(["campaign", "prefs", "make", str(camp)]) == 0
    assert cli(["campaign", "run", str(camp), "--oracle", qrels]) == 0
    taken: list[str] = []
    with Served(camp) as srv:
        cam = Camera(browser, out, full_page)
        cam.login(srv.link("ann"), "#topics")
        cam.shoot("picker-with-preferences")
        cam.goto(f"{srv.url}/topics/1001", "#decision")
        cam.shoot("decision")
        task = cam.page.goto(f"{srv.url}/api/prefs").json()["tasks"][0]["task_id"]
        cam.goto(f"{srv.url}/prefs/{task}", "#pref-task")
        cam.shoot("preference")
        taken += cam.taken
        cam.close()
        boss = Camera(browser, out, full_page)
        boss.login(srv.link("boss", organizer=True), "#status-table")
        boss.shoot("organizer")
        taken += boss.taken
        boss.close()
    return taken


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "web")
    ap.add_argument("--full-page", action="store_true", help="the whole page, not the viewport")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        work = Path(tmp)
        browser = p.chromium.launch(executable_path=chromium(), headless=True,
                                    args=["--no-sandbox"] if os.geteuid() == 0 else [])
        try:
            make_campaign(work, "probe", ORACLE)  # the simulation, for its hidden qrels
            rows = [ln.split() for ln in (work / "sim" / "qrels.txt").read_text().splitlines() if ln.strip()]
            truth = {(q, d): int(g) for q, _, d, g in rows}
            taken = campaign_a(browser, work, args.out, truth, args.full_page, notes)
            taken += campaign_b(browser, work, args.out, args.full_page)
        finally:
            browser.close()
    total = sum((args.out / n).stat().st_size for n in taken)
    print(f"{len(taken)} screenshots in {args.out} ({total / 1024:.0f} KB)")
    for n in notes:
        print("note:", n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
