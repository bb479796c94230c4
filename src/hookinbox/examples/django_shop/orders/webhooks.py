"""The inbox of the shop: Stripe deliveries in, orders out, in Django's transactions."""

from __future__ import annotations

import os

from hookinbox import Event, HandlerContext
from hookinbox.django import DjangoInbox
from hookinbox.examples.django_shop.orders.models import Order
from hookinbox.sources import Stripe

inbox = DjangoInbox()
inbox.add_source(Stripe(secret=os.environ.get("STRIPE_WEBHOOK_SECRET", "whsec_local_trial")))


@inbox.handler("stripe", "checkout.session.completed")
def create_order(event: Event, ctx: HandlerContext) -> None:
    # This runs inside transaction.atomic(): the order commits with the event's processed
    # mark, or neither does and the event is retried.
    session = event.payload["data"]["object"]
    Order.objects.get_or_create(  # get_or_create: its own savepoint, safe to repeat
        payment_id=session["payment_intent"],
        defaults={
            "customer_id": session.get("customer") or "",
            "amount": session["amount_total"],
            "currency": session["currency"],
            "event_id": event.id,
        },
    )
