"""Telegram bots: judged by the Bot API's documented rule (`setWebhook`'s `secret_token`, 1-256
characters of `A-Z a-z 0-9 _ -`, comes back as it stands in `X-Telegram-Bot-Api-Secret-Token`).
Nothing is signed, so there is no signature to recompute: the tests hold that the token alone
admits a delivery, that any body passes with it, and that it is never stored."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, ConfigurationError, MissingHeader, PayloadError
from hookinbox.sources import Telegram
from hookinbox.testing import sign as kit_sign

TOKEN = "tg_webhook-Secret_0123456789"
UPDATE = {
    "update_id": 902_114_537,
    "message": {
        "message_id": 4411,
        "from": {"id": 8_101_020, "is_bot": False, "first_name": "Zoë"},
        "chat": {"id": 8_101_020, "type": "private"},
        "date": 1_796_000_000,
        "text": "Un café ☕, s'il vous plaît",
    },
}
BODY = json.dumps(UPDATE, ensure_ascii=False).encode()
HEADER = "x-telegram-bot-api-secret-token"


def test_the_secret_token_admits_the_update_keyed_by_update_id() -> None:
    identity = Telegram(secret_token=TOKEN).authenticate({HEADER: TOKEN}, BODY, now=0)
    assert (identity.event_id, identity.event_type) == ("902114537", "message")
    assert identity.occurred_at == datetime.fromtimestamp(1_796_000_000, UTC)


def test_an_edited_message_is_timed_by_its_edit_and_a_query_has_no_time() -> None:
    edited = {"update_id": 1, "edited_message": {"date": 10, "edit_date": 20, "text": "x"}}
    query = {"update_id": 2, "callback_query": {"id": "4382", "data": "buy"}}
    source = Telegram(secret_token=TOKEN)
    first = source.identify({}, json.dumps(edited).encode())
    second = source.identify({}, json.dumps(query).encode())
    assert (first.event_type, first.occurred_at) == (
        "edited_message",
        datetime.fromtimestamp(20, UTC),
    )
    assert (second.event_type, second.occurred_at) == ("callback_query", None)


@pytest.mark.parametrize(
    "token",
    [TOKEN + "x", TOKEN[:-1], TOKEN.upper(), f" {TOKEN}x", "Bearer " + TOKEN],
    ids=["longer", "shorter", "case", "padded", "bearer"],
)
def test_any_other_token_is_refused(token: str) -> None:
    with pytest.raises(BadSignature):
        Telegram(secret_token=TOKEN).verify({HEADER: token}, BODY, now=0)


def test_no_token_is_a_missing_header() -> None:
    with pytest.raises(MissingHeader):
        Telegram(secret_token=TOKEN).verify({}, BODY, now=0)


@pytest.mark.parametrize("token", ["", "  ", "has space", "comma,token", "é", "x" * 257], ids=repr)
def test_a_token_telegram_would_refuse_is_refused_when_the_source_is_built(token: str) -> None:
    with pytest.raises(ConfigurationError):
        Telegram(secret_token=token)


@pytest.mark.parametrize(
    "body", [b'{"message": {}}', b'{"update_id": null}', b'{"update_id": true}', b"[]"]
)
def test_no_usable_update_id_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        Telegram(secret_token=TOKEN).identify({}, body)


def test_a_resent_update_is_a_duplicate_and_the_token_is_not_kept(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/telegram.db")
    inbox.add_source(Telegram(secret_token=["tg_new-token", TOKEN]))
    first = inbox.receive("telegram", {HEADER: TOKEN}, BODY)
    again = inbox.receive("telegram", {HEADER: "tg_new-token"}, BODY)
    forged = inbox.receive("telegram", {HEADER: "guessed"}, BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")
    kept = Telegram(secret_token=TOKEN).headers_to_store({HEADER: TOKEN, "user-agent": "x"})
    assert kept == {"user-agent": "x"}


def test_the_kits_signer_sends_the_token() -> None:
    headers, body = kit_sign(Telegram(secret_token="kit_token"), {"update_id": 7, "message": {}})
    assert headers["X-Telegram-Bot-Api-Secret-Token"] == "kit_token"
    assert json.loads(body)["update_id"] == 7
