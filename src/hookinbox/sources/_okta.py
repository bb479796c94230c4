"""Okta event hooks: a GET verification echoed in JSON, then POSTs with a shared header.

Okta signs nothing. An event hook is set up with an authentication scheme, a header name and
a value (`authScheme: {"type": "HEADER", "key": "Authorization", "value": <secret>}`), and
Okta sends that header with every request, the verification included. So the header's value
is compared with the configured secret in constant time, on the GET as on every POST: a
request without it is refused (403 on the GET, 401 on a POST), and the header is never
stored.

The handshake: once, when the hook is created or verified, `GET` with
`X-Okta-Verification-Challenge: <value>`, answered `{"verification": <value>}` (JSON, 200).
A challenge over 512 characters, or holding anything but base64 and `-._~`, is 400.

Deliveries are batches: `data.events[]`, each an Okta System Log event, stored under its
`uuid`, which Okta repeats when it retries (once, after a timeout or an error). The
delivery's own `eventId` names the hook call rather than an event, so it is not the key. The
type is each event's `eventType`, the time its `published`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from hookinbox._errors import BadSignature, Handshake, PayloadError
from hookinbox.sources._base import BatchSource
from hookinbox.sources._handshakes import Query, challenge_text
from hookinbox.sources._identity import Identity, event_key, optional_text, parse_time
from hookinbox.sources._json_slices import member_items
from hookinbox.sources._provider import json_headers, provider
from hookinbox.sources._secrets import utf8_keys
from hookinbox.sources._signatures import Headers, matches_secret, presented_tokens

CHALLENGE = "x-okta-verification-challenge"


class Okta(BatchSource):
    default_name = "okta"
    # One retry, after a timeout or an error; a day's margin over it.
    redelivery_window = timedelta(days=1)
    stored_headers = ("x-okta-request-id",)
    answers_get = True

    def __init__(
        self, *, secret: str | Sequence[str], header: str = "Authorization", name: str | None = None
    ) -> None:
        super().__init__(name=name)
        self._secrets = utf8_keys(secret)
        self.header = header.lower()
        self.signature_headers = (self.header,)

    def _check_header(self, headers: Headers) -> None:
        given = presented_tokens(headers, self.header, what=self.header)
        if not any([matches_secret(value, self._secrets) for value in given]):
            raise BadSignature(f"{self.header} is not the configured secret")

    def answer_get(self, query: Query, headers: Headers) -> Handshake:
        self._check_header(headers)
        challenge = challenge_text(headers.get(CHALLENGE), "X-Okta-Verification-Challenge")
        return Handshake({"verification": challenge})

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        self._check_header(headers)

    def identify_batch(self, headers: Headers, body: bytes) -> list[Identity]:
        return self.identify_items(member_items(body, "data", "events"), _event)


def _event(item: Any) -> Identity:
    if not isinstance(item, dict):
        raise PayloadError("an event of the batch is not a JSON object")
    return Identity(
        event_id=event_key(item.get("uuid"), "uuid"),
        event_type=optional_text(item.get("eventType")),
        occurred_at=parse_time(item.get("published")),
        payload=item,
    )


def sign(source: Okta, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # Okta's scheme: the configured header carries the configured value, as it stands.
    secret = fields.pop("secret", None) or source._secrets[0].decode()
    return {**json_headers(fields), source.header: secret, "X-Okta-Request-Id": "req-kit"}


PROVIDER = provider(
    Okta,
    sign=sign,
    example=lambda keys: Okta(secret="okta-shared-secret"),
    event=lambda tag: {
        "eventType": "com.okta.event_hook",
        "eventId": f"hook-{tag}",
        "data": {
            "events": [
                {
                    "uuid": f"uuid-{tag}",
                    "published": "2026-01-02T03:04:05.678Z",
                    "eventType": "user.session.start",
                }
            ]
        },
    },
    signature_header="Authorization",
    batch_key=lambda event: str(event["data"]["events"][0]["uuid"]),
)
