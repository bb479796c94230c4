"""Mailgun: the documented recipe (HMAC-SHA256 of timestamp + token, in the body); Mailgun
publishes no SDK that verifies, nor a usable test vector."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from hookinbox._errors import BadSignature, PayloadError, TimestampOutOfTolerance
from hookinbox.sources import Mailgun
from hookinbox.testing import sign as kit_sign

KEY = "key-mailgun-webhook-signing-3c1f"
PARENT_KEY = "key-mailgun-parent-account-9e0d"
T = 1_796_000_000
TOKEN = "c1a1d3ee8b0cbb07e2ebb07b6cb3a5e1b2c0d9f3e4a5b6c7d8"  # 50 characters, as Mailgun's
EVENT_DATA: dict[str, Any] = {
    "id": "CPgfbmQMTCKtHW6uIWtuVe",
    "event": "delivered",
    "timestamp": 1_796_000_000.25,
    "recipient": "zoe@example.com",
    "message": {"headers": {"message-id": "20261130.1@mg.example.com"}},
}


def mac(key: str, timestamp: str, token: str) -> str:
    return hmac.new(key.encode(), (timestamp + token).encode(), hashlib.sha256).hexdigest()


def body(
    *,
    key: str = KEY,
    t: int = T,
    token: str = TOKEN,
    data: dict[str, Any] = EVENT_DATA,
    **extra: Any,
) -> bytes:
    signature = {"timestamp": str(t), "token": token, "signature": mac(key, str(t), token)}
    return json.dumps({"signature": {**signature, **extra}, "event-data": data}).encode()


def test_a_recipe_signature_verifies_and_keys_by_event_data_id() -> None:
    identity = Mailgun(secret=KEY).authenticate({}, body(), now=T + 5)
    assert (identity.event_id, identity.event_type) == ("CPgfbmQMTCKtHW6uIWtuVe", "delivered")


def test_a_retry_with_a_new_token_is_the_same_event_and_not_a_key_conflict() -> None:
    source = Mailgun(secret=KEY)
    first = source.authenticate({}, body(), now=T)
    retry = source.authenticate({}, body(t=T + 600, token="f" * 50), now=T + 600)
    assert (first.event_id, first.fingerprint) == (retry.event_id, retry.fingerprint)


def test_a_subaccounts_parent_signature_verifies_with_the_parent_key() -> None:
    parent = mac(PARENT_KEY, str(T), TOKEN)
    signed = body(key="key-of-a-subaccount-we-do-not-hold", **{"parent-signature": parent})
    Mailgun(secret=PARENT_KEY).verify({}, signed, now=T)
    with pytest.raises(BadSignature):
        Mailgun(secret=KEY).verify({}, signed, now=T)


@pytest.mark.parametrize(
    "delivery",
    [
        body(key="key-attacker"),
        body().replace(TOKEN.encode(), b"0" * 50),
        b"not json",
        b"[]",
        json.dumps({"event-data": EVENT_DATA}).encode(),
        json.dumps({"signature": "abc", "event-data": EVENT_DATA}).encode(),
        json.dumps({"signature": {"timestamp": str(T), "token": TOKEN}}).encode(),
        json.dumps(
            {"signature": {"timestamp": "soon", "token": TOKEN, "signature": "00"}}
        ).encode(),
    ],
    ids=[
        "wrong-key",
        "changed-token",
        "not-json",
        "not-an-object",
        "no-signature",
        "signature-not-an-object",
        "no-signature-field",
        "timestamp-not-digits",
    ],
)
def test_refusals_are_verification_errors(delivery: bytes) -> None:
    with pytest.raises(BadSignature):
        Mailgun(secret=KEY).verify({}, delivery, now=T)


def test_a_stale_signature_is_refused() -> None:
    with pytest.raises(TimestampOutOfTolerance):
        Mailgun(secret=KEY).verify({}, body(), now=T + 301)


def test_the_signature_does_not_cover_the_event_data() -> None:
    """Mailgun's design, documented in docs/sources/mailgun.md: a signature block verifies
    with any event-data. Only the tolerance and HTTPS bound a replayed block."""
    moved = body(data={**EVENT_DATA, "id": "another-event", "event": "failed"})
    identity = Mailgun(secret=KEY).authenticate({}, moved, now=T)
    assert identity.event_id == "another-event"


@pytest.mark.parametrize(
    "data", [{}, {"id": ""}, {"event": "delivered"}], ids=["empty", "blank-id", "no-id"]
)
def test_authentic_but_no_event_id_is_a_payload_error(data: dict[str, Any]) -> None:
    with pytest.raises(PayloadError):
        Mailgun(secret=KEY).authenticate({}, body(data=data), now=T)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------


def test_the_kits_signer_follows_mailguns_recipe_inside_the_body() -> None:
    _, body = kit_sign(Mailgun(secret="mg"), {"event-data": {"id": "e1"}}, at=1_700_000_000)
    block = json.loads(body)["signature"]
    assert (block["timestamp"], len(block["token"])) == ("1700000000", 50)
    expected = hmac.new(b"mg", f"1700000000{block['token']}".encode(), hashlib.sha256)
    assert block["signature"] == expected.hexdigest()
    _, again = kit_sign(Mailgun(secret="mg"), {"event-data": {"id": "e1"}}, at=1_700_000_000)
    assert json.loads(again)["signature"]["token"] != block["token"]  # new on every attempt
