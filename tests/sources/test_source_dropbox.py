"""Dropbox: judged by Dropbox's documented recipe (`X-Dropbox-Signature`, the hex HMAC-SHA256
of the body with the app secret) and its Flask example of the verification answer (the
`challenge` echoed, `text/plain`, `X-Content-Type-Options: nosniff`)."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, Handshake, PayloadError
from hookinbox.sources import Dropbox
from hookinbox.testing import sign as kit_sign

SECRET = "dropbox-app-secret-x1"
BODY = json.dumps({"list_folder": {"accounts": ["dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc"]},
                   "delta": {"users": [12345678]}}).encode()  # fmt: skip


def recipe(body: bytes = BODY, secret: str = SECRET) -> dict[str, str]:
    return {"x-dropbox-signature": hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()}


def test_a_recipe_signature_verifies_and_each_delivery_is_its_own_event() -> None:
    source = Dropbox(secret=SECRET)
    first = source.authenticate(recipe(), BODY, now=1_700_000_000.0)
    retry = source.authenticate(recipe(), BODY, now=1_700_000_030.0)
    assert first.event_type == "list_folder"
    assert first.event_id.startswith(hashlib.sha256(BODY).hexdigest())
    assert first.event_id != retry.event_id  # a later notification is never lost as a duplicate


def test_forgeries_are_refused() -> None:
    with pytest.raises(BadSignature):
        Dropbox(secret=SECRET).verify(recipe(secret="guess"), BODY, now=0)
    with pytest.raises(BadSignature):
        Dropbox(secret=SECRET).verify(recipe(), BODY.replace(b"12345678", b"1"), now=0)


def test_the_verification_answer_as_dropboxs_example_gives_it() -> None:
    answer = Dropbox(secret=SECRET).answer_get({"challenge": ["abc123"]}, {})
    assert isinstance(answer, Handshake)
    assert (answer.content, answer.content_type) == (b"abc123", "text/plain; charset=utf-8")
    assert answer.headers == {"x-content-type-options": "nosniff"}
    for bad in ({}, {"challenge": [""]}, {"challenge": ["a b"]}, {"challenge": ["x" * 600]}):
        with pytest.raises(PayloadError):
            Dropbox(secret=SECRET).answer_get(bad, {})


def test_two_notifications_for_the_same_accounts_are_both_stored(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/dropbox.db", sources=[Dropbox(secret=SECRET)])
    try:
        answers = [inbox.receive("dropbox", recipe(), BODY) for _ in range(2)]
        forged = inbox.receive("dropbox", recipe(secret="guess"), BODY)
    finally:
        inbox.close()
    assert [a.body["status"] for a in answers] == ["accepted", "accepted"]
    assert forged.status_code == 401


def test_the_kits_signer_follows_the_recipe() -> None:
    headers, body = kit_sign(Dropbox(secret="kit"), {"list_folder": {"accounts": ["dbid:1"]}})
    assert headers["X-Dropbox-Signature"] == recipe(body, "kit")["x-dropbox-signature"]
