"""How a body becomes a payload: JSON, or a form's fields for form-encoded providers (Twilio).

A leaf used twice, so the two always agree: by the sources when a delivery is identified, and
by `Event.payload` when a handler reads a stored event.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

FORM = "application/x-www-form-urlencoded"

FormFields = dict[str, str | list[str]]


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
        return json.loads(body)
    except ValueError:
        if media_type(content_type) != FORM:
            raise
    return form_fields(body)
