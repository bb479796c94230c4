"""Customer.io reporting webhooks: judged by Customer.io's documented recipe (`X-CIO-Signature`:
the hex HMAC-SHA256 of `v0:<X-CIO-Timestamp>:<raw body>`, keyed with the webhook signing key),
written again here. Customer.io's libraries (`customerio` on PyPI) send data to it and do not
verify its webhooks."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hookinbox import Inbox
from hookinbox._errors import (
    BadSignature,
    MissingHeader,
    PayloadError,
    TimestampOutOfTolerance,
)
from hookinbox.sources import CustomerIO
from hookinbox.testing import sign as kit_sign

KEY = "cio-signing-key-4d1f"
T = 1_796_000_000
EVENT = {
    "event_id": "01E4C4CT6YDC7Y5M7FE1GWWPQJ",
    "object_type": "email",
    "metric": "clicked",
    "timestamp": T - 5,
    "data": {"customer_id": "42", "delivery_id": "RPILAgABcRhIBqSp7kiPekGBIeVh", "href": "ü"},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def recipe(body: bytes, t: int | str = T, key: str = KEY) -> dict[str, str]:
    signed = b"v0:" + str(t).encode() + b":" + body
    digest = hmac.new(key.encode(), signed, hashlib.sha256).hexdigest()
    return {"x-cio-timestamp": str(t), "x-cio-signature": digest}


def test_a_recipe_signature_verifies_and_keys_by_event_id() -> None:
    identity = CustomerIO(secret=KEY).authenticate(recipe(BODY), BODY, now=T)
    assert (identity.event_id, identity.event_type) == (EVENT["event_id"], "email.clicked")
    assert identity.occurred_at == datetime.fromtimestamp(T - 5, UTC)


@pytest.mark.parametrize(
    "headers",
    [
        recipe(BODY, key="stranger"),
        {**recipe(BODY), "x-cio-timestamp": str(T + 1)},  # the time is signed
        {**recipe(BODY), "x-cio-signature": "v0=" + recipe(BODY)["x-cio-signature"]},
        {"x-cio-timestamp": str(T), "x-cio-signature": hmac.new(
            KEY.encode(), BODY, hashlib.sha256).hexdigest()},  # the body alone
        {**recipe(BODY), "x-cio-timestamp": "soon"},
    ],
    ids=["wrong-key", "other-time", "prefixed", "body-only", "not-a-time"],
)  # fmt: skip
def test_forgeries_are_bad_signatures(headers: dict[str, str]) -> None:
    with pytest.raises(BadSignature):
        CustomerIO(secret=KEY).verify(headers, BODY, now=T)


def test_no_window_by_default_and_one_when_asked() -> None:
    week_old = recipe(BODY, T - 7 * 86_400)
    CustomerIO(secret=KEY).verify(week_old, BODY, now=T)  # a retry sent as it was
    with pytest.raises(TimestampOutOfTolerance):
        CustomerIO(secret=KEY, tolerance=300).verify(week_old, BODY, now=T)


def test_missing_headers_and_no_event_id() -> None:
    with pytest.raises(MissingHeader):
        CustomerIO(secret=KEY).verify({"x-cio-signature": "00"}, BODY, now=T)
    with pytest.raises(MissingHeader):
        CustomerIO(secret=KEY).verify({"x-cio-timestamp": str(T)}, BODY, now=T)
    body = b'{"metric": "sent"}'
    with pytest.raises(PayloadError):
        CustomerIO(secret=KEY).authenticate(recipe(body), body, now=T)


def test_a_retry_is_a_duplicate_and_a_forgery_401(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/customerio.db", clock=lambda: float(T))
    inbox.add_source(CustomerIO(secret=["cio-next-key", KEY]))
    first = inbox.receive("customerio", recipe(BODY), BODY)
    again = inbox.receive("customerio", recipe(BODY, T + 3600), BODY)
    forged = inbox.receive("customerio", recipe(BODY, key="guessed"), BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


def test_the_kits_signer_follows_the_recipe() -> None:
    headers, body = kit_sign(CustomerIO(secret=KEY), EVENT, at=T)
    assert headers["X-CIO-Timestamp"] == str(T)
    assert hmac.compare_digest(headers["X-CIO-Signature"], recipe(body)["x-cio-signature"])
