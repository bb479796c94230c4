"""Intercom: `X-Hub-Signature: sha1=<hex>`, HMAC-SHA1 of the body with the app's client secret.

The key is the notification's `id` (`notif_...`); its type is `topic`, its time `created_at`.
Intercom signs no timestamp. The `ping` topic Intercom sends from the Developer Hub is stored
like any other notification (it carries an id); handlers that do not register for it never
see it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, declare
from hookinbox.sources._identity import Identity, fields_identity, fingerprint_without
from hookinbox.sources._signatures import Headers

DELIVERY_FIELDS = ("delivery_attempts", "delivery_status", "delivered_at", "first_sent_at")
"""The notification's fields about its delivery rather than its event (Intercom's webhook
model): they may change from one attempt to the next."""


class Intercom(HMACPresetSource):
    default_name = "intercom"
    # The retry schedule is not confirmed; a subscription failing for seven days is suspended.
    redelivery_window = timedelta(days=3)
    preset = HMACPreset("X-Hub-Signature", algorithm="sha1", prefix="sha1=")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        identity = fields_identity(body, id_field="id", type_field="topic", time_field="created_at")
        # Each attempt restates the delivery's bookkeeping (`delivery_attempts` counts up): a
        # retry differs only there, and is a duplicate, not a key conflict.
        fingerprint = fingerprint_without(identity.payload, *DELIVERY_FIELDS)
        return replace(identity, fingerprint=fingerprint)


PROVIDER = declare(
    Intercom,
    event=lambda tag: {"id": f"evt_{tag}", "type": "order.paid", "created": 1_700_000_000},
)
