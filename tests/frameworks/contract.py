"""The delivery contract, checked over real HTTP against any adapter's server.

Every adapter must answer as `inbox.asgi()` does (docs/ingest.md), store the body byte for
byte as it came, and refuse an oversized body without reading it.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx

from hookinbox._storage import Store
from tests.support.signing import stripe_delivery

SECRET = "whsec_local_trial"  # the examples' default Stripe secret
MAX_BODY = 1024 * 1024  # the examples' inboxes keep the default max_body_size


def checkout_event(event_id: str, payment_id: str) -> dict[str, Any]:
    return {
        "id": event_id,
        "type": "checkout.session.completed",
        "created": int(time.time()),
        "data": {
            "object": {
                "payment_intent": payment_id,
                "customer": "cus_fw",
                "customer_email": "zoë@example.com",
                "amount_total": 1200,
                "currency": "eur",
            }
        },
    }


def check_contract(base_url: str, database_url: str, *, chunked: bool = True) -> None:
    """Every answer of the contract, and the body stored exactly as sent."""
    url = f"{base_url}/webhooks/stripe"
    # Indented, unescaped, keys unsorted: any re-serialisation would change these bytes.
    raw = json.dumps(checkout_event("evt_fw_1", "pi_fw_1"), indent=3, ensure_ascii=False).encode()
    headers, body = stripe_delivery(raw, SECRET)
    first = httpx.post(url, headers=headers, content=body)
    assert (first.status_code, first.json()) == (
        200,
        {"status": "accepted", "event_id": "evt_fw_1"},
    )
    assert first.headers["content-type"].startswith("application/json")
    second = httpx.post(url, headers=headers, content=body)
    assert (second.status_code, second.json()["status"]) == (200, "duplicate")

    forged = httpx.post(url, headers={**headers, "Stripe-Signature": "t=1,v1=00"}, content=body)
    assert (forged.status_code, forged.json()["error"]) == (401, "invalid_signature")
    unknown = httpx.post(f"{base_url}/webhooks/nope", headers=headers, content=body)
    assert (unknown.status_code, unknown.json()["error"]) == (404, "unknown_source")
    assert httpx.get(url).status_code == 405

    assert declared_too_large(url) == 413
    if chunked:
        oversized = httpx.post(url, headers=headers, content=_chunks(MAX_BODY + 1))
        assert (oversized.status_code, oversized.json()["error"]) == (413, "too_large")

    store = Store(database_url, auto_migrate=False)
    try:
        event = store.get_event("stripe", "evt_fw_1")
    finally:
        store.dispose()
    assert event is not None
    assert event.body == raw
    assert event.delivery_count == 2


def declared_too_large(url: str) -> int:
    """POST announcing a body over the cap but sending 10 bytes of it; the answer's status.

    A server that waited for the announced body would never answer: the reply proves the
    adapter refused from Content-Length alone.
    """
    parts = urlsplit(url)
    head = (
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {MAX_BODY * 50}\r\n\r\n"
    )
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head.encode() + b'{"id": "x"')
        response = sock.recv(4096).decode("latin-1")
    return int(response.split(" ", 2)[1])


def _chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    while total > 0:
        yield b" " * min(size, total)
        total -= size


def wait_for_order(orders_url: str, payment_id: str, timeout: float = 30) -> dict[str, Any]:
    """Poll an example's list of orders until the handler's order shows up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = httpx.get(orders_url)
        found = [o for o in _orders(response.json()) if o["payment_id"] == payment_id]
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no order for {payment_id} after {timeout} s")


def _orders(document: Any) -> list[dict[str, Any]]:
    return list(document["orders"] if isinstance(document, dict) else document)
