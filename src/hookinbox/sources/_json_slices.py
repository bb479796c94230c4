"""The events of a batch as the bytes the provider sent (issue 31, item 4).

A batch source (SendGrid, HubSpot, Adyen) stores each event of a signed delivery as its own
body. Re-serialising the parsed item changed what was sent: a number that overflows a float
(`1e400`) came back as `Infinity`, which is not JSON, and no reader but Python's accepts it.
So each event's body is sliced from the delivery: the parser walks the arrays and objects on
the way to the items (the standard library's `raw_decode` parses each value and says where it
ended), and every item's slice is its exact bytes.

The standard library has no parser that reports positions, and the walk is short: only the
containers above the items are walked by hand; every value is still parsed by `json`, so the
values agree with `json.loads` of the whole body (duplicate members: the last one counts).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from hookinbox._errors import PayloadError

_DECODER = json.JSONDecoder()
_WHITESPACE = re.compile(r"[ \t\n\r]*")  # JSON's four, as the json module skips them


@dataclass(frozen=True, slots=True)
class JsonSlice:
    """One value of a JSON document: parsed, and the bytes it was parsed from."""

    value: Any
    raw: bytes


class _Text:
    """A body decoded as the json module decodes bytes (UTF-8, lone surrogates kept), so a
    slice encoded back is byte for byte what was sent."""

    def __init__(self, body: bytes) -> None:
        try:
            self.text = body.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise PayloadError("body is not valid JSON") from exc

    def skip(self, index: int) -> int:
        match = _WHITESPACE.match(self.text, index)
        assert match is not None  # the pattern matches the empty string
        return match.end()

    def value(self, index: int) -> tuple[Any, int]:
        try:
            return _DECODER.raw_decode(self.text, index)
        except (ValueError, RecursionError) as exc:
            raise PayloadError("body is not valid JSON") from exc

    def expect(self, index: int, char: str) -> int:
        if self.text[index : index + 1] != char:
            raise PayloadError("body is not valid JSON")
        return index + 1

    def slice(self, start: int, end: int, value: Any) -> JsonSlice:
        return JsonSlice(value, self.text[start:end].encode("utf-8", "surrogatepass"))

    def array(self, index: int) -> tuple[list[JsonSlice], int]:
        """The items of the array starting at `index` ('['), and the index after it."""
        index = self.skip(self.expect(index, "["))
        items: list[JsonSlice] = []
        if self.text[index : index + 1] == "]":
            return items, index + 1
        while True:
            value, end = self.value(index)
            items.append(self.slice(index, end, value))
            index = self.skip(end)
            if self.text[index : index + 1] == "]":
                return items, index + 1
            index = self.skip(self.expect(index, ","))

    def member(self, index: int, name: str) -> tuple[tuple[Any, int] | None, int]:
        """In the object starting at `index` ('{'): the value of its last member `name` and
        where that value starts (None when there is none), and the index after the object."""
        index = self.skip(self.expect(index, "{"))
        found: tuple[Any, int] | None = None
        if self.text[index : index + 1] == "}":
            return found, index + 1
        while True:
            key, index = self.value(index)
            if not isinstance(key, str):
                raise PayloadError("body is not valid JSON")
            index = self.skip(self.expect(self.skip(index), ":"))
            value, end = self.value(index)
            if key == name:
                found = (value, index)
            index = self.skip(end)
            if self.text[index : index + 1] == "}":
                return found, index + 1
            index = self.skip(self.expect(index, ","))

    def end(self, index: int) -> None:
        if self.skip(index) != len(self.text):
            raise PayloadError("body is not valid JSON")


def array_items(body: bytes, what: str = "body") -> list[JsonSlice]:
    """The items of a body that is a JSON array (SendGrid, HubSpot), each with its bytes;
    `PayloadError` when the body is not JSON or not an array."""
    text = _Text(body)
    start = text.skip(0)
    if text.text[start : start + 1] != "[":
        text.end(text.value(start)[1])  # not JSON at all says so first
        raise PayloadError(f"{what} is not a JSON array")
    items, end = text.array(start)
    text.end(end)
    return items


def nested_items(body: bytes, array: str, member: str) -> list[JsonSlice]:
    """Adyen's shape: the body is an object whose member `array` is a list of objects, each
    holding its item, an object, as the member `member`. Each item with its bytes;
    `PayloadError` naming the part that is missing otherwise."""
    text = _Text(body)
    start = text.skip(0)
    found: tuple[Any, int] | None = None
    if text.text[start : start + 1] == "{":
        found, end = text.member(start, array)
    else:
        end = text.value(start)[1]
    text.end(end)
    if found is None or not isinstance(found[0], list):
        raise PayloadError(f"no {array} list in the body")
    items: list[JsonSlice] = []
    for entry in text.array(found[1])[0]:
        inner = None
        if isinstance(entry.value, dict):
            entry_text = _Text(entry.raw)
            inner = entry_text.member(0, member)[0]
        if inner is None or not isinstance(inner[0], dict):
            raise PayloadError(f"a {array} entry has no {member} object")
        value, index = inner
        items.append(entry_text.slice(index, entry_text.value(index)[1], value))
    return items


def member_items(body: bytes, *path: str) -> list[JsonSlice]:
    """The items of the list at `path` in the body, an object (Meta's `entry`, Okta's
    `data.events`, Microsoft Graph's `value`), each with its bytes; `PayloadError` naming the
    list when the body is not an object leading to one."""
    text = _Text(body)
    index = text.skip(0)
    for depth, name in enumerate(path):
        found: tuple[Any, int] | None = None
        if text.text[index : index + 1] == "{":
            found, end = text.member(index, name)
        else:
            end = text.value(index)[1]
        if depth == 0:
            text.end(end)  # the whole body is JSON, or it says so first
        last = depth == len(path) - 1
        if found is None or not isinstance(found[0], list if last else dict):
            raise PayloadError(f"no {'.'.join(path)} list in the body")
        index = found[1]
    return text.array(index)[0]
