"""Twitch: the message type is read from what the signature covers (issue 31, item 5).

`Twitch-Eventsub-Message-Type` is not signed. A captured `webhook_callback_verification` (or
any other message), replayed within the 10-minute window with another type in that header,
used to be stored and handled as that type: a verification replayed as a `revocation` told
the application its subscription had ended. The body says what the message is (a
verification has a `challenge`, a notification an `event`, a revocation neither), and the
header must agree with it: a mismatch is 400, nothing stored.

What it proves, through `Inbox.receive` on a real SQLite file: each signed message with its
own type is answered as before (the challenge; stored notification; stored revocation); each
replayed with either other type, or an unknown one, is 400 and nothing more is stored; without
the header the body decides; and the test kit signs each shape with its own type.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from hookinbox import Inbox
from hookinbox._storage._schema import events
from hookinbox.sources import Twitch
from hookinbox.testing import sign

SUBSCRIPTION = {"id": "f1c2a387", "type": "channel.follow", "version": "2", "cost": 0}
VERIFICATION = {
    "challenge": "pogchamp-kappa-360noscope-vohiyo",
    "subscription": {**SUBSCRIPTION, "status": "webhook_callback_verification_pending"},
}
NOTIFICATION = {
    "subscription": {**SUBSCRIPTION, "status": "enabled"},
    "event": {"user_id": "1337", "user_name": "awesome_user"},
}
REVOCATION = {"subscription": {**SUBSCRIPTION, "status": "authorization_revoked"}}
MESSAGES = {
    "webhook_callback_verification": VERIFICATION,
    "notification": NOTIFICATION,
    "revocation": REVOCATION,
}


@pytest.fixture
def inbox(tmp_path: Path) -> Inbox:
    inbox = Inbox(f"sqlite:///{tmp_path / 'inbox.db'}")
    inbox.add_source(Twitch(secret="twitch-subscription-secret"))
    inbox.migrate()
    return inbox


def _stored(inbox: Inbox) -> list[tuple[str, str | None]]:
    with inbox.store.engine.connect() as connection:
        query = sa.select(events.c.event_id, events.c.event_type).order_by(events.c.event_id)
        return [(row.event_id, row.event_type) for row in connection.execute(query)]


def _delivery(inbox: Inbox, kind: str, message_id: str) -> tuple[dict[str, str], bytes]:
    return sign(inbox.sources["twitch"], MESSAGES[kind], message_type=kind, message_id=message_id)


def test_each_message_with_its_own_type_is_answered_as_before(inbox: Inbox) -> None:
    verification = inbox.receive(
        "twitch", *_delivery(inbox, "webhook_callback_verification", "m-v")
    )
    assert (verification.status_code, verification.content) == (
        200,
        VERIFICATION["challenge"].encode(),
    )
    assert inbox.receive("twitch", *_delivery(inbox, "notification", "m-n")).status_code == 200
    assert inbox.receive("twitch", *_delivery(inbox, "revocation", "m-r")).status_code == 200
    assert _stored(inbox) == [("m-n", "channel.follow"), ("m-r", "revocation")]


@pytest.mark.parametrize("signed_as", list(MESSAGES))
def test_a_replay_under_another_message_type_is_refused(inbox: Inbox, signed_as: str) -> None:
    headers, body = _delivery(inbox, signed_as, f"m-{signed_as}")
    replies = {}
    for claimed in [*(k for k in MESSAGES if k != signed_as), "notification_batch", " revocation"]:
        replayed = {**headers, "Twitch-Eventsub-Message-Type": claimed}
        replies[claimed] = inbox.receive("twitch", replayed, body)
    assert {k: r.status_code for k, r in replies.items()} == dict.fromkeys(replies, 400)
    assert all(r.body["error"] == "bad_request" for r in replies.values())
    assert all(signed_as in r.body["detail"] for r in replies.values())
    assert _stored(inbox) == []
    inbox.close()


def test_without_the_header_the_body_says_what_the_message_is(inbox: Inbox) -> None:
    answers = {}
    for kind in MESSAGES:
        headers, body = _delivery(inbox, kind, f"m-{kind}")
        headers.pop("Twitch-Eventsub-Message-Type")
        answers[kind] = inbox.receive("twitch", headers, body)
    assert answers["webhook_callback_verification"].content == VERIFICATION["challenge"].encode()
    assert _stored(inbox) == [("m-notification", "channel.follow"), ("m-revocation", "revocation")]


def test_the_kit_signs_each_shape_with_its_own_type(inbox: Inbox) -> None:
    twitch = inbox.sources["twitch"]
    for kind, document in MESSAGES.items():
        headers, body = sign(twitch, document, at=time.time())
        assert headers["Twitch-Eventsub-Message-Type"] == kind
        assert json.loads(body) == document
