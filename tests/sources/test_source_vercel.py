"""Vercel: judged by Vercel's documented recipe (`x-vercel-signature`: the hex HMAC-SHA1 of the
raw body, keyed with the webhook's secret, as the example in Vercel's webhook documentation
computes it). Vercel publishes no library that verifies, nor a secret with a signed example."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import Vercel
from hookinbox.testing import sign as kit_sign

SECRET = "vercel-webhook-secret-91c0"
EVENT = {
    "id": "uwh_p1x9Sg0Sw8nHTb2v0ZkF",
    "type": "deployment.succeeded",
    "createdAt": 1_796_000_000_123,
    "region": "iad1",
    "payload": {"deployment": {"id": "dpl_2x", "name": "café ☕"}, "project": {"id": "prj_1"}},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def recipe(body: bytes, secret: str) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()


def test_a_recipe_signature_verifies_and_keys_by_the_body_id() -> None:
    identity = Vercel(secret=SECRET).authenticate(
        {"x-vercel-signature": recipe(BODY, SECRET)}, BODY, now=0
    )
    assert (identity.event_id, identity.event_type) == (EVENT["id"], "deployment.succeeded")
    assert identity.occurred_at == datetime.fromtimestamp(1_796_000_000.123, UTC)


@pytest.mark.parametrize(
    "signature",
    [
        recipe(BODY, "stranger"),
        hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest(),
        "sha1=" + recipe(BODY, SECRET),
        "zz",
    ],
    ids=["wrong-secret", "sha256-digest", "prefixed", "not-hex"],
)
def test_forgeries_are_bad_signatures(signature: str) -> None:
    with pytest.raises(BadSignature):
        Vercel(secret=SECRET).verify({"x-vercel-signature": signature}, BODY, now=0)


def test_a_changed_body_is_refused_and_no_header_is_missing() -> None:
    with pytest.raises(BadSignature):
        Vercel(secret=SECRET).verify(
            {"x-vercel-signature": recipe(BODY, SECRET)}, BODY.replace(b"iad1", b"sfo1"), now=0
        )
    with pytest.raises(MissingHeader):
        Vercel(secret=SECRET).verify({}, BODY, now=0)


@pytest.mark.parametrize("created", ["2026-11-30T12:00:00Z", None, "soon", True])
def test_an_iso_or_unreadable_created_at_is_read_or_dropped(created: object) -> None:
    identity = Vercel(secret=SECRET).identify(
        {}, json.dumps({**EVENT, "createdAt": created}).encode()
    )
    expected = datetime(2026, 11, 30, 12, tzinfo=UTC) if created == "2026-11-30T12:00:00Z" else None
    assert identity.occurred_at == expected


@pytest.mark.parametrize("body", [b'{"type": "deployment.created"}', b'{"id": ""}', b"[]"])
def test_no_usable_id_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        Vercel(secret=SECRET).identify({}, body)


def test_a_redelivery_is_a_duplicate_and_a_forgery_401(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/vercel.db")
    inbox.add_source(Vercel(secret=["vercel-new-secret", SECRET]))
    first = inbox.receive("vercel", {"x-vercel-signature": recipe(BODY, SECRET)}, BODY)
    again = inbox.receive("vercel", {"x-vercel-signature": recipe(BODY, SECRET)}, BODY)
    forged = inbox.receive("vercel", {"x-vercel-signature": recipe(BODY, "guessed")}, BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


def test_the_kits_signer_follows_vercels_recipe() -> None:
    headers, body = kit_sign(Vercel(secret="vercel-kit"), {"id": "uwh_1", "note": "café"})
    assert hmac.compare_digest(headers["x-vercel-signature"], recipe(body, "vercel-kit"))
    assert headers["x-vercel-signature"] != recipe(body, "another")
