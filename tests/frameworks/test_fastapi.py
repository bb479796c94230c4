"""FastAPI: `app.mount(...)` of the inbox's own app, and the router, in process and on a server."""

from __future__ import annotations

import sys

import pytest
from fastapi import FastAPI

import hookinbox.fastapi
from hookinbox import ConfigurationError, Inbox, StoreOptions
from hookinbox.sources import Stripe
from tests.apps.basic import STRIPE_SECRET, build
from tests.frameworks.contract import check_contract, wait_for_order
from tests.support.asgi import ASGIClient
from tests.support.server import free_port, serving
from tests.support.signing import stripe_delivery, stripe_event


def test_mounting_the_inbox_app_at_its_own_prefix(inbox: Inbox) -> None:
    app = FastAPI()
    app.mount("/webhooks", inbox.asgi())
    client = ASGIClient(app)
    headers, body = stripe_delivery(stripe_event("evt_mounted"), STRIPE_SECRET)
    response = client.post("/webhooks/stripe", headers=headers, content=body)
    assert response.json() == {"status": "accepted", "event_id": "evt_mounted"}
    again = client.post("/webhooks/webhooks/stripe", headers=headers, content=body)
    assert again.json() == {"status": "duplicate", "event_id": "evt_mounted"}
    assert client.get("/webhooks/healthz").status_code == 200
    assert client.get("/webhooks/stripe").status_code == 405


def test_the_router_serves_every_source_under_its_prefix(inbox: Inbox) -> None:
    app = FastAPI()
    app.include_router(hookinbox.fastapi.router(inbox, prefix="/hooks"), prefix="/api")
    client = ASGIClient(app)
    headers, body = stripe_delivery(stripe_event("evt_routed"), STRIPE_SECRET)
    response = client.post("/api/hooks/stripe", headers=headers, content=body)
    assert response.json() == {"status": "accepted", "event_id": "evt_routed"}
    assert client.post("/api/hooks/nope", content=b"{}").status_code == 404
    assert client.get("/api/hooks/stripe").status_code == 405


def test_the_router_serves_the_probes_beside_its_route(inbox: Inbox) -> None:
    app = FastAPI()
    app.include_router(hookinbox.fastapi.router(inbox, prefix="/hooks"), prefix="/api")
    client = ASGIClient(app)
    health, ready = client.get("/api/hooks/healthz"), client.get("/api/hooks/readyz")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert client.request("HEAD", "/api/hooks/readyz").status_code == 200
    # The same answers, byte for byte, as `hookinbox serve`'s app gives.
    own = ASGIClient(inbox.asgi())
    assert health.content == own.get("/healthz").content
    assert ready.content == own.get("/readyz").content
    # A POST there is a delivery to a source no inbox can have: 404, as under serve.
    assert client.post("/api/hooks/healthz", content=b"{}").status_code == 404


def test_the_routers_readiness_is_503_while_the_database_is_down() -> None:
    inbox = build(
        "postgresql://postgres@127.0.0.1:1/none", store_options=StoreOptions(connect_timeout=1)
    )
    app = FastAPI()
    app.include_router(hookinbox.fastapi.router(inbox))
    client = ASGIClient(app)
    ready = client.get("/webhooks/readyz")
    assert ready.status_code == 503
    assert ready.headers["retry-after"] == "5"
    assert ready.json()["error"] == "unavailable"
    assert client.get("/webhooks/healthz").status_code == 200  # the process is up
    inbox.close()


def test_the_router_puts_its_probes_in_the_schema(inbox: Inbox) -> None:
    app = FastAPI()
    app.include_router(hookinbox.fastapi.router(inbox))
    paths = app.openapi()["paths"]
    assert set(paths["/webhooks/healthz"]) == {"get"}  # HEAD is answered, not listed
    assert "503" in paths["/webhooks/readyz"]["get"]["responses"]


@pytest.mark.parametrize("name", ["healthz", "readyz"])
def test_a_source_cannot_take_a_probes_name(name: str, db_url: str) -> None:
    inbox = Inbox(db_url)
    with pytest.raises(ConfigurationError, match=f"cannot be named '{name}'.*probe"):
        inbox.add_source(Stripe(secret=STRIPE_SECRET, name=name))
    assert inbox.add_source(Stripe(secret=STRIPE_SECRET, name=f"{name}-shop")).name


def test_the_router_documents_no_request_body(inbox: Inbox) -> None:
    app = FastAPI()
    app.include_router(hookinbox.fastapi.router(inbox))
    operation = app.openapi()["paths"]["/webhooks/{source}"]["post"]
    assert "requestBody" not in operation  # FastAPI never reads or parses the body
    assert {"200", "401", "413", "503"} <= set(operation["responses"])


@pytest.mark.slow
def test_the_example_app_over_http(db_url: str) -> None:
    port = free_port()
    command = [
        *(sys.executable, "-m", "uvicorn", "hookinbox.examples.fastapi_app:app"),
        *("--port", str(port), "--log-level", "warning"),
    ]
    env = {"SHOP_DATABASE_URL": db_url}
    with serving(command, port, env=env, ready_path="/orders") as base_url:
        check_contract(base_url, db_url)
        order = wait_for_order(f"{base_url}/orders", "pi_fw_1")  # the lifespan's worker
    assert (order["amount"], order["email"]) == (1200, "zoë@example.com")
