"""The assessor's view (issue 21) in a real browser (the system's Chromium through Playwright, as
tests/test_web_browser.py): the highlight toggle with ``h`` (kept across a reload), the keyboard
help with ``?`` (Esc closes it), the guidelines with ``g`` (and back), the "saved" notice after a
judgment with the next passage swapped in without a reload, and a 100 KB passage whose grade
buttons stay within a 1280x800 window. Skipped, as those tests, without Playwright or Chromium.
"""

from __future__ import annotations

import pytest

from test_web_browser import open_link, CONFIG, PAYLOAD, Server, Watched, browser, watched  # noqa: E402,F401 - fixtures
from test_web import simulate_with_payload  # noqa: E402
from test_web_view import init  # noqa: E402

GUIDE = "# Judging guide\n\nRead the **whole** passage.\n\n<script>window.__xss = 'guide'</script>\n"


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    sim = simulate_with_payload(tmp_path_factory.mktemp("viewbrowsersim") / "sim", PAYLOAD, passages=1500)
    (sim / "topics.jsonl").write_text("".join(
        '{"qid": "%s", "query": "%s script", "description": "What %s asks", "narrative": "Passages about it."}\n'
        % (q, text.split(" <b")[0].replace('"', ""), q)
        for q, text in (ln.split("\t", 1) for ln in (sim / "topics.tsv").read_text().splitlines())))
    d = tmp_path_factory.mktemp("viewbrowser") / "camp"
    assert init(sim, d, CONFIG + '\n[web]\nguidelines = "guide.md"\n', {"guide.md": GUIDE.encode()}) == 0
    with Server(d) as s:
        yield s


def _open_topic(w: Watched, srv: Server, name: str, qid: str) -> None:
    w.page.set_viewport_size({"width": 1280, "height": 800})
    open_link(w.page, srv.link(name))
    w.page.wait_for_selector(f'#topics tr[data-qid="{qid}"]')
    w.page.goto(f"{srv.url}/topics/{qid}")
    w.page.wait_for_selector('#item')


def _marks_shown(w: Watched) -> bool:
    return w.page.evaluate("getComputedStyle(document.querySelector('#passage-text mark')).backgroundColor") \
        not in ("rgba(0, 0, 0, 0)", "transparent")


def test_highlight_toggle_help_guidelines_and_saved(srv, watched):
    w = watched
    _open_topic(w, srv, "ann", "1001")
    assert w.page.query_selector_all("#passage-text mark") and _marks_shown(w)
    assert not w.page.is_visible("#review-button")  # nothing to review yet
    # h: off, kept across a reload; h again: on
    w.page.keyboard.press("h")
    assert not _marks_shown(w) and w.attr("#highlight-toggle", "aria-pressed") == "false"
    w.page.reload()
    assert not _marks_shown(w)
    w.page.click("#highlight-toggle")
    assert _marks_shown(w)
    # ?: the keys; Esc closes them
    assert not w.page.is_visible("#help")
    w.page.keyboard.press("?")
    assert w.page.is_visible("#help") and "skip this passage" in w.page.inner_text("#help")
    w.shot("help")
    w.page.keyboard.press("Escape")
    assert not w.page.is_visible("#help")
    # g: the guidelines, rendered (markup as text); g again: back
    with w.page.expect_navigation():
        w.page.keyboard.press("g")
    assert w.page.inner_text("#guidelines h1") == "Judging guide" and "<script>" in w.page.inner_text("#guidelines")
    w.shot("guidelines")
    with w.page.expect_navigation():
        w.page.keyboard.press("g")
    w.page.wait_for_selector("#item")
    # a judgment: saved, the next passage swapped in, no reload
    w.page.evaluate("window.__same_page = 1")
    docid = w.attr("#item", "data-docid")
    w.key("0")
    assert w.page.is_visible("#saved") and "saved" in w.page.inner_text("#saved")
    assert w.attr("#item", "data-docid") != docid and w.page.evaluate("window.__same_page") == 1
    assert int(w.attr("#progress", "data-judged")) == 1 and w.page.inner_text("#mine-today") == "1"
    assert w.page.query_selector_all("#passage-text mark")  # the new passage is highlighted too
    assert w.page.is_visible("#review-button") and w.page.inner_text("#review-count") == "1"  # now there is
    w.shot("saved")
    w.no_script_ran()


def test_a_100_kb_passage_keeps_the_grade_buttons_in_view(srv, watched):
    w = watched
    _open_topic(w, srv, "bob", "1002")
    docid = w.attr("#item", "data-docid")
    srv.app.state.service.texts._texts[docid] = ("script lorem ipsum dolor sit amet, consectetur " * 2200)[:100_000]
    w.page.reload()
    w.page.wait_for_selector("#grade-3")
    assert len(w.page.inner_text("#passage-text")) >= 99_000
    for g in range(4):
        box = w.page.query_selector(f"#grade-{g}").bounding_box()
        assert box and 0 <= box["y"] and box["y"] + box["height"] <= 800 and box["x"] + box["width"] <= 1280, (g, box)
    w.page.mouse.wheel(0, 3000)  # the page scrolled: the buttons stay
    box = w.page.query_selector("#grade-0").bounding_box()
    assert 0 <= box["y"] and box["y"] + box["height"] <= 800
    w.shot("long-passage")
    w.no_script_ran()
