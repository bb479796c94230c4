"""Shopify: base64 HMAC-SHA256 of the body; key `<topic>:<event id>`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.testing.npm_oracles import npm_verifies

from hookinbox._errors import BadSignature, ConfigurationError, MissingHeader, PayloadError
from hookinbox.sources import Shopify
from hookinbox.testing import sign as kit_sign

NOW = 1_700_000_000.0
SECRET = "shpss_client_secret_0123456789"
OLD_SECRET = "shpss_previous_secret"
ORDER = {"id": 820982911946154508, "email": "jon@example.com", "note": "Grüße"}
BODY = json.dumps(ORDER, ensure_ascii=False).encode()
EVENT_ID = "7f1a0a7e-2f04-4b21-9a4b-7a8d5c7e1a01"
WEBHOOK_ID = "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"


def hmac_b64(body: bytes = BODY, secret: str = SECRET) -> str:
    """Shopify's documented recipe: base64(HMAC-SHA256(client secret, raw body))."""
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()


def delivery(
    body: bytes = BODY,
    *,
    secret: str = SECRET,
    prefix: str = "X-",
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    headers = {
        f"{prefix}Shopify-Hmac-Sha256": hmac_b64(body, secret),
        f"{prefix}Shopify-Topic": "orders/create",
        f"{prefix}Shopify-Event-Id": EVENT_ID,
        f"{prefix}Shopify-Webhook-Id": WEBHOOK_ID,
        f"{prefix}Shopify-Triggered-At": "2023-11-14T22:13:20.123456789Z",
        **(extra or {}),
    }
    return {name.lower(): value for name, value in headers.items() if value}


def test_known_vector() -> None:
    # Computed independently with `openssl dgst -sha256 -hmac hush -binary | base64`.
    headers = {"x-shopify-hmac-sha256": "VnKUjZsLuN5iZWjn5EntcBVCF9kMN43LglzCE1/GSeY="}
    Shopify(secret="hush").verify(headers, b'{"id":1}', now=NOW)


@pytest.mark.parametrize("prefix", ["X-", ""], ids=["x-prefixed", "events-api"])
def test_valid_signature_verifies(prefix: str) -> None:
    Shopify(secret=SECRET).verify(delivery(prefix=prefix), BODY, now=NOW)


def test_hmac_with_surrounding_whitespace_verifies() -> None:
    headers = delivery()
    headers["x-shopify-hmac-sha256"] = f"  {headers['x-shopify-hmac-sha256']} "
    Shopify(secret=SECRET).verify(headers, BODY, now=NOW)


def test_no_timestamp_so_any_clock_is_fine() -> None:
    for now in (0.0, NOW * 10, -NOW):
        Shopify(secret=SECRET).verify(delivery(), BODY, now=now)


def test_hex_encoded_hmac_is_bad_signature() -> None:
    headers = delivery()
    headers["x-shopify-hmac-sha256"] = hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()
    with pytest.raises(BadSignature):
        Shopify(secret=SECRET).verify(headers, BODY, now=NOW)


@pytest.mark.parametrize("value", ["not base64!", "AAAA=", "\u00e9\u00e9\u00e9\u00e9", "===="])
def test_malformed_hmac_is_bad_signature(value: str) -> None:
    headers = delivery()
    headers["x-shopify-hmac-sha256"] = value
    with pytest.raises(BadSignature):
        Shopify(secret=SECRET).verify(headers, BODY, now=NOW)


@pytest.mark.parametrize("spoil", [lambda raw: raw + b"\x00", lambda raw: raw[:-1]])
def test_extended_or_truncated_hmac_is_bad_signature(spoil: Callable[[bytes], bytes]) -> None:
    raw = hmac.new(SECRET.encode(), BODY, hashlib.sha256).digest()
    headers = delivery()
    headers["x-shopify-hmac-sha256"] = base64.b64encode(spoil(raw)).decode()
    with pytest.raises(BadSignature):
        Shopify(secret=SECRET).verify(headers, BODY, now=NOW)


def test_tampered_body_is_bad_signature() -> None:
    tampered = bytearray(BODY)
    tampered[-2] ^= 0x01
    with pytest.raises(BadSignature):
        Shopify(secret=SECRET).verify(delivery(), bytes(tampered), now=NOW)


def test_wrong_secret_is_bad_signature() -> None:
    with pytest.raises(BadSignature):
        Shopify(secret=SECRET).verify(delivery(secret=OLD_SECRET), BODY, now=NOW)


def test_secret_rotation() -> None:
    Shopify(secret=[SECRET, OLD_SECRET]).verify(delivery(secret=OLD_SECRET), BODY, now=NOW)
    Shopify(secret=[SECRET, OLD_SECRET]).verify(delivery(), BODY, now=NOW)


@pytest.mark.parametrize("headers", [{}, {"x-shopify-hmac-sha256": ""}, {"x-hub-signature": "x"}])
def test_missing_hmac_header(headers: dict[str, str]) -> None:
    with pytest.raises(MissingHeader):
        Shopify(secret=SECRET).verify(headers, BODY, now=NOW)


def test_empty_secret_is_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        Shopify(secret="")


# -- identification ------------------------------------------------------------------------------


def identify(headers: dict[str, str], body: bytes = BODY):  # type: ignore[no-untyped-def]
    return Shopify(secret=SECRET).identify(headers, body)


def test_key_is_topic_and_event_id() -> None:
    identity = Shopify(secret=SECRET).authenticate(delivery(), BODY, now=NOW)
    assert identity.event_id == f"orders/create:{EVENT_ID}"
    assert identity.event_type == "orders/create"
    assert identity.occurred_at == datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)
    assert identity.payload == ORDER


def test_falls_back_to_webhook_id() -> None:
    headers = delivery(extra={"X-Shopify-Event-Id": ""})
    assert "x-shopify-event-id" not in headers
    assert identify(headers).event_id == f"orders/create:{WEBHOOK_ID}"


def test_unprefixed_headers_are_read() -> None:
    identity = identify(delivery(prefix=""))
    assert identity.event_id == f"orders/create:{EVENT_ID}"
    assert identity.event_type == "orders/create"
    fallback = identify(delivery(prefix="", extra={"Shopify-Event-Id": ""}))
    assert fallback.event_id == f"orders/create:{WEBHOOK_ID}"


def test_without_topic_the_key_is_the_bare_id() -> None:
    identity = identify(delivery(extra={"X-Shopify-Topic": ""}))
    assert identity.event_id == EVENT_ID
    assert identity.event_type is None


def test_one_shop_event_two_topics_are_two_events_and_a_retry_is_one() -> None:
    create = identify(delivery())
    paid = identify(delivery(extra={"X-Shopify-Topic": "orders/paid"}))
    retry = identify(delivery(extra={"X-Shopify-Triggered-At": "2023-11-14T23:00:00Z"}))
    assert create.event_id != paid.event_id
    assert create.event_id == retry.event_id


@pytest.mark.parametrize("value", ["", "yesterday"])
def test_unreadable_triggered_at_is_none(value: str) -> None:
    assert identify(delivery(extra={"X-Shopify-Triggered-At": value})).occurred_at is None


def test_missing_id_headers_is_payload_error() -> None:
    headers = delivery(extra={"X-Shopify-Event-Id": "", "X-Shopify-Webhook-Id": ""})
    with pytest.raises(PayloadError):
        identify(headers)
    with pytest.raises(PayloadError):
        Shopify(secret=SECRET).authenticate(headers, BODY, now=NOW)


@pytest.mark.parametrize("event_id", ["x" * 256, "id\x00", "line\nbreak"])
def test_unusable_id_is_payload_error(event_id: str) -> None:
    with pytest.raises(PayloadError):
        identify(delivery(extra={"X-Shopify-Event-Id": event_id}))


def test_key_too_long_with_topic_is_payload_error() -> None:
    with pytest.raises(PayloadError):
        identify(delivery(extra={"X-Shopify-Event-Id": "e" * 250}))


@pytest.mark.parametrize("body", [b"not json", b"", b"\xff"])
def test_non_json_body_is_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        identify(delivery(body), body)


def test_stored_headers_keep_identity_not_unknown_headers() -> None:
    headers = {**delivery(), "authorization": "Bearer secret", "content-type": "application/json"}
    stored = Shopify(secret=SECRET).headers_to_store(headers)
    assert stored["x-shopify-event-id"] == EVENT_ID
    assert stored["content-type"] == "application/json"
    assert "authorization" not in stored


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_and_headers_are_validated_by_shopify_api(npm: Path) -> None:
    headers, body = kit_sign(Shopify(secret="shpss_1"), KIT_EVENT, topic="orders/paid")
    answer = npm_verifies(npm, "shopify", "shpss_1", headers, body)
    assert answer["valid"], answer["detail"]
    assert '"topic":"ORDERS_PAID"' in answer["detail"]
    assert not npm_verifies(npm, "shopify", "other", headers, body)["valid"]
