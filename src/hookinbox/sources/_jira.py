"""Jira (Atlassian admin webhooks with a secret): `X-Hub-Signature: sha256=<hex>`,
HMAC-SHA256 of the body, in the WebSub `method=signature` form.

Only webhooks registered with a secret (Jira administration, or the admin webhook API) are
signed; the JWT of Connect and OAuth apps' dynamic webhooks is not this source's. Jira signs
no timestamp.

The key is the `X-Atlassian-Webhook-Identifier` header: unique per webhook within the site
and unchanged across retries, which Jira counts in `X-Atlassian-Webhook-Retry`. It is not
signed: a captured delivery replayed under a new identifier would be stored again (as
GitHub's delivery id). The type is the body's `webhookEvent` (`jira:issue_created`), the time
its `timestamp` (Unix milliseconds).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, declare
from hookinbox.sources._identity import (
    Identity,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import body_id
from hookinbox.sources._signatures import Headers


def milliseconds(value: object) -> object:
    """A Unix time in milliseconds as seconds, for `parse_time`; anything else as it is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value / 1000
    return value


class Jira(HMACPresetSource):
    default_name = "jira"
    # Retried on failures (the schedule is not confirmed); 3 days is the default.
    redelivery_window = timedelta(days=3)
    stored_headers = (
        "x-hub-signature",
        "x-atlassian-webhook-identifier",
        "x-atlassian-webhook-retry",
        "x-atlassian-webhook-flow",
    )
    # Atlassian's recipe (WebSub): `sha256=` and the hex HMAC-SHA256 of the raw body.
    preset = HMACPreset("X-Hub-Signature", prefix="sha256=")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        identifier = headers.get("x-atlassian-webhook-identifier")
        return Identity(
            event_id=event_key(identifier, "X-Atlassian-Webhook-Identifier header"),
            event_type=optional_text(payload.get("webhookEvent")),
            occurred_at=parse_time(milliseconds(payload.get("timestamp"))),
            payload=payload,
        )


def sent_headers(source: Jira, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    return {
        "X-Atlassian-Webhook-Identifier": fields.pop("event_id", None) or body_id(source, body),
        "X-Atlassian-Webhook-Flow": "Primary",
    }


PROVIDER = declare(
    Jira,
    headers=sent_headers,
    event=lambda tag: {
        "timestamp": 1_700_000_000_000,
        "webhookEvent": "jira:issue_created",
        "issue_event_type_name": "issue_created",
        "issue": {"id": tag, "key": f"PRJ-{tag}"},
    },
)
