"""Box (webhooks v2): `BOX-SIGNATURE-PRIMARY` and `BOX-SIGNATURE-SECONDARY`, each the base64
HMAC-SHA256 of the body followed by the `BOX-DELIVERY-TIMESTAMP` header, one under each of
the application's two signature keys.

Box keeps two keys at once so that one can be rotated while the other verifies: configure
`secret=[primary, secondary]` (or the one key in use). Every value of both headers is a
candidate for every configured key, compared with one HMAC per key, so a delivery verifies
while either key matches either header. Box's SDK also requires `BOX-SIGNATURE-VERSION: 1`
and `BOX-SIGNATURE-ALGORITHM: HmacSHA256`, and so does this source: another algorithm named
there is refused, not guessed at.

The timestamp is signed (it follows the body in the HMAC) and held within `tolerance`, 600 s
both ways by default: Box's SDK refuses a delivery more than 10 minutes old, and any from the
future; hookinbox allows the same skew both ways. It is checked once the signature matches.

The key is the body's `id`: Box's `BOX-DELIVERY-ID` changes on every retry, while "the ID in
the payload body remains the same". The type is `trigger` (`FILE.UPLOADED`), the time
`created_at`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from hookinbox._errors import BadSignature, MissingHeader
from hookinbox.sources._base import TimestampedSource
from hookinbox.sources._identity import Identity, fields_identity
from hookinbox.sources._provider import b64_mac, json_headers, provider
from hookinbox.sources._signatures import (
    Headers,
    check_tolerance,
    decode_digests,
    parse_zoned_time,
    require_header,
    require_match,
)

PRIMARY = "box-signature-primary"
SECONDARY = "box-signature-secondary"
TIMESTAMP = "box-delivery-timestamp"
VERSION = "box-signature-version"
ALGORITHM = "box-signature-algorithm"
BOX_TOLERANCE = 600.0


class Box(TimestampedSource):
    default_name = "box"
    # Box retries a failed delivery (its schedule is not confirmed); 3 days is the default.
    redelivery_window = timedelta(days=3)
    stored_headers = (PRIMARY, SECONDARY, TIMESTAMP, VERSION, ALGORITHM, "box-delivery-id")
    signature_headers = (PRIMARY, SECONDARY, TIMESTAMP, VERSION, ALGORITHM)

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        name: str | None = None,
        tolerance: float | None = BOX_TOLERANCE,
    ) -> None:
        super().__init__(secret=secret, name=name, tolerance=tolerance)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        if require_header(headers, VERSION).strip() != "1":
            raise BadSignature("BOX-SIGNATURE-VERSION is not 1")
        if require_header(headers, ALGORITHM).strip() != "HmacSHA256":
            raise BadSignature("BOX-SIGNATURE-ALGORITHM is not HmacSHA256")
        candidates = self._candidates(headers)
        timestamp_text = require_header(headers, TIMESTAMP)
        sent = parse_zoned_time(timestamp_text, "BOX-DELIVERY-TIMESTAMP")
        try:
            signed = body + timestamp_text.encode()
        except UnicodeEncodeError as exc:  # a lone surrogate: no sender could have signed it
            raise BadSignature("BOX-DELIVERY-TIMESTAMP is not valid text") from exc
        require_match(self._keys, candidates, signed)
        check_tolerance(sent.timestamp(), now=now, tolerance=self.tolerance)

    @staticmethod
    def _candidates(headers: Headers) -> list[bytes]:
        """The digests of both signature headers (each capped at `MAX_SIGNATURES`)."""
        candidates: list[bytes] = []
        for name in (PRIMARY, SECONDARY):
            try:
                candidates += decode_digests(headers, name, what=name.upper(), encoding="base64")
            except MissingHeader:
                continue
        if not candidates:
            raise MissingHeader(f"missing header {PRIMARY}")
        return candidates

    def identify(self, headers: Headers, body: bytes) -> Identity:
        return fields_identity(body, id_field="id", type_field="trigger", time_field="created_at")


def sign(source: Box, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # Box's recipe: HMAC-SHA256 over the body's bytes, then the timestamp's, in base64; the
    # primary key signs BOX-SIGNATURE-PRIMARY, the secondary (if any) the other header.
    timestamp = datetime.fromtimestamp(t, UTC).isoformat()
    secret = fields.pop("secret", None)
    keys = [secret.encode()] if secret is not None else source._keys[:2]
    signed = body + timestamp.encode()
    headers = {
        **json_headers(fields),
        "BOX-DELIVERY-ID": fields.pop("delivery_id", f"{t}-{len(body)}"),
        "BOX-DELIVERY-TIMESTAMP": timestamp,
        "BOX-SIGNATURE-VERSION": "1",
        "BOX-SIGNATURE-ALGORITHM": "HmacSHA256",
        "BOX-SIGNATURE-PRIMARY": b64_mac(keys[0], signed),
    }
    if len(keys) > 1:
        headers["BOX-SIGNATURE-SECONDARY"] = b64_mac(keys[1], signed)
    return headers


PROVIDER = provider(
    Box,
    sign=sign,
    example=lambda keys: Box(secret="box-primary-example"),
    event=lambda tag: {
        "type": "webhook_event",
        "id": f"eb0c4e06-{tag}",
        "created_at": "2023-11-14T22:13:20-08:00",
        "trigger": "FILE.UPLOADED",
        "webhook": {"id": "53", "type": "webhook"},
        "source": {"id": tag, "type": "file"},
    },
    signature_header="BOX-SIGNATURE-PRIMARY",
)
