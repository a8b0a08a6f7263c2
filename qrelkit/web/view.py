"""What the assessor's pages show beside the passage (docs/web.md, "The assessor's view"): the
query's terms highlighted as the CAL features see words, the grade definitions, the guidelines
rendered from Markdown, and the view of a plain assessor (her own progress; no topic internals).

Nothing here builds HTML from unescaped text: :func:`highlighted` escapes every piece of the
passage and adds only ``<mark>``; :func:`render_markdown` renders with raw HTML off (markup in
the file shows as text) and markdown-it's link check (no ``javascript:`` links).
"""

from __future__ import annotations

from typing import Any, Mapping

from markdown_it import MarkdownIt
from markupsafe import Markup, escape

from qrelkit.dedupe import Normalization, word_spans, words

#: the TREC Deep Learning track's definitions of the grades 0-3 (its assessors' guidelines)
DL_DEFINITIONS = {
    3: "The passage is dedicated to the query and contains the exact answer.",
    2: "The passage has some answer for the query, but the answer may be a bit unclear, or "
       "hidden amongst extraneous information.",
    1: "The passage seems related to the query but does not answer it.",
    0: "The passage has nothing to do with the query.",
}

#: what a plain assessor sees of a topic's status: whether it is decided (no counts, densities,
#: threads, rule figures, or what the other assessors gave)
PLAIN_STATUS = ("decision",)


def grade_definitions(configured: Mapping[Any, str], scale: list[int]) -> dict[int, str]:
    """Grade -> definition: ``[web] grade_definitions`` when given (grades of the scale only),
    else the TREC DL definitions on the scale 0-3, else none.

    >>> grade_definitions({}, [0, 1, 2, 3])[0]
    'The passage has nothing to do with the query.'
    >>> grade_definitions({"1": "yes"}, [0, 1]), grade_definitions({}, [0, 1])
    ({1: 'yes'}, {})
    """
    if configured:
        return {int(g): str(t) for g, t in configured.items() if int(g) in scale}
    return {g: DL_DEFINITIONS[g] for g in scale} if list(scale) == [0, 1, 2, 3] else {}


def query_terms(query: str, norm: Normalization) -> set[str]:
    """The words of a query as the CAL features normalize them (:func:`qrelkit.dedupe.words`)."""
    return set(words(query, norm))


def highlight_spans(text: str | None, terms: set[str], norm: Normalization) -> list[list[int]]:
    """``[start, stop]`` (character offsets) of every word of ``text`` that is a query term.

    >>> highlight_spans("An <b>alert</b>: ALERT.*(x)", {"alert", "x"}, Normalization())
    [[6, 11], [17, 22], [25, 26]]
    """
    if not text or not terms:
        return []
    return [[s, e] for s, e, w in word_spans(text, norm) if w in terms]


def highlighted(text: str, spans: list[list[int]]) -> Markup:
    """``text`` escaped, with ``<mark>`` around each span (offsets as :func:`highlight_spans`).

    >>> str(highlighted('<i>a</i> "b"', [[3, 4], [10, 11]]))
    '&lt;i&gt;<mark>a</mark>&lt;/i&gt; &#34;<mark>b</mark>&#34;'
    """
    parts, at = [], 0
    for s, e in spans:
        parts.append(escape(text[at:s]))
        parts.append(Markup("<mark>") + escape(text[s:e]) + Markup("</mark>"))
        at = e
    parts.append(escape(text[at:]))
    return Markup("").join(parts)


def render_markdown(text: str) -> Markup:
    """Markdown as HTML with raw HTML disabled (CommonMark, tables; markup shows as text).

    >>> str(render_markdown("# Hi\\n<script>x</script>"))
    '<h1>Hi</h1>\\n<p>&lt;script&gt;x&lt;/script&gt;</p>\\n'
    """
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    return Markup(md.render(text))


def plain_view(view: dict[str, Any]) -> dict[str, Any]:
    """A topic page's data as a plain assessor sees it: the topic's status reduced to
    :data:`PLAIN_STATUS`, no runner state."""
    out = {k: v for k, v in view.items() if k not in ("status", "runner")}
    if "status" in view:
        out["status"] = {k: view["status"].get(k) for k in PLAIN_STATUS}
    return out
