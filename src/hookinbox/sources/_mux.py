"""Mux: `Mux-Signature: t=<unix>,v1=<hex>`, HMAC-SHA256 over `{t}.{body}`, as Stripe's.

The key is the webhook's **signing secret** (each webhook endpoint has its own), as its UTF-8
bytes. The timestamp is held within 5 minutes both ways, as Mux's SDKs do (they refuse only
the old). Any `v1` entry may match; Mux names `v1` the only scheme today.

The key of an event is the body's `id` (a UUID), which Mux repeats when it retries; the type
is `type` (`video.asset.ready`), the time `created_at`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox.sources._base import SignatureListSource
from hookinbox.sources._identity import Identity, fields_identity
from hookinbox.sources._provider import hex_mac, json_headers, provider, secret_key
from hookinbox.sources._signatures import Headers


class Mux(SignatureListSource):
    default_name = "mux"
    # Mux retries for up to 24 hours (not confirmed); a day's margin.
    redelivery_window = timedelta(days=2)
    stored_headers = ("mux-signature",)
    signature_header = "mux-signature"
    signature_headers = (signature_header,)
    header_label = "Mux-Signature"
    separator = ","
    timestamp_name = "t"
    signature_name = "v1"
    joiner = b"."

    def identify(self, headers: Headers, body: bytes) -> Identity:
        return fields_identity(body, id_field="id", type_field="type", time_field="created_at")


def sign(source: Mux, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # Mux's recipe: the hex HMAC-SHA256 of "<t>.<body>" with the signing secret.
    digest = hex_mac(secret_key(source, fields), f"{t}.".encode() + body)
    return {**json_headers(fields), "Mux-Signature": f"t={t},v1={digest}"}


PROVIDER = provider(
    Mux,
    sign=sign,
    example=lambda keys: Mux(secret="mux-example-signing-secret"),
    event=lambda tag: {
        "type": "video.asset.ready",
        "id": f"3a56ac3d-{tag}",
        "created_at": "2026-11-30T12:00:00.000000Z",
        "object": {"type": "asset", "id": f"asset-{tag}"},
        "data": {"id": f"asset-{tag}", "status": "ready"},
        "environment": {"name": "Production", "id": "j0863n"},
    },
    signature_header="Mux-Signature",
)
