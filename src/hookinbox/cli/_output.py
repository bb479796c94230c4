"""What the operator commands print: tables for people, one JSON document for scripts.

On a terminal with rich installed (`hookinbox[cli]`) tables are rich's, with colour, fitted to
the window. Anywhere else (a pipe, a file, a CI log, or no rich) they are plain columns: a
header line, then one line per row, cells separated by two spaces and padded to align, never
wrapped or cut, so `grep` and `awk` see whole rows. `--json` prints one document whose field
names docs/cli.md ("JSON output") lists.
"""

from __future__ import annotations

import json
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


def show(table: Table, *, err: bool = False) -> None:
    if fancy(err):
        _show_rich(table, err)
        return
    if table.title:
        click.echo(f"{table.title}:", err=err)
    for line in plain_lines(table):
        click.echo(line, err=err)


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


def _show_rich(table: Table, err: bool) -> None:
    from rich.table import Table as RichTable
    from rich.text import Text

    drawn = RichTable(title=table.title, title_justify="left", show_header=table.header)
    if not table.header:
        drawn.box = None
    for name in table.columns:
        drawn.add_column(name, justify="right" if name in table.right else "left")
    for row in table.rows:
        drawn.add_row(*(Text(cell) for cell in row))  # Text: a cell's "[...]" is not markup
    console(err).print(drawn)


def console(err: bool = False) -> Any:
    """A rich console. Off a terminal rich would lay tables out for 80 columns and wrap
    their cells; a wide page keeps each row on one line (the reports of `simulate` and
    `demo`, whose `--json` is the form for scripts)."""
    from rich.console import Console

    width = None if _stream(err).isatty() else REPORT_WIDTH
    return Console(stderr=err, highlight=False, width=width)


REPORT_WIDTH = 160


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
