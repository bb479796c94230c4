"""The naive peer: a webhook endpoint as tutorials write it (FastAPI + SQLAlchemy ORM).

Verify with the Stripe SDK's `construct_event`, look the event up, insert it if absent
(check-then-insert: two concurrent copies both see "absent"), process inline in the request
(create the order), commit, answer. Synchronous ORM calls inside `async def`, as the tutorials
show them. It is here to measure what hookinbox replaces, speed and correctness both.
"""

from __future__ import annotations

import json
import os

import stripe
from fastapi import FastAPI, HTTPException, Request
from sqlalchemy import String, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from bench._common import SECRET

URL = os.environ["BENCH_DATABASE_URL"].replace("postgresql://", "postgresql+psycopg://", 1)


class Base(DeclarativeBase):
    pass


class ProcessedEvent(Base):
    __tablename__ = "naive_processed_events"
    id: Mapped[int] = mapped_column(primary_key=True)
    event_id: Mapped[str] = mapped_column(String(64), index=True)


class Order(Base):
    __tablename__ = "bench_orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    payment_id: Mapped[str] = mapped_column(String(64))


engine = create_engine(URL, pool_size=10)
Base.metadata.create_all(engine)
app = FastAPI()


@app.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/webhooks/stripe")
async def stripe_webhook(request: Request) -> dict[str, str]:
    payload = await request.body()
    try:
        event = stripe.Webhook.construct_event(
            payload, request.headers.get("stripe-signature"), SECRET
        )
    except (ValueError, stripe.SignatureVerificationError) as error:
        raise HTTPException(status_code=400, detail="invalid") from error
    data = json.loads(payload)
    with Session(engine) as session:
        seen = session.scalars(
            select(ProcessedEvent).where(ProcessedEvent.event_id == event["id"])
        ).first()
        if seen is not None:
            return {"status": "duplicate"}
        session.add(ProcessedEvent(event_id=event["id"]))
        session.add(Order(payment_id=data["data"]["object"]["payment_intent"]))
        session.commit()
    return {"status": "ok"}
