"""Mux: judged by Mux's own SDK (`@mux/mux-node`'s `webhooks.verifySignature`, npm, which checks
`Mux-Signature: t=...,v1=...` over `<t>.<body>` and a 5-minute window), and by the documented
recipe written again here. Mux's Python library (`mux-python`) has no webhook verifier."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.testing.npm_oracles import npm_verifies

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError, TimestampOutOfTolerance
from hookinbox.sources import Mux
from hookinbox.testing import sign as kit_sign

SECRET = "mux-signing-secret-8c2e"
T = 1_796_000_000
EVENT = {
    "type": "video.asset.ready",
    "id": "3a56ac3d-33da-4366-855b-f592d898409d",
    "created_at": "2026-11-30T12:00:00.123456Z",
    "object": {"type": "asset", "id": "0201p02fGKPE7MrbC269XRD7LpcHhrmbu0002"},
    "data": {"status": "ready", "title": "café"},
    "environment": {"name": "Production", "id": "j0863n"},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def recipe(body: bytes, t: int = T, secret: str = SECRET) -> dict[str, str]:
    digest = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return {"mux-signature": f"t={t},v1={digest}"}


def test_a_recipe_signature_verifies_and_keys_by_the_body_id() -> None:
    identity = Mux(secret=SECRET).authenticate(recipe(BODY), BODY, now=T)
    assert (identity.event_id, identity.event_type) == (EVENT["id"], "video.asset.ready")
    assert identity.occurred_at == datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    "headers",
    [
        recipe(BODY, secret="stranger"),
        {"mux-signature": recipe(BODY)["mux-signature"].replace("v1=", "v0=")},
        {"mux-signature": recipe(BODY)["mux-signature"].replace(f"t={T}", f"t={T + 1}")},
        {"mux-signature": "v1=" + recipe(BODY)["mux-signature"].split("v1=")[1]},
    ],
    ids=["wrong-secret", "other-scheme", "other-time", "no-time"],
)
def test_forgeries_are_bad_signatures(headers: dict[str, str]) -> None:
    with pytest.raises(BadSignature):
        Mux(secret=SECRET).verify(headers, BODY, now=T)


def test_the_window_is_five_minutes_both_ways_and_a_header_is_needed() -> None:
    Mux(secret=SECRET).verify(recipe(BODY, T - 300), BODY, now=T)
    for late in (T - 301, T + 301):
        with pytest.raises(TimestampOutOfTolerance):
            Mux(secret=SECRET).verify(recipe(BODY, late), BODY, now=T)
    with pytest.raises(MissingHeader):
        Mux(secret=SECRET).verify({}, BODY, now=T)
    with pytest.raises(PayloadError):
        Mux(secret=SECRET).authenticate(recipe(b'{"type": "x"}'), b'{"type": "x"}', now=T)


def test_a_retry_signed_anew_is_a_duplicate_and_a_forgery_401(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/mux.db", clock=lambda: float(T))
    inbox.add_source(Mux(secret=["mux-next-secret", SECRET]))
    first = inbox.receive("mux", recipe(BODY), BODY)
    again = inbox.receive("mux", recipe(BODY, T + 60), BODY)
    forged = inbox.receive("mux", recipe(BODY, secret="guessed"), BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


def test_muxs_sdk_judges_the_recipe_and_the_kit_as_the_source_does(npm: Path) -> None:
    now = int(time.time())
    headers, body = kit_sign(Mux(secret=SECRET), EVENT, at=now)
    assert npm_verifies(npm, "mux", SECRET, headers, body)["valid"]
    assert not npm_verifies(npm, "mux", "another-secret", headers, body)["valid"]
    assert npm_verifies(npm, "mux", SECRET, recipe(BODY, now), BODY)["valid"]
    stale = recipe(BODY, now - 600)
    assert not npm_verifies(npm, "mux", SECRET, stale, BODY)["valid"]
    with pytest.raises(TimestampOutOfTolerance):
        Mux(secret=SECRET).verify(stale, BODY, now=now)
