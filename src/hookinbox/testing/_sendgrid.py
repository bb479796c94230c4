"""SendGrid deliveries signed with a test key pair (needs the `crypto` extra: cryptography).

SendGrid signs with a private key only SendGrid holds. `sendgrid_test_key()` makes a P-256 key
pair; configure the source with its public half (`SendGrid(public_key=key.public_key)`) and
`sign` finds the private half by the source's key, or takes `private_key=`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from functools import cache
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from hookinbox.sources._sendgrid import SendGrid
from hookinbox.testing._signing import register_signer

_KEYS: dict[tuple[int, int], ec.EllipticCurvePrivateKey] = {}


@dataclass(frozen=True)
class SendGridTestKey:
    """A verification key pair made for tests; not SendGrid's."""

    public_key: str
    """Base64 DER, as SendGrid shows its verification key: `SendGrid(public_key=...)`."""
    private_key: ec.EllipticCurvePrivateKey


@cache
def sendgrid_test_key() -> SendGridTestKey:
    """One key pair per process."""
    key = ec.generate_private_key(ec.SECP256R1())
    numbers = key.public_key().public_numbers()
    _KEYS[(numbers.x, numbers.y)] = key
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return SendGridTestKey(base64.b64encode(der).decode(), key)


def _private_key(source: SendGrid, fields: dict[str, Any]) -> ec.EllipticCurvePrivateKey:
    given = fields.pop("private_key", None)
    if given is not None:
        return given  # type: ignore[no-any-return]
    numbers = source._keys[0].public_numbers()
    try:
        return _KEYS[(numbers.x, numbers.y)]
    except KeyError:
        raise TypeError(
            "sign() needs the private key of the SendGrid source's public key: build the "
            "source with public_key=sendgrid_test_key().public_key, or pass private_key="
        ) from None


@register_signer(SendGrid)
def _sendgrid(source: SendGrid, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    key = _private_key(source, fields)
    timestamp = str(t)
    signature = key.sign(timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    return {
        "Content-Type": fields.pop("content_type", "application/json"),
        "X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
        "X-Twilio-Email-Event-Webhook-Timestamp": timestamp,
    }
