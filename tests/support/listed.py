"""Numbered items for the fakes of providers' APIs (hookinbox.testing's `FakeStripeAPI`,
`FakeSquareAPI`, `FakeGitHubAPI`): ids that say which item a test means, and the fakes'
default credentials by name."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from hookinbox.testing import (
    FakeGitHubAPI,
    FakeSquareAPI,
    FakeStripeAPI,
    github_hook_delivery,
    square_event,
    stripe_event,
)

STRIPE_KEY = FakeStripeAPI.api_key
SQUARE_TOKEN = FakeSquareAPI.token
GITHUB_TOKEN = FakeGitHubAPI.token


def stripe_listed(number: int, created: int, event_type: str = "invoice.paid") -> dict[str, Any]:
    """Stripe's event `evt_<number, 24 digits>` around invoice `in_<number>`."""
    invoice = {"id": f"in_{number}", "object": "invoice", "amount_paid": 1200}
    return stripe_event(event_type, invoice, id=f"evt_{number:024d}", created=created)


def square_listed(
    number: int, created: datetime, event_type: str = "payment.updated"
) -> dict[str, Any]:
    """Square's event `<number, 8 digits>-65c5-...` around payment `pay_<number>`."""
    payment = {"id": f"pay_{number}", "status": "COMPLETED"}
    event_id = f"{number:08d}-65c5-4f3f-9e4d-8c2c7a1b0d9e"
    return square_event(event_type, payment, id=event_id, created=created)


def hook_delivery(
    number: int, at: datetime, *, status_code: int = 200, event: str = "push", guid: str = ""
) -> dict[str, Any]:
    """GitHub's delivery attempt `10_000_000 + number`, GUID the UUID `number` unless given."""
    return github_hook_delivery(10_000_000 + number, at=at, guid=guid or str(uuid.UUID(int=number)),
                                status_code=status_code, event=event)  # fmt: skip
