"""Razorpay: judged by Razorpay's own SDK (`razorpay` on PyPI,
`Utility.verify_webhook_signature`), and by the documented recipe (the hex HMAC-SHA256 of the
raw body with the webhook secret, in `X-Razorpay-Signature`)."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest
import razorpay
from razorpay.errors import SignatureVerificationError

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import Razorpay
from hookinbox.testing import sign as kit_sign

SECRET = "razorpay-webhook-secret-9d2e"
EVENT = {
    "entity": "event",
    "account_id": "acc_BFQ7uQEaa7j2z7",
    "event": "payment.captured",
    "contains": ["payment"],
    "payload": {
        "payment": {"entity": {"id": "pay_DESlfW9H8K9uqM", "amount": 100, "status": "captured"}}
    },
    "created_at": 1_796_000_000,
}
BODY = json.dumps(EVENT).encode()
EVENT_ID = "KbCVlHZA3HTkLo"


def recipe(body: bytes = BODY, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signed(body: bytes = BODY, secret: str = SECRET) -> dict[str, str]:
    return {"x-razorpay-signature": recipe(body, secret), "x-razorpay-event-id": EVENT_ID}


def sdk_verifies(body: bytes, signature: str, secret: str) -> bool:
    """Razorpay's verdict: `verify_webhook_signature` raises on a mismatch (it takes text)."""
    utility = razorpay.Client(auth=("rzp_test_key", "rzp_test_secret")).utility
    try:
        utility.verify_webhook_signature(body.decode(), signature, secret)
    except SignatureVerificationError:
        return False
    return True


def test_razorpays_sdk_and_the_source_agree_on_a_recipe_signature() -> None:
    headers = signed()
    assert sdk_verifies(BODY, headers["x-razorpay-signature"], SECRET)
    identity = Razorpay(secret=SECRET).authenticate(headers, BODY, now=0)
    assert (identity.event_id, identity.event_type) == (EVENT_ID, "payment.captured")
    assert identity.occurred_at == datetime.fromtimestamp(1_796_000_000, UTC)


def test_what_razorpays_sdk_refuses_the_source_refuses() -> None:
    stranger = signed(secret="guessed")
    assert not sdk_verifies(BODY, stranger["x-razorpay-signature"], SECRET)
    with pytest.raises(BadSignature):
        Razorpay(secret=SECRET).verify(stranger, BODY, now=0)
    changed = BODY.replace(b"100", b"999")
    assert not sdk_verifies(changed, signed()["x-razorpay-signature"], SECRET)
    with pytest.raises(BadSignature):
        Razorpay(secret=SECRET).verify(signed(), changed, now=0)


@pytest.mark.parametrize(
    "signature",
    [
        "sha256=" + recipe(),
        hmac.new(SECRET.encode(), BODY, hashlib.sha1).hexdigest(),
        hmac.new(SECRET.encode(), BODY, hashlib.sha512).hexdigest(),
        "zz",
    ],
    ids=["prefixed", "sha1-digest", "sha512-digest", "not-hex"],
)
def test_forgeries_are_bad_signatures(signature: str) -> None:
    with pytest.raises(BadSignature):
        Razorpay(secret=SECRET).verify({"x-razorpay-signature": signature}, BODY, now=0)


def test_no_signature_header_is_a_missing_header() -> None:
    with pytest.raises(MissingHeader):
        Razorpay(secret=SECRET).verify({"x-razorpay-event-id": EVENT_ID}, BODY, now=0)


def test_a_rotated_secret_still_verifies_while_both_are_configured() -> None:
    source = Razorpay(secret=["new-secret", SECRET])
    assert source.authenticate(signed(), BODY, now=0).event_id == EVENT_ID


@pytest.mark.parametrize("headers", [{}, {"x-razorpay-event-id": ""}])
def test_an_authentic_delivery_without_an_event_id_is_a_payload_error(
    headers: dict[str, str],
) -> None:
    with pytest.raises(PayloadError):
        Razorpay(secret=SECRET).identify(headers, BODY)


def test_a_retry_under_the_same_event_id_is_a_duplicate(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/razorpay.db")
    inbox.add_source(Razorpay(secret=SECRET))
    first = inbox.receive("razorpay", signed(), BODY)
    again = inbox.receive("razorpay", signed(), BODY)
    forged = inbox.receive("razorpay", signed(secret="guessed"), BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------


def test_the_kits_signer_is_verified_by_razorpays_sdk() -> None:
    headers, body = kit_sign(Razorpay(secret="rzp-kit"), {"event": "order.paid", "note": "café ☕"})
    assert sdk_verifies(body, headers["X-Razorpay-Signature"], "rzp-kit")
    assert not sdk_verifies(body, headers["X-Razorpay-Signature"], "another")
    assert headers["X-Razorpay-Event-Id"]
