"""Bitbucket Cloud: judged by Bitbucket's documented recipe (`X-Hub-Signature: sha256=` and the
hex HMAC-SHA256 of the raw body, keyed with the webhook's secret). Atlassian publishes no
library that verifies Bitbucket Cloud's webhooks, nor a secret with a signed example (the
header shown in its documentation is a placeholder)."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import Bitbucket
from hookinbox.testing import sign as kit_sign

SECRET = "bitbucket-webhook-secret-2f8a"
EVENT = {
    "actor": {"type": "user", "display_name": "Zoë Ångström"},
    "repository": {"type": "repository", "full_name": "team/café"},
    "push": {"changes": [{"new": {"type": "branch", "name": "main"}}]},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()
REQUEST_UUID = "6a1c3e0e-9d6f-4c7d-8b51-2c9b5f7e3a10"


def recipe(body: bytes, secret: str) -> str:
    """Bitbucket's recipe: `sha256=` and the hex HMAC-SHA256 of the body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def bitbucket_verifies(body: bytes, header: str, secret: str) -> bool:
    return hmac.compare_digest(header, recipe(body, secret))


def signed(body: bytes = BODY, secret: str = SECRET, attempt: int = 1) -> dict[str, str]:
    return {
        "x-hub-signature": recipe(body, secret),
        "x-request-uuid": REQUEST_UUID,
        "x-event-key": "repo:push",
        "x-hook-uuid": "{0c2b8f3e-3a5d-4b1f-9c2e-7d6a5b4c3d2e}",
        "x-attempt-number": str(attempt),
    }


def test_a_recipe_signature_verifies_and_keys_by_the_request_uuid() -> None:
    identity = Bitbucket(secret=SECRET).authenticate(signed(), BODY, now=0)
    assert (identity.event_id, identity.event_type) == (REQUEST_UUID, "repo:push")
    assert identity.occurred_at is None
    assert identity.payload == EVENT


@pytest.mark.parametrize(
    "header",
    [
        recipe(BODY, "stranger"),
        recipe(BODY, SECRET).replace("sha256=", "sha1="),
        recipe(BODY, SECRET).removeprefix("sha256="),
        "sha256=" + hmac.new(SECRET.encode(), BODY, hashlib.sha1).hexdigest(),
        "sha256=zz",
    ],
    ids=["wrong-secret", "sha1-label", "no-label", "sha1-digest", "not-hex"],
)
def test_what_the_recipe_refuses_the_source_refuses(header: str) -> None:
    assert not bitbucket_verifies(BODY, header, SECRET)
    with pytest.raises(BadSignature):
        Bitbucket(secret=SECRET).verify({"x-hub-signature": header}, BODY, now=0)


def test_a_changed_body_is_refused() -> None:
    with pytest.raises(BadSignature):
        Bitbucket(secret=SECRET).verify(signed(), BODY.replace(b"main", b"mane"), now=0)


def test_an_unsigned_webhook_is_refused() -> None:
    """A webhook configured without a secret sends no `X-Hub-Signature`."""
    unsigned = {k: v for k, v in signed().items() if k != "x-hub-signature"}
    with pytest.raises(MissingHeader):
        Bitbucket(secret=SECRET).verify(unsigned, BODY, now=0)


@pytest.mark.parametrize("headers", [{}, {"x-request-uuid": ""}, {"x-request-uuid": "a\nb"}])
def test_no_usable_request_uuid_is_a_payload_error(headers: dict[str, str]) -> None:
    with pytest.raises(PayloadError):
        Bitbucket(secret=SECRET).identify(headers, BODY)


def test_a_retry_under_the_same_request_uuid_is_a_duplicate(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/bitbucket.db")
    inbox.add_source(Bitbucket(secret=["bitbucket-new-secret", SECRET]))
    first = inbox.receive("bitbucket", signed(), BODY)
    again = inbox.receive("bitbucket", signed(attempt=2), BODY)
    forged = inbox.receive("bitbucket", signed(secret="guessed"), BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


def test_the_kits_signer_follows_bitbuckets_recipe() -> None:
    source = Bitbucket(secret="bitbucket-kit")
    headers, body = kit_sign(source, {"push": {"note": "café"}}, event_type="pullrequest:created")
    assert bitbucket_verifies(body, headers["X-Hub-Signature"], "bitbucket-kit")
    assert not bitbucket_verifies(body, headers["X-Hub-Signature"], "another")
    assert headers["X-Request-UUID"] and headers["X-Event-Key"] == "pullrequest:created"
