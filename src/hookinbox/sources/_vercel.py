"""Vercel: `x-vercel-signature: <hex>`, HMAC-**SHA1** of the body.

The key is the webhook's secret, shown once when an account webhook is created; an
integration's webhooks are signed with the integration's client secret instead. Vercel signs
no timestamp.

The key of an event is the body's `id`, "the ID of the webhook delivery" (whether a retry
repeats it is not confirmed); it is inside the signed body, so a replay cannot pass for a new
event. The type is the body's `type` (`deployment.succeeded`), the time its `createdAt` (Unix
milliseconds).
"""

from __future__ import annotations

from datetime import timedelta

from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, declare
from hookinbox.sources._identity import (
    Identity,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._signatures import Headers


class Vercel(HMACPresetSource):
    default_name = "vercel"
    # Vercel's retries are not confirmed; a day keeps a key past any quick retry.
    redelivery_window = timedelta(days=1)
    # Vercel's recipe: the hex HMAC-SHA1 of the raw body, keyed with the webhook's secret.
    preset = HMACPreset("x-vercel-signature", algorithm="sha1")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        created = payload.get("createdAt")
        if isinstance(created, int) and not isinstance(created, bool):
            created = created / 1000  # milliseconds; an ISO 8601 string is read as it is
        return Identity(
            event_id=event_key(payload.get("id")),
            event_type=optional_text(payload.get("type")),
            occurred_at=parse_time(created),
            payload=payload,
        )


PROVIDER = declare(
    Vercel,
    event=lambda tag: {
        "id": f"uwh_{tag}",
        "type": "deployment.succeeded",
        "createdAt": 1_700_000_000_000,
        "region": "iad1",
        "payload": {"deployment": {"id": f"dpl_{tag}"}, "project": {"id": "prj_shop"}},
    },
)
