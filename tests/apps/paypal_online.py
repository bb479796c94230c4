"""An app with PayPal verified online, against the PayPal imitation at $PAYPAL_API_URL.

For tests/reliability/test_paypal_online_pool.py: two webhook ids (one for the live endpoint,
one left from a previous one), and a Stripe source beside it for deliveries that never ask
PayPal anything.
"""

from __future__ import annotations

import os

from hookinbox import Inbox
from hookinbox.sources import PayPal, PayPalAPI, Stripe
from tests.support import paypal

STRIPE_SECRET = "whsec_paypal_online_app"
WEBHOOK_IDS = (paypal.WEBHOOK_ID, "8PT597110X687430LKGECATA")

inbox = Inbox()
inbox.add_source(
    PayPal(
        webhook_id=list(WEBHOOK_IDS),
        online=PayPalAPI(
            client_id=paypal.PayPalImitation.client_id,
            client_secret=paypal.PayPalImitation.client_secret,
            base_url=os.environ.get("PAYPAL_API_URL", "http://127.0.0.1:9"),
            timeout=30,
        ),
    )
)
inbox.add_source(Stripe(secret=STRIPE_SECRET))
