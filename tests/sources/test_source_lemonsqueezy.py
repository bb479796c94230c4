"""Lemon Squeezy: hex HMAC-SHA256 of the body, and a key derived from the signed snapshot.

Lemon Squeezy publishes no Python library, so deliveries are signed here by its documented
recipe (the hex HMAC-SHA256 of the raw body with the webhook's signing secret).
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import LemonSqueezy
from hookinbox.testing import sign as kit_sign

NOW = 1_700_000_000.0
SECRET = "lemon-signing-secret"
EVENT: dict[str, Any] = {
    "meta": {
        "event_name": "subscription_updated",
        "custom_data": {"customer_id": 25},
        "test_mode": True,
        "webhook_id": "a1b2c3",
    },
    "data": {
        "type": "subscriptions",
        "id": "1",
        "attributes": {
            "store_id": 1,
            "status": "active",
            "user_name": "Zoë Müller",
            "renews_at": "2024-02-15T12:00:00.000000Z",
            "created_at": "2024-01-15T12:00:00.000000Z",
            "updated_at": "2024-01-20T08:30:00.000000Z",
        },
        "relationships": {"store": {"links": {"related": "https://api.lemonsqueezy.com/v1/x"}}},
    },
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def sign(body: bytes = BODY, secret: str = SECRET) -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"x-signature": digest, "x-event-name": "subscription_updated"}


def identify(event: dict[str, Any] | bytes) -> str:
    body = event if isinstance(event, bytes) else json.dumps(event).encode()
    return LemonSqueezy(secret=SECRET).authenticate(sign(body), body, now=NOW).event_id


def changed(**attributes: Any) -> dict[str, Any]:
    event = copy.deepcopy(EVENT)
    event["data"]["attributes"].update(attributes)
    return event


def test_signature_verifies_and_the_identity_is_derived() -> None:
    identity = LemonSqueezy(secret=SECRET).authenticate(sign(), BODY, now=NOW)
    assert identity.event_id.startswith("subscription_updated:subscriptions:1:")
    assert len(identity.event_id.rsplit(":", 1)[1]) == 64
    assert identity.event_type == "subscription_updated"
    assert identity.occurred_at == datetime(2024, 1, 20, 8, 30, tzinfo=UTC)
    assert identity.payload == EVENT


def test_bad_signatures() -> None:
    source = LemonSqueezy(secret=[SECRET, "old"])
    source.verify(sign(secret="old"), BODY, now=NOW)
    with pytest.raises(BadSignature):
        source.verify(sign(secret="other"), BODY, now=NOW)
    with pytest.raises(BadSignature):
        source.verify(sign(), BODY + b" ", now=NOW)
    with pytest.raises(BadSignature, match="X-Signature is not hex"):
        source.verify({"x-signature": "sha256=" + "0" * 64}, BODY, now=NOW)
    with pytest.raises(MissingHeader):
        source.verify({"x-event-name": "order_created"}, BODY, now=NOW)


def test_a_retry_is_a_duplicate_even_serialised_differently() -> None:
    reordered = json.dumps(
        {"data": EVENT["data"], "meta": EVENT["meta"]}, indent=2, sort_keys=True
    ).encode()
    assert identify(EVENT) == identify(BODY) == identify(reordered)


def test_meta_does_not_change_the_key() -> None:
    # Two webhooks of one store send the same event with their own webhook_id: one event.
    other_hook = {**EVENT, "meta": {**EVENT["meta"], "webhook_id": "d4e5f6"}}
    assert identify(other_hook) == identify(EVENT)


@pytest.mark.parametrize(
    "other",
    [
        changed(updated_at="2024-01-20T08:31:00.000000Z"),  # a later update
        changed(status="past_due"),  # same second, another state
        {**EVENT, "meta": {**EVENT["meta"], "event_name": "subscription_resumed"}},
        {**EVENT, "data": {**EVENT["data"], "id": "2"}},
    ],
    ids=["later-update", "other-state", "other-event-name", "other-resource"],
)
def test_a_real_new_event_is_new(other: dict[str, Any]) -> None:
    assert identify(other) != identify(EVENT)


def test_two_identical_snapshots_are_one_event() -> None:
    # The documented limit: a second event with the same name, resource and content is a
    # duplicate. Both would carry the same data, so the effect of processing it once holds.
    assert identify(copy.deepcopy(EVENT)) == identify(EVENT)


def test_created_at_is_the_time_without_updated_at() -> None:
    event = copy.deepcopy(EVENT)
    del event["data"]["attributes"]["updated_at"]
    body = json.dumps(event).encode()
    assert LemonSqueezy(secret=SECRET).identify({}, body).occurred_at == datetime(
        2024, 1, 15, 12, tzinfo=UTC
    )


@pytest.mark.parametrize(
    "event",
    [
        {"data": EVENT["data"]},
        {"meta": {}, "data": EVENT["data"]},
        {"meta": EVENT["meta"]},
        {"meta": EVENT["meta"], "data": []},
        {"meta": EVENT["meta"], "data": {"type": "orders"}},
        {"meta": EVENT["meta"], "data": {"id": "1"}},
        {"meta": {"event_name": "x" * 300}, "data": EVENT["data"]},
    ],
    ids=["no-meta", "no-event-name", "no-data", "data-list", "no-id", "no-type", "long-name"],
)
def test_unusable_bodies_are_payload_errors(event: dict[str, Any]) -> None:
    with pytest.raises(PayloadError):
        identify(event)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_follows_lemon_squeezys_recipe() -> None:
    payload = {"meta": {"event_name": "order_created"}, "data": {"type": "orders", "id": "1"}}
    headers, body = kit_sign(LemonSqueezy(secret="lemon"), payload)
    assert headers["X-Signature"] == hmac.new(b"lemon", body, hashlib.sha256).hexdigest()
    assert headers["X-Event-Name"] == "order_created"
