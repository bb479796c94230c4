"""Square: our signatures checked by Square's own `verify_signature` (squareup), and by ours.

Square's SDK verifies but does not sign, so deliveries are signed here by Square's documented
recipe and the SDK is the referee: what it accepts, we accept.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from square.utils.webhooks_helper import verify_signature
from square.utils.webhooks_helper import verify_signature as square_verifies

from hookinbox._errors import BadSignature, ConfigurationError, MissingHeader, PayloadError
from hookinbox.sources import Square
from hookinbox.testing import sign as kit_sign

NOW = 1_700_000_000.0
SECRET = "asdf1234-signature-key"
URL = "https://example.com/webhooks/square"
EVENT: dict[str, Any] = {
    "merchant_id": "6SSW7HV8K2ST5",
    "type": "payment.created",
    "event_id": "13b867cf-db3d-4b1c-90b6-2f32a9d78124",
    "created_at": "2020-02-06T21:27:30.792Z",
    "data": {"type": "payment", "id": "KkAkhdMsgzn59SM8A89WgKwekxLZY", "note": "Zoë"},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def sign(body: bytes = BODY, secret: str = SECRET, url: str = URL) -> str:
    digest = hmac.new(secret.encode(), url.encode() + body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def headers(signature: str) -> dict[str, str]:
    return {"x-square-hmacsha256-signature": signature}


def verify(signature: str, body: bytes = BODY, *, url: str = URL, secret: Any = SECRET) -> None:
    Square(secret=secret, notification_url=url).verify(headers(signature), body, now=NOW)


def sdk_accepts(signature: str, body: bytes, secret: str = SECRET, url: str = URL) -> bool:
    return verify_signature(
        request_body=body.decode(),
        signature_header=signature,
        signature_key=secret,
        notification_url=url,
    )


@pytest.mark.parametrize(
    "body", [BODY, b"{}", "caf\u00e9 \U0001f600".encode()], ids=["event", "object", "non-ascii"]
)
def test_signature_verifies_and_square_agrees(body: bytes) -> None:
    assert sdk_accepts(sign(body), body)
    verify(sign(body), body)


@pytest.mark.parametrize(
    "other_url",
    [
        URL + "/",
        "http://example.com/webhooks/square",
        "https://example.com/webhooks/square?x=1",
        "https://EXAMPLE.com/webhooks/square",
    ],
)
def test_the_url_must_be_exactly_the_one_square_signed(other_url: str) -> None:
    signature = sign(url=other_url)
    assert not sdk_accepts(signature, BODY)
    with pytest.raises(BadSignature):
        verify(signature)
    verify(signature, url=other_url)


def test_tampered_body_and_wrong_key_are_bad_signature() -> None:
    with pytest.raises(BadSignature):
        verify(sign(), BODY.replace(b"payment.created", b"payment.updated"))
    with pytest.raises(BadSignature):
        verify(sign(secret="someone-else"))


def test_keys_rotate() -> None:
    verify(sign(secret="old-key"), secret=[SECRET, "old-key"])


def test_missing_and_malformed_signatures() -> None:
    with pytest.raises(MissingHeader):
        Square(secret=SECRET, notification_url=URL).verify({}, BODY, now=NOW)
    with pytest.raises(BadSignature, match="is not base64"):
        verify(hmac.new(SECRET.encode(), URL.encode() + BODY, hashlib.sha256).hexdigest() + "!")
    with pytest.raises(BadSignature, match="No signature"):
        verify(base64.b64encode(b"\x00" * 32).decode())


@pytest.mark.parametrize(
    "url", ["", "example.com/webhooks/square", "ftp://example.com/x", "https://a b", "\ud800"]
)
def test_an_unusable_notification_url_is_a_configuration_error(url: str) -> None:
    with pytest.raises(ConfigurationError):
        Square(secret=SECRET, notification_url=url)


@settings(max_examples=200, deadline=None)
@given(body=st.text(min_size=1, max_size=200).map(str.encode), valid=st.booleans())
def test_we_accept_exactly_what_the_sdk_accepts(body: bytes, valid: bool) -> None:
    signature = sign(body, SECRET if valid else SECRET + "x")
    try:
        verify(signature, body)
        ours = True
    except BadSignature:
        ours = False
    assert ours == sdk_accepts(signature, body) == valid


def test_identify_reads_event_id_type_and_time() -> None:
    identity = Square(secret=SECRET, notification_url=URL).authenticate(
        headers(sign()), BODY, now=NOW
    )
    assert identity.event_id == "13b867cf-db3d-4b1c-90b6-2f32a9d78124"
    assert identity.event_type == "payment.created"
    assert identity.occurred_at == datetime(2020, 2, 6, 21, 27, 30, 792000, tzinfo=UTC)
    assert identity.payload == EVENT


@pytest.mark.parametrize(
    "body", [b"[]", b"nope", json.dumps({"type": "payment.created", "id": "x"}).encode()]
)
def test_no_event_id_is_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError, match=r"event_id|JSON"):
        Square(secret=SECRET, notification_url=URL).identify({}, body)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_is_verified_by_squares_sdk() -> None:
    url = "https://example.com/webhooks/square?shop=1"
    headers, body = kit_sign(Square(secret="sq-key", notification_url=url), KIT_EVENT)
    signature = headers["x-square-hmacsha256-signature"]
    check = {"request_body": body.decode(), "signature_header": signature}
    assert square_verifies(**check, signature_key="sq-key", notification_url=url)
    assert not square_verifies(**check, signature_key="other", notification_url=url)
