"""An app whose handlers and destination repeat what the body says (issue 19, item 2).

A delivery's `note` may be any string JSON can carry, a lone surrogate or a NUL among them.
Stripe `note.failed` raises it as the handler's error; `note.sent` sends it through the
outbox to `echo`, a destination that answers with it as its error (as a remote API quoting
the request would). One attempt each: the first failure is final, so the error is recorded
at once. `note.ok` succeeds (the event page of a body with such a note).
"""

from __future__ import annotations

from hookinbox import Event, HandlerContext, Inbox, Message, RetryPolicy
from hookinbox.outbox import DeliveryError
from hookinbox.sources import Stripe

STRIPE_SECRET = "whsec_untrusted_text_app"


def build(database_url: str | None = None) -> Inbox:
    inbox = Inbox(database_url, retry=RetryPolicy(max_attempts=1))
    inbox.add_source(Stripe(secret=STRIPE_SECRET))

    @inbox.handler("stripe", "note.failed")
    def fail(event: Event, ctx: HandlerContext) -> None:
        raise ValueError(event.payload["note"])

    @inbox.handler("stripe", "note.sent")
    def send(event: Event, ctx: HandlerContext) -> None:
        ctx.outbox.send("echo", {"note": event.payload["note"]})

    @inbox.handler("stripe", "note.ok")
    def accept(event: Event, ctx: HandlerContext) -> None:
        pass

    @inbox.destination("echo", max_attempts=1)
    def echo(message: Message) -> None:
        raise DeliveryError(f"the remote answered: {message.payload['note']}")

    return inbox


inbox = build()
