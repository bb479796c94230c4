"""Webflow: `x-webflow-signature: <hex>`, HMAC-SHA256 of `<x-webflow-timestamp>:<body>`.

The key is the webhook's `secretKey` (returned when a webhook is created through the API) or
the OAuth application's client secret; webhooks made in a site's dashboard or with a site API
token are not signed and are answered 401. The timestamp is Unix milliseconds, signed, and
held within `tolerance` (300 s both ways, Webflow's 5 minutes) once the signature matches.

Webflow's bodies name no event or delivery id (`{"triggerType": ..., "payload": {...}}`), so
the key is derived from what the signature covers: `<triggerType>:<sha256 of payload>`, the
payload serialised canonically. A retry repeats the body and so the key; two events with
the same content are one (a changed item carries its new `lastUpdated`). The time is the
signed sending time.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

from hookinbox.sources._hmac_preset import HMACPreset, TimestampedHMACPresetSource, declare
from hookinbox.sources._identity import (
    Identity,
    canonical_json,
    event_key,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._signatures import Headers

TIMESTAMP = "x-webflow-timestamp"


class Webflow(TimestampedHMACPresetSource):
    default_name = "webflow"
    # Webflow's retries are not confirmed; a day keeps a key past any quick retry.
    redelivery_window = timedelta(days=1)
    # Webflow's recipe: the hex HMAC-SHA256 of `<timestamp in ms>:<body>`.
    preset = HMACPreset(
        "x-webflow-signature",
        message="{timestamp}:{body}",
        timestamp_header=TIMESTAMP,
        per_second=1000,
    )

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        trigger = event_key(payload.get("triggerType"), "triggerType")
        content = canonical_json(payload.get("payload"))
        digest = hashlib.sha256(content).hexdigest()
        sent = headers.get(TIMESTAMP, "")
        return Identity(
            event_id=event_key(f"{trigger}:{digest}"),
            event_type=trigger,
            occurred_at=parse_time(int(sent) / 1000)
            if sent.isdigit() and len(sent) <= 15
            else None,
            payload=payload,
            # The key is the content: a retry spaced otherwise is the same event, not a conflict.
            fingerprint=trigger.encode() + b":" + content,
        )


PROVIDER = declare(
    Webflow,
    event=lambda tag: {
        "triggerType": "form_submission",
        "payload": {
            "name": "Contact",
            "siteId": "65427cf400e02b306eaa049c",
            "data": {"Email": f"{tag}@example.com"},
            "submittedAt": "2023-11-14T22:13:20.000Z",
            "id": f"6321a{tag}",
        },
    },
)
