"""PayPal's signing certificates: where they may come from, how they are checked, how long kept.

A delivery names its certificate in `PAYPAL-CERT-URL`, a header anyone can write. So the URL
must point at PayPal: HTTPS, an allow-listed host, the certificates path, nothing else. What it
serves must chain to a trusted root, be valid now and be issued to a `paypal.com` name. A
checked certificate is cached by URL: one fetch serves every delivery signed with it.

Answers, decided here once:
- the URL is not PayPal's, the host says there is no such certificate (404, 410), or what it
  serves fails a check: `BadSignature` (401), the delivery cannot be PayPal's;
- the host cannot be reached or fails (timeouts, TLS errors, 5xx, 429, anything else): an
  outage is not the sender's fault, so `VerificationUnavailable` (503) and PayPal retries.
"""

from __future__ import annotations

import os
import re
import ssl
import threading
import warnings
from collections import OrderedDict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import certifi
import httpx
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from cryptography.utils import CryptographyDeprecationWarning
from cryptography.x509 import verification
from cryptography.x509.oid import NameOID

from hookinbox._errors import BadSignature, ConfigurationError, VerificationUnavailable
from hookinbox._logging import logger

log = logger("hookinbox.sources._paypal")

PAYPAL_CERTIFICATE_HOSTS = frozenset(
    {"api.paypal.com", "api-m.paypal.com", "api.sandbox.paypal.com", "api-m.sandbox.paypal.com"}
)
"""Hosts that serve PayPal's webhook certificates, live and sandbox, classic and `api-m`."""

PEM_BLOCK = re.compile(
    rb"-----BEGIN CERTIFICATE-----\r?\n.+?\r?\n-----END CERTIFICATE-----", re.DOTALL
)
CERTIFICATE_PATH = re.compile(r"/v1/notifications/certs/[A-Za-z0-9._-]{1,128}")
MAX_URL_LENGTH = 512
MAX_CERTIFICATE_BYTES = 64 * 1024  # a leaf and its intermediates are a few kilobytes
MAX_CACHE_AGE = timedelta(hours=24)  # re-fetched and re-checked at least daily
DEFAULT_TIMEOUT = 5.0
DEFAULT_CACHE_SIZE = 16


def utc(now: float) -> datetime:
    """The clock's reading as a datetime; a reading no datetime can hold fails verification."""
    try:
        return datetime.fromtimestamp(now, UTC)
    except (OverflowError, ValueError, OSError) as exc:
        raise BadSignature("the clock reading is out of range") from exc


def load_pem_certificates(pem: bytes, what: str) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise BadSignature(f"{what} is not a PEM certificate") from exc


def rsa_key(certificate: x509.Certificate) -> RSAPublicKey:
    try:
        key = certificate.public_key()
    except (ValueError, TypeError) as exc:  # an algorithm cryptography does not support
        raise BadSignature("the PayPal certificate's key cannot be read") from exc
    if not isinstance(key, RSAPublicKey):
        raise BadSignature("the PayPal certificate's key is not RSA")
    return key


def certificate_names(certificate: x509.Certificate) -> list[str]:
    """The names a certificate is issued to: its subject's common names and its DNS names."""
    names = [
        str(attribute.value)
        for attribute in certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    ]
    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return names
    except ValueError:  # a malformed extension: the subject names alone decide
        return names
    return names + san.value.get_values_for_type(x509.DNSName)


def is_paypal_name(name: str, domains: Collection[str]) -> bool:
    name = name.lower().rstrip(".")
    return any(name == domain or name.endswith("." + domain) for domain in domains)


def check_validity(certificate: x509.Certificate, when: datetime) -> None:
    if not certificate.not_valid_before_utc <= when <= certificate.not_valid_after_utc:
        raise BadSignature(
            "the PayPal certificate is not valid now (valid "
            f"{certificate.not_valid_before_utc:%Y-%m-%d} to "
            f"{certificate.not_valid_after_utc:%Y-%m-%d})"
        )


@dataclass(frozen=True, slots=True)
class _Checked:
    certificate: x509.Certificate
    key: RSAPublicKey
    expires: datetime
    """The earliest expiry in the chain, or the cache age limit, whichever comes first."""


@dataclass(slots=True)
class _Flight:
    """One fetch in progress, and what came of it, for the deliveries waiting on it."""

    done: threading.Event = field(default_factory=threading.Event)
    result: _Checked | None = None
    error: BadSignature | VerificationUnavailable | None = None

    def outcome(self) -> _Checked:
        if self.result is not None:
            return self.result
        if self.error is not None:
            raise type(self.error)(self.error.message)  # a fresh exception per thread
        raise VerificationUnavailable("fetching the PayPal certificate failed")


class CertificateFetcher:
    """Fetches, checks and caches PayPal certificates; safe to share between threads."""

    def __init__(
        self,
        *,
        ca_bundle: str | os.PathLike[str] | None = None,
        domains: Collection[str] = ("paypal.com",),
        timeout: float = DEFAULT_TIMEOUT,
        cache_size: int = DEFAULT_CACHE_SIZE,
        test_hosts: Iterable[str] = (),
    ) -> None:
        if cache_size < 1:
            raise ConfigurationError("the certificate cache needs room for one certificate")
        if timeout <= 0:
            raise ConfigurationError("the certificate fetch timeout must be positive")
        self._ca_bundle = os.fspath(ca_bundle) if ca_bundle is not None else certifi.where()
        self._roots = self._load_roots(self._ca_bundle)
        self._domains = tuple(d.lower() for d in domains)
        if not self._domains:
            raise ConfigurationError("name at least one domain PayPal certificates are issued to")
        self.timeout = timeout
        self.cache_size = cache_size
        self._test_hosts = frozenset(h.lower() for h in test_hosts)
        self._cache: OrderedDict[str, _Checked] = OrderedDict()
        self._flights: dict[str, _Flight] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _load_roots(path: str) -> verification.Store:
        try:
            with open(path, "rb") as file:
                bundle = file.read()
        except OSError as exc:
            raise ConfigurationError(f"cannot read the CA bundle {path!r}: {exc}") from exc
        roots = []
        for block in PEM_BLOCK.findall(bundle):
            # One by one: a root that cryptography refuses (system bundles hold a few old
            # ones with a non-positive serial number) must not take the others with it.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CryptographyDeprecationWarning)
                try:
                    roots.append(x509.load_pem_x509_certificate(block))
                except ValueError:
                    continue
        if not roots:
            raise ConfigurationError(f"the CA bundle {path!r} holds no certificate")
        return verification.Store(roots)

    def check_url(self, url: str) -> None:
        """Refuse, before any network access, a URL that does not name a PayPal certificate."""
        if len(url) > MAX_URL_LENGTH or not url.isascii() or not url.isprintable():
            raise BadSignature("PAYPAL-CERT-URL is not a PayPal certificate URL")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise BadSignature("PAYPAL-CERT-URL is not a URL") from exc
        host = (parts.hostname or "").lower()
        allowed = (host in PAYPAL_CERTIFICATE_HOSTS and port in (None, 443)) or (
            parts.netloc.lower() in self._test_hosts
        )
        if (
            parts.scheme != "https"
            or not allowed
            or parts.username is not None
            or parts.password is not None
            or parts.query
            or parts.fragment
            or not CERTIFICATE_PATH.fullmatch(parts.path)
        ):
            raise BadSignature("PAYPAL-CERT-URL is not a PayPal certificate URL")

    def key(self, url: str, *, now: float) -> RSAPublicKey:
        """The public key of the checked certificate at `url`.

        Deliveries that name one uncached URL at the same time share one fetch, and its
        failure: during an outage they answer 503 together instead of queueing timeouts.
        """
        self.check_url(url)
        when = utc(now)
        with self._lock:
            checked = self._fresh(url, when)
            if checked is not None:
                return checked.key
            flight = self._flights.get(url)
            leading = flight is None
            if flight is None:
                flight = self._flights[url] = _Flight()
        if not leading:
            flight.done.wait()
            return flight.outcome().key
        try:
            flight.result = self._check(self._fetch(url), when, url)
            with self._lock:
                self._cache[url] = flight.result
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        except (BadSignature, VerificationUnavailable) as error:
            flight.error = error
            raise
        finally:
            with self._lock:
                del self._flights[url]
            flight.done.set()
        return flight.result.key

    def _fresh(self, url: str, when: datetime) -> _Checked | None:
        checked = self._cache.get(url)
        if checked is None:
            return None
        if when > checked.expires or when < checked.certificate.not_valid_before_utc:
            del self._cache[url]  # check it again: renewed, or the clock moved
            return None
        self._cache.move_to_end(url)
        return checked

    def _fetch(self, url: str) -> bytes:
        context = ssl.create_default_context(cafile=self._ca_bundle)
        try:
            with (
                httpx.Client(verify=context, timeout=self.timeout) as client,
                client.stream("GET", url, headers={"accept": "*/*"}) as response,
            ):
                if response.status_code in (404, 410):
                    raise BadSignature(f"PayPal has no certificate at {url}")
                if response.status_code != 200:
                    raise VerificationUnavailable(
                        f"PayPal's certificate host answered {response.status_code} for {url}"
                    )
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_CERTIFICATE_BYTES:
                        raise BadSignature(f"the certificate at {url} is too large")
                return bytes(body)
        except httpx.HTTPError as exc:
            log.warning("fetching PayPal certificate %s failed: %r", url, exc)
            raise VerificationUnavailable(
                f"PayPal's certificate {url} cannot be fetched: {type(exc).__name__}"
            ) from exc

    def _check(self, pem: bytes, when: datetime, url: str) -> _Checked:
        leaf, *intermediates = load_pem_certificates(pem, f"the document at {url}")
        key = rsa_key(leaf)
        if not any(is_paypal_name(name, self._domains) for name in certificate_names(leaf)):
            raise BadSignature(f"the certificate at {url} is not issued to PayPal")
        check_validity(leaf, when)
        verifier = (
            verification.PolicyBuilder()
            .store(self._roots)
            .time(when)
            # The roots and intermediates follow the Web PKI rules; the signing certificate
            # is no TLS server certificate, so no particular extensions are required of it.
            .extension_policies(
                ca_policy=verification.ExtensionPolicy.webpki_defaults_ca(),
                ee_policy=verification.ExtensionPolicy.permit_all(),
            )
            .build_client_verifier()
        )
        try:
            chain = verifier.verify(leaf, intermediates).chain
        except verification.VerificationError as exc:
            log.warning("PayPal certificate %s is not trusted: %s", url, exc)
            untrusted = f"the certificate at {url} does not chain to a trusted root"
            raise BadSignature(untrusted) from exc
        expires = min([c.not_valid_after_utc for c in chain] + [when + MAX_CACHE_AGE])
        return _Checked(leaf, key, expires)
