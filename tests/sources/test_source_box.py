"""Box: judged by Box's own SDK (`boxsdk` on PyPI, `WebhooksManager.validate_message`), which
checks `BOX-SIGNATURE-PRIMARY` with the primary key and `BOX-SIGNATURE-SECONDARY` with the
secondary one (base64 HMAC-SHA256 of the body, then `BOX-DELIVERY-TIMESTAMP`), the version
and algorithm headers, and a delivery time no more than 10 minutes old on the real clock."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime

import pytest
from box_sdk_gen.managers.webhooks import WebhooksManager

from hookinbox import Inbox
from hookinbox._errors import BadSignature, MissingHeader, PayloadError, TimestampOutOfTolerance
from hookinbox.sources import Box
from hookinbox.testing import sign as kit_sign

PRIMARY = "SamplePrimaryKey-4f8a1c"
SECONDARY = "SampleSecondaryKey-90d2e7"
EVENT = {
    "type": "webhook_event",
    "id": "eb0c4e06-751f-442c-86f8-fd5bb404dbec",
    "created_at": "2016-07-11T10:10:32-07:00",
    "trigger": "FILE.UPLOADED",
    "webhook": {"id": "53", "type": "webhook"},
    "source": {"id": "73835521473", "type": "file", "name": "Überblick — ☕.docx"},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def box_time(at: float) -> str:
    """As Box writes it: RFC 3339 with an offset (`2016-07-11T10:10:33-07:00`)."""
    return datetime.fromtimestamp(int(at), UTC).astimezone().isoformat()


def digest(key: str, body: bytes, timestamp: str) -> str:
    mac = hmac.new(key.encode(), body + timestamp.encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def delivery(
    body: bytes = BODY,
    *,
    at: float | None = None,
    primary: str = PRIMARY,
    secondary: str = SECONDARY,
) -> dict[str, str]:
    timestamp = box_time(time.time() if at is None else at)
    return {
        "box-delivery-id": "673a081b-bb4b-4d45-b4f1-4131a29c1d07",
        "box-delivery-timestamp": timestamp,
        "box-signature-primary": digest(primary, body, timestamp),
        "box-signature-secondary": digest(secondary, body, timestamp),
        "box-signature-version": "1",
        "box-signature-algorithm": "HmacSHA256",
    }


def sdk_verifies(
    body: bytes, headers: dict[str, str], primary: str, secondary: str | None = None
) -> bool:
    lowered = {name.lower(): value for name, value in headers.items()}
    return WebhooksManager.validate_message(
        body.decode(), lowered, primary, secondary_key=secondary
    )


def test_boxs_sdk_and_the_source_agree_on_a_recipe_delivery() -> None:
    headers = delivery()
    assert sdk_verifies(BODY, headers, PRIMARY, SECONDARY)
    identity = Box(secret=[PRIMARY, SECONDARY]).authenticate(headers, BODY, now=time.time())
    assert (identity.event_id, identity.event_type) == (EVENT["id"], "FILE.UPLOADED")
    assert identity.occurred_at == datetime(2016, 7, 11, 17, 10, 32, tzinfo=UTC)


@pytest.mark.parametrize(
    ("configured", "sdk_keys"),
    [
        ([PRIMARY], (PRIMARY, None)),  # the secondary signature matches no key given
        ([SECONDARY], ("another", SECONDARY)),  # the primary was rotated away
        ([SECONDARY, "a-new-primary"], ("a-new-primary", SECONDARY)),
    ],
    ids=["primary-only", "secondary-only", "rotated"],
)
def test_either_key_verifies_as_boxs_sdk_does(configured: list[str], sdk_keys: tuple) -> None:
    headers = delivery()
    assert sdk_verifies(BODY, headers, *sdk_keys)
    Box(secret=configured).verify(headers, BODY, now=time.time())


@pytest.mark.parametrize(
    "spoil",
    [
        {"box-signature-primary": "x", "box-signature-secondary": "y"},
        {"box-signature-algorithm": "HmacSHA1"},
        {"box-signature-algorithm": "hmacsha256"},
        {"box-signature-version": "2"},
    ],
    ids=["both-wrong", "another-algorithm", "algorithm-case", "another-version"],
)
def test_what_boxs_sdk_refuses_the_source_refuses(spoil: dict[str, str]) -> None:
    headers = {**delivery(), **spoil}
    assert not sdk_verifies(BODY, headers, PRIMARY, SECONDARY)
    with pytest.raises(BadSignature):
        Box(secret=[PRIMARY, SECONDARY]).verify(headers, BODY, now=time.time())


def test_a_stranger_and_a_changed_body_are_refused() -> None:
    stranger = delivery(primary="guess-1", secondary="guess-2")
    assert not sdk_verifies(BODY, stranger, PRIMARY, SECONDARY)
    with pytest.raises(BadSignature):
        Box(secret=[PRIMARY, SECONDARY]).verify(stranger, BODY, now=time.time())
    changed = BODY.replace(b"73835521473", b"73835521474")
    assert not sdk_verifies(changed, delivery(), PRIMARY, SECONDARY)
    with pytest.raises(BadSignature):
        Box(secret=PRIMARY).verify(delivery(), changed, now=time.time())


def test_the_timestamp_is_signed() -> None:
    headers = delivery()
    headers["box-delivery-timestamp"] = box_time(time.time() - 5)
    assert not sdk_verifies(BODY, headers, PRIMARY)
    with pytest.raises(BadSignature):
        Box(secret=PRIMARY).verify(headers, BODY, now=time.time())


@pytest.mark.parametrize(("age", "sdk"), [(590, True), (620, False), (-620, False)])
def test_ten_minutes_each_way(age: int, sdk: bool) -> None:
    """Box's SDK: at most 10 minutes old, and none from the future; hookinbox allows the same
    10 minutes of skew both ways (a future time within them verifies: see the page)."""
    now = time.time()
    headers = delivery(at=now - age)
    assert sdk_verifies(BODY, headers, PRIMARY) is sdk
    source = Box(secret=PRIMARY)
    if abs(age) <= 600:
        source.verify(headers, BODY, now=now)
    else:
        with pytest.raises(TimestampOutOfTolerance):
            source.verify(headers, BODY, now=now)
    Box(secret=PRIMARY, tolerance=None).verify(headers, BODY, now=now)


@pytest.mark.parametrize("timestamp", ["yesterday", "2016-07-11T10:10:33", "1468257033"])
def test_an_unreadable_or_unzoned_timestamp_is_a_bad_signature(timestamp: str) -> None:
    headers = delivery()
    headers["box-delivery-timestamp"] = timestamp
    headers["box-signature-primary"] = digest(PRIMARY, BODY, timestamp)
    with pytest.raises(BadSignature):
        Box(secret=PRIMARY).verify(headers, BODY, now=time.time())


@pytest.mark.parametrize(
    "missing",
    ["box-delivery-timestamp", "box-signature-version", "box-signature-algorithm", "both"],
)
def test_a_missing_header_is_a_missing_header(missing: str) -> None:
    headers = delivery()
    gone = ("box-signature-primary", "box-signature-secondary") if missing == "both" else (missing,)
    for name in gone:
        del headers[name]
    with pytest.raises(MissingHeader):
        Box(secret=PRIMARY).verify(headers, BODY, now=time.time())


@pytest.mark.parametrize("body", [b"[]", b'{"trigger": "FILE.UPLOADED"}', b'{"id": true}'])
def test_an_authentic_body_without_an_id_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        Box(secret=PRIMARY).identify({}, body)


def test_a_retry_under_a_new_delivery_id_is_a_duplicate(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/box.db")
    inbox.add_source(Box(secret=[PRIMARY, SECONDARY]))
    first = inbox.receive("box", delivery(), BODY)
    retry = {**delivery(at=time.time() + 1), "box-delivery-id": "a-new-delivery-id"}
    again = inbox.receive("box", retry, BODY)
    forged = inbox.receive("box", delivery(primary="x", secondary="y"), BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------


def test_the_kits_signer_is_verified_by_boxs_sdk() -> None:
    source = Box(secret=["box-kit-primary", "box-kit-secondary"])
    headers, body = kit_sign(source, {"id": "e1", "trigger": "FILE.UPLOADED", "note": "café"})
    assert sdk_verifies(body, headers, "box-kit-primary", "box-kit-secondary")
    assert sdk_verifies(body, headers, "another", "box-kit-secondary")  # the secondary signs
    assert not sdk_verifies(body, headers, "another", "yet-another")
    one, body = kit_sign(Box(secret="box-kit-primary"), {"id": "e2"})
    assert "BOX-SIGNATURE-SECONDARY" not in one
    assert sdk_verifies(body, one, "box-kit-primary")
