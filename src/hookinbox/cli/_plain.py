"""Off a terminal, the reports of `simulate` and `demo` as the operator commands print theirs.

The simulator and the demo draw their reports with rich (tables, markup, a rule). In a pipe, a
file or a CI log, rich would still draw boxes, and lay everything out for 80 columns: a table's
title (the target URL) broken mid-word, cells wrapped. `PlainConsole` is the console those
reports are given there: a rich table becomes plain columns (`_output.plain_lines`), markup
its text, a paragraph lines broken between words only, a rule its title.
"""

from __future__ import annotations

import sys
import textwrap
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from hookinbox.cli._output import Table, plain_lines

PROSE_WIDTH = 100
"""Where a paragraph's lines break (between words): a log is read in a browser or a pager."""


def report_console(err: bool = False) -> Console:
    """A rich console on a terminal, a `PlainConsole` anywhere else."""
    stream = sys.stderr if err else sys.stdout
    if stream.isatty():
        return Console(stderr=err, highlight=False)
    return PlainConsole(stderr=err)


class PlainConsole(Console):
    """A rich console that writes plain text: no box, no colour, no cut or wrapped cell."""

    def __init__(self, *, stderr: bool = False) -> None:
        super().__init__(stderr=stderr, highlight=False, no_color=True, width=PROSE_WIDTH)

    def print(self, *objects: Any, **_options: Any) -> None:
        lines: list[str] = []
        for value in objects:
            if isinstance(value, RichTable):
                lines += table_lines(value)
            else:
                lines += _prose(_text(value))
        self._write(lines or [""])

    def rule(self, title: Any = "", **_options: Any) -> None:
        text = _text(title)
        self._write([f"== {text} ==" if text else "=" * 8])

    def _write(self, lines: list[str]) -> None:
        self.file.write("".join(line + "\n" for line in lines))
        self.file.flush()


def table_lines(drawn: RichTable) -> list[str]:
    """A rich table's title and cells as plain columns (the alignment of each column kept)."""
    names = [_text(column.header) or f"column {i}" for i, column in enumerate(drawn.columns)]
    table = Table(
        names,
        header=drawn.show_header,
        right=frozenset(
            name
            for name, column in zip(names, drawn.columns, strict=True)
            if column.justify == "right"
        ),
    )
    cells = [[_text(cell) for cell in column.cells] for column in drawn.columns]
    table.rows = [list(row) for row in zip(*cells, strict=True)]
    title = _text(drawn.title) if drawn.title is not None else ""
    return ([f"{title}:"] if title else []) + plain_lines(table)


def _text(value: Any) -> str:
    """What a renderable says, without its markup or style."""
    if isinstance(value, Text):
        return value.plain
    if isinstance(value, str):
        return Text.from_markup(value).plain
    return str(value)


def _prose(text: str) -> list[str]:
    return [
        line
        for paragraph in text.split("\n")
        for line in textwrap.wrap(
            paragraph, PROSE_WIDTH, break_long_words=False, break_on_hyphens=False
        )
        or [""]
    ]
