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

from hookinbox import Inbox, RetryPolicy
from hookinbox._model import Message
from hookinbox.outbox import JetStreamDestination
from tests.apps import shipping

STRIPE_SECRET = shipping.STRIPE_SECRET


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
    """The shipping app (tests/apps/shipping.py), its "shipping" messages published to JetStream."""
    destination = JetStreamDestination(
        "shipping",
        url=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"),
        subject=os.environ.get("NATS_SUBJECT", "hookinbox.unset"),
        timeout=2,
    )
    if os.environ.get("KILL_AFTER_PUBLISH") == "1":
        return shipping.build(database_url, destination=KilledAfterPublish(destination))
    return shipping.build(database_url, destination=destination)


inbox = build()
