"""Zendesk: judged by Zendesk's documented recipe ("Verifying webhook authenticity":
`base64(HMACSHA256(TIMESTAMP + BODY))` with the signing secret, compared with
`X-Zendesk-Webhook-Signature`). Zendesk publishes no library that verifies, nor a secret
with a signed example."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError, TimestampOutOfTolerance
from hookinbox.sources import Zendesk
from hookinbox.testing import sign as kit_sign

SECRET = "dGhpcy1pcy1hLXplbmRlc2stc2lnbmluZy1zZWNyZXQ="  # used as written, not decoded
NOW = 1_796_000_000
EVENT = {
    "type": "zen:event-type:ticket.created",
    "id": "cbe4028c-7239-495d-b020-f22348516046",
    "time": "2026-11-29T01:33:20Z",
    "zendesk_event_version": "2022-11-06",
    "subject": "zen:ticket:4242",
    "detail": {"id": "4242", "subject": "Où est ma commande ?"},
    "account_id": 12514403,
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def stamp(at: int) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def recipe(timestamp: str, body: bytes, secret: str = SECRET) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def signed(body: bytes = BODY, *, at: int = NOW, secret: str = SECRET) -> dict[str, str]:
    timestamp = stamp(at)
    return {
        "x-zendesk-webhook-id": "01GQ2XK0Y2Z",
        "x-zendesk-webhook-invocation-id": "8350205582",
        "x-zendesk-webhook-signature-timestamp": timestamp,
        "x-zendesk-webhook-signature": recipe(timestamp, body, secret),
    }


def test_a_recipe_signature_verifies_and_keys_an_event_by_its_id() -> None:
    identity = Zendesk(secret=SECRET).authenticate(signed(), BODY, now=NOW)
    assert identity.event_id == EVENT["id"]
    assert identity.event_type == "zen:event-type:ticket.created"
    assert identity.occurred_at == datetime(2026, 11, 29, 1, 33, 20, tzinfo=UTC)


def test_a_trigger_body_is_keyed_by_the_invocation_id() -> None:
    body = b'{"ticket": "4242", "note": "written by the trigger"}'
    identity = Zendesk(secret=SECRET).authenticate(signed(body), body, now=NOW)
    assert (identity.event_id, identity.event_type) == ("8350205582", None)
    with pytest.raises(PayloadError):
        Zendesk(secret=SECRET).identify({}, body)


@pytest.mark.parametrize(
    "spoil",
    [
        {"x-zendesk-webhook-signature": recipe(stamp(NOW), BODY, "stranger")},
        {"x-zendesk-webhook-signature": recipe("", BODY)},  # the body alone
        {"x-zendesk-webhook-signature-timestamp": stamp(NOW + 1)},  # the timestamp is signed
        {"x-zendesk-webhook-signature": "not base64!"},
    ],
    ids=["wrong-secret", "body-only", "another-timestamp", "not-base64"],
)
def test_forgeries_are_bad_signatures(spoil: dict[str, str]) -> None:
    with pytest.raises(BadSignature):
        Zendesk(secret=SECRET).verify({**signed(), **spoil}, BODY, now=NOW)


def test_a_decoded_secret_is_not_the_key() -> None:
    decoded = base64.b64decode(SECRET).decode()
    with pytest.raises(BadSignature):
        Zendesk(secret=SECRET).verify(signed(secret=decoded), BODY, now=NOW)


@pytest.mark.parametrize("offset", [-301, 301, -3600])
def test_a_timestamp_outside_the_tolerance_is_refused(offset: int) -> None:
    headers = signed(at=NOW + offset)
    with pytest.raises(TimestampOutOfTolerance):
        Zendesk(secret=SECRET).verify(headers, BODY, now=NOW)
    Zendesk(secret=SECRET, tolerance=None).verify(headers, BODY, now=NOW)
    Zendesk(secret=SECRET).verify(signed(at=NOW - 300), BODY, now=NOW)


@pytest.mark.parametrize("timestamp", ["yesterday", "2026-11-29T01:33:20", "1796000000"])
def test_an_unreadable_or_unzoned_timestamp_is_a_bad_signature(timestamp: str) -> None:
    headers = {
        "x-zendesk-webhook-signature-timestamp": timestamp,
        "x-zendesk-webhook-signature": recipe(timestamp, BODY),
    }
    with pytest.raises(BadSignature):
        Zendesk(secret=SECRET).verify(headers, BODY, now=NOW)


def test_a_missing_header_is_a_missing_header() -> None:
    for name in ("x-zendesk-webhook-signature", "x-zendesk-webhook-signature-timestamp"):
        headers = signed()
        del headers[name]
        with pytest.raises(MissingHeader):
            Zendesk(secret=SECRET).verify(headers, BODY, now=NOW)


def test_a_retry_is_a_duplicate(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/zendesk.db")
    inbox.add_source(Zendesk(secret=SECRET))
    now = int(datetime.now(UTC).timestamp())
    first = inbox.receive("zendesk", signed(at=now), BODY)
    again = inbox.receive("zendesk", signed(at=now + 5), BODY)
    forged = inbox.receive("zendesk", signed(at=now, secret="guessed"), BODY)
    stale = inbox.receive("zendesk", signed(at=now - 3600), BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (forged.status_code, stale.status_code) == (401, 401)


def test_the_kits_signer_follows_zendesks_recipe() -> None:
    headers, body = kit_sign(Zendesk(secret=SECRET), EVENT, at=NOW)
    timestamp = headers["X-Zendesk-Webhook-Signature-Timestamp"]
    assert timestamp == stamp(NOW)
    assert headers["X-Zendesk-Webhook-Signature"] == recipe(timestamp, body)
