"""`BrokerSource`: where the key and the type are read, what is refused, and that nothing
but the process's own consumer may deliver to it (no broker needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hookinbox import ConfigurationError, Inbox, PayloadError
from hookinbox._headers import normalize_headers
from hookinbox.brokers import BrokerSource
from hookinbox.brokers._source import MESSAGE_ID, SUBJECT, TOKEN
from tests.brokers.brokers import stored


def identify(source: BrokerSource, body: bytes, **headers: str) -> tuple[str, str | None]:
    given = normalize_headers({TOKEN: source.token, **headers})
    identity = source.authenticate(given, body, now=0.0)
    return identity.event_id, identity.event_type


def test_the_key_and_type_come_from_where_they_are_named() -> None:
    body = json.dumps({"data": {"id": "o-1", "kind": "paid"}}).encode()
    by_path = BrokerSource("a", key="payload:data.id", type="payload:data.kind")
    assert identify(by_path, body) == ("o-1", "paid")
    by_header = BrokerSource("b", key="header:X-Event-Id", type="header:x-type")
    assert identify(by_header, b"\x01 any bytes", **{"x-event-id": "e-9", "x-type": "t"}) == (
        "e-9",
        "t",
    )
    by_id = BrokerSource("c", key="message_id", type="subject")
    assert identify(by_id, b"", **{MESSAGE_ID: "m-1", SUBJECT: "orders.created"}) == (
        "m-1",
        "orders.created",
    )
    assert BrokerSource("d", key="message_id").stored_headers == (MESSAGE_ID, SUBJECT)


@pytest.mark.parametrize(
    ("source", "body", "headers"),
    [
        (BrokerSource("a", key="payload:id"), b"not json", {}),
        (BrokerSource("a", key="payload:id"), b'{"other": 1}', {}),
        (BrokerSource("a", key="payload:id"), b'{"id": ""}', {}),
        (BrokerSource("a", key="header:x-id"), b"{}", {}),
        (BrokerSource("a", key="message_id"), b"{}", {}),
        (BrokerSource("a", key="header:x-id", type="payload:type"), b"[", {"x-id": "1"}),
    ],
)
def test_a_message_without_a_key_or_json_is_refused(
    source: BrokerSource, body: bytes, headers: dict[str, str]
) -> None:
    with pytest.raises(PayloadError):
        identify(source, body, **headers)


@pytest.mark.parametrize(
    ("key", "type"),
    [
        ("subject", None),
        ("header", None),
        ("header:", None),
        ("payload: id", None),
        ("payload:a..b", None),
        ("messageid", None),
        ("message_id:x", None),
        ("message_id", "message_id"),
        ("message_id", "body:x"),
    ],
)
def test_a_misspelt_location_is_refused_in_one_line(key: str, type: str | None) -> None:
    with pytest.raises(ConfigurationError) as raised:
        BrokerSource("a", key=key, type=type)
    assert "\n" not in str(raised.value)


def test_an_http_delivery_to_a_broker_source_is_refused(tmp_path: Path) -> None:
    """Unsigned by design, so reachable from its consumer only: a POST on its path, with
    or without a guessed token, is 401 and nothing is stored."""
    inbox = Inbox(f"sqlite:///{tmp_path / 'in.db'}")
    source = inbox.add_source(BrokerSource("orders", key="payload:id"))
    try:
        body = b'{"id": "o-1"}'
        assert inbox.receive("orders", {}, body).status_code == 401
        assert inbox.receive("orders", {TOKEN: "guess"}, body).status_code == 401
        assert stored(inbox) == {}
        assert inbox.receive("orders", {TOKEN: source.token}, body).status_code == 200
        assert stored(inbox) == {"o-1": 1}
    finally:
        inbox.close()
