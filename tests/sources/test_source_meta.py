"""Meta: judged by Meta's documented recipe ("sha256=" and the hex HMAC-SHA256 of the payload
with the app secret; Graph API webhooks, "Validate payloads") and its verification request
(`hub.mode=subscribe`, `hub.verify_token`, `hub.challenge` echoed), written here with `hmac`."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, Handshake, MissingHeader, PayloadError
from hookinbox.sources import Meta
from hookinbox.testing import sign as kit_sign

SECRET = "meta-app-secret-7f2c"
TOKEN = "my-verify-token"


def whatsapp(*changes: dict[str, object], entry_id: str = "102290129340398") -> bytes:
    entry = {"id": entry_id, "changes": list(changes)}
    return json.dumps({"object": "whatsapp_business_account", "entry": [entry]}).encode()


def message(wamid: str) -> dict[str, object]:
    msg = {"from": "16315551181", "id": wamid, "timestamp": "1700000000", "type": "text"}
    return {"field": "messages", "value": {"messaging_product": "whatsapp", "messages": [msg]}}


def status(wamid: str, state: str) -> dict[str, object]:
    item = {"id": wamid, "status": state, "timestamp": "1700000000", "recipient_id": "1631"}
    return {"field": "messages", "value": {"messaging_product": "whatsapp", "statuses": [item]}}


def recipe(body: bytes, secret: str = SECRET) -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"x-hub-signature-256": f"sha256={digest}"}


def test_a_recipe_signature_verifies_and_each_entry_is_keyed_by_its_message_id() -> None:
    body = whatsapp(message("wamid.HBgLMTYzMTU1NTExODEVAgASGBQzQTRCRDNFRjcxN0Y5"))
    [identity] = Meta(secret=SECRET, verify_token=TOKEN).authenticate_batch(
        recipe(body), body, now=0
    )
    assert identity.event_id == "wamid.HBgLMTYzMTU1NTExODEVAgASGBQzQTRCRDNFRjcxN0Y5"
    assert identity.event_type == "messages"


def test_a_status_is_keyed_by_message_and_status() -> None:
    source = Meta(secret=SECRET, verify_token=TOKEN)
    keys = [
        source.authenticate_batch(recipe(b), b, now=0)[0].event_id
        for b in (whatsapp(status("wamid.A", "sent")), whatsapp(status("wamid.A", "read")))
    ]
    assert keys == ["wamid.A:sent", "wamid.A:read"]


def test_an_entry_without_one_id_gets_a_key_derived_from_its_json() -> None:
    source = Meta(secret=SECRET, verify_token=TOKEN)
    two = whatsapp(message("wamid.A"), message("wamid.B"))
    [identity] = source.authenticate_batch(recipe(two), two, now=0)
    assert identity.event_id.startswith("whatsapp_business_account:102290129340398:")
    spaced = json.dumps(json.loads(two), indent=2).encode()  # a retry formatted anew
    [again] = source.authenticate_batch(recipe(spaced), spaced, now=0)
    assert again.event_id == identity.event_id


def test_messenger_entries_are_keyed_by_mid_and_their_millisecond_time() -> None:
    item = {"sender": {"id": "1"}, "recipient": {"id": "2"}, "timestamp": 1700000000000,
            "message": {"mid": "m_abc", "text": "hi"}}  # fmt: skip
    body = json.dumps(
        {"object": "page", "entry": [{"id": "9", "time": 1700000000000, "messaging": [item]}]}
    ).encode()
    [identity] = Meta(secret=SECRET, verify_token=TOKEN).authenticate_batch(
        recipe(body), body, now=0
    )
    assert (identity.event_id, identity.event_type) == ("m_abc", "messaging")
    assert identity.occurred_at is not None and identity.occurred_at.year == 2023


@pytest.mark.parametrize(
    "headers",
    [
        recipe(whatsapp(message("wamid.A")), secret="guessed"),
        {"x-hub-signature-256": "sha1=" + "0" * 40},
        {"x-hub-signature": "sha1=" + "0" * 40},  # Meta's legacy SHA-1 header is not taken
    ],
)
def test_forgeries_are_refused(headers: dict[str, str]) -> None:
    body = whatsapp(message("wamid.A"))
    with pytest.raises((BadSignature, MissingHeader)):
        Meta(secret=SECRET, verify_token=TOKEN).verify(headers, body, now=0)


def test_the_verification_request_as_meta_documents_it() -> None:
    source = Meta(secret=SECRET, verify_token=["old-token", TOKEN])
    query = {
        "hub.mode": ["subscribe"],
        "hub.verify_token": [TOKEN],
        "hub.challenge": ["1158201444"],
    }
    answer = source.answer_get(query, {})
    assert isinstance(answer, Handshake)
    assert (answer.content, answer.content_type) == (b"1158201444", "text/plain; charset=utf-8")
    with pytest.raises(BadSignature):
        source.answer_get({**query, "hub.verify_token": ["guess"]}, {})
    with pytest.raises(PayloadError):
        source.answer_get({**query, "hub.challenge": ["<b>1</b>"]}, {})


def test_a_body_without_entries_is_a_payload_error() -> None:
    body = b'{"object": "page"}'
    with pytest.raises(PayloadError):
        Meta(secret=SECRET, verify_token=TOKEN).authenticate_batch(recipe(body), body, now=0)


def test_a_retry_is_a_duplicate_and_a_forgery_401(tmp_path: Path) -> None:
    inbox = Inbox(
        f"sqlite:///{tmp_path}/meta.db", sources=[Meta(secret=SECRET, verify_token=TOKEN)]
    )
    body = whatsapp(message("wamid.R"))
    try:
        first = inbox.receive("meta", recipe(body), body)
        again = inbox.receive("meta", recipe(body), body)
        forged = inbox.receive("meta", recipe(body, "guessed"), body)
    finally:
        inbox.close()
    assert (first.body["accepted"], again.body["duplicates"]) == (1, 1)
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


def test_the_kits_signer_follows_the_recipe() -> None:
    source = Meta(secret="kit-secret", verify_token=TOKEN)
    headers, body = kit_sign(source, {"object": "page", "entry": [], "note": "café ☕"})
    assert headers["X-Hub-Signature-256"] == recipe(body, "kit-secret")["x-hub-signature-256"]
