"""Signed deliveries as the providers make them, using their own libraries where PyPI has one."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import standardwebhooks
import stripe
from paddle_billing.Notifications import PaddleSignature
from slack_sdk.signature import SignatureVerifier
from twilio.request_validator import RequestValidator

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


def paddle_delivery(
    event: dict[str, Any], secret: str, *, timestamp: int | None = None
) -> Delivery:
    body = json.dumps(event).encode()
    ts = int(time.time()) if timestamp is None else timestamp
    h1 = PaddleSignature.calculate_hmac(secret, f"{ts}:".encode() + body).hexdigest()
    return {"Paddle-Signature": f"ts={ts};h1={h1}", "Content-Type": "application/json"}, body


def slack_delivery(
    payload: dict[str, Any], secret: str, *, timestamp: int | None = None, retry: int = 0
) -> Delivery:
    body = json.dumps(payload).encode()
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    headers = {
        "X-Slack-Signature": str(signature),
        "X-Slack-Request-Timestamp": ts,
        "Content-Type": "application/json",
    }
    if retry:
        headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
    return headers, body


def square_delivery(event: dict[str, Any], secret: str, notification_url: str) -> Delivery:
    # Square's SDK verifies but does not sign; this is its documented recipe.
    body = json.dumps(event).encode()
    digest = hmac.new(secret.encode(), notification_url.encode() + body, hashlib.sha256).digest()
    headers = {
        "x-square-hmacsha256-signature": base64.b64encode(digest).decode(),
        "Content-Type": "application/json",
    }
    return headers, body


def gitlab_delivery(
    idempotency_key: str, event: str, payload: dict[str, Any], token: str
) -> Delivery:
    headers = {
        "X-Gitlab-Token": token,
        "X-Gitlab-Event": event,
        "Idempotency-Key": idempotency_key,
        "X-Gitlab-Webhook-UUID": f"webhook-{time.monotonic_ns()}",  # new on every attempt
        "Content-Type": "application/json",
    }
    return headers, json.dumps(payload).encode()


def lemonsqueezy_delivery(payload: dict[str, Any], secret: str) -> Delivery:
    # Lemon Squeezy publishes no Python signer; this is its documented recipe.
    body = json.dumps(payload).encode()
    headers = {
        "X-Signature": hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
        "X-Event-Name": str(payload["meta"]["event_name"]),
        "Content-Type": "application/json",
    }
    return headers, body


def twilio_form_delivery(params: dict[str, str], auth_token: str, url: str) -> Delivery:
    signature = RequestValidator(auth_token).compute_signature(url, params)
    headers = {
        "X-Twilio-Signature": signature,
        "Content-Type": "application/x-www-form-urlencoded",
    }
    return headers, urlencode(params).encode()
