"""Event payloads shaped like the providers' own, for handlers' tests.

Each builder returns a plain dict (JSON-ready) with the fields a handler usually reads, in the
provider's layout, with made-up ids; keyword arguments replace any top-level field of the
object. Ids are random unless given, so two calls are two events; keep the dict to deliver the
same event again.
"""

from __future__ import annotations

import secrets
import string
import time
import uuid
from datetime import UTC, datetime
from typing import Any

_ALPHABET = string.ascii_letters + string.digits


def _token(length: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def _now() -> int:
    return int(time.time())


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# -- Stripe ---------------------------------------------------------------------------------------


def stripe_event(
    event_type: str,
    obj: dict[str, Any],
    *,
    id: str | None = None,
    created: int | None = None,
    previous_attributes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Stripe event envelope (`evt_...`) carrying `obj` as `data.object`."""
    data: dict[str, Any] = {"object": obj}
    if previous_attributes is not None:
        data["previous_attributes"] = previous_attributes
    return {
        "id": id or f"evt_1{_token(23)}",
        "object": "event",
        "api_version": "2024-06-20",
        "created": _now() if created is None else created,
        "data": data,
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": f"req_{_token(14)}", "idempotency_key": str(uuid.uuid4())},
        "type": event_type,
    }


def stripe_checkout_session(**fields: Any) -> dict[str, Any]:
    """A completed, paid Checkout Session (`cs_...`), as `checkout.session.completed` carries."""
    session = {
        "id": f"cs_test_{_token(24)}",
        "object": "checkout.session",
        "amount_subtotal": 1200,
        "amount_total": 1200,
        "currency": "eur",
        "customer": f"cus_{_token(14)}",
        "customer_email": "ada@example.com",
        "customer_details": {"email": "ada@example.com", "name": "Ada Lovelace"},
        "livemode": False,
        "mode": "payment",
        "payment_intent": f"pi_3{_token(23)}",
        "payment_status": "paid",
        "status": "complete",
        "subscription": None,
        "created": _now(),
        "metadata": {},
    }
    return session | fields


def stripe_subscription(**fields: Any) -> dict[str, Any]:
    """A subscription (`sub_...`), as `customer.subscription.*` events carry."""
    now = _now()
    subscription = {
        "id": f"sub_1{_token(23)}",
        "object": "subscription",
        "customer": f"cus_{_token(14)}",
        "status": "active",
        "cancel_at_period_end": False,
        "current_period_start": now,
        "current_period_end": now + 30 * 86400,
        "created": now,
        "currency": "eur",
        "items": {
            "object": "list",
            "data": [
                {
                    "id": f"si_{_token(14)}",
                    "object": "subscription_item",
                    "price": {"id": f"price_1{_token(23)}", "unit_amount": 900},
                    "quantity": 1,
                }
            ],
        },
        "latest_invoice": f"in_1{_token(23)}",
        "livemode": False,
        "metadata": {},
    }
    return subscription | fields


def stripe_invoice(**fields: Any) -> dict[str, Any]:
    """A paid invoice (`in_...`), as `invoice.paid` and `invoice.payment_succeeded` carry."""
    invoice = {
        "id": f"in_1{_token(23)}",
        "object": "invoice",
        "amount_due": 900,
        "amount_paid": 900,
        "amount_remaining": 0,
        "billing_reason": "subscription_cycle",
        "currency": "eur",
        "customer": f"cus_{_token(14)}",
        "customer_email": "ada@example.com",
        "number": f"{_token(8).upper()}-0001",
        "paid": True,
        "payment_intent": f"pi_3{_token(23)}",
        "status": "paid",
        "subscription": f"sub_1{_token(23)}",
        "created": _now(),
        "livemode": False,
    }
    return invoice | fields


# -- Shopify, GitHub, Standard Webhooks -----------------------------------------------------------


def shopify_order(**fields: Any) -> dict[str, Any]:
    """An order, as `orders/create` and `orders/paid` carry (the body is the order itself)."""
    order_id = secrets.randbelow(10**12) + 5 * 10**12
    created = _iso(_now())
    order = {
        "id": order_id,
        "admin_graphql_api_id": f"gid://shopify/Order/{order_id}",
        "confirmation_number": _token(9).upper(),
        "created_at": created,
        "updated_at": created,
        "currency": "EUR",
        "email": "ada@example.com",
        "financial_status": "paid",
        "fulfillment_status": None,
        "name": f"#{1000 + secrets.randbelow(9000)}",
        "order_number": 1000 + secrets.randbelow(9000),
        "subtotal_price": "49.00",
        "total_price": "49.00",
        "total_tax": "0.00",
        "customer": {"id": secrets.randbelow(10**12) + 7 * 10**12, "first_name": "Ada"},
        "line_items": [
            {
                "id": secrets.randbelow(10**13) + 10**13,
                "price": "49.00",
                "quantity": 1,
                "sku": "MUG-1",
                "title": "Mug",
            }
        ],
    }
    return order | fields


def github_push(**fields: Any) -> dict[str, Any]:
    """A `push` event's payload (deliver it with `event="push"`, GitHub's default here)."""
    before, after = secrets.token_hex(20), secrets.token_hex(20)
    repository = {
        "id": 100_000_000 + secrets.randbelow(900_000_000),
        "name": "shop",
        "full_name": "example/shop",
        "private": True,
        "default_branch": "main",
        "owner": {"login": "example", "type": "Organization"},
    }
    push = {
        "ref": "refs/heads/main",
        "before": before,
        "after": after,
        "created": False,
        "deleted": False,
        "forced": False,
        "compare": f"https://github.com/example/shop/compare/{before[:12]}...{after[:12]}",
        "commits": [
            {
                "id": after,
                "message": "Fix the receipt template",
                "timestamp": _iso(_now()),
                "author": {"name": "Ada", "email": "ada@example.com", "username": "ada"},
                "added": [],
                "removed": [],
                "modified": ["templates/receipt.html"],
            }
        ],
        "head_commit": {"id": after, "message": "Fix the receipt template"},
        "pusher": {"name": "ada", "email": "ada@example.com"},
        "repository": repository,
        "sender": {"login": "ada", "id": 1_000_001, "type": "User"},
    }
    return push | fields


def standard_event(event_type: str, data: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A Standard Webhooks payload: `type`, `timestamp` and `data` (the id is a header)."""
    return {"type": event_type, "timestamp": _iso(_now()), "data": data} | fields
