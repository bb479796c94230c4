"""Paystack: judged by Paystack's documented recipe (`x-paystack-signature`: the hex
HMAC-SHA512 of the raw body, keyed with the account's secret key). Paystack publishes no
Python library that verifies, nor a key with a signed example."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import Paystack
from hookinbox.testing import sign as kit_sign

SECRET = "sk_test_4f1e9c0a7b2d5e8f3a6c9b0d1e2f3a4b5c6d7e8f"
EVENT = {
    "event": "charge.success",
    "data": {
        "id": 302961,
        "domain": "live",
        "status": "success",
        "reference": "qTPrJoy9Bx",
        "amount": 10000,
        "paid_at": "2016-09-30T21:10:19.000Z",
        "created_at": "2016-09-30T21:09:56.000Z",
        "customer": {"first_name": "Adéwálé", "email": "ade@example.com"},
    },
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def recipe(body: bytes, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha512).hexdigest()


def test_a_recipe_signature_verifies_and_keys_by_event_and_object() -> None:
    identity = Paystack(secret=SECRET).authenticate(
        {"x-paystack-signature": recipe(BODY)}, BODY, now=0
    )
    assert (identity.event_id, identity.event_type) == ("charge.success:302961", "charge.success")
    assert identity.occurred_at == datetime(2016, 9, 30, 21, 10, 19, tzinfo=UTC)


@pytest.mark.parametrize(
    "signature",
    [
        recipe(BODY, "sk_test_stranger"),
        hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest(),
        "sha512=" + recipe(BODY),
        "zz",
    ],
    ids=["wrong-key", "sha256-digest", "prefixed", "not-hex"],
)
def test_forgeries_are_bad_signatures(signature: str) -> None:
    with pytest.raises(BadSignature):
        Paystack(secret=SECRET).verify({"x-paystack-signature": signature}, BODY, now=0)


def test_a_changed_body_is_refused_and_no_header_is_missing() -> None:
    with pytest.raises(BadSignature):
        Paystack(secret=SECRET).verify(
            {"x-paystack-signature": recipe(BODY)}, BODY.replace(b"10000", b"99999"), now=0
        )
    with pytest.raises(MissingHeader):
        Paystack(secret=SECRET).verify({}, BODY, now=0)


@pytest.mark.parametrize(
    "body", [b"[]", b'{"event": "charge.success"}', b'{"data": {"id": 1}}', b'{"event": 1}']
)
def test_a_body_that_names_no_event_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        Paystack(secret=SECRET).identify({}, body)


def test_a_retry_is_a_duplicate_and_another_event_of_the_object_is_new(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/paystack.db")
    inbox.add_source(Paystack(secret=SECRET))
    first = inbox.receive("paystack", {"x-paystack-signature": recipe(BODY)}, BODY)
    again = inbox.receive("paystack", {"x-paystack-signature": recipe(BODY)}, BODY)
    refund = json.dumps({**EVENT, "event": "refund.processed"}).encode()
    other = inbox.receive("paystack", {"x-paystack-signature": recipe(refund)}, refund)
    forged = inbox.receive("paystack", {"x-paystack-signature": recipe(BODY, "sk_x")}, BODY)
    inbox.close()
    assert [r.body["status"] for r in (first, again, other)] == [
        "accepted",
        "duplicate",
        "accepted",
    ]
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


def test_the_kits_signer_follows_paystacks_recipe() -> None:
    headers, body = kit_sign(Paystack(secret="sk_test_kit"), EVENT)
    assert headers["x-paystack-signature"] == recipe(body, "sk_test_kit")
