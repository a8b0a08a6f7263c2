"""Preference tasks in the web app (issue 14, "Preference view"), through the ASGI test client:
``qrelkit campaign prefs make`` builds the protocol's crowd tasks (10 real + 3 test pairs) from
a judged campaign and assigns them; an assessor answers them one comparison at a time (left or
right), each answer stored once in the campaign store; a task not assigned is 404, bad requests
4xx; an assessor who fails a test pair is excluded and their tasks go to others, as ``qrelkit
prefs import`` rules; ``qrelkit campaign prefs export`` writes what ``qrelkit prefs import`` reads.

The campaign is test_web's (three topics, assessors ann, bob, cat; passages carry a script
payload), judged to the end by the simulator's oracle before the tasks are made.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402

from qrelkit.campaign import CAMPAIGN_SCHEMA_VERSION, make_preference_tasks  # noqa: E402
from qrelkit.campaign.prefs import export_preferences  # noqa: E402
from qrelkit.store import open_campaign_store  # noqa: E402
from qrelkit.cli import run as cli  # noqa: E402
from test_web import PAYLOAD, Web, _init, sim, truth  # noqa: E402,F401 - sim and truth are fixtures

NAMES = ["ann", "bob", "cat"]


@pytest.fixture(scope="module")
def judged(sim, tmp_path_factory) -> Path:
    """test_web's campaign judged to its end by the oracle, with its preference tasks made."""
    d = _init(sim, tmp_path_factory.mktemp("webprefs") / "camp")
    assert cli(["campaign", "run", str(d), "--oracle", str(sim / "qrels.txt")]) == 0
    assert cli(["campaign", "prefs", "make", str(d)]) == 0
    return d


@pytest.fixture
def camp(judged, tmp_path) -> Path:
    d = tmp_path / "camp"
    shutil.copytree(judged, d)
    return d


@pytest.fixture
def web(camp):
    with Web(camp) as w:
        yield w


def tasks_of(camp: Path, name: str | None = None) -> pd.DataFrame:
    with open_campaign_store(camp) as s:
        t = s.prefs.tasks()
        if name is not None:
            mine = s.prefs.assignments(name)["task_id"]
            t = t[t["task_id"].isin(set(mine))]
    return t


def good_choice(row, truth) -> str:
    """A careful assessor: the test pair's relevant side, else the passage of the higher grade."""
    if row["kind"] == "test":
        return row["expected"]
    lg, rg = truth.get((row["qid"], row["left_docid"]), 0), truth.get((row["qid"], row["right_docid"]), 0)
    return "left" if lg >= rg else "right"


def answer_task(p, camp: Path, task_id: str, choose) -> None:
    """Answer a task through the JSON API, comparison after comparison as the page shows them."""
    rows = tasks_of(camp).set_index(["task_id", "slot"])
    while (v := p.c.get(f"/api/prefs/{task_id}").json())["item"]:
        it = v["item"]
        r = p.post(f"/api/prefs/{task_id}/answers", slot=it["slot"], choice=choose(rows.loc[(task_id, it["slot"])]))
        assert r.status_code == 200 and r.json()["status"] == "stored", r.text


def test_make_builds_13_comparison_tasks_and_assigns_them_round_robin(camp, capsys):
    t = tasks_of(camp)
    size = t.groupby("task_id").size()
    kinds = t.groupby("task_id")["kind"].value_counts().unstack(fill_value=0)
    assert (kinds["test"] == 3).all() and (kinds["real"].iloc[:-1] == 10).all() and 1 <= kinds["real"].iloc[-1] <= 10
    assert (size == kinds["real"] + 3).all() and list(size.index) == sorted(size.index)
    assert all(tid.startswith("P0") for tid in size.index)
    assert (camp / "prefs" / "pool-P.parquet").is_file()
    with open_campaign_store(camp) as s:
        a = s.prefs.assignments()
    per = a["assessor"].value_counts()
    assert set(per.index) == set(NAMES) and per.max() - per.min() <= 1 and len(a) == len(size)
    # passages and queries come with their texts
    assert t["left_text"].str.endswith(PAYLOAD).all() and (t["query"] != "").all()
    # a second set gets the next prefix; a prefix in use is refused (one line, exit 2, nothing written)
    kept = t.loc[t["kind"] == "real", "qid"].iloc[0]  # a topic screening kept (a discarded one has no pairs)
    res = make_preference_tasks(camp, topics=[kept], assessors=["bob"])
    assert res["prefix"] == "P2-" and set(res["tasks_per_assessor"]) == {"bob"}
    n = len(tasks_of(camp))
    capsys.readouterr()
    assert cli(["campaign", "prefs", "make", str(camp), "--prefix", "P"]) == 2
    err = capsys.readouterr().err
    assert "[tasks-exist]" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert len(tasks_of(camp)) == n


def test_picker_lists_ones_tasks_and_the_page_shows_the_pair_escaped(web):
    ann = web.client("ann")
    mine = list(dict.fromkeys(tasks_of(web.camp, "ann")["task_id"]))
    page = ann.c.get("/").text
    assert 'id="pref-tasks"' in page and all(f'data-task="{t}"' in page for t in mine)
    assert [t["task_id"] for t in ann.c.get("/api/prefs").json()["tasks"]] == mine
    page = ann.c.get(f"/prefs/{mine[0]}")
    assert page.status_code == 200
    html = page.text
    for side, keys in (("left", "ArrowLeft f 1"), ("right", "ArrowRight j 2")):
        assert f'id="pref-{side}-text"' in html and f'id="choose-{side}"' in html and f'data-keys="{keys}"' in html
    assert 'id="pref-question"' in html and "comparison 1 of 13" in html
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    v = ann.c.get(f"/api/prefs/{mine[0]}").json()
    assert v["state"] == "answering" and v["total"] == 13 and v["answered"] == 0
    # nothing tells a test pair
    assert set(v["item"]) == {"slot", "position", "qid", "query", "left", "right", "topic_changed"}


def test_answers_are_stored_once_through_the_form_and_the_api(web):
    bob = web.client("bob")
    task = tasks_of(web.camp, "bob")["task_id"].iloc[0]
    first = bob.c.get(f"/api/prefs/{task}").json()["item"]
    r = bob.c.post(f"/prefs/{task}/answer", data={"csrf": bob.csrf, "slot": str(first["slot"]), "choice": "left"},
                   follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/prefs/{task}"
    with open_campaign_store(web.camp) as s:  # acknowledged: committed
        assert s.prefs.answers("bob").values.tolist() == [[task, first["slot"], "bob", "left"]]
    again = bob.post(f"/api/prefs/{task}/answers", slot=first["slot"], choice="L")
    assert again.status_code == 200 and again.json()["status"] == "repeated"
    other = bob.post(f"/api/prefs/{task}/answers", slot=first["slot"], choice="right")
    assert other.status_code == 409 and "answered left already" in other.json()["error"]
    v = bob.c.get(f"/api/prefs/{task}").json()
    assert v["answered"] == 1 and v["item"]["slot"] != first["slot"] and v["item"]["position"] == 2
    assert "comparison 2 of 13" in bob.c.get(f"/prefs/{task}").text
    with open_campaign_store(web.camp) as s:
        assert len(s.prefs.answers()) == 1


def test_a_task_not_assigned_to_one_is_404(web):
    ann, bob = web.client("ann"), web.client("bob")
    anns = tasks_of(web.camp, "ann")["task_id"].iloc[0]
    for url in (f"/prefs/{anns}", f"/api/prefs/{anns}", "/prefs/P99999", "/api/prefs/nothing"):
        r = bob.c.get(url)
        assert r.status_code == 404 and "no preference task" in r.text, url
    r = bob.post(f"/api/prefs/{anns}/answers", slot=1, choice="left")
    assert r.status_code == 404
    r = bob.c.post(f"/prefs/{anns}/answer", data={"csrf": bob.csrf, "slot": "1", "choice": "left"})
    assert r.status_code == 404 and 'id="error-message"' in r.text
    assert ann.c.get(f"/prefs/{anns}").status_code == 200
    with open_campaign_store(web.camp) as s:
        assert len(s.prefs.answers()) == 0


def test_bad_answers_are_4xx_with_a_message(web):
    ann = web.client("ann")
    task = tasks_of(web.camp, "ann")["task_id"].iloc[0]
    url = f"/api/prefs/{task}/answers"
    cases = [
        (ann.post(url, slot=1, choice="up"), 400, "neither left nor right"),
        (ann.post(url, slot="one", choice="left"), 400, "not a number"),
        (ann.post(url, slot=99, choice="left"), 404, "no comparison 99"),
        (ann.post(url, choice="left"), 400, "lacks slot"),
        (ann.post(url, slot=1), 400, "lacks choice"),
        (ann.c.post(url, json={"slot": 1, "choice": "left"}), 403, "CSRF"),
        (ann.c.post(f"/prefs/{task}/answer", data={"slot": "1", "choice": "left"}), 403, "CSRF"),
        (TestClient(web.app).get(f"/prefs/{task}"), 401, "not logged in"),
        (TestClient(web.app).post(url, json={"slot": 1, "choice": "left"}), 401, "not logged in"),
        (ann.c.get("/organizer/prefs/answers.csv"), 403, "organizers"),
    ]
    for r, status, words in cases:
        assert r.status_code == status, (r.request.url, r.status_code, r.text)
        assert "Traceback" not in r.text and words in r.text, r.text
    with open_campaign_store(web.camp) as s:
        assert len(s.prefs.answers()) == 0


def test_failing_a_test_pair_excludes_the_assessor_and_their_tasks_go_to_others(web, truth):
    """As ``prefs import`` rules: none of the failing assessor's answers is used, the task they
    finished is re-issued (``.r1``, never to them), and their unfinished tasks move to others."""
    ann, bob = web.client("ann"), web.client("bob")
    boss = web.client("boss", organizer=True)
    anns = list(dict.fromkeys(tasks_of(web.camp, "ann")["task_id"]))
    bobs = tasks_of(web.camp, "bob")["task_id"].iloc[0]
    answer_task(bob, web.camp, bobs, lambda r: good_choice(r, truth))
    answer_task(ann, web.camp, anns[0], lambda r: ("right" if r["expected"] == "left" else "left")
                if r["kind"] == "test" else good_choice(r, truth))
    v = ann.c.get(f"/api/prefs/{anns[0]}").json()
    assert v["state"] == "done" and v["next_task"] is None  # nothing open for her any more
    with open_campaign_store(web.camp) as s:
        sc = s.state.get("pref_screening")
        a = s.prefs.assignments()
    assert sc["excluded"] == ["ann"] and sc["reissued"] == [anns[0] + ".r1"] and sc["moved"] == len(anns) - 1
    assert sc["judgments"] == 10 and sc["test_failed"] == 3  # bob's 10 real answers; ann's are not used
    assert set(a.loc[a["task_id"] == anns[0] + ".r1", "assessor"]) <= {"bob", "cat"} and len(a[a["task_id"] == anns[0] + ".r1"]) == 1
    assert set(a.loc[a["task_id"].isin(anns[1:]), "assessor"]) <= {"bob", "cat"}
    r1 = tasks_of(web.camp)
    r1 = r1[r1["task_id"] == anns[0] + ".r1"]
    assert r1["exclude_workers"].iloc[0] == ["ann"] and len(r1) == 13
    rows = {t["task_id"]: t["state"] for t in ann.c.get("/api/prefs").json()["tasks"]}
    assert rows == {anns[0]: "done"}
    assert ann.c.get(f"/prefs/{anns[1]}").status_code == 404  # moved to another assessor
    page = boss.c.get("/organizer").text
    assert 'id="prefs-excluded"' in page and "ann" in page and 'id="prefs-answers-link"' in page
    d = boss.c.get("/api/organizer").json()["prefs"]
    assert d["reissues"] == 1 and {r["assessor"]: r["excluded"] for r in d["assessors"]}["ann"] is True


def test_export_is_what_prefs_import_reads(web, truth, tmp_path, capsys):
    people = {n: web.client(n) for n in NAMES}
    boss = web.client("boss", organizer=True)
    done = []
    for name, p in people.items():
        t = tasks_of(web.camp, name)["task_id"].iloc[0]
        answer_task(p, web.camp, t, lambda r: good_choice(r, truth))
        done.append(t)
    # one task half answered: not exported (a task's answers count once it is finished)
    half = tasks_of(web.camp, "ann")["task_id"].unique()[1]
    it = people["ann"].c.get(f"/api/prefs/{half}").json()["item"]
    assert people["ann"].post(f"/api/prefs/{half}/answers", slot=it["slot"], choice="left").status_code == 200
    capsys.readouterr()
    ans, tasks = tmp_path / "answers.csv", tmp_path / "tasks.parquet"
    assert cli(["campaign", "prefs", "export", str(web.camp), "-o", str(ans), "--tasks-out", str(tasks), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["answers"] == 39 and out["tasks"] == len(tasks_of(web.camp)["task_id"].unique())
    df = pd.read_csv(ans, dtype=str)
    assert list(df.columns) == ["task_id", "slot", "worker", "choice"] and set(df["task_id"]) == set(done)
    # the organizer's downloads are the same data
    web_csv = boss.c.get("/organizer/prefs/answers.csv")
    assert web_csv.status_code == 200 and web_csv.text == ans.read_text()
    assert boss.c.get("/organizer/prefs/tasks.parquet").content[:4] == b"PAR1"
    judg = tmp_path / "judgments.parquet"
    assert cli(["prefs", "import", str(ans), "--tasks", str(tasks), "-o", str(judg), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["judgments"] == 30 and res["excluded_workers"] == [] and res["test_failed"] == 0
    with open_campaign_store(web.camp) as s:
        assert s.state.get("pref_screening")["judgments"] == 30


def test_undo_the_last_answer_then_answer_it_the_other_way(web, tmp_path):
    """Undo is a retraction row: the answer leaves every reading (the page, the export), the
    comparison is asked again and may be answered the other way; the log keeps both answers."""
    bob = web.client("bob")
    task = tasks_of(web.camp, "bob")["task_id"].iloc[0]
    url = f"/api/prefs/{task}"
    v0 = bob.c.get(url).json()
    assert v0["last"] is None and 'id="pref-undo-button"' not in bob.c.get(f"/prefs/{task}").text
    s1 = v0["item"]["slot"]
    assert bob.post(f"{url}/answers", slot=s1, choice="left").json()["status"] == "stored"
    s2 = bob.c.get(url).json()["item"]["slot"]
    assert bob.post(f"{url}/answers", slot=s2, choice="left").json()["status"] == "stored"
    v = bob.c.get(url).json()
    assert {k: v["last"][k] for k in ("slot", "choice")} == {"slot": s2, "choice": "left"} and v["answered"] == 2
    html = bob.c.get(f"/prefs/{task}").text
    assert 'id="pref-undo-button" data-key="u"' in html and "Undo last answer" in html
    assert f'name="slot" value="{s2}"' in html.split('id="pref-undo-form"')[1]
    # the page's form (CSRF in the form, as the other forms)
    r = bob.c.post(f"/prefs/{task}/undo", data={"csrf": bob.csrf, "slot": str(s2)}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/prefs/{task}"
    v = bob.c.get(url).json()
    assert v["answered"] == 1 and v["item"]["slot"] == s2 and v["item"]["position"] == 2
    assert {k: v["last"][k] for k in ("slot", "choice")} == {"slot": s1, "choice": "left"}
    # answered again, the other way: a new answer in force, stored
    again = bob.post(f"{url}/answers", slot=s2, choice="right")
    assert again.status_code == 200 and again.json()["status"] == "stored" and again.json()["answered"] == 2
    assert bob.post(f"{url}/answers", slot=s2, choice="right").json()["status"] == "repeated"
    assert bob.post(f"{url}/answers", slot=s2, choice="left").status_code == 409
    # the JSON undo says what it undid and the new progress
    r = bob.post(f"{url}/undo", slot=s2)
    assert r.status_code == 200
    assert r.json() == {"task_id": task, "slot": s2, "choice": "right", "status": "retracted", "answered": 1,
                        "total": 13, "done": False}
    assert bob.post(f"{url}/answers", slot=s2, choice="right").json()["status"] == "stored"
    with open_campaign_store(web.camp) as s:
        assert s.prefs.answers("bob").values.tolist() == [[task, s1, "bob", "left"], [task, s2, "bob", "right"]]
        log = s.prefs.answer_log(task)
    assert log["choice"].tolist() == ["left", "left", "right", "right"] and log["slot"].tolist() == [s1, s2, s2, s2]
    assert log["retracted"].notna().tolist() == [False, True, True, False]
    assert set(log["retracted_by"].dropna()) == {"bob"} and set(log["source"].dropna()) == {"web-undo"}
    # the rest of the task, then the export: the answer in force only
    rows = tasks_of(web.camp).set_index(["task_id", "slot"])
    answer_task(bob, web.camp, task, lambda r: "left")
    ans = tmp_path / "answers.csv"
    assert cli(["campaign", "prefs", "export", str(web.camp), "-o", str(ans), "--tasks-out",
                str(tmp_path / "tasks.parquet")]) == 0
    df = pd.read_csv(ans, dtype={"task_id": str, "worker": str})
    assert len(df) == 13 and len(rows.loc[task]) == 13 and not df.duplicated(["task_id", "slot", "worker"]).any()
    assert df.loc[df["slot"] == s2, "choice"].tolist() == ["right"] and df.loc[df["slot"] == s1, "choice"].tolist() == ["left"]


def test_undo_is_refused_once_the_task_is_done_and_with_nothing_to_undo(web, truth):
    ann, bob = web.client("ann"), web.client("bob")
    task = tasks_of(web.camp, "ann")["task_id"].iloc[0]
    url = f"/api/prefs/{task}/undo"
    r = ann.post(url, slot=1)
    assert r.status_code == 409 and "no answer to undo" in r.json()["error"]
    first = ann.c.get(f"/api/prefs/{task}").json()["item"]["slot"]
    assert ann.post(f"/api/prefs/{task}/answers", slot=first, choice="left").status_code == 200
    # another assessor cannot undo ann's answer: the task is not theirs (404), and their own undo touches only theirs
    r = bob.post(url, slot=first)
    assert r.status_code == 404 and "no preference task" in r.json()["error"]
    bobs = tasks_of(web.camp, "bob")["task_id"].iloc[0]
    assert bob.post(f"/api/prefs/{bobs}/undo", slot=first).status_code == 409
    # refused requests: CSRF missing (JSON and form), no slot, a slot not a number, not logged in
    cases = [(ann.c.post(url, json={"slot": first}), 403, "CSRF"),
             (ann.c.post(f"/prefs/{task}/undo", data={"slot": str(first)}), 403, "CSRF"),
             (ann.post(url), 400, "lacks slot"), (ann.post(url, slot="x"), 400, "not a number"),
             (TestClient(web.app).post(url, json={"slot": first}), 401, "not logged in")]
    for r, status, words in cases:
        assert r.status_code == status and words in r.text and "Traceback" not in r.text, (r.status_code, r.text)
    with open_campaign_store(web.camp) as s:
        assert len(s.prefs.answers("ann")) == 1 and s.prefs.answer_log()["retracted"].isna().all()
    # the task finished: the screening ran on it, undo is refused (the page offers none)
    answer_task(ann, web.camp, task, lambda r: good_choice(r, truth))
    last = tasks_of(web.camp, "ann")
    r = ann.post(url, slot=int(last.loc[last["task_id"] == task, "slot"].iloc[-1]))
    assert r.status_code == 409 and "finished" in r.json()["error"] and "no longer be undone" in r.json()["error"]
    assert 'id="pref-undo-button"' not in ann.c.get(f"/prefs/{task}").text
    assert ann.c.get(f"/api/prefs/{task}").json()["last"] is None
    with open_campaign_store(web.camp) as s:
        assert len(s.prefs.answers("ann", task)) == 13 and s.prefs.answer_log()["retracted"].isna().all()
        assert s.state.get("pref_screening")["excluded"] == []


def test_a_retried_undo_undoes_one_answer_only(web):
    """The undo names the comparison it undoes: a retry of an undo that went through is
    ``repeated`` (nothing written) and never undoes the answer before; an undo naming another
    comparison than the last answered is 409."""
    cat = web.client("cat")
    task = tasks_of(web.camp, "cat")["task_id"].iloc[0]
    slots = []
    for _ in range(3):
        k = cat.c.get(f"/api/prefs/{task}").json()["item"]["slot"]
        assert cat.post(f"/api/prefs/{task}/answers", slot=k, choice="left").status_code == 200
        slots.append(k)
    url = f"/api/prefs/{task}/undo"
    r = cat.post(url, slot=slots[0])
    assert r.status_code == 409 and f"comparison {slots[2]}, not {slots[0]}" in r.json()["error"]
    assert cat.post(url, slot=slots[2]).json()["status"] == "retracted"
    for _ in range(2):  # the client's retries
        r = cat.post(url, slot=slots[2])
        assert r.status_code == 200 and r.json()["status"] == "repeated" and r.json()["answered"] == 2
        assert r.json()["choice"] == "left" and r.json()["slot"] == slots[2]
    with open_campaign_store(web.camp) as s:
        assert s.prefs.answers("cat")["slot"].tolist() == slots[:2] and s.prefs.answer_log()["retracted"].notna().sum() == 1
    # a second undo (naming the answer before) undoes it: undo can be repeated down the task
    assert cat.post(url, slot=slots[1]).json()["status"] == "retracted"
    assert cat.post(url, slot=slots[0]).json()["status"] == "retracted"
    r = cat.post(url, slot=slots[0])
    assert r.json()["status"] == "repeated" and r.json()["answered"] == 0
    with open_campaign_store(web.camp) as s:
        assert len(s.prefs.answers("cat")) == 0 and len(s.prefs.answer_log()) == 3


def test_an_excluded_assessor_cannot_undo(web, truth):
    ann = web.client("ann")
    anns = list(dict.fromkeys(tasks_of(web.camp, "ann")["task_id"]))
    answer_task(ann, web.camp, anns[0], lambda r: ("right" if r["expected"] == "left" else "left")
                if r["kind"] == "test" else good_choice(r, truth))
    with open_campaign_store(web.camp) as s:
        assert s.state.get("pref_screening")["excluded"] == ["ann"]
        s.prefs.assign(anns[1], "ann")  # one of the tasks moved from her, given back by hand
        first = s.prefs.tasks(anns[1])["slot"].iloc[0]
    r = ann.post(f"/api/prefs/{anns[1]}/undo", slot=int(first))
    assert r.status_code == 409 and "closed for you" in r.json()["error"]


PREF_TABLES = ("campaign_pref_retractions", "campaign_pref_answers", "campaign_pref_assign", "campaign_pref_tasks")


def _drop_pref_tables(s) -> None:
    s.db.conn.execute("DROP VIEW live_pref_answers")
    for t in PREF_TABLES:
        s.db.conn.execute(f"DROP TABLE {t}")


def test_a_version_3_campaign_store_gets_the_preference_tables(camp):
    with open_campaign_store(camp) as s:
        _drop_pref_tables(s)
        s.db.conn.execute("UPDATE meta SET value = '3' WHERE key = 'campaign_schema_version'")
    with open_campaign_store(camp) as s:
        assert s.schema_versions()["campaign_schema_version"] == CAMPAIGN_SCHEMA_VERSION == 7
        assert len(s.prefs.tasks()) == 0 and s.accounts.all() == [] and len(s.prefs.answer_log()) == 0
    # a version 2 store (no accounts either) gets both
    with open_campaign_store(camp) as s:
        s.db.conn.execute("DROP TABLE campaign_accounts")
        _drop_pref_tables(s)
        s.db.conn.execute("UPDATE meta SET value = '2' WHERE key = 'campaign_schema_version'")
    with open_campaign_store(camp) as s:
        assert s.schema_versions()["campaign_schema_version"] == CAMPAIGN_SCHEMA_VERSION and s.accounts.all() == []
    assert make_preference_tasks(camp)["tasks"] > 0
    db = sqlite3.connect(camp / "campaign.db")
    assert db.execute("SELECT COUNT(DISTINCT task_id) FROM campaign_pref_tasks").fetchone()[0] > 0
    db.close()


#: the answers table as schema 4 made it (one answer per task, slot and assessor, for ever)
V4_ANSWERS = """CREATE TABLE campaign_pref_answers (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL, slot INTEGER NOT NULL, assessor TEXT NOT NULL,
    choice TEXT NOT NULL CHECK (choice IN ('left', 'right')), answered TEXT NOT NULL,
    UNIQUE (task_id, slot, assessor), FOREIGN KEY (task_id, slot) REFERENCES campaign_pref_tasks (task_id, slot))"""


def _as_version_4(camp: Path, answers: list[tuple]) -> None:
    """Make the store a schema-4 one, as that code wrote it: no retractions, no view, the answers
    table with its UNIQUE constraint, holding ``answers`` (seq, task_id, slot, assessor, choice, answered)."""
    db = sqlite3.connect(camp / "campaign.db")
    with db:
        db.execute("DROP VIEW live_pref_answers")
        db.execute("DROP TABLE campaign_pref_retractions")
        db.execute("DROP TABLE campaign_pref_answers")  # its triggers and index go with it
        db.execute(V4_ANSWERS)
        db.executemany("INSERT INTO campaign_pref_answers VALUES (?, ?, ?, ?, ?, ?)", answers)
        db.execute("UPDATE meta SET value = '4' WHERE key = 'campaign_schema_version'")
    db.close()


def test_a_version_4_store_opens_read_only_as_it_is_and_migrates_for_writing(camp, tmp_path):
    t, n_tasks = tasks_of(camp, "ann"), len(tasks_of(camp))
    task, slots = t["task_id"].iloc[0], t["slot"].astype(int).tolist()
    old = [(7, task, slots[0], "ann", "left", "2024-01-02T03:04:05+00:00"),
           (9, task, slots[1], "ann", "right", "2024-01-02T03:04:09+00:00")]
    _as_version_4(camp, old)
    f = camp / "campaign.db"
    before = f.read_bytes()
    with open_campaign_store(camp, readonly=True) as s:  # read-only: nothing migrated, nothing written
        assert s.schema_versions()["campaign_schema_version"] == 4
        assert s.prefs.answers("ann").values.tolist() == [[task, slots[0], "ann", "left"], [task, slots[1], "ann", "right"]]
        assert len(s.prefs.tasks()) == n_tasks
        with pytest.raises(sqlite3.OperationalError):
            s.prefs.answer(task, slots[2], "ann", "left")
    tasks, answers = export_preferences(camp)  # a reader: opens the store read-only
    assert len(answers) == 0 and tasks.num_rows == n_tasks
    assert f.read_bytes() == before
    with open_campaign_store(camp) as s:  # for writing: migrated to schema 5 (and on) in the opening transaction
        assert s.schema_versions()["campaign_schema_version"] == CAMPAIGN_SCHEMA_VERSION
        log = s.prefs.answer_log()
        assert log[["seq", "task_id", "slot", "worker", "choice", "answered"]].values.tolist() == [list(r) for r in old]
        assert log["retracted"].isna().all()
        sql = s.db.conn.execute("SELECT sql FROM sqlite_master WHERE name = 'campaign_pref_answers'").fetchone()[0]
        assert "UNIQUE" not in sql
        # undo works on the migrated store; the slot answered again gets the next seq
        assert s.prefs.retract(task, "ann", slots[1])["choice"] == "right"
        assert s.prefs.answer(task, slots[1], "ann", "left") is True
        log = s.prefs.answer_log()
        assert log["seq"].tolist() == [7, 9, 10] and log["retracted"].notna().tolist() == [False, True, False]
        assert s.prefs.answers("ann")["choice"].tolist() == ["left", "left"]
    # a read-only open of an older store still (schema 3: no preference tables at all)
    with open_campaign_store(camp) as s:
        _drop_pref_tables(s)
        s.db.conn.execute("UPDATE meta SET value = '3' WHERE key = 'campaign_schema_version'")
    with open_campaign_store(camp, readonly=True) as s:
        assert len(s.prefs.tasks()) == 0 and len(s.prefs.answers()) == 0 and len(s.prefs.answer_log()) == 0
        assert s.schema_versions()["campaign_schema_version"] == 3


def test_the_answers_and_retractions_logs_are_append_only(camp):
    t = tasks_of(camp, "bob")
    task, slot = t["task_id"].iloc[0], int(t["slot"].iloc[0])
    with open_campaign_store(camp) as s:
        assert s.prefs.answer(task, slot, "bob", "left") and s.prefs.retract(task, "bob", slot)["status"] == "retracted"
        assert s.prefs.answer(task, slot, "bob", "right")
        db = s.db.conn
        for sql in ("UPDATE campaign_pref_answers SET choice = 'left'", "DELETE FROM campaign_pref_answers",
                    "UPDATE campaign_pref_retractions SET retracted_by = 'x'", "DELETE FROM campaign_pref_retractions"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                db.execute(sql)
        # whatever the code path: one answer in force per comparison and assessor, one retraction per answer
        with pytest.raises(sqlite3.IntegrityError, match="conflict"):
            db.execute("INSERT INTO campaign_pref_answers (task_id, slot, assessor, choice, answered)"
                       " VALUES (?, ?, 'bob', 'left', 'now')", (task, slot))
        first = int(s.prefs.answer_log()["seq"].iloc[0])
        with pytest.raises(sqlite3.IntegrityError):
            db.execute("INSERT INTO campaign_pref_retractions (answer, retracted_by, retracted, source)"
                       " VALUES (?, 'bob', 'now', 'x')", (first,))
        log = s.prefs.answer_log(task)
    assert log[["slot", "worker", "choice"]].values.tolist() == [[slot, "bob", "left"], [slot, "bob", "right"]]
    assert log["retracted_by"].tolist()[0] == "bob" and log["source"].tolist()[0] == "web-undo"
    assert pd.isna(log["retracted"].iloc[1])


def test_an_undo_replayed_after_the_comparison_was_answered_again_undoes_nothing(web):
    """The page sends the answer's number with the undo: replayed after the comparison was
    answered again (a resent form, a retry arriving late), it is ``repeated`` and the new answer
    stays; without the number the undo names the comparison only (the API's minimum)."""
    cat = web.client("cat")
    task = tasks_of(web.camp, "cat")["task_id"].iloc[0]
    k = cat.c.get(f"/api/prefs/{task}").json()["item"]["slot"]
    assert cat.post(f"/api/prefs/{task}/answers", slot=k, choice="left").status_code == 200
    last = cat.c.get(f"/api/prefs/{task}").json()["last"]
    assert last["slot"] == k and last["choice"] == "left" and isinstance(last["answer"], int)
    page = cat.c.get(f"/prefs/{task}").text
    assert f'name="answer" value="{last["answer"]}"' in page
    url = f"/api/prefs/{task}/undo"
    assert cat.post(url, slot=k, answer=last["answer"]).json()["status"] == "retracted"
    assert cat.post(f"/api/prefs/{task}/answers", slot=k, choice="right").status_code == 200
    r = cat.post(url, slot=k, answer=last["answer"])  # the old undo again
    assert r.status_code == 200 and r.json()["status"] == "repeated" and r.json()["answered"] == 1
    with open_campaign_store(web.camp) as s:
        assert s.prefs.answers("cat")["choice"].tolist() == ["right"]
    # an undo naming an answer that is neither the one in force nor an undone one: 409; not a number: 400
    assert cat.post(url, slot=k, answer=last["answer"] + 999).status_code == 409
    assert cat.post(url, slot=k, answer="x").status_code == 400
    new = cat.c.get(f"/api/prefs/{task}").json()["last"]
    assert new["choice"] == "right" and new["answer"] != last["answer"]
    assert cat.post(url, slot=k, answer=new["answer"]).json()["status"] == "retracted"
