"""What the operator commands print: tables for people, one JSON document for scripts.

On a terminal with rich installed (`hookinbox[cli]`) tables are rich's, with colour, fitted to
the window as `kubectl get` and `gh` fit theirs: an id, a key or a status is never cut nor
wrapped (it is copied into the next command); other columns wrap between words (or after a
word's `.` or `/`, never inside a piece), then are left out in an order each table names,
and a table that still does not fit is printed as plain columns, which the terminal wraps
whole. Anywhere else (a pipe, a file, a CI log, or no rich) tables
are plain columns: a header line, then one line per row, cells separated by two spaces and
padded to align, never wrapped or cut, so `grep` and `awk` see whole rows. `--json` prints
one document whose field names docs/cli.md ("JSON output") lists.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import Enum
from typing import IO, Any

import click

from hookinbox._extras import installed
from hookinbox._text import printable as shown_text


@dataclass
class Table:
    columns: Sequence[str]
    title: str | None = None
    right: frozenset[str] = frozenset()
    """Columns aligned right (numbers)."""
    header: bool = True
    keep: frozenset[str] = frozenset()
    """Columns never cut nor wrapped: ids, keys and statuses, which are copied elsewhere."""
    drop: Sequence[str] = ()
    """Columns left out on a terminal, in this order, while the table is wider than it."""
    narrow: Table | None = None
    """The same figures laid out for a window too narrow for this table."""
    rows: list[list[str]] = field(default_factory=list)

    def add_row(self, *cells: object) -> None:
        self.rows.append(["-" if cell is None else printable(str(cell)) for cell in cells])


def printable(text: str) -> str:
    """Stored text (event types, bodies, errors, reasons: a sender's, a handler's or an
    operator's) made safe for a terminal: an escape sequence could retitle it, wipe it or fake
    output, a bidi override reorder what follows (`hookinbox._text.printable`)."""
    return shown_text(text)


def echo_untrusted(text: str, *, err: bool = False) -> None:
    click.echo(printable(text), err=err)


def _stream(err: bool) -> IO[str]:
    return sys.stderr if err else sys.stdout


def fancy(err: bool = False) -> bool:
    """Whether to draw with rich: a terminal, and rich installed."""
    return _stream(err).isatty() and installed("rich")


def show(table: Table, *, err: bool = False, wide: bool = False) -> list[str]:
    """Print `table`; on a terminal fitted to its width, unless `wide` (every column, each
    whole: the terminal wraps long lines). Returns the columns left out for want of width."""
    if fancy(err) and not wide:
        width = console(err).width
        for candidate in (table, table.narrow):
            fitted = None if candidate is None else fit(candidate, width)
            if candidate is not None and fitted is not None:
                _show_rich(candidate, fitted, err)
                return [name for name in candidate.columns if name not in fitted]
    if table.title:
        click.echo(f"{table.title}:", err=err)
    for line in plain_lines(table):
        click.echo(line, err=err)
    return []


PIECE = re.compile(r"[^./]*[./]+|[^./]+")
"""A word's pieces, each ending after its `.` or `/`: where an event type
(`customer.subscription.updated`) or a path may break, as a sentence breaks between words."""


def pieces(word: str) -> list[str]:
    return PIECE.findall(word)


def wrap_words(text: str, width: int) -> str:
    """`text` in lines of at most `width` cells, broken between words, or after a `.` or `/`
    inside one, never elsewhere: a wrapped event type still reads, and copies, as itself.
    A piece wider than `width` (not in a fitted table: `fit` makes room for the widest) is a
    line of its own."""
    from rich.cells import cell_len

    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        line = ""
        for word in paragraph.split():
            for index, piece in enumerate(pieces(word)):
                joined = (" " if index == 0 and line else "") + piece
                if line and cell_len(line + joined) > width:
                    lines.append(line)
                    line = piece
                else:
                    line += joined
        lines.append(line)
    return "\n".join(lines)


def fit(table: Table, width: int) -> dict[str, int] | None:
    """Each shown column's width (padding and borders aside) for a window `width` cells wide,
    or None when even the columns kept whole do not fit without the droppable ones."""
    from rich.cells import cell_len

    index = {name: i for i, name in enumerate(table.columns)}
    natural: dict[str, int] = {}
    least: dict[str, int] = {}
    for name, i in index.items():
        cells = [line for row in table.rows for line in row[i].splitlines() or [""]]
        header = name if table.header else ""
        longest_word = max((cell_len(word) for word in header.split()), default=0)
        widest = max((cell_len(cell) for cell in cells), default=0)
        natural[name] = max(cell_len(header), widest, 1)
        if name in table.keep or name in table.right:  # numbers do not wrap either
            least[name] = max(widest, longest_word, 1)
        else:  # wrapped between words, or a word after its dots (`wrap_words`), never inside
            parts = [cell_len(p) for cell in cells for word in cell.split() for p in pieces(word)]
            least[name] = max(longest_word, max(parts, default=1))
    shown = list(table.columns)
    droppable = [name for name in table.drop if name in index]

    def borders(count: int) -> int:  # each column's padding, and a box's lines around them
        return 3 * count + 1 if table.header else 2 * count

    while sum(least[name] for name in shown) + borders(len(shown)) > width:
        if not droppable:
            return None
        shown.remove(droppable.pop(0))
    room = width - borders(len(shown))
    if sum(natural[name] for name in shown) <= room:
        return {name: natural[name] for name in shown}
    widths = {name: least[name] for name in shown}
    spare = room - sum(widths.values())
    wanting = {name: natural[name] - least[name] for name in shown if natural[name] > least[name]}
    total = sum(wanting.values())
    for name, want in wanting.items():
        widths[name] += want * spare // total
    leftover = room - sum(widths.values())
    for name in wanting:  # what rounding down left, to the first columns that want it
        extra = min(leftover, natural[name] - widths[name])
        widths[name] += extra
        leftover -= extra
    return widths


def plain_lines(table: Table) -> list[str]:
    rows = [[_one_line(c) for c in row] for row in table.rows]
    if table.header:
        rows.insert(0, list(table.columns))
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(table.columns))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(width) if name in table.right else cell.ljust(width)
            for cell, width, name in zip(row, widths, table.columns, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def _one_line(text: str) -> str:
    return " ".join(text.split()) if any(c in text for c in "\n\r\t") else text


def _show_rich(table: Table, widths: dict[str, int], err: bool) -> None:
    from rich.table import Table as RichTable
    from rich.text import Text

    drawn = RichTable(title=table.title, title_justify="left", show_header=table.header)
    if not table.header:
        drawn.box = None
    shown = [i for i, name in enumerate(table.columns) if name in widths]
    for i in shown:
        name = table.columns[i]
        whole = name in table.keep or name in table.right
        drawn.add_column(
            name,
            justify="right" if name in table.right else "left",
            width=widths[name],
            no_wrap=whole,
            overflow="fold",  # a cell too long for its column goes on the next line, all of it
        )
    wrapped = {
        i for i in shown if not (table.columns[i] in table.keep or table.columns[i] in table.right)
    }

    def cell(row: list[str], i: int) -> Text:  # Text: a cell's "[...]" is not markup
        return Text(wrap_words(row[i], widths[table.columns[i]]) if i in wrapped else row[i])

    for row in table.rows:
        drawn.add_row(*(cell(row, i) for i in shown))
    console(err).print(drawn)


def console(err: bool = False) -> Any:
    """A rich console, for a terminal (`hookinbox.cli._plain.report_console` is the one for
    reports that may go anywhere)."""
    from rich.console import Console

    return Console(stderr=err, highlight=False)


def say(text: str, *, style: str | None = None, err: bool = False) -> None:
    """One line; in colour (`style`, a rich style) on a terminal with rich."""
    if style and fancy(err):
        from rich.markup import escape

        console(err).print(f"[{style}]{escape(printable(text))}[/{style}]")
    else:
        echo_untrusted(text, err=err)


def show_json(value: Any) -> None:
    """A JSON value for people (the headers and body of `events show`)."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=json_value)
    # A body's lone surrogate cannot be written to a UTF-8 terminal; JSON escapes C0 controls
    # but not DEL and C1.
    shown = printable(text)
    if fancy() and shown == text:  # rich would parse the escapes back into what they stand for
        console().print_json(text)
    else:
        click.echo(shown)


def emit_json(document: Any) -> None:
    """The `--json` output: one document, keys sorted, times in ISO 8601."""
    click.echo(json.dumps(document, indent=2, sort_keys=True, default=json_value))


def json_value(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


@contextmanager
def progress(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A progress bar with count and rate on stderr when it is a terminal (and rich is
    installed); elsewhere nothing. Yields the function that advances it by n."""
    if not fancy(err=True):
        yield lambda _n: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f}/s" if speed else "")

    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), Rate()]
    with Progress(*columns, TimeElapsedColumn(), console=console(err=True), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
