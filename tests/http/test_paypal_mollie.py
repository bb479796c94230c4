"""PayPal and Mollie through `inbox.asgi()`: real-shaped deliveries, the answers, what is kept.

The provider's services are real loopback servers: PayPal's certificate host over HTTPS with a
certificate authority made in the test, and an imitation of Mollie's API. Every case runs on
SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives.asymmetric import rsa

from hookinbox import Event, HandlerContext, Inbox
from hookinbox._storage._schema import events
from hookinbox.sources import Mollie, MollieAPI, MollieClassic, PayPal
from tests.support import mollie, paypal
from tests.support.asgi import ASGIClient
from tests.support.loopback import Loopback, serving
from tests.support.pki import make_pki

MOLLIE_SECRET = "whsec_mollie_e2e"
# Events dated now: an event older than the retention (90 days) would be held as stale.
NOW_TEXT = datetime.now(UTC).isoformat()


@dataclass
class World:
    inbox: Inbox
    client: ASGIClient
    certificates: paypal.CertificateHost
    certificate_host: Loopback
    mollie_api: mollie.MollieImitation
    signing_key: rsa.RSAPrivateKey
    seen: list[tuple[str, str | None, Any]]

    def paypal_delivery(self, event_id: str) -> tuple[dict[str, str], bytes]:
        cert_url = self.certificate_host.url + paypal.CERT_PATH
        return paypal.delivery(
            self.signing_key, paypal.capture_completed(event_id, NOW_TEXT), cert_url=cert_url
        )

    def rows(self) -> list[tuple[str, str, int]]:
        with self.inbox.store.engine.connect() as connection:
            query = sa.select(events.c.source, events.c.event_id, events.c.delivery_count)
            return [tuple(row) for row in connection.execute(query.order_by(events.c.id))]


@pytest.fixture
def world(db_url: str, tmp_path: Path) -> Iterator[World]:
    pki = make_pki(tmp_path)
    certificates = paypal.CertificateHost({paypal.CERT_PATH: pki.signing.pem})
    api = mollie.MollieImitation({"tr_7UhSN1zuXS": mollie.payment(status="open")})
    seen: list[tuple[str, str | None, Any]] = []
    with (
        serving(certificates.respond, tls=pki.server_tls) as certificate_host,
        serving(api.respond) as mollie_host,
    ):
        inbox = Inbox(db_url)
        inbox.add_source(
            PayPal(
                webhook_id=paypal.WEBHOOK_ID,
                ca_bundle=pki.bundle,
                test_certificate_hosts=[certificate_host.url.removeprefix("https://")],
            )
        )
        inbox.add_source(Mollie(secret=MOLLIE_SECRET))
        fetch = MollieAPI(api_key=mollie.API_KEY, base_url=mollie_host.url + "/v2")
        inbox.add_source(MollieClassic(fetch=fetch))

        @inbox.handler("paypal", "PAYMENT.CAPTURE.COMPLETED")
        @inbox.handler("mollie-classic")
        def record(event: Event, ctx: HandlerContext) -> None:
            seen.append((event.id, event.type, event.payload))

        key = pki.signing.key
        assert isinstance(key, rsa.RSAPrivateKey)
        yield World(inbox, ASGIClient(inbox.asgi()), certificates, certificate_host, api, key, seen)
        inbox.close()


# -- PayPal ----------------------------------------------------------------------------------------


def test_paypal_capture_completed_is_accepted_then_a_retry_is_a_duplicate(world: World) -> None:
    headers, body = world.paypal_delivery("WH-2WR32451HC0233532-67976317FL4543714")
    first = world.client.post("/webhooks/paypal", headers=headers, content=body)
    assert first.status_code == 200, first.text
    assert first.json() == {
        "status": "accepted",
        "event_id": "WH-2WR32451HC0233532-67976317FL4543714",
    }
    # PayPal's retry: a new transmission (id, time, signature), the same event.
    retry_headers, _ = world.paypal_delivery("WH-2WR32451HC0233532-67976317FL4543714")
    assert retry_headers["PAYPAL-TRANSMISSION-ID"] != headers["PAYPAL-TRANSMISSION-ID"]
    second = world.client.post("/webhooks/paypal", headers=retry_headers, content=body)
    assert second.json()["status"] == "duplicate"
    assert world.rows() == [("paypal", "WH-2WR32451HC0233532-67976317FL4543714", 2)]
    assert len(world.certificate_host.requests) == 1  # the certificate was fetched once
    stored = world.inbox.store.get_event("paypal", "WH-2WR32451HC0233532-67976317FL4543714")
    assert stored.body == body
    assert stored.headers["paypal-transmission-id"] in (
        headers["PAYPAL-TRANSMISSION-ID"],
        retry_headers["PAYPAL-TRANSMISSION-ID"],
    )
    assert world.inbox.process_due() == 1
    ((event_id, event_type, payload),) = world.seen
    assert (event_id, event_type) == (
        "WH-2WR32451HC0233532-67976317FL4543714",
        "PAYMENT.CAPTURE.COMPLETED",
    )
    assert payload["resource"]["amount"] == {"currency_code": "EUR", "value": "42.50"}


def test_paypal_certificate_host_down_is_503_and_nothing_is_kept(world: World) -> None:
    world.certificates.status = 502
    headers, body = world.paypal_delivery("WH-OUTAGE")
    response = world.client.post("/webhooks/paypal", headers=headers, content=body)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert response.json()["error"] == "unavailable"
    assert world.rows() == []
    world.certificates.status = 200  # PayPal's retry after the outage is accepted
    response = world.client.post("/webhooks/paypal", headers=headers, content=body)
    assert response.json() == {"status": "accepted", "event_id": "WH-OUTAGE"}


def test_paypal_forged_or_foreign_deliveries_are_401_and_nothing_is_kept(world: World) -> None:
    headers, body = world.paypal_delivery("WH-FORGED")
    tampered = world.client.post(
        "/webhooks/paypal", headers=headers, content=body.replace(b"42.50", b"0.01")
    )
    foreign = world.client.post(
        "/webhooks/paypal",
        headers={**headers, "PAYPAL-CERT-URL": "https://attacker.example" + paypal.CERT_PATH},
        content=body,
    )
    unsigned = world.client.post(
        "/webhooks/paypal", headers={"content-type": "application/json"}, content=body
    )
    for response in (tampered, foreign, unsigned):
        assert response.status_code == 401
        assert response.json()["error"] == "invalid_signature"
    assert "PAYPAL-CERT-URL" in foreign.json()["detail"]
    assert world.rows() == []


# -- Mollie next generation --------------------------------------------------------------------


def test_mollie_signed_event_is_accepted_then_a_duplicate(world: World) -> None:
    body = json.dumps(mollie.next_gen_event()).encode()
    headers = mollie.sign(body, MOLLIE_SECRET)
    first = world.client.post("/webhooks/mollie", headers=headers, content=body)
    second = world.client.post("/webhooks/mollie", headers=headers, content=body)
    assert first.json() == {"status": "accepted", "event_id": "event_GvJ8WHrp5isUdRub9CJyH"}
    assert second.json()["status"] == "duplicate"
    forged = world.client.post(
        "/webhooks/mollie", headers=mollie.sign(body, "whsec_other"), content=body
    )
    assert forged.status_code == 401
    assert world.rows() == [("mollie", "event_GvJ8WHrp5isUdRub9CJyH", 2)]


# -- Mollie classic --------------------------------------------------------------------------------


def post_classic(world: World, resource_id: str = "tr_7UhSN1zuXS") -> Any:
    headers, body = mollie.classic_call(resource_id)
    return world.client.post("/webhooks/mollie-classic", headers=headers, content=body)


def test_mollie_classic_stores_the_fetched_payment_keyed_by_its_status(world: World) -> None:
    opened = post_classic(world)
    repeated = post_classic(world)
    world.mollie_api.payments["tr_7UhSN1zuXS"] = mollie.payment(paid_at=NOW_TEXT)
    paid = post_classic(world)
    assert opened.json() == {"status": "accepted", "event_id": "tr_7UhSN1zuXS:open"}
    assert repeated.json() == {"status": "duplicate", "event_id": "tr_7UhSN1zuXS:open"}
    assert paid.json() == {"status": "accepted", "event_id": "tr_7UhSN1zuXS:paid"}
    assert world.rows() == [
        ("mollie-classic", "tr_7UhSN1zuXS:open", 2),
        ("mollie-classic", "tr_7UhSN1zuXS:paid", 1),
    ]
    stored = world.inbox.store.get_event("mollie-classic", "tr_7UhSN1zuXS:paid")
    assert json.loads(stored.body) == mollie.payment(paid_at=NOW_TEXT)  # not the call's `id=`
    assert world.inbox.process_due() == 2
    assert [(event_id, event_type) for event_id, event_type, _ in world.seen] == [
        ("tr_7UhSN1zuXS:open", "payment.open"),
        ("tr_7UhSN1zuXS:paid", "payment.paid"),
    ]
    assert world.seen[1][2]["paidAt"] == NOW_TEXT


def test_mollie_classic_unknown_id_is_200_and_nothing_is_kept(world: World) -> None:
    response = post_classic(world, "tr_doesNotExist")
    assert response.status_code == 200
    assert response.json() == {"status": "ignored"}
    assert world.rows() == []


def test_mollie_classic_api_down_is_503_and_nothing_is_kept(world: World) -> None:
    world.mollie_api.failure = 503
    response = post_classic(world)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert world.rows() == []


@pytest.mark.parametrize("body", [b"", b"id=", b'{"id": "tr_7UhSN1zuXS"}', b"id=../../v2/me"])
def test_mollie_classic_body_naming_no_id_is_401_without_a_fetch(world: World, body: bytes) -> None:
    response = world.client.post(
        "/webhooks/mollie-classic",
        headers={"content-type": "application/x-www-form-urlencoded"},
        content=body,
    )
    assert response.status_code == 401
    assert world.rows() == []
