"""Paddle Billing: signatures made with Paddle's own SDK (`paddle-python-sdk`), checked by ours."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paddle_billing.Notifications import PaddleSignature, Secret, Verifier

from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    MissingHeader,
    PayloadError,
    TimestampOutOfTolerance,
    VerificationError,
)
from hookinbox.sources import Paddle
from hookinbox.testing import sign as kit_sign

T = 1_700_000_000
NOW = float(T)
SECRET = "pdl_ntfset_01h8bzam1z32agrxjwhjgqk8w6_current"
OLD_SECRET = "pdl_ntfset_01h8bzam1z32agrxjwhjgqk8w6_previous"
EVENT: dict[str, Any] = {
    "event_id": "evt_01h8bzakzx3hm2fmen703n5q45",
    "event_type": "transaction.paid",
    "occurred_at": "2023-08-21T11:57:47.390028Z",
    "notification_id": "ntf_01h8bzam1z32agrxjwhjgqk8w6",
    "data": {"id": "txn_01h8bz9n8v1rkxq1m9cyq6wj7h", "status": "paid", "customer": "Zoë"},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def h1(body: bytes = BODY, secret: str = SECRET, timestamp: int = T) -> str:
    """The `h1` value as Paddle's SDK computes it: HMAC-SHA256 of `{ts}:{body}`, hex."""
    signed = f"{timestamp}:".encode() + body
    return str(PaddleSignature.calculate_hmac(secret, signed).hexdigest())


def header(body: bytes = BODY, secret: str = SECRET, timestamp: int = T) -> str:
    return f"ts={timestamp};h1={h1(body, secret, timestamp)}"


def verify(
    value: str,
    body: bytes = BODY,
    *,
    now: float = NOW,
    secret: str | list[str] = SECRET,
    tolerance: float | None = 300.0,
) -> None:
    Paddle(secret=secret, tolerance=tolerance).verify({"paddle-signature": value}, body, now=now)


class SDKRequest:
    """The shape Paddle's `Verifier` reads: `headers` and a raw `body`."""

    def __init__(self, value: str, body: bytes) -> None:
        self.headers = {"Paddle-Signature": value}
        self.body = body


def sdk_accepts(value: str, body: bytes, secret: str) -> bool:
    try:
        return bool(Verifier().verify(SDKRequest(value, body), Secret(secret), False))
    except (ValueError, ConnectionRefusedError):
        return False


# -- verification ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [BODY, b"{}", b"", '{"note": "caf\u00e9 \u2603 \U0001f600"}'.encode(), b'{"a": 1}\r\n'],
    ids=["event", "empty-object", "empty-body", "non-ascii", "trailing-newline"],
)
def test_sdk_signature_verifies_and_the_sdk_agrees(body: bytes) -> None:
    verify(header(body), body)
    assert sdk_accepts(header(body), body, SECRET)


def test_any_h1_may_match_and_secrets_rotate() -> None:
    both = f"ts={T};h1={h1(secret=OLD_SECRET)};h1={h1(secret=SECRET)}"
    verify(both, secret=SECRET)
    verify(both, secret=OLD_SECRET)
    verify(header(secret=OLD_SECRET), secret=[SECRET, OLD_SECRET])
    with pytest.raises(BadSignature):
        verify(header(secret=OLD_SECRET), secret=SECRET)


def test_unknown_schemes_and_malformed_h1_do_not_hide_a_valid_one() -> None:
    # Paddle's SDK raises on an unknown key; a future `h2` must not break verification here.
    value = f"ts={T};h2=abcd;h1=not-hex;h1=;h1={h1()};garbage"
    verify(value)
    assert not sdk_accepts(value, BODY, SECRET)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda b: b.replace(b"paid", b"paiD"),
        lambda b: b + b" ",
        lambda b: b[:-1],
    ],
    ids=["changed", "appended", "truncated"],
)
def test_tampered_body_is_bad_signature(spoil: Any) -> None:
    with pytest.raises(BadSignature):
        verify(header(), spoil(BODY))


def test_the_timestamp_is_signed() -> None:
    with pytest.raises(BadSignature):
        verify(f"ts={T + 1};h1={h1()}", now=NOW)


def test_wrong_secret_is_bad_signature_and_the_sdk_agrees() -> None:
    forged = header(secret="pdl_ntfset_attacker")
    with pytest.raises(BadSignature):
        verify(forged)
    assert not sdk_accepts(forged, BODY, SECRET)


@pytest.mark.parametrize("headers", [{}, {"paddle-signature": ""}, {"x-paddle-signature": "ts=1"}])
def test_missing_header(headers: dict[str, str]) -> None:
    with pytest.raises(MissingHeader):
        Paddle(secret=SECRET).verify(headers, BODY, now=NOW)


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("h1=" + "0" * 64, "Paddle-Signature has no timestamp"),
        (f"ts={T}", "Paddle-Signature has no h1 signature"),
        (f"ts={T},h1={'0' * 64}", "Paddle-Signature has no h1 signature"),  # Stripe's separator
        (f"ts=abc;h1={'0' * 64}", "malformed signature timestamp"),
        (f"ts=-5;h1={'0' * 64}", "malformed signature timestamp"),
        (f"ts={'9' * 40};h1={'0' * 64}", "malformed signature timestamp"),
        ("ts=\u0661\u0662;h1=" + "0" * 64, "malformed signature timestamp"),
        (f"ts={T};h1={'0' * 64}", "No signature on the delivery matches"),
    ],
)
def test_malformed_header_is_bad_signature(value: str, detail: str) -> None:
    with pytest.raises(BadSignature, match=detail):
        verify(value)


@pytest.mark.parametrize("offset", [-300, 0, 5, 300])
def test_default_tolerance_is_300_seconds_both_ways(offset: int) -> None:
    verify(header(), now=NOW + offset)
    verify(header(), now=NOW - offset)


@pytest.mark.parametrize("offset", [301, -301, 86_400])
def test_outside_the_tolerance(offset: int) -> None:
    with pytest.raises(TimestampOutOfTolerance):
        verify(header(), now=NOW + offset)


def test_the_sdk_tolerance_of_5_seconds_can_be_chosen() -> None:
    verify(header(), now=NOW + 5, tolerance=5)
    with pytest.raises(TimestampOutOfTolerance):
        verify(header(), now=NOW + 6, tolerance=5)
    verify(header(), now=NOW + 10**9, tolerance=None)


def test_a_forged_old_delivery_is_reported_as_forged() -> None:
    with pytest.raises(BadSignature):
        verify(header(secret="pdl_attacker", timestamp=T - 3600))


@pytest.mark.parametrize("secret", ["", [], [SECRET, ""], "\ud800"])
def test_invalid_secret_is_configuration_error(secret: object) -> None:
    with pytest.raises(ConfigurationError):
        Paddle(secret=secret)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    body=st.text(max_size=200).map(str.encode),
    secret=st.text(min_size=1, max_size=30).filter(str.strip),
    timestamp=st.integers(min_value=0, max_value=10**11),
    valid=st.booleans(),
)
def test_we_accept_exactly_what_the_sdk_accepts(
    body: bytes, secret: str, timestamp: int, valid: bool
) -> None:
    value = header(body, secret if valid else secret + "x", timestamp)
    try:
        Paddle(secret=secret, tolerance=None).verify({"paddle-signature": value}, body, now=NOW)
        ours = True
    except VerificationError:
        ours = False
    assert ours == sdk_accepts(value, body, secret) == valid


# -- identification ------------------------------------------------------------------------------


def test_identify_reads_event_id_type_and_time() -> None:
    identity = Paddle(secret=SECRET).authenticate({"paddle-signature": header()}, BODY, now=NOW)
    assert identity.event_id == "evt_01h8bzakzx3hm2fmen703n5q45"
    assert identity.event_type == "transaction.paid"
    assert identity.occurred_at == datetime(2023, 8, 21, 11, 57, 47, 390028, tzinfo=UTC)
    assert identity.payload == EVENT


def test_notification_id_is_not_the_key() -> None:
    # Another destination (or a replay) gets a new notification id for the same event.
    other = json.dumps({**EVENT, "notification_id": "ntf_other"}).encode()
    identity = Paddle(secret=SECRET).identify({}, other)
    assert identity.event_id == EVENT["event_id"]


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        json.dumps({"event_type": "transaction.paid"}).encode(),
        json.dumps({"event_id": ""}).encode(),
        json.dumps({"event_id": ["evt_1"]}).encode(),
        json.dumps({"id": "evt_1"}).encode(),  # Stripe's field, not Paddle's
    ],
)
def test_unusable_body_is_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        Paddle(secret=SECRET).identify({}, body)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


class _PaddleRequest:
    def __init__(self, headers: dict[str, str], body: bytes) -> None:
        self.headers = headers
        self.body = self.content = self.data = body


def test_the_kits_signer_is_verified_by_paddles_sdk() -> None:
    headers, body = kit_sign(Paddle(secret="pdl_ntfset_1"), KIT_EVENT)
    assert Verifier().verify(_PaddleRequest(headers, body), Secret("pdl_ntfset_1"))
    assert not Verifier().verify(_PaddleRequest(headers, body), Secret("pdl_ntfset_2"))
