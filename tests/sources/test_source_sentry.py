"""Sentry: judged by Sentry's documented recipe (`Sentry-Hook-Signature`: the hex
HMAC-SHA256 of the body with the integration's client secret, as Sentry's integration
platform example computes it). Sentry publishes no library that verifies, nor a secret with
a signed example."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import Sentry
from hookinbox.testing import sign as kit_sign

SECRET = "sentry-client-secret-4b9e0a"
EVENT = {
    "action": "created",
    "installation": {"uuid": "7a485448-a9e2-4c85-8a3c-4f44175783c9"},
    "data": {"issue": {"id": "1170820242", "title": "ZeroDivisionError: ☕ / 0"}},
    "actor": {"type": "application", "id": "sentry", "name": "Sentry"},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()
REQUEST_ID = "e4874d28-abd7-4d2c-b5a8-6f1a0a4d6c9b"


def recipe(body: bytes, secret: str) -> str:
    return hmac.new(key=secret.encode("utf-8"), msg=body, digestmod=hashlib.sha256).hexdigest()


def signed(body: bytes = BODY, secret: str = SECRET) -> dict[str, str]:
    return {
        "request-id": REQUEST_ID,
        "sentry-hook-resource": "issue",
        "sentry-hook-timestamp": "1796000000",
        "sentry-hook-signature": recipe(body, secret),
    }


def test_a_recipe_signature_verifies_and_names_resource_and_action() -> None:
    identity = Sentry(secret=SECRET).authenticate(signed(), BODY, now=0)
    assert (identity.event_id, identity.event_type) == (REQUEST_ID, "issue.created")
    assert identity.occurred_at == datetime.fromtimestamp(1_796_000_000, UTC)


@pytest.mark.parametrize(
    "signature",
    [
        recipe(BODY, "stranger"),
        "sha256=" + recipe(BODY, SECRET),
        hmac.new(SECRET.encode(), BODY, hashlib.sha1).hexdigest(),
        "zz",
    ],
    ids=["wrong-secret", "prefixed", "sha1-digest", "not-hex"],
)
def test_forgeries_are_bad_signatures(signature: str) -> None:
    with pytest.raises(BadSignature):
        Sentry(secret=SECRET).verify({"sentry-hook-signature": signature}, BODY, now=0)


def test_a_reserialised_body_is_refused() -> None:
    """Sentry's own Python example hashes `json.dumps(request.body)`; hookinbox hashes the bytes
    received, so a body formatted otherwise than it was signed does not verify."""
    reformatted = json.dumps(EVENT, indent=2).encode()
    with pytest.raises(BadSignature):
        Sentry(secret=SECRET).verify(signed(), reformatted, now=0)


def test_no_signature_is_a_missing_header_and_no_request_id_a_payload_error() -> None:
    with pytest.raises(MissingHeader):
        Sentry(secret=SECRET).verify({}, BODY, now=0)
    with pytest.raises(PayloadError):
        Sentry(secret=SECRET).identify({"sentry-hook-resource": "issue"}, BODY)


@pytest.mark.parametrize("timestamp", ["", "soon", "9" * 40, "-1"])
def test_an_unreadable_timestamp_is_no_time_not_an_error(timestamp: str) -> None:
    headers = {**signed(), "sentry-hook-timestamp": timestamp}
    assert Sentry(secret=SECRET).authenticate(headers, BODY, now=0).occurred_at is None


def test_a_repeated_request_id_is_a_duplicate(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/sentry.db")
    inbox.add_source(Sentry(secret=SECRET))
    first = inbox.receive("sentry", signed(), BODY)
    again = inbox.receive("sentry", signed(), BODY)
    forged = inbox.receive("sentry", signed(secret="guessed"), BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


def test_the_kits_signer_follows_sentrys_recipe() -> None:
    headers, body = kit_sign(Sentry(secret="sentry-kit"), {"action": "resolved", "n": "café"})
    assert headers["Sentry-Hook-Signature"] == recipe(body, "sentry-kit")
    assert headers["Request-ID"] and headers["Sentry-Hook-Resource"] == "issue"
