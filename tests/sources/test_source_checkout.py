"""Checkout.com: judged by Checkout.com's documented recipe (`Cko-Signature`: the hex
HMAC-SHA256 of the raw body, keyed with the webhook's signature key), written again here; the
raw body matters (a body parsed and serialised again, `©` escaped, no longer verifies)."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import CheckoutCom
from hookinbox.testing import sign as kit_sign

KEY = "checkout-signature-key-5b1e"
EVENT = {
    "id": "evt_az5sblvku4ge3dwpztvyizgcau",
    "type": "payment_approved",
    "version": "1.0.33",
    "created_on": "2026-11-30T12:00:00.123Z",
    "data": {"id": "pay_mbabizu24mvu3mela5njyhpit4", "amount": 6540, "reference": "ORD-© 5023"},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def recipe(body: bytes, key: str = KEY) -> dict[str, str]:
    return {"cko-signature": hmac.new(key.encode(), body, hashlib.sha256).hexdigest()}


def test_a_recipe_signature_verifies_and_keys_by_the_body_id() -> None:
    identity = CheckoutCom(secret=KEY).authenticate(recipe(BODY), BODY, now=0)
    assert (identity.event_id, identity.event_type) == (EVENT["id"], "payment_approved")
    assert identity.occurred_at == datetime(2026, 11, 30, 12, 0, 0, 123000, tzinfo=UTC)


def test_the_raw_body_counts_not_its_json() -> None:
    reserialised = json.dumps(EVENT).encode()  # `©` escaped: the same JSON, other bytes
    with pytest.raises(BadSignature):
        CheckoutCom(secret=KEY).verify(recipe(BODY), reserialised, now=0)


@pytest.mark.parametrize(
    "headers",
    [
        recipe(BODY, "stranger"),
        {"cko-signature": hmac.new(KEY.encode(), BODY, hashlib.sha512).hexdigest()},
        {"cko-signature": "sha256=" + recipe(BODY)["cko-signature"]},
        {"cko-signature": "not hex"},
    ],
    ids=["wrong-key", "sha512", "prefixed", "not-hex"],
)
def test_forgeries_are_bad_signatures(headers: dict[str, str]) -> None:
    with pytest.raises(BadSignature):
        CheckoutCom(secret=KEY).verify(headers, BODY, now=0)


def test_no_signature_is_missing_and_no_id_a_payload_error() -> None:
    with pytest.raises(MissingHeader):
        CheckoutCom(secret=KEY).verify({"authorization": KEY}, BODY, now=0)
    body = b'{"type": "payment_approved"}'
    with pytest.raises(PayloadError):
        CheckoutCom(secret=KEY).authenticate(recipe(body), body, now=0)


def test_a_resend_is_a_duplicate_and_a_forgery_401(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/checkout.db")
    inbox.add_source(CheckoutCom(secret=["checkout-next-key", KEY]))
    first = inbox.receive("checkout", {"Cko-Signature": recipe(BODY)["cko-signature"]}, BODY)
    again = inbox.receive("checkout", {"Cko-Signature": recipe(BODY)["cko-signature"]}, BODY)
    forged = inbox.receive("checkout", recipe(BODY, "guess"), BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


def test_the_kits_signer_follows_the_recipe() -> None:
    headers, body = kit_sign(CheckoutCom(secret=KEY), EVENT)
    assert hmac.compare_digest(headers["Cko-Signature"], recipe(body)["cko-signature"])
    assert headers["Cko-Signature"] != recipe(body, "another")["cko-signature"]
