"""PayPal deliveries signed with a test key pair (needs the `paypal` extra: cryptography).

PayPal signs with the private key of a certificate it names in each delivery. A test cannot
use PayPal's key, so `paypal_test_certificate()` makes a key pair and a self-signed
certificate; configure the source with it (`PayPal(webhook_id=..., certificate=cert.pem)`) and
`sign` finds the matching private key by the source's certificate.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from hookinbox.sources._paypal import PayPal
from hookinbox.testing._signing import register_signer

TEST_CERT_URL = "https://api.paypal.com/v1/notifications/certs/CERT-hookinbox-test-0001"
_KEYS: dict[int, rsa.RSAPrivateKey] = {}


@dataclass(frozen=True)
class PayPalTestCertificate:
    """A signing certificate and its private key, made for tests; not PayPal's."""

    pem: str
    """The certificate, for `PayPal(webhook_id=..., certificate=pem)`."""
    private_key: rsa.RSAPrivateKey


def self_signed(common_name: str) -> tuple[str, rsa.RSAPrivateKey]:
    """A 2048-bit key pair and a self-signed certificate issued to `common_name`, its private
    key remembered for the signers (`_KEYS`, by modulus): the PEM and the key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        # Wide, so that a test's fixed clock (2020, 2035, ...) still finds it valid.
        .not_valid_before(datetime(2000, 1, 1, tzinfo=UTC))
        .not_valid_after(datetime(2099, 1, 1, tzinfo=UTC))
        .sign(key, hashes.SHA256())
    )
    _KEYS[key.public_key().public_numbers().n] = key
    return certificate.public_bytes(serialization.Encoding.PEM).decode(), key


@cache
def paypal_test_certificate() -> PayPalTestCertificate:
    """One key pair and certificate per process (making an RSA key takes a moment)."""
    return PayPalTestCertificate(*self_signed("messageverificationcerts.paypal.com"))


def _private_key(source: PayPal, fields: dict[str, Any]) -> rsa.RSAPrivateKey:
    given = fields.pop("private_key", None)
    if given is not None:
        return given  # type: ignore[no-any-return]
    pinned = source._pinned
    public = pinned.public_key() if pinned is not None else None
    if isinstance(public, rsa.RSAPublicKey) and public.public_numbers().n in _KEYS:
        return _KEYS[public.public_numbers().n]
    raise TypeError(
        "sign() needs the private key of the PayPal source's certificate: build the source "
        "with certificate=paypal_test_certificate().pem, or pass private_key="
    )


@register_signer(PayPal)
def _paypal(source: PayPal, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    key = _private_key(source, fields)
    webhook_id = fields.pop("webhook_id", source.webhook_ids[0])
    transmission_id = fields.pop("transmission_id", None) or str(uuid.uuid1())
    when = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    # PayPal's recipe: CRC32 of the body as an unsigned decimal (binascii's, not the source's).
    crc = binascii.crc32(body) & 0xFFFFFFFF
    text = f"{transmission_id}|{when}|{webhook_id}|{crc}".encode()
    signature = key.sign(text, padding.PKCS1v15(), hashes.SHA256())
    return {
        "Content-Type": "application/json",
        "User-Agent": "PayPal/AUHD-214.0-58843029",
        "PAYPAL-AUTH-ALGO": "SHA256withRSA",
        "PAYPAL-CERT-URL": fields.pop("cert_url", TEST_CERT_URL),
        "PAYPAL-TRANSMISSION-ID": transmission_id,
        "PAYPAL-TRANSMISSION-SIG": base64.b64encode(signature).decode(),
        "PAYPAL-TRANSMISSION-TIME": when,
    }
