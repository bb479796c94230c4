"""WorkOS, Calendly, Intercom, Linear, Postmark, Mailgun and Typeform end to end (issue 23).

Each delivery is built here by the provider's documented recipe (independently of
`hookinbox.testing`, whose signers tests/testing/test_signers.py holds to the official
verifiers), sent through `inbox.receive` and through the ASGI app: stored once across a retry
signed anew, and refused without writing anything when forged, unsigned, stale, or naming no
event.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from hookinbox import Inbox
from hookinbox._storage._schema import events
from hookinbox.sources import Calendly, Intercom, Linear, Mailgun, Postmark, Typeform, WorkOS
from tests.support.asgi import ASGIClient

SECRET = "round-two-signing-secret"
NOW_ISO = datetime.now(UTC).isoformat().replace("+00:00", "Z")  # recent: never held as stale
Delivery = tuple[dict[str, str], bytes]


def _hex(message: bytes, algorithm: str = "sha256", key: str = SECRET) -> str:
    return hmac.new(key.encode(), message, algorithm).hexdigest()


def workos(payload: dict[str, Any], key: str, at: float) -> Delivery:
    body = json.dumps(payload).encode()
    t = int(at * 1000)
    return {"WorkOS-Signature": f"t={t}, v1={_hex(f'{t}.'.encode() + body, key=key)}"}, body


def calendly(payload: dict[str, Any], key: str, at: float) -> Delivery:
    body = json.dumps(payload).encode()
    t = int(at)
    signature = _hex(f"{t}.".encode() + body, key=key)
    return {"Calendly-Webhook-Signature": f"t={t},v1={signature}"}, body


def intercom(payload: dict[str, Any], key: str, at: float) -> Delivery:
    body = json.dumps(payload).encode()
    return {"X-Hub-Signature": "sha1=" + _hex(body, "sha1", key)}, body


def linear(payload: dict[str, Any], key: str, at: float) -> Delivery:
    body = json.dumps({**payload, "webhookTimestamp": int(at * 1000)}).encode()
    headers = {"Linear-Signature": _hex(body, key=key), "Linear-Event": "Issue"}
    return {**headers, "Linear-Delivery": f"delivery-{payload['data']['id']}"}, body


def postmark(payload: dict[str, Any], key: str, at: float) -> Delivery:
    credentials = base64.b64encode(f"postmark:{key}".encode()).decode()
    return {"Authorization": f"Basic {credentials}"}, json.dumps(payload).encode()


def mailgun(payload: dict[str, Any], key: str, at: float) -> Delivery:
    t, token = str(int(at)), hashlib.sha256(str(at).encode()).hexdigest()[:50]
    block = {"timestamp": t, "token": token, "signature": _hex((t + token).encode(), key=key)}
    return {}, json.dumps({**payload, "signature": block}).encode()


def typeform(payload: dict[str, Any], key: str, at: float) -> Delivery:
    body = json.dumps(payload).encode()
    digest = hmac.new(key.encode(), body, "sha256").digest()
    return {"Typeform-Signature": "sha256=" + base64.b64encode(digest).decode()}, body


@dataclass(frozen=True)
class Case:
    name: str
    deliver: Callable[[dict[str, Any], str, float], Delivery]
    event: Callable[[str], dict[str, Any]]
    """A payload naming the event `tag`."""
    key: Callable[[str], str]
    no_id: dict[str, Any]
    timed: bool = True
    """The signature dates the delivery: one signed an hour ago is refused."""


CASES = [
    Case(
        "workos",
        workos,
        lambda tag: {"id": f"event_{tag}", "event": "user.created", "created_at": NOW_ISO},
        lambda tag: f"event_{tag}",
        {"event": "user.created"},
    ),
    Case(
        "calendly",
        calendly,
        lambda tag: {
            "event": "invitee.created",
            "created_at": NOW_ISO,
            "payload": {"uri": f"https://api.calendly.com/scheduled_events/E/invitees/{tag}"},
        },
        lambda tag: f"invitee.created:https://api.calendly.com/scheduled_events/E/invitees/{tag}",
        {"event": "invitee.created", "payload": {}},
    ),
    Case(
        "intercom",
        intercom,
        lambda tag: {"type": "notification_event", "id": f"notif_{tag}", "topic": "ping"},
        lambda tag: f"notif_{tag}",
        {"type": "notification_event", "topic": "ping"},
        timed=False,
    ),
    Case(
        "linear",
        linear,
        lambda tag: {
            "type": "Issue",
            "action": "create",
            "createdAt": NOW_ISO,
            "data": {"id": tag},
        },
        lambda tag: f"delivery-{tag}",
        {},  # replaced below: the key is a header
    ),
    Case(
        "postmark",
        postmark,
        lambda tag: {"RecordType": "Bounce", "ID": tag, "MessageID": tag, "BouncedAt": NOW_ISO},
        lambda tag: f"Bounce:{tag}",
        {"RecordType": "Bounce", "MessageID": "m"},
        timed=False,
    ),
    Case(
        "mailgun",
        mailgun,
        lambda tag: {"event-data": {"id": tag, "event": "delivered", "timestamp": time.time()}},
        lambda tag: tag,
        {"event-data": {"event": "delivered"}},
    ),
    Case(
        "typeform",
        typeform,
        lambda tag: {"event_id": tag, "event_type": "form_response"},
        lambda tag: tag,
        {"event_type": "form_response"},
        timed=False,
    ),
]
Post = Callable[[str, dict[str, str], bytes], tuple[int, dict[str, Any]]]


@pytest.fixture(scope="module")
def inbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inbox]:
    path: Path = tmp_path_factory.mktemp("round-two") / "inbox.db"
    inbox = Inbox(f"sqlite:///{path}")
    for source in (
        WorkOS(secret=SECRET),
        Calendly(secret=SECRET),
        Intercom(secret=SECRET),
        Linear(secret=SECRET),
        Postmark(username="postmark", password=SECRET),
        Mailgun(secret=SECRET),
        Typeform(secret=SECRET),
    ):
        inbox.add_source(source)
    inbox.migrate()
    yield inbox
    inbox.close()


def _poster(inbox: Inbox, entry: str) -> Post:
    if entry == "receive":

        def receive(name: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
            reply = inbox.receive(name, headers, body)
            return reply.status_code, dict(reply.body)

        return receive
    client = ASGIClient(inbox.asgi())

    def post(name: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        response = client.post(f"/webhooks/{name}", headers=headers, content=body)
        return response.status_code, response.json()

    return post


def _rows(inbox: Inbox, name: str, key: str) -> list[tuple[int, int]]:
    """(deliveries, key conflicts) of the stored event, if any."""
    with inbox.store.engine.connect() as connection:
        query = sa.select(events.c.delivery_count, events.c.key_conflicts).where(
            events.c.source == name, events.c.event_id == key
        )
        return [(row[0], row[1]) for row in connection.execute(query).all()]


@pytest.mark.parametrize("entry", ["receive", "asgi"])
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_stored_once_and_every_refusal_writes_nothing(inbox: Inbox, case: Case, entry: str) -> None:
    post = _poster(inbox, entry)
    tag = f"{entry}{case.name}"
    payload, key = case.event(tag), case.key(tag)
    now = time.time()

    refusals: list[tuple[Delivery, int]] = [(case.deliver(payload, "someone-else", now), 401)]
    headers, body = case.deliver(payload, SECRET, now)
    if headers:  # no signature header at all (Mailgun's is in the body: drop the block)
        refusals.append((({}, body), 401))
    else:
        refusals.append((({}, json.dumps(payload).encode()), 401))
    if case.timed:
        refusals.append((case.deliver(payload, SECRET, now - 3600), 401))
    no_id = case.no_id or {"type": "Issue", "data": {"id": "x"}}
    no_id_headers, no_id_body = case.deliver(no_id, SECRET, now)
    if case.name == "linear":
        no_id_headers = {k: v for k, v in no_id_headers.items() if k != "Linear-Delivery"}
    refusals.append(((no_id_headers, no_id_body), 400))
    for (refused_headers, refused_body), status in refusals:
        answer_status, answer = post(case.name, refused_headers, refused_body)
        assert answer_status == status, answer
    assert _rows(inbox, case.name, key) == []

    status, answer = post(case.name, headers, body)
    assert (status, answer) == (200, {"status": "accepted", "event_id": key})
    retry = case.deliver(payload, SECRET, now + 30)  # signed anew, as the provider retries
    status, answer = post(case.name, *retry)
    assert (status, answer) == (200, {"status": "duplicate", "event_id": key})
    # Mailgun and Linear re-sign inside the body: the retry is a duplicate, not a conflict.
    assert _rows(inbox, case.name, key) == [(2, 0)]
