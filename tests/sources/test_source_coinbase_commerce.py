"""Coinbase Commerce: judged by Coinbase Commerce's Python library (`coinbase-commerce`,
`Webhook.construct_event`, which checks `X-CC-Webhook-Signature` and reads the event; archived
by Coinbase, still the provider's own verifier), and by the documented recipe (the hex
HMAC-SHA256 of the raw body, keyed with the shared secret) written again here."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from coinbase_commerce.error import SignatureVerificationError
from coinbase_commerce.webhook import Webhook

from hookinbox import Inbox, Reply
from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import CoinbaseCommerce
from hookinbox.testing import sign as kit_sign

SECRET = "cc-shared-secret-0b7d"
EVENT = {
    "id": "24934862-5f43-4a54-8e5f-3f7d7d3a1e29",
    "resource": "event",
    "type": "charge:confirmed",
    "api_version": "2018-03-22",
    "created_at": "2026-11-30T20:49:02Z",
    "data": {"code": "66BEOV2A", "name": "The Sovereign Individual", "note": "café"},
}


def delivery(attempt: int = 1, event: dict[str, object] = EVENT) -> bytes:
    body = {"id": 1, "scheduled_for": f"2026-11-30T20:5{attempt}:02Z", "attempt_number": attempt}
    return json.dumps({**body, "event": event}, ensure_ascii=False).encode()


def recipe(body: bytes, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_the_event_is_the_key_and_the_library_reads_the_same() -> None:
    body = delivery()
    signature = recipe(body)
    identity = CoinbaseCommerce(secret=SECRET).authenticate(
        {"x-cc-webhook-signature": signature}, body, now=0
    )
    event = Webhook.construct_event(body.decode(), signature, SECRET)
    assert identity.event_id == event.id == EVENT["id"]
    assert identity.event_type == event.type == "charge:confirmed"
    assert identity.occurred_at == datetime(2026, 11, 30, 20, 49, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    "signature",
    [
        recipe(delivery(), "stranger"),
        hmac.new(SECRET.encode(), delivery(), hashlib.sha512).hexdigest(),
        "sha256=" + recipe(delivery()),
    ],
    ids=["wrong-secret", "sha512", "prefixed"],
)
def test_what_the_library_refuses_is_refused(signature: str) -> None:
    with pytest.raises(SignatureVerificationError):
        Webhook.construct_event(delivery().decode(), signature, SECRET)
    with pytest.raises(BadSignature):
        CoinbaseCommerce(secret=SECRET).verify(
            {"x-cc-webhook-signature": signature}, delivery(), now=0
        )


def test_a_changed_body_and_a_missing_header() -> None:
    body = delivery()
    with pytest.raises(BadSignature):
        CoinbaseCommerce(secret=SECRET).verify(
            {"x-cc-webhook-signature": recipe(body)}, delivery(attempt=2), now=0
        )
    with pytest.raises(MissingHeader):
        CoinbaseCommerce(secret=SECRET).verify({}, body, now=0)


@pytest.mark.parametrize(
    "body", [b'{"id": 1}', b'{"event": "charge:confirmed"}', b'{"event": {"type": "x"}}']
)
def test_no_event_or_no_event_id_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        CoinbaseCommerce(secret=SECRET).authenticate(
            {"x-cc-webhook-signature": recipe(body)}, body, now=0
        )


def test_a_retry_counts_its_attempt_and_is_still_a_duplicate(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/coinbase.db")
    inbox.add_source(CoinbaseCommerce(secret=["cc-next-secret", SECRET]))
    first, retry = delivery(1), delivery(2)

    def post(body: bytes, secret: str = SECRET) -> Reply:
        return inbox.receive(
            "coinbase-commerce", {"X-CC-Webhook-Signature": recipe(body, secret)}, body
        )

    replies = [post(first), post(retry)]
    conflict = post(delivery(3, {**EVENT, "type": "charge:failed"}))  # the same id, other event
    forged = post(first, "guessed")
    event = inbox.store.get_event("coinbase-commerce", str(EVENT["id"]))
    inbox.close()
    assert [r.body["status"] for r in replies] == ["accepted", "duplicate"]
    assert conflict.key_conflict
    assert event is not None and (event.delivery_count, event.key_conflicts) == (3, 1)
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


def test_the_kits_signer_is_accepted_by_the_library() -> None:
    headers, body = kit_sign(CoinbaseCommerce(secret=SECRET), json.loads(delivery()))
    event = Webhook.construct_event(body.decode(), headers["X-CC-Webhook-Signature"], SECRET)
    assert event.id == EVENT["id"]
    with pytest.raises(SignatureVerificationError):
        Webhook.construct_event(body.decode(), headers["X-CC-Webhook-Signature"], "another")
