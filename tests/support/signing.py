"""Signed deliveries as the providers make them, through `hookinbox.testing.sign`.

Each signer there is checked against the provider's official verifier
(tests/testing/test_signers.py); these helpers keep the shapes the tests were written with.
"""

from __future__ import annotations

import json
import time
from typing import Any

from hookinbox.sources import (
    GitHub,
    GitLab,
    LemonSqueezy,
    Paddle,
    Shopify,
    Slack,
    Square,
    StandardWebhooks,
    Stripe,
    Twilio,
)
from hookinbox.testing import sign

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
    return sign(Stripe(secret=secret), event, at=timestamp)


def standard_delivery(
    message_id: str, event: dict[str, Any], secret: str, *, timestamp: int | None = None
) -> Delivery:
    return sign(StandardWebhooks(secret=secret), event, at=timestamp, message_id=message_id)


def shopify_delivery(event_id: str, topic: str, payload: dict[str, Any], secret: str) -> Delivery:
    return sign(Shopify(secret=secret), payload, event_id=event_id, topic=topic)


def github_delivery(delivery_id: str, event: str, payload: dict[str, Any], secret: str) -> Delivery:
    return sign(GitHub(secret=secret), payload, delivery=delivery_id, event=event)


def paddle_delivery(
    event: dict[str, Any], secret: str, *, timestamp: int | None = None
) -> Delivery:
    return sign(Paddle(secret=secret), event, at=timestamp)


def slack_delivery(
    payload: dict[str, Any], secret: str, *, timestamp: int | None = None, retry: int = 0
) -> Delivery:
    return sign(Slack(secret=secret), payload, at=timestamp, retry=retry)


def square_delivery(event: dict[str, Any], secret: str, notification_url: str) -> Delivery:
    return sign(Square(secret=secret, notification_url=notification_url), event)


def gitlab_delivery(
    idempotency_key: str, event: str, payload: dict[str, Any], token: str
) -> Delivery:
    return sign(GitLab(token=token), payload, idempotency_key=idempotency_key, event=event)


def lemonsqueezy_delivery(payload: dict[str, Any], secret: str) -> Delivery:
    return sign(LemonSqueezy(secret=secret), json.dumps(payload).encode())


def twilio_form_delivery(params: dict[str, str], auth_token: str, url: str) -> Delivery:
    return sign(Twilio(secret=auth_token, url=url), params, idempotency_token=False)
