"""A batch's events sliced from the bytes sent (issue 31, item 4): the values agree with
`json.loads` of the whole body, and each slice is exactly the bytes of its item."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookinbox._errors import PayloadError
from hookinbox.sources._json_slices import array_items, nested_items

NO_ITEM = "a notificationItems entry has no NotificationRequestItem object"
SPACE = st.text(alphabet=" \t\r\n", max_size=3)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(alphabet=st.characters(codec="utf-8"), max_size=8)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)


def _same(left: Any, right: Any) -> bool:
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


@given(items=st.lists(VALUES, max_size=5), spaces=st.lists(SPACE, min_size=12, max_size=12))
def test_items_and_their_bytes_agree_with_json_loads(items: list[Any], spaces: list[str]) -> None:
    texts = [json.dumps(item, ensure_ascii=bool(len(spaces[0]) % 2)) for item in items]
    glue = spaces[1] + "," + spaces[2]
    body = (spaces[3] + "[" + spaces[4] + glue.join(texts) + spaces[5] + "]" + spaces[6]).encode()
    sliced = array_items(body)
    assert [entry.raw.decode() for entry in sliced] == texts
    assert _same([entry.value for entry in sliced], json.loads(body))


def test_an_overflowing_number_is_kept_as_sent() -> None:
    body = b'[{"amount": 1e400}, {"n":  12345678901234567890123456789.5}]'
    first, second = array_items(body)
    assert first.raw == b'{"amount": 1e400}'
    assert math.isinf(first.value["amount"])  # what json.loads reads, for the handlers
    assert second.raw == b'{"n":  12345678901234567890123456789.5}'


def test_non_ascii_and_escaped_surrogates_round_trip_byte_for_byte() -> None:
    body = '[{"name": "Zoë 🧾"}, {"odd": "\\ud800"}]'.encode()
    first, second = array_items(body)
    assert first.raw == '{"name": "Zoë 🧾"}'.encode()
    assert second.raw == b'{"odd": "\\ud800"}'
    assert second.value == {"odd": "\ud800"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[1, 2", "body is not valid JSON"),
        (b"[1 2]", "body is not valid JSON"),
        (b"[1,]", "body is not valid JSON"),
        (b"[1] x", "body is not valid JSON"),
        (b"\xff[]", "body is not valid JSON"),
        (b'{"a": 1}', "body is not a JSON array"),
        (b"", "body is not valid JSON"),
    ],
)
def test_what_is_not_a_json_array_is_refused(body: bytes, message: str) -> None:
    with pytest.raises(PayloadError) as error:
        array_items(body)
    assert error.value.message == message


def test_adyen_items_are_sliced_from_their_entries_and_the_last_duplicate_counts() -> None:
    body = (
        b'{"live": "false", "notificationItems": [1], "notificationItems": [\n'
        b'  {"NotificationRequestItem": {"pspReference": "A", "value": 1e400}},\n'
        b'  {"NotificationRequestItem": {"x": 1},\n'
        b'   "NotificationRequestItem": {"pspReference": "B"}}\n'
        b"]}"
    )
    first, second = nested_items(body, "notificationItems", "NotificationRequestItem")
    assert first.raw == b'{"pspReference": "A", "value": 1e400}'
    assert second.raw == b'{"pspReference": "B"}'
    assert second.value == json.loads(body)["notificationItems"][1]["NotificationRequestItem"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[]", "no notificationItems list in the body"),
        (b'{"notificationItems": {}}', "no notificationItems list in the body"),
        (
            b'{"notificationItems": [1]}',
            NO_ITEM,
        ),
        (
            b'{"notificationItems": [{"NotificationRequestItem": []}]}',
            NO_ITEM,
        ),
        (b'{"notificationItems": []', "body is not valid JSON"),
    ],
)
def test_adyen_bodies_without_the_shape_say_which_part_is_missing(
    body: bytes, message: str
) -> None:
    with pytest.raises(PayloadError) as error:
        nested_items(body, "notificationItems", "NotificationRequestItem")
    assert error.value.message == message
