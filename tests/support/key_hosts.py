"""A provider's key host played by a real HTTPS server on loopback, under the provider's names.

The fetcher under test is given a transport (`Route`) that records every request it is asked
to send, then sends it over a real TLS connection to the loopback server while naming the
provider's host (SNI and `Host`): the server's certificate, issued for the provider's names
by an authority made in the test, is checked against that name with a context trusting only
that authority. So a test sees both what the fetcher tried (`attempts`, where a URL outside
the allow-list must never appear) and what reached the server (`loopback.requests`), and
nothing leaves the machine: a host the test did not name is refused by the route, not looked
up.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from tests.support.loopback import Loopback, Respond, serving
from tests.support.pki import VALID_FROM, VALID_TO, Issued, make_root, rsa_key


def tls_certificate(root: Issued, names: list[str]) -> Issued:
    """A TLS server certificate for `names` (DNS), under `root`."""
    key = rsa_key("key-host-tls")
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, names[0])]))
        .issuer_name(root.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(VALID_FROM)
        .not_valid_after(VALID_TO)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), False)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(root.key, hashes.SHA256())
    )
    return Issued(certificate, key)


@dataclass
class Route(httpx.BaseTransport):
    """Sends what is addressed to `names` to the loopback server, over TLS, as that name."""

    names: frozenset[str]
    port: int
    client_context: ssl.SSLContext
    attempts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._inner = httpx.HTTPTransport(verify=self.client_context)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.attempts.append(str(request.url))
        host = request.url.host
        if host not in self.names:
            raise httpx.ConnectError(f"the test routes no traffic to {host}", request=request)
        request.url = request.url.copy_with(host="127.0.0.1", port=self.port)
        request.extensions = {**request.extensions, "sni_hostname": host}
        return self._inner.handle_request(request)

    def close(self) -> None:
        pass  # one route serves many clients; the test's end closes it


@dataclass
class KeyHost:
    route: Route
    loopback: Loopback
    context: ssl.SSLContext

    @property
    def attempts(self) -> list[str]:
        return self.route.attempts

    @property
    def arrived(self) -> int:
        return len(self.loopback.requests)


@contextmanager
def key_host(directory: Path, names: list[str], respond: Respond) -> Iterator[KeyHost]:
    """Serve `respond` over HTTPS as every host of `names`."""
    root = make_root("key-host")
    server = tls_certificate(root, names)
    (directory / "key-host.pem").write_bytes(server.pem)
    (directory / "key-host.key").write_bytes(
        server.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(directory / "key-host.pem", directory / "key-host.key")
    client_context = ssl.create_default_context(cadata=root.pem.decode())
    with serving(respond, tls=server_context) as loopback:
        port = int(loopback.url.rsplit(":", 1)[1])
        yield KeyHost(Route(frozenset(names), port, client_context), loopback, client_context)
