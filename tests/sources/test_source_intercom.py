"""Intercom: the documented recipe (HMAC-SHA1 of the body with the client secret, hex, behind
`sha1=`); Intercom publishes no SDK that verifies, nor a test vector."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import Intercom
from hookinbox.testing import sign as kit_sign

SECRET = "intercom-client-secret-1f3c"
EVENT = {
    "type": "notification_event",
    "app_id": "abc123",
    "id": "notif_2e6b0c30-44b6-4a5e-9d6c-0b5e2f1a7c11",
    "topic": "conversation.user.created",
    "created_at": 1_796_000_000,
    "delivery_attempts": 1,
    "first_sent_at": 1_796_000_000,
    "data": {"type": "notification_event_data", "item": {"type": "conversation", "id": "1"}},
}
BODY = json.dumps(EVENT).encode()


def signed(body: bytes = BODY, secret: str = SECRET) -> dict[str, str]:
    return {"x-hub-signature": "sha1=" + hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()}


def test_a_recipe_signature_verifies_and_keys_by_notification_id() -> None:
    identity = Intercom(secret=SECRET).authenticate(signed(), BODY, now=0)
    assert (identity.event_id, identity.event_type) == (EVENT["id"], "conversation.user.created")
    assert identity.occurred_at == datetime.fromtimestamp(1_796_000_000, UTC)


def test_a_retry_repeats_the_notification_id_and_is_one_event() -> None:
    retry = json.dumps({**EVENT, "delivery_attempts": 2}).encode()
    source = Intercom(secret=SECRET)
    assert source.authenticate(signed(retry), retry, now=0).event_id == EVENT["id"]


@pytest.mark.parametrize(
    "headers",
    [
        signed(secret="attacker"),
        {"x-hub-signature": signed()["x-hub-signature"].replace("sha1=", "sha256=")},
        {"x-hub-signature": "sha1=" + hmac.new(SECRET.encode(), BODY, "sha256").hexdigest()},
        {"x-hub-signature": "sha1=zz"},
    ],
    ids=["wrong-secret", "wrong-prefix", "sha256-digest", "not-hex"],
)
def test_forgeries_are_bad_signatures(headers: dict[str, str]) -> None:
    with pytest.raises(BadSignature):
        Intercom(secret=SECRET).verify(headers, BODY, now=0)


def test_the_sha256_header_githubs_name_is_not_read() -> None:
    with pytest.raises(MissingHeader):
        Intercom(secret=SECRET).verify({"x-hub-signature-256": "sha256=00"}, BODY, now=0)


@pytest.mark.parametrize("body", [b"[]", b'{"topic": "ping"}', b'{"id": 5.5}'])
def test_an_unusable_body_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        Intercom(secret=SECRET).identify({}, body)


def test_a_retry_is_no_key_conflict_but_another_body_is(tmp_path: object) -> None:
    """Intercom counts `delivery_attempts` up on every retry (issue 31, item 11), and keeps its
    delivery bookkeeping beside it: a retry is a duplicate, never a key conflict; another
    notification under the same id still is one."""
    inbox = Inbox(f"sqlite:///{tmp_path}/intercom.db")
    inbox.add_source(Intercom(secret=SECRET))
    attempts = [
        EVENT,
        {**EVENT, "delivery_attempts": 2, "delivery_status": "retry", "delivered_at": 0},
        {**EVENT, "delivery_attempts": 3, "delivered_at": 1_796_000_900},
    ]
    replies = []
    for document in attempts:
        body = json.dumps(document).encode()
        replies.append(inbox.receive("intercom", signed(body), body))
    assert [(r.body["status"], r.key_conflict) for r in replies] == [
        ("accepted", False),
        ("duplicate", False),
        ("duplicate", False),
    ]
    other = json.dumps({**EVENT, "topic": "conversation.admin.closed"}).encode()
    assert inbox.receive("intercom", signed(other), other).key_conflict is True
    stored = inbox.store.get_event("intercom", EVENT["id"])
    inbox.close()
    assert (stored.delivery_count, stored.key_conflicts) == (4, 1)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_follows_intercoms_recipe() -> None:
    headers, body = kit_sign(Intercom(secret="ic"), KIT_EVENT)
    assert headers["X-Hub-Signature"] == "sha1=" + hmac.new(b"ic", body, hashlib.sha1).hexdigest()
