"""What a handshake reads: a request's query string, and a challenge to echo or sign.

A handshake proves an endpoint to its provider and stores nothing (Slack's URL check, Meta's
`hub.challenge`, X's CRC, Okta's verification; docs/sources/README.md, "Handshakes"). Much of
what it reads arrives before anything is verified (a GET carries no signature), so each piece
is bounded here, once: the query string's length and fields, a parameter given twice, a
challenge's length and characters. `Source.handshake`, `answer_get` and `check_query` answer
with a `HandshakeAnswer`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import parse_qs

from hookinbox._errors import Handshake, PayloadError

HandshakeAnswer = dict[str, Any] | str | Handshake
"""What `Source.handshake` may answer: JSON, text, or a `Handshake` with its own content type
or status."""


class SecretBook(Protocol):
    """Where secrets learned on first use are kept (Asana's `X-Hook-Secret`): the receiver's
    store (its `trust` gateway), handed to a source that `learns_secrets`."""

    def secrets(self, source: str) -> list[str]:
        """The secrets `source` learned."""
        ...

    def learn(self, source: str, secret: str) -> bool:
        """Keep `secret` if a window is open for `source` (and close it); else False."""
        ...


Query = Mapping[str, Sequence[str]]
"""A request's query string, parsed: every value of each name, in order (`parse_query`)."""

MAX_QUERY = 4096
"""The longest query string a handshake reads, in characters; a longer one is refused (400)
before it is parsed. Real ones are under 300 (Meta's three `hub.` fields, Graph's token)."""

MAX_QUERY_FIELDS = 32
"""The most fields a query string may hold; more is refused (400)."""

MAX_CHALLENGE = 512
"""The longest challenge a handshake echoes or signs, in characters; a longer one is refused
(400). Real ones are far shorter (Okta's is 40, X's CRC token about 48, Meta's a number)."""

TOKEN_CHARACTERS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/="
)
"""What a challenge may hold: URL-safe and standard base64, digits, `-._~`. Nothing that could
close a JSON string (`"`, `\\`), start markup (`<`, `&`), break a line or start a JSON value:
so an echoed challenge cannot inject into the reply, and a signed one (X's CRC) can never be
the signature of a body the source would accept (every accepted body holds `{`)."""


def parse_query(raw: str | bytes | None) -> dict[str, list[str]]:
    """A query string as a dict of every value of each name (`+` and percent escapes decoded,
    UTF-8, as Flask's `request.args` and Django's `request.GET` read it); `PayloadError` when it
    is longer than `MAX_QUERY` or holds more than `MAX_QUERY_FIELDS` fields."""
    if not raw:
        return {}
    text = raw.decode("latin-1") if isinstance(raw, bytes) else raw
    if len(text) > MAX_QUERY:
        raise PayloadError(f"query string longer than {MAX_QUERY} characters")
    try:
        return parse_qs(
            text, keep_blank_values=True, errors="replace", max_num_fields=MAX_QUERY_FIELDS
        )
    except ValueError as exc:
        raise PayloadError(f"query string holds more than {MAX_QUERY_FIELDS} fields") from exc


def query_value(query: Query, name: str) -> str | None:
    """The one value of `name` in the query, None when absent; `PayloadError` when it is given
    twice (which of two challenges would be answered is not for a sender to choose)."""
    values = query.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise PayloadError(f"query parameter {name} given {len(values)} times")
    return values[0]


def challenge_text(
    value: str | None, what: str, *, allowed: frozenset[str] = TOKEN_CHARACTERS
) -> str:
    """A challenge fit to echo or sign: present, at most `MAX_CHALLENGE` characters, and only
    `allowed` characters; `PayloadError` (400) otherwise."""
    if not value:
        raise PayloadError(f"no {what}")
    if len(value) > MAX_CHALLENGE:
        raise PayloadError(f"{what} is longer than {MAX_CHALLENGE} characters")
    if not allowed.issuperset(value):
        raise PayloadError(f"{what} holds characters a challenge does not")
    return value
