"""PayPal, online: PayPal's verify-webhook-signature API, imitated by a real loopback server."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from tests.support import paypal
from tests.support.loopback import Loopback
from tests.support.pki import paypal_signing

from hookinbox._errors import BadSignature, ConfigurationError, VerificationUnavailable
from hookinbox.sources import PayPal, PayPalAPI

KEY = paypal_signing().key
assert isinstance(KEY, rsa.RSAPrivateKey)
TOKEN = "/v1/oauth2/token"
VERIFY = "/v1/notifications/verify-webhook-signature"


@dataclass
class Online:
    imitation: paypal.PayPalImitation
    loopback: Loopback

    def source(self, client_secret: str | None = None) -> PayPal:
        api = PayPalAPI(
            client_id=self.imitation.client_id,
            client_secret=client_secret or self.imitation.client_secret,
            base_url=self.loopback.url,
        )
        return PayPal(webhook_id=paypal.WEBHOOK_ID, online=api)

    def send(self, event: dict[str, object] | None = None) -> tuple[dict[str, str], bytes]:
        """A delivery PayPal made, and remembers making."""
        headers, body = paypal.delivery(KEY, event)
        self.imitation.send(headers, body)
        return {k.lower(): v for k, v in headers.items()}, body


@pytest.fixture
def online() -> Iterator[Online]:
    imitation = paypal.PayPalImitation(paypal_signing().certificate.public_key())  # type: ignore[arg-type]
    with paypal.paypal_api(imitation) as loopback:
        yield Online(imitation, loopback)


def test_paypal_says_success_and_one_token_serves_many_deliveries(online: Online) -> None:
    source = online.source()
    for number in range(3):
        headers, body = online.send(paypal.capture_completed(f"WH-{number}"))
        identity = source.authenticate(headers, body, now=time.time())
        assert identity.event_id == f"WH-{number}"
    assert online.loopback.count(TOKEN) == 1
    assert online.loopback.count(VERIFY) == 3


def test_the_event_is_sent_as_the_exact_bytes_received(online: Online) -> None:
    # Spacing, key order and escapes that a parse and re-serialisation would change.
    body = (
        b'{ "id" : "WH-raw",\n  "event_type":"PAYMENT.CAPTURE.COMPLETED",'
        b' "amount": 1.50,\n "note": "caf\\u00e9" }'
    )
    signed = paypal.sign(body, KEY)
    online.imitation.send(signed, body)
    headers = {k.lower(): v for k, v in signed.items()}
    online.source().verify(headers, body, now=time.time())
    (request,) = [r for r in online.loopback.requests if r.path == VERIFY]
    assert body in request.body
    fields = json.loads(request.body)
    assert fields["webhook_id"] == paypal.WEBHOOK_ID
    assert fields["auth_algo"] == "SHA256withRSA"
    assert fields["cert_url"] == paypal.CERT_URL
    assert fields["webhook_event"]["id"] == "WH-raw"


def test_paypal_says_failure_for_a_tampered_body(online: Online) -> None:
    headers, body = online.send()
    with pytest.raises(BadSignature, match="PayPal's API says"):
        online.source().verify(headers, body.replace(b"42.50", b"4250.00"), now=time.time())


def test_an_expired_token_is_renewed_once(online: Online) -> None:
    source = online.source()
    headers, body = online.send()
    source.verify(headers, body, now=time.time())
    online.imitation.revoked.add("A21AA-token-1")
    source.verify(headers, body, now=time.time())
    assert online.imitation.tokens_issued == 2


def test_refused_credentials_are_unavailable_not_a_bad_signature(online: Online) -> None:
    headers, body = online.send()
    with pytest.raises(VerificationUnavailable, match="OAuth"):
        online.source(client_secret="wrong").verify(headers, body, now=time.time())
    assert online.loopback.count(VERIFY) == 0


@pytest.mark.parametrize("status", [500, 503, 429])
def test_paypal_failing_is_unavailable(online: Online, status: int) -> None:
    online.imitation.failure = status
    headers, body = online.send()
    with pytest.raises(VerificationUnavailable, match=str(status)):
        online.source().verify(headers, body, now=time.time())


@pytest.mark.parametrize("status", [400, 422])
def test_paypal_refusing_the_request_is_a_bad_signature(online: Online, status: int) -> None:
    online.imitation.failure = status
    headers, body = online.send()
    with pytest.raises(BadSignature, match=str(status)):
        online.source().verify(headers, body, now=time.time())


NOT_UTF8_JSON = [b"not json", b"[1]", b"\xff\xfe{}", '{"id": "\u00e9"}'.encode("utf-16")]


@pytest.mark.parametrize("body", NOT_UTF8_JSON)
def test_a_body_paypal_cannot_have_signed_is_refused_without_a_call(
    online: Online, body: bytes
) -> None:
    headers = {k.lower(): v for k, v in paypal.sign(body, KEY).items()}
    with pytest.raises(BadSignature):
        online.source().verify(headers, body, now=time.time())
    assert online.loopback.requests == []


def test_an_unreachable_api_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    api = PayPalAPI(client_id="i", client_secret="s", base_url=closed, timeout=1)
    headers, body = paypal.delivery(KEY)
    headers = {k.lower(): v for k, v in headers.items()}
    with pytest.raises(VerificationUnavailable, match="ConnectError"):
        PayPal(webhook_id="W", online=api).verify(headers, body, now=time.time())


@pytest.mark.parametrize(
    "options",
    [
        {"client_id": "", "client_secret": "s"},
        {"client_id": "i", "client_secret": ""},
        {"client_id": "i", "client_secret": "s", "base_url": "http://api-m.paypal.com"},
        {"client_id": "i", "client_secret": "s", "base_url": "ftp://127.0.0.1"},
        {"client_id": "i", "client_secret": "s", "base_url": "https://"},
        {"client_id": "i", "client_secret": "s", "base_url": "https://x:port"},
        {"client_id": "i", "client_secret": "s", "timeout": 0},
    ],
)
def test_api_configuration_errors(options: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        PayPalAPI(**options)  # type: ignore[arg-type]


def test_the_secret_is_not_in_the_repr() -> None:
    api = PayPalAPI(client_id="i", client_secret="very-secret", base_url="https://127.0.0.1")
    assert "very-secret" not in repr(api)
    assert "very-secret" not in repr(PayPal(webhook_id="W", online=api))
