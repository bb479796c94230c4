"""The bundled example app, served as `make serve` serves it: server and worker processes."""

from __future__ import annotations

import time

import httpx
import sqlalchemy as sa

from hookinbox._storage import Store
from hookinbox.examples.shop import orders, subscriptions
from hookinbox.sources import Stripe
from hookinbox.testing import sign
from tests.support.server import running_server


def post(base_url: str, event: dict[str, object]) -> httpx.Response:
    headers, body = sign(Stripe(secret="whsec_local_trial"), event)
    return httpx.post(f"{base_url}/webhooks/stripe", headers=headers, content=body)


def test_the_example_shop_turns_payments_into_orders(db_url: str) -> None:
    update = {
        "id": "evt_2",
        "type": "customer.subscription.updated",
        "created": int(time.time()) + 1,
        "data": {"object": {"id": "sub_1", "customer": "cus_1", "status": "active"}},
    }
    checkout = {
        "id": "evt_1",
        "type": "checkout.session.completed",
        "created": int(time.time()),
        "data": {
            "object": {
                "payment_intent": "pi_1",
                "customer": "cus_1",
                "amount_total": 1200,
                "currency": "eur",
            }
        },
    }
    store = Store(db_url)
    rows: list[sa.RowMapping] = []
    with running_server("hookinbox.examples.shop:inbox", db_url) as base_url:
        assert post(base_url, update).json()["status"] == "accepted"  # out of order
        for _ in range(2):
            assert post(base_url, checkout).status_code == 200
        deadline = time.monotonic() + 30  # the update's first retry is ~5 s after its NotReady
        subscribed: list[sa.RowMapping] = []
        while time.monotonic() < deadline:
            with store.engine.connect() as connection:
                rows = list(connection.execute(sa.select(orders)).mappings())
                subscribed = list(connection.execute(sa.select(subscriptions)).mappings())
            if subscribed:
                break
            time.sleep(0.2)
    store.dispose()
    assert [(r["payment_id"], r["amount"]) for r in rows] == [("pi_1", 1200)]
    assert [(s["subscription_id"], s["status"]) for s in subscribed] == [("sub_1", "active")]
