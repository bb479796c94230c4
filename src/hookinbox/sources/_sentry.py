"""Sentry (integration platform): `Sentry-Hook-Signature: <hex>`, HMAC-SHA256 of the body with
the integration's client secret.

Sentry signs the body only: `Sentry-Hook-Timestamp` is sent beside it, unsigned, so it bounds
nothing and is only stored. The key is the `Request-ID` header, Sentry's id of the request
(also unsigned; whether a retry repeats it is not confirmed). The type is
`<Sentry-Hook-Resource>.<action>` (`issue.created`, `event_alert.triggered`,
`installation.created`): the resource header says which kind of object the body's `action`
is about.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, declare
from hookinbox.sources._identity import (
    Identity,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import body_id
from hookinbox.sources._signatures import Headers


class Sentry(HMACPresetSource):
    default_name = "sentry"
    # Sentry's retries are not confirmed; a day keeps a key past any quick resend.
    redelivery_window = timedelta(days=1)
    stored_headers = (
        "sentry-hook-signature",
        "sentry-hook-resource",
        "sentry-hook-timestamp",
        "request-id",
    )
    # Sentry's recipe: the hex HMAC-SHA256 of the body, keyed with the client secret.
    preset = HMACPreset("Sentry-Hook-Signature")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        resource = optional_text(headers.get("sentry-hook-resource"), limit=64)
        action = optional_text(payload.get("action"), limit=64)
        kind = ".".join(part for part in (resource, action) if part) or None
        timestamp = headers.get("sentry-hook-timestamp", "")
        return Identity(
            event_id=event_key(headers.get("request-id"), "Request-ID header"),
            event_type=kind,
            occurred_at=parse_time(int(timestamp))
            if timestamp.isdigit() and len(timestamp) <= 12
            else None,
            payload=payload,
        )


def sent_headers(source: Sentry, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    return {
        "Request-ID": fields.pop("event_id", None) or body_id(source, body),
        "Sentry-Hook-Resource": fields.pop("resource", "issue"),
        "Sentry-Hook-Timestamp": str(t),
    }


PROVIDER = declare(
    Sentry,
    headers=sent_headers,
    event=lambda tag: {
        "action": "created",
        "installation": {"uuid": "7a485448-a9e2-4c85-8a3c-4f44175783c9"},
        "data": {"issue": {"id": tag, "title": "ZeroDivisionError"}},
        "actor": {"type": "application", "id": "sentry", "name": "Sentry"},
    },
)
