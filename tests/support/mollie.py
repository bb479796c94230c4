"""Mollie deliveries as Mollie makes them, and a loopback imitation of Mollie's API.

Mollie's Python library signs nothing; `sign` follows the documented recipe on its own:
`X-Mollie-Signature: sha256=` + the hex HMAC-SHA256 of the raw body with the signing secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.support.loopback import Answer, Request

API_KEY = "test_dHar4XY7LxsDOtmnkVtjNVWXLSlXsM"


def payment(
    payment_id: str = "tr_7UhSN1zuXS",
    status: str = "paid",
    paid_at: str = "2023-11-14T22:13:20+00:00",
    **extra: Any,
) -> dict[str, Any]:
    """A payment resource shaped like Mollie's v2 API (ids and amounts made up)."""
    resource: dict[str, Any] = {
        "resource": "payment",
        "id": payment_id,
        "mode": "test",
        "status": status,
        "createdAt": "2023-11-14T22:10:02+00:00",
        "amount": {"value": "42.50", "currency": "EUR"},
        "description": "Order #12345",
        "method": "ideal",
        "metadata": {"order_id": "12345"},
        "isCancelable": False,
        "expiresAt": "2023-11-14T22:25:02+00:00",
        "profileId": "pfl_QkEhN94Ba",
        "sequenceType": "oneoff",
        "redirectUrl": "https://shop.example/orders/12345/",
        "webhookUrl": "https://shop.example/webhooks/mollie-classic",
        "_links": {
            "self": {
                "href": f"https://api.mollie.com/v2/payments/{payment_id}",
                "type": "application/hal+json",
            },
            "dashboard": {
                "href": f"https://www.mollie.com/dashboard/org_12345678/payments/{payment_id}",
                "type": "text/html",
            },
        },
    }
    if status == "paid":
        resource["paidAt"] = paid_at
        resource["amountRefunded"] = {"value": "0.00", "currency": "EUR"}
        resource["amountRemaining"] = {"value": "42.50", "currency": "EUR"}
    resource.update(extra)
    return resource


def next_gen_event(event_id: str = "event_GvJ8WHrp5isUdRub9CJyH") -> dict[str, Any]:
    """A next-generation `payment-link.paid` event with its entity embedded."""
    return {
        "resource": "event",
        "id": event_id,
        "type": "payment-link.paid",
        "entityId": "pl_qng5gbbv8NAZ5gpM5ZYgx",
        "createdAt": "2023-11-14T22:13:20.0Z",
        "_embedded": {
            "entity": {
                "resource": "payment-link",
                "id": "pl_qng5gbbv8NAZ5gpM5ZYgx",
                "mode": "live",
                "description": "Invoice 2023-0042",
                "amount": {"value": "42.50", "currency": "EUR"},
                "paidAt": "2023-11-14T22:13:19.0Z",
            }
        },
        "_links": {
            "documentation": {
                "href": "https://docs.mollie.com/reference/webhooks",
                "type": "text/html",
            },
        },
    }


def sign(body: bytes, secret: str) -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {
        "X-Mollie-Signature": f"sha256={digest}",
        "Content-Type": "application/json",
        "User-Agent": "Mollie.nl HTTP client/1.0",
    }


def classic_call(resource_id: str) -> tuple[dict[str, str], bytes]:
    return {"Content-Type": "application/x-www-form-urlencoded"}, f"id={resource_id}".encode()


@dataclass
class MollieImitation:
    """Answers `GET /v2/payments/<id>` like Mollie's API, from `payments`, for `API_KEY`."""

    payments: dict[str, dict[str, Any]] = field(default_factory=dict)
    failure: int | None = None
    delay: float = 0.0

    def respond(self, request: Request) -> Answer:
        threading.Event().wait(self.delay)
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            return _hal(401, {"status": 401, "title": "Unauthorized Request"})
        if self.failure is not None:
            return _hal(self.failure, {"status": self.failure, "title": "Service Unavailable"})
        prefix = "/v2/payments/"
        resource = self.payments.get(request.path.removeprefix(prefix))
        if not request.path.startswith(prefix) or resource is None:
            return _hal(404, {"status": 404, "title": "Not Found", "detail": "No such payment"})
        return _hal(200, resource)


def _hal(status: int, payload: dict[str, Any]) -> Answer:
    return status, {"content-type": "application/hal+json"}, json.dumps(payload).encode()
