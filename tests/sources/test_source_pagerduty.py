"""PagerDuty v3: judged by PagerDuty's documented recipe, the Python verifier PagerDuty
publishes on its "Verifying Signatures" page (transcribed below as `pagerduty_verifies`):
split `X-PagerDuty-Signature` at commas, and accept when any entry equals `v1=` + the hex
HMAC-SHA256 of the body. PagerDuty publishes no Python SDK that verifies (its Go client's
`webhookv3.VerifySignature` is the only library), nor a secret with a signed example."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import PagerDuty
from hookinbox.sources._signatures import MAX_SIGNATURES
from hookinbox.testing import sign as kit_sign

SECRET = "pd-subscription-secret-8f1e"
NEW_SECRET = "pd-rotated-secret-20c4"
EVENT = {
    "event": {
        "id": "5ac64822-4adc-4fda-ade0-410becf0de4f",
        "event_type": "incident.priority_updated",
        "resource_type": "incident",
        "occurred_at": "2020-10-02T18:45:22.169Z",
        "agent": None,
        "data": {"id": "PGR0VU2", "type": "incident", "title": "A little bump — ☕"},
    }
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def pagerduty_verifies(payload: str, signatures: str, key: str, version: str = "v1") -> bool:
    """PagerDuty's published Python example (`PagerDutyVerifier.verify`), as it stands."""
    byte_key = key.encode("ASCII")
    signature = hmac.new(byte_key, payload.encode(), hashlib.sha256).hexdigest()
    signed_version = version + "=" + signature
    return any(hmac.compare_digest(signed_version, item) for item in signatures.split(","))


def entry(secret: str, body: bytes = BODY) -> str:
    return "v1=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_a_recipe_signature_verifies_and_keys_by_the_event_id() -> None:
    header = entry(SECRET)
    assert pagerduty_verifies(BODY.decode(), header, SECRET)
    identity = PagerDuty(secret=SECRET).authenticate({"x-pagerduty-signature": header}, BODY, now=0)
    assert identity.event_id == "5ac64822-4adc-4fda-ade0-410becf0de4f"
    assert identity.event_type == "incident.priority_updated"
    assert identity.occurred_at == datetime(2020, 10, 2, 18, 45, 22, 169000, tzinfo=UTC)


@pytest.mark.parametrize(
    "header",
    [
        f"{entry(SECRET)},{entry(NEW_SECRET)}",
        f"{entry(NEW_SECRET)},{entry(SECRET)}",
        f"v2=00ff,{entry(SECRET)}",
        f"{entry('stranger')},{entry(SECRET)}",
    ],
    ids=["old-then-new", "new-then-old", "another-version-beside", "a-stranger-beside"],
)
def test_during_a_rotation_any_listed_v1_signature_passes(header: str) -> None:
    """PagerDuty lists one signature per secret while one is rotated: either secret verifies,
    as PagerDuty's own verifier agrees (it splits at commas with no spaces: as PagerDuty
    sends them)."""
    assert pagerduty_verifies(BODY.decode(), header, SECRET)
    PagerDuty(secret=SECRET).verify({"x-pagerduty-signature": header}, BODY, now=0)


@pytest.mark.parametrize(
    "header",
    [
        entry("stranger"),
        entry(SECRET).replace("v1=", "v2="),
        entry(SECRET).removeprefix("v1="),
        "v1=" + hmac.new(SECRET.encode(), BODY, hashlib.sha1).hexdigest(),
        "v1=zz",
        f"{entry('a')},{entry('b')}",
    ],
    ids=["wrong-secret", "wrong-version", "no-version", "sha1-digest", "not-hex", "all-wrong"],
)
def test_what_pagerdutys_recipe_refuses_the_source_refuses(header: str) -> None:
    assert not pagerduty_verifies(BODY.decode(), header, SECRET)
    with pytest.raises(BadSignature):
        PagerDuty(secret=SECRET).verify({"x-pagerduty-signature": header}, BODY, now=0)


def test_a_changed_body_is_refused() -> None:
    changed = BODY.replace(b"PGR0VU2", b"PGR0VU3")
    assert not pagerduty_verifies(changed.decode(), entry(SECRET), SECRET)
    with pytest.raises(BadSignature):
        PagerDuty(secret=SECRET).verify({"x-pagerduty-signature": entry(SECRET)}, changed, now=0)


def test_more_than_the_cap_of_signatures_is_refused_before_any_hmac() -> None:
    junk = [f"v1={i:064x}" for i in range(MAX_SIGNATURES)]
    at_cap = ",".join([*junk[:-1], entry(SECRET)])
    PagerDuty(secret=SECRET).verify({"x-pagerduty-signature": at_cap}, BODY, now=0)
    over = ",".join([*junk, entry(SECRET)])
    with pytest.raises(BadSignature, match="more than"):
        PagerDuty(secret=SECRET).verify({"x-pagerduty-signature": over}, BODY, now=0)


def test_no_signature_header_is_a_missing_header() -> None:
    with pytest.raises(MissingHeader):
        PagerDuty(secret=SECRET).verify({}, BODY, now=0)


@pytest.mark.parametrize(
    "body",
    [b"[]", b'{"event": {}}', b'{"event": "x"}', b'{"id": "evt_1"}', b'{"event":{"id":1.5}}'],
)
def test_an_authentic_body_without_an_event_id_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        PagerDuty(secret=SECRET).identify({}, body)


def test_a_retry_is_a_duplicate_and_a_forgery_is_refused(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/pagerduty.db")
    inbox.add_source(PagerDuty(secret=[SECRET, NEW_SECRET]))
    headers = {"X-PagerDuty-Signature": f"{entry(SECRET)},{entry(NEW_SECRET)}"}
    first = inbox.receive("pagerduty", headers, BODY)
    again = inbox.receive("pagerduty", {"X-PagerDuty-Signature": entry(NEW_SECRET)}, BODY)
    forged = inbox.receive("pagerduty", {"X-PagerDuty-Signature": entry("stranger")}, BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------


def test_the_kits_signer_is_verified_by_pagerdutys_recipe() -> None:
    headers, body = kit_sign(PagerDuty(secret="pd-kit"), {"event": {"id": "e1", "note": "café"}})
    assert pagerduty_verifies(body.decode(), headers["X-PagerDuty-Signature"], "pd-kit")
    assert not pagerduty_verifies(body.decode(), headers["X-PagerDuty-Signature"], "another")
