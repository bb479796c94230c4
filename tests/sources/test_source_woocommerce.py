"""WooCommerce: judged by WooCommerce's recipe as its `WC_Webhook::generate_signature` writes
it (`base64_encode(hash_hmac('sha256', $payload, $secret, true))`: the base64 HMAC-SHA256 of
the body), and by the ping `WC_Webhook::deliver_ping` sends (the form `webhook_id=<n>`, no
signature, answered 200). WooCommerce publishes no Python library that verifies."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from hookinbox import Inbox
from hookinbox._errors import BadSignature, Handshake, MissingHeader, PayloadError
from hookinbox._storage._schema import events
from hookinbox.sources import WooCommerce
from hookinbox.testing import sign as kit_sign

SECRET = "wc-webhook-secret-&-3f9a"
ORDER = {
    "id": 4750,
    "parent_id": 0,
    "status": "completed",
    "currency": "EUR",
    "date_created_gmt": "2020-03-11T16:54:40",
    "date_modified_gmt": "2020-03-11T17:02:11",
    "billing": {"first_name": "Zoë", "city": "Zürich"},
}
BODY = json.dumps(ORDER, ensure_ascii=False).encode()


def generate_signature(payload: bytes, secret: str = SECRET) -> str:
    return base64.b64encode(hmac.new(secret.encode(), payload, hashlib.sha256).digest()).decode()


def delivery(body: bytes = BODY, *, topic: str = "order.updated", secret: str = SECRET) -> dict:
    resource, _, event = topic.partition(".")
    return {
        "x-wc-webhook-source": "https://shop.example/",
        "x-wc-webhook-topic": topic,
        "x-wc-webhook-resource": resource,
        "x-wc-webhook-event": event,
        "x-wc-webhook-id": "3",
        "x-wc-webhook-delivery-id": "36e520ebabc2fa725092ff4a47acedf2",
        "x-wc-webhook-signature": generate_signature(body, secret),
    }


def test_a_recipe_signature_verifies_and_keys_by_topic_resource_and_change() -> None:
    identity = WooCommerce(secret=SECRET).authenticate(delivery(), BODY, now=0)
    assert identity.event_id == "order.updated:4750:2020-03-11T17:02:11"
    assert identity.event_type == "order.updated"
    assert identity.occurred_at == datetime(2020, 3, 11, 17, 2, 11, tzinfo=UTC)


def test_a_deleted_resource_is_keyed_by_its_body() -> None:
    body = b'{"id":4750}'
    identity = WooCommerce(secret=SECRET).authenticate(
        delivery(body, topic="order.deleted"), body, now=0
    )
    assert identity.event_id == f"order.deleted:4750:{hashlib.sha256(body).hexdigest()[:32]}"


@pytest.mark.parametrize(
    "signature",
    [
        generate_signature(BODY, "stranger"),
        hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest(),
        "sha256=" + generate_signature(BODY),
        "not base64!",
    ],
    ids=["wrong-secret", "hex", "prefixed", "not-base64"],
)
def test_forgeries_are_bad_signatures(signature: str) -> None:
    headers = {**delivery(), "x-wc-webhook-signature": signature}
    with pytest.raises(BadSignature):
        WooCommerce(secret=SECRET).verify(headers, BODY, now=0)


def test_the_ping_is_answered_and_nothing_else_unsigned_is() -> None:
    source = WooCommerce(secret=SECRET)
    ping = {"content-type": "application/x-www-form-urlencoded"}
    with pytest.raises(Handshake) as answered:
        source.authenticate(ping, b"webhook_id=3", now=0)
    assert answered.value.answer == {"status": "ping"}
    for body in (b"webhook_id=3&x=1", b"webhook_id=", b"webhook_id=3\n", BODY, b""):
        with pytest.raises(MissingHeader):
            source.authenticate(ping, body, now=0)
    # A signed ping body is an ordinary delivery: verified, then not JSON (400).
    signed = {"x-wc-webhook-signature": generate_signature(b"webhook_id=3")}
    with pytest.raises(PayloadError):
        source.authenticate(signed, b"webhook_id=3", now=0)


@pytest.mark.parametrize(
    ("headers", "body"),
    [({}, BODY), ({"x-wc-webhook-topic": "order.updated"}, b'{"status": "x"}')],
    ids=["no-topic", "no-id"],
)
def test_a_delivery_that_names_no_event_is_a_payload_error(
    headers: dict[str, str], body: bytes
) -> None:
    with pytest.raises(PayloadError):
        WooCommerce(secret=SECRET).identify(headers, body)


def test_a_delivery_again_is_a_duplicate_and_a_new_change_is_new(tmp_path: object) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/woocommerce.db")
    inbox.add_source(WooCommerce(secret=SECRET))
    ping = inbox.receive("woocommerce", {"User-Agent": "WooCommerce"}, b"webhook_id=3")
    first = inbox.receive("woocommerce", delivery(), BODY)
    again = inbox.receive("woocommerce", delivery(), BODY)
    changed = json.dumps({**ORDER, "date_modified_gmt": "2020-03-12T09:00:00"}).encode()
    later = inbox.receive("woocommerce", delivery(changed), changed)
    forged = inbox.receive("woocommerce", delivery(secret="guessed"), BODY)
    with inbox.store.engine.connect() as connection:
        stored = connection.execute(sa.select(sa.func.count()).select_from(events)).scalar()
    inbox.close()
    assert (ping.status_code, ping.body) == (200, {"status": "ping"})
    assert [r.body["status"] for r in (first, again, later)] == [
        "accepted",
        "duplicate",
        "accepted",
    ]
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")
    assert stored == 2  # the two changes; the ping stored nothing


def test_the_kits_signer_follows_woocommerces_recipe() -> None:
    headers, body = kit_sign(WooCommerce(secret=SECRET), ORDER, topic="order.created")
    assert headers["X-WC-Webhook-Signature"] == generate_signature(body)
    assert (headers["X-WC-Webhook-Resource"], headers["X-WC-Webhook-Event"]) == (
        "order",
        "created",
    )
