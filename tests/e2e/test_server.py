"""End to end through `hookinbox serve` on loopback: real sockets, real processes."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import sqlalchemy as sa

from hookinbox._storage import Store
from hookinbox._storage._schema import events
from tests.apps.basic import STRIPE_SECRET
from tests.support.server import running_server
from tests.support.signing import stripe_delivery, stripe_event

APP = "tests.apps.basic:inbox"


async def _fire(
    base_url: str, headers: dict[str, str], body: bytes, copies: int
) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=copies, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60) as client:
        return await asyncio.gather(
            *(client.post("/webhooks/stripe", headers=headers, content=body) for _ in range(copies))
        )


def test_200_concurrent_copies_over_two_processes_store_one_event(db_url: str) -> None:
    headers, body = stripe_delivery(stripe_event("evt_storm"), STRIPE_SECRET)
    with running_server(APP, db_url, workers=2) as base_url:
        responses = asyncio.run(_fire(base_url, headers, body, 200))
    assert [r.status_code for r in responses] == [200] * 200
    statuses = Counter(r.json()["status"] for r in responses)
    assert statuses == {"accepted": 1, "duplicate": 199}
    store = Store(db_url)
    with store.engine.connect() as connection:
        rows = connection.execute(sa.select(events.c.event_id, events.c.delivery_count)).all()
    store.dispose()
    assert [tuple(row) for row in rows] == [("evt_storm", 200)]


async def _chunks(total: int) -> AsyncIterator[bytes]:
    sent = 0
    while sent < total:
        yield b"x" * 65536
        sent += 65536


def test_a_streamed_body_over_the_limit_is_refused_while_reading(db_url: str) -> None:
    """No Content-Length (chunked): the cap applies while reading, nothing is stored."""

    async def post() -> httpx.Response:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            return await client.post(
                "/webhooks/stripe",
                headers={"stripe-signature": "t=1,v1=00"},
                content=_chunks(4 * 1024 * 1024),
            )

    with running_server(APP, db_url) as base_url:
        response = asyncio.run(post())
        wrong_method = httpx.get(f"{base_url}/webhooks/stripe")
        health = httpx.get(f"{base_url}/healthz")
    assert response.status_code == 413
    assert wrong_method.status_code == 405
    assert health.status_code == 200
    store = Store(db_url)
    with store.engine.connect() as connection:
        assert connection.execute(sa.select(sa.func.count()).select_from(events)).scalar() == 0
    store.dispose()
