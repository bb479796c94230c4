"""An app whose handler holds its event: for tests that freeze a worker inside a handler.

The handler of `checkout.session.completed` runs inside the processing transaction, which has
claimed the event's row (PostgreSQL: a row lock; SQLite: the write lock). It writes its process
id to the file named by $HELD_MARKER, then sleeps $HELD_SECONDS (default 60): once the file
exists, a test may SIGSTOP the worker, and the event stays held until the test kills it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from hookinbox import Event, HandlerContext, Inbox
from hookinbox.sources import Stripe

STRIPE_SECRET = "whsec_test_held_app"
MARKER_ENV = "HELD_MARKER"


def build(database_url: str | None = None) -> Inbox:
    inbox = Inbox(database_url)
    inbox.add_source(Stripe(secret=STRIPE_SECRET))

    @inbox.handler("stripe", "checkout.session.completed")
    def hold(event: Event, ctx: HandlerContext) -> None:
        marker = os.environ.get(MARKER_ENV)
        if marker:
            Path(marker).write_text(str(os.getpid()))
        time.sleep(float(os.environ.get("HELD_SECONDS", "60")))

    return inbox


inbox = build()
