"""HubSpot v3: checked against HubSpot's own `Signature` (`hubspot-api-client`, Python).

Forward: deliveries signed by the SDK's `get_signature`, received through `inbox.receive` and
the ASGI app. Reverse: `hookinbox.testing.sign`'s deliveries judged by the SDK's `is_valid`.
HubSpot signs the URI with some escapes decoded; the SDK takes the URI as the caller passes it,
so the decoded form is what it is given.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hubspot.utils.signature import Signature
from tests.support.asgi import ASGIClient

from hookinbox import Inbox
from hookinbox._errors import BadSignature, ConfigurationError, TimestampOutOfTolerance
from hookinbox.sources import HubSpot
from hookinbox.sources._hubspot import signed_uri

SECRET = "hs-client-secret-ünï"
URL = "https://hooks.example.com/webhooks/hubspot?portal=1%2C2&tag=%3Ab"
DECODED = "https://hooks.example.com/webhooks/hubspot?portal=1,2&tag=:b"
EVENTS: list[dict[str, Any]] = [
    {"eventId": 100, "subscriptionId": 7, "portalId": 62515, "occurredAt": 1_700_000_000_000,
     "subscriptionType": "contact.creation", "attemptNumber": 0, "objectId": 123,
     "changeSource": "CRM", "note": "Zoë"},
    {"eventId": 101, "subscriptionId": 7, "portalId": 62515, "occurredAt": 1_700_000_001_000,
     "subscriptionType": "contact.propertyChange", "attemptNumber": 0, "objectId": 123,
     "propertyName": "email", "propertyValue": "zoë@example.com"},
]  # fmt: skip
BODY = json.dumps(EVENTS, ensure_ascii=False).encode()


def sdk_headers(body: bytes, milliseconds: int, uri: str = DECODED) -> dict[str, str]:
    signature = Signature.get_signature(
        SECRET, body.decode(), "v3", http_uri=uri, http_method="POST", timestamp=str(milliseconds)
    )
    return {
        "X-HubSpot-Signature-v3": signature,
        "X-HubSpot-Request-Timestamp": str(milliseconds),
        "Content-Type": "application/json",
    }


@pytest.fixture
def inbox() -> Iterator[Inbox]:
    inbox = Inbox(f"sqlite:///{tempfile.mkdtemp()}/hubspot.db")
    inbox.add_source(HubSpot(secret=SECRET, url=URL))
    yield inbox
    inbox.close()


def now_ms() -> int:
    return int(time.time() * 1000)


def test_the_uri_is_decoded_as_hubspot_signs_it() -> None:
    assert signed_uri(URL) == DECODED
    assert signed_uri("https://h.example/a%3a%2f%20b") == "https://h.example/a:/%20b"


def test_a_delivery_signed_by_the_sdk_is_stored_event_by_event(inbox: Inbox) -> None:
    headers = sdk_headers(BODY, now_ms())
    reply = inbox.receive("hubspot", headers, BODY)
    assert reply.body == {"status": "accepted", "events": 2, "accepted": 2, "duplicates": 0}
    event = inbox.store.get_event("hubspot", "7:101")
    assert event is not None and event.type == "contact.propertyChange"
    assert event.payload["propertyValue"] == "zoë@example.com"
    assert event.occurred_at is not None and event.occurred_at.timestamp() == 1_700_000_001
    response = ASGIClient(inbox.asgi()).post("/webhooks/hubspot", headers=headers, content=BODY)
    assert response.json() == {"status": "duplicate", "events": 2, "accepted": 0, "duplicates": 2}


def test_the_sdk_accepts_what_the_signer_makes() -> None:
    from hookinbox.testing import sign

    headers, body = sign(HubSpot(secret=SECRET, url=URL), EVENTS)
    assert Signature.is_valid(
        headers["X-HubSpot-Signature-v3"],
        SECRET,
        body.decode(),
        http_uri=DECODED,
        http_method="POST",
        signature_version="v3",
        timestamp=headers["X-HubSpot-Request-Timestamp"],
    )


@pytest.mark.parametrize(
    ("uri", "secret", "body"),
    [
        ("https://hooks.example.com/webhooks/hubspot", SECRET, BODY),
        (DECODED, "another-secret", BODY),
        (DECODED, SECRET, BODY + b" "),
    ],
    ids=["other-uri", "other-secret", "changed-body"],
)
def test_what_the_sdk_would_refuse_is_refused_401(
    inbox: Inbox, uri: str, secret: str, body: bytes
) -> None:
    milliseconds = now_ms()
    signature = Signature.get_signature(
        secret, body.decode(), "v3", http_uri=uri, http_method="POST", timestamp=str(milliseconds)
    )
    assert not Signature.is_valid(
        signature, SECRET, BODY.decode(), DECODED, "POST", "v3", str(milliseconds)
    )
    headers = {
        "X-HubSpot-Signature-v3": signature,
        "X-HubSpot-Request-Timestamp": str(milliseconds),
    }
    reply = inbox.receive("hubspot", headers, BODY)
    assert (reply.status_code, reply.body["error"]) == (401, "invalid_signature")


def test_the_timestamp_is_milliseconds_held_within_five_minutes() -> None:
    source = HubSpot(secret=SECRET, url=URL)
    now = 1_700_000_000.0
    fresh = {k.lower(): v for k, v in sdk_headers(BODY, int(now * 1000) - 299_000).items()}
    source.verify(fresh, BODY, now=now)
    stale = {k.lower(): v for k, v in sdk_headers(BODY, int(now * 1000) - 301_000).items()}
    with pytest.raises(TimestampOutOfTolerance):
        source.verify(stale, BODY, now=now)
    with pytest.raises(BadSignature, match="milliseconds"):
        source.verify({**fresh, "x-hubspot-request-timestamp": "1.5e12"}, BODY, now=now)
    with pytest.raises(ConfigurationError):
        HubSpot(secret=SECRET, url="hooks.example.com/webhooks/hubspot")


def test_an_event_without_a_subscription_is_keyed_by_its_event_id(inbox: Inbox) -> None:
    body = json.dumps([{"eventId": "e-1", "subscriptionType": "deal.creation"}]).encode()
    reply = inbox.receive("hubspot", sdk_headers(body, now_ms()), body)
    assert reply.body["accepted"] == 1
    assert inbox.store.get_event("hubspot", "e-1") is not None


def test_a_retry_with_a_higher_attempt_number_is_no_key_conflict(inbox: Inbox) -> None:
    """HubSpot counts `attemptNumber` up on every retry (issue 31, item 11): the retry is a
    duplicate, never a key conflict; an event changed in anything else still is one."""
    replies = []
    for attempt in range(3):
        events = [{**event, "attemptNumber": attempt} for event in EVENTS]
        body = json.dumps(events, ensure_ascii=False).encode()
        replies.append(inbox.receive("hubspot", sdk_headers(body, now_ms()), body))
    assert [r.body["status"] for r in replies] == ["accepted", "duplicate", "duplicate"]
    assert [r.key_conflict for r in replies] == [False, False, False]
    stored = inbox.store.get_event("hubspot", "7:100")
    assert (stored.delivery_count, stored.key_conflicts) == (3, 0)
    assert json.loads(stored.body)["attemptNumber"] == 0  # the first attempt's bytes are kept

    changed = [{**EVENTS[0], "note": "another body under the same key"}]
    body = json.dumps(changed).encode()
    reply = inbox.receive("hubspot", sdk_headers(body, now_ms()), body)
    assert (reply.body["status"], reply.key_conflict) == ("duplicate", True)
    assert inbox.store.get_event("hubspot", "7:100").key_conflicts == 1
