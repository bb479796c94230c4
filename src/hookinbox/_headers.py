"""Header values as every entry point hands them to a source: the one rule for header bytes.

The ASGI app (`normalize_raw_headers`, from the scope's bytes), `Inbox.receive` and the WSGI
adapters (`normalize_headers`, from text) turn a request's headers into `HeaderValues`: names
in lower case, a repeated header's values kept apart, each value the text its bytes spell in
UTF-8 (`wire_text`). Sources only read the result (`hookinbox.sources`' `Headers`); a leaf, so
the HTTP layer, the receiver and the sources all reach it without reaching each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any


class HeaderValues(Mapping[str, str]):
    """Request headers with lower-case names, each name's values kept apart.

    As a mapping it is `Headers`: a repeated header reads as its values joined with ", ", as
    HTTP allows a recipient to combine them. `getall` gives the values as they came, which a
    source needs where a provider repeats a header on purpose (Mollie sends one
    `X-Mollie-Signature` per secret while one is rotated).
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, list[str]]) -> None:
        self._values = {name: list(found) for name, found in values.items() if found}

    @classmethod
    def _adopt(cls, values: dict[str, list[str]]) -> HeaderValues:
        """Wrap lists built for it (`normalize_headers`), without copying them."""
        adopted = cls.__new__(cls)
        adopted._values = values
        return adopted

    def __getitem__(self, name: str) -> str:
        found = self._values[name]
        return found[0] if len(found) == 1 else ", ".join(found)

    def get(self, name: str, default: Any = None) -> Any:  # Mapping's own goes through a raise
        found = self._values.get(name)
        if found is None:
            return default
        return found[0] if len(found) == 1 else ", ".join(found)

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def getall(self, name: str) -> list[str]:
        """Every value of the header `name` (lower case), in the order they came."""
        return list(self._values.get(name, ()))

    def __repr__(self) -> str:
        return f"HeaderValues({self._values!r})"


def normalize_headers(
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
) -> HeaderValues:
    """Lower-case header names, a repeated header's values kept apart (see `HeaderValues`),
    each value read by the one rule for header bytes (`wire_text`)."""
    if isinstance(headers, HeaderValues):
        return headers
    items = headers.items() if isinstance(headers, Mapping) else headers
    values: dict[str, list[str]] = {}
    for name, value in items:
        if not value.isascii():  # the common case needs no decoding
            value = wire_text(value)
        key = name.lower()
        if key in values:
            values[key].append(value)
        else:
            values[key] = [value]
    return HeaderValues._adopt(values)


def normalize_raw_headers(raw: Iterable[tuple[bytes, bytes]]) -> HeaderValues:
    """`normalize_headers` of an ASGI scope's header bytes, in one pass: each value read as
    latin-1 text first, as every server hands header bytes over, then by `wire_text`."""
    values: dict[str, list[str]] = {}
    for raw_name, raw_value in raw:
        value = raw_value.decode("latin-1")
        if not value.isascii():
            value = wire_text(value)
        key = raw_name.decode("latin-1").lower()
        if key in values:
            values[key].append(value)
        else:
            values[key] = [value]
    return HeaderValues._adopt(values)


def wire_text(value: str) -> str:
    """A header value as the text its bytes spell in UTF-8: the rule on every entry point.

    Servers hand header bytes over as latin-1 text, one character per byte (the ASGI app,
    PEP 3333's WSGI environ, Starlette, Django), and providers send UTF-8 where they send
    anything but ASCII, while sources compare and sign the UTF-8 bytes of the text they get
    (a GitLab token typed with accents, a signed Standard Webhooks id). So a value whose
    characters are bytes that form UTF-8 is read as that UTF-8. Any other value is kept as it
    is: text already decoded (`inbox.receive` given "é" or "☕"), or bytes that are not UTF-8,
    which then match no secret.
    """
    if value.isascii():
        return value
    try:
        return value.encode("latin-1").decode()
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value
