"""Linear: `Linear-Signature: <hex>`, HMAC-SHA256 of the body; the time is in the body.

Linear signs no timestamp header: the body's `webhookTimestamp` (Unix milliseconds) is covered
by the body's signature, and is held within `tolerance` (60 s by default, as Linear's SDK does)
once the signature matches. A signed body without a usable `webhookTimestamp` cannot be shown
to be fresh and is refused like a bad signature (401).

The key is the `Linear-Delivery` header, Linear's id of the payload. It is not signed, so a
delivery captured and replayed within the tolerance under a new `Linear-Delivery` would be
stored again: the short window is what bounds that. The type is the body's `type` (`Issue`);
handlers read `action` (`create`, `update`, `remove`) for the sub-kind.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from hookinbox._errors import BadSignature, PayloadError
from hookinbox.sources._base import TimestampedSource
from hookinbox.sources._identity import (
    Identity,
    event_key,
    fingerprint_without,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import (
    body_id,
    hex_mac,
    json_headers,
    json_object,
    provider,
    secret_key,
)
from hookinbox.sources._signatures import Headers, check_prefixed_hex_hmac, check_tolerance

TIMESTAMP_FIELD = "webhookTimestamp"
LINEAR_TOLERANCE = 60.0
MAX_MILLISECONDS = 10**15  # year 33658: past it, a number is not a time (nor a float's range)


class Linear(TimestampedSource):
    default_name = "linear"
    # Three retries, after about 1 minute, 1 hour and 6 hours.
    redelivery_window = timedelta(days=1)
    stored_headers = ("linear-signature", "linear-delivery", "linear-event")
    signature_headers = ("linear-signature",)

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        name: str | None = None,
        tolerance: float | None = LINEAR_TOLERANCE,
    ) -> None:
        super().__init__(secret=secret, name=name, tolerance=tolerance)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        check_prefixed_hex_hmac(headers, body, self._keys, prefix="", name="Linear-Signature")
        try:
            payload = parse_json_object(body)
        except PayloadError as exc:
            raise BadSignature(f"the signed body has no {TIMESTAMP_FIELD}") from exc
        sent = payload.get(TIMESTAMP_FIELD)
        if isinstance(sent, bool) or not isinstance(sent, int | float):
            raise BadSignature(f"the signed body has no numeric {TIMESTAMP_FIELD}")
        if not math.isfinite(sent) or not 0 <= sent < MAX_MILLISECONDS:
            raise BadSignature(f"{TIMESTAMP_FIELD} is not a Unix time in milliseconds")
        check_tolerance(sent / 1000, now=now, tolerance=self.tolerance)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        return Identity(
            event_id=event_key(headers.get("linear-delivery"), "Linear-Delivery header"),
            event_type=optional_text(payload.get("type")),
            occurred_at=parse_time(payload.get("createdAt")),
            payload=payload,
            # Each attempt is stamped anew: a retry differs only in its webhookTimestamp.
            fingerprint=fingerprint_without(payload, TIMESTAMP_FIELD),
        )


def sign(
    source: Linear, body: bytes, t: int, fields: dict[str, Any]
) -> tuple[dict[str, str], bytes]:
    key = secret_key(source, fields)
    delivery = fields.pop("delivery", None) or body_id(source, body)  # before the stamp
    sent = body
    payload = json_object(body)
    if payload is not None and TIMESTAMP_FIELD not in payload:
        # Linear puts the sending time, in milliseconds, in the body it signs.
        sent = json.dumps({**payload, TIMESTAMP_FIELD: t * 1000}).encode()
    event = fields.pop("event", None) or (payload or {}).get("type") or "Issue"
    headers = {
        **json_headers(fields),
        "Linear-Delivery": delivery,
        "Linear-Event": str(event),
        "Linear-Signature": hex_mac(key, sent),
    }
    return headers, sent


PROVIDER = provider(
    Linear,
    sign=sign,
    example=lambda keys: Linear(secret="linear-example"),
    event=lambda tag: {"type": "Issue", "action": "create", "data": {"id": tag}},
    signature_header="Linear-Signature",
)
