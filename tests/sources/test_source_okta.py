"""Okta event hooks: judged by Okta's published verification request and answer (its help
article "Unable to verify event hook", replayed below byte for byte) and its `authScheme`
(the configured header carries the configured value on every request)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, Handshake, MissingHeader, PayloadError
from hookinbox.http import answer_get
from hookinbox.sources import Okta

PUBLISHED_REQUEST = {  # the GET Okta's article shows, headers as sent
    "User-Agent": "Okta-Integrations",
    "Accept": "application/json",
    "X-Okta-Request-Id": "XOZfPkReFFZ10KWyGkzAMwAAADA",
    "X-Okta-Verification-Challenge": "Me_rShK8JHsTnbyYrWXCEoMGbM_zsZ6k0hLPZ_Pg",
    "x-any-key": "my-header-value",
    "Authorization": "my-shared-secret",
}
PUBLISHED_ANSWER = b'{"verification":"Me_rShK8JHsTnbyYrWXCEoMGbM_zsZ6k0hLPZ_Pg"}'


def delivery(*uuids: str) -> bytes:
    events = [{"uuid": u, "eventType": "user.session.start", "published": "2026-01-02T03:04:05Z"}
              for u in uuids]  # fmt: skip
    hook = {"eventType": "com.okta.event_hook", "eventId": "b5a188b9", "data": {"events": events}}
    return json.dumps(hook).encode()


def test_the_published_verification_request_gets_the_published_answer(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/okta.db", sources=[Okta(secret="my-shared-secret")])
    try:
        reply = answer_get(inbox, "okta", PUBLISHED_REQUEST)
    finally:
        inbox.close()
    assert (reply.status_code, reply.content, reply.media_type) == (
        200, PUBLISHED_ANSWER, "application/json")  # fmt: skip


def test_a_custom_header_scheme() -> None:
    source = Okta(secret="s3cr3t", header="X-Hook-Auth")
    headers = {"x-hook-auth": "s3cr3t", "x-okta-verification-challenge": "c1"}
    answer = source.answer_get({}, headers)
    assert isinstance(answer, Handshake) and answer.answer == {"verification": "c1"}
    with pytest.raises(MissingHeader):
        source.answer_get({}, {"authorization": "s3cr3t", "x-okta-verification-challenge": "c"})


def test_each_event_is_keyed_by_its_uuid() -> None:
    body = delivery("u-1", "u-2")
    identities = Okta(secret="k").authenticate_batch({"authorization": "k"}, body, now=0)
    assert [(i.event_id, i.event_type) for i in identities] == [
        ("u-1", "user.session.start"), ("u-2", "user.session.start")]  # fmt: skip


@pytest.mark.parametrize("value", ["", "K", "kk", "\ud800"])
def test_any_other_header_value_is_refused(value: str) -> None:
    with pytest.raises((BadSignature, MissingHeader)):
        Okta(secret="k").verify({"authorization": value}, delivery("u"), now=0)


def test_a_body_without_events_is_a_payload_error() -> None:
    for body in (b'{"data": {}}', b'{"data": []}', b"[]"):
        with pytest.raises(PayloadError):
            Okta(secret="k").authenticate_batch({"authorization": "k"}, body, now=0)


def test_the_header_is_never_stored(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/okta.db", sources=[Okta(secret="k")])
    try:
        first = inbox.receive("okta", {"Authorization": "k"}, delivery("u-9"))
        again = inbox.receive("okta", {"Authorization": "k"}, delivery("u-9"))
        event = inbox.store.get_event("okta", "u-9")
    finally:
        inbox.close()
    assert (first.body["accepted"], again.body["duplicates"]) == (1, 1)
    assert event is not None and "authorization" not in event.headers
