"""Discord interactions: Ed25519 over `{X-Signature-Timestamp}{body}` (the `crypto` extra).

`X-Signature-Ed25519` is the signature in hex, checked against the application's public key
(64 hex digits, from the developer portal). A verified PING (`type` 1), which Discord sends
when the endpoint URL is saved, is answered `{"type": 1}` and nothing is stored. Discord also
sends deliberately wrongly signed requests to check that they are refused: they get 401.

Every other interaction is stored under its `id` (a snowflake, which also dates it) and
answered with a deferred response, because Discord waits 3 seconds for the interaction's
answer and the handlers run later, in a worker: `{"type": 5}` (the "thinking..." state) for a
command or a modal, `{"type": 6}` (update later) for a component, and an empty choice list for
an autocomplete. A handler then completes the interaction through Discord's API (edit the
original response, with the interaction's `token`, within 15 minutes). `answers=` replaces
the answer per interaction type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from hookinbox._errors import BadSignature, ConfigurationError
from hookinbox.sources._base import Source
from hookinbox.sources._ed25519 import Ed25519Keys, ed25519_signature, stranger_key
from hookinbox.sources._identity import Identity, event_key, parse_json_object
from hookinbox.sources._provider import json_headers, provider
from hookinbox.sources._secrets import secrets_tuple
from hookinbox.sources._signatures import (
    DEFAULT_TOLERANCE,
    Headers,
    check_tolerance,
    decode_digests,
    parse_timestamp,
    require_header,
)

PING = 1
INTERACTION_TYPES = {
    2: "application_command",
    3: "message_component",
    4: "application_command_autocomplete",
    5: "modal_submit",
}
DEFERRED_ANSWERS: dict[int, dict[str, Any]] = {
    2: {"type": 5},  # DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE
    3: {"type": 6},  # DEFERRED_UPDATE_MESSAGE
    4: {"type": 8, "data": {"choices": []}},  # autocomplete cannot be deferred
    5: {"type": 5},
}
DISCORD_EPOCH_MS = 1_420_070_400_000


def snowflake_time(snowflake: str) -> datetime | None:
    """When a Discord id was made: its top 42 bits are milliseconds since 2015."""
    if not snowflake.isdigit() or len(snowflake) > 20:
        return None
    millis = (int(snowflake) >> 22) + DISCORD_EPOCH_MS
    return datetime.fromtimestamp(millis / 1000, UTC)


class Discord(Source):
    default_name = "discord"
    # Discord does not retry an interaction: unanswered in 3 s, it fails for the user.
    redelivery_window = timedelta(hours=1)
    stored_headers = ("x-signature-ed25519", "x-signature-timestamp")
    signature_headers = stored_headers

    def __init__(
        self,
        *,
        public_key: str | Sequence[str],
        name: str | None = None,
        tolerance: float | None = DEFAULT_TOLERANCE,
        answers: Mapping[int, Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__(name=name)
        self.tolerance = tolerance
        raw = []
        for key in secrets_tuple(public_key):
            try:
                raw.append(bytes.fromhex(key.strip()))
            except ValueError as exc:
                raise ConfigurationError("a Discord public key is 64 hex digits") from exc
        self._public = Ed25519Keys(raw, feature="hookinbox.sources.Discord")
        self.answers = {**DEFERRED_ANSWERS, **{k: dict(v) for k, v in (answers or {}).items()}}

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        # Every value of a repeated header is a candidate, as for every other source.
        signatures = decode_digests(headers, "x-signature-ed25519", what="X-Signature-Ed25519")
        timestamp_text = require_header(headers, "x-signature-timestamp")
        timestamp = parse_timestamp(timestamp_text)
        if not self._public.verifies(signatures, timestamp_text.strip().encode() + body):
            raise BadSignature()
        check_tolerance(timestamp, now=now, tolerance=self.tolerance)

    def handshake(self, headers: Headers, body: bytes) -> dict[str, Any] | None:
        if parse_json_object(body).get("type") == PING:
            return {"type": PING}
        return None

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        interaction_id = event_key(payload.get("id"), "interaction id")
        kind = payload.get("type")
        return Identity(
            event_id=interaction_id,
            event_type=INTERACTION_TYPES.get(kind) if isinstance(kind, int) else None,
            occurred_at=snowflake_time(interaction_id),
            payload=payload,
            answer=self.answers.get(kind) if isinstance(kind, int) else None,
        )


def sign(source: Discord, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    signature = ed25519_signature(source, source._public, str(t).encode() + body, fields)
    return {
        **json_headers(fields),
        "User-Agent": "Discord-Interactions/1.0 (+https://discord.com)",
        "X-Signature-Ed25519": signature.hex(),
        "X-Signature-Timestamp": str(t),
    }


def example_event(tag: str) -> dict[str, Any]:
    """An interaction type Discord has not defined: stored, and answered with hookinbox's own
    body (a known type is answered with Discord's deferred response instead)."""
    return {"id": str(1_179_000_000_000_000_000 + int(tag, 36) % 10**9), "type": 99}


PROVIDER = provider(
    Discord,
    sign=sign,
    example=lambda keys: Discord(public_key=keys.ed25519),
    event=example_event,
    signature_header="X-Signature-Ed25519",
    forgery=lambda: {"private_key": stranger_key()},
)
