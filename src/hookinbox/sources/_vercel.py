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
from typing import Any

from hookinbox.sources._base import SecretSource
from hookinbox.sources._identity import (
    Identity,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import hex_mac, json_headers, provider, secret_key
from hookinbox.sources._signatures import Headers, check_prefixed_hex_hmac


class Vercel(SecretSource):
    default_name = "vercel"
    # Vercel's retries are not confirmed; a day keeps a key past any quick retry.
    redelivery_window = timedelta(days=1)
    stored_headers = ("x-vercel-signature",)
    signature_headers = ("x-vercel-signature",)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        check_prefixed_hex_hmac(
            headers, body, self._keys, prefix="", name="x-vercel-signature", algorithm="sha1"
        )

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


def sign(source: Vercel, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # Vercel's recipe: the hex HMAC-SHA1 of the raw body, keyed with the webhook's secret.
    return {
        **json_headers(fields),
        "x-vercel-signature": hex_mac(secret_key(source, fields), body, "sha1"),
    }


PROVIDER = provider(
    Vercel,
    sign=sign,
    example=lambda keys: Vercel(secret="vercel-example"),
    event=lambda tag: {
        "id": f"uwh_{tag}",
        "type": "deployment.succeeded",
        "createdAt": 1_700_000_000_000,
        "region": "iad1",
        "payload": {"deployment": {"id": f"dpl_{tag}"}, "project": {"id": "prj_shop"}},
    },
    signature_header="x-vercel-signature",
)
