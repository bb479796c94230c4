"""The HTTP contract, in process: every answer, and nothing written for a refused delivery."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from hookinbox import Inbox, StoreOptions
from hookinbox._storage._schema import events
from tests.apps.basic import (
    GITHUB_SECRET,
    SHOPIFY_SECRET,
    STANDARD_SECRET,
    STRIPE_SECRET,
    build,
)
from tests.support.asgi import ASGIClient
from tests.support.signing import (
    github_delivery,
    shopify_delivery,
    standard_delivery,
    stripe_delivery,
    stripe_event,
)


@pytest.fixture
def inbox(db_url: str) -> Iterator[Inbox]:
    inbox = build(db_url)
    yield inbox
    inbox.close()


@pytest.fixture
def client(inbox: Inbox) -> ASGIClient:
    return ASGIClient(inbox.asgi())


def stored_rows(inbox: Inbox) -> list[sa.Row[tuple[str, str, int]]]:
    with inbox.store.engine.connect() as connection:
        query = sa.select(events.c.source, events.c.event_id, events.c.delivery_count)
        return list(connection.execute(query).all())


def test_a_new_event_is_accepted_then_duplicates_are_acknowledged(
    client: ASGIClient, inbox: Inbox
) -> None:
    headers, body = stripe_delivery(stripe_event("evt_a"), STRIPE_SECRET)
    first = client.post("/webhooks/stripe", headers=headers, content=body)
    assert first.status_code == 200
    assert first.json() == {"status": "accepted", "event_id": "evt_a"}
    # A retry is signed anew (new timestamp) but carries the same event id.
    headers, body = stripe_delivery(
        stripe_event("evt_a"), STRIPE_SECRET, timestamp=int(time.time()) + 1
    )
    second = client.post("/webhooks/stripe", headers=headers, content=body)
    assert second.status_code == 200
    assert second.json() == {"status": "duplicate", "event_id": "evt_a"}
    assert [tuple(r) for r in stored_rows(inbox)] == [("stripe", "evt_a", 2)]


@pytest.mark.parametrize(
    ("source", "make", "event_id"),
    [
        (
            "shopify",
            lambda: shopify_delivery("98765", "orders/create", {"id": 1}, SHOPIFY_SECRET),
            "orders/create:98765",
        ),
        ("github", lambda: github_delivery("d-1", "push", {"ref": "main"}, GITHUB_SECRET), "d-1"),
        (
            "standard",
            lambda: standard_delivery("msg_1", {"type": "invoice.paid"}, STANDARD_SECRET),
            "msg_1",
        ),
    ],
)
def test_every_built_in_source_is_accepted(
    client: ASGIClient, inbox: Inbox, source: str, make: object, event_id: str
) -> None:
    headers, body = make()  # type: ignore[operator]
    response = client.post(f"/webhooks/{source}", headers=headers, content=body)
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "accepted", "event_id": event_id}
    assert [tuple(r) for r in stored_rows(inbox)] == [(source, event_id, 1)]


def _forged() -> tuple[dict[str, str], bytes]:
    headers, body = stripe_delivery(stripe_event("evt_x"), "whsec_someone_else")
    return headers, body


def _tampered() -> tuple[dict[str, str], bytes]:
    headers, body = stripe_delivery(stripe_event("evt_x"), STRIPE_SECRET)
    return headers, body.replace(b"evt_x", b"evt_y")


def _expired() -> tuple[dict[str, str], bytes]:
    return stripe_delivery(stripe_event("evt_x"), STRIPE_SECRET, timestamp=int(time.time()) - 301)


def _unsigned() -> tuple[dict[str, str], bytes]:
    _headers, body = stripe_delivery(stripe_event("evt_x"), STRIPE_SECRET)
    return {"content-type": "application/json"}, body


def _not_json() -> tuple[dict[str, str], bytes]:
    return stripe_delivery(b"id=evt_x&type=charge", STRIPE_SECRET)


def _no_event_id() -> tuple[dict[str, str], bytes]:
    return stripe_delivery(json.dumps({"type": "charge.succeeded"}).encode(), STRIPE_SECRET)


@pytest.mark.parametrize(
    ("make", "status", "error"),
    [
        (_forged, 401, "invalid_signature"),
        (_tampered, 401, "invalid_signature"),
        (_expired, 401, "invalid_signature"),
        (_unsigned, 401, "invalid_signature"),
        (_not_json, 400, "bad_request"),
        (_no_event_id, 400, "bad_request"),
    ],
)
def test_refused_deliveries_write_nothing(
    client: ASGIClient, inbox: Inbox, make: object, status: int, error: str
) -> None:
    headers, body = make()  # type: ignore[operator]
    response = client.post("/webhooks/stripe", headers=headers, content=body)
    assert response.status_code == status
    assert response.json()["error"] == error
    assert "Traceback" not in response.text
    assert stored_rows(inbox) == []


def test_unknown_source_is_404(client: ASGIClient, inbox: Inbox) -> None:
    headers, body = stripe_delivery(stripe_event("evt_x"), STRIPE_SECRET)
    response = client.post("/webhooks/paypal", headers=headers, content=body)
    assert response.status_code == 404
    assert response.json()["error"] == "unknown_source"
    assert stored_rows(inbox) == []


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_other_methods_are_405(client: ASGIClient, method: str) -> None:
    assert client.request(method, "/webhooks/stripe").status_code == 405


def test_a_body_over_the_limit_is_413(db_url: str) -> None:
    inbox = build(db_url, max_body_size=1000)
    event = stripe_event("evt_big", padding="x" * 2000)
    headers, body = stripe_delivery(event, STRIPE_SECRET)
    client = ASGIClient(inbox.asgi())
    response = client.post("/webhooks/stripe", headers=headers, content=body)
    assert response.status_code == 413
    assert response.json()["error"] == "too_large"
    assert stored_rows(inbox) == []
    inbox.close()


def test_health_and_readiness(client: ASGIClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}


def test_an_unavailable_database_is_503_with_retry_after() -> None:
    inbox = build(
        "postgresql://postgres@127.0.0.1:1/none", store_options=StoreOptions(connect_timeout=1)
    )
    headers, body = stripe_delivery(stripe_event("evt_down"), STRIPE_SECRET)
    client = ASGIClient(inbox.asgi())
    response = client.post("/webhooks/stripe", headers=headers, content=body)
    ready = client.get("/readyz")
    health = client.get("/healthz")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert response.json()["error"] == "unavailable"
    assert "Traceback" not in response.text
    assert ready.status_code == 503
    assert health.status_code == 200  # the process is up; only readiness depends on the database


def test_the_inbox_answers_readiness_itself(inbox: Inbox, client: ASGIClient) -> None:
    """`inbox.readiness()`: the answer `/readyz` gives, without an HTTP app."""
    ready = asyncio.run(inbox.readiness())
    assert (ready.status_code, ready.content) == (200, client.get("/readyz").content)
    down = build(
        "postgresql://postgres@127.0.0.1:1/none", store_options=StoreOptions(connect_timeout=1)
    )
    refused = asyncio.run(down.readiness())
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "5"
    down.close()


def test_mounting_under_a_prefix(db_url: str) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    inbox = build(db_url)
    outer = Starlette(routes=[Mount("/hooks", app=inbox.asgi())])
    headers, body = stripe_delivery(stripe_event("evt_m"), STRIPE_SECRET)
    response = ASGIClient(outer).post("/hooks/webhooks/stripe", headers=headers, content=body)
    assert response.json() == {"status": "accepted", "event_id": "evt_m"}
    inbox.close()


def test_receive_is_the_same_contract_without_a_web_framework(inbox: Inbox) -> None:
    headers, body = stripe_delivery(stripe_event("evt_sync"), STRIPE_SECRET)
    first = inbox.receive("stripe", headers, body)
    second = inbox.receive("stripe", headers, body)
    forged = inbox.receive("stripe", {"Stripe-Signature": "t=1,v1=00"}, body)
    assert (first.status_code, first.body["status"]) == (200, "accepted")
    assert (second.status_code, second.body["status"]) == (200, "duplicate")
    assert forged.status_code == 401
    assert [tuple(r) for r in stored_rows(inbox)] == [("stripe", "evt_sync", 2)]
