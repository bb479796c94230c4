"""Realistic events per provider, as bodies ready to sign: generated once, before any send.

Everything is drawn from the caller's seeded `random.Random` and the caller's `now`, so one
seed and one clock give byte-identical bodies. Bodies are serialised the way each provider
serialises them (Stripe pretty-prints), which also checks that a receiver verifies the bytes
it received rather than a re-serialised copy.

Stripe events come in per-customer chains: `checkout.session.completed`, and for a share of
customers `customer.subscription.created` then one to three `customer.subscription.updated`,
each `created` strictly later than the one before, so that "the last update by `created`" is
well defined even when deliveries are reordered.
"""

from __future__ import annotations

import json
import random
import string
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hookinbox.simulate._providers import ProviderName

ALPHANUMERIC = string.ascii_letters + string.digits
CHECKOUT = "checkout.session.completed"
SUBSCRIPTION_CREATED = "customer.subscription.created"
SUBSCRIPTION_UPDATED = "customer.subscription.updated"
SUBSCRIPTION_SHARE = 0.4
"""Share of Stripe customers who subscribe (the rest pay once)."""
STATUSES = ("active", "past_due", "unpaid", "canceled", "paused")
CURRENCIES = ("eur", "usd", "gbp", "try", "chf")
FIRST_NAMES = ("Ayse", "Mehmet", "Lena", "Jonas", "Maria", "Omar", "Chen", "Ana", "Luca")
SHOP_DOMAIN = "hookinbox-simulated.myshopify.com"


@dataclass(frozen=True, slots=True)
class GeneratedEvent:
    """One event as the provider would send it, minus the signature."""

    event_id: str
    """The provider's own id: `evt_...`, `X-Shopify-Event-Id`, `X-GitHub-Delivery`, `webhook-id`."""
    stored_key: str
    """The idempotency key hookinbox stores it under (Shopify scopes it by topic)."""
    event_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...]
    """Headers other than the signature, identical on every delivery of the event."""
    effect: str | None
    """The business effect this event creates: a checkout's payment intent (Stripe), the
    event id (other providers); None for events that only change state."""
    state_of: str | None = None
    """Stripe subscription events: the effect (payment intent) whose state they set..."""
    state: str | None = None
    """...the subscription status they set..."""
    position: int = 0
    """...and their `created`, which decides which update is the last one."""
    chain: int = 0
    """The customer (Stripe) this event belongs to; events of other providers stand alone."""


def _token(rng: random.Random, length: int) -> str:
    return "".join(rng.choices(ALPHANUMERIC, k=length))


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _json_headers(user_agent: str) -> tuple[tuple[str, str], ...]:
    return (("content-type", "application/json; charset=utf-8"), ("user-agent", user_agent))


# -- Stripe -------------------------------------------------------------------------------------

STRIPE_HEADERS = _json_headers("Stripe/1.0 (+https://stripe.com/docs/webhooks)")


def _stripe_event(
    rng: random.Random, event_type: str, created: int, obj: dict[str, Any], **extra: Any
) -> tuple[str, bytes]:
    event_id = f"evt_1{_token(rng, 23)}"
    envelope = {
        "id": event_id,
        "object": "event",
        "api_version": "2024-06-20",
        "created": created,
        "data": {"object": obj, **extra},
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": f"req_{_token(rng, 14)}", "idempotency_key": _uuid(rng)},
        "type": event_type,
    }
    return event_id, json.dumps(envelope, indent=2).encode()  # Stripe pretty-prints


def stripe_chain(rng: random.Random, chain: int, now: float) -> list[GeneratedEvent]:
    """One customer's events, in the order Stripe creates them."""
    created = int(now) - rng.randint(0, 120)
    customer = f"cus_{_token(rng, 14)}"
    payment = f"pi_3{_token(rng, 23)}"
    subscribes = rng.random() < SUBSCRIPTION_SHARE
    subscription = f"sub_1{_token(rng, 23)}" if subscribes else None
    amount = rng.choice((900, 1200, 2500, 4900, 9900, 19900))
    currency = rng.choice(CURRENCIES)
    name = rng.choice(FIRST_NAMES)
    email = f"{name.lower()}.{customer[4:10].lower()}@example.com"
    session = {
        "id": f"cs_test_a1{_token(rng, 56)}",
        "object": "checkout.session",
        "amount_subtotal": amount,
        "amount_total": amount,
        "created": created - rng.randint(30, 600),
        "currency": currency,
        "customer": customer,
        "customer_details": {"email": email, "name": name},
        "customer_email": email,
        "livemode": False,
        "metadata": {},
        "mode": "subscription" if subscribes else "payment",
        "payment_intent": payment,
        "payment_status": "paid",
        "status": "complete",
        "subscription": subscription,
    }
    event_id, body = _stripe_event(rng, CHECKOUT, created, session)
    events = [
        GeneratedEvent(event_id, event_id, CHECKOUT, body, STRIPE_HEADERS, payment, chain=chain)
    ]
    if subscription is None:
        return events
    status = "incomplete"
    item = {"id": f"si_{_token(rng, 14)}", "price": {"id": f"price_{_token(rng, 24)}"}}
    for number in range(1 + rng.randint(1, 3)):
        event_type = SUBSCRIPTION_CREATED if number == 0 else SUBSCRIPTION_UPDATED
        created += rng.randint(1, 5)  # strictly later: the last update is well defined
        previous = status
        if number > 0:
            status = rng.choice([s for s in STATUSES if s != previous])
        obj = {
            "id": subscription,
            "object": "subscription",
            "cancel_at_period_end": status == "canceled",
            "current_period_start": created,
            "current_period_end": created + 30 * 86400,
            "customer": customer,
            "items": {"object": "list", "data": [item]},
            "latest_invoice": f"in_1{_token(rng, 23)}",
            "status": status,
        }
        extra = {"previous_attributes": {"status": previous}} if number > 0 else {}
        event_id, body = _stripe_event(rng, event_type, created, obj, **extra)
        events.append(
            GeneratedEvent(
                event_id,
                event_id,
                event_type,
                body,
                STRIPE_HEADERS,
                None,
                state_of=payment if number > 0 else None,
                state=status if number > 0 else None,
                position=created,
                chain=chain,
            )
        )
    return events


def stripe_stream(rng: random.Random, count: int, now: float) -> list[GeneratedEvent]:
    """`count` events of interleaved chains; a chain's later events come later in the stream.

    A chain starting at stream position c places its next events 1-30 positions apart, as
    customers act concurrently. The last chain is cut to `count` (its later updates dropped).
    """
    placed: list[tuple[float, GeneratedEvent]] = []
    chain = 0
    while len(placed) < count:
        position = float(chain)
        for event in stripe_chain(rng, chain, now):
            placed.append((position, event))
            position += rng.uniform(1, 30)
        chain += 1
    placed = placed[:count]  # chains are appended whole, so the cut only trims the last one
    placed.sort(key=lambda item: item[0])
    return [event for _, event in placed]


# -- Shopify ------------------------------------------------------------------------------------


def shopify_event(rng: random.Random, now: float) -> GeneratedEvent:
    event_id = _uuid(rng)
    order_id = rng.randint(5_000_000_000_000, 5_999_999_999_999)
    created = _iso(now - rng.randint(0, 120))
    price = f"{rng.choice((19, 29, 49, 99, 149))}.00"
    name = rng.choice(FIRST_NAMES)
    order = {
        "id": order_id,
        "admin_graphql_api_id": f"gid://shopify/Order/{order_id}",
        "confirmation_number": _token(rng, 9).upper(),
        "created_at": created,
        "currency": "EUR",
        "email": f"{name.lower()}@example.com",
        "financial_status": "paid",
        "name": f"#{rng.randint(1000, 99999)}",
        "order_number": rng.randint(1000, 99999),
        "total_price": price,
        "customer": {"id": rng.randint(7_000_000_000_000, 7_999_999_999_999), "first_name": name},
        "line_items": [
            {
                "id": rng.randint(10_000_000_000_000, 19_999_999_999_999),
                "price": price,
                "quantity": 1,
                "sku": f"SKU-{rng.randint(100, 999)}",
                "title": rng.choice(("Mug", "T-shirt", "Poster", "Notebook")),
            }
        ],
    }
    topic = "orders/create"
    headers = (
        *_json_headers("Shopify-Captain-Hook"),
        ("x-shopify-topic", topic),
        ("x-shopify-shop-domain", SHOP_DOMAIN),
        ("x-shopify-api-version", "2024-07"),
        ("x-shopify-webhook-id", _uuid(rng)),
        ("x-shopify-event-id", event_id),
        ("x-shopify-triggered-at", created),
    )
    body = json.dumps(order, separators=(",", ":")).encode()
    return GeneratedEvent(event_id, f"{topic}:{event_id}", topic, body, headers, event_id)


# -- GitHub -------------------------------------------------------------------------------------


def github_event(rng: random.Random, now: float) -> GeneratedEvent:
    delivery = _uuid(rng)
    repository = {
        "id": rng.randint(100_000_000, 999_999_999),
        "name": "shop",
        "full_name": "hookinbox-simulated/shop",
        "private": True,
        "owner": {"login": "hookinbox-simulated", "type": "Organization"},
    }
    sender = {"login": rng.choice(FIRST_NAMES).lower(), "id": rng.randint(1000, 9_999_999)}
    kind = rng.choice(("issues", "push", "pull_request"))
    payload: dict[str, Any]
    if kind == "push":
        payload = {
            "ref": "refs/heads/main",
            "before": f"{rng.getrandbits(160):040x}",
            "after": f"{rng.getrandbits(160):040x}",
            "pusher": {"name": sender["login"]},
        }
    else:
        number = rng.randint(1, 5000)
        thing = "issue" if kind == "issues" else "pull_request"
        payload = {
            "action": rng.choice(("opened", "closed", "edited")),
            thing: {"number": number, "title": f"Simulated {thing} {number}", "state": "open"},
        }
    payload |= {"repository": repository, "sender": sender}
    headers = (
        *_json_headers(f"GitHub-Hookshot/{_token(rng, 7).lower()}"),
        ("x-github-event", kind),
        ("x-github-delivery", delivery),
        ("x-github-hook-id", "471198234"),
        ("x-github-hook-installation-target-id", str(repository["id"])),
        ("x-github-hook-installation-target-type", "repository"),
    )
    body = json.dumps(payload, separators=(",", ":")).encode()
    return GeneratedEvent(delivery, delivery, kind, body, headers, delivery)


# -- Standard Webhooks ---------------------------------------------------------------------------


def standard_event(rng: random.Random, now: float) -> GeneratedEvent:
    message_id = f"msg_{_token(rng, 27)}"
    event_type = rng.choice(("invoice.paid", "user.created", "subscription.renewed"))
    payload = {
        "type": event_type,
        "timestamp": _iso(now - rng.randint(0, 120)),
        "data": {
            "id": f"{event_type.split('.')[0]}_{_token(rng, 16)}",
            "amount": rng.randint(100, 100_000),
            "customer": {"email": f"{rng.choice(FIRST_NAMES).lower()}@example.com"},
        },
    }
    headers = (*_json_headers("Svix-Webhooks/1.44"), ("webhook-id", message_id))
    body = json.dumps(payload, separators=(",", ":")).encode()
    return GeneratedEvent(message_id, message_id, event_type, body, headers, message_id)


SingleEvent = Callable[[random.Random, float], GeneratedEvent]
SINGLE: dict[ProviderName, SingleEvent] = {
    "stripe": lambda rng, now: stripe_chain(rng, 0, now)[0],  # a lone checkout
    "shopify": shopify_event,
    "github": github_event,
    "standard": standard_event,
}


def stream(
    provider: ProviderName, rng: random.Random, count: int, now: float
) -> list[GeneratedEvent]:
    """`count` valid events in the order the provider creates them."""
    if provider == "stripe":
        return stripe_stream(rng, count, now)
    return [SINGLE[provider](rng, now) for _ in range(count)]


def loose_events(
    provider: ProviderName, rng: random.Random, count: int, now: float
) -> Iterator[GeneratedEvent]:
    """Stand-alone events for forged, expired and malformed deliveries.

    They are fresh events, never copies of the valid ones, so that a receiver that wrongly
    accepts one leaves a trace (a row, an order) the verification can find and name.
    """
    for _ in range(count):
        yield SINGLE[provider](rng, now)
