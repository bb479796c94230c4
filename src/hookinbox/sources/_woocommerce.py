"""WooCommerce: `X-WC-Webhook-Signature: <base64>`, HMAC-SHA256 of the body with the webhook's
secret; and the ping WooCommerce sends, unsigned, when a webhook is saved.

The body is the resource itself (an order, a product, a customer, a coupon), not an event,
and WooCommerce sends no event id: `X-WC-Webhook-Delivery-ID` is new on every delivery. The
key is `<X-WC-Webhook-Topic>:<id>:<date_modified_gmt>`: the topic (`order.updated`), the
resource's id and the time it was last changed, so the same state of a resource delivered
twice for one topic is one event, and each change is another. A body without
`date_modified_gmt` (the `*.deleted` topics send `{"id": ...}` only) uses the first 32 hex
digits of the body's SHA-256 instead. The topic header is not signed: a captured body
replayed under another topic would be stored under another key (as GitHub's event header).
The type is the topic, the time `date_modified_gmt` (UTC, written without an offset).

The ping: on saving an active webhook WooCommerce posts the form `webhook_id=<n>`, with no
signature, and reports an error unless the answer is 200. A delivery with no
`X-WC-Webhook-Signature` whose body is exactly that form is answered 200 and stores nothing;
anything else unsigned is refused (401), as for every source.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from hookinbox._errors import MissingHeader
from hookinbox.sources._base import SecretSource
from hookinbox.sources._handshakes import HandshakeAnswer
from hookinbox.sources._identity import Identity, event_key, optional_text, parse_json_object
from hookinbox.sources._provider import b64_mac, json_headers, provider, secret_key
from hookinbox.sources._signatures import Headers, decode_digests, require_match

SIGNATURE = "x-wc-webhook-signature"
PING = re.compile(rb"webhook_id=[0-9]{1,20}")


def _is_ping(headers: Headers, body: bytes) -> bool:
    return headers.get(SIGNATURE) is None and PING.fullmatch(body) is not None


def parse_gmt(value: object) -> datetime | None:
    """`date_modified_gmt` (`2020-03-11T16:54:40`, UTC without an offset)."""
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


class WooCommerce(SecretSource):
    default_name = "woocommerce"
    # WooCommerce does not retry a failed delivery (it disables the webhook after repeated
    # failures); an order's actions may still fire again. A day is ample.
    redelivery_window = timedelta(days=1)
    stored_headers = (
        SIGNATURE,
        "x-wc-webhook-topic",
        "x-wc-webhook-resource",
        "x-wc-webhook-event",
        "x-wc-webhook-id",
        "x-wc-webhook-delivery-id",
        "x-wc-webhook-source",
    )
    signature_headers = (SIGNATURE,)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        if _is_ping(headers, body):
            return  # answered by `handshake`, nothing stored; WooCommerce signs no ping
        candidates = decode_digests(
            headers, SIGNATURE, what="X-WC-Webhook-Signature", encoding="base64"
        )
        require_match(self._keys, candidates, body)

    def handshake(self, headers: Headers, body: bytes) -> HandshakeAnswer | None:
        if _is_ping(headers, body):
            return {"status": "ping"}
        return None

    def identify(self, headers: Headers, body: bytes) -> Identity:
        if _is_ping(headers, body):  # only reached by a caller that skips `authenticate`
            raise MissingHeader(f"missing header {SIGNATURE}")
        payload = parse_json_object(body)
        topic = event_key(headers.get("x-wc-webhook-topic"), "X-WC-Webhook-Topic header")
        resource = event_key(payload.get("id"), "id")
        modified = payload.get("date_modified_gmt")
        version = modified if isinstance(modified, str) and modified else None
        if version is None:
            version = hashlib.sha256(body).hexdigest()[:32]
        return Identity(
            event_id=event_key(f"{topic}:{resource}:{version}"),
            event_type=optional_text(topic),
            occurred_at=parse_gmt(modified),
            payload=payload,
        )


def sign(source: WooCommerce, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # WooCommerce's recipe: the base64 HMAC-SHA256 of the body, keyed with the secret.
    signature = b64_mac(secret_key(source, fields), body)
    topic = fields.pop("topic", "order.updated")
    resource, _, event = topic.partition(".")
    return {
        **json_headers(fields),
        "User-Agent": "WooCommerce/8.0 Hookshot (WordPress/6.4)",
        "X-WC-Webhook-Source": "https://shop.example/",
        "X-WC-Webhook-Topic": topic,
        "X-WC-Webhook-Resource": resource,
        "X-WC-Webhook-Event": event,
        "X-WC-Webhook-ID": "3",
        "X-WC-Webhook-Delivery-ID": hashlib.sha256(b"%d" % t + body).hexdigest()[:32],
        "X-WC-Webhook-Signature": signature,
    }


PROVIDER = provider(
    WooCommerce,
    sign=sign,
    example=lambda keys: WooCommerce(secret="woocommerce-example"),
    event=lambda tag: {
        "id": tag,
        "status": "processing",
        "date_modified_gmt": "2023-11-14T22:13:20",
        "total": "42.00",
    },
    signature_header="X-WC-Webhook-Signature",
)
