"""PayPal's certificate, fetched: the allow-list, TLS, the chain, the name, the dates, the cache.

A real HTTPS server on loopback plays PayPal's certificate host, with a TLS certificate and a
signing certificate from a certificate authority made in the test. The source reaches it only
through `test_certificate_hosts`, the test-only widening of the allow-list.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from tests.support import paypal
from tests.support.loopback import Loopback, serving
from tests.support.pki import Issued, LocalPKI, issue, make_pki, make_root, rsa_key

from hookinbox._errors import BadSignature, VerificationUnavailable
from hookinbox.sources import PayPal

PATH = paypal.CERT_PATH


@dataclass
class Host:
    pki: LocalPKI
    certificates: paypal.CertificateHost
    loopback: Loopback

    @property
    def netloc(self) -> str:
        return self.loopback.url.removeprefix("https://")

    def url(self, path: str = PATH) -> str:
        return self.loopback.url + path

    def source(self, **options: object) -> PayPal:
        defaults: dict[str, object] = {
            "webhook_id": paypal.WEBHOOK_ID,
            "ca_bundle": self.pki.bundle,
            "test_certificate_hosts": [self.netloc],
        }
        return PayPal(**{**defaults, **options})  # type: ignore[arg-type]

    def delivery(
        self, path: str = PATH, key: rsa.RSAPrivateKey | None = None
    ) -> tuple[dict[str, str], bytes]:
        signing_key = key or self.pki.signing.key
        assert isinstance(signing_key, rsa.RSAPrivateKey)
        headers, body = paypal.delivery(signing_key, cert_url=self.url(path))
        return {k.lower(): v for k, v in headers.items()}, body

    def fetches(self) -> int:
        return len(self.loopback.requests)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    pki = make_pki(tmp_path)
    certificates = paypal.CertificateHost({PATH: pki.signing.pem})
    with serving(certificates.respond, tls=pki.server_tls) as loopback:
        yield Host(pki, certificates, loopback)


def test_the_certificate_is_fetched_once_and_cached(host: Host) -> None:
    source = host.source()
    for _ in range(3):
        headers, body = host.delivery()
        source.verify(headers, body, now=time.time())
    assert host.fetches() == 1


def test_concurrent_deliveries_fetch_once(host: Host) -> None:
    host.certificates.delay = 0.3
    source = host.source()
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def deliver() -> None:
        headers, body = host.delivery()
        barrier.wait()
        source.verify(headers, body, now=time.time())
        outcomes.append("verified")

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert outcomes == ["verified"] * 8
    assert host.fetches() == 1


def test_concurrent_deliveries_share_one_failed_fetch(host: Host) -> None:
    host.certificates.delay = 0.3
    host.certificates.status = 503
    source = host.source()
    errors: list[type[Exception]] = []
    barrier = threading.Barrier(6)

    def deliver() -> None:
        headers, body = host.delivery()
        barrier.wait()
        try:
            source.verify(headers, body, now=time.time())
        except VerificationUnavailable as error:
            errors.append(type(error))

    threads = [threading.Thread(target=deliver) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert errors == [VerificationUnavailable] * 6
    assert host.fetches() == 1
    host.certificates.status = 200  # the outage ends: the next delivery fetches again
    headers, body = host.delivery()
    source.verify(headers, body, now=time.time())
    assert host.fetches() == 2


def test_the_cache_is_bounded(host: Host) -> None:
    other = PATH.replace("CERT-", "CERT-other-")
    host.certificates.documents[other] = host.pki.signing.pem
    source = host.source(cache_size=1)
    for path in (PATH, other, PATH):
        headers, body = host.delivery(path)
        source.verify(headers, body, now=time.time())
    assert host.fetches() == 3


def test_a_cached_certificate_is_checked_again_after_a_day(host: Host) -> None:
    source = host.source()
    headers, body = host.delivery()
    now = time.time()
    source.verify(headers, body, now=now)
    source.verify(headers, body, now=now + 23 * 3600)
    assert host.fetches() == 1
    source.verify(headers, body, now=now + 25 * 3600)
    assert host.fetches() == 2


def test_an_intermediate_served_with_the_certificate_completes_the_chain(host: Host) -> None:
    intermediate = make_root("intermediate", issuer=host.pki.root)
    leaf = issue(intermediate, "messageverificationcerts.paypal.com", key=rsa_key("via-int"))
    host.certificates.documents[PATH] = leaf.pem + intermediate.pem
    headers, body = host.delivery(key=rsa_key("via-int"))
    host.source().verify(headers, body, now=time.time())
    host.certificates.documents[PATH] = leaf.pem  # without it, no chain to the root
    with pytest.raises(BadSignature, match="trusted root"):
        host.source().verify(headers, body, now=time.time())


def _serve(host: Host, certificate: Issued) -> tuple[dict[str, str], bytes]:
    host.certificates.documents[PATH] = certificate.pem
    key = certificate.key
    assert isinstance(key, rsa.RSAPrivateKey)
    return host.delivery(key=key)


def test_a_certificate_from_another_authority_is_refused(host: Host) -> None:
    stranger = issue(make_root("stranger"), "messageverificationcerts.paypal.com")
    headers, body = _serve(host, stranger)
    with pytest.raises(BadSignature, match="trusted root"):
        host.source().verify(headers, body, now=time.time())


@pytest.mark.parametrize(
    "name", ["attacker.example", "paypal.com.attacker.example", "notpaypal.com"]
)
def test_a_certificate_not_issued_to_paypal_is_refused(host: Host, name: str) -> None:
    headers, body = _serve(host, issue(host.pki.root, name, key=rsa_key("not-paypal")))
    with pytest.raises(BadSignature, match="not issued to PayPal"):
        host.source().verify(headers, body, now=time.time())


def test_an_expired_certificate_is_refused(host: Host) -> None:
    expired = issue(
        host.pki.root,
        "messageverificationcerts.paypal.com",
        key=rsa_key("expired"),
        not_before=datetime.now(UTC) - timedelta(days=400),
        not_after=datetime.now(UTC) - timedelta(days=1),
    )
    headers, body = _serve(host, expired)
    with pytest.raises(BadSignature, match="not valid now"):
        host.source().verify(headers, body, now=time.time())


def test_a_document_that_is_not_a_certificate_is_refused(host: Host) -> None:
    host.certificates.documents[PATH] = b"<html>maintenance</html>"
    headers, body = host.delivery()
    with pytest.raises(BadSignature, match="not a PEM certificate"):
        host.source().verify(headers, body, now=time.time())


def test_an_oversized_document_is_refused(host: Host) -> None:
    host.certificates.documents[PATH] = host.pki.signing.pem * 100
    headers, body = host.delivery()
    with pytest.raises(BadSignature, match="too large"):
        host.source().verify(headers, body, now=time.time())


def test_no_certificate_at_the_url_is_a_bad_signature(host: Host) -> None:
    headers, body = host.delivery(PATH.replace("CERT-", "CERT-unknown-"))
    with pytest.raises(BadSignature, match="no certificate"):
        host.source().verify(headers, body, now=time.time())


@pytest.mark.parametrize("status", [500, 502, 503, 429, 301, 403])
def test_a_failing_certificate_host_is_unavailable_not_a_bad_signature(
    host: Host, status: int
) -> None:
    host.certificates.status = status
    headers, body = host.delivery()
    with pytest.raises(VerificationUnavailable, match=str(status)):
        host.source().verify(headers, body, now=time.time())


def test_a_slow_certificate_host_is_unavailable(host: Host) -> None:
    host.certificates.delay = 2.0
    headers, body = host.delivery()
    with pytest.raises(VerificationUnavailable, match="Timeout"):
        host.source(timeout=0.3).verify(headers, body, now=time.time())


def test_an_unreachable_certificate_host_is_unavailable(host: Host) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{sock.getsockname()[1]}"
    headers, body = host.delivery()
    headers["paypal-cert-url"] = f"https://{closed}{PATH}"
    source = host.source(test_certificate_hosts=[closed])
    with pytest.raises(VerificationUnavailable, match="ConnectError"):
        source.verify(headers, body, now=time.time())


def test_the_tls_certificate_of_the_host_is_checked(host: Host) -> None:
    """With the system CAs, the loopback host's test TLS certificate is not trusted."""
    headers, body = host.delivery()
    source = host.source(ca_bundle=None)
    with pytest.raises(VerificationUnavailable, match="ConnectError"):
        source.verify(headers, body, now=time.time())


@pytest.mark.parametrize(
    "url",
    [
        "https://attacker.example" + PATH,
        "http://api.paypal.com" + PATH,
        "https://api.paypal.com.attacker.example" + PATH,
        "https://api.paypal.com:8443" + PATH,
        "https://user@api.paypal.com" + PATH,
        "https://api.paypal.com/v1/oauth2/token",
        "https://api.paypal.com" + PATH + "?redirect=https://attacker.example",
        "https://api.paypal.com" + PATH + "#x",
        "https://api.paypal.com/v1/notifications/certs/../../oauth2/token",
        "https://api.paypal.com/v1/notifications/certs/",
        "https://api.paypal.com:99999" + PATH,
        "https://[::1" + PATH,
        "file:///etc/passwd",
        "api.paypal.com" + PATH,
        "https://api.paypal.com" + PATH + "\u00e9",
    ],
)
def test_urls_outside_the_allow_list_are_refused_without_a_request(host: Host, url: str) -> None:
    headers, body = host.delivery()
    headers["paypal-cert-url"] = url
    with pytest.raises(BadSignature, match="PAYPAL-CERT-URL"):
        host.source().verify(headers, body, now=time.time())
    assert host.fetches() == 0


def test_the_loopback_host_is_reachable_only_when_listed(host: Host) -> None:
    headers, body = host.delivery()
    with pytest.raises(BadSignature, match="PAYPAL-CERT-URL"):
        host.source(test_certificate_hosts=[]).verify(headers, body, now=time.time())
    assert host.fetches() == 0


@pytest.mark.parametrize(
    "host_name",
    ["api.paypal.com", "api-m.paypal.com", "api.sandbox.paypal.com", "api-m.sandbox.paypal.com"],
)
def test_paypals_certificate_hosts_are_allowed(host_name: str) -> None:
    source = PayPal(webhook_id="W")
    source._fetcher.check_url(f"https://{host_name}{PATH}")  # type: ignore[union-attr]
    source._fetcher.check_url(f"https://{host_name.upper()}:443{PATH}")  # type: ignore[union-attr]
