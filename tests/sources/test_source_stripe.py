"""Stripe: signatures from the official `stripe` library, checked against our verifier."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import pytest
import stripe
from hypothesis import given, settings
from hypothesis import strategies as st

from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    MissingHeader,
    PayloadError,
    TimestampOutOfTolerance,
    VerificationError,
)
from hookinbox.sources import Identity, Stripe
from hookinbox.testing import sign as kit_sign

T = 1_700_000_000
NOW = float(T)
SECRET = "whsec_current_0123456789abcdef"
OLD_SECRET = "whsec_previous_fedcba9876543210"
CREATED = 1_699_999_940
EVENT: dict[str, Any] = {
    "id": "evt_1NG8Du2eZvKYlo2CUI79vXWy",
    "object": "event",
    "type": "invoice.paid",
    "created": CREATED,
    "data": {"object": {"id": "in_1", "amount_paid": 2000, "customer_name": "Zoë Müller"}},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def sign(body: bytes = BODY, secret: str = SECRET, timestamp: int = T) -> str:
    """A `Stripe-Signature` header exactly as Stripe's own SDK builds it."""
    header: str = stripe.WebhookSignature.generate_signature_header(
        body.decode(), secret, timestamp=timestamp
    )
    return header


def v1_of(header: str) -> str:
    return header.split("v1=", 1)[1]


def verify(
    header: str,
    body: bytes = BODY,
    *,
    now: float = NOW,
    secret: str | list[str] = SECRET,
    tolerance: float | None = 300.0,
) -> None:
    source = Stripe(secret=secret, tolerance=tolerance)
    source.verify({"stripe-signature": header}, body, now=now)


# -- verification -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        BODY,
        b"{}",
        b"",
        '{"note": "caf\u00e9 \u2603 \U0001f600"}'.encode(),
        b'{"id": "evt_1",\n  "type": "x"}\r\n',
    ],
    ids=["event", "empty-object", "empty-body", "non-ascii", "whitespace"],
)
def test_official_signature_verifies(body: bytes) -> None:
    verify(sign(body), body)


def test_official_signature_authenticates_to_the_event() -> None:
    identity = Stripe(secret=SECRET).authenticate({"stripe-signature": sign()}, BODY, now=NOW)
    assert identity == Identity(
        event_id=EVENT["id"],
        event_type="invoice.paid",
        occurred_at=datetime.fromtimestamp(CREATED, UTC),
        payload=EVENT,
    )


def test_signature_header_is_parsed_not_matched_as_a_whole() -> None:
    # Repeated headers are joined with ", " by normalize_headers; spaces around items are fine.
    valid = v1_of(sign())
    verify(f"t={T}, v1={valid}")


@pytest.mark.parametrize("position", ["first", "middle", "last"])
def test_any_v1_entry_may_match(position: str) -> None:
    valid = v1_of(sign())
    decoys = ["0" * 64, v1_of(sign(secret="whsec_someone_else"))]
    entries = {
        "first": [valid, *decoys],
        "middle": [decoys[0], valid, decoys[1]],
        "last": [*decoys, valid],
    }[position]
    header = f"t={T}," + ",".join(f"v1={e}" for e in entries) + ",v0=" + "ab" * 32
    verify(header)


def test_malformed_v1_entries_do_not_hide_a_valid_one() -> None:
    valid = v1_of(sign())
    verify(f"t={T},v1=not-hex,v1=,v1={valid},garbage,v1=zz")


def test_only_non_matching_v1_entries_is_bad_signature() -> None:
    decoys = ["0" * 64, v1_of(sign(secret="whsec_someone_else"))]
    with pytest.raises(BadSignature):
        verify(f"t={T}," + ",".join(f"v1={e}" for e in decoys))


@pytest.mark.parametrize("spoil", [lambda v: v + "00", lambda v: v[:-2], lambda v: "00" + v])
def test_extended_or_truncated_signature_is_bad_signature(spoil: Callable[[str], str]) -> None:
    with pytest.raises(BadSignature):
        verify(f"t={T},v1={spoil(v1_of(sign()))}")


def test_v0_signature_alone_is_not_accepted() -> None:
    # v0 is Stripe's test-mode scheme; a correct HMAC under v0 must not pass as v1.
    with pytest.raises(BadSignature):
        verify(f"t={T},v0={v1_of(sign())}")


def test_secret_rotation_accepts_the_old_secret() -> None:
    old_header = sign(secret=OLD_SECRET)
    with pytest.raises(BadSignature):
        verify(old_header, secret=SECRET)
    verify(old_header, secret=[SECRET, OLD_SECRET])
    verify(sign(secret=SECRET), secret=[SECRET, OLD_SECRET])
    # While a secret is rolled Stripe sends one v1 per active secret.
    both = f"t={T},v1={v1_of(sign(secret=OLD_SECRET))},v1={v1_of(sign(secret=SECRET))}"
    verify(both, secret=SECRET)
    verify(both, secret=OLD_SECRET)


@pytest.mark.parametrize("index", [0, len(BODY) // 2, len(BODY) - 1])
def test_tampered_body_is_bad_signature(index: int) -> None:
    tampered = bytearray(BODY)
    tampered[index] ^= 0x01
    with pytest.raises(BadSignature):
        verify(sign(), bytes(tampered))


def test_appended_body_is_bad_signature() -> None:
    with pytest.raises(BadSignature):
        verify(sign(), BODY + b" ")


def test_wrong_secret_is_bad_signature() -> None:
    with pytest.raises(BadSignature):
        verify(sign(secret="whsec_wrong"))


def test_secret_is_not_base64_decoded() -> None:
    # Stripe uses the whole `whsec_...` string as the key; a verifier that decoded it would fail.
    verify(sign(secret="whsec_dGVzdA=="), secret="whsec_dGVzdA==")
    with pytest.raises(BadSignature):
        verify(sign(secret="whsec_dGVzdA=="), secret="dGVzdA==")


def test_changed_timestamp_is_bad_signature() -> None:
    valid = v1_of(sign())
    with pytest.raises(BadSignature):
        verify(f"t={T + 1},v1={valid}", now=NOW)


@pytest.mark.parametrize("headers", [{}, {"stripe-signature": ""}, {"x-stripe-signature": "t=1"}])
def test_missing_header(headers: dict[str, str]) -> None:
    with pytest.raises(MissingHeader):
        Stripe(secret=SECRET).verify(headers, BODY, now=NOW)


@pytest.mark.parametrize(
    "header",
    [
        "v1=" + "0" * 64,  # no timestamp
        f"t={T}",  # no signature
        f"t={T},v0=" + "0" * 64,  # no v1 signature
        f"t=abc,v1={'0' * 64}",
        f"t=-5,v1={'0' * 64}",
        f"t=1e9,v1={'0' * 64}",
        f"t={'9' * 40},v1={'0' * 64}",
        "t=\u0661\u0662\u0663,v1=" + "0" * 64,  # Arabic-Indic digits
        "garbage",
        ",,,",
    ],
)
def test_malformed_header_is_bad_signature(header: str) -> None:
    with pytest.raises(BadSignature):
        verify(header)


@pytest.mark.parametrize("offset", [-300, -1, 0, 1, 299, 300])
def test_timestamp_within_tolerance(offset: int) -> None:
    verify(sign(), now=NOW + offset)


@pytest.mark.parametrize(
    "offset",
    [301, 86_400, -301, -86_400],
    ids=["expired", "day-old", "future", "day-ahead"],
)
def test_timestamp_out_of_tolerance(offset: int) -> None:
    # `now - t` > 300 either way: too old, or signed for a time far in the future.
    with pytest.raises(TimestampOutOfTolerance):
        verify(sign(), now=NOW + offset)


def test_custom_tolerance() -> None:
    verify(sign(), now=NOW + 10, tolerance=10)
    with pytest.raises(TimestampOutOfTolerance):
        verify(sign(), now=NOW + 11, tolerance=10)


def test_tolerance_none_disables_the_check() -> None:
    verify(sign(), now=NOW + 10 * 365 * 86_400, tolerance=None)
    verify(sign(), now=NOW - 10 * 365 * 86_400, tolerance=None)
    verify(sign(timestamp=0), now=NOW, tolerance=None)


def test_forged_signature_with_expired_timestamp_is_bad_signature() -> None:
    forged = sign(secret="whsec_attacker", timestamp=T - 3600)
    with pytest.raises(BadSignature):
        verify(forged, now=NOW)


def test_forged_signature_is_reported_before_the_body_is_parsed() -> None:
    with pytest.raises(BadSignature):
        Stripe(secret=SECRET).authenticate(
            {"stripe-signature": sign(b"not json", secret="whsec_attacker")}, b"not json", now=NOW
        )


@pytest.mark.parametrize("secret", ["", [], [SECRET, ""], [b"whsec_bytes"]])
def test_invalid_secret_is_configuration_error(secret: object) -> None:
    with pytest.raises(ConfigurationError):
        Stripe(secret=secret)  # type: ignore[arg-type]


# -- cross-check with the official SDK ----------------------------------------------------------


@pytest.mark.parametrize("offset", [-300, 0, 299, 300])
def test_construct_event_accepts_what_we_accept(offset: int) -> None:
    header = sign()
    now = NOW + offset
    verify(header, now=now)
    with mock.patch("time.time", return_value=now):
        event = stripe.Webhook.construct_event(BODY, header, SECRET)
    assert event.id == EVENT["id"]
    assert event.type == EVENT["type"]


def test_construct_event_agrees_on_rejections() -> None:
    # Sanity for the cross-check itself: the SDK does reject what it should.
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.Webhook.construct_event(BODY, sign(secret="whsec_wrong"), SECRET, tolerance=0)
    with pytest.raises(BadSignature):
        verify(sign(secret="whsec_wrong"))


def _sdk_accepts(body: bytes, header: str, secret: str) -> bool:
    try:
        # tolerance=0 switches the SDK's (wall-clock) age check off.
        stripe.WebhookSignature.verify_header(body, header, secret, tolerance=0)
    except stripe.SignatureVerificationError:
        return False
    return True


def _we_accept(body: bytes, header: str, secret: str) -> bool:
    try:
        Stripe(secret=secret, tolerance=None).verify({"stripe-signature": header}, body, now=NOW)
    except VerificationError:
        return False
    return True


entries = st.lists(
    st.one_of(
        st.just(("v1", "valid")),
        st.just(("v1", "other-secret")),
        st.tuples(
            st.sampled_from(["v1", "v0"]), st.binary(min_size=32, max_size=32).map(bytes.hex)
        ),
        st.tuples(st.just("v0"), st.just("valid")),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(
    body=st.text(max_size=200).map(str.encode),
    secret=st.text(min_size=1, max_size=30).filter(str.strip),
    timestamp=st.integers(min_value=0, max_value=10**11),
    items=entries,
)
def test_we_accept_exactly_what_the_sdk_accepts(
    body: bytes, secret: str, timestamp: int, items: list[tuple[str, str]]
) -> None:
    """Differential test on well-formed headers: same verdict as `stripe.WebhookSignature`."""
    valid = v1_of(sign(body, secret, timestamp))
    other = v1_of(sign(body, secret + "x", timestamp))
    named = {"valid": valid, "other-secret": other}
    header = ",".join([f"t={timestamp}", *(f"{k}={named.get(v, v)}" for k, v in items)])
    assert _we_accept(body, header, secret) == _sdk_accepts(body, header, secret)
    expected = any(scheme == "v1" and value == "valid" for scheme, value in items)
    assert _we_accept(body, header, secret) == expected


# -- identification ------------------------------------------------------------------------------


def identify(payload: object) -> Identity:
    return Stripe(secret=SECRET).identify({}, json.dumps(payload).encode())


def test_identify_reads_id_type_and_created() -> None:
    identity = Stripe(secret=SECRET).identify({"stripe-signature": sign()}, BODY)
    assert identity.event_id == "evt_1NG8Du2eZvKYlo2CUI79vXWy"
    assert identity.event_type == "invoice.paid"
    assert identity.occurred_at == datetime(2023, 11, 14, 22, 12, 20, tzinfo=UTC)
    assert identity.occurred_at is not None
    assert identity.occurred_at.utcoffset() is not None
    assert identity.occurred_at.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    assert identity.payload == EVENT


def test_identify_ignores_the_signature_header() -> None:
    # The key is the body's id: retries (new t, new signature) map to the same event.
    first = Stripe(secret=SECRET).identify({"stripe-signature": sign(timestamp=T)}, BODY)
    retry = Stripe(secret=SECRET).identify({"stripe-signature": sign(timestamp=T + 300)}, BODY)
    assert first.event_id == retry.event_id == EVENT["id"]


def test_identify_without_type_or_created() -> None:
    identity = identify({"id": "evt_2"})
    assert (identity.event_id, identity.event_type, identity.occurred_at) == ("evt_2", None, None)


@pytest.mark.parametrize("created", ["yesterday", 10**30, -(10**30), True, None, [1], 1e308])
def test_unreadable_created_is_dropped_not_fatal(created: object) -> None:
    assert identify({"id": "evt_3", "created": created}).occurred_at is None


@pytest.mark.parametrize("event_type", [7, "", None, "x" * 256, ["a"]])
def test_unusable_type_is_none(event_type: object) -> None:
    assert identify({"id": "evt_4", "type": event_type}).event_type is None


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "invoice.paid"},
        {"id": None},
        {"id": ""},
        {"id": True},
        {"id": {"nested": 1}},
        {"id": ["evt_1"]},
        {"id": 1.5},
        {"id": "e" * 256},
        {"id": "evt\n1"},
        {"id": "evt\x001"},
    ],
    ids=lambda p: repr(p)[:30],
)
def test_missing_or_unusable_id_is_payload_error(payload: object) -> None:
    with pytest.raises(PayloadError):
        identify(payload)


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"",
        b"\xff\xfe\x00",
        b'{"id": "evt_1"',
        b"[]",
        b'[{"id": "evt_1"}]',
        b'"evt_1"',
        b"42",
        b"null",
        b"[" * 100_000,
    ],
    ids=[
        "text",
        "empty",
        "binary",
        "truncated",
        "empty-array",
        "array",
        "string",
        "number",
        "null",
        "deep",
    ],
)
def test_non_object_body_is_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        Stripe(secret=SECRET).identify({}, body)


def test_signed_non_json_body_authenticates_to_payload_error() -> None:
    body = b"id=evt_1&type=invoice.paid"
    with pytest.raises(PayloadError):
        Stripe(secret=SECRET).authenticate({"stripe-signature": sign(body)}, body, now=NOW)


def test_signed_array_body_authenticates_to_payload_error() -> None:
    body = json.dumps([EVENT]).encode()
    with pytest.raises(PayloadError):
        Stripe(secret=SECRET).authenticate({"stripe-signature": sign(body)}, body, now=NOW)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_is_verified_by_stripes_sdk() -> None:
    headers, body = kit_sign(Stripe(secret="whsec_test"), KIT_EVENT)
    event = stripe.Webhook.construct_event(body, headers["Stripe-Signature"], "whsec_test")
    assert event["id"] == "evt_1"
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.Webhook.construct_event(body, headers["Stripe-Signature"], "whsec_other")
