"""An app whose handler books a shipment through the outbox to RabbitMQ: for relay processes.

RABBIT_URL and RABBIT_QUEUE name the broker and the queue (on the default exchange). With
RABBIT_HOLD_KEY and RABBIT_HOLD_FILE, the relay that publishes that key (confirmed) creates the
file and then hangs before returning, so the outbox's commit has not happened: a test kills it
there. Only once: a relay started after the file exists does not hang.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from hookinbox import Event, HandlerContext, Inbox, RetryPolicy
from hookinbox._model import Message
from hookinbox.outbox import RabbitMQDestination
from hookinbox.sources import Stripe

STRIPE_SECRET = "whsec_test_rabbit_shipping_app"


@dataclass
class HeldRabbitMQ(RabbitMQDestination):
    hold_key: str = ""
    hold_file: str = ""

    def deliver(self, message: Message) -> None:
        super().deliver(message)
        if message.key == self.hold_key and self.hold_file and not os.path.exists(self.hold_file):
            with open(self.hold_file, "w") as marker:
                marker.write(str(os.getpid()))
            time.sleep(120)  # published and confirmed, not yet recorded: the test kills us here


def build(database_url: str | None = None) -> Inbox:
    inbox = Inbox(
        database_url,
        outbox_retry=RetryPolicy(max_attempts=100, first_delay=0.05, factor=2, max_delay=0.5),
    )
    inbox.add_source(Stripe(secret=STRIPE_SECRET))
    inbox.add_destination(
        HeldRabbitMQ(
            "shipping",
            url=os.environ.get("RABBIT_URL", "amqp://guest:guest@127.0.0.1:5672/"),
            routing_key=os.environ.get("RABBIT_QUEUE", "shipping"),
            timeout=2,
            hold_key=os.environ.get("RABBIT_HOLD_KEY", ""),
            hold_file=os.environ.get("RABBIT_HOLD_FILE", ""),
        )
    )

    @inbox.handler("stripe", "checkout.session.completed")
    def book_shipment(event: Event, ctx: HandlerContext) -> None:
        session = event.payload["data"]["object"]
        ctx.outbox.send("shipping", {"order": session["payment_intent"]})

    return inbox


inbox = build()
