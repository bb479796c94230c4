"""Header values: every source, and every entry point (issue 23; in two axes since issue 32).

Repeated headers: Mollie sends one `X-Mollie-Signature` per secret while one is rotated, so
every source reads every value of its signature header, whether they arrive apart (ASGI,
`inbox.receive`) or joined with "," by a WSGI server (werkzeug's and Django's, as PEP 3333's
environ holds one value per name). Header bytes: one rule everywhere, a value is the text its
bytes spell in UTF-8, so a token typed with accents matches over HTTP as it does through
`inbox.receive`, given the text or a framework's latin-1 form of the bytes.

Two things vary, and they do not depend on each other: how a source reads the values it is
handed (apart or joined), and what an entry point hands over. So every source is checked in
process, through the ASGI app with raw header bytes, with its values apart and joined as a WSGI
server joins them; and every entry point (`receive` given text, `receive` given latin-1 text,
the ASGI app, Flask on werkzeug's server, Django on its own) with two representative sources:
Mollie (one hex signature per value, the rotation that motivated this) and Standard Webhooks
(whose signatures hold a comma themselves, and whose signed id is UTF-8). The WSGI apps run on
real servers in subprocesses, which makes their tests `slow`.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from hookinbox import Inbox
from hookinbox._storage import Store
from hookinbox.sources import BatchSource, GitLab, Source, StandardWebhooks
from hookinbox.sources._gitlab import EXAMPLE_TOKEN as GITLAB_TOKEN
from hookinbox.sources._signatures import MAX_SIGNATURES
from hookinbox.testing import paypal_test_certificate, sendgrid_test_key, sign
from tests.http.header_sources import (
    build_inbox,
    build_sources,
    payload,
    signature_header,
    stored_id,
    wrong_secret,
)
from tests.support.server import free_port, serving

Pairs = list[tuple[bytes, bytes]]
Post = Callable[[str, Pairs, bytes], tuple[int, dict[str, Any]]]

PEM = paypal_test_certificate().pem
SENDGRID_KEY = sendgrid_test_key().public_key
SOURCES = build_sources(PEM, SENDGRID_KEY)
SIGNED = [s for s in SOURCES if signature_header(s) is not None]
STANDARD_FAMILY = [s for s in SOURCES if isinstance(s, StandardWebhooks)]
REPRESENTATIVE = [s for s in SOURCES if s.name in ("mollie", "standard")]
SERVERS = ("flask", "django")
ENTRY_POINTS = [
    "receive",
    "receive-latin1",
    "asgi",
    *(pytest.param(kind, marks=pytest.mark.slow) for kind in SERVERS),
]
JOINED = {False: "apart", True: "joined"}


class EntryPoint:
    """One way in for a delivery, and the database it lands in."""

    def __init__(self, kind: str, database_url: str, post: Post) -> None:
        self.kind = kind
        self.database_url = database_url
        self.post = post

    def stored_headers(self, source: str, event_id: str) -> dict[str, str]:
        store = Store(self.database_url, auto_migrate=False)
        try:
            event = store.get_event(source, event_id)
        finally:
            store.dispose()
        assert event is not None
        return dict(event.headers)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("headers")


@pytest.fixture(scope="module")
def receive_inbox(root: Path) -> Iterator[Inbox]:
    inbox = build_inbox(f"sqlite:///{root / 'receive'}.db", PEM, SENDGRID_KEY)
    yield inbox
    inbox.close()


@pytest.fixture(scope="module")
def asgi_inbox(root: Path) -> Iterator[Inbox]:
    inbox = build_inbox(f"sqlite:///{root / 'asgi'}.db", PEM, SENDGRID_KEY)
    yield inbox
    inbox.close()


@pytest.fixture(scope="module")
def asgi(asgi_inbox: Inbox) -> EntryPoint:
    app = asgi_inbox.asgi()

    def via_asgi(source: str, pairs: Pairs, body: bytes) -> tuple[int, dict[str, Any]]:
        async def post() -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                return await client.post(f"/webhooks/{source}", headers=pairs, content=body)

        response = anyio.run(post)
        return response.status_code, _answer(response)

    return EntryPoint("asgi", asgi_inbox.settings.database_url, via_asgi)


@pytest.fixture(scope="module")
def servers(root: Path) -> Iterator[dict[str, EntryPoint]]:
    """Flask and Django on real WSGI servers: started once, for the tests that ask."""
    pem_file = root / "paypal.pem"
    pem_file.write_text(PEM)
    urls = {kind: f"sqlite:///{root / kind}.db" for kind in SERVERS}
    for url in urls.values():  # the servers' inboxes: migrated here, served there
        build_inbox(url, PEM, SENDGRID_KEY).close()
    with (
        _server("flask", urls["flask"], pem_file) as flask_post,
        _server("django", urls["django"], pem_file) as django_post,
    ):
        yield {
            "flask": EntryPoint("flask", urls["flask"], flask_post),
            "django": EntryPoint("django", urls["django"], django_post),
        }


@pytest.fixture
def entry_point(
    request: pytest.FixtureRequest, receive_inbox: Inbox, asgi: EntryPoint, kind: str
) -> EntryPoint:
    url = receive_inbox.settings.database_url
    if kind == "receive":

        def via_receive(source: str, pairs: Pairs, body: bytes) -> tuple[int, dict[str, Any]]:
            # `receive` takes text: what the bytes spell (the caller's decoding, docs/ingest.md).
            text = [(k.decode(), _text(v)) for k, v in pairs]
            reply = receive_inbox.receive(source, text, body)
            return reply.status_code, dict(reply.body)

        return EntryPoint(kind, url, via_receive)
    if kind == "receive-latin1":

        def via_latin1(source: str, pairs: Pairs, body: bytes) -> tuple[int, dict[str, Any]]:
            # A framework's headers handed over as they come: one latin-1 character per byte
            # (Flask's and Django's request.headers, Starlette's), as docs/ingest.md's example.
            text = [(k.decode(), v.decode("latin-1")) for k, v in pairs]
            reply = receive_inbox.receive(source, text, body)
            return reply.status_code, dict(reply.body)

        return EntryPoint(kind, url, via_latin1)
    if kind == "asgi":
        return asgi
    servers: dict[str, EntryPoint] = request.getfixturevalue("servers")
    return servers[kind]


class _server:
    """A WSGI server subprocess of tests/http/header_servers.py, and a `Post` to it."""

    def __init__(self, framework: str, database_url: str, pem_file: Path) -> None:
        port = free_port()
        command = [sys.executable, "-m", "tests.http.header_servers", framework, str(port)]
        env = {
            "HEADER_DB_URL": database_url,
            "HEADER_PAYPAL_PEM": str(pem_file),
            "HEADER_SENDGRID_KEY": SENDGRID_KEY,
        }
        self._serving = serving(
            command, port, env=env, ready_path="/webhooks/stripe", ready_status=405
        )

    def __enter__(self) -> Post:
        base_url = self._serving.__enter__()

        def post(source: str, pairs: Pairs, body: bytes) -> tuple[int, dict[str, Any]]:
            url = f"{base_url}/webhooks/{source}"
            response = httpx.post(url, headers=pairs, content=body, timeout=30)
            return response.status_code, _answer(response)

        return post

    def __exit__(self, *exc: object) -> None:
        self._serving.__exit__(None, None, None)


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON answer, or a source's plain-text acknowledgement (Adyen's `[accepted]`, Xero's
    empty body) read as the `accepted` it says."""
    if response.headers["content-type"].startswith("application/json"):
        answer: dict[str, Any] = response.json()
        return answer
    assert response.text in ("[accepted]", ""), response.text
    return {"status": "accepted"}


def _text(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _raw(headers: dict[str, str]) -> Pairs:
    return [(k.encode(), v.encode()) for k, v in headers.items()]


def _has(headers: dict[str, str], name: str) -> bool:
    return any(k.lower() == name.lower() for k in headers)


def _tag() -> str:
    return uuid.uuid4().hex[:16]


def _signed(source: Source, **fields: Any) -> tuple[dict[str, str], bytes, Any]:
    body_payload = payload(source, _tag())
    headers, body = sign(source, body_payload, **fields)
    return headers, body, body_payload


def _header(source: Source) -> str:
    name = signature_header(source)
    assert name is not None, source
    return name


def _split(headers: dict[str, str], name: str) -> tuple[Pairs, bytes]:
    """The headers other than `name`, and `name`'s value."""
    others = {k: v for k, v in headers.items() if k.lower() != name.lower()}
    value = next(v for k, v in headers.items() if k.lower() == name.lower())
    return _raw(others), value.encode()


def _values(name: str, values: list[bytes], joined: bool) -> Pairs:
    """`name` once per value, or once with the values joined as a WSGI server joins them."""
    if joined:
        return [(name.encode(), b",".join(values))]
    return [(name.encode(), value) for value in values]


# -- repeated headers ------------------------------------------------------------------------


def _repeated_signature(post: Post, source: Source, *, genuine_first: bool, joined: bool) -> None:
    """Mollie's rotation: one signature header per secret, the receiver holding one secret."""
    name = _header(source)
    headers, body, _ = _signed(source, at=None)
    forged_headers, _ = sign(source, body, **wrong_secret(source), **_same_ids(source, headers))
    others, genuine = _split(headers, name)
    forged = _split(forged_headers, name)[1]
    assert forged != genuine
    values = [genuine, forged] if genuine_first else [forged, genuine]
    status, answer = post(source.name, [*others, *_values(name, values, joined)], body)
    assert (status, answer["status"]) == (200, "accepted"), answer
    # Both values forged: refused, so the repeat is not a way around the signature.
    status, answer = post(source.name, [*others, *_values(name, [forged, forged], joined)], body)
    assert status == 401, answer


@pytest.mark.parametrize("joined", list(JOINED), ids=JOINED.get)
@pytest.mark.parametrize("source", SIGNED, ids=lambda s: s.name)
@pytest.mark.parametrize("genuine_first", [True, False], ids=["genuine-first", "forged-first"])
def test_every_source_verifies_a_repeated_signature_header_when_one_value_does(
    asgi: EntryPoint, source: Source, genuine_first: bool, joined: bool
) -> None:
    _repeated_signature(asgi.post, source, genuine_first=genuine_first, joined=joined)


@pytest.mark.parametrize("kind", ENTRY_POINTS)
@pytest.mark.parametrize("source", REPRESENTATIVE, ids=lambda s: s.name)
@pytest.mark.parametrize("genuine_first", [True, False], ids=["genuine-first", "forged-first"])
def test_every_entry_point_hands_a_repeated_signature_header_over(
    entry_point: EntryPoint, source: Source, genuine_first: bool
) -> None:
    """Apart (ASGI, `receive`) or joined (the WSGI servers): either way one value verifies."""
    _repeated_signature(entry_point.post, source, genuine_first=genuine_first, joined=False)


def _same_ids(source: Source, headers: dict[str, str]) -> dict[str, Any]:
    """`sign` fields that keep the signed ids of `headers` (so only the signature differs)."""
    lower = {k.lower(): v for k, v in headers.items()}
    if isinstance(source, StandardWebhooks):
        return {"message_id": lower.get("webhook-id") or lower["svix-id"]}
    return {}


# -- header bytes ----------------------------------------------------------------------------


def _utf8_user_agent(entry_point: EntryPoint, source: Source) -> None:
    """A UTF-8 value is stored as the text it spells."""
    headers, body, body_payload = _signed(source)
    agent = "hookinbox-tëst ☕"
    others = _split(headers, "User-Agent")[0] if _has(headers, "User-Agent") else _raw(headers)
    pairs = [*others, (b"User-Agent", agent.encode())]
    status, answer = entry_point.post(source.name, pairs, body)
    assert (status, answer["status"]) == (200, "accepted"), answer
    event_id = stored_id(source, answer, body_payload)
    stored = entry_point.stored_headers(source.name, event_id)
    assert stored["user-agent"] == agent


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.name)
def test_utf8_header_bytes_reach_every_source_as_their_text(
    asgi: EntryPoint, source: Source
) -> None:
    _utf8_user_agent(asgi, source)


@pytest.mark.parametrize("kind", ENTRY_POINTS)
@pytest.mark.parametrize("source", REPRESENTATIVE, ids=lambda s: s.name)
def test_every_entry_point_reads_utf8_header_bytes_as_their_text(
    entry_point: EntryPoint, source: Source
) -> None:
    _utf8_user_agent(entry_point, source)


NON_ASCII = pytest.mark.parametrize(
    "extra", ["é".encode(), b"\xff\xfe"], ids=["utf8-accent", "not-utf8"]
)


def _non_ascii_signature(post: Post, source: Source, extra: bytes) -> None:
    headers, body, _ = _signed(source)
    name = _header(source)
    others, genuine = _split(headers, name)
    status, answer = post(source.name, [*others, (name.encode(), genuine + extra)], body)
    assert (status, answer["error"]) == (401, "invalid_signature"), answer


@NON_ASCII
@pytest.mark.parametrize("source", SIGNED, ids=lambda s: s.name)
def test_non_ascii_bytes_in_a_signature_header_are_refused_401(
    asgi: EntryPoint, source: Source, extra: bytes
) -> None:
    _non_ascii_signature(asgi.post, source, extra)


@NON_ASCII
@pytest.mark.parametrize("kind", ENTRY_POINTS)
@pytest.mark.parametrize("source", REPRESENTATIVE, ids=lambda s: s.name)
def test_every_entry_point_refuses_non_ascii_signature_bytes_401(
    entry_point: EntryPoint, source: Source, extra: bytes
) -> None:
    _non_ascii_signature(entry_point.post, source, extra)


@pytest.mark.parametrize("kind", ENTRY_POINTS)
def test_a_non_ascii_gitlab_token_matches_on_every_entry_point(entry_point: EntryPoint) -> None:
    source = next(s for s in SOURCES if isinstance(s, GitLab))
    headers, body, _ = _signed(source)
    assert headers["X-Gitlab-Token"] == GITLAB_TOKEN
    status, answer = entry_point.post(source.name, _raw(headers), body)
    assert (status, answer["status"]) == (200, "accepted"), answer


def _non_ascii_message_id(post: Post, source: Source) -> None:
    """The id is signed as UTF-8 (the standardwebhooks package's way): it must come back
    as the same text to verify."""
    message_id = f"msg_ünï_{_tag()}"
    headers, body, _ = _signed(source, message_id=message_id)
    status, answer = post(source.name, _raw(headers), body)
    assert (status, answer) == (200, {"status": "accepted", "event_id": message_id})


@pytest.mark.parametrize("source", STANDARD_FAMILY, ids=lambda s: s.name)
def test_a_signed_non_ascii_message_id_verifies_and_keys_the_event(
    asgi: EntryPoint, source: Source
) -> None:
    _non_ascii_message_id(asgi.post, source)


@pytest.mark.parametrize("kind", ENTRY_POINTS)
def test_every_entry_point_keeps_a_signed_non_ascii_message_id(entry_point: EntryPoint) -> None:
    _non_ascii_message_id(entry_point.post, next(s for s in SOURCES if s.name == "standard"))


def test_every_source_class_is_covered() -> None:
    import hookinbox.sources

    exported = [getattr(hookinbox.sources, name) for name in hookinbox.sources.__all__]
    classes = {c for c in exported if isinstance(c, type) and issubclass(c, Source)}
    classes -= {Source, BatchSource}  # the bases
    assert classes == {type(s) for s in SOURCES}
    # One fetches what it verifies; five sign in their body (Mailgun, Amazon SNS, Braintree's
    # form, Microsoft Graph's clientState, in both of its classes).
    assert len(SOURCES) - len(SIGNED) == 6
    assert len(REPRESENTATIVE) == 2 and len(STANDARD_FAMILY) == 6


@pytest.mark.parametrize(
    ("name", "junk"),
    [("mollie", "sha256={:064x}"), ("stripe", "t=1,v1={:064x}"), ("standard", "v1,{:044x}")],
)
@pytest.mark.parametrize("kind", ["receive"])
def test_the_signature_cap_holds_across_repeated_values(
    entry_point: EntryPoint, name: str, junk: str
) -> None:
    """At most MAX_SIGNATURES signatures per header, however many times it is repeated."""
    source = next(s for s in SOURCES if s.name == name)
    header = _header(source)
    headers, body, _ = _signed(source)
    others, genuine = _split(headers, header)
    right = genuine.decode()
    for extra, status in ((MAX_SIGNATURES - 1, 200), (MAX_SIGNATURES, 401)):
        values = [junk.format(i) for i in range(extra)] + [right]
        pairs = [*others, *((header.encode(), v.encode()) for v in values)]
        reply_status, answer = entry_point.post(name, pairs, body)
        assert reply_status == status, (extra, answer)
