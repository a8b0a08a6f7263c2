"""Every relative link in the README and the docs reaches a file of the checkout and, when it names a
section (``file.md#section``), a heading of that file (GitHub's rule for heading anchors) or an
explicit anchor (``<a id="section"></a>``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").glob("*.md")])
#: made by a make target, not kept in git (``make apidocs``)
GENERATED = ("docs/api/",)
LINK = re.compile(r"\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")  # [text](target) or [text](<target> "title")
EXPLICIT = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _outside_fences(path: Path):
    fence = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):  # a fence, indented in a list item too
            fence = not fence
        elif not fence:
            yield number, line


def _anchors(path: Path) -> set[str]:
    """The headings' anchors and the explicit ones of a page."""
    out = set()
    for _, line in _outside_fences(path):
        if re.match(r"#{1,6} ", line):
            out.add(github_anchor(line.lstrip("#")))
        out.update(EXPLICIT.findall(line))
    return out


def test_github_anchor_and_explicit_anchors(tmp_path):
    assert github_anchor("Start-up and the first call") == "start-up-and-the-first-call"
    assert github_anchor("A campaign of 10M passages end to end: MS MARCO v2's layout, one machine") == (
        "a-campaign-of-10m-passages-end-to-end-ms-marco-v2s-layout-one-machine")
    page = tmp_path / "p.md"
    page.write_text('<a id="short"></a>\n## A long heading: with words\n```\n## not a heading\n```\n')
    assert _anchors(page) == {"short", "a-long-heading-with-words"}
    assert LINK.findall('[a](p.md#short "a title") and [b](<q.md>)') == ["p.md#short", "q.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_a_file_and_a_heading(page):
    broken = []
    for number, line in _outside_fences(page):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            name, _, section = target.partition("#")
            path = (page.parent / name).resolve() if name else page
            rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
            if rel.startswith(GENERATED):
                continue
            if not path.exists():
                broken.append(f"{page.name}:{number}: {target} (no such file)")
            elif section and path.suffix == ".md" and section not in _anchors(path):
                broken.append(f"{page.name}:{number}: {target} (no such heading or anchor)")
    assert not broken, "\n".join(broken)
