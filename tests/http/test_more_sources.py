"""Paddle, Slack, Square, GitLab, Lemon Squeezy and Twilio end to end through `inbox.asgi()`.

Each delivery is signed with the provider's own library where PyPI has one, posted, retried and
forged; the event is stored once, its handler runs once (inline, in the insert's transaction)
and sees the payload the provider sent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from hookinbox import Event, HandlerContext, Inbox
from hookinbox._storage._schema import events
from hookinbox.sources import GitLab, GitLabSigned, LemonSqueezy, Paddle, Slack, Square, Twilio
from tests.support.asgi import ASGIClient
from tests.support.signing import (
    Delivery,
    gitlab_delivery,
    lemonsqueezy_delivery,
    paddle_delivery,
    slack_delivery,
    square_delivery,
    standard_delivery,
    twilio_form_delivery,
)

SECRET = "provider-signing-secret"
# Event times must be recent: an event older than the retention is held as stale, not handled.
NOW_ISO = datetime.now(UTC).isoformat().replace("+00:00", "Z")
GITLAB_SIGNING_SECRET = "whsec_Z2l0bGFiLXNpZ25pbmcta2V5LWZvci10ZXN0cw=="
SQUARE_URL = "https://hooks.example.com/webhooks/square"
TWILIO_URL = "https://hooks.example.com/webhooks/twilio"

PADDLE_EVENT = {
    "event_id": "evt_01h8bzakzx3hm2fmen703n5q45",
    "event_type": "transaction.paid",
    "occurred_at": NOW_ISO,
    "notification_id": "ntf_01h8bzam1z32agrxjwhjgqk8w6",
    "data": {"id": "txn_01h8bz9n8v1rkxq1m9cyq6wj7h", "status": "paid"},
}
SLACK_EVENT = {
    "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
    "team_id": "T0123ABCD",
    "api_app_id": "A0123ABCD",
    "event": {"type": "app_mention", "user": "U1", "text": "hi", "channel": "C1"},
    "type": "event_callback",
    "event_id": "Ev0123ABCDEF",
    "event_time": int(time.time()),
}
SQUARE_EVENT = {
    "merchant_id": "6SSW7HV8K2ST5",
    "type": "payment.created",
    "event_id": "13b867cf-db3d-4b1c-90b6-2f32a9d78124",
    "created_at": NOW_ISO,
    "data": {"type": "payment", "id": "KkAkhdMsgzn59SM8A89WgKwekxLZY"},
}
GITLAB_EVENT = {"object_kind": "push", "ref": "refs/heads/main", "project": {"id": 15}}
LEMON_EVENT = {
    "meta": {"event_name": "order_created", "custom_data": {"customer_id": 25}},
    "data": {
        "type": "orders",
        "id": "1",
        "attributes": {"total": 999, "updated_at": NOW_ISO},
    },
}
TWILIO_STATUS = {
    "AccountSid": "ACXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
    "MessageSid": "SM1342fe1b2c904d1ab04f0fc7a58abca9",
    "MessageStatus": "delivered",
    "To": "+15558675310",
    "Body": "Zoë & co",
}


@dataclass(frozen=True)
class Case:
    name: str
    deliver: Callable[[str], Delivery]
    """A correctly signed delivery with the given secret; each call is a new attempt."""
    key: str
    event_type: str
    payload: Any


CASES = [
    Case(
        "paddle",
        lambda secret: paddle_delivery(PADDLE_EVENT, secret),
        "evt_01h8bzakzx3hm2fmen703n5q45",
        "transaction.paid",
        PADDLE_EVENT,
    ),
    Case(
        "slack",
        lambda secret: slack_delivery(SLACK_EVENT, secret),
        "Ev0123ABCDEF",
        "app_mention",
        SLACK_EVENT,
    ),
    Case(
        "square",
        lambda secret: square_delivery(SQUARE_EVENT, secret, SQUARE_URL),
        "13b867cf-db3d-4b1c-90b6-2f32a9d78124",
        "payment.created",
        SQUARE_EVENT,
    ),
    Case(
        "gitlab",
        lambda secret: gitlab_delivery("idem-1", "Push Hook", GITLAB_EVENT, secret),
        "idem-1",
        "Push Hook",
        GITLAB_EVENT,
    ),
    Case(
        "gitlab-signed",
        lambda secret: _gitlab_signed(secret),
        "msg_gitlab_1",
        "Push Hook",
        GITLAB_EVENT,
    ),
    Case(
        "lemonsqueezy",
        lambda secret: lemonsqueezy_delivery(LEMON_EVENT, secret),
        "",  # derived: checked by prefix below
        "order_created",
        LEMON_EVENT,
    ),
    Case(
        "twilio",
        lambda secret: twilio_form_delivery(TWILIO_STATUS, secret, TWILIO_URL),
        "SM1342fe1b2c904d1ab04f0fc7a58abca9:delivered",
        "message.delivered",
        TWILIO_STATUS,
    ),
]


def _gitlab_signed(secret: str) -> Delivery:
    if secret != SECRET:  # a forgery: signed with a key of the right form but not ours
        secret = "whsec_c29tZW9uZS1lbHNlcy1rZXktMzItYnl0ZXMhIQ=="
    else:
        secret = GITLAB_SIGNING_SECRET
    headers, body = standard_delivery("msg_gitlab_1", GITLAB_EVENT, secret)
    return {**headers, "X-Gitlab-Event": "Push Hook"}, body


@pytest.fixture
def inbox(db_url: str) -> Iterator[tuple[Inbox, list[Event]]]:
    inbox = Inbox(db_url)
    handled: list[Event] = []
    sources = [
        Paddle(secret=SECRET),
        Slack(secret=SECRET),
        Square(secret=SECRET, notification_url=SQUARE_URL),
        GitLab(token=SECRET),
        GitLabSigned(secret=GITLAB_SIGNING_SECRET, name="gitlab-signed"),
        LemonSqueezy(secret=SECRET),
        Twilio(secret=SECRET, url=TWILIO_URL),
    ]
    for source in sources:
        inbox.add_source(source, inline=True)

        @inbox.handler(source.name)
        def record(event: Event, ctx: HandlerContext) -> None:
            handled.append(event)

    yield inbox, handled
    inbox.close()


def stored(inbox: Inbox) -> list[tuple[str, str, int]]:
    with inbox.store.engine.connect() as connection:
        query = sa.select(events.c.source, events.c.event_id, events.c.delivery_count)
        return [tuple(row) for row in connection.execute(query).all()]  # type: ignore[misc]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_stored_once_handled_once_forgeries_refused(
    inbox: tuple[Inbox, list[Event]], case: Case
) -> None:
    app, handled = inbox
    client = ASGIClient(app.asgi())
    url = f"/webhooks/{case.name}"

    forged_headers, forged_body = case.deliver("someone-else")
    forged = client.post(url, headers=forged_headers, content=forged_body)
    assert forged.status_code == 401, forged.text
    assert forged.json()["error"] == "invalid_signature"

    headers, body = case.deliver(SECRET)
    first = client.post(url, headers=headers, content=body)
    assert first.status_code == 200, first.text
    assert first.json()["status"] == "accepted"
    key = first.json()["event_id"]
    if case.key:
        assert key == case.key
    else:
        assert key.startswith("order_created:orders:1:")

    headers, body = case.deliver(SECRET)  # the provider's retry, signed anew where it signs a time
    retry = client.post(url, headers=headers, content=body)
    assert (retry.status_code, retry.json()) == (200, {"status": "duplicate", "event_id": key})

    assert stored(app) == [(case.name, key, 2)]
    assert [(e.source, e.id, e.type) for e in handled] == [(case.name, key, case.event_type)]
    assert handled[0].payload == case.payload


def test_slack_url_verification_is_answered_and_nothing_is_stored(
    inbox: tuple[Inbox, list[Event]],
) -> None:
    app, handled = inbox
    client = ASGIClient(app.asgi())
    challenge = {"token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV", "type": "url_verification"}
    headers, body = slack_delivery(challenge, SECRET)
    response = client.post("/webhooks/slack", headers=headers, content=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert json.loads(response.content) == {"challenge": "3eZbrw1aBm2rZgRNFdxV"}
    headers, body = slack_delivery(challenge, "someone-else")
    assert client.post("/webhooks/slack", headers=headers, content=body).status_code == 401
    assert stored(app) == []
    assert handled == []
