"""Trello: judged by Trello's documented recipe (`X-Trello-Webhook`, the base64 HMAC-SHA1 of
the body followed by the callback URL, keyed with the application secret)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, ConfigurationError, Handshake, PayloadError
from hookinbox.sources import Trello
from hookinbox.testing import sign as kit_sign

SECRET = "trello-app-secret-9"
URL = "https://hooks.example.com/webhooks/trello?board=7"
BODY = json.dumps({"action": {"id": "5f1e7b5b8c1d2a0012345678", "type": "commentCard",
                              "date": "2026-01-02T03:04:05.678Z", "data": {"text": "café ☕"}},
                   "model": {"id": "board1"}}, ensure_ascii=False).encode()  # fmt: skip


def recipe(body: bytes = BODY, secret: str = SECRET, url: str = URL) -> dict[str, str]:
    mac = hmac.new(secret.encode(), body + url.encode(), hashlib.sha1).digest()
    return {"x-trello-webhook": base64.b64encode(mac).decode()}


def test_a_recipe_signature_verifies_and_the_action_is_the_key() -> None:
    identity = Trello(secret=SECRET, url=URL).authenticate(recipe(), BODY, now=0)
    assert (identity.event_id, identity.event_type) == ("5f1e7b5b8c1d2a0012345678", "commentCard")


@pytest.mark.parametrize(
    "headers",
    [recipe(secret="guess"), recipe(url=URL.replace("?board=7", "")), {"x-trello-webhook": "!"}],
    ids=["secret", "url", "not-base64"],
)
def test_forgeries_are_refused(headers: dict[str, str]) -> None:
    with pytest.raises(BadSignature):
        Trello(secret=SECRET, url=URL).verify(headers, BODY, now=0)


def test_head_is_answered_200_empty_and_a_bad_url_is_refused_at_start() -> None:
    answer = Trello(secret=SECRET, url=URL).answer_get({}, {})
    assert isinstance(answer, Handshake) and (answer.status, answer.content) == (200, b"")
    with pytest.raises(ConfigurationError):
        Trello(secret=SECRET, url="hooks.example.com/trello")


def test_a_body_without_an_action_id_is_a_payload_error() -> None:
    body = b'{"action": {"type": "updateCard"}}'
    with pytest.raises(PayloadError):
        Trello(secret=SECRET, url=URL).authenticate(recipe(body), body, now=0)


def test_a_retry_is_a_duplicate(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/t.db", sources=[Trello(secret=SECRET, url=URL)])
    try:
        answers = [inbox.receive("trello", recipe(), BODY) for _ in range(2)]
    finally:
        inbox.close()
    assert [a.body["status"] for a in answers] == ["accepted", "duplicate"]


def test_the_kits_signer_follows_the_recipe() -> None:
    headers, body = kit_sign(Trello(secret="kit", url=URL), {"action": {"id": "a1"}})
    assert headers["X-Trello-Webhook"] == recipe(body, "kit")["x-trello-webhook"]
