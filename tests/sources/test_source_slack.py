"""Slack Events API: signatures from `slack_sdk`'s SignatureVerifier, checked by ours."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk.signature import Clock, SignatureVerifier

from hookinbox import Inbox
from hookinbox._errors import (
    BadSignature,
    MissingHeader,
    PayloadError,
    TimestampOutOfTolerance,
    VerificationError,
)
from hookinbox._records import EventFilter
from hookinbox.sources import Slack
from hookinbox.testing import sign as kit_sign

T = 1_700_000_000
NOW = float(T)
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
EVENT: dict[str, Any] = {
    "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
    "team_id": "T0123ABCD",
    "api_app_id": "A0123ABCD",
    "event": {
        "type": "app_mention",
        "user": "U0123ABCD",
        "text": "<@U0LAN0Z89> is it everything a river should be? Zoë",
        "ts": "1515449522.000016",
        "channel": "C0LAN2Q65",
        "event_ts": "1515449522000016",
    },
    "type": "event_callback",
    "event_id": "Ev0123ABCDEF",
    "event_time": 1515449522,
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()
CHALLENGE = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
VERIFICATION = json.dumps(
    {"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": CHALLENGE, "type": "url_verification"}
).encode()


class FixedClock(Clock):
    def now(self) -> float:
        return NOW


def signed(body: bytes = BODY, secret: str = SECRET, timestamp: int = T) -> dict[str, str]:
    """Headers as Slack sends them, the signature computed by Slack's own SDK."""
    verifier = SignatureVerifier(secret, FixedClock())
    signature = verifier.generate_signature(timestamp=str(timestamp), body=body)
    assert signature is not None
    return {"x-slack-signature": signature, "x-slack-request-timestamp": str(timestamp)}


def verify(headers: dict[str, str], body: bytes = BODY, *, now: float = NOW) -> None:
    Slack(secret=SECRET).verify(headers, body, now=now)


# -- verification ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [BODY, VERIFICATION, b"{}", b"", "caf\u00e9 \U0001f600".encode()],
    ids=["event", "url-verification", "empty-object", "empty", "non-ascii"],
)
def test_sdk_signature_verifies_and_the_sdk_agrees(body: bytes) -> None:
    headers = signed(body)
    verify(headers, body)
    assert SignatureVerifier(SECRET, FixedClock()).is_valid_request(body, headers)


def test_tampered_body_wrong_secret_and_changed_timestamp_are_bad_signature() -> None:
    with pytest.raises(BadSignature):
        verify(signed(), BODY.replace(b"river", b"River"))
    with pytest.raises(BadSignature):
        verify(signed(secret="someone-else"))
    with pytest.raises(BadSignature):
        verify({**signed(), "x-slack-request-timestamp": str(T + 1)}, now=NOW)


def test_secrets_rotate() -> None:
    Slack(secret=["new-secret", SECRET]).verify(signed(), BODY, now=NOW)


@pytest.mark.parametrize("missing", ["x-slack-signature", "x-slack-request-timestamp"])
def test_missing_header(missing: str) -> None:
    headers = signed()
    del headers[missing]
    with pytest.raises(MissingHeader):
        verify(headers)


@pytest.mark.parametrize(
    ("signature", "timestamp", "detail"),
    [
        ("v1=" + "0" * 64, str(T), "does not start with v0="),
        ("V0=" + "0" * 64, str(T), "does not start with v0="),
        ("v0=zz", str(T), "X-Slack-Signature is not hex"),
        ("v0=" + "0" * 64, "1e9", "malformed signature timestamp"),
        ("v0=" + "0" * 64, "-1", "malformed signature timestamp"),
        ("v0=" + "0" * 64, str(T), "No signature on the delivery matches"),
    ],
)
def test_malformed_signature_is_bad_signature(signature: str, timestamp: str, detail: str) -> None:
    headers = {"x-slack-signature": signature, "x-slack-request-timestamp": timestamp}
    with pytest.raises(BadSignature, match=detail):
        verify(headers)


@pytest.mark.parametrize("offset", [-300, 0, 300])
def test_within_300_seconds(offset: int) -> None:
    verify(signed(), now=NOW + offset)


@pytest.mark.parametrize("offset", [-301, 301])
def test_outside_300_seconds_and_the_sdk_agrees(offset: int) -> None:
    with pytest.raises(TimestampOutOfTolerance):
        verify(signed(), now=NOW + offset)

    class Later(Clock):
        def now(self) -> float:
            return NOW + offset

    assert not SignatureVerifier(SECRET, Later()).is_valid_request(BODY, signed())


@settings(max_examples=200, deadline=None)
@given(
    body=st.text(max_size=200).map(str.encode),
    secret=st.text(min_size=1, max_size=30).filter(str.strip),
    valid=st.booleans(),
)
def test_we_accept_exactly_what_the_sdk_accepts(body: bytes, secret: str, valid: bool) -> None:
    headers = signed(body, secret if valid else secret + "x")
    try:
        Slack(secret=secret).verify(headers, body, now=NOW)
        ours = True
    except VerificationError:
        ours = False
    sdk = SignatureVerifier(secret, FixedClock()).is_valid_request(body, headers)
    assert ours == sdk == valid


# -- the url_verification handshake ---------------------------------------------------------------


def test_handshake_answers_the_challenge_of_a_url_verification() -> None:
    assert Slack(secret=SECRET).handshake(signed(VERIFICATION), VERIFICATION) == {
        "challenge": CHALLENGE
    }


@pytest.mark.parametrize(
    "body",
    [BODY, b'{"type": "event_callback", "text": "url_verification"}', b"not json at all"],
    ids=["event", "mentions-the-word", "not-json"],
)
def test_handshake_leaves_events_to_identify(body: bytes) -> None:
    assert Slack(secret=SECRET).handshake({}, body) is None


@pytest.mark.parametrize(
    "challenge", [None, "", 42, ["x"], "x" * 1025, "a\nb"], ids=lambda c: repr(c)[:12]
)
def test_unusable_challenge_is_payload_error(challenge: object) -> None:
    body = json.dumps({"type": "url_verification", "challenge": challenge}).encode()
    with pytest.raises(PayloadError):
        Slack(secret=SECRET).handshake({}, body)


def test_url_verification_through_the_receiver_stores_nothing(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path / 'slack.db'}", clock=lambda: NOW)
    inbox.add_source(Slack(secret=SECRET))
    reply = inbox.receive("slack", signed(VERIFICATION), VERIFICATION)
    assert (reply.status_code, reply.body, reply.outcome.value) == (
        200,
        {"challenge": CHALLENGE},
        "handshake",
    )
    forged = inbox.receive("slack", signed(VERIFICATION, secret="attacker"), VERIFICATION)
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")
    empty = json.dumps({"type": "url_verification", "challenge": ""}).encode()
    refused = inbox.receive("slack", signed(empty), empty)
    assert (refused.status_code, refused.body["error"]) == (400, "bad_request")
    assert inbox.store.operator.count_events(EventFilter()) == 0
    inbox.close()


# -- identification ------------------------------------------------------------------------------


def test_identify_reads_event_id_type_and_time() -> None:
    identity = Slack(secret=SECRET).authenticate(signed(), BODY, now=NOW)
    assert identity.event_id == "Ev0123ABCDEF"
    assert identity.event_type == "app_mention"
    assert identity.occurred_at == datetime(2018, 1, 8, 22, 12, 2, tzinfo=UTC)
    assert identity.payload == EVENT


def test_a_retry_has_the_same_key() -> None:
    retry = {**signed(timestamp=T + 60), "x-slack-retry-num": "1", "x-slack-retry-reason": "x"}
    source = Slack(secret=SECRET)
    first = source.authenticate(signed(), BODY, now=NOW)
    again = source.authenticate(retry, BODY, now=NOW + 60)
    assert first.event_id == again.event_id
    assert source.headers_to_store(retry)["x-slack-retry-num"] == "1"


def test_app_rate_limited_is_stored_under_a_derived_key() -> None:
    body = json.dumps(
        {
            "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
            "type": "app_rate_limited",
            "team_id": "T123456",
            "minute_rate_limited": 1518467820,
            "api_app_id": "A123456",
        }
    ).encode()
    identity = Slack(secret=SECRET).identify({}, body)
    assert identity.event_id == "app_rate_limited:T123456:1518467820"
    assert identity.event_type == "app_rate_limited"
    assert identity.occurred_at == datetime(2018, 2, 12, 20, 37, tzinfo=UTC)


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "event_callback", "event": {"type": "message"}},
        {"event_id": ""},
        {"type": "app_rate_limited", "minute_rate_limited": 1},
        {"type": "url_verification", "challenge": "x"},  # answered by the handshake, never stored
    ],
)
def test_no_usable_key_is_payload_error(payload: object) -> None:
    with pytest.raises(PayloadError):
        Slack(secret=SECRET).identify({}, json.dumps(payload).encode())


@pytest.mark.parametrize(
    "body", [b"payload=%7B%22type%22%3A%22block_actions%22%7D", b"command=/weather&text=94070"]
)
def test_interactivity_and_slash_command_forms_are_payload_errors(body: bytes) -> None:
    with pytest.raises(PayloadError):
        Slack(secret=SECRET).authenticate(signed(body), body, now=NOW)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_is_verified_by_slacks_sdk() -> None:
    secret = "8f742231b10e8888abcd99yyyzzz85a5"
    headers, body = kit_sign(Slack(secret=secret), KIT_EVENT, retry=1)
    assert SignatureVerifier(secret).is_valid_request(body, headers)
    assert not SignatureVerifier("another").is_valid_request(body, headers)
    assert headers["X-Slack-Retry-Num"] == "1"
