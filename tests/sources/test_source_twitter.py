"""X (Twitter): the CRC judged by X's published Python example (`handle_crc`, below as X
prints it), deliveries by the same recipe over the body (`x-twitter-webhooks-signature`)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, Handshake, PayloadError
from hookinbox.sources import Twitter
from hookinbox.testing import sign as kit_sign

SECRET = "x-consumer-secret-Qm9v"


def handle_crc(crc_token: str, consumer_secret: str) -> dict[str, str]:
    """X's example (docs.x.com, webhooks introduction), as published."""
    sha256_hash = hmac.new(consumer_secret.encode(), crc_token.encode(), hashlib.sha256).digest()
    return {"response_token": "sha256=" + base64.b64encode(sha256_hash).decode()}


def recipe(body: bytes, secret: str = SECRET) -> dict[str, str]:
    digest = base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest())
    return {"x-twitter-webhooks-signature": "sha256=" + digest.decode()}


@pytest.mark.parametrize("token", ["NDY3MzQ1NjcxMjM0", "a-b_c.d~e+f/g=", "1" * 512])
def test_the_crc_answer_is_xs_example(token: str) -> None:
    answer = Twitter(secret=[SECRET, "the-old-secret"]).answer_get({"crc_token": [token]}, {})
    assert isinstance(answer, Handshake)
    assert answer.answer == handle_crc(token, SECRET)


def test_the_crc_never_signs_a_body_the_source_would_take() -> None:
    body = json.dumps({"for_user_id": "1", "favorite_events": [{"id": "forged"}]})
    source = Twitter(secret=SECRET)
    with pytest.raises(PayloadError):
        source.answer_get({"crc_token": [body]}, {})
    with pytest.raises(PayloadError):
        source.answer_get({"crc_token": ["x" * 513]}, {})


def test_a_recipe_signature_verifies_and_the_one_event_is_the_key() -> None:
    event = {"id": "fav1", "timestamp_ms": "1700000000000"}
    body = json.dumps({"for_user_id": "2244994945", "favorite_events": [event]}).encode()
    identity = Twitter(secret=SECRET).authenticate(recipe(body), body, now=0)
    assert (identity.event_id, identity.event_type) == ("favorite_events:fav1", "favorite_events")
    assert identity.occurred_at is not None and identity.occurred_at.year == 2023


def test_a_follow_has_no_id_and_gets_a_derived_key() -> None:
    follow = {"type": "follow", "created_timestamp": "1700000000000", "target": {}, "source": {}}
    body = json.dumps({"for_user_id": "22", "follow_events": [follow]}).encode()
    identity = Twitter(secret=SECRET).authenticate(recipe(body), body, now=0)
    assert identity.event_id.startswith("22:")


def test_forgeries_are_refused() -> None:
    body = b'{"for_user_id": "1", "favorite_events": [{"id": "f"}]}'
    for headers in (recipe(body, "guess"), {"x-twitter-webhooks-signature": "sha256=%%%"}):
        with pytest.raises(BadSignature):
            Twitter(secret=SECRET).verify(headers, body, now=0)


def test_a_retry_is_a_duplicate(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/x.db", sources=[Twitter(secret=SECRET)])
    body = b'{"for_user_id": "1", "favorite_events": [{"id": "f"}]}'
    try:
        answers = [inbox.receive("twitter", recipe(body), body) for _ in range(2)]
    finally:
        inbox.close()
    assert [a.body["status"] for a in answers] == ["accepted", "duplicate"]


def test_the_kits_signer_follows_the_recipe() -> None:
    headers, body = kit_sign(Twitter(secret="kit"), {"for_user_id": "1", "note": "café"})
    assert (
        headers["x-twitter-webhooks-signature"]
        == recipe(body, "kit")["x-twitter-webhooks-signature"]
    )
