"""Signed deliveries as the providers make them, using their own libraries where PyPI has one."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime
from typing import Any

import standardwebhooks
import stripe

Delivery = tuple[dict[str, str], bytes]


def stripe_event(
    event_id: str, event_type: str = "checkout.session.completed", **data: Any
) -> dict[str, Any]:
    return {
        "id": event_id,
        "object": "event",
        "type": event_type,
        "created": int(time.time()),
        "livemode": False,
        "data": {"object": {"id": f"cs_{event_id}", **data}},
    }


def stripe_delivery(
    event: dict[str, Any] | bytes, secret: str, *, timestamp: int | None = None
) -> Delivery:
    body = event if isinstance(event, bytes) else json.dumps(event).encode()
    header = stripe.WebhookSignature.generate_signature_header(
        body.decode(), secret, timestamp=int(time.time()) if timestamp is None else timestamp
    )
    return {"Stripe-Signature": header, "Content-Type": "application/json"}, body


def standard_delivery(
    message_id: str, event: dict[str, Any], secret: str, *, timestamp: int | None = None
) -> Delivery:
    body = json.dumps(event).encode()
    when = datetime.fromtimestamp(int(time.time()) if timestamp is None else timestamp, UTC)
    signature = standardwebhooks.Webhook(secret).sign(message_id, when, body.decode())
    headers = {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": signature,
        "content-type": "application/json",
    }
    return headers, body


def shopify_delivery(event_id: str, topic: str, payload: dict[str, Any], secret: str) -> Delivery:
    # Shopify publishes no Python signer; this is the documented algorithm.
    body = json.dumps(payload).encode()
    digest = hmac.new(secret.encode(), body, hashlib.sha256).digest()
    headers = {
        "X-Shopify-Hmac-Sha256": base64.b64encode(digest).decode(),
        "X-Shopify-Event-Id": event_id,
        "X-Shopify-Topic": topic,
        "X-Shopify-Shop-Domain": "example.myshopify.com",
        "Content-Type": "application/json",
    }
    return headers, body


def github_delivery(delivery_id: str, event: str, payload: dict[str, Any], secret: str) -> Delivery:
    body = json.dumps(payload).encode()
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "X-Hub-Signature-256": f"sha256={digest}",
        "X-GitHub-Delivery": delivery_id,
        "X-GitHub-Event": event,
        "Content-Type": "application/json",
    }
    return headers, body
