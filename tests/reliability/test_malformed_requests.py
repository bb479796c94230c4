"""Malformed requests, one named case at a time, against a real `hookinbox serve` on loopback.

What it proves: each malformed request gets a documented answer (docs/http-limits.md lists
them), the server stays up, and nothing is stored but the validly signed events sent to the
real delivery path. Most cases carry a validly signed Stripe event, so that a request that
slipped through the wrong way (a path trick, a body cut short, a method other than POST) would
show as a stored row. Requests are written byte by byte over a socket: huge and numerous
headers, chunked bodies with and without a valid end, Content-Length that lies, every method,
path tricks, empty bodies and content types that do not say JSON.

The answers are those of uvicorn (httptools parser) for what is not valid HTTP (400, plain
text) and of hookinbox for the rest. uvicorn sets no limit on header size: a 10 MB header is
read and the request answered by hookinbox; the proxy in front has to set one (see
docs/http-limits.md). Each class of cases records one Trial.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.reliability._hostile_server import (
    Server,
    hostile_server,
    migrated_sqlite_url,
    stored_keys,
    stripe_signature,
)
from tests.reliability._raw_http import exchange, request_head
from tests.reliability._report import Trial, record
from tests.support.signing import stripe_event

BODY_TIMEOUT = 2.0
LIMIT = 1024 * 1024  # the default max_body_size
Header = tuple[bytes, bytes]


@dataclass(frozen=True)
class Case:
    name: str
    head: bytes
    body: list[bytes]
    statuses: frozenset[int]
    """The answers the case may get (usually one)."""
    media_type: str = "application/json"
    stored: str | None = None
    """The event id this request stores, if it is a valid delivery."""
    sent: list[str] = field(default_factory=list)
    """Every event id this request carries (stored or not)."""


def signed(event_id: str, **extra: object) -> tuple[list[Header], bytes]:
    body = json.dumps(stripe_event(event_id, **extra)).encode()
    return [stripe_signature(body)], body


def length(body: bytes) -> Header:
    return b"Content-Length", str(len(body)).encode()


def post(path: bytes, headers: list[Header], body: bytes = b"") -> bytes:
    return request_head("POST", path, [*headers, length(body)])


def delivery_case(
    name: str,
    status: int,
    *,
    path: bytes = b"/webhooks/stripe",
    extra: list[Header] | None = None,
    media_type: str = "application/json",
    method: str = "POST",
) -> Case:
    """A validly signed event sent with a twist; stored only when answered 200."""
    event_id = f"evt_{name.replace(' ', '_')}"
    headers, body = signed(event_id)
    head = request_head(method, path, [*headers, *(extra or []), length(body)])
    return Case(
        name,
        head,
        [body],
        frozenset({status}),
        media_type,
        stored=event_id if status == 200 else None,
        sent=[event_id],
    )


def chunked(pieces: list[bytes]) -> list[bytes]:
    return [b"%x\r\n" % len(piece) + piece + b"\r\n" for piece in pieces] + [b"0\r\n\r\n"]


def huge_header_cases() -> list[Case]:
    many = [(b"X-Many-%d" % n, b"v") for n in range(1000)]
    return [
        delivery_case("one 100 kB header", 200, extra=[(b"X-Big", b"a" * 100_000)]),
        delivery_case("1000 headers", 200, extra=many),
        delivery_case("one 10 MB header", 200, extra=[(b"X-Huge", b"a" * 10_000_000)]),
        Case(
            "100 kB header, unsigned",
            post(b"/webhooks/stripe", [(b"X-Big", b"a" * 100_000)], b"{}"),
            [b"{}"],
            frozenset({401}),
        ),
    ]


def chunked_cases() -> list[Case]:
    headers, body = signed("evt_chunked")
    te = (b"Transfer-Encoding", b"chunked")
    third = len(body) // 3
    pieces = [body[:third], body[third : 2 * third], body[2 * third :]]
    big_headers, big_body = signed("evt_chunked_too_large", padding=" " * LIMIT)
    big_pieces = [big_body[i : i + 65536] for i in range(0, len(big_body), 65536)]
    cl_headers, cl_body = signed("evt_declared_too_large", padding=" " * LIMIT)
    return [
        Case(
            "chunked, no Content-Length, valid",
            request_head("POST", b"/webhooks/stripe", [*headers, te]),
            chunked(pieces),
            frozenset({200}),
            stored="evt_chunked",
            sent=["evt_chunked"],
        ),
        Case(
            "chunked past the limit (refused mid-stream)",
            request_head("POST", b"/webhooks/stripe", [*big_headers, te]),
            chunked(big_pieces),
            frozenset({413}),
            sent=["evt_chunked_too_large"],
        ),
        Case(
            "Content-Length past the limit (refused before the body)",
            post(b"/webhooks/stripe", cl_headers, cl_body),
            [],  # the answer must come without a byte of the body
            frozenset({413}),
            sent=["evt_declared_too_large"],
        ),
        Case(
            "chunk size not hex",
            request_head("POST", b"/webhooks/stripe", [te]),
            [b"zz\r\n{}\r\n0\r\n\r\n"],
            frozenset({400}),
            "text/plain",
        ),
        Case(
            "chunked and Content-Length together",
            request_head("POST", b"/webhooks/stripe", [te, (b"Content-Length", b"7")]),
            chunked([b"{}"]),
            frozenset({400}),
            "text/plain",
        ),
    ]


def content_length_cases() -> list[Case]:
    short_headers, short_body = signed("evt_length_short")
    long_headers, long_body = signed("evt_length_long")
    plain = "text/plain"
    cases = [
        Case(
            "Content-Length shorter than the body (signature over a cut body)",
            request_head(
                "POST",
                b"/webhooks/stripe",
                [*short_headers, (b"Content-Length", str(len(short_body) - 5).encode())],
            ),
            [short_body],
            frozenset({401}),
            sent=["evt_length_short"],
        ),
        Case(
            "Content-Length longer than the body (waits, then the body timeout)",
            request_head(
                "POST",
                b"/webhooks/stripe",
                [*long_headers, (b"Content-Length", str(len(long_body) + 5).encode())],
            ),
            [long_body],
            frozenset({408}),
            sent=["evt_length_long"],
        ),
    ]
    for value in (b"-1", b"abc", b"+2", b"1 1", b"99999999999999999999999"):
        cases.append(
            Case(
                f"Content-Length {value.decode()}",
                request_head("POST", b"/webhooks/stripe", [(b"Content-Length", value)]),
                [b"{}"],
                frozenset({400}),
                plain,
            )
        )
    cases.append(
        Case(
            "Content-Length twice",
            request_head(
                "POST", b"/webhooks/stripe", [(b"Content-Length", b"2"), (b"Content-Length", b"3")]
            ),
            [b"{}"],
            frozenset({400}),
            plain,
        )
    )
    return cases


def method_cases() -> list[Case]:
    plain = "text/plain"
    cases = [
        delivery_case(f"{method} with a signed body", 405, method=method, media_type=plain)
        for method in ("GET", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE")
    ]
    # HEAD's answer has no body, so no content type to check beyond the status.
    cases.append(delivery_case("HEAD with a signed body", 405, method="HEAD", media_type=""))
    cases.append(delivery_case("unknown method FOO", 400, method="FOO", media_type=plain))
    return cases


def path_cases() -> list[Case]:
    plain = "text/plain"
    not_a_delivery = [
        b"/webhooks/../admin",
        b"/webhooks/%2e%2e/stripe",
        b"/webhooks/stripe/",
        b"/webhooks//stripe",
        b"/webhooks/./stripe",
        b"//webhooks/stripe",
        b"/webhooks/a%2Fstripe",
        b"/webhooks/stripe%2F",
        b"/webhooks/",
        b"/webhooks",
    ]
    cases = [
        delivery_case(f"path {path.decode()}", 404, path=path, media_type=plain)
        for path in not_a_delivery
    ]
    unknown_source = [
        b"/webhooks/STRIPE",
        b"/webhooks/stripe%00",
        b"/webhooks/%ff",
        b"/webhooks/str%ipe",
        b"/webhooks/" + b"s" * 60_000,
    ]
    cases += [
        delivery_case(f"path {path[:30].decode()} ({len(path)} B)", 404, path=path)
        for path in unknown_source
    ]
    cases += [
        delivery_case("path of 70 kB", 400, path=b"/webhooks/" + b"s" * 70_000, media_type=plain),
        delivery_case("path with a query", 200, path=b"/webhooks/stripe?source=github"),
        delivery_case("absolute-form target", 200, path=b"http://elsewhere/webhooks/stripe"),
    ]
    return cases


def body_cases() -> list[Case]:
    signature = [stripe_signature(b"")]
    utf16_event = json.dumps(stripe_event("evt_utf16")).encode("utf-16")
    bom_event = b"\xef\xbb\xbf" + json.dumps(stripe_event("evt_bom")).encode()
    form = b"id=evt_form&type=checkout.session.completed"
    return [
        Case("empty body, signed", post(b"/webhooks/stripe", signature), [], frozenset({400})),
        Case("empty body, unsigned", post(b"/webhooks/stripe", []), [], frozenset({401})),
        delivery_case("JSON labelled text/plain", 200, extra=[(b"Content-Type", b"text/plain")]),
        delivery_case(
            "JSON labelled as a form",
            200,
            extra=[(b"Content-Type", b"application/x-www-form-urlencoded")],
        ),
        delivery_case("JSON labelled as XML", 200, extra=[(b"Content-Type", b"application/xml")]),
        Case(
            "a form body, signed (Stripe sends JSON)",
            post(
                b"/webhooks/stripe",
                [stripe_signature(form), (b"Content-Type", b"application/x-www-form-urlencoded")],
                form,
            ),
            [form],
            frozenset({400}),
            sent=["evt_form"],
        ),
        Case(  # RFC 8259 requires UTF-8: refused like the mark (issue 31), nothing stored
            "UTF-16 JSON, signed",
            post(b"/webhooks/stripe", [stripe_signature(utf16_event)], utf16_event),
            [utf16_event],
            frozenset({400}),
            sent=["evt_utf16"],
        ),
        Case(  # refused by every source (docs/sources/README.md), nothing stored
            "UTF-8 JSON after a byte order mark, signed",
            post(b"/webhooks/stripe", [stripe_signature(bom_event)], bom_event),
            [bom_event],
            frozenset({400}),
            sent=["evt_bom"],
        ),
    ]


CLASSES = {
    "huge headers": huge_header_cases,
    "chunked bodies": chunked_cases,
    "lying Content-Length": content_length_cases,
    "methods other than POST": method_cases,
    "path tricks": path_cases,
    "empty bodies, content types": body_cases,
}


@pytest.fixture(scope="module")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return migrated_sqlite_url(tmp_path_factory.mktemp("malformed"))


@pytest.fixture(scope="module")
def server(database_url: str) -> Iterator[Server]:
    with hostile_server(database_url, body_timeout=BODY_TIMEOUT) as running:
        yield running


@pytest.mark.parametrize("input_class", list(CLASSES))
def test_malformed_requests_get_documented_answers(
    input_class: str, server: Server, database_url: str
) -> None:
    cases = CLASSES[input_class]()
    statuses: Counter[int] = Counter()
    for case in cases:
        result = exchange(server.port, case.head, case.body, timeout=BODY_TIMEOUT + 15)
        response = result.response
        assert response is not None, f"{case.name}: no answer ({result.closed})"
        assert response.status in case.statuses, f"{case.name}: {response}"
        if case.media_type:
            assert response.media_type == case.media_type, f"{case.name}: {response}"
        if response.media_type == "application/json" and response.status != 200:
            assert response.json()["status"] in {"rejected", "error"}, f"{case.name}: {response}"
        if response.status == 405:
            assert response.headers["allow"] == "POST"
        statuses[response.status] += 1
    assert server.alive()

    stored = [key for source, key in stored_keys(database_url) if source == "stripe"]
    sent = {event_id for case in cases for event_id in case.sent}
    expected = {case.stored for case in cases if case.stored}
    ours = [key for key in stored if key in sent]
    assert sorted(ours) == sorted(expected)
    record(
        Trial(
            fault=f"malformed HTTP: {input_class}",
            backend="sqlite",
            deliveries=len(cases),
            lost=len(expected - set(ours)),
            doubled=len([key for key in ours if key not in expected]),
            detail="statuses " + ", ".join(f"{s}x{n}" for s, n in sorted(statuses.items())),
        )
    )
