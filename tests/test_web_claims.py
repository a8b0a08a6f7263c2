"""Free topic choice (issue 21, the first defect): a topic taken by an assessor stays hers through
every later stage. The places of an assessor without an active account, taken in the web app, are
recorded in the store as claims and honoured when the runner issues or assigns a batch again; the
campaign reaches the decision of every topic, never waiting for the assessor who has no account.

The campaign of tests/test_web.py (3 topics, two assessors per batch: 1001 ann+bob, 1002 bob+cat,
1003 cat+ann) with ``[web] free_topic_choice`` and the fractional stage; bob judges up to a stage,
then his account is revoked and ann takes his place on topic 1002 in the next stage (the rest of
the pool, the fractional pool, or CAL).
"""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")

from qrelkit.campaign.accounts import revoke_account  # noqa: E402
from qrelkit.store import open_campaign_store  # noqa: E402
from test_web import CONFIG, Web, _init, sim, truth  # noqa: E402,F401 - sim and truth are fixtures

FREE = CONFIG.replace('skip = ["dedupe", "fractional", ', 'skip = ["dedupe", ') + "[web]\nfree_topic_choice = true\n"


def _judge_pass(web: Web, people: dict, truth, taken: dict) -> int:
    """Everyone takes the free places of the topics they see (recorded in ``taken``: topic ->
    stages done then), then judges every passage they owe there; the runner advances."""
    n = 0
    for name, p in people.items():
        for t in p.c.get("/api/topics").json()["topics"]:
            if p.topic(t["qid"])["state"] == "free":
                r = p.post(f"/api/topics/{t['qid']}/take")
                assert r.status_code == 200 and r.json()["batches"] >= 1, r.text
                taken[(name, t["qid"])] = web.health()["stages_done"]
            n += p.judge_all(t["qid"], truth)
    web.idle()
    return n


@pytest.mark.parametrize("leaves_after,taken_in", [("screening", "pool-rest"), ("pool-rest", "fractional"),
                                                    ("fractional", "cal")])
def test_a_topic_taken_stays_hers_through_every_later_stage(sim, tmp_path, truth, leaves_after, taken_in):
    camp = _init(sim, tmp_path / "free", FREE)
    with Web(camp) as w:
        people = {n: w.client(n) for n in ("ann", "bob", "cat")}
        taken: dict = {}
        for _ in range(6):  # all three judge until bob leaves
            _judge_pass(w, people, truth, taken)
            if leaves_after in w.health()["stages_done"]:
                break
        h = w.health()
        assert not taken and leaves_after in h["stages_done"] and taken_in not in h["stages_done"], h
        revoke_account(camp, "bob")
        del people["bob"]
        for _ in range(12):
            moved = _judge_pass(w, people, truth, taken)
            h = w.health()
            if "qrels" in h["stages_done"] or not moved:
                break
        with open_campaign_store(camp) as s:
            a = s.assignments.all()
            bobs = s.judgments.assessor_grades("bob")
            owed = s.assignments.pending()
        # bob's topic 1002 (with cat; 1001 is discarded by the screening): ann took it in the stage
        assert list(taken) == [("ann", "1002")] and taken_in not in taken[("ann", "1002")], taken
        later = a[~a["batch_id"].isin(set(bobs["batch_id"]))]  # the batches bob judged nothing in
        assert "bob" not in set(later["assessor"]), later[later["assessor"] == "bob"]
        assert set(later.loc[later["qid"] == "1002", "batch_id"].str.split("/").str[1]) >= {
            {"cal": "all"}.get(taken_in, taken_in), "all"}  # the stage's batch and the CAL thread's
        assert {"ann", "cat"} == set(later.loc[later["qid"] == "1002", "assessor"])
        assert not len(owed), owed
        assert h["runner_error"] is None and h["topics_decided"] == 3
        assert {"pool-rest", "fractional", "cal", "qrels"} <= set(h["stages_done"])
        with open_campaign_store(camp) as s:  # the claim, in the store
            assert s.assignments.claims().values.tolist() == [["1002", "bob", "ann"]]
