"""Jira: judged by Atlassian's documented recipe for admin webhooks with a secret (the WebSub
`method=signature` form: `X-Hub-Signature: sha256=` + the hex HMAC-SHA256 of the raw body).
Atlassian publishes no library that verifies (`jira.js`'s helper is a community package), nor
a secret with a signed example."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import Jira
from hookinbox.testing import sign as kit_sign

SECRET = "jira-admin-webhook-secret-7c1d"
EVENT = {
    "timestamp": 1_796_000_000_123,
    "webhookEvent": "jira:issue_updated",
    "issue_event_type_name": "issue_generic",
    "user": {"accountId": "5b10a2844c20165700ede21g", "displayName": "Zoë"},
    "issue": {"id": "10002", "key": "PRJ-7", "fields": {"summary": "Crème brûlée ☕"}},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()
IDENTIFIER = "b5e2fe1b-6c0a-4e7e-8d0e-0d8e6d3c0f01"


def websub(body: bytes, secret: str) -> str:
    """Atlassian's recipe: `sha256=` and the hex HMAC-SHA256 of the body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def jira_verifies(body: bytes, header: str, secret: str) -> bool:
    return hmac.compare_digest(header, websub(body, secret))


def signed(body: bytes = BODY, secret: str = SECRET) -> dict[str, str]:
    return {"x-hub-signature": websub(body, secret), "x-atlassian-webhook-identifier": IDENTIFIER}


def test_a_recipe_signature_verifies_and_keys_by_the_webhook_identifier() -> None:
    identity = Jira(secret=SECRET).authenticate(signed(), BODY, now=0)
    assert (identity.event_id, identity.event_type) == (IDENTIFIER, "jira:issue_updated")
    assert identity.occurred_at == datetime.fromtimestamp(1_796_000_000.123, UTC)


@pytest.mark.parametrize(
    "header",
    [
        websub(BODY, "stranger"),
        websub(BODY, SECRET).replace("sha256=", "sha1="),
        websub(BODY, SECRET).removeprefix("sha256="),
        "sha256=" + hmac.new(SECRET.encode(), BODY, hashlib.sha1).hexdigest(),
        "sha256=zz",
    ],
    ids=["wrong-secret", "sha1-label", "no-label", "sha1-digest", "not-hex"],
)
def test_what_the_recipe_refuses_the_source_refuses(header: str) -> None:
    assert not jira_verifies(BODY, header, SECRET)
    with pytest.raises(BadSignature):
        Jira(secret=SECRET).verify({"x-hub-signature": header}, BODY, now=0)


def test_a_changed_body_is_refused() -> None:
    with pytest.raises(BadSignature):
        Jira(secret=SECRET).verify(signed(), BODY.replace(b"PRJ-7", b"PRJ-8"), now=0)


def test_githubs_sha256_header_is_not_read() -> None:
    with pytest.raises(MissingHeader):
        Jira(secret=SECRET).verify({"x-hub-signature-256": websub(BODY, SECRET)}, BODY, now=0)


@pytest.mark.parametrize("headers", [{}, {"x-atlassian-webhook-identifier": ""}])
def test_no_identifier_is_a_payload_error(headers: dict[str, str]) -> None:
    with pytest.raises(PayloadError):
        Jira(secret=SECRET).identify(headers, BODY)


def test_a_retry_under_the_same_identifier_is_a_duplicate(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/jira.db")
    inbox.add_source(Jira(secret=["jira-new-secret", SECRET]))
    first = inbox.receive("jira", signed(), BODY)
    again = inbox.receive("jira", {**signed(), "X-Atlassian-Webhook-Retry": "1"}, BODY)
    forged = inbox.receive("jira", signed(secret="guessed"), BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


def test_the_kits_signer_follows_atlassians_recipe() -> None:
    headers, body = kit_sign(Jira(secret="jira-kit"), {"webhookEvent": "x", "note": "café"})
    assert jira_verifies(body, headers["X-Hub-Signature"], "jira-kit")
    assert not jira_verifies(body, headers["X-Hub-Signature"], "another")
    assert headers["X-Atlassian-Webhook-Identifier"]
