"""Review and change (issue 21, "A typo on the last item of a batch cannot be corrected"): an
assessor sees the list of her judgments on a topic (passage, a snippet, her grade in force, when)
and changes any of them until the topic is decided — also after the runner used the batch for a
CAL round, which is when the old undo answered 409. A change is a row of the judgments' change
log (the original grade stays); the next CAL round and the qrels use the grade in force. After
the topic's decision a change is refused (409, not a dead end): corrections are then the
organizer's, with ``qrelkit campaign judgments set``. One's own judgments only; CSRF as every POST.

The campaign of tests/test_web.py (1001 ann+bob, 1002 bob+cat, 1003 cat+ann), its stopping rule
out of reach so that each topic gets its two CAL rounds (``max_rounds``) before its decision. The
runner runs in this process (:class:`~qrelkit.web.worker.RunnerAdvance`), so that the test sees
the labels each CAL round trains on.
"""

from __future__ import annotations

import re

import pandas as pd
import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

import qrelkit.cal.loop as cal_loop  # noqa: E402
from qrelkit.store import open_campaign_store  # noqa: E402
from qrelkit.web import Advancer, create_app  # noqa: E402
from qrelkit.web.worker import RunnerAdvance  # noqa: E402
from test_web import CONFIG, TOPICS, Web, _init, camp, base, sim, truth  # noqa: E402,F401 - fixtures

SLOW_RULE = CONFIG.replace("accept_min_judged = 10", "accept_min_judged = 500").replace(
    "reject_min_judged = 12", "reject_min_judged = 500")


class InProcessWeb(Web):
    """:class:`test_web.Web` with the runner in this process (its CAL rounds can be watched)."""

    def __init__(self, camp) -> None:
        self.camp = camp
        self.app = create_app(camp, advancer=Advancer(camp, advance=RunnerAdvance()))
        self.main = TestClient(self.app)


@pytest.fixture
def slow(sim, tmp_path):
    with InProcessWeb(_init(sim, tmp_path / "slow", SLOW_RULE)) as w:
        yield w


@pytest.fixture
def web(camp):
    with Web(camp) as w:
        yield w


def _everyone_judges(web, people, truth) -> None:
    for name, p in people.items():
        for q in TOPICS[name]:
            p.judge_all(q, truth)
    web.idle()


def one_topic_open(web, qid: str) -> bool:
    with open_campaign_store(web.camp) as s:
        return s.state.topic_row(qid)["decision"] is None


def _review(p, qid: str) -> dict:
    r = p.c.get(f"/api/topics/{qid}/review")
    assert r.status_code == 200, r.text
    return r.json()


def test_a_change_after_cal_used_the_batch_is_in_force_for_cal_and_the_qrels(slow, truth, monkeypatch):
    seen: list[pd.DataFrame] = []  # the labels every CAL round trains on (a thread's view of the log)
    combine = cal_loop.combine_log
    monkeypatch.setattr(cal_loop, "combine_log", lambda *a, **k: seen.append(combine(*a, **k)) or seen[-1])
    boss = slow.client("boss", organizer=True)
    people = {n: slow.client(n) for n in TOPICS}
    for _ in range(6):  # until a topic's first CAL batch is out: its pool batches were used by CAL
        _everyone_judges(slow, people, truth)
        with open_campaign_store(slow.camp) as s:
            b = s.batches.all()
        cal = b.loc[b["kind"] == "cal", "qid"].astype(str).tolist()
        if cal:
            break
    qid = cal[0]  # (one topic may be discarded at screening)
    assert len(cal) == len(set(cal)) and one_topic_open(slow, qid)
    one, two = (people[n] for n in TOPICS if qid in TOPICS[n])
    rows = _review(one, qid)["judgments"]
    assert rows and {"docid", "grade", "batch_id", "time", "snippet"} <= set(rows[0])
    assert one.topic(qid)["reviewable"] == len(rows)  # the button's count is the review's (passages, not copies)
    target = [r for r in rows if r["batch_id"] == f"{qid}/screen"][0]
    old, new = target["grade"], (0 if target["grade"] >= 2 else 3)  # a change that flips relevance
    # both assessors of the passage change it: the combined grade (qrels, CAL) is then the new one
    for p in (one, two):
        r = p.post(f"/api/topics/{qid}/change", docid=target["docid"], grade=new)
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "changed" and r.json()["grade"] == new and r.json()["docid"] == target["docid"]
    again = one.post(f"/api/topics/{qid}/change", docid=target["docid"], grade=new)
    assert again.status_code == 200 and again.json()["status"] == "unchanged"
    assert {r["docid"]: r["grade"] for r in _review(one, qid)["judgments"]}[target["docid"]] == new
    name = one.c.get("/api/session").json()["name"]
    with open_campaign_store(slow.camp) as s:  # the grade in force, and the history kept
        live = s.judgments.records(topic=qid, assessor=name)
        assert live.loc[live["docid"] == target["docid"], "grade"].tolist() == [new]
        hist = s.judgments.records(topic=qid, assessor=name, history=True)
        h = hist[hist["docid"] == target["docid"]]
        assert h["grade"].tolist()[0] == old and h["grade"].tolist()[-1] == new
        assert (h["source"] == "web-change").any() and len(h) >= 2
    # the qrels so far use it
    q = boss.c.get("/organizer/qrels").text
    assert re.search(rf"^{qid} 0 {re.escape(target['docid'])} {new}$", q, re.M), q
    # the topic's next CAL round trains on it
    seen.clear()
    _everyone_judges(slow, people, truth)
    with open_campaign_store(slow.camp) as s:
        assert (s.batches.all(qid)["kind"] == "cal").sum() == 2
    rounds = [lab for lab in seen if len(lab) and (lab["qid"].astype(str) == qid).all()]
    assert rounds, f"no CAL round of {qid} was computed"
    for lab in rounds:
        assert dict(zip(lab["docid"], lab["grade"]))[target["docid"]] == new
    # on to the decisions: then a change is the organizer's
    for _ in range(6):
        if slow.health()["topics_decided"] == 3:
            break
        _everyone_judges(slow, people, truth)
    assert slow.health()["topics_decided"] == 3
    r = one.post(f"/api/topics/{qid}/change", docid=target["docid"], grade=old)
    assert r.status_code == 409
    assert "decided" in r.json()["error"] and "qrelkit campaign judgments set" in r.json()["error"]
    html = one.c.post(f"/topics/{qid}/change", data={"csrf": one.csrf, "docid": target["docid"], "grade": str(old)},
                      headers={"accept": "text/html"})
    assert html.status_code == 409 and "qrelkit campaign judgments set" in html.text
    assert f'href="/topics/{qid}"' in html.text and 'href="/"' in html.text  # not a dead end
    page = one.c.get(f"/topics/{qid}/review").text
    assert 'id="review-closed"' in page and "qrelkit campaign judgments set" in page and "change-form" not in page
    with open_campaign_store(slow.camp) as s:
        live = s.judgments.records(topic=qid, assessor=name)
        assert live.loc[live["docid"] == target["docid"], "grade"].tolist() == [new]  # nothing changed


def test_the_review_page_lists_ones_judgments_and_a_form_changes_one(web, truth):
    ann = web.client("ann")
    done = []
    for _ in range(3):
        it = ann.topic("1001")["item"]
        assert ann.post("/api/topics/1001/judgments", batch_id=it["batch_id"], docid=it["docid"], grade=1).status_code == 200
        done.append(it["docid"])
    topic = ann.c.get("/topics/1001").text
    assert 'id="review-button"' in topic and 'data-key="r"' in topic
    assert 'id="undo-button"' not in topic and "/undo" not in topic  # undo is gone: review and change replace it
    page = ann.c.get("/topics/1001/review")
    assert page.status_code == 200
    listed = re.findall(r'<tr data-docid="([^"]+)" data-grade="(\d)"', page.text)
    assert listed == [(d, "1") for d in reversed(done)]  # newest first
    assert "&lt;b onmouseover=alert(3)&gt;" in page.text and "<b onmouseover" not in page.text  # texts escaped
    assert 'id="back-button"' in page.text and 'src="/static/review.js"' in page.text
    for g in (0, 1, 2, 3):  # every row's grade buttons, the one in force pressed
        assert f'class="change" name="grade" value="{g}"' in page.text
    assert page.text.count('aria-pressed="true"') == 3
    r = ann.c.post("/topics/1001/change", data={"csrf": ann.csrf, "docid": done[0], "grade": "3"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/topics/1001/review")
    page = ann.c.get(r.headers["location"]).text
    assert f'<tr data-docid="{done[0]}" data-grade="3"' in page and 'id="review-saved"' in page
    # a change is a row of the change log: the judgment itself stays
    with open_campaign_store(web.camp) as s:
        assert s.counts()["judgments"] == 3
        changes = s.db.conn.execute("SELECT grade, source FROM judgment_changes ORDER BY seq").fetchall()
    assert changes[-1] == (3, "web-change") and all(src == "web-change" for _, src in changes)
    # judging that passage again with its old grade (a stale page) is a conflict that points to the review
    it = {"batch_id": "1001/screen", "docid": done[0], "grade": 1}
    r = ann.post("/api/topics/1001/judgments", **it)
    assert r.status_code == 409 and "review" in r.json()["error"]
    html = ann.c.post("/topics/1001/judge", data={"csrf": ann.csrf, **{k: str(v) for k, v in it.items()}},
                      headers={"accept": "text/html"})
    assert html.status_code == 409 and 'href="/topics/1001/review"' in html.text and 'href="/topics/1001"' in html.text


def test_only_ones_own_judgments_can_be_changed_and_csrf_is_required(web):
    ann, bob, cat = web.client("ann"), web.client("bob"), web.client("cat")
    it = ann.topic("1001")["item"]
    assert ann.post("/api/topics/1001/judgments", batch_id=it["batch_id"], docid=it["docid"], grade=2).status_code == 200
    url = "/api/topics/1001/change"
    # bob is an assessor of 1001 but never judged that passage: nothing of his to change
    r = bob.post(url, docid=it["docid"], grade=0)
    assert r.status_code == 404 and "no judgment" in r.json()["error"]
    assert _review(bob, "1001")["judgments"] == []
    # cat does not see topic 1001 at all
    assert cat.post(url, docid=it["docid"], grade=0).status_code == 404
    assert cat.c.get("/api/topics/1001/review").status_code == 404
    assert cat.c.get("/topics/1001/review").status_code == 404
    # CSRF, the grade, the request
    assert ann.c.post(url, json={"docid": it["docid"], "grade": 0}).status_code == 403
    assert ann.c.post(url, json={"docid": it["docid"], "grade": 0}, headers={"X-CSRF-Token": "forged"}).status_code == 403
    assert ann.c.post("/topics/1001/change", data={"docid": it["docid"], "grade": "0"}).status_code == 403
    assert ann.post(url, docid=it["docid"], grade=9).status_code == 400
    assert ann.post(url, grade=1).status_code == 400
    assert ann.post(url, docid="no-such-passage", grade=1).status_code == 404
    assert TestClient(web.app).get("/api/topics/1001/review").status_code == 401
    with open_campaign_store(web.camp) as s:  # nothing changed by the refused requests
        assert s.db.conn.execute("SELECT COUNT(*) FROM judgment_changes").fetchone()[0] == 0
        assert s.judgments.records(topic="1001")["grade"].tolist() == [2]
    # ann's own change goes through
    assert ann.post(url, docid=it["docid"], grade=0).json()["status"] == "changed"


def test_a_change_on_a_decided_topic_is_refused_with_the_way_forward(web):
    ann = web.client("ann")
    it = ann.topic("1001")["item"]
    assert ann.post("/api/topics/1001/judgments", batch_id=it["batch_id"], docid=it["docid"], grade=2).status_code == 200
    with open_campaign_store(web.camp) as s:  # as the runner records a discarded topic
        s.state.set_topics([{"qid": "1001", "screening": "discard", "decision": "discarded", "rule": "screening",
                             "reason": "test"}])
    r = ann.post("/api/topics/1001/change", docid=it["docid"], grade=0)
    assert r.status_code == 409 and "qrelkit campaign judgments set" in r.json()["error"]
    assert ann.c.get("/api/topics/1001/review").json()["decided"] is True
    page = ann.c.get("/topics/1001").text  # the decided page leads to the (read-only) review
    assert 'id="review-button"' in page
