"""Typeform: `Typeform-Signature: sha256=<base64>`, HMAC-SHA256 of the body with the secret.

The key is the body's `event_id`; the type is `event_type` (`form_response`), the time the
response's `form_response.submitted_at`. Typeform signs no timestamp.
"""

from __future__ import annotations

from datetime import timedelta

from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, declare
from hookinbox.sources._identity import (
    Identity,
    event_key,
    lookup,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._signatures import Headers


class Typeform(HMACPresetSource):
    default_name = "typeform"
    # Retries for about 10 hours (not confirmed from Typeform's own pages).
    redelivery_window = timedelta(days=1)
    preset = HMACPreset("Typeform-Signature", encoding="base64", prefix="sha256=")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        return Identity(
            event_id=event_key(payload.get("event_id"), "event_id"),
            event_type=optional_text(payload.get("event_type")),
            occurred_at=parse_time(lookup(payload, "form_response.submitted_at")),
            payload=payload,
        )


PROVIDER = declare(Typeform, event=lambda tag: {"event_id": tag, "event_type": "form_response"})
