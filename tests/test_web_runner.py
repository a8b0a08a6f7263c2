"""The background runner seen from the web app (issue 21): a failed run pauses the campaign, the
assessor whose topic waits is told so ("the campaign is paused; the organizer has been told",
never "the other assessors" as the reason), the organizer sees the runner's error, its time and
the next automatic try, and retries it with a button (POST, CSRF, organizers only); once a run
goes through, by the retry or by itself, the topics move on and the message is gone. A topic with
nothing to judge says what it waits for: another assessor (named for an organizer only), the
next round being computed (with an estimate from the runner's recent runs), the paused campaign.

The campaign of tests/test_web.py, its runner kept in the test's process (:class:`Flaky`: fails
while told to, holds while told to).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from qrelkit.web import Advancer, RunnerAdvance, create_app  # noqa: E402
from qrelkit.web.app import when  # noqa: E402
from test_web import TOPICS, Web, base, camp, sim, truth  # noqa: E402,F401 - base, camp, sim and truth are fixtures

PAUSED = "the campaign is paused; the organizer has been told"


class Flaky:
    """``advance(directory)`` through a :class:`RunnerAdvance`; raises while ``fail`` is set,
    waits while ``hold`` is clear."""

    def __init__(self) -> None:
        self.inner = RunnerAdvance()
        self.fail = False
        self.hold = threading.Event()
        self.hold.set()

    def __call__(self, directory: Path) -> dict:
        assert self.hold.wait(60)
        if self.fail:
            raise RuntimeError("the corpus moved")
        return self.inner(directory)

    def close(self) -> None:
        self.inner.close()


class FlakyWeb(Web):
    """:class:`test_web.Web` with a :class:`Flaky` runner; ``retry_s``: its first automatic retry."""

    def __init__(self, camp: Path, retry_s: float = 600.0) -> None:
        self.camp = camp
        self.flaky = Flaky()
        self.advancer = Advancer(camp, advance=self.flaky)
        self.advancer.RETRY_FIRST_S = self.advancer.RETRY_MAX_S = retry_s
        self.app = create_app(camp, advancer=self.advancer)
        self.main = TestClient(self.app)


def _judge_everything(people: dict, truth) -> None:
    for name, p in people.items():
        for q in TOPICS[name]:
            p.judge_all(q, truth)


def test_a_failed_runner_pauses_the_topic_and_the_organizers_retry_moves_it_on(camp, truth):
    with FlakyWeb(camp) as w:
        org = w.client("org", organizer=True)
        people = {n: w.client(n) for n in TOPICS}
        w.flaky.fail = True
        _judge_everything(people, truth)
        w.idle()
        ann = people["ann"]
        v = ann.topic("1001")
        assert v["item"] is None and v["state"] == "paused" and v["waiting"]["reason"] == "paused"
        assert "error" not in v["waiting"]  # no internals for a plain assessor
        assert ann.c.get("/api/topics/1001/state").json()["state"] == "paused"
        page = ann.c.get("/topics/1001").text
        assert PAUSED in page and "other assessors finish" not in page and "corpus moved" not in page
        # the organizer: the error, its time, the next automatic try, a retry button
        r = org.c.get("/api/organizer").json()["runner"]
        assert r["paused"] and r["last_error"] == "RuntimeError: the corpus moved" and r["failures"] >= 1
        assert datetime.fromisoformat(r["retry_at"]) > datetime.fromisoformat(r["error_at"])
        page = org.c.get("/organizer").text
        assert "last run failed: RuntimeError: the corpus moved" in page and 'id="retry-button"' in page
        assert when(r["error_at"]) in page and when(r["retry_at"]) in page
        assert org.c.get("/api/organizer/live").json()["runner"]["paused"]
        # the retry: an organizer's, with the CSRF token
        runs = w.advancer.runs
        assert ann.post("/api/organizer/retry").status_code == 403
        assert org.c.post("/api/organizer/retry", json={}).status_code == 403
        assert org.c.post("/organizer/retry", data={"csrf": "forged"}, follow_redirects=False).status_code == 403
        assert org.c.get("/organizer/retry").status_code == 405
        w.idle()
        assert w.advancer.runs == runs
        w.flaky.fail = False
        r = org.c.post("/organizer/retry", data={"csrf": org.csrf}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/organizer"
        w.idle()
        assert w.advancer.runs == runs + 1 and w.advancer.last_error is None
        v = ann.topic("1001")
        assert v["state"] in ("judging", "waiting", "decided") and (v["waiting"] or {}).get("reason") != "paused"
        assert PAUSED not in ann.c.get("/topics/1001").text
        r = org.c.get("/api/organizer").json()["runner"]
        assert not r["paused"] and r["last_error"] is None and r["error_at"] is None and r["retry_at"] is None
        assert 'id="runner-error"' not in org.c.get("/organizer").text
        assert org.post("/api/organizer/retry").json()["status"] == "requested"  # the JSON form
        w.idle()


def test_the_paused_message_goes_away_by_itself_once_a_run_goes_through(camp, truth):
    with FlakyWeb(camp, retry_s=0.05) as w:
        people = {n: w.client(n) for n in TOPICS}
        w.flaky.fail = True
        _judge_everything(people, truth)
        w.idle()
        ann = people["ann"]
        assert ann.c.get("/api/topics/1001/state").json()["state"] == "paused"
        w.flaky.fail = False  # the cause fixed: nobody asks for a run
        end = time.monotonic() + 60
        while ann.c.get("/api/topics/1001/state").json()["state"] == "paused" and time.monotonic() < end:
            time.sleep(0.02)
        w.idle()
        assert w.advancer.last_error is None
        assert PAUSED not in ann.c.get("/topics/1001").text


def test_waiting_says_for_whom_to_an_organizer_and_names_nobody_to_an_assessor(camp, truth):
    with FlakyWeb(camp) as w:
        ann, bob = w.client("ann", organizer=True), w.client("bob")  # ann judges and organizes
        bob.judge_all("1001", truth)
        v = bob.topic("1001")
        assert v["state"] == "waiting" and v["waiting"]["reason"] == "assessor" and "who" not in v["waiting"]
        page = bob.c.get("/topics/1001").text
        assert "Another assessor is finishing this topic" in page and "ann" not in page.split('id="waiting"')[1]
        assert bob.c.get("/api/topics/1001/state").json()["waiting"]["reason"] == "assessor"
        ann.judge_all("1003", truth)
        v = ann.topic("1003")  # cat owes her part of 1003
        assert v["waiting"]["reason"] == "assessor" and [r["assessor"] for r in v["waiting"]["who"]] == ["cat"]
        assert 'data-assessor="cat"' in ann.c.get("/topics/1003").text
        ann.judge_all("1001", truth)
        w.idle()
        v = ann.topic("1001")  # screened: the next stage waits for the other topics' batches
        assert v["state"] == "waiting" and v["waiting"]["reason"] == "topics"
        assert {r["assessor"] for r in v["waiting"]["who"]} == {"bob", "cat"}


def test_waiting_for_the_next_round_shows_an_estimate(camp, truth):
    with FlakyWeb(camp) as w:
        ann, bob = w.client("ann"), w.client("bob")
        w.flaky.hold.clear()  # the next run holds
        ann.judge_all("1001", truth)
        bob.judge_all("1001", truth)
        end = time.monotonic() + 30
        while w.advancer.state != "computing" and time.monotonic() < end:
            time.sleep(0.01)
        s = ann.c.get("/api/topics/1001/state").json()
        assert s["state"] == "computing" and s["waiting"]["reason"] == "computing"
        assert s["waiting"]["estimate_s"] is not None and s["waiting"]["elapsed_s"] >= 0  # from the first run
        page = ann.c.get("/topics/1001").text
        assert 'id="estimate"' in page and "A round takes about" in page
        w.flaky.hold.set()
        w.idle()
        assert ann.c.get("/api/topics/1001/state").json()["state"] != "computing"


def test_a_paused_runner_tries_again_as_soon_as_its_inputs_come_back(camp):
    """The runner watches the campaign's recorded inputs while paused: once a missing input is
    back, the next run comes within a few seconds — not at the end of a backoff that grew while
    the file was away (the soak benchmark waited 65 s)."""
    from qrelkit.campaign import protected_paths

    path = next(p for p, what in protected_paths(camp).items() if p.is_file())
    calls: list[bool] = []

    def advance(directory: Path) -> dict:
        calls.append(path.exists())
        if not path.exists():
            raise RuntimeError(f"[input-missing] {path}")
        return {}

    a = Advancer(camp, advance=advance)
    a.RETRY_FIRST_S = a.RETRY_MAX_S = 600.0  # only the watch can bring the next run
    a.WATCH_S = 0.05
    away = path.with_name(path.name + ".away")
    a.start()
    try:
        path.rename(away)
        a.request()
        assert a.wait_idle(30) and a.paused and calls == [False]
        time.sleep(0.3)
        assert calls == [False], "nothing changed: no run before the backoff"
        away.rename(path)
        end = time.monotonic() + 10
        while a.paused and time.monotonic() < end:
            time.sleep(0.05)
        assert not a.paused and calls == [False, True] and a.last_error is None
    finally:
        if away.exists():
            away.rename(path)
        a.stop()


def test_a_run_stopped_by_its_inputs_is_one_line_in_the_log(tmp_path, caplog):
    """``qrelkit serve``'s runner stopped by bad input (a corpus folder changed since init): the
    log says it in one line, as the command line does — no traceback; a bug keeps its traceback."""
    import logging

    from qrelkit.errors import InputError

    def changed(directory: Path) -> dict:
        raise InputError("input-changed", "the campaign's corpus folder changed since init (shard README is new)",
                         file="/data/msmarco")

    a = Advancer(tmp_path, advance=changed)
    with caplog.at_level(logging.ERROR, logger="qrelkit.web"):
        a._run_once()
    assert [r.exc_info for r in caplog.records] == [None]
    assert "[input-changed]" in caplog.records[0].getMessage() and "README is new" in caplog.records[0].getMessage()
    assert "[input-changed]" in a.last_error
