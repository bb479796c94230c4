"""WorkOS: `WorkOS-Signature: t=<unix ms>, v1=<hex>`, HMAC-SHA256 over `{t}.{body}`.

The timestamp is in milliseconds, signed as the digits stand. The endpoint's secret is the
HMAC key as it stands (UTF-8). The key is the body's `id` (`event_...`), which WorkOS keeps
when it retries; `t` and the signature change on every attempt. The tolerance defaults to
300 s, not the SDK's 180 s (see docs/sources/workos.md).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox.sources._base import SignatureListSource
from hookinbox.sources._identity import Identity, fields_identity
from hookinbox.sources._provider import hex_mac, json_headers, provider, secret_key
from hookinbox.sources._signatures import Headers


class WorkOS(SignatureListSource):
    default_name = "workos"
    # Retries with backoff for up to 3 days (not confirmed from WorkOS's own pages).
    redelivery_window = timedelta(days=3)
    stored_headers = ("workos-signature",)
    signature_header = "workos-signature"
    signature_headers = (signature_header,)
    header_label = "WorkOS-Signature"
    separator = ","
    timestamp_name = "t"
    signature_name = "v1"
    joiner = b"."
    per_second = 1000

    def identify(self, headers: Headers, body: bytes) -> Identity:
        return fields_identity(body, id_field="id", type_field="event", time_field="created_at")


def sign(source: WorkOS, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    milliseconds = t * 1000  # WorkOS signs its timestamp in milliseconds
    digest = hex_mac(secret_key(source, fields), f"{milliseconds}.".encode() + body)
    return {**json_headers(fields), "WorkOS-Signature": f"t={milliseconds}, v1={digest}"}


PROVIDER = provider(
    WorkOS,
    sign=sign,
    example=lambda keys: WorkOS(secret="workos-example"),
    event=lambda tag: {"id": f"evt_{tag}", "type": "order.paid", "created": 1_700_000_000},
    signature_header="WorkOS-Signature",
)
