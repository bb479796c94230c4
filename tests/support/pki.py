"""A small certificate authority made in the test: a root, a PayPal-like signing certificate
and a TLS certificate for 127.0.0.1, so no test depends on PayPal's real certificates."""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

# Wide enough for the fixed clock of unit tests (2023) and the real one.
VALID_FROM = datetime(2020, 1, 1, tzinfo=UTC)
VALID_TO = datetime(2040, 1, 1, tzinfo=UTC)
PAYPAL_NAME = "messageverificationcerts.paypal.com"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class Issued:
    certificate: x509.Certificate
    key: PrivateKey

    @property
    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@cache
def rsa_key(label: str) -> rsa.RSAPrivateKey:
    """One 2048-bit key per label per test run (generating keys is slow)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def make_root(label: str = "root", issuer: Issued | None = None) -> Issued:
    """A self-signed root; with `issuer`, an intermediate CA under it."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(f"hookinbox test {label}")
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.certificate.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(VALID_FROM)
        .not_valid_after(VALID_TO)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(
                issuer.key.public_key()  # type: ignore[arg-type]
            ),
            critical=False,
        )
    signer = issuer.key if issuer else key
    return Issued(builder.sign(signer, hashes.SHA256()), key)


def issue(
    issuer: Issued,
    common_name: str,
    *,
    key: PrivateKey | None = None,
    not_before: datetime = VALID_FROM,
    not_after: datetime = VALID_TO,
    ip: str | None = None,
) -> Issued:
    """A leaf certificate; with `ip`, a TLS server certificate for that address."""
    key = key if key is not None else rsa_key(common_name)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(issuer.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(
                issuer.key.public_key()  # type: ignore[arg-type]
            ),
            critical=False,
        )
    )
    if ip is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]),
            critical=False,
        ).add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
    return Issued(builder.sign(issuer.key, hashes.SHA256()), key)


@cache
def paypal_signing() -> Issued:
    """A PayPal-like signing certificate under a throwaway root, for tests that pin it."""
    return issue(make_root("pinned"), PAYPAL_NAME, key=rsa_key("paypal-signing"))


@dataclass(frozen=True)
class LocalPKI:
    root: Issued
    signing: Issued
    """The PayPal-like certificate that signs deliveries (RSA, CN messageverificationcerts...)."""
    bundle: Path
    """A PEM file holding only the root: the trust store for the chain and for TLS."""
    server_tls: ssl.SSLContext
    """For a loopback HTTPS server on 127.0.0.1, trusted through the same root."""


def make_pki(directory: Path) -> LocalPKI:
    root = make_root()
    signing = issue(root, PAYPAL_NAME, key=rsa_key("paypal-signing"))
    server = issue(root, "127.0.0.1", key=rsa_key("tls"), ip="127.0.0.1")
    bundle = directory / "test-root.pem"
    bundle.write_bytes(root.pem)
    (directory / "server.pem").write_bytes(server.pem)
    (directory / "server.key").write_bytes(
        server.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "server.pem", directory / "server.key")
    return LocalPKI(root, signing, bundle, context)
