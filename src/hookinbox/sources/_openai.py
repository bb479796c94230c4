"""OpenAI: Standard Webhooks signatures under OpenAI's name.

OpenAI signs its platform webhooks (`response.completed`, `batch.completed`,
`fine_tuning.job.succeeded`, ...) with the `webhook-id`, `webhook-timestamp` and
`webhook-signature` headers of Standard Webhooks, and a `whsec_` secret shown once when the
endpoint is created in the dashboard. The preset differs from `StandardWebhooks` in its
default name and in where the payload dates the event (`created_at`, Unix seconds); the key
stays the `webhook-id`, which Standard Webhooks keeps on every retry of one message.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from hookinbox.sources._identity import Identity, parse_time
from hookinbox.sources._provider import provider
from hookinbox.sources._signatures import Headers
from hookinbox.sources._standard_webhooks import (
    EXAMPLE_SECRET,
    PROVIDER,
    StandardWebhooks,
    sign,
)


class OpenAI(StandardWebhooks):
    """OpenAI's platform webhooks (`response.completed`, `batch.completed`, ...)."""

    default_name = "openai"
    # Retried with exponential backoff for up to 72 hours (not confirmed from OpenAI's own
    # pages): kept as every Standard Webhooks sender, 4 days.
    redelivery_window = timedelta(days=4)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        identity = super().identify(headers, body)
        # OpenAI dates the event in the envelope's `created_at` (Unix seconds).
        created = parse_time(identity.payload.get("created_at"))
        return dataclasses.replace(identity, occurred_at=created or identity.occurred_at)


def example_event(tag: str) -> dict[str, Any]:
    return {
        "object": "event",
        "id": f"evt_{tag}",
        "type": "response.completed",
        "created_at": 1_700_000_000,
        "data": {"id": f"resp_{tag}"},
    }


OPENAI = provider(
    OpenAI,
    sign=sign,
    example=lambda keys: OpenAI(secret=EXAMPLE_SECRET),
    event=example_event,
    signature_header="webhook-signature",
    forgery=PROVIDER.forgery,
)
