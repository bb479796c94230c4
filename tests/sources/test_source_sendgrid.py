"""SendGrid Event Webhook: checked against SendGrid's own verifier (`sendgrid`, Python).

SendGrid's SDK verifies but does not sign (only SendGrid holds the private key), so forward
deliveries are signed by the documented recipe (ECDSA P-256 with SHA-256 over timestamp +
body) with a test key, and the SDK is the referee of both directions: what it accepts we
accept, and what `hookinbox.testing.sign` makes, it accepts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from sendgrid.helpers.eventwebhook import EventWebhook
from tests.support.asgi import ASGIClient

from hookinbox import Inbox
from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    PayloadError,
    TimestampOutOfTolerance,
)
from hookinbox._model import Status
from hookinbox.sources import SendGrid
from hookinbox.sources._base import MAX_BATCH_EVENTS
from hookinbox.sources._identity import compact_json
from hookinbox.testing import sendgrid_test_key, sign

NOW = 1_700_000_000
KEY = sendgrid_test_key()
EVENTS: list[dict[str, Any]] = [
    {"email": "zoë@example.com", "timestamp": NOW - 5, "event": "processed",
     "sg_event_id": "sg-processed-1", "sg_message_id": "msg-1"},
    {"email": "zoë@example.com", "timestamp": NOW - 2, "event": "delivered",
     "sg_event_id": "sg-delivered-1", "sg_message_id": "msg-1", "response": "250 OK"},
]  # fmt: skip
BODY = json.dumps(EVENTS, ensure_ascii=False).encode()


def documented_signature(body: bytes, timestamp: str, key: ec.EllipticCurvePrivateKey) -> str:
    """SendGrid's recipe, independent of hookinbox: ECDSA SHA-256 of timestamp + body."""
    signature = key.sign(timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    return base64.b64encode(signature).decode()


def sdk_accepts(headers: dict[str, str], body: bytes) -> bool:
    lower = {k.lower(): v for k, v in headers.items()}
    return bool(
        EventWebhook(KEY.public_key).verify_signature(
            body.decode(),
            lower["x-twilio-email-event-webhook-signature"],
            lower["x-twilio-email-event-webhook-timestamp"],
        )
    )


def documented_headers(body: bytes, timestamp: int = NOW) -> dict[str, str]:
    return {
        "X-Twilio-Email-Event-Webhook-Signature": documented_signature(
            body, str(timestamp), KEY.private_key
        ),
        "X-Twilio-Email-Event-Webhook-Timestamp": str(timestamp),
        "Content-Type": "application/json",
    }


@pytest.fixture
def inbox() -> Iterator[Inbox]:
    inbox = Inbox(f"sqlite:///{tempfile.mkdtemp()}/sendgrid.db", clock=lambda: float(NOW))
    inbox.add_source(SendGrid(public_key=KEY.public_key))
    yield inbox
    inbox.close()


def test_the_sdk_accepts_what_the_signer_makes_and_refuses_a_changed_body() -> None:
    headers, body = sign(SendGrid(public_key=KEY.public_key), EVENTS, at=NOW)
    assert sdk_accepts(headers, body)
    assert not sdk_accepts(headers, body.replace(b"delivered", b"bounce"))


def test_a_documented_delivery_the_sdk_accepts_is_stored_event_by_event(inbox: Inbox) -> None:
    headers = documented_headers(BODY)
    assert sdk_accepts(headers, BODY)
    reply = inbox.receive("sendgrid", headers, BODY)
    assert (reply.status_code, reply.body) == (
        200,
        {"status": "accepted", "events": 2, "accepted": 2, "duplicates": 0},
    )
    stored = inbox.store.get_event("sendgrid", "sg-delivered-1")
    assert stored is not None and stored.type == "delivered"
    assert json.loads(stored.body) == EVENTS[1]  # the event's own JSON, not the batch
    assert stored.payload["email"] == "zoë@example.com"
    again = inbox.receive("sendgrid", headers, BODY)
    assert again.body == {"status": "duplicate", "events": 2, "accepted": 0, "duplicates": 2}


def test_over_http_the_same(inbox: Inbox) -> None:
    response = ASGIClient(inbox.asgi()).post(
        "/webhooks/sendgrid", headers=documented_headers(BODY), content=BODY
    )
    assert (response.status_code, response.json()["accepted"]) == (200, 2)


@pytest.mark.parametrize(
    ("change", "sdk"),
    [
        (lambda h, b: (h, b + b" "), False),  # the body changed
        (lambda h, b: ({**h, "X-Twilio-Email-Event-Webhook-Timestamp": str(NOW + 1)}, b), False),
    ],
    ids=["body", "timestamp"],
)
def test_what_the_sdk_refuses_is_refused_401(inbox: Inbox, change: Any, sdk: bool) -> None:
    headers, body = change(documented_headers(BODY), BODY)
    assert sdk_accepts(headers, body) is sdk
    reply = inbox.receive("sendgrid", headers, body)
    assert (reply.status_code, reply.body["error"]) == (401, "invalid_signature")


def test_another_key_and_a_stale_timestamp_are_refused() -> None:
    other = ec.generate_private_key(ec.SECP256R1())
    source = SendGrid(public_key=KEY.public_key)
    headers = documented_headers(BODY)
    headers["X-Twilio-Email-Event-Webhook-Signature"] = documented_signature(BODY, str(NOW), other)
    lower = {k.lower(): v for k, v in headers.items()}
    with pytest.raises(BadSignature):
        source.verify(lower, BODY, now=NOW)
    old = {k.lower(): v for k, v in documented_headers(BODY, NOW - 301).items()}
    with pytest.raises(TimestampOutOfTolerance):
        source.verify(old, BODY, now=NOW)
    SendGrid(public_key=KEY.public_key, tolerance=None).verify(old, BODY, now=NOW)


@pytest.mark.parametrize(
    ("events", "detail"),
    [
        ([], "no event"),
        ({"sg_event_id": "x"}, "not a JSON array"),
        ([{"sg_event_id": f"e{i}"} for i in range(MAX_BATCH_EVENTS + 1)], "more than"),
    ],
    ids=["empty", "object", "over-the-cap"],
)
def test_a_signed_body_that_is_no_batch_is_refused_whole(
    inbox: Inbox, events: Any, detail: str
) -> None:
    body = json.dumps(events).encode()
    reply = inbox.receive("sendgrid", documented_headers(body), body)
    assert (reply.status_code, reply.body["error"]) == (400, "bad_request")
    assert detail in reply.body["detail"]
    assert inbox.store.get_event("sendgrid", "e0") is None


@pytest.mark.parametrize(
    ("events", "detail"),
    [
        ([{"sg_event_id": "a", "event": "open"}, {"event": "open"}], "sg_event_id"),
        ([{"sg_event_id": "a"}, "text"], "not a JSON object"),
    ],
    ids=["one-without-id", "one-not-an-object"],
)
def test_an_unusable_event_is_held_as_invalid_beside_the_others(
    inbox: Inbox, events: Any, detail: str
) -> None:
    """Issue 31: the valid event is stored, the unusable one kept as `invalid` (its reason as
    its last error), and the delivery answered 200: SendGrid does not retry a 4xx."""
    body = json.dumps(events).encode()
    reply = inbox.receive("sendgrid", documented_headers(body), body)
    assert (reply.status_code, reply.body["invalid"], reply.body["accepted"]) == (200, 1, 2)
    assert inbox.store.get_event("sendgrid", "a").status is Status.PENDING
    key = "invalid:" + hashlib.sha256(compact_json(events[1])).hexdigest()
    held = inbox.store.get_event("sendgrid", key)
    assert held is not None and held.status is Status.INVALID
    assert detail in (held.last_error or "")


def test_a_key_that_is_not_p256_is_refused_when_the_source_is_built() -> None:
    with pytest.raises(ConfigurationError):
        SendGrid(public_key="bm90IGEga2V5")
    with pytest.raises(PayloadError):  # a batch of two is not one event
        SendGrid(public_key=KEY.public_key).identify({}, BODY)
