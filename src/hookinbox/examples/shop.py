"""A small shop receiving Stripe, Shopify, GitHub and Standard Webhooks deliveries.

Run it with `hookinbox serve hookinbox.examples.shop:inbox`. Secrets come from the
environment; the defaults are for local trials only and are printed nowhere.
"""

from __future__ import annotations

import logging
import os

from hookinbox import Event, Inbox
from hookinbox.sources import GitHub, Shopify, StandardWebhooks, Stripe

log = logging.getLogger("hookinbox.examples.shop")

inbox = Inbox(os.environ.get("SHOP_DATABASE_URL", "sqlite:///hookinbox-shop.db"))
inbox.add_source(Stripe(secret=os.environ.get("STRIPE_WEBHOOK_SECRET", "whsec_local_trial")))
inbox.add_source(Shopify(secret=os.environ.get("SHOPIFY_CLIENT_SECRET", "shopify-local-trial")))
inbox.add_source(GitHub(secret=os.environ.get("GITHUB_WEBHOOK_SECRET", "github-local-trial")))
inbox.add_source(
    StandardWebhooks(
        secret=os.environ.get("STANDARD_WEBHOOK_SECRET", "whsec_bG9jYWwtdHJpYWwtc2VjcmV0")
    )
)


@inbox.handler("stripe", "checkout.session.completed")
def on_checkout_completed(event: Event, ctx: object) -> None:
    log.info("checkout completed: %s", event.payload["data"]["object"].get("id"))
