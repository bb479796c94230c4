"""How a stored body becomes `event.payload`: JSON first, a form's fields when labelled a form."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookinbox import Event, Status, _payload
from hookinbox._payload import decode_payload, form_fields, media_type, search_text

FORM = "application/x-www-form-urlencoded"


def test_json_is_json_whatever_the_label() -> None:
    assert decode_payload(b'{"id": 1}', "application/json") == {"id": 1}
    assert decode_payload(b'{"id": 1}', FORM) == {"id": 1}  # a mislabelled JSON body stays JSON
    assert decode_payload(b"[1, 2]", None) == [1, 2]


def test_a_form_is_read_only_when_labelled_a_form() -> None:
    body = b"MessageSid=SM1&Body=Zo%C3%AB+%26+co&Empty="
    expected = {"MessageSid": "SM1", "Body": "Zoë & co", "Empty": ""}
    assert decode_payload(body, FORM) == expected
    assert decode_payload(body, "Application/X-WWW-Form-Urlencoded; charset=utf-8") == expected
    with pytest.raises(ValueError):
        decode_payload(body, "text/plain")
    with pytest.raises(ValueError):
        decode_payload(body, None)


def test_a_repeated_field_keeps_every_value_in_order() -> None:
    assert form_fields(b"a=2&b=x&a=1&a=3") == {"a": ["2", "1", "3"], "b": "x"}


def test_a_form_that_is_not_utf8_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        decode_payload(b"a=\xff", FORM)


@pytest.mark.parametrize(
    ("header", "expected"),
    [(None, ""), ("", ""), ("application/json", "application/json"), (" A/B ; q=1", "a/b")],
)
def test_media_type(header: str | None, expected: str) -> None:
    assert media_type(header) == expected


def test_event_payload_reads_the_stored_content_type() -> None:
    def event(body: bytes, headers: dict[str, str]) -> Event:
        now = datetime.now(UTC)
        return Event(1, "twilio", "k", None, None, now, body, headers, Status.PENDING, 0, 1)

    assert event(b"a=1", {"content-type": FORM}).payload == {"a": "1"}
    assert event(b'{"a": 1}', {}).payload == {"a": 1}
    with pytest.raises(ValueError):
        _ = event(b"a=1", {}).payload


@pytest.mark.parametrize(
    ("body", "path", "text"),
    [
        (b'{"a": 1, "a": 2}', ("a",), "2"),  # a repeated key: the last, as json.loads
        (b'{"a": {"b": "x"}, "a": {"c": 1}}', ("a", "b"), None),
        (b'{"n": 1.50, "e": 1e2}', ("n",), "1.50"),  # a number as written
        (b'{"n": 1.50, "e": 1e2}', ("e",), "1e2"),
        (b'{"ok": true, "no": false, "nil": null}', ("ok",), "true"),
        (b'{"ok": true, "no": false, "nil": null}', ("no",), "false"),
        (b'{"ok": true, "no": false, "nil": null}', ("nil",), None),
        (b'{"items": [{"sku": "A"}, {"sku": "B"}]}', ("items", "1", "sku"), "B"),
        (b'{"items": [{"sku": "A"}]}', ("items", "1", "sku"), None),
        (b'{"items": {"0": "A"}}', ("items", "0"), None),  # an index reads arrays only
        (b'{"o": {"k": 1}, "l": [1]}', ("o",), None),  # an object or an array: no text
        (b'{"o": {"k": 1}, "l": [1]}', ("l",), None),
        (b"a=1&b=2", ("a",), None),  # a form is no JSON
        (b"\xff{", ("a",), None),
        (b"[" * 100_000 + b"]" * 100_000, ("0",), None),  # nested past the stack
    ],
)
def test_search_text_reads_as_handlers_do(
    body: bytes, path: tuple[str, ...], text: str | None
) -> None:
    assert search_text(body, path) == text


JSON_CASES = [
    b'{"id":"evt_1","type":"a.b","created":1700000000,"data":{"object":{"amount":4200}}}',
    b'{"a":1,"a":2}',  # the last value of a repeated key
    b'{"n":123456789012345678901234567890}',  # an integer past 64 bits stays an integer
    b'{"f":0.1,"g":-0.0,"h":1e-400,"i":1.7976931348623157e308}',
    b'{"nan":NaN,"inf":Infinity}',  # json reads them; msgspec refuses
    b'{"big":1e400}',  # json: inf; msgspec refuses
    b'{"s":"\\ud800"}',  # a lone surrogate: json keeps it; msgspec refuses
    b'\xef\xbb\xbf{"bom":1}',
    '{"utf16":1}'.encode("utf-16"),
    b'{"e":"\\u00e9\xc3\xa9\\/"}',
    b"[1,]",
    b"01",
    b'{"a": 1} x',
    b'"a\tb"',
    b"\xff",
    b"[" * 1100 + b"]" * 1100,
    b"",
]


def _outcome(parse: Any, body: bytes) -> tuple[str, Any]:
    try:
        value = parse(body)
    except Exception as error:  # the kind of error: what callers catch
        return ("error", isinstance(error, ValueError | RecursionError))
    return ("value", repr(value))  # repr: nan == nan, and -0.0 apart from 0.0


@pytest.mark.parametrize("body", JSON_CASES)
def test_loads_reads_json_exactly_as_the_json_module(body: bytes) -> None:
    """With msgspec installed (the `server` extra) `loads` parses with it; without, with json:
    the same value or the same kind of error either way."""
    assert _payload._compiled_decoder() is not None  # the test extra installs msgspec
    assert _outcome(_payload.loads, body) == _outcome(json.loads, body)


@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
))  # fmt: skip
def test_loads_agrees_with_json_on_any_document(document: Any) -> None:
    body = json.dumps(document, ensure_ascii=False).encode("utf-8", "surrogatepass")
    assert _outcome(_payload.loads, body) == _outcome(json.loads, body)
