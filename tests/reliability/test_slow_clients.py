"""Slow clients (slowloris): a body that trickles in is cut off; slow headers are a known gap.

What it proves, against a real `hookinbox serve` on loopback with a body timeout of 2 s:
- a client that sends its headers and then one byte of its body a second (Content-Length or
  chunked), or no body at all, is answered 408 with the JSON refusal of every other rejection
  and its connection closed, within a bounded time; what it sent is not stored, although it was
  a validly signed event;
- several such clients at once do not stop the server from accepting a normal delivery
  meanwhile, and a body sent in a few pieces within the timeout is still accepted;
- uvicorn has no timeout for headers: a client trickling header lines keeps its connection for
  as long as it likes. The test holds that gap (so that docs/http-limits.md, which names the
  mitigation, stays true) and shows the server keeps serving others meanwhile.
"""

from __future__ import annotations

import json
import socket
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hookinbox import ConfigurationError, Inbox
from tests.reliability._hostile_server import (
    Server,
    hostile_server,
    migrated_sqlite_url,
    stored_keys,
    stripe_signature,
)
from tests.reliability._raw_http import Exchange, exchange, request_head
from tests.reliability._report import Trial, record
from tests.support.server import run_cli, running_server
from tests.support.signing import stripe_event

BODY_TIMEOUT = 2.0
TRICKLERS = 4


@pytest.fixture(scope="module")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return migrated_sqlite_url(tmp_path_factory.mktemp("slow"))


@pytest.fixture(scope="module")
def server(database_url: str) -> Iterator[Server]:
    with hostile_server(database_url, body_timeout=BODY_TIMEOUT) as running:
        yield running


def signed_event(event_id: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    body = json.dumps(stripe_event(event_id)).encode()
    return [stripe_signature(body), (b"Content-Type", b"application/json")], body


def trickle(port: int, event_id: str, *, chunked: bool) -> Exchange:
    """A validly signed delivery whose body comes one byte a second."""
    headers, body = signed_event(event_id)
    if chunked:
        headers.append((b"Transfer-Encoding", b"chunked"))
        pieces = [b"1\r\n" + body[i : i + 1] + b"\r\n" for i in range(len(body))]
    else:
        headers.append((b"Content-Length", str(len(body)).encode()))
        pieces = [body[i : i + 1] for i in range(len(body))]
    head = request_head("POST", b"/webhooks/stripe", headers)
    return exchange(port, head, pieces, pause=1.0, timeout=BODY_TIMEOUT + 20)


def stall(port: int, event_id: str) -> Exchange:
    """Headers announcing a body that never comes."""
    headers, body = signed_event(event_id)
    headers.append((b"Content-Length", str(len(body)).encode()))
    head = request_head("POST", b"/webhooks/stripe", headers)
    return exchange(port, head, timeout=BODY_TIMEOUT + 20)


def deliver_now(port: int, event_id: str, *, pieces: int = 1, pause: float = 0.0) -> Exchange:
    headers, body = signed_event(event_id)
    headers.append((b"Content-Length", str(len(body)).encode()))
    size = -(-len(body) // pieces)
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return exchange(port, request_head("POST", b"/webhooks/stripe", headers), parts, pause=pause)


def test_a_trickling_or_stalled_body_is_cut_off_with_408(server: Server, database_url: str) -> None:
    slow_ids = [f"evt_slow_{n}" for n in range(2 * TRICKLERS + 1)]
    with ThreadPoolExecutor(max_workers=len(slow_ids)) as pool:
        slow = [
            pool.submit(trickle, server.port, event_id, chunked=n % 2 == 1)
            for n, event_id in enumerate(slow_ids[:-1])
        ]
        stalled = pool.submit(stall, server.port, slow_ids[-1])
        time.sleep(0.3)  # the slow clients are connected and waiting
        # Meanwhile, normal deliveries: one at once, one in pieces well within the timeout.
        prompt = deliver_now(server.port, "evt_prompt")
        pieced = deliver_now(server.port, "evt_pieced", pieces=3, pause=0.2)
        results = [future.result() for future in [*slow, stalled]]

    for result in results:
        assert result.response is not None, result
        assert result.response.status == 408, result
        assert result.response.json()["error"] == "timeout"
        assert result.response.headers.get("connection") == "close"
        # The server closed the connection: a clean EOF, or a reset when the client's next
        # byte arrived after the close (the kernel answers unread data with RST).
        assert result.closed in ("eof", "reset"), result
        # Cut off by the deadline, not before it; the bound above is generous (shared CPUs).
        assert BODY_TIMEOUT - 0.1 <= result.seconds < BODY_TIMEOUT + 10, result
    for control in (prompt, pieced):
        assert control.response is not None and control.response.status == 200, control
        assert control.response.json()["status"] == "accepted"
    stored = stored_keys(database_url)
    assert ("stripe", "evt_prompt") in stored and ("stripe", "evt_pieced") in stored
    assert not [key for _, key in stored if key.startswith("evt_slow_")]
    assert server.alive()

    statuses = Counter(str(r.response.status) for r in results if r.response)
    slowest = max(r.seconds for r in results)
    record(
        Trial(
            fault=f"slow body: {len(slow)} clients trickling 1 byte/s, 1 stalled, 2 s timeout",
            backend="sqlite",
            deliveries=len(results) + 2,
            lost=sum(1 for key in ("evt_prompt", "evt_pieced") if ("stripe", key) not in stored),
            doubled=sum(1 for _, key in stored if key.startswith("evt_slow_")),
            detail=f"statuses {dict(statuses)}; controls 200, 200; cut off after "
            f"<= {slowest:.1f} s",
        )
    )


def test_slow_headers_are_not_cut_off_by_uvicorn(server: Server, database_url: str) -> None:
    held = 3.0
    sockets = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(8)]
    try:
        for sock in sockets:
            sock.sendall(b"POST /webhooks/stripe HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        line = 0
        while time.monotonic() - started < held:
            for sock in sockets:
                sock.sendall(b"X-Slow-%d: still coming\r\n" % line)
            line += 1
            time.sleep(0.5)
        # Every slow client is still connected and unanswered: uvicorn has no header timeout.
        for sock in sockets:
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(1)  # nothing to read, and not closed (that would read b"")
        control = deliver_now(server.port, "evt_during_slow_headers")
    finally:
        for sock in sockets:
            sock.close()
    assert control.response is not None and control.response.status == 200, (
        "the server stopped serving others while slow clients sent headers"
    )
    assert ("stripe", "evt_during_slow_headers") in stored_keys(database_url)
    assert server.alive()
    record(
        Trial(
            fault=f"slow headers: {len(sockets)} clients trickling header lines for {held:g} s",
            backend="sqlite",
            deliveries=len(sockets) + 1,
            detail="uvicorn has no header timeout: all still connected after "
            f"{held:g} s (known gap, see docs/http-limits.md); a normal delivery meanwhile: 200",
        )
    )


def test_unknown_slow_body_costs_no_wait(server: Server) -> None:
    """An unknown source is answered before its body is read, however slow the body."""
    head = request_head("POST", b"/webhooks/nosuch", [(b"Content-Length", b"100")])
    result = exchange(server.port, head, timeout=BODY_TIMEOUT + 10)
    assert result.response is not None and result.response.status == 404
    assert result.seconds < BODY_TIMEOUT


@pytest.mark.slow
def test_serve_body_timeout_option_reaches_every_server_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'inbox.db'}"
    with running_server("tests.apps.orders:inbox", url, "--body-timeout", "1") as base_url:
        port = int(base_url.rsplit(":", 1)[1])
        headers = [(b"Content-Length", b"100"), (b"Content-Type", b"application/json")]
        result = exchange(port, request_head("POST", b"/webhooks/stripe", headers), timeout=20)
    assert result.response is not None and result.response.status == 408, result
    assert 0.9 <= result.seconds < 10, result


@pytest.mark.parametrize("seconds", [0, -1, 301, float("nan")])
def test_a_body_timeout_out_of_bounds_is_refused_at_configuration(seconds: float) -> None:
    with pytest.raises(
        ConfigurationError, match="body_timeout must be more than 0 and at most 300 seconds"
    ):
        Inbox("sqlite:///unused.db", body_timeout=seconds)


@pytest.mark.slow
def test_serve_refuses_a_zero_body_timeout_with_one_line() -> None:
    result = run_cli("serve", "tests.apps.orders:inbox", "--body-timeout", "0")
    assert result.returncode == 2
    assert "Invalid value for '--body-timeout'" in result.stderr
    assert "Traceback" not in result.stderr
