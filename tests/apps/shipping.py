"""An app whose handler books a shipment through the outbox: for relay tests in subprocesses.

OUTBOX_TARGET is the receiver's URL; SHIPPING_MAX_ATTEMPTS bounds the relay's retries.
"""

from __future__ import annotations

import os

from hookinbox import Event, HandlerContext, Inbox, RetryPolicy
from hookinbox.outbox import Destination, HTTPDestination
from hookinbox.sources import Stripe

STRIPE_SECRET = "whsec_test_shipping_app"


def build(
    database_url: str | None = None,
    target: str | None = None,
    destination: Destination | None = None,
) -> Inbox:
    """`destination`: where "shipping" messages go, instead of HTTP to `target`."""
    attempts = int(os.environ.get("SHIPPING_MAX_ATTEMPTS", "50"))
    inbox = Inbox(
        database_url,
        outbox_retry=RetryPolicy(max_attempts=attempts, first_delay=0.05, factor=2, max_delay=1.0),
    )
    inbox.add_source(Stripe(secret=STRIPE_SECRET))
    inbox.add_destination(
        destination
        or HTTPDestination("shipping", url=target or os.environ.get("OUTBOX_TARGET", ""), timeout=1)
    )

    @inbox.handler("stripe", "checkout.session.completed")
    def book_shipment(event: Event, ctx: HandlerContext) -> None:
        session = event.payload["data"]["object"]
        ctx.outbox.send("shipping", {"order": session["payment_intent"]})

    return inbox


inbox = build()
