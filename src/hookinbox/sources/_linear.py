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

import math
from collections.abc import Sequence
from datetime import timedelta

from hookinbox._errors import BadSignature, PayloadError
from hookinbox.sources._base import (
    Headers,
    Identity,
    TimestampedSource,
    check_prefixed_hex_hmac,
    check_tolerance,
    event_key,
    fingerprint_without,
    optional_text,
    parse_json_object,
    parse_time,
)

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
