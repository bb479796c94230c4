"""Typeform: `Typeform-Signature: sha256=<base64>`, HMAC-SHA256 of the body with the secret.

The key is the body's `event_id`; the type is `event_type` (`form_response`), the time the
response's `form_response.submitted_at`. Typeform signs no timestamp.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox.sources._base import SecretSource
from hookinbox.sources._identity import (
    Identity,
    event_key,
    lookup,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import b64_mac, json_headers, provider, secret_key
from hookinbox.sources._signatures import Headers, decode_digests, require_match


class Typeform(SecretSource):
    default_name = "typeform"
    # Retries for about 10 hours (not confirmed from Typeform's own pages).
    redelivery_window = timedelta(days=1)
    stored_headers = ("typeform-signature",)
    signature_headers = stored_headers

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        candidates = decode_digests(
            headers,
            "typeform-signature",
            what="Typeform-Signature",
            encoding="base64",
            prefix="sha256=",
        )
        require_match(self._keys, candidates, body)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        return Identity(
            event_id=event_key(payload.get("event_id"), "event_id"),
            event_type=optional_text(payload.get("event_type")),
            occurred_at=parse_time(lookup(payload, "form_response.submitted_at")),
            payload=payload,
        )


def sign(source: Typeform, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    signature = b64_mac(secret_key(source, fields), body)
    return {**json_headers(fields), "Typeform-Signature": f"sha256={signature}"}


PROVIDER = provider(
    Typeform,
    sign=sign,
    example=lambda keys: Typeform(secret="typeform-example"),
    event=lambda tag: {"event_id": tag, "event_type": "form_response"},
    signature_header="Typeform-Signature",
)
