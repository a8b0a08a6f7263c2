"""The organizer's view (issue 21): live (static/live.js polls /api/organizer/live and fetches
the page again when its stamp moves), throughput per assessor from the judgments' times
(judgments per hour, median seconds per judgment, last active), who owes what, and per topic two
small server-rendered SVG charts (judged over time; density against the stopping rule's line).
"""

from __future__ import annotations

import re
from datetime import datetime

import pytest

pytest.importorskip("starlette")

from qrelkit.store import judgments as judgments_module  # noqa: E402
from test_web import base, camp, sim, truth  # noqa: E402,F401 - fixtures
from test_web_runner import FlakyWeb  # noqa: E402

TIMES = ["2026-01-01T10:00:00+00:00", "2026-01-01T10:00:10+00:00", "2026-01-01T10:00:30+00:00",
         "2026-01-01T10:01:00+00:00"]


def test_throughput_who_owes_what_and_charts(camp, truth, monkeypatch):
    with FlakyWeb(camp) as w:
        org, ann = w.client("org", organizer=True), w.client("ann")
        bob = w.client("bob")
        stamp = org.c.get("/api/organizer/live").json()["stamp"]
        clock = iter(TIMES)  # her four judgments 10, 20 and 30 s apart
        monkeypatch.setattr(judgments_module, "now", lambda: next(clock))
        assert ann.judge_all("1001", truth) == 4
        monkeypatch.undo()
        assert org.c.get("/api/organizer/live").json()["stamp"] != stamp  # the page refreshes on it
        d = org.c.get("/api/organizer").json()
        assert d["throughput"] == [{"assessor": "ann", "judged": 4, "per_hour": 180.0, "median_s": 20.0,
                                    "last_active": "2026-01-01T10:01:00+00:00", "idle_min": d["throughput"][0]["idle_min"]}]
        owed = {(r["assessor"], r["batch_id"]): r for r in d["owed"]}
        assert owed[("bob", "1001/screen")]["owed"] == 4 and owed[("bob", "1001/screen")]["account"] == "assessor"
        assert owed[("cat", "1002/screen")]["account"] == "none" and ("ann", "1001/screen") not in owed
        assert d["density_line"] == 0.4
        c = d["charts"]["1001"]
        assert [p[1] for p in c["judged"]] == [1.0, 2.0, 3.0, 4.0] and c["judged"][-1][0] == 1.0  # minutes
        assert len(c["density"]) == 4 and all(0 <= y <= 1 for _, y in c["density"])
        page = org.c.get("/organizer").text
        row = re.search(r'<tr data-assessor="ann"><td>ann</td><td>4</td><td>([^<]*)</td><td>([^<]*)</td>', page)
        assert row and row.groups() == ("180.0", "20.0")
        assert "2026-01-01 10:01:00 UTC" in page
        assert re.search(r'<tr data-assessor="bob" data-qid="1001"><td>bob</td><td>assessor</td>.*?<td>4</td></tr>', page)
        assert '<tr data-assessor="cat" data-qid="1002"><td>cat</td><td><span class="error">none</span>' in page
        topic = page.split('<tr data-qid="1001">', 1)[1].split("</tr>", 1)[0]
        assert topic.count("<svg") == 2 and 'class="rule-line"' in topic and "passages judged over time" in topic
        assert not re.search(r"<td>[^<]*[{\[]", page), "a raw dict or list in a cell"
        assert 'id="organizer-live" data-stamp="' in page and '<script src="/static/live.js">' in page
        assert "/api/organizer/live" in org.c.get("/static/live.js").text
        # nothing of it for an assessor
        assert bob.c.get("/api/organizer").status_code == 403 and bob.c.get("/api/organizer/live").status_code == 403
        datetime.fromisoformat(d["runner"]["error_at"] or TIMES[0])
