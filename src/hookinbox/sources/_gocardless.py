"""GoCardless: `Webhook-Signature: <hex>`, HMAC-SHA256 of the body keyed with the endpoint's secret.

The key is the webhook endpoint's **secret** (shown on the endpoint's page in the dashboard),
as its UTF-8 bytes. GoCardless signs no time.

Deliveries are batches: `events[]` (up to 250), with `meta.webhook_id` naming the delivery.
Each event is stored under its own `id` (`EV...`), which GoCardless repeats when it retries the
webhook or when it is retried by hand. The type is `<resource_type>.<action>`
(`payments.confirmed`), the time `created_at`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox._errors import PayloadError
from hookinbox.sources._hmac_preset import BatchHMACPresetSource, HMACPreset, declare
from hookinbox.sources._identity import Identity, event_key, optional_text, parse_time
from hookinbox.sources._json_slices import member_items
from hookinbox.sources._signatures import Headers


class GoCardless(BatchHMACPresetSource):
    default_name = "gocardless"
    # Up to 8 retries at increasing intervals, and a retry by hand from the dashboard or the
    # API (its window not confirmed): a week.
    redelivery_window = timedelta(days=7)
    # GoCardless's recipe: the hex HMAC-SHA256 of the raw body, keyed with the endpoint secret.
    preset = HMACPreset("Webhook-Signature")

    def identify_batch(self, headers: Headers, body: bytes) -> list[Identity]:
        return self.identify_items(member_items(body, "events"), _event)


def _event(item: Any) -> Identity:
    if not isinstance(item, dict):
        raise PayloadError("an event of the batch is not a JSON object")
    resource, action = item.get("resource_type"), item.get("action")
    kind = f"{resource}.{action}" if isinstance(resource, str) and isinstance(action, str) else None
    return Identity(
        event_id=event_key(item.get("id")),
        event_type=optional_text(kind),
        occurred_at=parse_time(item.get("created_at")),
        payload=item,
    )


PROVIDER = declare(
    GoCardless,
    headers=lambda source, body, t, fields: {"User-Agent": "gocardless-webhook-service/1.1"},
    example=lambda keys: GoCardless(secret="gocardless-example-secret"),
    event=lambda tag: {
        "events": [
            {
                "id": f"EV{tag}",
                "created_at": "2026-11-30T12:00:00.000Z",
                "resource_type": "payments",
                "action": "confirmed",
                "links": {"payment": f"PM{tag}"},
                "details": {"origin": "gocardless", "cause": "payment_confirmed"},
                "metadata": {},
            }
        ],
        "meta": {"webhook_id": f"WB{tag}"},
    },
    batch_key=lambda body: str(body["events"][0]["id"]),
)
