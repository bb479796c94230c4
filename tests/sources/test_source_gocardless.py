"""GoCardless: judged by GoCardless's own SDK (`gocardless_pro.webhooks.parse`, which checks
`Webhook-Signature` and reads the events), and by the documented recipe (the hex HMAC-SHA256 of
the raw body, keyed with the endpoint's secret) written again here."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from gocardless_pro import webhooks
from gocardless_pro.errors import InvalidSignatureError

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import GoCardless
from hookinbox.testing import sign as kit_sign

SECRET = "gocardless-endpoint-secret-7f3a"


def event(ident: str, resource: str = "payments", action: str = "confirmed") -> dict[str, object]:
    return {
        "id": ident,
        "created_at": "2026-11-30T17:01:06.000Z",
        "resource_type": resource,
        "action": action,
        "details": {"origin": "gocardless", "cause": "payment_confirmed", "note": "café"},
        "metadata": {},
        "links": {"payment": "PM123"},
    }


def webhook(*events: dict[str, object], webhook_id: str = "WB0001") -> bytes:
    body = {"events": list(events), "meta": {"webhook_id": webhook_id}}
    return json.dumps(body, ensure_ascii=False).encode()


def recipe(body: bytes, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_each_event_of_a_webhook_is_its_own_and_the_sdk_reads_the_same() -> None:
    body = webhook(event("EV0001"), event("EV0002", "mandates", "cancelled"))
    signature = recipe(body)
    first, second = GoCardless(secret=SECRET).authenticate_batch(
        {"webhook-signature": signature}, body, now=0
    )
    parsed = webhooks.parse(body, SECRET, signature)  # the SDK verifies, then reads
    assert [first.event_id, second.event_id] == [e.id for e in parsed] == ["EV0001", "EV0002"]
    assert (first.event_type, second.event_type) == ("payments.confirmed", "mandates.cancelled")
    assert first.occurred_at == datetime(2026, 11, 30, 17, 1, 6, tzinfo=UTC)
    assert json.loads(first.body or b"") == event("EV0001")


@pytest.mark.parametrize(
    "signature",
    [
        recipe(webhook(event("EV1")), "stranger"),
        hmac.new(SECRET.encode(), webhook(event("EV1")), hashlib.sha1).hexdigest(),
        "sha256=" + recipe(webhook(event("EV1"))),
        "zz",
    ],
    ids=["wrong-secret", "sha1-digest", "prefixed", "not-hex"],
)
def test_what_the_sdk_refuses_is_refused(signature: str) -> None:
    body = webhook(event("EV1"))
    with pytest.raises(InvalidSignatureError):
        webhooks.parse(body, SECRET, signature)
    with pytest.raises(BadSignature):
        GoCardless(secret=SECRET).verify({"webhook-signature": signature}, body, now=0)


def test_a_changed_body_and_a_missing_header() -> None:
    body = webhook(event("EV1"))
    with pytest.raises(BadSignature):
        GoCardless(secret=SECRET).verify(
            {"webhook-signature": recipe(body)}, body.replace(b"EV1", b"EV2"), now=0
        )
    with pytest.raises(MissingHeader):
        GoCardless(secret=SECRET).verify({}, body, now=0)


@pytest.mark.parametrize(
    "body", [b"[]", b'{"meta": {}}', b'{"events": {}}', b'{"events": []}', b"not json"]
)
def test_a_body_that_is_no_webhook_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        GoCardless(secret=SECRET).authenticate_batch(
            {"webhook-signature": recipe(body)}, body, now=0
        )


def test_an_event_without_an_id_is_kept_invalid_beside_the_others() -> None:
    broken = {k: v for k, v in event("EV9").items() if k != "id"}
    body = webhook(event("EV1"), broken)
    good, bad = GoCardless(secret=SECRET).authenticate_batch(
        {"webhook-signature": recipe(body)}, body, now=0
    )
    assert (good.invalid, bad.invalid) == (None, "no event id in the delivery")


def test_a_retried_webhook_is_a_duplicate_and_a_forgery_401(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/gocardless.db")
    inbox.add_source(GoCardless(secret=["gocardless-next-secret", SECRET]))
    body = webhook(event("EV1"), event("EV2"))
    first = inbox.receive("gocardless", {"Webhook-Signature": recipe(body)}, body)
    again = inbox.receive("gocardless", {"Webhook-Signature": recipe(body)}, body)
    forged = inbox.receive("gocardless", {"Webhook-Signature": recipe(body, "guess")}, body)
    inbox.close()
    assert (first.body["accepted"], again.body["duplicates"]) == (2, 2)
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


def test_the_kits_signer_is_accepted_by_the_sdk() -> None:
    headers, body = kit_sign(GoCardless(secret=SECRET), webhook(event("EV7")))
    [parsed] = webhooks.parse(body, SECRET, headers["Webhook-Signature"])
    assert parsed.id == "EV7"
    with pytest.raises(InvalidSignatureError):
        webhooks.parse(body, "another-secret", headers["Webhook-Signature"])
