"""Webflow: judged by Webflow's documented recipe (`x-webflow-signature`: the hex HMAC-SHA256 of
`<x-webflow-timestamp>:<body>`, the timestamp in milliseconds, refused past 5 minutes), the
computation of `webflow-api`'s `verifySignature` (npm; not run here: see docs/sources/webflow.md).
Webflow's published example header comes without its secret and body, so it cannot be
recomputed."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError, TimestampOutOfTolerance
from hookinbox.sources import Webflow
from hookinbox.testing import sign as kit_sign

SECRET = "webflow-client-secret-5d2e"
MS = 1_796_000_000_123
NOW = MS / 1000
EVENT = {
    "triggerType": "form_submission",
    "payload": {
        "name": "Contact ☕",
        "siteId": "65427cf400e02b306eaa049c",
        "data": {"Name": "Zoë", "Email": "zoe@example.com"},
        "submittedAt": "2026-11-30T12:00:00.000Z",
        "id": "6321a7e5f9a0c5f7e3d4b2a1",
    },
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def recipe(body: bytes, timestamp: str, secret: str) -> str:
    content = f"{timestamp}:".encode() + body
    return hmac.new(secret.encode(), content, hashlib.sha256).hexdigest()


def signed(body: bytes = BODY, secret: str = SECRET, ms: int = MS) -> dict[str, str]:
    return {"x-webflow-timestamp": str(ms), "x-webflow-signature": recipe(body, str(ms), secret)}


def test_a_recipe_signature_verifies_and_keys_by_trigger_and_payload() -> None:
    identity = Webflow(secret=SECRET).authenticate(signed(), BODY, now=NOW)
    digest = hashlib.sha256(
        json.dumps(EVENT["payload"], sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    assert identity.event_id == f"form_submission:{digest}"
    assert identity.event_type == "form_submission"
    assert identity.occurred_at == datetime.fromtimestamp(NOW, UTC)


@pytest.mark.parametrize(
    "headers",
    [
        signed(secret="stranger"),
        {**signed(), "x-webflow-timestamp": str(MS + 1)},  # another time than was signed
        {**signed(), "x-webflow-signature": "sha256=" + recipe(BODY, str(MS), SECRET)},
        {**signed(), "x-webflow-signature": hmac.new(SECRET.encode(), BODY, "sha256").hexdigest()},
        {**signed(), "x-webflow-timestamp": str(MS // 1000)},  # seconds, not what was signed
    ],
    ids=["wrong-secret", "other-time", "prefixed", "body-only", "seconds"],
)
def test_forgeries_are_bad_signatures(headers: dict[str, str]) -> None:
    with pytest.raises(BadSignature):
        Webflow(secret=SECRET).verify(headers, BODY, now=NOW)


@pytest.mark.parametrize("skew", [-301, 301])
def test_a_timestamp_past_five_minutes_either_way_is_refused(skew: int) -> None:
    with pytest.raises(TimestampOutOfTolerance):
        Webflow(secret=SECRET).verify(signed(), BODY, now=NOW + skew)
    Webflow(secret=SECRET, tolerance=None).verify(signed(), BODY, now=NOW + skew)


@pytest.mark.parametrize("missing", ["x-webflow-signature", "x-webflow-timestamp"])
def test_an_unsigned_webhook_is_refused(missing: str) -> None:
    """A dashboard webhook carries neither header."""
    headers = {k: v for k, v in signed().items() if k != missing}
    with pytest.raises(MissingHeader):
        Webflow(secret=SECRET).verify(headers, BODY, now=NOW)


@pytest.mark.parametrize("body", [b'{"payload": {}}', b'{"triggerType": ""}', b"[]"])
def test_no_trigger_type_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        Webflow(secret=SECRET).identify({}, body)


def test_a_retry_is_a_duplicate_however_its_payload_is_spaced(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/webflow.db")
    inbox.add_source(Webflow(secret=["webflow-new-secret", SECRET]))
    ms = int(time.time() * 1000)
    first = inbox.receive("webflow", signed(ms=ms), BODY)
    again = inbox.receive("webflow", signed(ms=ms + 60_000), BODY)
    spaced = json.dumps(EVENT, indent=2).encode()
    respaced = inbox.receive("webflow", signed(spaced, ms=ms + 1), spaced)
    forged = inbox.receive("webflow", signed(secret="guessed", ms=ms), BODY)
    late = inbox.receive("webflow", signed(ms=ms - 600_000), BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert respaced.body["status"] == "duplicate"  # the same content, not a key conflict
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")
    assert (late.status_code, late.body["error"]) == (401, "invalid_signature")


def test_the_kits_signer_follows_webflows_recipe() -> None:
    headers, body = kit_sign(
        Webflow(secret="webflow-kit"), {"triggerType": "site_publish", "payload": {}}, at=1_700
    )
    assert headers["x-webflow-timestamp"] == "1700000"
    assert hmac.compare_digest(
        headers["x-webflow-signature"], recipe(body, "1700000", "webflow-kit")
    )
