"""PayPal, offline with a configured certificate: the signed text, the key, every refusal."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from tests.support import paypal
from tests.support.pki import issue, make_root, paypal_signing, rsa_key

from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    MissingHeader,
    PayloadError,
    TimestampOutOfTolerance,
)
from hookinbox._headers import normalize_headers
from hookinbox.sources import PayPal, PayPalAPI
from hookinbox.testing import paypal_test_certificate
from hookinbox.testing import sign as kit_sign

NOW = 1_700_000_000.0  # paypal.TRANSMISSION_TIME
KEY = paypal_signing().key
assert isinstance(KEY, rsa.RSAPrivateKey)


def source(**options: object) -> PayPal:
    return PayPal(webhook_id=paypal.WEBHOOK_ID, certificate=paypal_signing().pem, **options)  # type: ignore[arg-type]


def lower(headers: dict[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def signed(**options: object) -> tuple[dict[str, str], bytes]:
    headers, body = paypal.delivery(KEY, **options)  # type: ignore[arg-type]
    return lower(headers), body


def test_a_capture_completed_delivery_verifies_and_is_keyed_by_the_event_id() -> None:
    headers, body = signed()
    identity = source().authenticate(headers, body, now=NOW)
    assert identity.event_id == "WH-2WR32451HC0233532-67976317FL4543714"
    assert identity.event_type == "PAYMENT.CAPTURE.COMPLETED"
    assert identity.occurred_at == datetime(2023, 11, 14, 22, 13, 18, 412000, tzinfo=UTC)
    assert identity.payload == json.loads(body)
    assert identity.body is None  # the delivery's own bytes are stored


def test_each_retry_is_a_new_transmission_with_the_same_key() -> None:
    first_headers, body = signed(transmission_id="8ea3c1c0-82a5-11ee-b962-0242ac120002")
    retry_headers, _ = signed(
        transmission_id="a4f7e2b0-82a7-11ee-b962-0242ac120002",
        transmission_time="2023-11-14T22:43:20Z",
    )
    first = source().authenticate(first_headers, body, now=NOW)
    retry = source().authenticate(retry_headers, body, now=NOW)
    assert first_headers["paypal-transmission-id"] != retry_headers["paypal-transmission-id"]
    assert first.event_id == retry.event_id


def test_the_crc32_is_unsigned() -> None:
    body = b'{"id": "WH-8", "event_type": "X"}'
    crc = binascii.crc32(body)
    assert crc >= 2**31  # a signed (Java int) rendering would be negative
    source().verify(lower(paypal.sign(body, KEY)), body, now=NOW)
    headers = lower(paypal.sign(body, KEY, transmission_id="t-1"))
    as_signed = f"t-1|{paypal.TRANSMISSION_TIME}|{paypal.WEBHOOK_ID}|{crc - 2**32}".encode()
    signature = KEY.sign(as_signed, padding.PKCS1v15(), hashes.SHA256())
    headers["paypal-transmission-sig"] = base64.b64encode(signature).decode()
    with pytest.raises(BadSignature):
        source().verify(headers, body, now=NOW)


def test_a_tampered_body_is_refused() -> None:
    headers, body = signed()
    with pytest.raises(BadSignature):
        source().verify(headers, body.replace(b"42.50", b"4250.0"), now=NOW)


def test_a_delivery_for_another_webhook_is_refused() -> None:
    headers, body = signed(webhook_id="9XL90610J3647323C")
    with pytest.raises(BadSignature):
        source().verify(headers, body, now=NOW)


def test_several_webhook_ids_any_may_match() -> None:
    headers, body = signed(webhook_id="9XL90610J3647323C")
    both = PayPal(
        webhook_id=[paypal.WEBHOOK_ID, "9XL90610J3647323C"], certificate=paypal_signing().pem
    )
    both.verify(headers, body, now=NOW)


def test_a_signature_by_another_key_is_refused() -> None:
    headers, body = paypal.delivery(rsa_key("someone else"))
    with pytest.raises(BadSignature):
        source().verify(lower(headers), body, now=NOW)


@pytest.mark.parametrize("algorithm", ["SHA1withRSA", "sha256withrsa", "SHA256withECDSA", "none"])
def test_only_sha256_with_rsa_is_accepted(algorithm: str) -> None:
    headers, body = signed()
    headers["paypal-auth-algo"] = algorithm
    with pytest.raises(BadSignature, match="PAYPAL-AUTH-ALGO"):
        source().verify(headers, body, now=NOW)


@pytest.mark.parametrize(
    "header",
    [
        "paypal-transmission-id",
        "paypal-transmission-time",
        "paypal-transmission-sig",
        "paypal-cert-url",
        "paypal-auth-algo",
    ],
)
def test_every_signature_header_is_required(header: str) -> None:
    headers, body = signed()
    del headers[header]
    with pytest.raises(MissingHeader, match=header):
        source().verify(headers, body, now=NOW)


@pytest.mark.parametrize("value", ["not base64!", "====", "\u00e9t\u00e9", ""])
def test_a_malformed_signature_is_refused(value: str) -> None:
    headers, body = signed()
    headers["paypal-transmission-sig"] = value
    with pytest.raises((BadSignature, MissingHeader)):
        source().verify(headers, body, now=NOW)


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("paypal-transmission-id", "a|b"),
        ("paypal-transmission-id", "caf\u00e9"),
        ("paypal-transmission-id", "x" * 256),
        ("paypal-transmission-time", "2023-11-14T22:13:20Z|x"),
        ("paypal-transmission-time", "\x00"),
    ],
)
def test_unusable_signed_fields_are_refused(header: str, value: str) -> None:
    headers, body = signed()
    headers[header] = value
    with pytest.raises(BadSignature, match="not usable"):
        source().verify(headers, body, now=NOW)


def test_no_transmission_time_window_by_default() -> None:
    headers, body = signed()
    source().verify(headers, body, now=NOW + 30 * 86400)  # a retry 30 days on still verifies


def test_a_tolerance_checks_the_signed_transmission_time() -> None:
    headers, body = signed()
    source(tolerance=300).verify(headers, body, now=NOW + 300)
    with pytest.raises(TimestampOutOfTolerance):
        source(tolerance=300).verify(headers, body, now=NOW + 301)
    with pytest.raises(TimestampOutOfTolerance):
        source(tolerance=300).verify(headers, body, now=NOW - 301)


@pytest.mark.parametrize("value", ["yesterday", "2023-11-14", "1700000000"])
def test_with_a_tolerance_an_unreadable_transmission_time_is_refused(value: str) -> None:
    headers, body = signed(transmission_time=value)
    source().verify(headers, body, now=NOW)  # without a tolerance the time is only signed
    with pytest.raises(BadSignature, match="ISO 8601"):
        source(tolerance=300).verify(headers, body, now=NOW)


def test_an_expired_configured_certificate_is_refused() -> None:
    root = make_root("expiring")
    old = issue(
        root,
        "messageverificationcerts.paypal.com",
        key=KEY,
        not_before=datetime(2020, 1, 1, tzinfo=UTC),
        not_after=datetime(2023, 1, 1, tzinfo=UTC),
    )
    headers, body = signed()
    with pytest.raises(BadSignature, match="not valid now"):
        PayPal(webhook_id=paypal.WEBHOOK_ID, certificate=old.pem).verify(headers, body, now=NOW)


def test_a_clock_reading_out_of_range_is_refused() -> None:
    headers, body = signed()
    with pytest.raises(BadSignature):
        source().verify(headers, body, now=1e300)


@pytest.mark.parametrize(
    "options",
    [
        {"webhook_id": ""},
        {"webhook_id": []},
        {"webhook_id": "a|b"},
        {"webhook_id": "W", "certificate": "not a certificate"},
        {"webhook_id": "W", "certificate": b""},
        {
            "webhook_id": "W",
            "certificate": paypal_signing().pem,
            "online": PayPalAPI(client_id="i", client_secret="s"),
        },
        {"webhook_id": "W", "cache_size": 0},
        {"webhook_id": "W", "timeout": 0},
        {"webhook_id": "W", "ca_bundle": "/nonexistent/ca.pem"},
        {"webhook_id": "W", "certificate_domains": []},
    ],
)
def test_configuration_errors(options: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        PayPal(**options)  # type: ignore[arg-type]


def test_a_configured_certificate_must_hold_an_rsa_key() -> None:
    root = make_root("ec")
    ec_leaf = issue(
        root, "messageverificationcerts.paypal.com", key=ec.generate_private_key(ec.SECP256R1())
    )
    with pytest.raises(ConfigurationError, match="RSA"):
        PayPal(webhook_id="W", certificate=ec_leaf.pem)


# -- identification ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body", [b"not json", b"[]", b'{"event_type": "X"}', b'{"id": ""}', b'{"id": null}']
)
def test_an_authentic_body_without_an_event_id_is_a_payload_error(body: bytes) -> None:
    headers = lower(paypal.sign(body, KEY))
    source().verify(headers, body, now=NOW)
    with pytest.raises(PayloadError):
        source().authenticate(headers, body, now=NOW)


def test_the_signature_headers_are_stored_and_nothing_else() -> None:
    headers, _ = signed()
    stored = source().headers_to_store({**headers, "authorization": "Basic c2VjcmV0"})
    assert set(stored) == {
        "paypal-transmission-id",
        "paypal-transmission-time",
        "paypal-transmission-sig",
        "paypal-cert-url",
        "paypal-auth-algo",
        "content-type",
        "user-agent",
    }


def test_the_redelivery_window_is_three_days_and_configurable() -> None:
    assert source().redelivery_window == timedelta(days=3)
    assert source(redelivery_window=timedelta(days=30)).redelivery_window == timedelta(days=30)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_follows_paypals_recipe() -> None:
    certificate = paypal_test_certificate()
    source = PayPal(webhook_id="1JE4291016473214C", certificate=certificate.pem)
    headers, body = kit_sign(source, KIT_EVENT, at=1_700_000_000)
    assert headers["PAYPAL-TRANSMISSION-TIME"] == "2023-11-14T22:13:20Z"
    crc = binascii.crc32(body) & 0xFFFFFFFF
    text = f"{headers['PAYPAL-TRANSMISSION-ID']}|2023-11-14T22:13:20Z|1JE4291016473214C|{crc}"
    public = certificate.private_key.public_key()
    public.verify(
        base64.b64decode(headers["PAYPAL-TRANSMISSION-SIG"]),
        text.encode(),
        padding.PKCS1v15(),
        hashes.SHA256(),
    )
    other = PayPal(webhook_id="1JE4291016473214C", certificate=certificate.pem)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged, _ = kit_sign(other, KIT_EVENT, at=1_700_000_000, private_key=stranger)
    with pytest.raises(BadSignature):
        source.verify(normalize_headers(forged), body, now=1_700_000_000)
