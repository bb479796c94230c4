"""The adapters' protocol: a `Request` handed to `inbox.handle` or `inbox.ahandle`, a `Reply` back.

Every framework adapter is written on these two calls and nothing else of the inbox; the
pipeline below them reads the body (with its cap), verifies, stores and answers handshakes.
"""

from __future__ import annotations

import ast
import asyncio
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hookinbox import Inbox
from hookinbox.http import Request
from tests.apps.basic import STRIPE_SECRET, build
from tests.support.signing import stripe_delivery, stripe_event

SRC = Path(__file__).resolve().parents[2] / "src" / "hookinbox"


@pytest.fixture
def inbox(db_url: str) -> Iterator[Inbox]:
    inbox = build(db_url)
    yield inbox
    inbox.close()


def unreadable(_size: int = -1) -> bytes:
    raise AssertionError("the body was read")


def test_a_post_is_verified_and_stored_from_bytes_or_a_stream(inbox: Inbox) -> None:
    headers, body = stripe_delivery(stripe_event("evt_req_1"), STRIPE_SECRET)
    reply = inbox.handle(Request("POST", "stripe", headers, b"", body))
    assert (reply.status_code, reply.body) == (200, {"status": "accepted", "event_id": "evt_req_1"})
    stream = io.BytesIO(body)
    again = inbox.handle(Request("POST", "stripe", list(headers.items()), "", stream.read))
    assert again.body == {"status": "duplicate", "event_id": "evt_req_1"}
    assert stream.tell() == len(body)


def test_refusals_are_decided_before_the_body_is_read(inbox: Inbox) -> None:
    unknown = inbox.handle(Request("POST", "nope", {}, b"", unreadable))
    assert unknown.status_code == 404
    limit = inbox.settings.receiver.max_body_size
    declared = inbox.handle(
        Request("POST", "stripe", {}, b"", unreadable, content_length=str(limit + 1))
    )
    assert declared.status_code == 413
    # Content-Length among the headers counts as well (Flask's and Django's are there).
    in_headers = inbox.handle(
        Request("POST", "stripe", {"Content-Length": str(limit + 1)}, b"", unreadable)
    )
    assert in_headers.status_code == 413


def test_other_methods_are_handshakes_or_405_and_read_nothing(inbox: Inbox) -> None:
    for method in ("GET", "HEAD", "PUT", "DELETE"):
        reply = inbox.handle(Request(method, "stripe", {}, b"", unreadable))
        assert (reply.status_code, reply.headers, reply.content) == (
            405,
            {"allow": "POST"},
            b"Method Not Allowed",
        ), method


def test_ahandle_reads_asgi_messages_and_says_when_the_client_left(inbox: Inbox) -> None:
    headers, body = stripe_delivery(stripe_event("evt_req_2"), STRIPE_SECRET)
    raw = [(name.lower().encode(), value.encode()) for name, value in headers.items()]

    def messages(*sent: dict[str, Any]) -> Any:
        queue = list(sent)

        async def receive() -> dict[str, Any]:
            return queue.pop(0)

        return receive

    async def deliver() -> list[Any]:
        half = len(body) // 2
        chunked = messages(
            {"type": "http.request", "body": body[:half], "more_body": True},
            {"type": "http.request", "body": body[half:]},
        )
        stored = await inbox.ahandle(Request("POST", "stripe", raw, b"", chunked))
        gone = messages({"type": "http.disconnect"})
        left = await inbox.ahandle(Request("POST", "stripe", raw, b"", gone))
        handshake = await inbox.ahandle(Request("GET", "stripe", raw, b""))
        return [stored, left, handshake]

    stored, left, handshake = asyncio.run(deliver())
    assert stored is not None and stored.body == {"status": "accepted", "event_id": "evt_req_2"}
    assert left is None
    assert handshake is not None and handshake.status_code == 405


ADAPTERS = ["fastapi.py", "flask.py", "django/views.py", "http/__init__.py", "http/_app.py",
            "http/_blocking.py"]  # fmt: skip


@pytest.mark.parametrize("path", ADAPTERS)
def test_adapters_use_no_private_member_of_the_inbox_on_the_delivery_path(path: str) -> None:
    """`inbox._anything` nowhere in an adapter (the probes ask the public `inbox.readiness()`)."""
    tree = ast.parse((SRC / path).read_text())
    private = [
        (node.lineno, node.attr)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "inbox"
        and node.attr.startswith("_")
    ]
    assert private == []


def test_the_http_layer_uses_at_most_five_members_of_the_receiver() -> None:
    """Issue 49's count (`receiver.<member>` in http/*.py): the delivery path's `ahandle`, and
    the probes' ping, metrics, ack deadline and 503."""
    text = "".join(path.read_text() for path in sorted((SRC / "http").glob("*.py")))
    members = set(re.findall(r"\breceiver(?:\(\))?\.([a-z_]+)", text))
    assert members <= {"ahandle", "ping", "metrics", "ack_deadline", "unavailable"}, members
