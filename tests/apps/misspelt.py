"""An app with a mistake 0.1 let through: a handler for a source it does not have ("strpe")."""

from __future__ import annotations

from hookinbox import Event, HandlerContext, Inbox
from hookinbox.sources import Stripe

inbox = Inbox(sources=[Stripe(secret="whsec_test_misspelt")])


@inbox.handler("strpe", "checkout.session.completed")
def on_typo(event: Event, ctx: HandlerContext) -> None:
    pass
