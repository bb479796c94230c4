"""Calendly: the documented recipe (Calendly has no SDK that verifies), and the derived key."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from hookinbox._errors import BadSignature, MissingHeader, PayloadError, TimestampOutOfTolerance
from hookinbox.sources import Calendly
from hookinbox.testing import sign as kit_sign

SECRET = "calendly-signing-key-6f1e"
T = 1_796_000_000
INVITEE = "https://api.calendly.com/scheduled_events/GBGBDCAADAEDCRZ2/invitees/AAAAAAAAAAAAAAAA"
EVENT: dict[str, Any] = {
    "event": "invitee.created",
    "created_at": "2026-11-30T09:00:00.000000Z",
    "created_by": "https://api.calendly.com/users/AAAAAAAAAAAAAAAA",
    "payload": {"uri": INVITEE, "email": "zoe@example.com", "name": "Zoë"},
}


def body_of(event: dict[str, Any]) -> bytes:
    return json.dumps(event, ensure_ascii=False).encode()


def header(body: bytes, secret: str = SECRET, t: int = T) -> dict[str, str]:
    """Calendly's recipe: HMAC-SHA256 of `{t}.{body}`, hex, as `t=...,v1=...`."""
    digest = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return {"calendly-webhook-signature": f"t={t},v1={digest}"}


def test_a_recipe_signature_verifies_and_keys_by_event_and_invitee() -> None:
    body = body_of(EVENT)
    identity = Calendly(secret=SECRET).authenticate(header(body), body, now=T + 10)
    assert identity.event_id == f"invitee.created:{INVITEE}"
    assert identity.event_type == "invitee.created"


def test_a_retry_signed_later_is_the_same_event() -> None:
    body = body_of(EVENT)
    source = Calendly(secret=SECRET)
    first = source.authenticate(header(body), body, now=T)
    retry = source.authenticate(header(body, t=T + 3600), body, now=T + 3600)
    assert first.event_id == retry.event_id


def test_a_cancellation_of_the_same_invitee_is_another_event() -> None:
    canceled = body_of({**EVENT, "event": "invitee.canceled"})
    identity = Calendly(secret=SECRET).identify({}, canceled)
    assert identity.event_id == f"invitee.canceled:{INVITEE}"


def test_events_that_recur_on_one_resource_add_their_time() -> None:
    uri = "https://api.calendly.com/event_types/AAAAAAAAAAAAAAAA"
    first = {"event": "event_type.updated", "created_at": "2026-11-30T09:00:00Z", "payload": {}}
    first["payload"] = {"uri": uri}
    second = {**first, "created_at": "2026-11-30T10:00:00Z"}
    keys = {Calendly(secret=SECRET).identify({}, body_of(e)).event_id for e in (first, second)}
    assert keys == {
        f"event_type.updated:{uri}:2026-11-30T09:00:00Z",
        f"event_type.updated:{uri}:2026-11-30T10:00:00Z",
    }


def test_forged_stale_and_missing_are_refused() -> None:
    body = body_of(EVENT)
    source = Calendly(secret=SECRET)
    with pytest.raises(BadSignature):
        source.verify(header(body, secret="attacker"), body, now=T)
    with pytest.raises(TimestampOutOfTolerance):
        source.verify(header(body), body, now=T + 301)
    with pytest.raises(MissingHeader):
        source.verify({}, body, now=T)
    with pytest.raises(BadSignature):
        source.verify(header(body + b" "), body, now=T)


@pytest.mark.parametrize(
    "event",
    [
        {"created_at": "2026-11-30T09:00:00Z", "payload": {"uri": INVITEE}},
        {"event": "invitee.created", "payload": {}},
        {"event": "event_type.updated", "payload": {"uri": INVITEE}},  # no created_at
    ],
    ids=["no-event", "no-uri", "no-time-for-a-recurring-event"],
)
def test_a_body_naming_no_event_is_a_payload_error(event: dict[str, Any]) -> None:
    with pytest.raises(PayloadError):
        Calendly(secret=SECRET).identify({}, body_of(event))


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_follows_calendlys_recipe() -> None:
    headers, body = kit_sign(Calendly(secret="cal"), KIT_EVENT, at=1_700_000_000)
    digest = hmac.new(b"cal", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert headers["Calendly-Webhook-Signature"] == f"t=1700000000,v1={digest}"
