"""Telnyx: checked against Telnyx's own verifier (`telnyx.lib.webhook_verification`, Python).

Telnyx's SDK verifies (with PyNaCl) but does not sign: only Telnyx holds the private key. So
deliveries are signed by the documented recipe (Ed25519 over `{timestamp}|{body}`, base64)
with a test key, and the SDK referees both directions: what it accepts we accept, and what
`hookinbox.testing.sign` makes, it accepts. The SDK holds the timestamp to its own clock, so
those deliveries are signed now.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hookinbox import Inbox
from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    MissingHeader,
    PayloadError,
    TimestampOutOfTolerance,
)
from hookinbox._headers import normalize_headers
from hookinbox.sources import Telnyx
from hookinbox.testing import ed25519_test_key, sign


def _telnyx_verifier() -> Any:
    """The SDK's verification module, loaded from the installed package on its own: it needs
    only PyNaCl, and importing `telnyx` whole (its generated API client) takes seconds."""
    spec = importlib.util.find_spec("telnyx")
    assert spec is not None and spec.origin is not None
    path = Path(spec.origin).parent / "lib" / "webhook_verification.py"
    module_spec = importlib.util.spec_from_file_location("telnyx_webhook_verification", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


TELNYX = _telnyx_verifier()
KEY = ed25519_test_key()
PUBLIC = base64.b64encode(KEY.raw).decode()
EVENT: dict[str, Any] = {
    "data": {
        "event_type": "message.received",
        "id": "b301ed3f-1490-491f-995f-6e64e69674d4",
        "occurred_at": "2023-11-14T22:13:19.000+00:00",
        "payload": {"text": "héllo ☕", "direction": "inbound"},
        "record_type": "event",
    },
    "meta": {"attempt": 1, "delivered_to": "https://shop.example/webhooks/telnyx"},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def documented(body: bytes, timestamp: str, key: Ed25519PrivateKey) -> dict[str, str]:
    """Telnyx's recipe, independent of hookinbox."""
    signature = key.sign(f"{timestamp}|".encode() + body)
    return {
        "telnyx-signature-ed25519": base64.b64encode(signature).decode(),
        "telnyx-timestamp": timestamp,
    }


def sdk_accepts(headers: dict[str, str], body: bytes, public: str = PUBLIC) -> bool:
    try:
        TELNYX.verify_webhook_signature(body, headers, public)
    except TELNYX.WebhookVerificationError:
        return False
    return True


def ours_accepts(headers: dict[str, str], body: bytes, now: float) -> bool:
    try:
        Telnyx(public_key=PUBLIC).verify(normalize_headers(headers), body, now=now)
    except BadSignature:
        return False
    return True


def test_the_sdk_accepts_what_the_kit_signs() -> None:
    headers, body = sign(Telnyx(public_key=PUBLIC), EVENT)
    assert sdk_accepts(headers, body)
    assert not sdk_accepts(headers, body.replace(b"inbound", b"outbound"))


@pytest.mark.parametrize(
    "spoil",
    [
        lambda h, b: (h, b),
        lambda h, b: (h, b + b" "),
        lambda h, b: ({**h, "telnyx-timestamp": str(int(h["telnyx-timestamp"]) + 1)}, b),
        lambda h, b: ({**h, "telnyx-signature-ed25519": h["telnyx-signature-ed25519"][::-1]}, b),
        lambda h, b: (documented(b, h["telnyx-timestamp"], Ed25519PrivateKey.generate()), b),
    ],
    ids=["intact", "body", "timestamp", "signature", "stranger"],
)
def test_we_agree_with_the_sdk(spoil: Any) -> None:
    now = int(time.time())
    headers, body = spoil(documented(BODY, str(now), KEY.private_key), BODY)
    assert ours_accepts(headers, body, now) == sdk_accepts(headers, body)


def test_the_timestamp_is_held_within_300_seconds_both_ways() -> None:
    source = Telnyx(public_key=PUBLIC)
    for skew in (-300, 300):
        headers = documented(BODY, str(1_700_000_000 + skew), KEY.private_key)
        source.verify(normalize_headers(headers), BODY, now=1_700_000_000)
    for skew in (-301, 301):
        headers = documented(BODY, str(1_700_000_000 + skew), KEY.private_key)
        with pytest.raises(TimestampOutOfTolerance):
            source.verify(normalize_headers(headers), BODY, now=1_700_000_000)


def test_a_missing_or_malformed_header_is_refused() -> None:
    source = Telnyx(public_key=PUBLIC)
    headers = documented(BODY, "1700000000", KEY.private_key)
    with pytest.raises(MissingHeader):
        source.verify({"telnyx-timestamp": "1700000000"}, BODY, now=1_700_000_000)
    with pytest.raises(MissingHeader):
        source.verify({"telnyx-signature-ed25519": "x"}, BODY, now=1_700_000_000)
    with pytest.raises(BadSignature, match="not base64"):
        source.verify({**headers, "telnyx-signature-ed25519": "%%%"}, BODY, now=1_700_000_000)
    with pytest.raises(BadSignature, match="timestamp"):
        source.verify({**headers, "telnyx-timestamp": "soon"}, BODY, now=1_700_000_000)


def test_the_key_is_checked_when_the_source_is_built() -> None:
    with pytest.raises(ConfigurationError, match="base64"):
        Telnyx(public_key="not base64!")
    with pytest.raises(ConfigurationError, match="32 bytes"):
        Telnyx(public_key=base64.b64encode(b"short").decode())
    with pytest.raises(ConfigurationError, match="small order"):
        Telnyx(public_key=base64.b64encode(bytes([1]) + bytes(31)).decode())


def test_the_key_is_the_events_data_id_and_a_retry_is_a_duplicate(tmp_path: Any) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/telnyx.db")
    source = inbox.add_source(Telnyx(public_key=PUBLIC))
    first = inbox.receive("telnyx", *sign(source, EVENT))
    retry_event = {**EVENT, "meta": {**EVENT["meta"], "attempt": 2}}
    retry = inbox.receive("telnyx", *sign(source, retry_event))
    changed = {**EVENT, "data": {**EVENT["data"], "payload": {"text": "other"}}}
    conflict = inbox.receive("telnyx", *sign(source, changed))
    inbox.close()
    assert first.body["status"] == "accepted"
    assert first.body["event_id"] == EVENT["data"]["id"]
    assert retry.body["status"] == "duplicate"  # the attempt counter is not the event
    assert not retry.key_conflict
    assert conflict.body["status"] == "duplicate" and conflict.key_conflict


def test_a_body_without_data_is_a_bad_request() -> None:
    source = Telnyx(public_key=PUBLIC)
    with pytest.raises(PayloadError, match="data"):
        source.identify({}, b'{"meta": {}}')
    identity = source.identify({}, BODY)
    assert identity.event_type == "message.received"
    assert identity.occurred_at is not None and identity.occurred_at.year == 2023
