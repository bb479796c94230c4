"""Replicate: Standard Webhooks signatures under Replicate's name.

Replicate signs every webhook of a prediction or a training with the `webhook-id`,
`webhook-timestamp` and `webhook-signature` headers of Standard Webhooks, keyed with the
account's `whsec_` secret (`GET /v1/webhooks/default/secret`). The body is the prediction
(or training) itself, with no event type: the preset names the event by the object's
`status` (`starting`, `processing`, `succeeded`, `failed`, `canceled`), and dates it by its
`completed_at`, else `started_at`, else `created_at`. The key stays the `webhook-id`, which
Replicate keeps when a webhook is resent; each webhook of one prediction (start, output, logs,
completed) is a message of its own with an id of its own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hookinbox.sources._identity import Identity, optional_text, parse_time
from hookinbox.sources._provider import provider
from hookinbox.sources._signatures import Headers
from hookinbox.sources._standard_webhooks import (
    EXAMPLE_SECRET,
    PROVIDER,
    StandardWebhooks,
    sign,
)

TIME_FIELDS = ("completed_at", "started_at", "created_at")
"""Where a prediction's time is, latest first: the moment of the state the webhook reports."""


class Replicate(StandardWebhooks):
    """Replicate's prediction and training webhooks."""

    default_name = "replicate"

    def identify(self, headers: Headers, body: bytes) -> Identity:
        identity = super().identify(headers, body)
        payload = identity.payload
        occurred = next(
            (t for t in (parse_time(payload.get(f)) for f in TIME_FIELDS) if t is not None), None
        )
        return dataclasses.replace(
            identity, event_type=optional_text(payload.get("status")), occurred_at=occurred
        )


def example_event(tag: str) -> dict[str, Any]:
    return {
        "id": f"pred_{tag}",
        "model": "replicate/hello-world",
        "status": "succeeded",
        "created_at": "2026-01-02T03:04:05.000Z",
        "completed_at": "2026-01-02T03:04:07.000Z",
        "output": "hello",
    }


REPLICATE = provider(
    Replicate,
    sign=sign,
    example=lambda keys: Replicate(secret=EXAMPLE_SECRET),
    event=example_event,
    signature_header="webhook-signature",
    forgery=PROVIDER.forgery,
)
