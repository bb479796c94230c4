"""Every relative link of README.md and docs/ resolves (file, directory and #anchor), and the
README's "Documentation" list reaches every page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.blocks import PAGES, ROOT

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
EXTERNAL = ("http://", "https://", "mailto:")


def _outside_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def _prose(text: str) -> str:
    """The text outside code blocks and inline code, where links are links."""
    return re.sub(r"`[^`\n]*`", "", _outside_code_blocks(text))


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation (backticks too) dropped, spaces to
    hyphens."""
    anchors: set[str] = set()
    text = _outside_code_blocks(page.read_text())
    for heading in re.findall(r"^#+ (.+)$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchor, number = slug, 0
        while anchor in anchors:  # a repeated heading gets -1, -2, ...
            number += 1
            anchor = f"{slug}-{number}"
        anchors.add(anchor)
    return anchors


def _links(page: Path) -> Iterator[str]:
    for target in LINK.findall(_prose(page.read_text())):
        if not target.startswith(EXTERNAL):
            yield target


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading #{anchor}")
    assert broken == []


OUTSIDE = re.compile(r"\.\./shared/|/work/")
"""A path out of the repository: a reader of a clone (or of the docs site) has nothing there."""


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_cites_a_file_outside_the_repository(page: Path) -> None:
    cited = [line for line in page.read_text().splitlines() if OUTSIDE.search(line)]
    for target in _links(page):
        if not (page.parent / target.partition("#")[0]).resolve().is_relative_to(ROOT):
            cited.append(target)
    assert cited == [], "carry the facts into docs/facts.md and link there"


def test_the_readme_lists_every_docs_page() -> None:
    readme = ROOT / "README.md"
    listed = {(readme.parent / target.partition("#")[0]).resolve() for target in _links(readme)}
    docs = ROOT / "docs"
    pages = {p.resolve() for p in docs.iterdir() if p.is_file()}
    assert sorted(str(p.relative_to(ROOT)) for p in pages - listed) == []
    assert (docs / "sources").resolve() in listed


def test_the_sources_index_lists_every_source_page() -> None:
    index = ROOT / "docs" / "sources" / "README.md"
    listed = {(index.parent / target.partition("#")[0]).resolve() for target in _links(index)}
    pages = {p.resolve() for p in index.parent.glob("*.md")} - {index.resolve()}
    assert sorted(p.name for p in pages - listed) == []


def test_the_checker_sees_links_and_anchors() -> None:
    """The README links to a section of ingest.md: found as a link, its anchor as a heading."""
    assert "docs/ingest.md#group-commit" in set(_links(ROOT / "README.md"))
    assert "group-commit" in _anchors(ROOT / "docs" / "ingest.md")
    assert "hookinbox-status" in _anchors(ROOT / "docs" / "operations.md")  # `hookinbox status`
