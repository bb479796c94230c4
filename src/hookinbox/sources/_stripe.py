"""Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, HMAC-SHA256 over `{t}.{body}`.

The `whsec_...` secret is the HMAC key as it stands (UTF-8), not base64-decoded. Any `v1`
entry may match (Stripe sends one per active secret while a secret is rolled). The key is the
body's `id` (`evt_...`), stable across retries; `t` and the signature change on every attempt.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox.sources._base import Headers, Identity, SignatureListSource, fields_identity
from hookinbox.sources._provider import hex_mac, provider, secret_key


class Stripe(SignatureListSource):
    default_name = "stripe"
    # Automatic retries for 3 days, manual resend from the dashboard within 30 (seed 000).
    redelivery_window = timedelta(days=30)
    stored_headers = ("stripe-signature",)
    signature_header = "stripe-signature"
    signature_headers = (signature_header,)
    header_label = "Stripe-Signature"
    separator = ","
    timestamp_name = "t"
    signature_name = "v1"
    joiner = b"."

    def identify(self, headers: Headers, body: bytes) -> Identity:
        return fields_identity(body, id_field="id", type_field="type", time_field="created")


def sign(source: Stripe, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = hex_mac(secret_key(source, fields), f"{t}.".encode() + body)
    return {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        "Stripe-Signature": f"t={t},v1={digest}",
    }


PROVIDER = provider(
    Stripe,
    sign=sign,
    example=lambda keys: Stripe(secret="whsec_example"),
    event=lambda tag: {"id": f"evt_{tag}", "type": "invoice.paid", "created": 1_700_000_000},
    signature_header="Stripe-Signature",
)
