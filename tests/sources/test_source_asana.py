"""Asana: judged by Asana's documented recipe, written again here ("Establish a webhook": the
handshake POST with `X-Hook-Secret`, answered 200 echoing it; deliveries signed with
`X-Hook-Signature`, the hex HMAC-SHA256 of the body under that secret; the empty `events`
heartbeat). Asana publishes no verifier.

The trust on first use runs through a real database (SQLite here; the gateway's statements on
every database in tests/storage/test_trust.py): a handshake is believed only inside a window,
the window closes at the first one, and what one inbox learned is what another inbox on the
same database (another process, or the same after a restart) verifies with.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.support.asgi import ASGIClient

from hookinbox import Inbox
from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    Handshake,
    PayloadError,
    VerificationError,
)
from hookinbox.sources import Asana, Stripe

SECRET = "b537207f20cbfa02357cf448134da559e8bd39d61597dcd5631b8012eae53e81"


def event(gid: str, action: str = "changed") -> dict[str, Any]:
    return {
        "user": {"gid": "1200000000000001", "resource_type": "user"},
        "created_at": "2026-11-30T12:00:00.000Z",
        "action": action,
        "resource": {"gid": gid, "resource_type": "task"},
        "parent": None,
        "change": {"field": "completed", "action": "changed"},
    }


def body_of(*events: dict[str, Any]) -> bytes:
    return json.dumps({"events": list(events)}).encode()


def signed(body: bytes, secret: str = SECRET) -> dict[str, str]:
    """Asana's recipe: `X-Hook-Signature` = hex HMAC-SHA256 of the body, keyed by the secret."""
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"content-type": "application/json", "x-hook-signature": digest}


# -- the source alone: a configured secret -----------------------------------------------------


def test_a_configured_secret_verifies_without_any_handshake() -> None:
    source = Asana(secret=SECRET)
    body = body_of(event("1201"), event("1202", "added"))
    first, second = source.authenticate_batch(signed(body), body, now=0)
    assert first.event_id.startswith("1201:changed:") and second.event_type == "task.added"
    assert first.occurred_at is not None
    with pytest.raises(BadSignature):
        source.authenticate_batch(signed(body, "f" * 64), body, now=0)
    with pytest.raises(VerificationError):  # no signature at all
        source.authenticate_batch({}, body, now=0)


def test_the_heartbeat_is_answered_and_not_an_event() -> None:
    body = body_of()
    with pytest.raises(Handshake) as raised:
        Asana(secret=SECRET).authenticate_batch(signed(body), body, now=0)
    assert (raised.value.status, raised.value.answer) == (200, "")


def test_without_a_store_a_handshake_is_refused_and_the_secret_not_in_the_refusal() -> None:
    with pytest.raises(BadSignature) as raised:
        Asana().authenticate_batch({"x-hook-secret": SECRET}, b"", now=0)
    assert SECRET not in raised.value.message


@pytest.mark.parametrize(
    "offered", ["short", "a" * 300, "ab\r\nset-cookie: x=1", "<script>" + "a" * 20]
)
def test_a_secret_that_could_not_be_echoed_safely_is_refused(offered: str) -> None:
    with pytest.raises(BadSignature):
        Asana().authenticate_batch({"x-hook-secret": offered}, b"", now=0)


def test_an_event_without_resource_or_action_is_invalid_not_the_batch() -> None:
    body = body_of(event("1203"), {"action": "changed"})
    kept, unusable = Asana(secret=SECRET).authenticate_batch(signed(body), body, now=0)
    assert kept.invalid is None and unusable.invalid is not None
    with pytest.raises(PayloadError):
        Asana(secret=SECRET).authenticate_batch(signed(b"[]"), b"[]", now=0)


# -- trust on first use, end to end ------------------------------------------------------------


def inbox_at(path: Path) -> Inbox:
    inbox = Inbox(f"sqlite:///{path / 'asana.db'}")
    inbox.add_source(Asana())
    inbox.add_source(Stripe(secret="whsec_x"))
    return inbox


def test_a_handshake_inside_the_window_is_echoed_and_learned_by_every_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    inbox = inbox_at(tmp_path)
    client = ASGIClient(inbox.asgi())
    before = client.post("/webhooks/asana", headers={"x-hook-secret": SECRET}, content=b"")
    inbox.trust("asana", window=timedelta(minutes=10))
    shaken = client.post("/webhooks/asana", headers={"x-hook-secret": SECRET}, content=b"")
    replayed = client.post("/webhooks/asana", headers={"x-hook-secret": SECRET}, content=b"")
    forged = client.post(
        "/webhooks/asana", headers={"x-hook-secret": "c" * 64}, content=b""
    )  # a second handshake, after the first closed the window
    body = body_of(event("1301"))
    delivered = client.post("/webhooks/asana", headers=signed(body), content=body)
    wrong_key = client.post("/webhooks/asana", headers=signed(body, "c" * 64), content=body)
    inbox.close()
    # Another process (or this one restarted): the secret is in the database.
    other = inbox_at(tmp_path)
    again = ASGIClient(other.asgi()).post("/webhooks/asana", headers=signed(body), content=body)
    fresh = body_of(event("1302"))
    accepted = other.receive("asana", signed(fresh), fresh)
    other.close()
    assert (before.status_code, before.json()["error"]) == (401, "invalid_signature")
    assert "x-hook-secret" not in before.headers
    assert (shaken.status_code, shaken.headers["x-hook-secret"], shaken.content) == (
        200,
        SECRET,
        b"",
    )
    assert replayed.status_code == forged.status_code == 401  # the window closed at the first
    assert delivered.json()["accepted"] == 1
    assert wrong_key.status_code == 401
    assert again.json()["duplicates"] == 1
    assert accepted.body["accepted"] == 1
    assert SECRET not in caplog.text and "c" * 64 not in caplog.text


def test_a_delivery_signed_before_any_handshake_is_refused(tmp_path: Path) -> None:
    inbox = inbox_at(tmp_path)
    body = body_of(event("1401"))
    try:
        reply = inbox.receive("asana", signed(body), body)
    finally:
        inbox.close()
    assert (reply.status_code, reply.body["error"]) == (401, "invalid_signature")


def test_trust_is_refused_for_a_source_that_learns_nothing(tmp_path: Path) -> None:
    inbox = inbox_at(tmp_path)
    try:
        with pytest.raises(ConfigurationError):
            inbox.trust("stripe")
        with pytest.raises(ConfigurationError):
            inbox.trust("asana", window=timedelta(days=2))
    finally:
        inbox.close()
