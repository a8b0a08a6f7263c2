"""Whole flows in a real browser (issue 21, "How it is checked"): the free-topic flow of two
assessors through every stage to the decision.

``[web] free_topic_choice = true``; the protocol's assessors ``p1`` and ``p2`` have no account,
so every topic is free to take. Two browsers (ann, bob; their login links opened once) each take
a topic on its page (*take this topic*) and judge it with the keys 0-3 through every stage the
protocol has — screening, the rest of the pool, the fractional pool, CAL rounds — to the topic's
decision, waiting on the waiting page (which updates by itself) whenever the other's topic holds
the stage back (screening and the rest of the pool wait for every topic). Checked: every batch
of a topic went to the assessor who took it (the claims honoured through every later stage),
each took exactly her topic, every stage ran, both topics are decided, and the pages showed only
the states of the stable hooks (docs/web.md).

The hooks used are those docs/web.md lists as stable: ``#topic[data-state]``, ``#item[data-batch]
[data-docid][data-kind]``, ``#take-button``, ``#decision[data-decision]``, ``#topics tr[data-qid]``;
a judgment is done when the page shows another passage or another state (a reload or an update
in place, whichever the page does). Small: a simulated campaign of 2 topics, 1,500 passages, a
depth-3 pool, a 4-passage screening, CAL batches of 4 in one thread, at most 2 rounds; the
stopping thresholds (40 judged to accept, 44 to reject) need CAL rounds on both topics (about 80
passages judged in all).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")
pytest.importorskip("playwright")

from playwright.sync_api import Error as PlaywrightError  # noqa: E402
from test_web_browser import open_link, CHROMIUM, Server, sync_playwright  # noqa: E402 - skips the module without Chromium

from qrelkit.cli import run as cli  # noqa: E402
from qrelkit.store import open_campaign_store  # noqa: E402

FREE = """
[pool]
depth = 3
[screen]
first_n = 4
discard_if_relevant_share_at_least = 1.0
discard_if_no_relevant = false
[batch]
assessors_per_item = 1
[campaign]
assessors = ["p1", "p2"]
owner_judges_cal = true
skip = ["dedupe", "evaluate", "reuse", "report"]
max_rounds = 2
[cal]
batch_size = 4
threads = ["all"]
official_thread = "all"
[stopping]
accept_min_judged = 40
accept_min_relevant = 1
reject_min_judged = 44
[web]
free_topic_choice = true
"""
WAIT_MS = 120_000  # the longest a page may wait for the other assessor or the runner (a bound)


@pytest.fixture(scope="module")
def camp(tmp_path_factory) -> tuple[Path, dict]:
    d = tmp_path_factory.mktemp("browserflows")
    sim = d / "sim"
    assert cli(["simulate", "campaign", "-o", str(sim), "--passages", "1500", "--topics", "2", "--groups", "2",
                "--seed", "4"]) == 0
    (d / "free.toml").write_text(FREE)
    assert cli(["campaign", "init", str(d / "camp"), "-c", str(d / "free.toml"), "--corpus", str(sim / "corpus.jsonl"),
                "-t", str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]) == 0
    rows = [ln.split() for ln in (sim / "qrels.txt").read_text().splitlines() if ln.strip()]
    return d / "camp", {(q, doc): int(g) for q, _, doc, g in rows}


class Judge:
    """One assessor's browser page on one topic."""

    def __init__(self, browser, srv: Server, name: str, qid: str, truth: dict) -> None:
        self.ctx = browser.new_context(viewport={"width": 1100, "height": 800})
        self.page = self.ctx.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.name, self.qid, self.truth = name, qid, truth
        self.judged: list[tuple[str, str]] = []  # (batch, passage) in the order judged
        self.states: list[str] = []
        open_link(self.page, srv.link(name))  # opened once: the session cookie stays in this context
        self.page.wait_for_selector(f'#topics tr[data-qid="{qid}"]')
        with self.page.expect_navigation():
            self.page.click(f'#topics tr[data-qid="{qid}"] a.topic-link')

    def _read(self, js: str, arg=None):
        """``js`` evaluated on the page; again after the page's own reload (a waiting page reloads
        itself when its state changes: a read may meet the navigation)."""
        for _ in range(50):
            try:
                self.page.wait_for_selector("#topic", state="attached", timeout=10_000)
                return self.page.evaluate(js, arg)
            except PlaywrightError:
                self.page.wait_for_timeout(50)
        raise AssertionError(f"{self.name}: the page did not settle")

    def state(self) -> str:
        s = self._read("() => document.querySelector('#topic').dataset.state")
        if not self.states or self.states[-1] != s:
            self.states.append(s)
        return s

    def item(self) -> tuple[str, str] | None:
        """(batch, passage) of the passage shown, or None."""
        return self._read("() => { const i = document.querySelector('#item'); return i ? [i.dataset.batch, i.dataset.docid]"
                          " : null; }")

    def take(self) -> None:
        with self.page.expect_navigation():
            self.page.click("#take-button")

    def judge_what_is_shown(self) -> int:
        """Judge with the keys every passage the page shows, one after the other; returns how many."""
        n = 0
        while (shown := self.item()) is not None:
            batch, docid = shown
            self.page.keyboard.press(str(self.truth.get((self.qid, docid), 0)))
            end = time.monotonic() + WAIT_MS / 1000
            while self.item() == shown:  # until another passage or no passage: the judgment went through
                assert time.monotonic() < end, f"{self.name}: {docid} stayed on the page"
                self.page.wait_for_timeout(20)
            self.judged.append((batch, docid))
            n += 1
        return n

    def close(self) -> None:
        self.ctx.close()


def test_free_topic_flow_of_two_assessors_through_every_stage_to_the_decision(camp):
    d, truth = camp
    with Server(d) as srv, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox"] if os.geteuid() == 0 else [])
        people = [Judge(browser, srv, "ann", "1001", truth), Judge(browser, srv, "bob", "1002", truth)]
        try:
            for j in people:  # nobody judges these topics yet: each takes hers
                assert j.state() == "free"
                j.take()
                assert j.state() == "judging", j.state()
            end = time.monotonic() + WAIT_MS / 1000
            while not all(j.state() == "decided" for j in people):
                assert time.monotonic() < end, [(j.name, j.states) for j in people]
                moved = sum(j.judge_what_is_shown() for j in people if j.state() == "judging")
                if not moved:  # both wait (for the other, or the runner): their pages update by themselves
                    people[0].page.wait_for_timeout(200)
            for j in people:
                assert j.page.query_selector("#decision").get_attribute("data-decision") in ("accept", "reject", "stop")
                assert not j.errors, j.errors
            # (whether a page was seen waiting depends on timing: the next batch may be swapped in
            # before a look; the stages each topic went through are checked in the store below)
        finally:
            for j in people:
                j.close()
            browser.close()
        srv.idle()
    with open_campaign_store(d) as s:
        a = s.assignments.all()
        log = s.judgments.log(None, "all")
        claims = sorted(s.assignments.claims().values.tolist())
        b = s.batches.all()
        done = set(s.state.stages_done())
        decisions = s.state.topics()["decision"].tolist()
        failure = s.state.failure()
    assert claims == [["1001", "p1", "ann"], ["1002", "p2", "bob"]]
    # every batch of a topic was hers, in every stage: screening, the rest of the pool, fractional, CAL
    assert {(q, who) for q, who in zip(a["qid"], a["assessor"])} == {("1001", "ann"), ("1002", "bob")}
    kinds = {q: set(b.loc[b["qid"] == q, "batch_id"].str.split("/").str[1]) for q in ("1001", "1002")}
    for q in ("1001", "1002"):
        assert {"screen", "pool-rest", "fractional", "all"} <= kinds[q], kinds  # (all: the CAL thread)
    # what the browsers judged is the judgments log (no passage twice, none lost)
    web = log[log["assessor"].isin(["ann", "bob"])]
    assert sorted(zip(web["batch_id"], web["docid"])) == sorted(people[0].judged + people[1].judged)
    assert all(x in ("accept", "reject", "stop") for x in decisions) and len(decisions) == 2
    assert {"screening", "pool-rest", "fractional", "cal", "qrels"} <= done and failure is None
