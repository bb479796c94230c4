"""Event payloads shaped like the providers' own: one generator for handlers' tests and the
simulator.

Each builder returns a plain dict (JSON-ready) with the fields a handler usually reads, in the
provider's layout, with made-up ids; keyword arguments replace any top-level field of the
object. Ids are random unless given, so two calls are two events; keep the dict to deliver the
same event again. The simulator (`hookinbox.simulate`) passes `rng`, a seeded `random.Random`,
and `now`, so that one seed and one clock give the same events byte for byte; without them,
ids come from the system's randomness and times from its clock.
"""

from __future__ import annotations

import random
import string
import time
import uuid
from datetime import UTC, datetime
from typing import Any

_ALPHABET = string.ascii_letters + string.digits
_SYSTEM = random.SystemRandom()


def token(length: int, rng: random.Random | None = None) -> str:
    """`length` letters and digits."""
    return "".join((rng or _SYSTEM).choices(_ALPHABET, k=length))


def uuid4(rng: random.Random | None = None) -> str:
    """A version 4 UUID drawn from `rng`."""
    return str(uuid.UUID(int=(rng or _SYSTEM).getrandbits(128), version=4))


def iso(epoch: float) -> str:
    """Unix seconds as ISO 8601 in UTC, to the second, with a `Z`."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _now(now: float | None) -> int:
    return int(time.time() if now is None else now)


# -- Stripe ---------------------------------------------------------------------------------------


def stripe_event(
    event_type: str,
    obj: dict[str, Any],
    *,
    id: str | None = None,
    created: int | None = None,
    previous_attributes: dict[str, Any] | None = None,
    rng: random.Random | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """A Stripe event envelope (`evt_...`) carrying `obj` as `data.object`."""
    data: dict[str, Any] = {"object": obj}
    if previous_attributes is not None:
        data["previous_attributes"] = previous_attributes
    return {
        "id": id or f"evt_1{token(23, rng)}",
        "object": "event",
        "api_version": "2024-06-20",
        "created": _now(now) if created is None else created,
        "data": data,
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": f"req_{token(14, rng)}", "idempotency_key": uuid4(rng)},
        "type": event_type,
    }


def stripe_checkout_session(
    *, rng: random.Random | None = None, now: float | None = None, **fields: Any
) -> dict[str, Any]:
    """A completed, paid Checkout Session (`cs_...`), as `checkout.session.completed` carries."""
    session = {
        "id": f"cs_test_{token(24, rng)}",
        "object": "checkout.session",
        "amount_subtotal": 1200,
        "amount_total": 1200,
        "currency": "eur",
        "customer": f"cus_{token(14, rng)}",
        "customer_email": "ada@example.com",
        "customer_details": {"email": "ada@example.com", "name": "Ada Lovelace"},
        "livemode": False,
        "mode": "payment",
        "payment_intent": f"pi_3{token(23, rng)}",
        "payment_status": "paid",
        "status": "complete",
        "subscription": None,
        "created": _now(now),
        "metadata": {},
    }
    return session | fields


def stripe_subscription(
    *, rng: random.Random | None = None, now: float | None = None, **fields: Any
) -> dict[str, Any]:
    """A subscription (`sub_...`), as `customer.subscription.*` events carry."""
    start = _now(now)
    subscription = {
        "id": f"sub_1{token(23, rng)}",
        "object": "subscription",
        "customer": f"cus_{token(14, rng)}",
        "status": "active",
        "cancel_at_period_end": False,
        "current_period_start": start,
        "current_period_end": start + 30 * 86400,
        "created": start,
        "currency": "eur",
        "items": {
            "object": "list",
            "data": [
                {
                    "id": f"si_{token(14, rng)}",
                    "object": "subscription_item",
                    "price": {"id": f"price_1{token(23, rng)}", "unit_amount": 900},
                    "quantity": 1,
                }
            ],
        },
        "latest_invoice": f"in_1{token(23, rng)}",
        "livemode": False,
        "metadata": {},
    }
    return subscription | fields


def stripe_invoice(
    *, rng: random.Random | None = None, now: float | None = None, **fields: Any
) -> dict[str, Any]:
    """A paid invoice (`in_...`), as `invoice.paid` and `invoice.payment_succeeded` carry."""
    invoice = {
        "id": f"in_1{token(23, rng)}",
        "object": "invoice",
        "amount_due": 900,
        "amount_paid": 900,
        "amount_remaining": 0,
        "billing_reason": "subscription_cycle",
        "currency": "eur",
        "customer": f"cus_{token(14, rng)}",
        "customer_email": "ada@example.com",
        "number": f"{token(8, rng).upper()}-0001",
        "paid": True,
        "payment_intent": f"pi_3{token(23, rng)}",
        "status": "paid",
        "subscription": f"sub_1{token(23, rng)}",
        "created": _now(now),
        "livemode": False,
    }
    return invoice | fields


# -- Square -------------------------------------------------------------------------------------


def rfc3339(when: datetime | float) -> str:
    """A datetime or Unix seconds as RFC 3339 in UTC with a `Z`, its fraction kept."""
    if not isinstance(when, datetime):
        when = datetime.fromtimestamp(when, UTC)
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def square_event(
    event_type: str,
    obj: dict[str, Any],
    *,
    id: str | None = None,
    created: datetime | float | None = None,
    rng: random.Random | None = None,
    now: float | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A Square event (`payment.updated` around a payment), as its webhook carries it and its
    Events API lists it: `obj` is `data.object`'s one entry, named by the type's first word."""
    kind = event_type.split(".", 1)[0]
    event = {
        "merchant_id": token(13, rng).upper(),
        "location_id": token(13, rng).upper(),
        "type": event_type,
        "event_id": id or uuid4(rng),
        "created_at": rfc3339(_now(now) if created is None else created),
        "data": {"type": kind, "id": obj.get("id", token(29, rng)), "object": {kind: obj}},
    }
    return event | fields


# -- Shopify, GitHub, Standard Webhooks -----------------------------------------------------------


def github_hook_delivery(
    id: int,
    *,
    at: datetime | float | None = None,
    guid: str | None = None,
    status_code: int = 200,
    event: str = "push",
    rng: random.Random | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """One attempt of a hook's delivery, as GitHub's deliveries API lists it (no body, no
    headers: those are in its detail). `id` orders the attempts (GitHub's grow with time);
    `guid` is the `X-GitHub-Delivery` the attempt carried; a `status_code` other than 2xx is a
    failed attempt, which reconcile asks GitHub to redeliver."""
    when = datetime.fromtimestamp(_now(now), UTC) if at is None else at
    if not isinstance(when, datetime):
        when = datetime.fromtimestamp(when, UTC)
    return {
        "id": id,
        "guid": guid or uuid4(rng),
        "delivered_at": when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "redelivery": False,
        "duration": 0.27,
        "status": "OK" if 200 <= status_code < 300 else f"Invalid HTTP Response: {status_code}",
        "status_code": status_code,
        "event": event,
        "action": None,
        "installation_id": None,
        "repository_id": 1296269,
        "throttled_at": None,
    }


def shopify_order(
    *, rng: random.Random | None = None, now: float | None = None, **fields: Any
) -> dict[str, Any]:
    """An order, as `orders/create` and `orders/paid` carry (the body is the order itself)."""
    rng = rng or _SYSTEM
    order_id = rng.randint(5 * 10**12, 6 * 10**12 - 1)
    created = iso(_now(now))
    order = {
        "id": order_id,
        "admin_graphql_api_id": f"gid://shopify/Order/{order_id}",
        "confirmation_number": token(9, rng).upper(),
        "created_at": created,
        "updated_at": created,
        "currency": "EUR",
        "email": "ada@example.com",
        "financial_status": "paid",
        "fulfillment_status": None,
        "name": f"#{rng.randint(1000, 9999)}",
        "order_number": rng.randint(1000, 9999),
        "subtotal_price": "49.00",
        "total_price": "49.00",
        "total_tax": "0.00",
        "customer": {"id": rng.randint(7 * 10**12, 8 * 10**12 - 1), "first_name": "Ada"},
        "line_items": [
            {
                "id": rng.randint(10**13, 2 * 10**13 - 1),
                "price": "49.00",
                "quantity": 1,
                "sku": "MUG-1",
                "title": "Mug",
            }
        ],
    }
    return order | fields


def github_push(
    *, rng: random.Random | None = None, now: float | None = None, **fields: Any
) -> dict[str, Any]:
    """A `push` event's payload (deliver it with `event="push"`, GitHub's default here)."""
    rng = rng or _SYSTEM
    before, after = f"{rng.getrandbits(160):040x}", f"{rng.getrandbits(160):040x}"
    repository = {
        "id": rng.randint(100_000_000, 999_999_999),
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
                "timestamp": iso(_now(now)),
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


def standard_event(
    event_type: str, data: dict[str, Any], *, now: float | None = None, **fields: Any
) -> dict[str, Any]:
    """A Standard Webhooks payload: `type`, `timestamp` and `data` (the id is a header)."""
    return {"type": event_type, "timestamp": iso(_now(now)), "data": data} | fields
