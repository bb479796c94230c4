"""AWS Lambda Powertools' idempotency utility with its Redis persistence, behind one endpoint.

The best-known Python idempotency library: `idempotent_function` keyed on the event id records
the call in Redis (`SET NX` while in progress, the result when done). The endpoint verifies the
signature, runs the idempotent function (which creates the order, inline, as Powertools is
meant to wrap the processing itself) and answers. A concurrent copy gets Powertools'
"already in progress" error, answered 409 so the provider retries later.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

import anyio.to_thread
import redis
import sqlalchemy as sa
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.redis import (
    RedisCachePersistenceLayer,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench.peers._verify import verified

URL = os.environ["BENCH_DATABASE_URL"].replace("postgresql://", "postgresql+psycopg://", 1)
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")

engine = sa.create_engine(URL, pool_size=10)
tables = sa.MetaData()
orders = sa.Table(
    "bench_orders",
    tables,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("payment_id", sa.String(64), nullable=False),
)
tables.create_all(engine)
if URL.startswith("sqlite"):
    with engine.begin() as connection:
        connection.exec_driver_sql("PRAGMA journal_mode=WAL")

persistence = RedisCachePersistenceLayer(client=redis.Redis.from_url(REDIS_URL))
# A fresh key prefix per server start: runs never see each other's records.
config = IdempotencyConfig(event_key_jmespath="id", expires_after_seconds=3600)
PREFIX = f"bench-{uuid.uuid4().hex[:8]}"


@idempotent_function(
    data_keyword_argument="event", persistence_store=persistence, config=config, key_prefix=PREFIX
)
def process(event: dict[str, Any]) -> dict[str, str]:
    with engine.begin() as connection:
        payment = event["data"]["object"]["payment_intent"]
        connection.execute(orders.insert().values(payment_id=payment))
    return {"status": "ok", "event_id": event["id"]}


async def webhook(request: Request) -> JSONResponse:
    body = await request.body()
    if not verified(request.headers.get("stripe-signature"), body):
        return JSONResponse({"status": "rejected"}, 401)
    event = json.loads(body)
    try:
        result = await anyio.to_thread.run_sync(lambda: process(event=event))
    except IdempotencyAlreadyInProgressError:
        return JSONResponse({"status": "in progress"}, 409)
    return JSONResponse(result)


async def healthz(_request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


app = Starlette(
    routes=[Route("/webhooks/stripe", webhook, methods=["POST"]), Route("/healthz", healthz)]
)
