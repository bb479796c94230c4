"""An app whose handler holds its event: for tests that freeze a worker inside a handler.

The handler of `checkout.session.completed` runs inside the processing transaction, which has
claimed the event's row (PostgreSQL: a row lock; SQLite: the write lock). It writes the body
it read to the file named by $HELD_BODY (if set), then its process id to the file named by
$HELD_MARKER, then sleeps $HELD_SECONDS (default 60): once the marker exists, a test may
SIGSTOP the worker, and the event stays held until the test kills it. With $HELD_UNTIL (a
file's path) it returns as soon as that file exists instead (at most $HELD_SECONDS): the test
decides when the attempt ends.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from hookinbox import Event, HandlerContext, Inbox, Reply
from hookinbox.sources import Stripe
from tests.support.signing import stripe_delivery, stripe_event

STRIPE_SECRET = "whsec_test_held_app"
MARKER_ENV = "HELD_MARKER"
UNTIL_ENV = "HELD_UNTIL"
BODY_ENV = "HELD_BODY"


def build(database_url: str | None = None) -> Inbox:
    inbox = Inbox(database_url)
    inbox.add_source(Stripe(secret=STRIPE_SECRET))

    @inbox.handler("stripe", "checkout.session.completed")
    def hold(event: Event, ctx: HandlerContext) -> None:
        if body_file := os.environ.get(BODY_ENV):
            Path(body_file).write_bytes(event.body)
        marker = os.environ.get(MARKER_ENV)
        if marker:
            Path(marker).write_text(str(os.getpid()))
        deadline = time.monotonic() + float(os.environ.get("HELD_SECONDS", "60"))
        until = os.environ.get(UNTIL_ENV)
        while time.monotonic() < deadline and not (until and Path(until).exists()):
            time.sleep(0.02)

    return inbox


def deliver(database_url: str, event_id: str, **data: object) -> Reply:
    """One signed delivery of a `checkout.session.completed` event (`data` in its object)."""
    inbox = build(database_url)
    try:
        headers, body = stripe_delivery(stripe_event(event_id, **data), STRIPE_SECRET)
        return inbox.receive("stripe", headers, body)
    finally:
        inbox.close()


inbox = build()
