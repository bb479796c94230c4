"""HubSpot webhooks, signature v3: base64 HMAC-SHA256 of method, URI, body and timestamp.

`X-HubSpot-Signature-v3` is the base64 HMAC-SHA256, keyed with the app's client secret, of
`POST` + the request URI + the raw body + `X-HubSpot-Request-Timestamp` (Unix milliseconds),
concatenated. HubSpot signs the URI with a few percent-escapes decoded (`%3A` `%2F` `%3F` `%40`
`%21` `%24` `%27` `%28` `%29` `%2A` `%2C` `%3B`, any case); the URL is configured, as for
Square and Twilio, since the one a request arrives at has passed proxies. The timestamp is held
within 5 minutes, as HubSpot asks.

The body is a JSON array of events (a batch). Each is stored under `<subscriptionId>:<eventId>`:
a retry carries the same pair, and HubSpot documents `eventId` alone as not guaranteed unique.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from hookinbox._errors import BadSignature, PayloadError
from hookinbox.sources._base import BatchSource
from hookinbox.sources._identity import (
    Identity,
    event_key,
    fingerprint_without,
    optional_text,
    parse_time,
)
from hookinbox.sources._json_slices import array_items
from hookinbox.sources._provider import b64_mac, json_headers, provider, secret_key
from hookinbox.sources._secrets import configured_url, utf8_keys
from hookinbox.sources._signatures import (
    DEFAULT_TOLERANCE,
    Headers,
    check_tolerance,
    decode_digests,
    require_header,
    require_match,
)

SIGNATURE = "x-hubspot-signature-v3"
TIMESTAMP = "x-hubspot-request-timestamp"
ATTEMPT = "attemptNumber"

_DECODED = {
    "3a": ":",
    "2f": "/",
    "3f": "?",
    "40": "@",
    "21": "!",
    "24": "$",
    "27": "'",
    "28": "(",
    "29": ")",
    "2a": "*",
    "2c": ",",
    "3b": ";",
}
_ESCAPE = re.compile("%(" + "|".join(_DECODED) + ")", re.IGNORECASE)


def signed_uri(url: str) -> str:
    """The URI as HubSpot signs it: the escapes of `_DECODED` decoded, every other kept."""
    return _ESCAPE.sub(lambda m: _DECODED[m.group(1).lower()], url)


class HubSpot(BatchSource):
    default_name = "hubspot"
    # Up to 10 retries spread over about 24 hours; a day's margin over them.
    redelivery_window = timedelta(days=2)
    stored_headers = (SIGNATURE, TIMESTAMP, "x-hubspot-signature-version")
    signature_headers = (SIGNATURE, TIMESTAMP)

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        url: str,
        name: str | None = None,
        tolerance: float | None = DEFAULT_TOLERANCE,
    ) -> None:
        super().__init__(name=name)
        self._keys = utf8_keys(secret)
        self.url = configured_url(url, "url")
        # The URL as configured, and as HubSpot decodes it, when they differ.
        self._uris = list(dict.fromkeys([signed_uri(self.url), self.url]))
        self.tolerance = tolerance

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        timestamp_text = require_header(headers, TIMESTAMP).strip()
        if not timestamp_text.isascii() or not timestamp_text.isdigit() or len(timestamp_text) > 15:
            raise BadSignature("X-HubSpot-Request-Timestamp is not Unix milliseconds")
        candidates = decode_digests(
            headers, SIGNATURE, what="X-HubSpot-Signature-v3", encoding="base64"
        )
        tail = body + timestamp_text.encode()
        signed = [b"POST" + uri.encode() + tail for uri in self._uris]
        require_match(self._keys, candidates, *signed)
        check_tolerance(int(timestamp_text) // 1000, now=now, tolerance=self.tolerance)

    def identify_batch(self, headers: Headers, body: bytes) -> list[Identity]:
        return self.identify_items(array_items(body), _event)


def _event(item: Any) -> Identity:
    if not isinstance(item, dict):
        raise PayloadError("an event of the batch is not a JSON object")
    event_id = event_key(item.get("eventId"), "eventId")
    subscription = item.get("subscriptionId")
    key = f"{event_key(subscription, 'subscriptionId')}:{event_id}" if subscription else event_id
    occurred = item.get("occurredAt")  # Unix milliseconds
    if isinstance(occurred, bool) or not isinstance(occurred, int | float):
        occurred = None
    return Identity(
        event_id=event_key(key, "eventId"),
        event_type=optional_text(item.get("subscriptionType") or item.get("eventType")),
        occurred_at=None if occurred is None else parse_time(occurred / 1000),
        payload=item,
        # HubSpot counts `attemptNumber` up on each retry: the rest is what a retry repeats.
        fingerprint=fingerprint_without(item, ATTEMPT),
    )


# HubSpot signs the URI with these escapes decoded (HubSpot's "validating requests" page);
# written again here, not taken from the source's `_DECODED`.
_SIGNER_DECODED = {"%3A": ":", "%2F": "/", "%3F": "?", "%40": "@", "%21": "!", "%24": "$"}
_SIGNER_DECODED |= {"%27": "'", "%28": "(", "%29": ")", "%2A": "*", "%2C": ",", "%3B": ";"}


def sign(source: HubSpot, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    url = fields.pop("url", source.url)
    for escape, character in _SIGNER_DECODED.items():
        url = url.replace(escape, character).replace(escape.lower(), character)
    milliseconds = str(fields.pop("milliseconds", t * 1000))
    message = b"POST" + url.encode() + body + milliseconds.encode()
    return {
        **json_headers(fields),
        "X-HubSpot-Signature-v3": b64_mac(secret_key(source, fields), message),
        "X-HubSpot-Request-Timestamp": milliseconds,
        "X-HubSpot-Signature-Version": "v3",
    }


PROVIDER = provider(
    HubSpot,
    sign=sign,
    example=lambda keys: HubSpot(secret="hs-example", url="https://example.com/webhooks/hubspot"),
    event=lambda tag: [
        {"eventId": tag, "subscriptionId": 9, "subscriptionType": "contact.creation"}
    ],
    signature_header="X-HubSpot-Signature-v3",
    batch_key=lambda events: f"9:{events[0]['eventId']}",
)
