"""Untrusted text made safe to store and show: the one place hookinbox escapes code points.

A delivery's JSON may hold any code point, a lone surrogate (`"\\ud800"`) or a NUL among
them, and so may a handler's error message, a destination's answer or a header given to
`Inbox.receive`. Neither can be encoded as UTF-8 (surrogates) or stored in PostgreSQL text
(NUL), so writing or rendering them raised where it should not: an error that could not be
recorded, a page that answered 500. `safe_text` escapes exactly those code points, visibly
(`\\ud800`, `\\x00`), and leaves every other string as it is; a leaf module, so storage, the
dashboard and the command line share it.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return "\\x00" if code == 0 else f"\\u{code:04x}"


def safe_text(text: str) -> str:
    """`text` with lone surrogates and NUL written as escapes; unchanged when it has none.

    The result always encodes as UTF-8 and fits a PostgreSQL `text` column. A backslash
    already in `text` is kept as it is: the escape is for reading, not for decoding back.
    """
    return _UNSAFE.sub(_escape, text)
