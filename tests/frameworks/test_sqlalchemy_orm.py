"""docs/frameworks.md's claim: an ORM Session bound to ctx.db commits with the processed mark."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from hookinbox import Event, HandlerContext, Inbox, Status
from hookinbox.sources import Stripe
from tests.support.signing import stripe_delivery, stripe_event

SECRET = "whsec_orm"


class Base(DeclarativeBase):
    pass


class Payment(Base):
    __tablename__ = "orm_payments"
    id: Mapped[str] = mapped_column(primary_key=True)


def test_a_session_on_ctx_db_commits_and_rolls_back_with_the_mark(db_url: str) -> None:
    inbox = Inbox(db_url)
    inbox.add_source(Stripe(secret=SECRET))
    inbox.after_migrate(Base.metadata.create_all)

    @inbox.handler("stripe", "*")
    def record_payment(event: Event, ctx: HandlerContext) -> None:
        with Session(bind=ctx.db) as session:
            session.add(Payment(id=event.id))
            session.commit()
        if event.type == "payment_intent.payment_failed":
            raise RuntimeError("raised after the session's commit")

    for event in (
        stripe_event("evt_ok", "payment_intent.succeeded"),
        stripe_event("evt_bad", "payment_intent.payment_failed"),
    ):
        assert inbox.receive("stripe", *stripe_delivery(event, SECRET)).ok
    inbox.process_due()

    with inbox.store.reading() as connection:
        payments = set(connection.execute(sa.select(Payment.id)).scalars())
    ok, bad = inbox.store.get_event("stripe", "evt_ok"), inbox.store.get_event("stripe", "evt_bad")
    inbox.close()
    assert payments == {"evt_ok"}
    assert ok is not None and ok.status is Status.PROCESSED
    assert bad is not None and (bad.status, bad.attempts) == (Status.PENDING, 1)
