"""The assessor's view (issue 21, "The assessor's view") through the ASGI test client: query-term
highlighting as the CAL features see words (escaped, never HTML built from the passage), the
grade definitions and the guidelines page (Markdown with raw HTML off; a bad file refused at
``campaign init``), the topic's description and narrative on judging and preference pages, the
keyboard help and the data the page swaps in without a reload, no internals for a plain
assessor (HTML and JSON) while the organizer sees everything, a 100 KB passage, and preference
tasks grouped by topic with none for a discarded topic.

The campaign is test_web's (3 topics, assessors ann, bob, cat) with JSONL topics that have a
description and a narrative; every passage ends with a payload of markup and regex
metacharacters, and topic 1001's query holds some too.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("starlette")

from qrelkit.cli import run as cli  # noqa: E402
from qrelkit.dedupe import Normalization, word_spans, words  # noqa: E402
from qrelkit.store import open_campaign_store  # noqa: E402
from test_web import CONFIG, Web, simulate_with_payload  # noqa: E402

PAYLOAD = ' <script>alert("x")</script> a+b (c) [d] Alert.*?'
QUERY_EXTRA = ' ALERT.*( (c) [d] <script>x</script>'
GUIDE = """# Judging guide

Read the **whole** passage first.

<script>window.__guide = 1</script>
<b onmouseover="alert(2)">raw</b>

[bad link](javascript:alert(1))
"""


def _jsonl_topics(sim: Path) -> Path:
    """topics.jsonl beside the simulated topics.tsv: each topic with a description and a narrative
    (topic 1001's query with markup and regex metacharacters)."""
    out = []
    for i, ln in enumerate((sim / "topics.tsv").read_text().splitlines()):
        qid, query = ln.split("\t", 1)
        if i == 0:
            query = query.split(" <b")[0] + QUERY_EXTRA
        out.append(json.dumps({"qid": qid, "query": query, "description": f"Describe {qid} <i>now</i>",
                               "narrative": f"Narrative of {qid}: relevant passages name it."}))
    p = sim / "topics.jsonl"
    p.write_text("\n".join(out) + "\n")
    return p


@pytest.fixture(scope="module")
def sim(tmp_path_factory) -> Path:
    d = simulate_with_payload(tmp_path_factory.mktemp("viewsim") / "sim", PAYLOAD)
    _jsonl_topics(d)
    return d


def init(sim: Path, d: Path, config: str = CONFIG, files: dict[str, bytes] | None = None) -> int:
    """``campaign init`` with the protocol file in its own folder (files beside it)."""
    conf = d.parent / f"{d.name}-protocol"
    conf.mkdir()
    for name, data in (files or {}).items():
        (conf / name).write_bytes(data)
    (conf / "protocol.toml").write_text(config)
    return cli(["campaign", "init", str(d), "-c", str(conf / "protocol.toml"), "--corpus", str(sim / "corpus.jsonl"),
                "-t", str(sim / "topics.jsonl"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")])


GUIDED = CONFIG + '\n[web]\nguidelines = "guide.md"\n'


@pytest.fixture(scope="module")
def base(sim, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("viewbase") / "camp"
    assert init(sim, d, GUIDED, {"guide.md": GUIDE.encode()}) == 0
    return d


@pytest.fixture
def web(base, tmp_path):
    d = tmp_path / "camp"
    shutil.copytree(base, d)
    with Web(d) as w:
        yield w


# -- highlighting ------------------------------------------------------------------------------


def test_word_spans_are_the_kernels_words_at_their_places():
    text = "Ünïcode CAFÉ, <b>Bold</b> x2 «ÉTÉ» a<3"
    norm = Normalization(lower=True, strip_html=True, keep_digits=True)
    spans = word_spans(text, norm)
    assert [w for _, _, w in spans] == words(text, norm)
    assert [text[s:e] for s, e, _ in spans] == ["Ünïcode", "CAFÉ", "Bold", "x2", "ÉTÉ", "a", "3"]
    assert word_spans("", norm) == []
    kept = word_spans("<b>Bold</b>", Normalization(lower=False, strip_html=False))
    assert [w for _, _, w in kept] == ["b", "Bold", "b"]


def test_the_query_terms_are_highlighted_escaped(web):
    ann = web.client("ann")
    v = ann.topic("1001")
    it = v["item"]
    text = it["text"]
    marked = [text[s:e] for s, e in it["highlights"]]
    # the payload's words of the query, as the features see them: case folded, markup stripped
    assert {m.lower() for m in marked} >= {"alert", "x", "c", "d"}
    assert "script" not in {m.lower() for m in marked}  # a tag is no word ([dedupe] strip_html)
    assert all(s < e for s, e in it["highlights"])
    page = ann.c.get("/topics/1001").text
    passage = page.split('id="passage-text"', 1)[1].split("</div>", 1)[0]
    assert "&lt;script&gt;<mark>alert</mark>(&#34;<mark>x</mark>&#34;)&lt;/script&gt;" in passage
    assert "<mark>Alert</mark>.*?" in passage and "(<mark>c</mark>) [<mark>d</mark>]" in passage
    assert "<script" not in passage and "<mark><" not in passage
    assert re.search(r'id="highlight-toggle"[^>]*data-key="h"', page)


def test_no_inline_script_on_any_page(web):
    ann = web.client("ann")
    for url in ("/", "/topics/1001", "/guidelines"):
        page = ann.c.get(url).text
        assert re.findall(r"<script(?![^>]*\bsrc=)", page) == [], url


# -- guidelines --------------------------------------------------------------------------------


def test_grade_definitions_default_to_the_dl_scale(web):
    ann = web.client("ann")
    page = ann.c.get("/topics/1001").text
    assert 'id="grade-def-3"' in page and "dedicated to the query and contains the exact answer" in page
    assert "has nothing to do with the query" in page
    assert ann.topic("1001")["grade_definitions"]["0"].startswith("The passage has nothing to do")


def test_configured_grade_definitions_are_shown_escaped(sim, tmp_path):
    conf = CONFIG + '\n[web]\ngrade_definitions = { 0 = "no <b>use</b>", 3 = "the answer" }\n'
    assert init(sim, tmp_path / "camp", conf) == 0
    with Web(tmp_path / "camp") as w:
        ann = w.client("ann")
        page = ann.c.get("/topics/1001").text
        assert "no &lt;b&gt;use&lt;/b&gt;" in page and "the answer" in page
        assert 'id="guidelines-link"' not in page  # no guidelines file named
        assert ann.c.get("/guidelines").status_code == 404


def test_guidelines_page_renders_markdown_without_raw_html(web):
    ann = web.client("ann")
    page = ann.c.get("/topics/1001").text
    assert re.search(r'id="guidelines-link"[^>]*data-key="g"', page)
    r = ann.c.get("/guidelines")
    assert r.status_code == 200
    body = r.text.split("<main>", 1)[1]
    assert "<h1>Judging guide</h1>" in body and "<strong>whole</strong>" in body
    assert "<script>window" not in body and "&lt;script&gt;" in body
    assert "<b onmouseover" not in body and 'href="javascript:' not in body
    assert web.main.get("/guidelines").status_code == 401  # an assessor's page


@pytest.mark.parametrize("files,why", [({}, "unreadable"), ({"guide.md": b"caf\xe9\n"}, "UTF-8")])
def test_a_bad_guidelines_file_is_refused_at_init(sim, tmp_path, capsys, files, why):
    assert init(sim, tmp_path / "camp", GUIDED, files) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "guide.md" in err and why in err, err
    assert not (tmp_path / "camp" / "campaign.db").exists()


def test_description_and_narrative_on_the_judging_page(web):
    ann = web.client("ann")
    page = ann.c.get("/topics/1001").text
    assert "Describe 1001 &lt;i&gt;now&lt;/i&gt;" in page and "Narrative of 1001: relevant passages name it." in page


# -- the page and its data -----------------------------------------------------------------------


def test_help_overlay_and_saved_notice_are_on_the_page(web):
    ann = web.client("ann")
    page = ann.c.get("/topics/1001").text
    assert re.search(r'<div id="help"[^>]*hidden', page) and re.search(r'data-key="\?"', page)
    assert 'id="saved"' in page and 'data-api="/api/topics/1001"' in page


def test_the_form_fallback_still_judges_and_redirects(web):
    ann = web.client("ann")
    it = ann.topic("1001")["item"]
    r = ann.c.post("/topics/1001/judge", data={"csrf": ann.csrf, "batch_id": it["batch_id"], "docid": it["docid"],
                                               "grade": "1"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/topics/1001"
    assert ann.topic("1001")["item"]["docid"] != it["docid"]


# -- no internals for a plain assessor ---------------------------------------------------------

INTERNAL = re.compile(r"density|thread|stopping|runner|relevant \d|judged \d+, relevant|\bbob\b", re.I)


def _keys(obj) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _keys(v)}
    if isinstance(obj, list):
        return {k for v in obj for k in _keys(v)}
    return set()


def test_a_plain_assessor_sees_her_progress_and_no_internals(web):
    ann = web.client("ann")
    v = ann.topic("1001")
    assert not _keys(v) & {"density", "threads", "stopping", "relevant", "judged", "runner", "reason", "rule"}
    assert v["mine"] == {"judged_today": 0, "batch_left": v["item"]["batch_items"], "topics_open": 2}
    state = ann.c.get("/api/topics/1001/state").json()
    assert "runner" not in state
    page = ann.c.get("/topics/1001").text
    shown = re.sub(r"<[^>]+>", " ", page.split("<main>", 1)[1])
    assert not INTERNAL.search(shown), INTERNAL.search(shown)
    assert it_batch_hidden(page, v["item"]["batch_id"])
    it = v["item"]
    assert ann.post("/api/topics/1001/judgments", batch_id=it["batch_id"], docid=it["docid"], grade=0).status_code == 200
    mine = ann.topic("1001")["mine"]
    assert (mine["judged_today"], mine["batch_left"]) == (1, it["batch_items"] - 1)
    assert 'id="mine"' in ann.c.get("/topics/1001").text
    picker = re.sub(r"<[^>]+>", " ", ann.c.get("/").text.split("<main>", 1)[1])
    assert not INTERNAL.search(picker)


def it_batch_hidden(page: str, batch_id: str) -> bool:
    """The batch id (it names a thread) is in the forms' hidden fields, not in the text."""
    text = re.sub(r"<[^>]+>", " ", page.split("<main>", 1)[1])
    return batch_id not in text


def test_the_organizer_sees_everything(web):
    bob = web.client("bob", organizer=True)  # an organizer who judges too
    v = bob.topic("1001")
    assert {"density", "threads", "stopping", "judged", "relevant"} <= _keys(v)
    assert "runner" in bob.c.get("/api/topics/1001/state").json()
    page = bob.c.get("/topics/1001").text
    assert "density" in page or "judged 0" in page
    assert 'id="topic-stopping"' in page


# -- long passages -------------------------------------------------------------------------------


def test_a_100_kb_passage_renders_in_a_scrolling_box(web):
    ann = web.client("ann")
    it = ann.topic("1001")["item"]
    big = ("alert lorem ipsum dolor <b>sit</b> amet " * 2700)[:100_000]
    web.app.state.service.texts._texts[it["docid"]] = big
    r = ann.c.get("/topics/1001")
    assert r.status_code == 200 and len(r.text) > 100_000
    assert r.text.count("<mark>alert</mark>") == big.count("alert") and "&lt;b&gt;sit&lt;/b&gt;" in r.text
    css = (Path(__file__).parents[1] / "qrelkit" / "web" / "static" / "style.css").read_text()
    rule = re.search(r"#passage-text\s*\{([^}]*)\}", css).group(1)
    assert "overflow" in rule and "max-height" in rule


# -- preference pages ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def judged(sim, tmp_path_factory) -> Path:
    """The campaign judged to its end by the oracle; topic 1003 then discarded; its preference
    tasks made."""
    d = tmp_path_factory.mktemp("viewprefs") / "camp"
    unscreened = GUIDED.replace('skip = ["dedupe",', 'skip = ["screening", "dedupe",')
    assert init(sim, d, unscreened, {"guide.md": GUIDE.encode()}) == 0
    assert cli(["campaign", "run", str(d), "--oracle", str(sim / "qrels.txt")]) == 0
    with open_campaign_store(d) as s:
        s.state.set_topics([{"qid": "1003", "decision": "discarded", "rule": "screening", "reason": "test"}])
    assert cli(["campaign", "prefs", "make", str(d), "--per-task", "12"]) == 0
    return d


@pytest.fixture
def pweb(judged, tmp_path):
    d = tmp_path / "camp"
    shutil.copytree(judged, d)
    with Web(d) as w:
        yield w


def test_no_preference_task_for_a_discarded_topic(judged):
    with open_campaign_store(judged) as s:
        t = s.prefs.tasks()
    assert len(t) and "1003" not in set(t["qid"].astype(str))
    assert set(t["qid"].astype(str)) == {"1001", "1002"}


def test_preference_comparisons_come_grouped_by_topic_with_a_cue(pweb, judged):
    ann = pweb.client("ann")
    tasks = ann.c.get("/api/prefs").json()["tasks"]
    assert tasks
    task = tasks[0]["task_id"]
    with open_campaign_store(judged) as s:
        rows = s.prefs.tasks(task)
    seen, cues = [], []
    while (v := ann.c.get(f"/api/prefs/{task}").json())["item"]:
        it = v["item"]
        if not seen:
            page = ann.c.get(f"/prefs/{task}").text
            assert f"Describe {it['qid']} &lt;i&gt;now&lt;/i&gt;" in page and f"Narrative of {it['qid']}" in page
        seen.append(it["qid"])
        cues.append(it["topic_changed"])
        if it["topic_changed"]:
            assert 'id="topic-change"' in ann.c.get(f"/prefs/{task}").text
        r = ann.post(f"/api/prefs/{task}/answers", slot=it["slot"], choice="left")
        assert r.status_code == 200, r.text
    assert len(seen) == len(rows)
    changes = sum(a != b for a, b in zip(seen, seen[1:]))
    assert changes == len(set(seen)) - 1  # each topic's comparisons together
    assert cues == [False] + [a != b for a, b in zip(seen, seen[1:])]


def test_adopt_config_checks_and_records_a_new_guidelines_file(sim, tmp_path, capsys):
    """Guidelines named (or renamed) by an edited protocol file: `campaign adopt-config` checks the
    file at the door (unreadable: one line, exit 2, nothing adopted) and records it; the running
    web app serves the new one at once (the page reads the recorded path, no restart)."""
    camp = tmp_path / "camp"
    assert init(sim, camp, CONFIG) == 0
    protocol = tmp_path / "camp-protocol" / "protocol.toml"
    with Web(camp) as w:
        ann = w.client("ann")
        assert ann.c.get("/guidelines").status_code == 404
        protocol.write_text(GUIDED)  # names guide.md, which is not there yet
        capsys.readouterr()
        assert cli(["campaign", "adopt-config", str(camp)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "guide.md" in err, err
        assert ann.c.get("/guidelines").status_code == 404  # nothing adopted
        (protocol.parent / "guide.md").write_text("# New guide\n\nJudge *carefully*.\n")
        assert cli(["campaign", "adopt-config", str(camp)]) == 0
        r = ann.c.get("/guidelines")
        assert r.status_code == 200 and "<h1>New guide</h1>" in r.text
        assert re.search(r'id="guidelines-link"', ann.c.get("/topics/1001").text)
