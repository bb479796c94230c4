"""Intercom: `X-Hub-Signature: sha1=<hex>`, HMAC-SHA1 of the body with the app's client secret.

The key is the notification's `id` (`notif_...`); its type is `topic`, its time `created_at`.
Intercom signs no timestamp. The `ping` topic Intercom sends from the Developer Hub is stored
like any other notification (it carries an id); handlers that do not register for it never
see it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hookinbox.sources._base import SecretSource
from hookinbox.sources._identity import Identity, fields_identity, fingerprint_without
from hookinbox.sources._provider import hex_mac, json_headers, provider, secret_key
from hookinbox.sources._signatures import Headers, check_prefixed_hex_hmac

DELIVERY_FIELDS = ("delivery_attempts", "delivery_status", "delivered_at", "first_sent_at")
"""The notification's fields about its delivery rather than its event (Intercom's webhook
model): they may change from one attempt to the next."""


class Intercom(SecretSource):
    default_name = "intercom"
    # The retry schedule is not confirmed; a subscription failing for seven days is suspended.
    redelivery_window = timedelta(days=3)
    stored_headers = ("x-hub-signature",)
    signature_headers = stored_headers

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        check_prefixed_hex_hmac(
            headers, body, self._keys, prefix="sha1=", name="X-Hub-Signature", algorithm="sha1"
        )

    def identify(self, headers: Headers, body: bytes) -> Identity:
        identity = fields_identity(body, id_field="id", type_field="topic", time_field="created_at")
        # Each attempt restates the delivery's bookkeeping (`delivery_attempts` counts up): a
        # retry differs only there, and is a duplicate, not a key conflict.
        fingerprint = fingerprint_without(identity.payload, *DELIVERY_FIELDS)
        return replace(identity, fingerprint=fingerprint)


def sign(source: Intercom, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = hex_mac(secret_key(source, fields), body, "sha1")
    return {**json_headers(fields), "X-Hub-Signature": f"sha1={digest}"}


PROVIDER = provider(
    Intercom,
    sign=sign,
    example=lambda keys: Intercom(secret="intercom-example"),
    event=lambda tag: {"id": f"evt_{tag}", "type": "order.paid", "created": 1_700_000_000},
    signature_header="X-Hub-Signature",
)
