"""The app the security tests serve (tests/reliability: signature edges, admin surfaces, leaks,
metric labels).

Its Stripe secret comes from $GUARDED_STRIPE_SECRET, so a test can put a marker of its own in
it and look for that marker everywhere the server writes; server and worker processes inherit
the variable.

Sources: `stripe`; `stripe-tight`, the same secret with a tolerance of 30 s instead of 300;
`standard` (Standard Webhooks); `paddle`.

Handlers, and so the event types with a metric label of their own (every other type is
`other`): stripe `checkout.session.completed` and `invoice.paid` succeed; stripe
`charge.failed` fails the way a buggy handler does, with the body's card number as the
parameter of a statement that names another one (SQLAlchemy's error quotes the parameters it
was given, unless the engine hides them); standard `order.created` succeeds; paddle has one
handler for any type (`*`), which gives no type a label. One attempt per event: a failure is
final at once.

`mounted()` is `hookinbox serve`'s app (webhooks, probes, the dashboard at /admin) mounted at
/hooks inside another Starlette app, for `uvicorn --factory`; the token comes from
$HOOKINBOX_ADMIN_TOKEN, the database from $HOOKINBOX_DATABASE_URL.
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp

from hookinbox import Event, HandlerContext, Inbox, RetryPolicy
from hookinbox.dashboard import dashboard_app
from hookinbox.dashboard._token import ADMIN_TOKEN_ENV
from hookinbox.http._app import create_app
from hookinbox.sources import Paddle, StandardWebhooks, Stripe

SECRET_ENV = "GUARDED_STRIPE_SECRET"
STRIPE_SECRET = os.environ.get(SECRET_ENV) or "whsec_guarded_app_default"
STANDARD_SECRET = "whsec_Z3VhcmRlZC1hcHAtc3RhbmRhcmQtd2ViaG9va3M="
PADDLE_SECRET = "pdl_ntfset_guarded_app"
TIGHT_TOLERANCE = 30.0

HANDLED_TYPES = {
    "stripe": {"checkout.session.completed", "invoice.paid", "charge.failed"},
    "stripe-tight": set(),
    "standard": {"order.created"},
    "paddle": set(),  # its handler takes any type: no type of its own
}


def build(database_url: str | None = None) -> Inbox:
    inbox = Inbox(database_url, retry=RetryPolicy(max_attempts=1))
    inbox.add_source(Stripe(secret=STRIPE_SECRET))
    inbox.add_source(Stripe(secret=STRIPE_SECRET, name="stripe-tight", tolerance=TIGHT_TOLERANCE))
    inbox.add_source(StandardWebhooks(secret=STANDARD_SECRET))
    inbox.add_source(Paddle(secret=PADDLE_SECRET))

    @inbox.handler("stripe", "checkout.session.completed")
    @inbox.handler("stripe", "invoice.paid")
    @inbox.handler("standard", "order.created")
    @inbox.handler("paddle")
    def accept(event: Event, ctx: HandlerContext) -> None:
        ctx.db.execute(sa.text("SELECT 1"))

    @inbox.handler("stripe", "charge.failed")
    def record_failed_charge(event: Event, ctx: HandlerContext) -> None:
        card = event.payload["data"]["object"]["card_number"]
        # The bug under test: the statement names :number, the call passes card=.
        ctx.db.execute(sa.text("SELECT :number"), {"card": card})

    return inbox


inbox = build()

MOUNT = "/hooks"


def mounted() -> ASGIApp:
    dashboard = dashboard_app(
        inbox.store, os.environ[ADMIN_TOKEN_ENV], sources=sorted(inbox.sources)
    )
    return Starlette(routes=[Mount(MOUNT, app=create_app(inbox._receiver, admin=dashboard))])
