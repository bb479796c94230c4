"""Realistic events per provider, as bodies ready to sign: generated once, before any send.

The payloads are the test kit's (`hookinbox.testing`'s `stripe_event`, `shopify_order`,
`github_push`, `standard_event`: one generator for handlers' tests and the simulator). Every
draw comes from the caller's seeded `random.Random` and every time from the caller's `now`,
so one seed and one clock give byte-identical bodies. Bodies are serialised the way each provider
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hookinbox.simulate._providers import ProviderName
from hookinbox.testing._events import (
    github_push,
    shopify_order,
    standard_event,
    stripe_checkout_session,
    stripe_event,
    stripe_subscription,
    token,
    uuid4,
)

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


def _json_headers(user_agent: str) -> tuple[tuple[str, str], ...]:
    return (("content-type", "application/json; charset=utf-8"), ("user-agent", user_agent))


# -- Stripe -------------------------------------------------------------------------------------

STRIPE_HEADERS = _json_headers("Stripe/1.0 (+https://stripe.com/docs/webhooks)")


def _stripe_event(
    rng: random.Random, event_type: str, created: int, obj: dict[str, Any], **extra: Any
) -> tuple[str, bytes]:
    envelope = stripe_event(event_type, obj, created=created, rng=rng, **extra)
    return envelope["id"], json.dumps(envelope, indent=2).encode()  # Stripe pretty-prints


def stripe_chain(rng: random.Random, chain: int, now: float) -> list[GeneratedEvent]:
    """One customer's events, in the order Stripe creates them."""
    created = int(now) - rng.randint(0, 120)
    customer = f"cus_{token(14, rng)}"
    subscribes = rng.random() < SUBSCRIPTION_SHARE
    subscription = f"sub_1{token(23, rng)}" if subscribes else None
    amount = rng.choice((900, 1200, 2500, 4900, 9900, 19900))
    name = rng.choice(FIRST_NAMES)
    email = f"{name.lower()}.{customer[4:10].lower()}@example.com"
    session = stripe_checkout_session(
        rng=rng,
        now=created - rng.randint(30, 600),
        amount_subtotal=amount,
        amount_total=amount,
        currency=rng.choice(CURRENCIES),
        customer=customer,
        customer_details={"email": email, "name": name},
        customer_email=email,
        mode="subscription" if subscribes else "payment",
        subscription=subscription,
    )
    payment = session["payment_intent"]
    event_id, body = _stripe_event(rng, CHECKOUT, created, session)
    events = [
        GeneratedEvent(event_id, event_id, CHECKOUT, body, STRIPE_HEADERS, payment, chain=chain)
    ]
    if subscription is None:
        return events
    status = "incomplete"
    items: Any = None
    for number in range(1 + rng.randint(1, 3)):
        event_type = SUBSCRIPTION_CREATED if number == 0 else SUBSCRIPTION_UPDATED
        created += rng.randint(1, 5)  # strictly later: the last update is well defined
        previous = status
        if number > 0:
            status = rng.choice([s for s in STATUSES if s != previous])
        obj = stripe_subscription(
            rng=rng,
            now=created,
            id=subscription,
            customer=customer,
            status=status,
            cancel_at_period_end=status == "canceled",
        )
        items = obj["items"] = items or obj["items"]  # one price for the whole chain
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
    event_id = uuid4(rng)
    name = rng.choice(FIRST_NAMES)
    order = shopify_order(
        rng=rng, now=now - rng.randint(0, 120), email=f"{name.lower()}@example.com"
    )
    topic = "orders/create"
    headers = (
        *_json_headers("Shopify-Captain-Hook"),
        ("x-shopify-topic", topic),
        ("x-shopify-shop-domain", SHOP_DOMAIN),
        ("x-shopify-api-version", "2024-07"),
        ("x-shopify-webhook-id", uuid4(rng)),
        ("x-shopify-event-id", event_id),
        ("x-shopify-triggered-at", order["created_at"]),
    )
    body = json.dumps(order, separators=(",", ":")).encode()
    return GeneratedEvent(event_id, f"{topic}:{event_id}", topic, body, headers, event_id)


# -- GitHub -------------------------------------------------------------------------------------


def github_event(rng: random.Random, now: float) -> GeneratedEvent:
    delivery = uuid4(rng)
    kind = rng.choice(("issues", "push", "pull_request"))
    payload: dict[str, Any] = github_push(rng=rng, now=now)
    if kind != "push":  # the push's repository and sender, around an issue or a pull request
        number = rng.randint(1, 5000)
        thing = "issue" if kind == "issues" else "pull_request"
        payload = {
            "action": rng.choice(("opened", "closed", "edited")),
            thing: {"number": number, "title": f"Simulated {thing} {number}", "state": "open"},
            "repository": payload["repository"],
            "sender": payload["sender"],
        }
    headers = (
        *_json_headers(f"GitHub-Hookshot/{token(7, rng).lower()}"),
        ("x-github-event", kind),
        ("x-github-delivery", delivery),
        ("x-github-hook-id", "471198234"),
        ("x-github-hook-installation-target-id", str(payload["repository"]["id"])),
        ("x-github-hook-installation-target-type", "repository"),
    )
    body = json.dumps(payload, separators=(",", ":")).encode()
    return GeneratedEvent(delivery, delivery, kind, body, headers, delivery)


# -- Standard Webhooks ---------------------------------------------------------------------------


def standard_webhooks_event(rng: random.Random, now: float) -> GeneratedEvent:
    message_id = f"msg_{token(27, rng)}"
    event_type = rng.choice(("invoice.paid", "user.created", "subscription.renewed"))
    data = {
        "id": f"{event_type.split('.')[0]}_{token(16, rng)}",
        "amount": rng.randint(100, 100_000),
        "customer": {"email": f"{rng.choice(FIRST_NAMES).lower()}@example.com"},
    }
    payload = standard_event(event_type, data, now=now - rng.randint(0, 120))
    headers = (*_json_headers("Svix-Webhooks/1.44"), ("webhook-id", message_id))
    body = json.dumps(payload, separators=(",", ":")).encode()
    return GeneratedEvent(message_id, message_id, event_type, body, headers, message_id)


SingleEvent = Callable[[random.Random, float], GeneratedEvent]
SINGLE: dict[ProviderName, SingleEvent] = {
    "stripe": lambda rng, now: stripe_chain(rng, 0, now)[0],  # a lone checkout
    "shopify": shopify_event,
    "github": github_event,
    "standard": standard_webhooks_event,
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
