"""Telegram bots (Bot API webhooks): no signature. The `secret_token` given to `setWebhook`
comes back as it stands in `X-Telegram-Bot-Api-Secret-Token`.

The token is compared in constant time (as SHA-256 digests, like GitLab's token, so neither
its content nor its length leaks) and never stored. It is a shared password, not a
signature: whoever sees one request can send any body, and nothing dates the request.

The key is the body's `update_id`, the update's unique identifier, per bot: one source
serves one bot. Telegram keeps an update until it is delivered, for at most 24 hours, and
resends the same update (the same `update_id`) after an unsuccessful request. The type is the
update's kind, the one field beside `update_id` (`message`, `callback_query`, ...); the time
is that object's `date` (or `edit_date`), where it has one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from hookinbox._errors import BadSignature, ConfigurationError
from hookinbox.sources._base import Source
from hookinbox.sources._identity import (
    Identity,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import json_headers, provider
from hookinbox.sources._secrets import secrets_tuple
from hookinbox.sources._signatures import Headers, matches_any, signature_items, token_digest

HEADER = "x-telegram-bot-api-secret-token"
TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
"""What Telegram accepts as a `secret_token`: 1-256 of `A-Z`, `a-z`, `0-9`, `_` and `-`."""


class Telegram(Source):
    """A Telegram bot's webhook, authenticated by its secret token. Never stored."""

    default_name = "telegram"
    # Telegram keeps an undelivered update for at most 24 hours: 2 days covers it.
    redelivery_window = timedelta(days=2)
    stored_headers = ()  # never the secret token
    signature_headers = (HEADER,)

    def __init__(self, *, secret_token: str | Sequence[str], name: str | None = None) -> None:
        super().__init__(name=name)
        self._tokens = secrets_tuple(secret_token)  # for hookinbox.testing's signer
        if not all(TOKEN.fullmatch(token) for token in self._tokens):
            raise ConfigurationError(
                "a Telegram secret_token is 1-256 characters of A-Z, a-z, 0-9, _ and -"
            )
        self._digests = [token_digest(token) for token in self._tokens]

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        # A token holds no comma, so values a WSGI server joined split apart again.
        given = signature_items(headers, HEADER, what="X-Telegram-Bot-Api-Secret-Token")
        if not any([matches_any(token_digest(token), self._digests) for token in given]):
            raise BadSignature("X-Telegram-Bot-Api-Secret-Token does not match the secret token")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        kind = next((name for name in payload if name != "update_id"), None)
        content = payload.get(kind) if kind is not None else None
        when = None
        if isinstance(content, dict):
            when = content.get("edit_date", content.get("date"))
        return Identity(
            event_id=event_key(payload.get("update_id"), "update_id"),
            event_type=optional_text(kind, limit=64),
            occurred_at=parse_time(when) if isinstance(when, int) else None,
            payload=payload,
        )


def sign(source: Telegram, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # Telegram's recipe: the secret_token itself, in its header.
    token = fields.pop("secret", None) or source._tokens[0]
    return {**json_headers(fields), "X-Telegram-Bot-Api-Secret-Token": token}


def example_event(tag: str) -> dict[str, Any]:
    number = int(hashlib.sha256(tag.encode()).hexdigest()[:8], 16)  # an update_id per tag
    return {
        "update_id": number,
        "message": {
            "message_id": 17,
            "date": 1_700_000_000,
            "chat": {"id": 8_101_020, "type": "private"},
            "text": f"/start {tag}",
        },
    }


PROVIDER = provider(
    Telegram,
    sign=sign,
    example=lambda keys: Telegram(secret_token="telegram-example_1"),
    event=example_event,
    signature_header="X-Telegram-Bot-Api-Secret-Token",
    forgery=lambda: {"secret": "not-the-secret-token"},
)
