"""Checkout.com: `Cko-Signature: <hex>`, HMAC-SHA256 of the body keyed with the webhook's key.

The key is the one set on the workflow's webhook action (its `signature.key`; the "secret
key" or "signature key" of the dashboard's webhook), as its UTF-8 bytes. Checkout.com signs no
time. A webhook may also carry an `Authorization` header of your choice; the signature is
what is checked.

The key of an event is the body's `id` (`evt_...`), which Checkout.com keeps when it resends
a webhook (it sends "at least once"). The type is `type` (`payment_approved`), the time
`created_on`.
"""

from __future__ import annotations

from datetime import timedelta

from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, declare
from hookinbox.sources._identity import Identity, fields_identity
from hookinbox.sources._signatures import Headers


class CheckoutCom(HMACPresetSource):
    default_name = "checkout"
    # 8 automatic resends over about 31 hours (5, 10, 15, 30 minutes, 1, 4, 12, 12 hours),
    # and resends by hand from the dashboard or the API (their window not confirmed).
    redelivery_window = timedelta(days=3)
    # Checkout.com's recipe: the hex HMAC-SHA256 of the raw body, keyed with the webhook's key.
    preset = HMACPreset("Cko-Signature")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        return fields_identity(body, id_field="id", type_field="type", time_field="created_on")


PROVIDER = declare(
    CheckoutCom,
    example=lambda keys: CheckoutCom(secret="checkout-example-key"),
    event=lambda tag: {
        "id": f"evt_{tag}",
        "type": "payment_approved",
        "version": "1.0.33",
        "created_on": "2026-11-30T12:00:00.000Z",
        "data": {"id": f"pay_{tag}", "amount": 1000, "currency": "GBP"},
    },
)
