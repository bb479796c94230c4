"""GitLab: the secret token form and the signed (Standard Webhooks) form."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import standardwebhooks
import svix

from hookinbox import Inbox
from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    MissingHeader,
    PayloadError,
    TimestampOutOfTolerance,
)
from hookinbox.sources import GitLab, GitLabSigned, StandardWebhooks
from hookinbox.sources._standard_webhooks import EXAMPLE_SECRET
from hookinbox.testing import sign as kit_sign

T = 1_700_000_000
NOW = float(T)
TOKEN = "glwht-token-0123456789"
SIGNING_SECRET = "whsec_" + base64.b64encode(b"gitlab signing key, 32 bytes!!!").decode()
EVENT: dict[str, Any] = {
    "object_kind": "push",
    "event_name": "push",
    "ref": "refs/heads/main",
    "project": {"id": 15, "path_with_namespace": "jsmith/example"},
    "commits": [{"id": "b6568db1bc1dcd7f8b4d5a946b0b91f9dacd7327", "message": "Zoë's fix"}],
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()
IDEMPOTENCY_KEY = "f7cb1f37-4bd9-4b8b-9b4e-2f7a1f8e9c0d"


def token_headers(token: str = TOKEN, **extra: str) -> dict[str, str]:
    return {
        "x-gitlab-token": token,
        "x-gitlab-event": "Push Hook",
        "idempotency-key": IDEMPOTENCY_KEY,
        "x-gitlab-event-uuid": "13792a34-cac6-4fda-95a8-c58e00a3954e",
        "x-gitlab-webhook-uuid": "a2a5d8d3-1f1e-4a6c-9f8f-2b6c8c0a7e11",
        "x-gitlab-instance": "https://gitlab.example.com",
        **extra,
    }


def signed_headers(
    body: bytes = BODY, *, msg_id: str = "msg_1", timestamp: int = T
) -> dict[str, str]:
    when = datetime.fromtimestamp(timestamp, UTC)
    signature = standardwebhooks.Webhook(SIGNING_SECRET).sign(msg_id, when, body.decode())
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
        "x-gitlab-event": "Push Hook",
        "idempotency-key": IDEMPOTENCY_KEY,
    }


# -- the secret token ------------------------------------------------------------------------------


def test_the_configured_token_verifies() -> None:
    identity = GitLab(token=TOKEN).authenticate(token_headers(), BODY, now=NOW)
    assert identity.event_id == IDEMPOTENCY_KEY
    assert identity.event_type == "Push Hook"
    assert identity.occurred_at is None
    assert identity.payload == EVENT


@pytest.mark.parametrize(
    "token",
    [TOKEN + "x", TOKEN[:-1], TOKEN.upper(), " " + TOKEN + "x", "\ud800", "é" * 3],
    ids=["longer", "shorter", "case", "padded", "surrogate", "non-ascii"],
)
def test_any_other_token_is_bad_signature(token: str) -> None:
    with pytest.raises(BadSignature):
        GitLab(token=TOKEN).verify(token_headers(token), BODY, now=NOW)


def test_tokens_rotate_and_the_body_is_not_covered() -> None:
    source = GitLab(token=["new-token", TOKEN])
    source.verify(token_headers(), BODY, now=NOW)
    source.verify(token_headers("new-token"), BODY, now=NOW)
    # A token is a password, not a signature: any body passes with it (documented).
    source.verify(token_headers(), b'{"object_kind": "forged"}', now=NOW)


def test_missing_token_is_missing_header() -> None:
    headers = token_headers()
    del headers["x-gitlab-token"]
    with pytest.raises(MissingHeader):
        GitLab(token=TOKEN).verify(headers, BODY, now=NOW)


def test_the_token_is_never_stored() -> None:
    kept = GitLab(token=TOKEN).headers_to_store(token_headers())
    assert "x-gitlab-token" not in kept
    assert TOKEN not in json.dumps(kept)
    assert kept["idempotency-key"] == IDEMPOTENCY_KEY


def test_without_idempotency_key_the_event_uuid_is_the_key() -> None:
    headers = token_headers()
    del headers["idempotency-key"]
    identity = GitLab(token=TOKEN).identify(headers, BODY)
    assert identity.event_id == "13792a34-cac6-4fda-95a8-c58e00a3954e"


def test_the_webhook_uuid_is_never_the_key() -> None:
    headers = token_headers()
    del headers["idempotency-key"]
    del headers["x-gitlab-event-uuid"]
    with pytest.raises(PayloadError, match="Idempotency-Key or X-Gitlab-Event-UUID"):
        GitLab(token=TOKEN).identify(headers, BODY)


def test_a_retry_keeps_the_key_though_the_webhook_uuid_changes() -> None:
    source = GitLab(token=TOKEN)
    first = source.identify(token_headers(), BODY)
    retry = source.identify(token_headers(**{"x-gitlab-webhook-uuid": "other"}), BODY)
    assert first.event_id == retry.event_id


@pytest.mark.parametrize("body", [b"[]", b"not json", b""])
def test_non_object_body_is_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        GitLab(token=TOKEN).identify(token_headers(), body)


@pytest.mark.parametrize("token", ["", [], ["x", ""]])
def test_invalid_token_is_configuration_error(token: object) -> None:
    with pytest.raises(ConfigurationError):
        GitLab(token=token)  # type: ignore[arg-type]


# -- signed webhooks (Standard Webhooks) ----------------------------------------------------------


def test_signed_webhooks_verify_with_the_standard_webhooks_machinery() -> None:
    source = GitLabSigned(secret=SIGNING_SECRET)
    assert isinstance(source, StandardWebhooks)
    assert source.name == "gitlab"
    identity = source.authenticate(signed_headers(), BODY, now=NOW)
    assert identity.event_id == "msg_1"  # the signed webhook-id, not the unsigned header
    assert identity.event_type == "Push Hook"
    assert identity.occurred_at is None
    assert identity.payload == EVENT


def test_signed_webhooks_refuse_what_standard_webhooks_refuses() -> None:
    source = GitLabSigned(secret=SIGNING_SECRET)
    with pytest.raises(BadSignature):
        source.verify(signed_headers(), BODY.replace(b"main", b"mian"), now=NOW)
    with pytest.raises(BadSignature):
        source.verify({**signed_headers(), "webhook-id": "msg_2"}, BODY, now=NOW)
    with pytest.raises(TimestampOutOfTolerance):
        source.verify(signed_headers(), BODY, now=NOW + 301)
    with pytest.raises(MissingHeader):
        source.verify(token_headers(), BODY, now=NOW)  # a token alone is not a signature


def test_signed_webhooks_store_gitlab_headers_too() -> None:
    kept = GitLabSigned(secret=SIGNING_SECRET).headers_to_store(signed_headers())
    assert {"webhook-id", "webhook-signature", "x-gitlab-event", "idempotency-key"} <= set(kept)


def test_a_32_byte_whsec_signing_token_as_gitlab_shows_it() -> None:
    """`whsec_` and a 32-byte key in base64 (GitLab's format), signed by standardwebhooks."""
    secret = "whsec_" + base64.b64encode(bytes(range(32))).decode()
    when = datetime.fromtimestamp(T, UTC)
    signature = standardwebhooks.Webhook(secret).sign(IDEMPOTENCY_KEY, when, BODY.decode())
    headers = {
        "webhook-id": IDEMPOTENCY_KEY,
        "webhook-timestamp": str(T),
        "webhook-signature": signature,
        "idempotency-key": IDEMPOTENCY_KEY,
    }
    source = GitLabSigned(secret=secret)
    source.verify(headers, BODY, now=NOW)
    assert source.identify(headers, BODY).event_id == IDEMPOTENCY_KEY


def test_switching_to_a_signing_token_under_the_same_name_keeps_the_keys(tmp_path: Path) -> None:
    """GitLab sends the delivery's Idempotency-Key as the signed webhook-id: an event stored
    by the token source is a duplicate when the signed source receives it again."""
    url = f"sqlite:///{tmp_path / 'gitlab.db'}"
    before = Inbox(url)
    try:
        before.add_source(GitLab(token=TOKEN))
        reply = before.receive("gitlab", token_headers(), BODY)
        assert (reply.status_code, reply.body["event_id"]) == (200, IDEMPOTENCY_KEY)
    finally:
        before.close()
    after = Inbox(url)
    try:
        after.add_source(GitLabSigned(secret=SIGNING_SECRET, name="gitlab"))
        signed = signed_headers(msg_id=IDEMPOTENCY_KEY, timestamp=int(time.time()))
        reply = after.receive("gitlab", signed, BODY)
        assert reply.body == {"status": "duplicate", "event_id": IDEMPOTENCY_KEY}
    finally:
        after.close()


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


@pytest.mark.parametrize("library", [standardwebhooks.Webhook, svix.Webhook])
def test_the_kits_signed_gitlab_delivery_is_verified_by_the_libraries(library: Any) -> None:
    source = GitLabSigned(secret=EXAMPLE_SECRET)
    headers, body = kit_sign(source, KIT_EVENT)
    library(EXAMPLE_SECRET).verify(body, headers)  # raises unless it verifies
    forged, _ = kit_sign(source, KIT_EVENT, secret="whsec_" + base64.b64encode(b"x" * 24).decode())
    with pytest.raises(Exception, match=r"(?i)signature"):
        library(EXAMPLE_SECRET).verify(body, forged)
    # GitLab sends the delivery's Idempotency-Key as the signed webhook-id.
    assert headers["Idempotency-Key"] == headers["webhook-id"]


def test_the_kit_sends_gitlabs_token_and_keeps_the_key() -> None:
    source = GitLab(token="glpat-token")
    first, _ = kit_sign(source, KIT_EVENT, event="Merge Request Hook")
    second, _ = kit_sign(source, KIT_EVENT, event="Merge Request Hook")
    assert first["X-Gitlab-Token"] == "glpat-token"
    assert first["Idempotency-Key"] == second["Idempotency-Key"]
    assert first["X-Gitlab-Webhook-UUID"] != second["X-Gitlab-Webhook-UUID"]
