"""Handshakes over GET and HEAD, on every entry point: the ASGI app, FastAPI's router, Flask's
blueprint, `hookinbox.http.answer_get` (which Django's view calls), and `inbox.receive`'s
`query=` for the POSTs a source reads its query string on.

The hostile cases of issue 47: a forged or missing verify token, a replayed handshake (it
stores nothing, so a replay is only another answer), a GET or HEAD to a source without a
handshake (405), an oversized challenge, a challenge that would inject into the reply, a
query string too long or too crowded: each has its documented answer, and nothing is stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from flask import Flask

import hookinbox.fastapi
import hookinbox.flask
from hookinbox import Inbox
from hookinbox._storage._schema import events
from hookinbox.http import Request, answer_get
from hookinbox.sources import (
    AzureEventGridCloudEvents,
    Dropbox,
    Meta,
    Okta,
    Query,
    Source,
    Stripe,
    Trello,
    Twitter,
)
from tests.support.asgi import ASGIClient

VERIFY = "hub.mode=subscribe&hub.verify_token=vt-1&hub.challenge=1158201444"


@pytest.fixture
def inbox(tmp_path: Path) -> Iterator[Inbox]:
    inbox = Inbox(f"sqlite:///{tmp_path}/handshakes.db")
    inbox.add_source(Meta(secret="app-secret", verify_token="vt-1"))
    inbox.add_source(Dropbox(secret="dbx-secret"))
    inbox.add_source(Twitter(secret="consumer-secret"))
    inbox.add_source(Okta(secret="okta-header-value"))
    inbox.add_source(Trello(secret="trello-secret", url="https://h.example/webhooks/trello"))
    inbox.add_source(Stripe(secret="whsec_x"))
    inbox.migrate()
    yield inbox
    inbox.close()


def _stored(inbox: Inbox) -> int:
    with inbox.store.engine.connect() as connection:
        return int(connection.execute(sa.select(sa.func.count()).select_from(events)).scalar())


class Asgi:
    def __init__(self, inbox: Inbox) -> None:
        self.client = ASGIClient(inbox.asgi())

    def __call__(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, Any, bytes]:
        response = self.client.request(method, path, headers=headers)
        return response.status_code, response.headers, response.content


class FastAPIRouter(Asgi):
    def __init__(self, inbox: Inbox) -> None:
        app = FastAPI()
        app.include_router(hookinbox.fastapi.router(inbox))
        self.client = ASGIClient(app)


class FlaskBlueprint:
    def __init__(self, inbox: Inbox) -> None:
        app = Flask(__name__)
        app.register_blueprint(hookinbox.flask.blueprint(inbox))
        self.client = app.test_client()

    def __call__(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, Any, bytes]:
        response = self.client.open(path, method=method, headers=headers)
        return response.status_code, response.headers, response.data


class Neutral:
    """`hookinbox.http.answer_get`, as the Django view calls it (GET and HEAD alike)."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox

    def __call__(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, Any, bytes]:
        source_path, _, query = path.partition("?")
        source = source_path.rsplit("/", 1)[1]
        if method not in ("GET", "HEAD"):
            reply = self.inbox._receiver().method_not_allowed(source)
        else:
            reply = answer_get(self.inbox, source, headers, query)
        body = b"" if method == "HEAD" else reply.content
        return reply.status_code, {**reply.headers, "content-type": reply.media_type}, body


ENTRIES = {"asgi": Asgi, "fastapi": FastAPIRouter, "flask": FlaskBlueprint, "neutral": Neutral}


@pytest.fixture(params=list(ENTRIES))
def call(request: pytest.FixtureRequest, inbox: Inbox) -> Any:
    return ENTRIES[request.param](inbox)


def test_each_providers_handshake_is_answered_and_nothing_is_stored(
    call: Any, inbox: Inbox
) -> None:
    status, headers, body = call("GET", f"/webhooks/meta?{VERIFY}", {})
    assert (status, body) == (200, b"1158201444")
    assert headers["content-type"].startswith("text/plain")
    assert headers["x-content-type-options"] == "nosniff"
    status, headers, body = call("GET", "/webhooks/dropbox?challenge=abc123", {})
    assert (status, body, headers["x-content-type-options"]) == (200, b"abc123", "nosniff")
    status, headers, body = call("GET", "/webhooks/twitter?crc_token=tok3n", {})
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert body.startswith(b'{"response_token":"sha256=')
    okta = {"X-Okta-Verification-Challenge": "chal_1", "Authorization": "okta-header-value"}
    assert call("GET", "/webhooks/okta", okta)[::2] == (200, b'{"verification":"chal_1"}')
    assert call("HEAD", "/webhooks/trello", {})[0] == 200
    assert call("GET", "/webhooks/trello", {})[0] == 200
    assert call("HEAD", f"/webhooks/meta?{VERIFY}", {})[::2] == (200, b"")
    assert _stored(inbox) == 0


def test_a_source_without_a_handshake_answers_get_and_head_405(call: Any) -> None:
    for method in ("GET", "HEAD"):
        status, headers, _ = call(method, "/webhooks/stripe?challenge=x", {})
        assert (status, headers["allow"]) == (405, "POST"), method
    status, headers, _ = call("PUT", "/webhooks/meta", {})
    assert status == 405
    if isinstance(call, Asgi | Neutral) and not isinstance(call, FastAPIRouter):
        assert headers["allow"] == "GET, HEAD, POST"  # frameworks answer their own routes' 405


@pytest.mark.parametrize(
    ("path", "headers", "status"),
    [
        ("/webhooks/meta?hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1", {}, 403),
        ("/webhooks/meta?hub.mode=subscribe&hub.challenge=1", {}, 403),
        ("/webhooks/meta?hub.mode=subscribe&hub.verify_token=VT-1&hub.challenge=1", {}, 403),
        ("/webhooks/meta?hub.challenge=1", {}, 400),
        ("/webhooks/meta?hub.mode=unsubscribe&hub.verify_token=vt-1&hub.challenge=1", {}, 400),
        ("/webhooks/meta?hub.mode=subscribe&hub.verify_token=vt-1", {}, 400),
        (f"/webhooks/meta?{VERIFY}&hub.verify_token=vt-1", {}, 400),  # given twice
        ("/webhooks/dropbox", {}, 400),
        ("/webhooks/dropbox?challenge=" + "a" * 513, {}, 400),
        ("/webhooks/dropbox?challenge=%3Cscript%3Ealert(1)%3C/script%3E", {}, 400),
        ("/webhooks/dropbox?challenge=a%0D%0AContent-Type:%20text/html", {}, 400),
        ("/webhooks/dropbox?challenge=" + "&".join(f"x{n}=1" for n in range(40)), {}, 400),
        ("/webhooks/dropbox?challenge=" + "a" * 5000, {}, 400),
        ("/webhooks/twitter?crc_token=%7B%22for_user_id%22%3A%221%22%7D", {}, 400),
        ("/webhooks/twitter?crc_token=a%22%2C%22x%22%3A%22", {}, 400),
        ("/webhooks/okta", {"X-Okta-Verification-Challenge": "c1"}, 403),
        ("/webhooks/okta", {"X-Okta-Verification-Challenge": "c1", "Authorization": "x"}, 403),
        ("/webhooks/okta", {"Authorization": "okta-header-value"}, 400),
        (
            "/webhooks/okta",
            {"X-Okta-Verification-Challenge": 'c","x":"', "Authorization": "okta-header-value"},
            400,
        ),
    ],
    ids=lambda value: str(value)[:40],
)
def test_hostile_handshakes_get_their_documented_answer_and_store_nothing(
    call: Any, inbox: Inbox, path: str, headers: dict[str, str], status: int
) -> None:
    answer_status, answer_headers, body = call("GET", path, headers)
    assert answer_status == status, body
    assert answer_headers["content-type"].startswith("application/json")
    assert _stored(inbox) == 0


def test_a_replayed_handshake_is_only_answered_again(call: Any, inbox: Inbox) -> None:
    first = call("GET", f"/webhooks/meta?{VERIFY}", {})
    again = call("GET", f"/webhooks/meta?{VERIFY}", {})
    assert first[::2] == again[::2] == (200, b"1158201444")
    assert _stored(inbox) == 0


class QuerySource(Source):
    """A source that reads its POST's query string, as Microsoft Graph's will."""

    default_name = "query"
    reads_query = True

    def check_query(self, query: Query, headers: Any, body: bytes) -> str | None:
        token = query.get("validationToken")
        return token[0] if token else None

    def verify(self, headers: Any, body: bytes, *, now: float) -> None:
        raise AssertionError("not reached in this test")

    def identify(self, headers: Any, body: bytes) -> Any:
        raise AssertionError("not reached in this test")


def test_the_query_reaches_a_source_that_reads_it_on_every_post_entry(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/query.db", sources=[QuerySource()])
    try:
        reply = inbox.receive("query", {}, b"", query="validationToken=Validation%3A+ok")
        assert (reply.status_code, reply.content) == (200, b"Validation: ok")
        asgi = ASGIClient(inbox.asgi()).post("/webhooks/query?validationToken=t1", content=b"")
        assert (asgi.status_code, asgi.content) == (200, b"t1")
        app = FastAPI()
        app.include_router(hookinbox.fastapi.router(inbox))
        routed = ASGIClient(app).post("/webhooks/query?validationToken=t2", content=b"")
        assert (routed.status_code, routed.content) == (200, b"t2")
        flask_app = Flask(__name__)
        flask_app.register_blueprint(hookinbox.flask.blueprint(inbox))
        flasked = flask_app.test_client().post("/webhooks/query?validationToken=t3", data=b"")
        assert (flasked.status_code, flasked.data) == (200, b"t3")
        too_long = inbox.receive("query", {}, b"", query="validationToken=" + "a" * 5000)
        assert (too_long.status_code, too_long.body["error"]) == (400, "bad_request")
    finally:
        inbox.close()


def test_a_stripe_delivery_ignores_its_query_string(tmp_path: Path) -> None:
    """A source that does not read its query never has it parsed: a query no parser takes
    changes nothing for it."""
    from tests.support.signing import stripe_delivery, stripe_event

    inbox = Inbox(f"sqlite:///{tmp_path}/stripe.db", sources=[Stripe(secret="whsec_x")])
    try:
        headers, body = stripe_delivery(stripe_event("evt_q"), "whsec_x")
        reply = inbox.receive("stripe", headers, body, query="a=" + "&b=" * 5000)
        assert reply.body == {"status": "accepted", "event_id": "evt_q"}
    finally:
        inbox.close()


@pytest.mark.parametrize("entry", ["asgi", "handle"])
def test_options_reaches_only_a_source_that_answers_it_and_stores_nothing(
    inbox: Inbox, entry: str
) -> None:
    inbox.add_source(AzureEventGridCloudEvents(secret="eg-key"))
    origin = {"webhook-request-origin": "eventgrid.azure.net"}

    def options(path: str) -> tuple[int, Any]:
        if entry == "asgi":
            response = ASGIClient(inbox.asgi()).request("OPTIONS", path, headers=origin)
            return response.status_code, response.headers
        source_path, _, query = path.partition("?")
        reply = inbox.handle(
            Request("OPTIONS", source_path.rsplit("/", 1)[1], origin, query.encode(), b"")
        )
        return reply.status_code, reply.headers

    allowed = options("/webhooks/azure-event-grid-cloudevents?key=eg-key")
    replayed = options("/webhooks/azure-event-grid-cloudevents?key=eg-key")
    assert allowed[0] == replayed[0] == 200
    assert allowed[1]["webhook-allowed-origin"] == "eventgrid.azure.net"
    keyless = options("/webhooks/azure-event-grid-cloudevents")
    assert keyless[0] == 403 and "webhook-allowed-origin" not in keyless[1]
    assert (options("/webhooks/stripe")[0], options("/webhooks/stripe")[1]["allow"]) == (
        405,
        "POST",
    )
    assert options("/webhooks/meta")[1]["allow"] == "GET, HEAD, POST"
    assert options("/webhooks/nobody")[0] == 405
    assert _stored(inbox) == 0


def test_options_reaches_the_source_on_every_framework_entry(call: Any, inbox: Inbox) -> None:
    if isinstance(call, Neutral):
        return  # `answer_get` is GET's; the neutral entry for OPTIONS is `inbox.handle` (above)
    inbox.add_source(AzureEventGridCloudEvents(secret="eg-key"))
    origin = {"WebHook-Request-Origin": "eventgrid.azure.net"}
    status, headers, _ = call(
        "OPTIONS", "/webhooks/azure-event-grid-cloudevents?key=eg-key", origin
    )
    assert (status, headers["webhook-allowed-origin"]) == (200, "eventgrid.azure.net")
    assert call("OPTIONS", "/webhooks/azure-event-grid-cloudevents", origin)[0] == 403
    status, headers, _ = call("OPTIONS", "/webhooks/stripe", origin)
    assert status == 405 and "webhook-allowed-origin" not in headers
    assert _stored(inbox) == 0
