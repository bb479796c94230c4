"""An app whose handler publishes to JetStream through the outbox: for relay fault tests in
subprocesses.

NATS_URL and NATS_SUBJECT name the server and the subject. KILL_AFTER_PUBLISH=1: the relay
SIGKILLs itself right after a publish was acked by the stream, before the outbox records it, so
the kill lands in that gap every time.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

from hookinbox import Event, HandlerContext, Inbox, RetryPolicy
from hookinbox._model import Message
from hookinbox.outbox import JetStreamDestination
from hookinbox.sources import Stripe

STRIPE_SECRET = "whsec_test_jetstream_app"


@dataclass
class KilledAfterPublish:
    """The destination, then SIGKILL: the PubAck came back, the outbox's commit never does."""

    inner: JetStreamDestination

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def retry(self) -> RetryPolicy | None:
        return self.inner.retry

    def deliver(self, message: Message) -> None:
        self.inner.deliver(message)
        os.kill(os.getpid(), signal.SIGKILL)


def build(database_url: str | None = None) -> Inbox:
    inbox = Inbox(
        database_url,
        outbox_retry=RetryPolicy(max_attempts=100, first_delay=0.05, factor=2, max_delay=1.0),
    )
    inbox.add_source(Stripe(secret=STRIPE_SECRET))
    destination = JetStreamDestination(
        "stream",
        url=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"),
        subject=os.environ.get("NATS_SUBJECT", "hookinbox.unset"),
        timeout=2,
    )
    if os.environ.get("KILL_AFTER_PUBLISH") == "1":
        inbox.add_destination(KilledAfterPublish(destination))
    else:
        inbox.add_destination(destination)

    @inbox.handler("stripe", "checkout.session.completed")
    def publish_order(event: Event, ctx: HandlerContext) -> None:
        session = event.payload["data"]["object"]
        ctx.outbox.send("stream", {"order": session["payment_intent"]})

    return inbox


inbox = build()
