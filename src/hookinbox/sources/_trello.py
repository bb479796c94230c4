"""Trello: a HEAD that must answer 200, then `X-Trello-Webhook` over the body and the URL.

The handshake: when a webhook is created, Trello sends `HEAD` to its callback URL and creates
the webhook only if the answer is 200. It carries nothing to check, so it is answered 200
(empty) whoever sends it; a GET is answered alike. Nothing is stored.

Deliveries: `X-Trello-Webhook` is the base64 HMAC-SHA1, keyed with the application's secret
(the OAuth secret, not a token), of the raw body followed by the callback URL exactly as it
was given when the webhook was created. The URL is configured (`url=`), as for Square and
Twilio: the one a request arrives at has passed proxies. Nothing signed says when it was sent.

The key is the action's `id` (`action.id`): Trello sends one action per delivery and repeats
it when it retries; the type is `action.type` (`updateCard`), the time `action.date`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from hookinbox._errors import Handshake
from hookinbox.sources._base import Source
from hookinbox.sources._handshakes import Query
from hookinbox.sources._identity import (
    Identity,
    event_key,
    lookup,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import b64_mac, json_headers, provider, secret_key
from hookinbox.sources._secrets import configured_url, utf8_keys
from hookinbox.sources._signatures import Headers, decode_digests, require_match

SIGNATURE = "x-trello-webhook"


class Trello(Source):
    default_name = "trello"
    # Trello retries 3 times, 30, 60 and 120 seconds apart (not confirmed); a day's margin.
    redelivery_window = timedelta(days=1)
    stored_headers = (SIGNATURE,)
    signature_headers = (SIGNATURE,)
    answers_get = True

    def __init__(self, *, secret: str | Sequence[str], url: str, name: str | None = None) -> None:
        super().__init__(name=name)
        self._keys = utf8_keys(secret)
        self.url = configured_url(url, "url")

    def answer_get(self, query: Query, headers: Headers) -> Handshake:
        return Handshake("")

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        candidates = decode_digests(headers, SIGNATURE, what="X-Trello-Webhook", encoding="base64")
        require_match(self._keys, candidates, body + self.url.encode(), algorithm="sha1")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        return Identity(
            event_id=event_key(lookup(payload, "action.id"), "action id"),
            event_type=optional_text(lookup(payload, "action.type")),
            occurred_at=parse_time(lookup(payload, "action.date")),
            payload=payload,
        )


def sign(source: Trello, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # Trello's recipe: base64 HMAC-SHA1 of the body followed by the callback URL.
    url = fields.pop("url", source.url)
    digest = b64_mac(secret_key(source, fields), body + url.encode(), "sha1")
    return {**json_headers(fields), "X-Trello-Webhook": digest}


PROVIDER = provider(
    Trello,
    sign=sign,
    example=lambda keys: Trello(
        secret="trello-app-secret", url="https://hooks.example.com/webhooks/trello"
    ),
    event=lambda tag: {
        "action": {"id": f"act{tag}", "type": "updateCard", "date": "2026-01-02T03:04:05.678Z"},
        "model": {"id": "board1", "name": "Roadmap"},
    },
    signature_header="X-Trello-Webhook",
)
