"""DocuSign Connect: judged by DocuSign's documented recipe ("How to validate an HMAC
signature": the base64 HMAC-SHA256 of the whole body, compared with each
`X-DocuSign-Signature-N`), transcribed below as DocuSign's code examples write it
(`compute_hash`, `hash_is_valid`). DocuSign's SDKs (`docusign-esign`) do not verify, and
DocuSign publishes no secret with a signed example."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError
from hookinbox.sources import DocuSign
from hookinbox.sources._signatures import MAX_SIGNATURES
from hookinbox.testing import sign as kit_sign

SECRET = "docusign-connect-key-9Qm2"
NEW_SECRET = "docusign-connect-key-rotated"
EVENT = {
    "event": "recipient-completed",
    "apiVersion": "v2.1",
    "uri": "/restapi/v2.1/accounts/0a1b/envelopes/93be49e8",
    "retryCount": 0,
    "configurationId": 10418904,
    "generatedDateTime": "2023-11-14T22:13:20.1234567Z",
    "data": {
        "accountId": "0a1b",
        "userId": "c2d3",
        "envelopeId": "93be49e8-afa1-4f2f-8c30-1b0e8c2a0c3f",
        "recipientId": "1",
        "name": "Zoë ☕",
    },
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def compute_hash(secret: bytes, payload: bytes) -> bytes:
    """DocuSign's example, as it stands."""
    hash_bytes = hmac.new(secret, msg=payload, digestmod=hashlib.sha256).digest()
    return base64.b64encode(hash_bytes)


def hash_is_valid(secret: bytes, payload: bytes, verify: bytes) -> bool:
    return hmac.compare_digest(verify, compute_hash(secret, payload))


def docusign_verifies(body: bytes, headers: dict[str, str], secret: str) -> bool:
    """Any `X-DocuSign-Signature-N` valid, as DocuSign's page says to compare each."""
    return any(
        hash_is_valid(secret.encode(), body, value.encode())
        for name, value in headers.items()
        if name.lower().startswith("x-docusign-signature-")
    )


def signed(*secrets: str, body: bytes = BODY) -> dict[str, str]:
    return {
        f"x-docusign-signature-{n}": compute_hash(s.encode(), body).decode()
        for n, s in enumerate(secrets, start=1)
    }


def test_a_recipe_signature_verifies_and_keys_by_event_envelope_recipient_and_time() -> None:
    headers = signed(SECRET)
    assert docusign_verifies(BODY, headers, SECRET)
    identity = DocuSign(secret=SECRET).authenticate(headers, BODY, now=0)
    assert identity.event_id == (
        "recipient-completed:93be49e8-afa1-4f2f-8c30-1b0e8c2a0c3f:1:2023-11-14T22:13:20.1234567Z"
    )
    assert identity.event_type == "recipient-completed"
    assert identity.occurred_at == datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    "headers",
    [
        signed(SECRET, NEW_SECRET),
        signed(NEW_SECRET, SECRET),
        signed("a", "b", "c", SECRET),
        {"x-docusign-signature-2": signed(SECRET)["x-docusign-signature-1"]},
    ],
    ids=["first-of-two", "second-of-two", "fourth-of-four", "only-the-second"],
)
def test_any_numbered_header_may_carry_the_matching_signature(headers: dict[str, str]) -> None:
    assert docusign_verifies(BODY, headers, SECRET)
    DocuSign(secret=SECRET).verify(headers, BODY, now=0)


@pytest.mark.parametrize(
    "headers",
    [
        signed("stranger"),
        signed("a", "b"),
        {"x-docusign-signature-1": "not base64!"},
        {"x-docusign-signature-1": base64.b64encode(hashlib.sha256(BODY).digest()).decode()},
        {"x-docusign-signature-1": compute_hash(SECRET.encode(), BODY).hex()},
    ],
    ids=["wrong-secret", "all-wrong", "not-base64", "plain-digest", "hex"],
)
def test_what_docusigns_recipe_refuses_the_source_refuses(headers: dict[str, str]) -> None:
    assert not docusign_verifies(BODY, headers, SECRET)
    with pytest.raises(BadSignature):
        DocuSign(secret=SECRET).verify(headers, BODY, now=0)


def test_a_changed_body_is_refused() -> None:
    changed = BODY.replace(b"recipient-completed", b"envelope-voided")
    assert not docusign_verifies(changed, signed(SECRET), SECRET)
    with pytest.raises(BadSignature):
        DocuSign(secret=SECRET).verify(signed(SECRET), changed, now=0)


def test_only_the_first_sixteen_numbered_headers_are_read() -> None:
    """The cap: headers 1 to MAX_SIGNATURES are candidates; one past them is not read, and
    more than MAX_SIGNATURES candidates in all are refused before any HMAC."""
    strangers = [f"k{n}" for n in range(MAX_SIGNATURES - 1)]
    DocuSign(secret=SECRET).verify(signed(*strangers, SECRET), BODY, now=0)
    past = signed(*strangers, "k-last", SECRET)
    assert list(past)[-1] == f"x-docusign-signature-{MAX_SIGNATURES + 1}"
    assert docusign_verifies(BODY, past, SECRET)  # DocuSign's recipe reads them all
    with pytest.raises(BadSignature):
        DocuSign(secret=SECRET).verify(past, BODY, now=0)
    joined = {"x-docusign-signature-1": ",".join(signed(*strangers, "x", SECRET).values())}
    with pytest.raises(BadSignature, match="more than"):
        DocuSign(secret=SECRET).verify(joined, BODY, now=0)


def test_no_signature_header_is_a_missing_header() -> None:
    with pytest.raises(MissingHeader):
        DocuSign(secret=SECRET).verify({"x-docusign-signature": "abc="}, BODY, now=0)


@pytest.mark.parametrize(
    "change",
    [
        {"event": None},
        {"data": {}},
        {"generatedDateTime": None},
        {"data": {**EVENT["data"], "recipientId": {"n": 1}}},
    ],
    ids=["no-event", "no-envelope", "no-time", "unusable-recipient"],
)
def test_an_authentic_body_that_names_no_event_is_a_payload_error(change: dict) -> None:
    body = json.dumps({**EVENT, **change}).encode()
    with pytest.raises(PayloadError):
        DocuSign(secret=SECRET).identify({}, body)


def test_a_retry_counts_up_and_is_a_duplicate_not_a_conflict(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/docusign.db")
    inbox.add_source(DocuSign(secret=[SECRET, NEW_SECRET]))
    retry = json.dumps({**EVENT, "retryCount": 1}, ensure_ascii=False).encode()
    first = inbox.receive("docusign", signed(SECRET, NEW_SECRET), BODY)
    again = inbox.receive("docusign", signed(NEW_SECRET, body=retry), retry)
    forged = inbox.receive("docusign", signed("stranger"), BODY)
    other = json.dumps({**EVENT, "data": {**EVENT["data"], "name": "someone else"}}).encode()
    conflict = inbox.receive("docusign", signed(SECRET, body=other), other)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (again.key_conflict, conflict.key_conflict) == (False, True)
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------


def test_the_kits_signer_is_verified_by_docusigns_recipe() -> None:
    source = DocuSign(secret=["ds-kit-1", "ds-kit-2"])
    headers, body = kit_sign(source, {"event": "envelope-sent", "note": "café"})
    assert set(headers) >= {"X-DocuSign-Signature-1", "X-DocuSign-Signature-2"}
    assert docusign_verifies(body, {"X-DocuSign-Signature-2": headers["X-DocuSign-Signature-2"]},
                             "ds-kit-2")  # fmt: skip
    assert docusign_verifies(body, headers, "ds-kit-1")
    assert not docusign_verifies(body, headers, "another")
