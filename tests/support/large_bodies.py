"""Stripe deliveries whose bodies are as large as asked and made of backslashes: JSON writes
each as two, and a MariaDB driver sends each escaped, as two more (PyMySQL sends every byte as
two hex digits; mysqlclient doubles a backslash), so such a body is the largest a statement
carries for its size."""

from __future__ import annotations

import json

from tests.support.signing import stripe_delivery, stripe_event


def backslash_body(event_id: str, size: int) -> bytes:
    """A Stripe event's JSON of exactly `size` bytes, nearly all of them backslashes."""
    event = stripe_event(event_id, note="")
    empty = len(json.dumps(event, separators=(",", ":")).encode())
    room = size - empty
    if room < 0:
        raise ValueError(f"{size} bytes cannot hold a Stripe event ({empty} at least)")
    event["data"]["object"]["note"] = "\\" * (room // 2) + "x" * (room % 2)
    body = json.dumps(event, separators=(",", ":")).encode()
    assert len(body) == size
    return body


def backslash_delivery(event_id: str, size: int, secret: str) -> tuple[dict[str, str], bytes]:
    """Its headers (signed now with `secret`) and body."""
    headers, body = stripe_delivery(backslash_body(event_id, size), secret)
    return dict(headers), body
