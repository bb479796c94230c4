"""Chargebee: HTTP basic credentials (Chargebee signs nothing), judged by RFC 7617 as Chargebee's
webhook settings use it (the user name and password set for the webhook, sent as
`Authorization: Basic base64(user:password)`), and the key of the event body."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, ConfigurationError, MissingHeader, PayloadError
from hookinbox.sources import Chargebee
from hookinbox.testing import sign as kit_sign

USER, PASSWORD = "cb-hooks", "p@ss:wörd 9"  # a password may hold a colon and non-ASCII
EVENT = {
    "id": "ev_16BHbhF4s42tO2lK",
    "occurred_at": 1_796_000_000,
    "source": "admin_console",
    "user": "zoe@example.com",
    "object": "event",
    "api_version": "v2",
    "event_type": "subscription_created",
    "webhook_status": "scheduled",
    "content": {"subscription": {"id": "16BHbhF4s42tO2lJ", "plan_id": "café-☕"}},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def basic(user: str = USER, password: str = PASSWORD) -> dict[str, str]:
    """RFC 7617: `Basic` and the base64 of `user:password` in UTF-8."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"authorization": f"Basic {token}"}


def test_the_configured_credentials_admit_the_event_keyed_by_its_id() -> None:
    identity = Chargebee(username=USER, password=PASSWORD).authenticate(basic(), BODY, now=0)
    assert (identity.event_id, identity.event_type) == (EVENT["id"], "subscription_created")
    assert identity.occurred_at == datetime.fromtimestamp(1_796_000_000, UTC)


@pytest.mark.parametrize(
    "headers",
    [
        basic(password="guess"),
        basic(user="someone"),
        {"authorization": "Bearer " + basic()["authorization"].removeprefix("Basic ")},
        {"authorization": "Basic not*base64"},
    ],
    ids=["wrong-password", "wrong-user", "not-basic", "not-base64"],
)
def test_other_credentials_are_refused(headers: dict[str, str]) -> None:
    with pytest.raises(BadSignature):
        Chargebee(username=USER, password=PASSWORD).verify(headers, BODY, now=0)


def test_no_credentials_are_a_missing_header_and_a_bad_user_name_a_configuration_error() -> None:
    with pytest.raises(MissingHeader):
        Chargebee(username=USER, password=PASSWORD).verify({}, BODY, now=0)
    with pytest.raises(ConfigurationError, match="Chargebee user name"):
        Chargebee(username="cb:hooks", password=PASSWORD)


@pytest.mark.parametrize("body", [b'{"event_type": "x"}', b'{"id": 7.5}', b"[]"])
def test_no_usable_id_is_a_payload_error(body: bytes) -> None:
    with pytest.raises(PayloadError):
        Chargebee(username=USER, password=PASSWORD).identify({}, body)


def test_a_retry_is_a_duplicate_even_when_its_delivery_status_changed(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/chargebee.db")
    inbox.add_source(Chargebee(username=USER, password=["new-password", PASSWORD]))
    first = inbox.receive("chargebee", basic(), BODY)
    retry = json.dumps({**EVENT, "webhook_status": "re_scheduled"}).encode()
    again = inbox.receive("chargebee", basic(password="new-password"), retry)
    changed = json.dumps({**EVENT, "event_type": "subscription_cancelled"}).encode()
    conflict = inbox.receive("chargebee", basic(), changed)
    forged = inbox.receive("chargebee", basic(password="guessed"), BODY)
    inbox.close()
    assert (first.body["status"], again.body["status"]) == ("accepted", "duplicate")
    assert (again.key_conflict, conflict.key_conflict) == (False, True)
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")


def test_the_password_is_never_stored() -> None:
    source = Chargebee(username=USER, password=PASSWORD)
    assert source.headers_to_store({**basic(), "user-agent": "ChargeBee"}) == {
        "user-agent": "ChargeBee"
    }


def test_the_kits_signer_sends_rfc_7617_credentials() -> None:
    headers, _ = kit_sign(Chargebee(username=USER, password=PASSWORD), EVENT)
    assert headers["Authorization"] == basic()["authorization"]
