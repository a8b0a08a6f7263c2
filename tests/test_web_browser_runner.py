"""The paused-then-recovered runner in a real browser (issue 21): the runner fails while the
assessors finish their pool batches; the assessor's topic page says the campaign is paused, the
organizer's page shows the error with a retry button; the cause fixed, the organizer retries, and
both pages move on by themselves (static/live.js): the assessor's shows her first CAL batch, the
organizer's the runner no longer paused, and then another assessor's judgments, with no reload. Launched as tests/test_web_browser.py launches Chromium.
"""

from __future__ import annotations

import socket
import threading

import pytest

pytest.importorskip("starlette")
from test_web_browser import open_link, CONFIG, WAIT, Server, Watched, browser, sim, truth, uvicorn  # noqa: E402,F401 - fixtures
from test_web import _init  # noqa: E402
from test_web_runner import PAUSED, Flaky  # noqa: E402

from qrelkit.web import Advancer, create_app  # noqa: E402


class FlakyServer(Server):
    """:class:`test_web_browser.Server` whose runner is a :class:`test_web_runner.Flaky`."""

    def __init__(self, camp) -> None:  # Server's, with the app made over the flaky runner
        self.camp = camp
        self.flaky = Flaky()
        adv = Advancer(camp, advance=self.flaky)
        adv.RETRY_FIRST_S = adv.RETRY_MAX_S = 600.0  # no automatic try in the test: the organizer's retry
        self.app = create_app(camp, advancer=adv)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="critical", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.apis = {}


def _judge_all(w: Watched, url: str, qid: str, truth) -> int:
    """Judge what the browser's account owes on ``qid`` through the JSON API, with the browser's
    cookies (Playwright's request context of the page's browser context)."""
    req, n = w.ctx.request, 0
    csrf = req.get(f"{url}/api/session").json()["csrf"]
    while (it := req.get(f"{url}/api/topics/{qid}").json()["item"]):
        r = req.post(f"{url}/api/topics/{qid}/judgments", headers={"X-CSRF-Token": csrf},
                     data={"batch_id": it["batch_id"], "docid": it["docid"], "grade": truth.get((qid, it["docid"]), 0)})
        assert r.ok, r.text()
        n += 1
    return n


def test_the_paused_runner_and_the_organizers_retry(sim, truth, browser, tmp_path):
    with FlakyServer(_init(sim, tmp_path / "camp", CONFIG)) as srv:
        srv.flaky.fail = True
        ann, boss = Watched(browser, tmp_path), Watched(browser, tmp_path)
        boss.navigations = []
        boss.page.on("framenavigated", lambda f: boss.navigations.append(f.url))
        try:
            open_link(ann.page, srv.link("ann"))
            assert _judge_all(ann, srv.url, "1001", truth) > 0  # through the API, in her browser's session
            for name, qid in (("bob", "1002"), ("cat", "1003")):
                assert srv.api(name).judge_all(qid, truth) > 0
            srv.idle()
            ann.page.goto(f"{srv.url}/topics/1001")
            assert ann.attr("#topic", "data-state") == "paused" and PAUSED in ann.page.inner_text("#waiting")
            ann.shot("paused")
            open_link(boss.page, srv.link("boss", organizer=True))
            boss.page.wait_for_selector("#runner-error")
            assert "RuntimeError: the corpus moved" in boss.page.inner_text("#runner-error")
            assert boss.page.query_selector("#runner-retry-at") and boss.attr("#runner", "data-paused") == "yes"
            boss.shot("organizer-paused")
            srv.flaky.fail = False  # the cause fixed; the organizer retries
            with boss.page.expect_navigation():
                boss.page.click("#retry-button")
            # both pages move on by themselves
            ann.page.wait_for_selector('#item[data-kind="cal"]', timeout=WAIT)
            assert ann.attr("#topic", "data-state") == "judging" and PAUSED not in ann.page.content()
            boss.page.wait_for_selector('#runner[data-paused="no"]', timeout=WAIT)
            assert boss.page.query_selector("#runner-error") is None
            boss.shot("organizer-recovered")
            # the organizer's page stays live: bob's next judgments show up without a reload
            cell = '#throughput-table tr[data-assessor="bob"] td:nth-child(2)'
            before = int(boss.page.inner_text(cell))
            nav = len(boss.navigations)
            assert srv.api("bob").judge_all("1002", truth) > 0
            for _ in range(WAIT // 200):  # a bound on the wait (the page polls every 4 s), not a timing check
                if int(boss.page.inner_text(cell)) != before:
                    break
                boss.page.wait_for_timeout(200)
            assert int(boss.page.inner_text(cell)) > before and len(boss.navigations) == nav
            ann.no_script_ran()
            boss.no_script_ran()
        finally:
            ann.close()
            boss.close()
