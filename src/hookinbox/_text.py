"""Untrusted text made safe to store and show: the one place hookinbox escapes code points.

A delivery's JSON may hold any code point, a lone surrogate (`"\\ud800"`) or a NUL among
them, and so may a handler's error message, a destination's answer, a header given to
`Inbox.receive`, an operator's replay reason or the path of a request. Three kinds of harm:

- storing: a lone surrogate cannot be encoded as UTF-8, and PostgreSQL text refuses NUL, so
  writing them raised where it should not (an error that could not be recorded, a 500);
  `safe_text` escapes exactly those, for every column and page;
- showing: a control character reaches the operator's terminal as an escape sequence (retitle
  it, wipe it, fake output), and a bidi control (U+202E RIGHT-TO-LEFT OVERRIDE and its kin)
  reorders what is shown after it, on a terminal and in a browser alike, so that a reason or an
  id reads as something it is not; `printable` escapes them for the terminal, the dashboard and
  the logs;
- logging: a line break in a request's value would forge a whole log line; `printable(...,
  one_line=True)` escapes line breaks too.

Each escape is visible (`\\x00`, `\\x1b`, `\\ud800`, `\\u202e`) and leaves every other string
as it is: the escape is for reading, not for decoding back (a backslash already in the text is
kept as it is). A leaf module, so storage, the dashboard, the logs and the command line share it.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00\ud800-\udfff]")

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""Unicode's Bidi_Control characters: marks, embeddings, overrides and isolates."""
_SHOWN = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
"""C0 and C1 controls (but tab and line feed), DEL, bidi controls, lone surrogates."""
_ONE_LINE = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
"""The same, line feed included: what a log line may not hold."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def safe_text(text: str) -> str:
    """`text` with lone surrogates and NUL written as escapes; unchanged when it has none.

    The result always encodes as UTF-8 and fits a PostgreSQL `text` column.
    """
    return _UNSAFE.sub(_escape, text)


def printable(text: str, *, one_line: bool = False) -> str:
    """`text` safe to show a person: `safe_text`'s escapes, and control and bidi control
    characters written as `\\xNN` / `\\uNNNN`. Tab and line feed are kept (a body shown on
    several lines) unless `one_line`, where only tab is (a log line's field)."""
    return (_ONE_LINE if one_line else _SHOWN).sub(_escape, text)
