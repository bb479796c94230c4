"""Header values, on every entry point, for every source (issue 23).

Repeated headers: Mollie sends one `X-Mollie-Signature` per secret while one is rotated, so
every source reads every value of its signature header, whether they arrive apart (ASGI,
`inbox.receive`) or joined by the WSGI server (Flask on werkzeug, Django on its own server).
Header bytes: one rule everywhere, a value is the text its bytes spell in UTF-8, so a token
typed with accents matches over HTTP as it does through `inbox.receive`, given the text or
a framework's latin-1 form of the bytes. The WSGI apps run on real servers in subprocesses;
the ASGI app is called in process with raw header bytes.
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

from hookinbox._storage import Store
from hookinbox.sources import GitLab, GitLabSigned, PayPal, Source, StandardWebhooks
from hookinbox.sources._base import MAX_SIGNATURES
from hookinbox.testing import paypal_test_certificate, sign
from tests.http.header_sources import (
    GITLAB_TOKEN,
    SIGNATURE_HEADER,
    build_inbox,
    build_sources,
    payload,
    wrong_secret,
)
from tests.support.server import free_port, serving

Pairs = list[tuple[bytes, bytes]]
Post = Callable[[str, Pairs, bytes], tuple[int, dict[str, Any]]]

PEM = paypal_test_certificate().pem
SOURCES = build_sources(PEM)
SIGNED = [s for s in SOURCES if s.name in SIGNATURE_HEADER]
ENTRY_POINTS = ["receive", "receive-latin1", "asgi", "flask", "django"]


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
def entry_points(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, EntryPoint]]:
    root = tmp_path_factory.mktemp("headers")
    pem_file = root / "paypal.pem"
    pem_file.write_text(PEM)
    urls = {kind: f"sqlite:///{root / kind}.db" for kind in ("receive", "asgi", "flask", "django")}
    inboxes = {
        kind: build_inbox(urls[kind], PEM) for kind in ("receive", "asgi", "flask", "django")
    }
    for kind in ("flask", "django"):  # the servers' inboxes: migrated here, served there
        inboxes.pop(kind).close()
    receive_inbox, asgi_inbox = inboxes["receive"], inboxes["asgi"]
    app = asgi_inbox.asgi()

    def via_receive(source: str, pairs: Pairs, body: bytes) -> tuple[int, dict[str, Any]]:
        # `receive` takes text: what the bytes spell (the caller's decoding, docs/ingest.md).
        text = [(k.decode(), _text(v)) for k, v in pairs]
        reply = receive_inbox.receive(source, text, body)
        return reply.status_code, dict(reply.body)

    def via_receive_latin1(source: str, pairs: Pairs, body: bytes) -> tuple[int, dict[str, Any]]:
        # A framework's headers handed over as they come: one latin-1 character per byte
        # (Flask's and Django's request.headers, Starlette's), as docs/ingest.md's example does.
        text = [(k.decode(), v.decode("latin-1")) for k, v in pairs]
        reply = receive_inbox.receive(source, text, body)
        return reply.status_code, dict(reply.body)

    def via_asgi(source: str, pairs: Pairs, body: bytes) -> tuple[int, dict[str, Any]]:
        async def post() -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                return await client.post(f"/webhooks/{source}", headers=pairs, content=body)

        response = anyio.run(post)
        return response.status_code, response.json()

    points = {
        "receive": EntryPoint("receive", urls["receive"], via_receive),
        "receive-latin1": EntryPoint("receive-latin1", urls["receive"], via_receive_latin1),
        "asgi": EntryPoint("asgi", urls["asgi"], via_asgi),
    }
    try:
        with _server("flask", urls["flask"], pem_file) as flask_post:
            points["flask"] = EntryPoint("flask", urls["flask"], flask_post)
            with _server("django", urls["django"], pem_file) as django_post:
                points["django"] = EntryPoint("django", urls["django"], django_post)
                yield points
    finally:
        receive_inbox.close()
        asgi_inbox.close()


class _server:
    """A WSGI server subprocess of tests/http/header_servers.py, and a `Post` to it."""

    def __init__(self, framework: str, database_url: str, pem_file: Path) -> None:
        port = free_port()
        command = [sys.executable, "-m", "tests.http.header_servers", framework, str(port)]
        env = {"HEADER_DB_URL": database_url, "HEADER_PAYPAL_PEM": str(pem_file)}
        self._serving = serving(
            command, port, env=env, ready_path="/webhooks/stripe", ready_status=405
        )

    def __enter__(self) -> Post:
        base_url = self._serving.__enter__()

        def post(source: str, pairs: Pairs, body: bytes) -> tuple[int, dict[str, Any]]:
            url = f"{base_url}/webhooks/{source}"
            response = httpx.post(url, headers=pairs, content=body, timeout=30)
            return response.status_code, response.json()

        return post

    def __exit__(self, *exc: object) -> None:
        self._serving.__exit__(None, None, None)


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


def _split(headers: dict[str, str], name: str) -> tuple[Pairs, bytes]:
    """The headers other than `name`, and `name`'s value."""
    others = {k: v for k, v in headers.items() if k.lower() != name.lower()}
    value = next(v for k, v in headers.items() if k.lower() == name.lower())
    return _raw(others), value.encode()


# -- repeated headers ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ENTRY_POINTS)
@pytest.mark.parametrize("source", SIGNED, ids=lambda s: s.name)
@pytest.mark.parametrize("genuine_first", [True, False], ids=["genuine-first", "forged-first"])
def test_a_repeated_signature_header_verifies_when_one_value_does(
    entry_points: dict[str, EntryPoint], kind: str, source: Source, genuine_first: bool
) -> None:
    """Mollie's rotation: one signature header per secret, the receiver holding one secret."""
    name = SIGNATURE_HEADER[source.name]
    headers, body, _ = _signed(source, at=None)
    forged_headers, _ = sign(source, body, **wrong_secret(source), **_same_ids(source, headers))
    others, genuine = _split(headers, name)
    forged = _split(forged_headers, name)[1]
    assert forged != genuine
    values = [genuine, forged] if genuine_first else [forged, genuine]
    pairs = [*others, *((name.encode(), v) for v in values)]
    status, answer = entry_points[kind].post(source.name, pairs, body)
    assert (status, answer["status"]) == (200, "accepted"), answer
    # Both values forged: refused, so the repeat is not a way around the signature.
    pairs = [*others, (name.encode(), forged), (name.encode(), forged)]
    status, answer = entry_points[kind].post(source.name, pairs, body)
    assert status == 401, answer


def _same_ids(source: Source, headers: dict[str, str]) -> dict[str, Any]:
    """`sign` fields that keep the signed ids of `headers` (so only the signature differs)."""
    lower = {k.lower(): v for k, v in headers.items()}
    if isinstance(source, StandardWebhooks):
        return {"message_id": lower.get("webhook-id") or lower["svix-id"]}
    return {}


# -- header bytes ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ENTRY_POINTS)
@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.name)
def test_utf8_header_bytes_reach_every_source_as_their_text(
    entry_points: dict[str, EntryPoint], kind: str, source: Source
) -> None:
    """A UTF-8 value is stored as the text it spells, on every entry point alike."""
    headers, body, _ = _signed(source)
    agent = "hookinbox-tëst ☕"
    others = _split(headers, "User-Agent")[0] if _has(headers, "User-Agent") else _raw(headers)
    pairs = [*others, (b"User-Agent", agent.encode())]
    status, answer = entry_points[kind].post(source.name, pairs, body)
    assert (status, answer["status"]) == (200, "accepted"), answer
    stored = entry_points[kind].stored_headers(source.name, answer["event_id"])
    assert stored["user-agent"] == agent


@pytest.mark.parametrize("kind", ENTRY_POINTS)
@pytest.mark.parametrize("source", SIGNED, ids=lambda s: s.name)
@pytest.mark.parametrize("extra", ["é".encode(), b"\xff\xfe"], ids=["utf8-accent", "not-utf8"])
def test_non_ascii_bytes_in_a_signature_header_are_refused_401(
    entry_points: dict[str, EntryPoint], kind: str, source: Source, extra: bytes
) -> None:
    headers, body, _ = _signed(source)
    name = SIGNATURE_HEADER[source.name]
    others, genuine = _split(headers, name)
    pairs = [*others, (name.encode(), genuine + extra)]
    status, answer = entry_points[kind].post(source.name, pairs, body)
    assert (status, answer["error"]) == (401, "invalid_signature"), answer


@pytest.mark.parametrize("kind", ENTRY_POINTS)
def test_a_non_ascii_gitlab_token_matches_on_every_entry_point(
    entry_points: dict[str, EntryPoint], kind: str
) -> None:
    source = next(s for s in SOURCES if isinstance(s, GitLab))
    headers, body, _ = _signed(source)
    assert headers["X-Gitlab-Token"] == GITLAB_TOKEN
    status, answer = entry_points[kind].post(source.name, _raw(headers), body)
    assert (status, answer["status"]) == (200, "accepted"), answer


@pytest.mark.parametrize("kind", ENTRY_POINTS)
@pytest.mark.parametrize(
    "source", [s for s in SOURCES if isinstance(s, StandardWebhooks)], ids=lambda s: s.name
)
def test_a_signed_non_ascii_message_id_verifies_and_keys_the_event(
    entry_points: dict[str, EntryPoint], kind: str, source: Source
) -> None:
    """The id is signed as UTF-8 (the standardwebhooks package's way): it must come back
    as the same text to verify."""
    message_id = f"msg_ünï_{_tag()}"
    headers, body, _ = _signed(source, message_id=message_id)
    status, answer = entry_points[kind].post(source.name, _raw(headers), body)
    assert (status, answer) == (200, {"status": "accepted", "event_id": message_id})


def test_every_source_class_is_covered() -> None:
    import hookinbox.sources

    exported = [getattr(hookinbox.sources, name) for name in hookinbox.sources.__all__]
    classes = {c for c in exported if isinstance(c, type) and issubclass(c, Source)} - {Source}
    assert classes == {type(s) for s in SOURCES}
    assert {type(s) for s in SOURCES} - {type(s) for s in SIGNED} == {
        type(s) for s in SOURCES if s.name in ("mollie-classic", "mailgun")
    }
    assert PayPal in classes and GitLabSigned in classes


@pytest.mark.parametrize(
    ("name", "junk"),
    [("mollie", "sha256={:064x}"), ("stripe", "t=1,v1={:064x}"), ("standard", "v1,{:044x}")],
)
def test_the_signature_cap_holds_across_repeated_values(
    entry_points: dict[str, EntryPoint], name: str, junk: str
) -> None:
    """At most MAX_SIGNATURES signatures per header, however many times it is repeated."""
    source = next(s for s in SOURCES if s.name == name)
    header = SIGNATURE_HEADER[name]
    headers, body, _ = _signed(source)
    others, genuine = _split(headers, header)
    right = genuine.decode()
    for extra, status in ((MAX_SIGNATURES - 1, 200), (MAX_SIGNATURES, 401)):
        values = [junk.format(i) for i in range(extra)] + [right]
        pairs = [*others, *((header.encode(), v.encode()) for v in values)]
        reply_status, answer = entry_points["receive"].post(name, pairs, body)
        assert reply_status == status, (extra, answer)
