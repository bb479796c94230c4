"""Providers that send through Svix: Standard Webhooks signatures under their own names.

Resend and Clerk sign with `svix-id`, `svix-timestamp` and `svix-signature` (the
`webhook-*` headers' twins, which `StandardWebhooks` reads too) and a `whsec_` secret from
their dashboards. Each preset differs from `StandardWebhooks` only in its default name and
where its payload puts the event's time; the key stays the `svix-id` message id, which Svix
keeps on every retry and manual resend of one message.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hookinbox.sources._identity import Identity, parse_time
from hookinbox.sources._provider import provider
from hookinbox.sources._signatures import Headers
from hookinbox.sources._standard_webhooks import (
    EXAMPLE_SECRET,
    PROVIDER,
    StandardWebhooks,
    example_event,
    standard_headers,
)


class Resend(StandardWebhooks):
    """Resend's email events (`email.sent`, `email.delivered`, `email.bounced`, ...)."""

    default_name = "resend"

    def identify(self, headers: Headers, body: bytes) -> Identity:
        identity = super().identify(headers, body)
        # Resend dates the event in the envelope's `created_at` (ISO 8601).
        created = parse_time(identity.payload.get("created_at"))
        return dataclasses.replace(identity, occurred_at=created or identity.occurred_at)


class Clerk(StandardWebhooks):
    """Clerk's user, session and organization events (`user.created`, ...)."""

    default_name = "clerk"

    def identify(self, headers: Headers, body: bytes) -> Identity:
        identity = super().identify(headers, body)
        # Clerk's `timestamp` is in milliseconds, which the generic reading takes for seconds.
        millis = identity.payload.get("timestamp")
        occurred = None
        if isinstance(millis, int) and not isinstance(millis, bool):
            occurred = parse_time(millis / 1000)
        return dataclasses.replace(identity, occurred_at=occurred)


def sign(source: StandardWebhooks, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # Svix's own header names, as Resend and Clerk send them.
    return standard_headers(source, body, t, fields, prefix="svix")


RESEND = provider(
    Resend,
    sign=sign,
    example=lambda keys: Resend(secret=EXAMPLE_SECRET),
    event=example_event,
    signature_header="svix-signature",
    forgery=PROVIDER.forgery,
)
CLERK = provider(
    Clerk,
    sign=sign,
    example=lambda keys: Clerk(secret=EXAMPLE_SECRET),
    event=example_event,
    signature_header="svix-signature",
    forgery=PROVIDER.forgery,
)
