"""The code blocks of README.md and docs/, found and run with sybil.

The conventions a page follows (stated for readers in README.md's "Documentation"):

- A ```python block is a script: the blocks of one page run top to bottom in one namespace,
  in a fresh directory, so a later block may use what an earlier one defined.
- `<!-- file: PATH -->` on the line before a ```python block makes the block the content of
  the file PATH of a project the page describes (`<!-- append: PATH -->`: lines to add at the
  end of that file). Such a block is not run as a script; it is written to PATH under the
  directory the page runs in, and the framework tests build the project from these files.
- `<!-- skip: next "reason" -->` (sybil's own directive) keeps the next block from running.
  The reason is required and says why the block cannot run here; use it rarely.
- Anything that is not Python (shell sessions, configuration, output) is fenced ```text.
"""

from __future__ import annotations

import re
import unittest
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sybil import Document, Example, Region, Sybil
from sybil.evaluators.skip import Skipper
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    ROOT / "README.md",
    ROOT / "CHANGELOG.md",
    ROOT / "README.pypi.md",  # the package index's page (docs/releases.md)
    *sorted((ROOT / "docs").rglob("*.md")),
]
"""Every page a reader is given: the repository's, the changelog, the package index's, docs/."""

# The directive must sit on the line right before the block's opening fence.
FILE_DIRECTIVE = re.compile(r"<!--\s*(?P<mode>file|append):\s*(?P<path>\S+)\s*-->[ \t]*\n\Z")


@dataclass(frozen=True)
class FileBlock:
    """A block that is the content of a file, or lines to add at the end of one."""

    path: str
    append: bool
    source: str

    def write(self, root: Path) -> None:
        target = root / self.path
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.append:
            with target.open("a") as file:
                file.write("\n" + self.source)
        else:
            target.write_text(self.source)


def _file_directive(document: Document, region: Region) -> re.Match[str] | None:
    line_start = document.text.rfind("\n", 0, max(region.start - 1, 0)) + 1
    return FILE_DIRECTIVE.search(document.text, line_start, region.start)


class ScriptParser:
    """sybil's parser for ```python blocks, leaving out the blocks that are files."""

    def __init__(self) -> None:
        self.python = PythonCodeBlockParser()

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self.python(document):
            if _file_directive(document, region) is None:
                yield region


class FileBlockParser:
    """```python blocks after `<!-- file: PATH -->` or `<!-- append: PATH -->`."""

    def __init__(self) -> None:
        self.lexer = FencedCodeBlockLexer("python")

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self.lexer(document):
            directive = _file_directive(document, region)
            if directive is None:
                continue
            block = FileBlock(
                directive["path"], directive["mode"] == "append", str(region.lexemes["source"])
            )
            yield Region(directive.start(), region.end, block, write_file_block)


def write_file_block(example: Example) -> None:
    """Check the file is Python, and write it under the directory the page runs in."""
    block: FileBlock = example.parsed
    compile(block.source, f"{example.path}, {block.path}", "exec")
    block.write(Path.cwd())


SYBIL = Sybil(parsers=[ScriptParser(), FileBlockParser(), SkipParser()])


@dataclass
class PageRun:
    """What running a page's blocks did."""

    namespace: dict[str, Any]
    ran: list[int] = field(default_factory=list)  # the line of each block that ran
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (line, reason)


def parse(page: Path) -> Document:
    return SYBIL.parse(page)


def blocks(document: Document) -> Iterator[Example]:
    """The document's code blocks (not its skip directives)."""
    for example in document.examples():
        if not isinstance(example.region.evaluator, Skipper):
            yield example


def skip_directives(document: Document) -> Iterator[tuple[int, str, str | None]]:
    """Each skip directive as (line, action, reason)."""
    for example in document.examples():
        if isinstance(example.region.evaluator, Skipper):
            action, reason = example.parsed
            yield example.line, action, reason


def run(document: Document, examples: Iterable[Example] | None = None) -> PageRun:
    """Evaluate `examples` (by default all of the document's) in order, in the current
    directory; a failure names the page and the line of its block."""
    page = Path(document.path)
    document.namespace.setdefault("__name__", f"docs_{page.stem.replace('-', '_')}")
    result = PageRun(document.namespace)
    chosen = list(document.examples() if examples is None else examples)
    for example in chosen:
        try:
            example.evaluate()
        except unittest.SkipTest as skip:
            result.skipped.append((example.line, str(skip)))
            continue
        except BaseException as error:
            error.add_note(f"in the block at {_where(page)}, line {example.line}")
            raise
        if not isinstance(example.region.evaluator, Skipper):
            result.ran.append(example.line)
    return result


def section(document: Document, heading: str) -> list[Example]:
    """The blocks under the Markdown heading `heading` (its text, without the #s), up to the
    next heading of any level."""
    starts = dict(_headings(document.text))
    if heading not in starts:
        raise LookupError(f"no heading {heading!r} in {document.path}")
    begin = starts[heading]
    end = min((at for at in starts.values() if at > begin), default=len(document.text))
    return [example for example in document.examples() if begin < example.start < end]


def _headings(text: str) -> Iterator[tuple[str, int]]:
    """(heading text, position) of each heading outside code blocks."""
    fenced = False
    position = 0
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#+ (.+)", line)):
            yield heading[1].strip(), position
        position += len(line)


def close_inboxes(namespace: dict[str, Any]) -> None:
    """Close every inbox a page left in its namespace (engines, writer threads, Redis)."""
    from hookinbox import Inbox
    from hookinbox.claims import ClaimInbox

    for value in list(namespace.values()):
        if isinstance(value, Inbox | ClaimInbox):
            value.close()


def _where(page: Path) -> str:
    try:
        return str(page.relative_to(ROOT))
    except ValueError:
        return str(page)
