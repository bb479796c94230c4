"""Typeform: the documented recipe (HMAC-SHA256 of the body, base64, behind `sha256=`);
Typeform publishes no SDK that verifies, nor a test vector."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest

from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import Typeform
from hookinbox.testing import sign as kit_sign

SECRET = "typeform-secret-9a1b"
EVENT = {
    "event_id": "01HZX8N5KJ6W4R2M9T3Q7V1B0C",
    "event_type": "form_response",
    "form_response": {
        "form_id": "lT4Z3j",
        "token": "a3a12ec67a1365927098a606107fac15",
        "submitted_at": "2026-11-30T09:00:00Z",
        "answers": [{"type": "text", "text": "Zoë"}],
    },
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def signed(body: bytes = BODY, secret: str = SECRET) -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).digest()
    return {"typeform-signature": "sha256=" + base64.b64encode(digest).decode()}


def test_a_recipe_signature_verifies_and_keys_by_event_id() -> None:
    identity = Typeform(secret=SECRET).authenticate(signed(), BODY, now=0)
    assert (identity.event_id, identity.event_type) == (EVENT["event_id"], "form_response")
    assert identity.occurred_at == datetime(2026, 11, 30, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    "headers",
    [
        signed(secret="attacker"),
        {"typeform-signature": "sha256=" + hmac.new(SECRET.encode(), BODY, "sha256").hexdigest()},
        {"typeform-signature": signed()["typeform-signature"].removeprefix("sha256=")},
        {"typeform-signature": "sha256=***"},
    ],
    ids=["wrong-secret", "hex-not-base64", "no-prefix", "not-base64"],
)
def test_forgeries_are_bad_signatures(headers: dict[str, str]) -> None:
    with pytest.raises(BadSignature):
        Typeform(secret=SECRET).verify(headers, BODY, now=0)


def test_a_changed_body_and_a_missing_header_are_refused() -> None:
    with pytest.raises(BadSignature):
        Typeform(secret=SECRET).verify(signed(), BODY.replace(b"Zo", b"Jo"), now=0)
    with pytest.raises(MissingHeader):
        Typeform(secret=SECRET).verify({}, BODY, now=0)


@pytest.mark.parametrize("body", [b"[]", b'{"event_type": "form_response"}', b"not json"])
def test_an_unusable_body_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        Typeform(secret=SECRET).identify({}, body)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_follows_typeforms_recipe() -> None:
    headers, body = kit_sign(Typeform(secret="tf"), KIT_EVENT)
    digest = base64.b64encode(hmac.new(b"tf", body, hashlib.sha256).digest()).decode()
    assert headers["Typeform-Signature"] == f"sha256={digest}"
