"""How a body becomes a payload: JSON, or a form's fields for form-encoded providers (Twilio).

A leaf used twice, so the two always agree: by the sources when a delivery is identified, and
by `Event.payload` when a handler reads a stored event. JSON is read by `loads`: msgspec's
compiled parser where it is installed (the `server` extra), else Python's `json`, with the
same result either way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl

FORM = "application/x-www-form-urlencoded"

FormFields = dict[str, str | list[str]]


_compiled: Callable[[bytes], Any] | None = None
_looked = False


def _compiled_decoder() -> Callable[[bytes], Any] | None:
    """msgspec's JSON decoder, if it is installed; looked for once, on first use (so that
    `import hookinbox` imports nothing more)."""
    global _compiled, _looked
    if not _looked:
        try:
            from msgspec.json import Decoder
        except ImportError:
            _compiled = None
        else:
            _compiled = Decoder().decode
        _looked = True
    return _compiled


def loads(body: bytes) -> Any:
    """`json.loads(body)`, faster: a delivery's body is parsed on every delivery, to find its
    event's id and type, and msgspec parses a 700-byte event about 4 times faster than `json`
    (11 against 48 us, measured on this project's bench machine under load, 2026-12-07).

    The result is `json.loads`' exactly: for every document msgspec reads, it builds what
    `json` does (objects as dicts in order, the last value of a repeated key, integers of
    any size, floats to the same bit, the same strings); a body it refuses goes to `json`,
    which reads what msgspec will not represent alike (`NaN`, a number past float's range, a
    lone surrogate, a byte order mark, UTF-16) or raises as it always did.
    """
    decode = _compiled if _looked else _compiled_decoder()
    if decode is not None:
        try:
            return decode(body)
        except Exception:  # json decides: the same value, or its own error
            pass
    return json.loads(body)


def media_type(content_type: str | None) -> str:
    """`application/x-www-form-urlencoded; charset=utf-8` -> `application/x-www-form-urlencoded`."""
    return (content_type or "").partition(";")[0].strip().lower()


def form_fields(body: bytes) -> FormFields:
    """The fields of a form body; a name sent more than once maps to the list of its values.

    Raises `UnicodeDecodeError` (a `ValueError`) if the body is not UTF-8.
    """
    fields: FormFields = {}
    for name, value in parse_qsl(body.decode(), keep_blank_values=True):
        if name not in fields:
            fields[name] = value
            continue
        previous = fields[name]
        fields[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
    return fields


def decode_payload(body: bytes, content_type: str | None) -> Any:
    """The body as JSON; failing that, a form's fields if it is labelled as a form.

    JSON is tried first so that a JSON body sent under a form label stays JSON. Raises
    `ValueError` when the body is neither.
    """
    try:
        return loads(body)
    except ValueError:
        if media_type(content_type) != FORM:
            raise
    return form_fields(body)


def search_text(body: bytes, path: Sequence[str]) -> str | None:
    """The text a payload search compares at `path`, reading `body` as a handler does
    (Python's parser: of a key an object repeats, the last value counts).

    A string is its text, `true` and `false` their names, a number its text as written in the
    body (`1.50` stays `1.50`); null, an object, an array, a missing key or index, and a body
    that is not JSON read None (never a match). A segment of digits indexes an array only.
    """
    try:
        # Numbers kept as written: the text the database's search compares for them.
        document: Any = json.loads(body, parse_int=str, parse_float=str)
    except (ValueError, RecursionError):  # not JSON, not UTF-8/16/32, nested past the stack
        return None
    for segment in path:
        if isinstance(document, dict) and not segment.isdigit():
            document = document.get(segment)
        elif isinstance(document, list) and segment.isdigit() and int(segment) < len(document):
            document = document[int(segment)]
        else:
            return None
    if isinstance(document, bool):
        return "true" if document else "false"
    return document if isinstance(document, str) else None
