"""Stripe beside a batched source (HubSpot), for the tests of batches on the shared writer.

HubSpot's events whose `note` is "slow" hold their row in the worker for BATCHES_HANDLER_SLEEP
seconds (default 0): the claim's row lock, as any slow handler holds it, until it commits.
"""

from __future__ import annotations

import os
import time

from hookinbox import Event, HandlerContext, Inbox
from hookinbox.sources import HubSpot, Stripe

STRIPE_SECRET = "whsec_test_batches_app"
HUBSPOT_SECRET = "hubspot-test-batches"
HUBSPOT_URL = "https://hooks.example.com/webhooks/hubspot"

inbox = Inbox()
inbox.add_source(Stripe(secret=STRIPE_SECRET))
inbox.add_source(HubSpot(secret=HUBSPOT_SECRET, url=HUBSPOT_URL))


@inbox.handler("hubspot")
def on_contact(event: Event, ctx: HandlerContext) -> None:
    if event.payload.get("note") == "slow":
        time.sleep(float(os.environ.get("BATCHES_HANDLER_SLEEP", "0")))
