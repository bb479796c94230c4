"""The app that end-to-end tests serve in subprocesses: every built-in source, no handlers."""

from __future__ import annotations

from typing import Any

from hookinbox import Inbox
from hookinbox.sources import GitHub, Shopify, StandardWebhooks, Stripe

STRIPE_SECRET = "whsec_test_basic_app"
SHOPIFY_SECRET = "shopify-test-secret"
GITHUB_SECRET = "github-test-secret"
STANDARD_SECRET = "whsec_dGVzdC1zdGFuZGFyZC13ZWJob29rcy1zZWNyZXQ="


def build(database_url: str | None = None, **settings: Any) -> Inbox:
    inbox = Inbox(database_url, **settings)
    inbox.add_source(Stripe(secret=STRIPE_SECRET))
    inbox.add_source(Shopify(secret=SHOPIFY_SECRET))
    inbox.add_source(GitHub(secret=GITHUB_SECRET))
    inbox.add_source(StandardWebhooks(secret=STANDARD_SECRET))
    return inbox


inbox = build()
