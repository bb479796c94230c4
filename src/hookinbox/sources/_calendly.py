"""Calendly: `Calendly-Webhook-Signature: t=<unix>,v1=<hex>`, HMAC-SHA256 over `{t}.{body}`.

The subscription's signing key is the HMAC key as it stands (UTF-8). Calendly's payload has no
event id, so the key is derived from the signed body: `<event>:<payload.uri>` for the events
that happen once per resource (an invitee is created once and canceled once; a reschedule
creates a new invitee), and `<event>:<payload.uri>:<created_at>` for the others, which may
recur on one resource (an event type updated twice). Why, in docs/sources/calendly.md.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox.sources._base import SignatureListSource
from hookinbox.sources._identity import (
    Identity,
    event_key,
    lookup,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import hex_mac, json_headers, provider, secret_key
from hookinbox.sources._signatures import Headers

ONCE_PER_RESOURCE = frozenset(
    {
        "invitee.created",
        "invitee.canceled",
        "invitee_no_show.created",
        "invitee_no_show.deleted",
        "routing_form_submission.created",
    }
)
"""Events whose `payload.uri` names a resource the event happens to once."""


class Calendly(SignatureListSource):
    default_name = "calendly"
    # Retries with exponential backoff for 24 hours, then the subscription is disabled.
    redelivery_window = timedelta(days=1)
    stored_headers = ("calendly-webhook-signature",)
    signature_header = "calendly-webhook-signature"
    signature_headers = (signature_header,)
    header_label = "Calendly-Webhook-Signature"
    separator = ","
    timestamp_name = "t"
    signature_name = "v1"
    joiner = b"."

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        event = event_key(payload.get("event"), "event")
        uri = event_key(lookup(payload, "payload.uri"), "payload.uri")
        parts = [event, uri]
        if event not in ONCE_PER_RESOURCE:
            parts.append(event_key(payload.get("created_at"), "created_at"))
        return Identity(
            event_id=event_key(":".join(parts)),
            event_type=optional_text(event),
            occurred_at=parse_time(payload.get("created_at")),
            payload=payload,
        )


def sign(source: Calendly, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = hex_mac(secret_key(source, fields), f"{t}.".encode() + body)
    return {**json_headers(fields), "Calendly-Webhook-Signature": f"t={t},v1={digest}"}


PROVIDER = provider(
    Calendly,
    sign=sign,
    example=lambda keys: Calendly(secret="calendly-example"),
    event=lambda tag: {
        "event": "invitee.created",
        "payload": {"uri": f"https://calendly.test/i/{tag}"},
    },
    signature_header="Calendly-Webhook-Signature",
)
