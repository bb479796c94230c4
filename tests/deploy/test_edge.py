"""What deploy/haproxy/hookinbox.cfg does at the edge, on loopback in front of a real
`hookinbox serve`: a sender that trickles its request is cut, a body over hookinbox's limit
is refused from its Content-Length before it is read (a chunked one by hookinbox itself), and
a sender over the rate limit is answered 429 with Retry-After."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from hookinbox._settings import DEFAULT_MAX_BODY_SIZE
from tests.apps import basic
from tests.deploy.edge import SHIPPED, haproxy_in_front, missing, status_line
from tests.support.server import running_server
from tests.support.signing import stripe_delivery, stripe_event

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))

REQUEST_TIMEOUT = 10.0
"""The shipped `timeout http-request`."""


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    database = tmp_path_factory.mktemp("edge") / "inbox.db"
    with running_server("tests.apps.basic:inbox", f"sqlite:///{database}") as url:
        yield url


@pytest.fixture
def edge(serve: str) -> Iterator[str]:
    """A fresh HAProxy for each test: the rate limit's counts are its own."""
    with haproxy_in_front(serve) as url:
        yield url


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def _delivery_of_size(size: int) -> tuple[dict[str, str], bytes]:
    """A signed Stripe delivery whose body is exactly `size` bytes."""
    event = stripe_event("evt_edge_size", padding="")
    headers, body = stripe_delivery(event, basic.STRIPE_SECRET)
    event["data"]["object"]["padding"] = "x" * (size - len(body))
    headers, body = stripe_delivery(event, basic.STRIPE_SECRET)
    assert len(body) == size
    return headers, body


def test_the_edge_limit_is_hookinboxs_default_body_limit() -> None:
    limit = re.search(r"req\.hdr_val\(content-length\) gt (\d+)", SHIPPED.read_text())
    assert limit and int(limit[1]) == DEFAULT_MAX_BODY_SIZE


def test_a_body_over_the_limit_is_refused_at_the_edge_before_it_is_sent(edge: str) -> None:
    with socket.create_connection(_address(edge)) as connection:
        connection.sendall(
            b"POST /webhooks/stripe HTTP/1.1\r\nHost: shop\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {DEFAULT_MAX_BODY_SIZE + 1}\r\n\r\n".encode()
        )  # the headers only: the answer must not wait for a body
        started = time.monotonic()
        answer = status_line(connection, timeout=5)
        waited = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 413"), answer
    assert waited < 2, waited


def test_a_body_of_exactly_the_limit_goes_through_and_is_stored(edge: str) -> None:
    headers, body = _delivery_of_size(DEFAULT_MAX_BODY_SIZE)
    answer = httpx.post(f"{edge}/webhooks/stripe", headers=headers, content=body, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] in ("accepted", "duplicate")


def test_a_chunked_body_over_the_limit_is_refused_by_hookinbox(edge: str) -> None:
    headers, body = _delivery_of_size(DEFAULT_MAX_BODY_SIZE + 1024)

    def chunks() -> Iterator[bytes]:  # no length up front: Transfer-Encoding: chunked
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    answer = httpx.post(f"{edge}/webhooks/stripe", headers=headers, content=chunks(), timeout=30)
    assert answer.status_code == 413, answer.text
    assert answer.json()["status"] == "rejected"  # hookinbox's answer, not HAProxy's page


def test_a_sender_over_the_rate_limit_gets_429_with_retry_after(edge: str) -> None:
    limit = re.search(r"acl too_fast sc_http_req_rate\(0\) gt (\d+)", SHIPPED.read_text())
    assert limit
    allowed = int(limit[1])
    with httpx.Client(base_url=edge, timeout=10) as client:  # one kept-alive connection
        statuses = [client.get("/healthz").status_code for _ in range(allowed + 1)]
        over = client.get("/healthz")
    # HAProxy's own start-up probes (a few /healthz through the frontend) count too.
    first_refused = statuses.index(429)
    assert allowed - 20 <= first_refused <= allowed, first_refused
    assert set(statuses[:first_refused]) == {200} and set(statuses[first_refused:]) == {429}
    assert over.status_code == 429
    assert over.headers["retry-after"] == "10"


HEAD = b"POST /webhooks/stripe HTTP/1.1\r\nHost: shop\r\nContent-Type: application/json\r\n"
TRICKLED = {
    "headers": (b"", HEAD + b"X-Slow: " + b"a" * 100),
    "body": (HEAD + b"Content-Length: 100\r\n\r\n", b"{" * 100),
}


@pytest.mark.parametrize("part", TRICKLED)
def test_a_sender_that_trickles_its_request_is_cut(edge: str, part: str) -> None:
    sent_at_once, trickled = TRICKLED[part]
    with socket.create_connection(_address(edge)) as connection:
        started = time.monotonic()
        connection.sendall(sent_at_once)
        connection.settimeout(0.1)
        answer = b""
        for byte in trickled:  # one byte every 2 s: each resets `timeout client` (30 s)
            try:
                connection.sendall(bytes([byte]))
            except OSError:
                break  # cut
            try:
                answer = connection.recv(4096)
                break  # HAProxy answered (408) or closed: cut
            except TimeoutError:
                pass
            if time.monotonic() - started > 3 * REQUEST_TIMEOUT:
                break
            time.sleep(1.9)
        cut_after = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408"), (answer, cut_after)
    assert REQUEST_TIMEOUT - 1 < cut_after < REQUEST_TIMEOUT + 4, cut_after
