"""Xero: `x-xero-signature`, the base64 HMAC-SHA256 of the body keyed with the webhook key.

The key is the app's **webhooks key**, as Xero shows it (a base64-looking string, used as
its UTF-8 bytes, not decoded). Xero signs no time.

"Intent to receive": when a subscription is created, re-enabled or moved, Xero POSTs a few
bodies with no event (`{"events": [], "firstEventSequence": 0, ...}`), some signed correctly
and some not, and wants 200 for the first and 401 for the others. That is how every delivery
is already answered; a correctly signed body with an empty `events` list is answered 200 and
stored nothing (`handshake`), where another batch source would call an empty batch a 400.

Every answer to a delivery has no body, as Xero asks of an endpoint (`acknowledgement`).

Deliveries are batches: `events[]`, each a change to one resource of one organisation. None
carries an id of its own, and Xero may batch a retried event with others, so each is stored
under what names the change: `<tenantId>:<eventCategory>:<eventType>:<resourceId>:<eventDateUtc>`.
The type is `<eventCategory>.<eventType>` (`INVOICE.UPDATE`), the time `eventDateUtc` (UTC,
written without a zone).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

from hookinbox._errors import Handshake, PayloadError
from hookinbox.sources._hmac_preset import BatchHMACPresetSource, HMACPreset, declare
from hookinbox.sources._identity import (
    Identity,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._json_slices import member_items
from hookinbox.sources._signatures import Headers


class Xero(BatchHMACPresetSource):
    default_name = "xero"
    # Xero retries "with decreasing frequency for up to 24 hours", then disables the webhook.
    redelivery_window = timedelta(days=2)
    # Xero's recipe: the base64 HMAC-SHA256 of the raw body, keyed with the webhooks key.
    preset = HMACPreset("x-xero-signature", encoding="base64")
    acknowledgement: ClassVar[str | None] = ""  # "there is no body in the response"

    def handshake(self, headers: Headers, body: bytes) -> Handshake | None:
        # Intent to receive: a signed body without events. Answered 200 with no body.
        if parse_json_object(body).get("events") == []:
            return Handshake("")
        return None

    def identify_batch(self, headers: Headers, body: bytes) -> list[Identity]:
        return self.identify_items(member_items(body, "events"), _event)


def _event(item: Any) -> Identity:
    if not isinstance(item, dict):
        raise PayloadError("an event of the batch is not a JSON object")
    parts = [
        event_key(item.get(name), name)
        for name in ("tenantId", "eventCategory", "eventType", "resourceId", "eventDateUtc")
    ]
    category, kind = parts[1], parts[2]
    return Identity(
        event_id=event_key(":".join(parts)),
        event_type=optional_text(f"{category}.{kind}"),
        occurred_at=parse_time(item.get("eventDateUtc")),
        payload=item,
    )


def _event_of(tag: str) -> dict[str, Any]:
    return {
        "resourceUrl": f"https://api.xero.com/api.xro/2.0/Invoices/{tag}",
        "resourceId": tag,
        "eventDateUtc": "2026-11-30T12:00:00.123",
        "eventType": "UPDATE",
        "eventCategory": "INVOICE",
        "tenantId": "c2cc9b6e-9458-4c7d-93cc-f02b81b0594f",
        "tenantType": "ORGANISATION",
    }


PROVIDER = declare(
    Xero,
    example=lambda keys: Xero(secret="xero-example-webhooks-key"),
    event=lambda tag: {
        "events": [_event_of(tag)],
        "firstEventSequence": 1,
        "lastEventSequence": 1,
        "entropy": "QWERTYUIOPASDFGHJKLZ",
    },
    batch_key=lambda body: ":".join(
        str(body["events"][0][name])
        for name in ("tenantId", "eventCategory", "eventType", "resourceId", "eventDateUtc")
    ),
)
