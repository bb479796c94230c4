"""WorkOS: our source against the `workos` SDK's own verifier, on deliveries signed by the
documented recipe (the SDK verifies but does not sign)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
import workos
from hypothesis import given, settings
from hypothesis import strategies as st

from hookinbox._errors import (
    BadSignature,
    MissingHeader,
    PayloadError,
    TimestampOutOfTolerance,
    VerificationError,
)
from hookinbox.sources import WorkOS
from hookinbox.testing import sign as kit_sign

SECRET = "wsec_0c6b1b1f5b8e4d7a"
EVENT: dict[str, Any] = {
    "id": "event_01H2GQD7Q7F0J1E5C3X7W6X8T9",
    "event": "dsync.user.created",
    "data": {"id": "directory_user_01E1X1", "first_name": "Zoë"},
    "created_at": "2026-11-30T09:00:00.000Z",
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()
SDK = workos.WorkOSClient(api_key="sk_test_hookinbox", client_id="client_hookinbox").webhooks


def header(body: bytes = BODY, secret: str = SECRET, milliseconds: int | None = None) -> str:
    """WorkOS's recipe: HMAC-SHA256 of `{t}.{body}`, `t` in milliseconds, hex."""
    t = int(time.time() * 1000) if milliseconds is None else milliseconds
    digest = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t}, v1={digest}"


def verify(value: str, body: bytes = BODY, *, now: float | None = None, **options: Any) -> None:
    source = WorkOS(secret=options.pop("secret", SECRET), **options)
    source.verify({"workos-signature": value}, body, now=time.time() if now is None else now)


def sdk_accepts(value: str, body: bytes, secret: str = SECRET) -> bool:
    try:
        SDK.verify_header(event_body=body, event_signature=value, secret=secret)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("body", [BODY, b"{}", '{"note": "caf\u00e9 \u2603"}'.encode()])
def test_a_recipe_signature_verifies_and_the_sdk_agrees(body: bytes) -> None:
    value = header(body)
    verify(value, body)
    assert sdk_accepts(value, body)


def test_a_wrong_secret_is_refused_by_both() -> None:
    forged = header(secret="wsec_attacker")
    with pytest.raises(BadSignature):
        verify(forged)
    assert not sdk_accepts(forged, BODY)


def test_the_timestamp_is_milliseconds() -> None:
    now = time.time()
    in_seconds = header(milliseconds=int(now))  # read as milliseconds: January 1970
    with pytest.raises(TimestampOutOfTolerance):
        verify(in_seconds, now=now)
    verify(header(milliseconds=int(now * 1000)), now=now)


@pytest.mark.parametrize(("offset", "accepted"), [(-300, True), (300, True), (301, False)])
def test_tolerance_is_300_seconds_both_ways(offset: int, accepted: bool) -> None:
    now = 1_796_000_000.0
    value = header(milliseconds=int((now + offset) * 1000))
    if accepted:
        verify(value, now=now)
    else:
        with pytest.raises(TimestampOutOfTolerance):
            verify(value, now=now)


def test_the_sdks_180_seconds_can_be_chosen() -> None:
    now = time.time()
    value = header(milliseconds=int((now - 200) * 1000))
    verify(value, now=now)
    with pytest.raises(TimestampOutOfTolerance):
        verify(value, now=now, tolerance=180)
    assert not sdk_accepts(value, BODY)


@pytest.mark.parametrize(
    "value",
    ["v1=" + "0" * 64, "t=1700000000000", "t=abc, v1=" + "0" * 64, "t=" + "9" * 16 + ", v1=00"],
)
def test_malformed_headers_are_bad_signatures(value: str) -> None:
    with pytest.raises(BadSignature):
        verify(value)


def test_a_missing_header() -> None:
    with pytest.raises(MissingHeader):
        WorkOS(secret=SECRET).verify({}, BODY, now=time.time())


@settings(max_examples=40, deadline=None)
@given(body=st.text(max_size=120).map(str.encode), valid=st.booleans())
def test_we_accept_what_the_sdk_accepts(body: bytes, valid: bool) -> None:
    value = header(body, SECRET if valid else "wsec_other")
    try:
        verify(value, body)
        ours = True
    except VerificationError:
        ours = False
    assert ours == sdk_accepts(value, body) == valid


def test_identify_reads_id_event_and_time() -> None:
    identity = WorkOS(secret=SECRET).authenticate(
        {"workos-signature": header()}, BODY, now=time.time()
    )
    assert (identity.event_id, identity.event_type) == (EVENT["id"], "dsync.user.created")
    assert identity.occurred_at == datetime(2026, 11, 30, 9, tzinfo=UTC)


@pytest.mark.parametrize("body", [b"[]", b'{"event": "user.created"}', b'{"id": ""}'])
def test_an_unusable_body_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        WorkOS(secret=SECRET).identify({}, body)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_is_verified_by_workos_sdk() -> None:
    sdk = workos.WorkOSClient(api_key="sk_test_signers", client_id="client_signers").webhooks
    headers, body = kit_sign(WorkOS(secret="wsec_1"), KIT_EVENT)
    sdk.verify_header(event_body=body, event_signature=headers["WorkOS-Signature"], secret="wsec_1")
    with pytest.raises(ValueError, match=r"(?i)signature"):
        sdk.verify_header(
            event_body=body, event_signature=headers["WorkOS-Signature"], secret="wsec_2"
        )
