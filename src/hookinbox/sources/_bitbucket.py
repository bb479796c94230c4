"""Bitbucket Cloud: `X-Hub-Signature: sha256=<hex>`, HMAC-SHA256 of the body with the webhook's
secret.

Only webhooks given a secret are signed (Bitbucket Cloud added secrets in 2023); one without a
secret sends no `X-Hub-Signature`, and is answered 401. Bitbucket signs no timestamp.

The key is the `X-Request-UUID` header, Bitbucket's id of the request. It is not signed, and
whether an automatic retry (counted in `X-Attempt-Number`) repeats it is not confirmed; a
captured delivery replayed under a new id would be stored again (as GitHub's delivery id). The
type is the `X-Event-Key` header (`repo:push`, `pullrequest:created`); the bodies carry no
event time.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, declare
from hookinbox.sources._identity import Identity, event_key, optional_text, parse_json_object
from hookinbox.sources._provider import body_id
from hookinbox.sources._signatures import Headers


class Bitbucket(HMACPresetSource):
    default_name = "bitbucket"
    # Retried at once, twice, on a 5xx; a request can be resent by hand from the request log
    # (for how long is not confirmed): 3 days, the default.
    redelivery_window = timedelta(days=3)
    stored_headers = (
        "x-hub-signature",
        "x-request-uuid",
        "x-event-key",
        "x-hook-uuid",
        "x-attempt-number",
    )
    # Bitbucket's recipe: `sha256=` and the hex HMAC-SHA256 of the raw body.
    preset = HMACPreset("X-Hub-Signature", prefix="sha256=")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        return Identity(
            event_id=event_key(headers.get("x-request-uuid"), "X-Request-UUID header"),
            event_type=optional_text(headers.get("x-event-key"), limit=64),
            occurred_at=None,
            payload=payload,
        )


def sent_headers(source: Bitbucket, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    return {
        "X-Request-UUID": fields.pop("event_id", None) or body_id(source, body),
        "X-Event-Key": fields.pop("event_type", "repo:push"),
        "X-Hook-UUID": "{8c1f3c5e-2f0b-4a61-9d7e-1b2a3c4d5e6f}",
        "X-Attempt-Number": "1",
    }


PROVIDER = declare(
    Bitbucket,
    headers=sent_headers,
    event=lambda tag: {
        "actor": {"type": "user", "display_name": "Ada"},
        "repository": {"type": "repository", "full_name": "team/shop"},
        "push": {"changes": [{"new": {"type": "branch", "name": "main", "target": {"hash": tag}}}]},
    },
)
