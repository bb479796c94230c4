"""GitHub: `X-Hub-Signature-256: sha256=<hex>`; key `X-GitHub-Delivery`."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest
from tests.testing.npm_oracles import npm_verifies

from hookinbox._errors import BadSignature, ConfigurationError, MissingHeader, PayloadError
from hookinbox.sources import GitHub
from hookinbox.testing import sign as kit_sign

NOW = 1_700_000_000.0

# GitHub's published test vector ("Validating webhook deliveries").
VECTOR_SECRET = "It's a Secret to Everybody"
VECTOR_BODY = b"Hello, World!"
VECTOR_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

SECRET = "gh-webhook-secret"
OLD_SECRET = "gh-previous-secret"
DELIVERY = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
HOOK_ID = "292430182"
PAYLOAD = {"action": "opened", "issue": {"number": 1347, "title": "Spelling error in README"}}
BODY = json.dumps(PAYLOAD).encode()


def sign(body: bytes = BODY, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def delivery(
    body: bytes = BODY, *, secret: str = SECRET, extra: dict[str, str] | None = None
) -> dict[str, str]:
    headers = {
        "x-hub-signature-256": sign(body, secret),
        "x-github-delivery": DELIVERY,
        "x-github-event": "issues",
        "x-github-hook-id": HOOK_ID,
        **(extra or {}),
    }
    return {name: value for name, value in headers.items() if value}


def test_published_vector_verifies() -> None:
    assert sign(VECTOR_BODY, VECTOR_SECRET) == VECTOR_SIGNATURE
    headers = {"x-hub-signature-256": VECTOR_SIGNATURE, "x-github-delivery": DELIVERY}
    GitHub(secret=VECTOR_SECRET).verify(headers, VECTOR_BODY, now=NOW)


def test_published_vector_body_is_not_json_so_identify_refuses_it() -> None:
    headers = {"x-hub-signature-256": VECTOR_SIGNATURE, "x-github-delivery": DELIVERY}
    source = GitHub(secret=VECTOR_SECRET)
    with pytest.raises(PayloadError):
        source.identify(headers, VECTOR_BODY)
    with pytest.raises(PayloadError):
        source.authenticate(headers, VECTOR_BODY, now=NOW)


def test_published_vector_fails_with_another_secret_or_body() -> None:
    headers = {"x-hub-signature-256": VECTOR_SIGNATURE}
    with pytest.raises(BadSignature):
        GitHub(secret="It's a secret to everybody").verify(headers, VECTOR_BODY, now=NOW)
    with pytest.raises(BadSignature):
        GitHub(secret=VECTOR_SECRET).verify(headers, b"Hello, World?", now=NOW)


def test_form_encoded_body_is_payload_error() -> None:
    body = b"payload=%7B%22action%22%3A%22opened%22%7D"
    with pytest.raises(PayloadError):
        GitHub(secret=SECRET).authenticate(delivery(body), body, now=NOW)


def test_no_timestamp_so_any_clock_is_fine() -> None:
    for now in (0.0, NOW * 10):
        GitHub(secret=SECRET).verify(delivery(), BODY, now=now)


def test_wrong_secret_is_bad_signature() -> None:
    with pytest.raises(BadSignature):
        GitHub(secret=SECRET).verify(delivery(secret=OLD_SECRET), BODY, now=NOW)


def test_secret_rotation() -> None:
    GitHub(secret=[SECRET, OLD_SECRET]).verify(delivery(secret=OLD_SECRET), BODY, now=NOW)


def test_tampered_body_is_bad_signature() -> None:
    with pytest.raises(BadSignature):
        GitHub(secret=SECRET).verify(delivery(), BODY.replace(b"1347", b"1348"), now=NOW)


@pytest.mark.parametrize(
    "value",
    [
        sign()[len("sha256=") :],  # no prefix
        "sha1=" + hmac.new(SECRET.encode(), BODY, hashlib.sha1).hexdigest(),
        "SHA256=" + sign()[len("sha256=") :],
        "sha256=zz",
        "sha256=",
        "sha256=\u00e9",
        sign()[:-2],  # truncated
        sign() + "00",  # extended
    ],
    ids=[
        "bare-hex",
        "sha1",
        "upper-prefix",
        "not-hex",
        "empty",
        "non-ascii",
        "truncated",
        "extended",
    ],
)
def test_malformed_signature_is_bad_signature(value: str) -> None:
    with pytest.raises(BadSignature):
        GitHub(secret=SECRET).verify(delivery(extra={"x-hub-signature-256": value}), BODY, now=NOW)


def test_legacy_sha1_header_alone_is_missing_header() -> None:
    headers = {
        "x-hub-signature": "sha1=" + hmac.new(SECRET.encode(), BODY, hashlib.sha1).hexdigest()
    }
    with pytest.raises(MissingHeader):
        GitHub(secret=SECRET).verify(headers, BODY, now=NOW)


def test_empty_secret_is_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        GitHub(secret=[])


# -- identification ------------------------------------------------------------------------------


def test_key_is_the_delivery_id() -> None:
    identity = GitHub(secret=SECRET).authenticate(delivery(), BODY, now=NOW)
    assert identity.event_id == DELIVERY
    assert identity.event_type == "issues"
    assert identity.occurred_at is None
    assert identity.payload == PAYLOAD


def test_redelivery_keeps_the_key_and_hooks_share_it() -> None:
    first = GitHub(secret=SECRET).identify(delivery(), BODY)
    other_hook = GitHub(secret=SECRET).identify(delivery(extra={"x-github-hook-id": "1"}), BODY)
    assert first.event_id == other_hook.event_id == DELIVERY


def test_scope_by_hook() -> None:
    source = GitHub(secret=SECRET, scope_by_hook=True)
    identity = source.authenticate(delivery(), BODY, now=NOW)
    assert identity.event_id == f"{HOOK_ID}:{DELIVERY}"
    other_hook = source.identify(delivery(extra={"x-github-hook-id": "1"}), BODY)
    assert other_hook.event_id == f"1:{DELIVERY}"


def test_scope_by_hook_without_hook_id_is_payload_error() -> None:
    with pytest.raises(PayloadError):
        GitHub(secret=SECRET, scope_by_hook=True).identify(
            delivery(extra={"x-github-hook-id": ""}), BODY
        )


@pytest.mark.parametrize("value", ["", "x" * 256, "bad\tid"])
def test_missing_or_unusable_delivery_is_payload_error(value: str) -> None:
    with pytest.raises(PayloadError):
        GitHub(secret=SECRET).identify(delivery(extra={"x-github-delivery": value}), BODY)


def test_missing_event_header_gives_no_type() -> None:
    identity = GitHub(secret=SECRET).identify(delivery(extra={"x-github-event": ""}), BODY)
    assert identity.event_type is None


@pytest.mark.parametrize("body", [b"[1, 2]", b'"ping"', b"null"])
def test_any_json_value_is_an_event(body: bytes) -> None:
    # GitHub bodies are objects, but the key is in a header: any JSON is storable.
    assert GitHub(secret=SECRET).identify(delivery(body), body).payload == json.loads(body)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_is_verified_by_octokit(npm: Path) -> None:
    headers, body = kit_sign(GitHub(secret="gh-secret"), KIT_EVENT, event="issues")
    assert npm_verifies(npm, "github", "gh-secret", headers, body)["valid"]
    assert not npm_verifies(npm, "github", "other", headers, body)["valid"]
    assert headers["X-GitHub-Event"] == "issues"


def test_the_kits_signer_meets_githubs_published_vector() -> None:
    headers, _ = kit_sign(GitHub(secret="It's a Secret to Everybody"), b"Hello, World!")
    expected = "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert headers["X-Hub-Signature-256"] == f"sha256={expected}"
