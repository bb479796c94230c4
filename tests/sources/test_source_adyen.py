"""Adyen: checked against Adyen's own HMAC helpers (`Adyen`, Python: `Adyen.util`).

Forward: items signed by the SDK's `generate_notification_sig`, received through
`inbox.receive` and the ASGI app (answered `[accepted]`, as Adyen requires). Reverse:
`hookinbox.testing.sign`'s items judged by the SDK's `is_valid_hmac_notification`.
"""

from __future__ import annotations

import base64
import copy
import json
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from Adyen.util import generate_notification_sig, is_valid_hmac_notification
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.asgi import ASGIClient

from hookinbox import Inbox
from hookinbox._errors import BadSignature, ConfigurationError, PayloadError, VerificationError
from hookinbox.sources import Adyen
from hookinbox.sources._adyen import SIGNED_FIELDS, signing_string
from hookinbox.testing import sign

HMAC_KEY = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
OTHER_KEY = "0" * 62 + "01"


def item(psp: str, code: str = "AUTHORISATION", success: str = "true") -> dict[str, Any]:
    return {
        "additionalData": {"authCode": "1234", "cardSummary": "7777"},
        "amount": {"currency": "EUR", "value": 10100},
        "eventCode": code,
        "eventDate": "2024-01-30T18:16:22+01:00",
        "merchantAccountCode": "ShopÉtoile",
        "merchantReference": "order-ß-1",
        "paymentMethod": "visa",
        "pspReference": psp,
        "success": success,
    }


def sdk_signed(*items: dict[str, Any], key: str = HMAC_KEY) -> bytes:
    """A body whose items the SDK signed."""
    signed = []
    for entry in items:
        entry = copy.deepcopy(entry)
        unsigned = {k: v for k, v in entry.items() if k != "additionalData"}
        signature = generate_notification_sig(unsigned, key).decode()
        entry.setdefault("additionalData", {})["hmacSignature"] = signature
        signed.append({"NotificationRequestItem": entry})
    return json.dumps({"live": "false", "notificationItems": signed}).encode()


@pytest.fixture
def inbox() -> Iterator[Inbox]:
    inbox = Inbox(f"sqlite:///{tempfile.mkdtemp()}/adyen.db")
    inbox.add_source(Adyen(hmac_key=HMAC_KEY))
    inbox.add_source(Adyen(hmac_key=HMAC_KEY, username="adyen", password="pä55", name="basic"))
    yield inbox
    inbox.close()


def test_our_signing_string_is_the_sdks() -> None:
    entry = item("8515")
    expected = "8515::ShopÉtoile:order-ß-1:10100:EUR:AUTHORISATION:true"
    assert signing_string(entry) == expected
    assert signing_string({**entry, "success": True}) == expected  # JSON true, as Java and JS


def test_sdk_signed_items_are_stored_each_once_and_answered_accepted(inbox: Inbox) -> None:
    body = sdk_signed(item("8515"), item("8515", "CAPTURE"))
    response = ASGIClient(inbox.asgi()).post("/webhooks/adyen", content=body)
    assert (response.status_code, response.text) == (200, "[accepted]")
    assert response.headers["content-type"].startswith("text/plain")
    event = inbox.store.get_event("adyen", "8515:CAPTURE:true")
    assert event is not None and event.type == "CAPTURE"
    assert event.payload["merchantReference"] == "order-ß-1"
    again = inbox.receive("adyen", {}, body)
    assert (again.content, again.body["duplicates"]) == (b"[accepted]", 2)


def test_a_changed_outcome_is_a_new_event(inbox: Inbox) -> None:
    inbox.receive("adyen", {}, sdk_signed(item("9001", success="false")))
    reply = inbox.receive("adyen", {}, sdk_signed(item("9001", success="true")))
    assert reply.body["accepted"] == 1


def test_the_sdk_accepts_what_the_signer_makes() -> None:
    _, body = sign(Adyen(hmac_key=HMAC_KEY), {"live": "false", "notificationItems": [
        {"NotificationRequestItem": item("7001")}]})  # fmt: skip
    assert is_valid_hmac_notification(json.loads(body), HMAC_KEY)
    assert not is_valid_hmac_notification(json.loads(body), OTHER_KEY)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda entries: entries[1].update(success="false"),  # a signed field changed
        lambda entries: entries[0]["amount"].update(value=1),
        lambda entries: entries[1]["additionalData"].pop("hmacSignature"),
    ],
    ids=["second-item-success", "first-item-amount", "second-item-unsigned"],
)
def test_one_bad_item_refuses_the_whole_delivery_401(inbox: Inbox, tamper: Any) -> None:
    body = json.loads(sdk_signed(item("6001"), item("6002")))
    tamper([entry["NotificationRequestItem"] for entry in body["notificationItems"]])
    reply = inbox.receive("adyen", {}, json.dumps(body).encode())
    assert (reply.status_code, reply.body["error"]) == (401, "invalid_signature")
    assert inbox.store.get_event("adyen", "6001:AUTHORISATION:true") is None


def test_basic_authentication_when_configured(inbox: Inbox) -> None:
    body = sdk_signed(item("5001"))

    def basic(credentials: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(credentials.encode()).decode()}

    assert inbox.receive("basic", {}, body).status_code == 401
    assert inbox.receive("basic", basic("adyen:wrong"), body).status_code == 401
    assert inbox.receive("basic", basic("adyen:pä55"), body).status_code == 200
    with pytest.raises(ConfigurationError):
        Adyen(hmac_key=HMAC_KEY, username="adyen")
    with pytest.raises(ConfigurationError):
        Adyen(hmac_key="not hex")


def test_another_key_and_a_body_that_is_not_a_notification_are_refused() -> None:
    source = Adyen(hmac_key=[OTHER_KEY, HMAC_KEY])  # rotation: either key
    source.verify({}, sdk_signed(item("4001")), now=0)
    with pytest.raises(BadSignature):
        Adyen(hmac_key=OTHER_KEY).verify({}, sdk_signed(item("4001")), now=0)
    for body in (b"[]", b'{"notificationItems": []}', b"not json"):
        with pytest.raises(BadSignature):
            source.verify({}, body, now=0)


FIELD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=20), st.floats(allow_nan=False)
)
ITEMS = st.dictionaries(
    st.sampled_from([*SIGNED_FIELDS, "amount", "eventDate", "reason"]),
    FIELD_VALUES | st.fixed_dictionaries({"value": FIELD_VALUES, "currency": FIELD_VALUES}),
    max_size=10,
)


@settings(max_examples=60, deadline=None)
@given(items=st.lists(ITEMS, min_size=1, max_size=3))
def test_signed_items_of_any_shape_give_events_or_a_payload_error(
    items: list[dict[str, Any]],
) -> None:
    """Our signer and our verifier agree on every field shape; what is not an event is 400."""
    source = Adyen(hmac_key=HMAC_KEY)
    notification = {"notificationItems": [{"NotificationRequestItem": i} for i in items]}
    _, body = sign(source, notification)
    source.verify({}, body, now=0)
    try:
        identities = source.authenticate_batch({}, body, now=0)
    except PayloadError:
        return
    assert [json.loads(i.body or b"") for i in identities] == [
        entry["NotificationRequestItem"] for entry in json.loads(body)["notificationItems"]
    ]


@settings(max_examples=60, deadline=None)
@given(
    body=st.binary(max_size=200) | st.builds(lambda v: json.dumps(v).encode(), ITEMS),
    authorization=st.text(max_size=30),
)
def test_arbitrary_deliveries_raise_only_our_errors(body: bytes, authorization: str) -> None:
    source = Adyen(hmac_key=HMAC_KEY, username="adyen", password="pä55")
    for headers in ({}, {"authorization": authorization}):
        try:
            source.authenticate_batch(headers, body, now=0)
        except (VerificationError, PayloadError):
            continue
