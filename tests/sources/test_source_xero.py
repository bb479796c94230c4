"""Xero: judged by Xero's documented recipe (`x-xero-signature`: the base64 HMAC-SHA256 of the
raw body, keyed with the webhooks key as written), and by its intent-to-receive check: 200 for a
correctly signed body without events, 401 for an incorrectly signed one, no body in either
success. Xero's SDKs (xero-python, xero-node) ship no verifier, so the recipe is written here."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.support.asgi import ASGIClient

from hookinbox import Inbox
from hookinbox._errors import BadSignature, Handshake, MissingHeader, PayloadError
from hookinbox.sources import Xero
from hookinbox.testing import sign as kit_sign

KEY = "OSd0eLlVIY9ZhViEqlDUh4+6n6M+Lo+eDaEJheJ6OCCgWwIz2D3JIAU6jPMipHRbgKTLz2uJ+xiACXGDBLrgdA=="
TENANT = "c2cc9b6e-9458-4c7d-93cc-f02b81b0594f"
INVOICE = "717f2bfc-c6d4-41fd-b238-3f2f0c0cf777"
CONTACT = "9a5b1c3e-0b5f-4f4e-8f11-2d7a3c1d2e55"
ITR = json.dumps(
    {"events": [], "lastEventSequence": 0, "firstEventSequence": 0, "entropy": "S0m3r4Nd0mt3xt"}
).encode()


def change(resource: str, category: str, at: str = "2026-11-30T01:15:39.902") -> dict[str, str]:
    return {
        "resourceUrl": f"https://api.xero.com/api.xro/2.0/{category.title()}s/{resource}",
        "resourceId": resource,
        "eventDateUtc": at,
        "eventType": "UPDATE",
        "eventCategory": category,
        "tenantId": TENANT,
        "tenantType": "ORGANISATION",
    }


def batch(*events: dict[str, str], entropy: str = "VQYBKBRSEQYKSKRJ") -> bytes:
    body = {"events": list(events), "firstEventSequence": 3, "lastEventSequence": 4}
    return json.dumps({**body, "entropy": entropy}).encode()


def recipe(body: bytes, key: str = KEY) -> dict[str, str]:
    digest = hmac.new(key.encode(), body, hashlib.sha256).digest()
    return {"x-xero-signature": base64.b64encode(digest).decode()}


def test_a_batch_is_one_event_per_change_keyed_by_what_names_it() -> None:
    body = batch(change(INVOICE, "INVOICE"), change(CONTACT, "CONTACT"))
    source = Xero(secret=KEY)
    first, second = source.authenticate_batch(recipe(body), body, now=0)
    assert first.event_id == f"{TENANT}:INVOICE:UPDATE:{INVOICE}:2026-11-30T01:15:39.902"
    assert (first.event_type, second.event_type) == ("INVOICE.UPDATE", "CONTACT.UPDATE")
    assert first.occurred_at == datetime(2026, 11, 30, 1, 15, 39, 902000, tzinfo=UTC)
    assert json.loads(first.body or b"") == change(INVOICE, "INVOICE")


def test_intent_to_receive_correctly_signed_is_a_bodiless_200_and_stores_nothing() -> None:
    with pytest.raises(Handshake) as raised:
        Xero(secret=KEY).authenticate_batch(recipe(ITR), ITR, now=0)
    assert (raised.value.status, raised.value.content) == (200, b"")


@pytest.mark.parametrize(
    "headers",
    [
        recipe(ITR, "another-webhooks-key"),
        {"x-xero-signature": base64.b64encode(hashlib.sha256(ITR).digest()).decode()},
        {"x-xero-signature": hmac.new(KEY.encode(), ITR, hashlib.sha256).hexdigest()},
        {"x-xero-signature": "not base64!"},
    ],
    ids=["wrong-key", "plain-sha256", "hex-digest", "not-base64"],
)
def test_intent_to_receive_incorrectly_signed_is_refused(headers: dict[str, str]) -> None:
    with pytest.raises(BadSignature):
        Xero(secret=KEY).verify(headers, ITR, now=0)


def test_the_key_is_the_utf8_string_not_its_base64_decoding() -> None:
    decoded = base64.b64decode(KEY)
    digest = base64.b64encode(hmac.new(decoded, ITR, hashlib.sha256).digest()).decode()
    with pytest.raises(BadSignature):
        Xero(secret=KEY).verify({"x-xero-signature": digest}, ITR, now=0)
    with pytest.raises(MissingHeader):
        Xero(secret=KEY).verify({}, ITR, now=0)


@pytest.mark.parametrize(
    "body",
    [b"[]", b'{"entropy": "x"}', b'{"events": {}}', b"not json"],
    ids=["array", "no-events", "events-object", "not-json"],
)
def test_a_body_that_is_no_batch_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        Xero(secret=KEY).authenticate_batch(recipe(body), body, now=0)


def test_an_event_without_its_resource_is_kept_invalid_beside_the_others() -> None:
    broken = {k: v for k, v in change(CONTACT, "CONTACT").items() if k != "resourceId"}
    body = batch(change(INVOICE, "INVOICE"), broken)
    good, bad = Xero(secret=KEY).authenticate_batch(recipe(body), body, now=0)
    assert good.invalid is None and bad.invalid == "no resourceId in the delivery"


def test_end_to_end_itr_then_events_rebatched_on_retry(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/xero.db")
    inbox.add_source(Xero(secret=["xero-next-key", KEY]))
    client = ASGIClient(inbox.asgi())
    good = client.post("/webhooks/xero", headers=recipe(ITR), content=ITR)
    bad = client.post("/webhooks/xero", headers=recipe(ITR, "guessed"), content=ITR)
    assert (good.status_code, good.content) == (200, b"")
    assert bad.status_code == 401
    body = batch(change(INVOICE, "INVOICE"), change(CONTACT, "CONTACT"))
    first = client.post("/webhooks/xero", headers=recipe(body), content=body)
    assert (first.status_code, first.content) == (200, b"")
    # The retry carries one of the two, in another batch with a new change.
    newer = change(INVOICE, "INVOICE", "2026-11-30T02:00:00.000")
    retry = batch(change(CONTACT, "CONTACT"), newer, entropy="ANOTHERENTROPYXYZ")
    reply = inbox.receive("xero", recipe(retry), retry)
    inbox.close()
    assert (reply.status_code, reply.content) == (200, b"")
    assert (reply.body["accepted"], reply.body["duplicates"]) == (1, 1)


def test_the_kits_signer_follows_xeros_recipe() -> None:
    headers, body = kit_sign(Xero(secret=KEY), {"events": [], "entropy": "café"})
    assert hmac.compare_digest(headers["x-xero-signature"], recipe(body)["x-xero-signature"])
    assert headers["x-xero-signature"] != recipe(body, "another")["x-xero-signature"]
