"""PayPal deliveries as PayPal makes them, and loopback imitations of PayPal's services.

PayPal publishes no Python library that signs; `sign` follows the documented recipe on its
own (binascii's CRC32, not the source's zlib): RSA PKCS#1 v1.5 with SHA-256 over
`{transmission id}|{transmission time}|{webhook id}|{crc32 of the body, unsigned decimal}`.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.support.loopback import Answer, Loopback, Request, serving

WEBHOOK_ID = "1JE4291016473214C"
CERT_PATH = "/v1/notifications/certs/CERT-360caa42-fca2a594-1d93a270"
CERT_URL = "https://api.paypal.com" + CERT_PATH
TRANSMISSION_TIME = "2023-11-14T22:13:20Z"  # 1_700_000_000


def capture_completed(
    event_id: str = "WH-2WR32451HC0233532-67976317FL4543714",
    create_time: str = "2023-11-14T22:13:18.412Z",
) -> dict[str, Any]:
    """A `PAYMENT.CAPTURE.COMPLETED` event shaped like PayPal's (ids and amounts made up)."""
    capture_id = "42311647XV020574X"
    api = "https://api.paypal.com"
    return {
        "id": event_id,
        "create_time": create_time,
        "resource_type": "capture",
        "event_type": "PAYMENT.CAPTURE.COMPLETED",
        "summary": "Payment completed for EUR 42.5 EUR",
        "resource": {
            "id": capture_id,
            "status": "COMPLETED",
            "amount": {"currency_code": "EUR", "value": "42.50"},
            "final_capture": True,
            "seller_protection": {
                "status": "ELIGIBLE",
                "dispute_categories": ["ITEM_NOT_RECEIVED", "UNAUTHORIZED_TRANSACTION"],
            },
            "seller_receivable_breakdown": {
                "gross_amount": {"currency_code": "EUR", "value": "42.50"},
                "paypal_fee": {"currency_code": "EUR", "value": "1.79"},
                "net_amount": {"currency_code": "EUR", "value": "40.71"},
            },
            "invoice_id": "INV-20231114-0042",
            "create_time": "2023-11-14T22:13:12Z",
            "update_time": "2023-11-14T22:13:12Z",
            "supplementary_data": {"related_ids": {"order_id": "5O190127TN364715T"}},
            "links": [
                {
                    "href": f"{api}/v2/payments/captures/{capture_id}",
                    "rel": "self",
                    "method": "GET",
                },
                {
                    "href": f"{api}/v2/payments/captures/{capture_id}/refund",
                    "rel": "refund",
                    "method": "POST",
                },
            ],
        },
        "links": [
            {
                "href": f"{api}/v1/notifications/webhooks-events/{event_id}",
                "rel": "self",
                "method": "GET",
            },
            {
                "href": f"{api}/v1/notifications/webhooks-events/{event_id}/resend",
                "rel": "resend",
                "method": "POST",
            },
        ],
        "event_version": "1.0",
        "resource_version": "2.0",
    }


def signed_text(
    body: bytes, transmission_id: str, transmission_time: str, webhook_id: str
) -> bytes:
    crc = binascii.crc32(body) & 0xFFFFFFFF
    return f"{transmission_id}|{transmission_time}|{webhook_id}|{crc}".encode()


def sign(
    body: bytes,
    key: rsa.RSAPrivateKey,
    *,
    webhook_id: str = WEBHOOK_ID,
    cert_url: str = CERT_URL,
    transmission_id: str | None = None,
    transmission_time: str = TRANSMISSION_TIME,
) -> dict[str, str]:
    transmission_id = transmission_id or str(uuid.uuid4())
    text = signed_text(body, transmission_id, transmission_time, webhook_id)
    signature = key.sign(text, padding.PKCS1v15(), hashes.SHA256())
    return {
        "PAYPAL-TRANSMISSION-ID": transmission_id,
        "PAYPAL-TRANSMISSION-TIME": transmission_time,
        "PAYPAL-TRANSMISSION-SIG": base64.b64encode(signature).decode(),
        "PAYPAL-CERT-URL": cert_url,
        "PAYPAL-AUTH-ALGO": "SHA256withRSA",
        "Content-Type": "application/json",
        "User-Agent": "PayPal/AUHD-214.0-58843029",
    }


def delivery(
    key: rsa.RSAPrivateKey, event: dict[str, Any] | None = None, **options: Any
) -> tuple[dict[str, str], bytes]:
    body = json.dumps(event or capture_completed(), indent=1).encode()
    return sign(body, key, **options), body


# -- PayPal's certificate host ------------------------------------------------------------------


@dataclass
class CertificateHost:
    """Serves PEM documents by path; `status` and `delay` imitate an outage or a slow host."""

    documents: dict[str, bytes] = field(default_factory=dict)
    status: int = 200
    delay: float = 0.0

    def respond(self, request: Request) -> Answer:
        threading.Event().wait(self.delay)
        if self.status != 200:
            return self.status, {}, b""
        document = self.documents.get(request.path)
        if document is None:
            return 404, {"content-type": "application/json"}, b'{"name":"RESOURCE_NOT_FOUND"}'
        return 200, {"content-type": "application/x-pem-file"}, document


# -- PayPal's REST API: OAuth and verify-webhook-signature --------------------------------------


@dataclass
class PayPalImitation:
    """Answers like PayPal's API: a client-credentials token, then verification of deliveries.

    It verifies as PayPal can: it knows the bytes it sent for each transmission (`sent`) and
    its own signing certificate's key, and it checks the request carries those exact bytes.
    """

    public_key: rsa.RSAPublicKey
    client_id: str = "AcTestClientId"
    client_secret: str = "EKTestClientSecret"
    sent: dict[str, bytes] = field(default_factory=dict)
    failure: int | None = None
    """Answer every verification with this status instead (500: PayPal is down)."""
    revoked: set[str] = field(default_factory=set)
    tokens_issued: int = 0

    def send(self, headers: dict[str, str], body: bytes) -> None:
        self.sent[headers["PAYPAL-TRANSMISSION-ID"]] = body

    def respond(self, request: Request) -> Answer:
        if request.path == "/v1/oauth2/token":
            return self._token(request)
        if request.path == "/v1/notifications/verify-webhook-signature":
            return self._verify(request)
        return 404, {}, b""

    def _token(self, request: Request) -> Answer:
        expected = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode()).decode()
        if request.headers.get("authorization") != f"Basic {expected}":
            return _json(401, {"error": "invalid_client"})
        if request.body != b"grant_type=client_credentials":
            return _json(400, {"error": "unsupported_grant_type"})
        self.tokens_issued += 1
        token = f"A21AA-token-{self.tokens_issued}"
        return _json(200, {"access_token": token, "token_type": "Bearer", "expires_in": 32400})

    def _verify(self, request: Request) -> Answer:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if not token.startswith("A21AA-token-") or token in self.revoked:
            return _json(401, {"error": "invalid_token"})
        if self.failure is not None:
            return _json(self.failure, {"name": "INTERNAL_SERVICE_ERROR"})
        fields = json.loads(request.body)
        sent = self.sent.get(fields.get("transmission_id", ""))
        if sent is None or sent not in request.body:
            return _json(200, {"verification_status": "FAILURE"})
        text = signed_text(
            sent, fields["transmission_id"], fields["transmission_time"], fields["webhook_id"]
        )
        try:
            signature = base64.b64decode(fields["transmission_sig"])
            self.public_key.verify(signature, text, padding.PKCS1v15(), hashes.SHA256())
        except (InvalidSignature, ValueError):
            return _json(200, {"verification_status": "FAILURE"})
        return _json(200, {"verification_status": "SUCCESS"})


def _json(status: int, payload: dict[str, Any]) -> Answer:
    return status, {"content-type": "application/json"}, json.dumps(payload).encode()


@contextmanager
def paypal_api(imitation: PayPalImitation) -> Iterator[Loopback]:
    with serving(imitation.respond) as loopback:
        yield loopback
