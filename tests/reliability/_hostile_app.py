"""The app the hostile-input tests serve: the basic app's sources, with a body timeout the test
sets through HOSTILE_BODY_TIMEOUT (seconds, default 10), so that slow clients are cut off
within a test's patience."""

from __future__ import annotations

import os

from hookinbox import Inbox
from hookinbox.sources import GitHub, Shopify, StandardWebhooks, Stripe
from tests.apps.basic import GITHUB_SECRET, SHOPIFY_SECRET, STANDARD_SECRET, STRIPE_SECRET

APP = "tests.reliability._hostile_app:inbox"
BODY_TIMEOUT_ENV = "HOSTILE_BODY_TIMEOUT"


def build(database_url: str | None = None) -> Inbox:
    inbox = Inbox(database_url, body_timeout=float(os.environ.get(BODY_TIMEOUT_ENV, "10")))
    inbox.add_source(Stripe(secret=STRIPE_SECRET))
    inbox.add_source(Shopify(secret=SHOPIFY_SECRET))
    inbox.add_source(GitHub(secret=GITHUB_SECRET))
    inbox.add_source(StandardWebhooks(secret=STANDARD_SECRET))
    return inbox


inbox = build()
