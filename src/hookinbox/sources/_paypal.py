"""PayPal: an RSA signature (SHA256withRSA) by a certificate PayPal names in each delivery.

The signed text is `{transmission id}|{transmission time}|{webhook id}|{crc32 of the body}`,
the CRC32 unsigned and in decimal; the webhook id is yours (it binds the delivery to your
endpoint), the other parts come from the `PAYPAL-TRANSMISSION-*` headers. The signature
(`PAYPAL-TRANSMISSION-SIG`, base64) is checked with the public key of the certificate at
`PAYPAL-CERT-URL`, fetched from PayPal only and checked (see `_paypal_certs`), or with a
certificate you configure. `online=PayPalAPI(...)` asks PayPal's API instead.

The key is the body's `id` (`WH-...`), the same on every retry; the transmission id is new for
each transmission and is never the key.

Unlike the HMAC sources this one is not a pure function: verifying may fetch a certificate or
call PayPal. The receiver runs sources in a worker thread, so the blocking call is fine there.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import zlib
from collections.abc import Iterable, Sequence
from datetime import timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey

from hookinbox._errors import BadSignature, ConfigurationError, VerificationError
from hookinbox.sources._base import Source
from hookinbox.sources._identity import (
    Identity,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._paypal_api import PayPalAPI, Transmission
from hookinbox.sources._paypal_certs import (
    DEFAULT_CACHE_SIZE,
    DEFAULT_TIMEOUT,
    CertificateFetcher,
    check_validity,
    load_pem_certificates,
    rsa_key,
    utc,
)
from hookinbox.sources._provider import provider
from hookinbox.sources._signatures import (
    Headers,
    check_tolerance,
    distinct_signatures,
    require_header,
    signature_items,
)

AUTH_ALGO = "SHA256withRSA"
MAX_FIELD_LENGTH = 255


class PayPal(Source):
    default_name = "paypal"
    verifies_over_network = True  # certificates or the API are fetched while verifying
    # Up to 25 retries over 3 days (provider facts); how long a manual resend stays possible
    # is not confirmed, so the window is configurable.
    redelivery_window = timedelta(days=3)
    stored_headers = (
        "paypal-transmission-id",
        "paypal-transmission-time",
        "paypal-transmission-sig",
        "paypal-cert-url",
        "paypal-auth-algo",
    )
    signature_headers = stored_headers  # every part of the signed text, and the certificate

    def __init__(
        self,
        *,
        webhook_id: str | Sequence[str],
        name: str | None = None,
        certificate: str | bytes | None = None,
        ca_bundle: str | os.PathLike[str] | None = None,
        certificate_domains: Sequence[str] = ("paypal.com",),
        timeout: float = DEFAULT_TIMEOUT,
        cache_size: int = DEFAULT_CACHE_SIZE,
        tolerance: float | None = None,
        online: PayPalAPI | None = None,
        redelivery_window: timedelta | None = None,
        test_certificate_hosts: Iterable[str] = (),
    ) -> None:
        super().__init__(name=name)
        self.webhook_ids = _webhook_ids(webhook_id)
        self.tolerance = tolerance
        self.online = online
        if redelivery_window is not None:
            self.redelivery_window = redelivery_window
        if online is not None and certificate is not None:
            raise ConfigurationError("give PayPal either a certificate or online=, not both")
        self._pinned = _pinned_certificate(certificate) if certificate is not None else None
        self._fetcher = (
            CertificateFetcher(
                ca_bundle=ca_bundle,
                domains=certificate_domains,
                timeout=timeout,
                cache_size=cache_size,
                test_hosts=test_certificate_hosts,
            )
            if certificate is None and online is None
            else None
        )

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        transmission = _transmission(headers)
        signatures = _signatures(headers)
        timestamp = self._timestamp(transmission.transmission_time)
        if self.online is not None:
            online = self.online
            # Each question sends the whole body to PayPal and holds a thread until it answers:
            # PayPal signs a delivery once, so one signature (repeats count once), asked about
            # once per configured webhook id at most.
            (text,) = distinct_signatures(
                [text for text, _ in signatures], "distinct signature for PayPal's API", limit=1
            )
            asked = dataclasses.replace(transmission, transmission_sig=text)
            if not any(online.verify(asked, w, body) for w in self.webhook_ids):
                raise BadSignature("PayPal's API says the delivery is not its own")
        else:
            key = self._key(transmission.cert_url, now)
            crc = zlib.crc32(body) & 0xFFFFFFFF
            prefix = f"{transmission.transmission_id}|{transmission.transmission_time}|"
            signed = [f"{prefix}{w}|{crc}".encode("ascii") for w in self.webhook_ids]
            checks = [_rsa_matches(key, s, m) for _, s in signatures for m in signed]
            if not any(checks):
                raise BadSignature()
        if timestamp is not None:
            check_tolerance(timestamp, now=now, tolerance=self.tolerance)

    def _timestamp(self, text: str) -> int | None:
        if self.tolerance is None:
            return None
        when = parse_time(text)
        if when is None or "T" not in text:
            raise BadSignature("PAYPAL-TRANSMISSION-TIME is not an ISO 8601 time")
        return int(when.timestamp())

    def _key(self, cert_url: str, now: float) -> RSAPublicKey:
        if self._pinned is not None:
            check_validity(self._pinned, utc(now))
            return rsa_key(self._pinned)
        assert self._fetcher is not None
        return self._fetcher.key(cert_url, now=now)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        return Identity(
            event_id=event_key(payload.get("id")),
            event_type=optional_text(payload.get("event_type")),
            occurred_at=parse_time(payload.get("create_time")),
            payload=payload,
        )


def _webhook_ids(webhook_id: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(webhook_id, str):
        ids: tuple[str, ...] = (webhook_id,)
    elif isinstance(webhook_id, Sequence) and not isinstance(webhook_id, bytes):
        ids = tuple(webhook_id)
    else:
        ids = ()
    if not ids or any(not isinstance(i, str) or not _usable(i) for i in ids):
        raise ConfigurationError("PayPal needs at least one webhook id (printable ASCII, no '|')")
    return ids


def _pinned_certificate(pem: str | bytes) -> x509.Certificate:
    try:
        certificate = load_pem_certificates(pem.encode() if isinstance(pem, str) else pem, "")[0]
        rsa_key(certificate)
    except VerificationError as exc:
        raise ConfigurationError("the PayPal certificate must be a PEM RSA certificate") from exc
    return certificate


def _usable(value: str) -> bool:
    """A field of the signed text: ASCII, printable, bounded, and never the separator."""
    return (
        0 < len(value) <= MAX_FIELD_LENGTH
        and not value.isspace()
        and value.isascii()
        and value.isprintable()
        and "|" not in value
    )


def _transmission(headers: Headers) -> Transmission:
    transmission = Transmission(
        auth_algo=require_header(headers, "paypal-auth-algo").strip(),
        cert_url=require_header(headers, "paypal-cert-url").strip(),
        transmission_id=require_header(headers, "paypal-transmission-id").strip(),
        transmission_sig=require_header(headers, "paypal-transmission-sig").strip(),
        transmission_time=require_header(headers, "paypal-transmission-time").strip(),
    )
    if transmission.auth_algo != AUTH_ALGO:
        raise BadSignature(f"PAYPAL-AUTH-ALGO must be {AUTH_ALGO}")
    if not _usable(transmission.transmission_id):
        raise BadSignature("PAYPAL-TRANSMISSION-ID is not usable")
    if not _usable(transmission.transmission_time):
        raise BadSignature("PAYPAL-TRANSMISSION-TIME is not usable")
    return transmission


def _signatures(headers: Headers) -> list[tuple[str, bytes]]:
    """Every well-formed signature of PAYPAL-TRANSMISSION-SIG, as text and bytes; when none
    is well-formed, the first one's fault."""
    items = signature_items(headers, "paypal-transmission-sig", what="PAYPAL-TRANSMISSION-SIG")
    found = []
    for text in items:
        try:
            found.append((text, _signature(text)))
        except BadSignature:
            continue
    if not found:
        _signature(items[0])  # raises
    return found


def _signature(encoded: str) -> bytes:
    try:
        signature = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadSignature("PAYPAL-TRANSMISSION-SIG is not base64") from exc
    if not signature:
        raise BadSignature("PAYPAL-TRANSMISSION-SIG is empty")
    return signature


def _rsa_matches(key: RSAPublicKey, signature: bytes, message: bytes) -> bool:
    try:
        key.verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
    except (InvalidSignature, ValueError):
        return False
    return True


PROVIDER = provider(
    PayPal,
    sign=None,  # hookinbox.testing's, with its test certificate's private key
    example=lambda keys: PayPal(webhook_id="WH-EXAMPLE", certificate=keys.paypal_pem),
    event=lambda tag: {"id": f"evt_{tag}", "type": "order.paid", "created": 1_700_000_000},
    signature_header="PAYPAL-TRANSMISSION-SIG",
    forgery=lambda: {"private_key": rsa.generate_private_key(public_exponent=65537, key_size=2048)},
)
