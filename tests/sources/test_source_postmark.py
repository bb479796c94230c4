"""Postmark: basic credentials (Postmark signs nothing) and the key per record type."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from hookinbox._errors import BadSignature, ConfigurationError, MissingHeader, PayloadError
from hookinbox.sources import Postmark
from hookinbox.testing import sign as kit_sign

USER, PASSWORD = "postmark-hooks", "Xk2p9Vn4qL"
MESSAGE = "883953f4-6105-42a2-a16a-77a8eac79483"
DELIVERY = {
    "RecordType": "Delivery",
    "MessageID": MESSAGE,
    "Recipient": "zoe@example.com",
    "DeliveredAt": "2026-11-30T09:00:00Z",
    "MessageStream": "outbound",
}


def basic(user: str = USER, password: str = PASSWORD) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"authorization": f"Basic {token}"}


def key(record: dict[str, Any]) -> str:
    return (
        Postmark(username=USER, password=PASSWORD)
        .identify({}, json.dumps(record).encode())
        .event_id
    )


def test_the_configured_credentials_verify() -> None:
    Postmark(username=USER, password=PASSWORD).verify(basic(), b"{}", now=0)
    Postmark(username=USER, password=["new-one", PASSWORD]).verify(basic(), b"{}", now=0)
    lower = {"authorization": basic()["authorization"].replace("Basic", "basic")}
    Postmark(username=USER, password=PASSWORD).verify(lower, b"{}", now=0)


@pytest.mark.parametrize(
    "headers",
    [
        basic(password="guess"),
        basic(user="someone"),
        {"authorization": "Bearer " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()},
        {"authorization": "Basic not*base64"},
        {"authorization": "Basic"},
    ],
    ids=["wrong-password", "wrong-user", "not-basic", "not-base64", "no-credentials"],
)
def test_other_credentials_are_refused(headers: dict[str, str]) -> None:
    with pytest.raises(BadSignature):
        Postmark(username=USER, password=PASSWORD).verify(headers, b"{}", now=0)


def test_no_credentials_and_the_header_is_never_stored() -> None:
    source = Postmark(username=USER, password=PASSWORD)
    with pytest.raises(MissingHeader):
        source.verify({}, b"{}", now=0)
    assert "authorization" not in source.headers_to_store({**basic(), "user-agent": "Postmark"})


@pytest.mark.parametrize("username", ["", " ", "a:b"])
def test_a_user_name_basic_auth_cannot_carry_is_a_configuration_error(username: str) -> None:
    with pytest.raises(ConfigurationError):
        Postmark(username=username, password=PASSWORD)


def test_a_delivery_is_one_event_per_recipient() -> None:
    other = {**DELIVERY, "Recipient": "ann@example.com"}
    assert key(DELIVERY).startswith(f"Delivery:{MESSAGE}:")
    assert key(DELIVERY) == key({**DELIVERY, "Details": "retried"}) != key(other)


def test_bounces_and_complaints_key_by_their_id() -> None:
    bounce = {"RecordType": "Bounce", "ID": 4323372036854775807, "MessageID": MESSAGE}
    assert key(bounce) == "Bounce:4323372036854775807"
    assert key({"RecordType": "SpamComplaint", "ID": 42, "MessageID": MESSAGE}) == (
        "SpamComplaint:42"
    )


def test_repeated_opens_and_clicks_are_several_events() -> None:
    first = {"RecordType": "Open", "MessageID": MESSAGE, "Recipient": "zoe@example.com"}
    opens = [{**first, "ReceivedAt": f"2026-11-30T09:0{i}:00Z"} for i in range(2)]
    assert key(opens[0]) != key(opens[1])
    click = {**opens[0], "RecordType": "Click", "OriginalLink": "https://example.com/a"}
    assert key(click) != key({**click, "OriginalLink": "https://example.com/b"})


def test_an_inbound_message_keys_by_its_message_id() -> None:
    identity = Postmark(username=USER, password=PASSWORD).identify(
        {}, json.dumps({"MessageID": MESSAGE, "From": "zoe@example.com"}).encode()
    )
    assert (identity.event_id, identity.event_type) == (f"Inbound:{MESSAGE}", "Inbound")


def test_a_record_type_added_later_is_kept_apart_by_its_content() -> None:
    later = {"RecordType": "Forwarded", "MessageID": MESSAGE, "At": "1"}
    assert key(later).startswith(f"Forwarded:{MESSAGE}:")
    assert key(later) != key({**later, "At": "2"})


@pytest.mark.parametrize(
    "record",
    [{"RecordType": "Bounce", "MessageID": MESSAGE}, {"RecordType": "Delivery"}, {"From": "x"}],
    ids=["bounce-without-id", "delivery-without-message", "inbound-without-message"],
)
def test_a_record_naming_nothing_is_a_payload_error(record: dict[str, Any]) -> None:
    with pytest.raises(PayloadError):
        key(record)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kit_sends_postmarks_basic_credentials() -> None:
    headers, _ = kit_sign(Postmark(username="hooks", password="pw:1"), KIT_EVENT)
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"hooks:pw:1").decode()
