"""Linear: deliveries signed by the documented recipe, judged by our source and by the
`@linear/sdk` webhook client (npm), which checks the signature and the signed
`webhookTimestamp`."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import pytest
from tests.testing.npm_oracles import npm_verifies, oracle_dir

from hookinbox._errors import BadSignature, MissingHeader, PayloadError, TimestampOutOfTolerance
from hookinbox.sources import Linear
from hookinbox.testing import sign as kit_sign

SECRET = "lin_wh_5f0e3c1a9b7d"
DELIVERY = "234d1a4e-b617-4388-90fe-adc3633d6b72"
EVENT: dict[str, Any] = {
    "action": "create",
    "type": "Issue",
    "createdAt": "2026-11-30T09:00:00.000Z",
    "organizationId": "e1c7a1f2-0c2f-4a53-9f7c-1b2a3c4d5e6f",
    "url": "https://linear.app/acme/issue/ENG-1/zoe",
    "data": {"id": "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9", "title": "Zoë's bug"},
}


def delivery(
    event: dict[str, Any] = EVENT, *, sent: float | None = None, secret: str = SECRET
) -> tuple[dict[str, str], bytes]:
    """Linear's recipe: the sending time in the body (ms), HMAC-SHA256 of the body, hex."""
    stamped = {**event, "webhookTimestamp": int((time.time() if sent is None else sent) * 1000)}
    body = json.dumps(stamped, ensure_ascii=False).encode()
    signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    headers = {"linear-signature": signature, "linear-delivery": DELIVERY, "linear-event": "Issue"}
    return headers, body


def test_a_recipe_delivery_verifies_and_the_sdk_agrees() -> None:
    npm: Path = oracle_dir()
    headers, body = delivery()
    identity = Linear(secret=SECRET).authenticate(headers, body, now=time.time())
    assert (identity.event_id, identity.event_type) == (DELIVERY, "Issue")
    assert npm_verifies(npm, "linear", SECRET, headers, body)["valid"]
    # A wrong secret is refused by both in tests/testing/test_signers.py; here, the time.
    stale = delivery(sent=time.time() - 120)
    answer = npm_verifies(npm, "linear", SECRET, *stale)
    assert not answer["valid"] and "timestamp" in answer["detail"].lower()
    with pytest.raises(TimestampOutOfTolerance):
        Linear(secret=SECRET).verify(*stale, now=time.time())


@pytest.mark.parametrize(("offset", "accepted"), [(60, True), (-60, True), (61, False)])
def test_the_window_is_60_seconds_both_ways_as_the_sdks(offset: int, accepted: bool) -> None:
    now = 1_796_000_000.0  # whole seconds: the boundary is exact in milliseconds
    headers, body = delivery(sent=now - offset)
    if accepted:
        Linear(secret=SECRET).verify(headers, body, now=now)
    else:
        with pytest.raises(TimestampOutOfTolerance):
            Linear(secret=SECRET).verify(headers, body, now=now)
        Linear(secret=SECRET, tolerance=300).verify(headers, body, now=now)


@pytest.mark.parametrize(
    "body",
    [
        json.dumps(EVENT).encode(),
        json.dumps({**EVENT, "webhookTimestamp": "1796000000000"}).encode(),
        json.dumps({**EVENT, "webhookTimestamp": True}).encode(),
        json.dumps({**EVENT, "webhookTimestamp": 10**30}).encode(),
        b"[1, 2]",
        b"not json",
    ],
    ids=["absent", "text", "boolean", "huge", "not-an-object", "not-json"],
)
def test_a_signed_body_without_a_usable_timestamp_is_refused(body: bytes) -> None:
    signature = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    with pytest.raises(BadSignature, match="webhookTimestamp"):
        Linear(secret=SECRET).verify({"linear-signature": signature}, body, now=time.time())


def test_a_missing_signature_header() -> None:
    _, body = delivery()
    with pytest.raises(MissingHeader):
        Linear(secret=SECRET).verify({"linear-delivery": DELIVERY}, body, now=time.time())


def test_a_retry_is_the_same_event_and_not_a_key_conflict() -> None:
    source = Linear(secret=SECRET)
    now = time.time()
    first = source.authenticate(*delivery(sent=now - 30), now=now)
    retry = source.authenticate(*delivery(sent=now), now=now)
    assert first.event_id == retry.event_id
    assert first.fingerprint == retry.fingerprint  # only webhookTimestamp differs
    other = source.identify({"linear-delivery": DELIVERY}, json.dumps({**EVENT, "x": 1}).encode())
    assert other.fingerprint != first.fingerprint


def test_a_delivery_without_linear_delivery_is_a_payload_error() -> None:
    headers, body = delivery()
    del headers["linear-delivery"]
    with pytest.raises(PayloadError, match="Linear-Delivery"):
        Linear(secret=SECRET).authenticate(headers, body, now=time.time())


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_is_verified_by_linears_sdk_with_the_time_in_the_body(npm: Path) -> None:
    issue = {"action": "create", "type": "Issue", "data": {"id": "1"}}
    headers, body = kit_sign(Linear(secret="lin-secret"), issue, delivery="d-1")
    assert npm_verifies(npm, "linear", "lin-secret", headers, body)["valid"]
    assert not npm_verifies(npm, "linear", "other", headers, body)["valid"]
    assert abs(json.loads(body)["webhookTimestamp"] / 1000 - time.time()) < 30
    assert (headers["Linear-Delivery"], headers["Linear-Event"]) == ("d-1", "Issue")
