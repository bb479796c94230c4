"""Mollie: signed next-generation events, and classic calls verified by fetching the resource."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from mollie.utils.webhooks import InvalidSignatureException, SignatureValidator
from tests.support import mollie
from tests.support.loopback import Loopback, serving
from tests.testing.npm_oracles import npm_verifies, oracle_dir

from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    DeliveryIgnored,
    MissingHeader,
    PayloadError,
    VerificationError,
    VerificationUnavailable,
)
from hookinbox._headers import normalize_headers
from hookinbox.sources import Mollie, MollieAPI, MollieClassic
from hookinbox.testing import sign as kit_sign

NOW = 1_700_000_000.0
SECRET = "whsec_mollie_next_gen_0123456789"
OLD_SECRET = "whsec_mollie_previous"


def lower(headers: dict[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


# -- next generation: signed events --------------------------------------------------------------


def signed(secret: str = SECRET) -> tuple[dict[str, str], bytes]:
    body = json.dumps(mollie.next_gen_event()).encode()
    return lower(mollie.sign(body, secret)), body


def test_a_signed_event_verifies_and_is_keyed_by_its_id() -> None:
    headers, body = signed()
    identity = Mollie(secret=SECRET).authenticate(headers, body, now=NOW)
    assert identity.event_id == "event_GvJ8WHrp5isUdRub9CJyH"
    assert identity.event_type == "payment-link.paid"
    assert identity.occurred_at == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert identity.payload["_embedded"]["entity"]["id"] == "pl_qng5gbbv8NAZ5gpM5ZYgx"


def test_known_vector() -> None:
    # Computed independently: printf '{"id":"event_1"}' | openssl dgst -sha256 -hmac hush
    digest = "da5e24a5a2a7f2c355b3f021fa2c45321325614ab737e7c93550314f036e55e5"
    headers = {"x-mollie-signature": f"sha256={digest}"}
    Mollie(secret="hush").verify(headers, b'{"id":"event_1"}', now=NOW)


def test_several_secrets_verify_during_a_rotation() -> None:
    headers, body = signed(OLD_SECRET)
    with pytest.raises(BadSignature):
        Mollie(secret=SECRET).verify(headers, body, now=NOW)
    Mollie(secret=[SECRET, OLD_SECRET]).verify(headers, body, now=NOW)


@pytest.mark.parametrize("held", [SECRET, OLD_SECRET], ids=["new-secret", "old-secret"])
@pytest.mark.parametrize("joined", [False, True], ids=["apart", "joined-by-wsgi"])
def test_the_two_headers_of_a_rotation_verify_as_mollies_sdk_accepts_them(
    held: str, joined: bool
) -> None:
    """For 24 h after a rotation Mollie sends one X-Mollie-Signature per secret; its SDKs
    (mollie-api-py's and mollie-api-typescript's SignatureValidator) accept the pair holding
    either secret."""
    body = json.dumps(mollie.next_gen_event()).encode()
    values = [lower(mollie.sign(body, s))["x-mollie-signature"] for s in (OLD_SECRET, SECRET)]
    assert SignatureValidator(held).validate_payload(body.decode(), values)
    npm = npm_verifies(oracle_dir(), "mollie", held, {}, body, signatures=values)
    assert npm["valid"], "mollie-api-typescript accepts the pair too"
    pairs = (
        [("X-Mollie-Signature", ",".join(values))]
        if joined
        else [("X-Mollie-Signature", value) for value in values]
    )
    Mollie(secret=held).verify(normalize_headers(pairs), body, now=NOW)
    with pytest.raises(InvalidSignatureException):
        SignatureValidator("another").validate_payload(body.decode(), values)
    assert not npm_verifies(oracle_dir(), "mollie", "another", {}, body, signatures=values)["valid"]
    with pytest.raises(BadSignature):
        Mollie(secret="another").verify(normalize_headers(pairs), body, now=NOW)


def test_a_tampered_body_is_refused() -> None:
    headers, body = signed()
    with pytest.raises(BadSignature):
        Mollie(secret=SECRET).verify(headers, body.replace(b"42.50", b"4.25"), now=NOW)


@pytest.mark.parametrize("value", ["", "sha1=00", "sha256=zz", "sha256=" + "0" * 64, "00" * 32])
def test_a_malformed_or_wrong_signature_is_refused(value: str) -> None:
    headers, body = signed()
    headers["x-mollie-signature"] = value
    with pytest.raises((BadSignature, MissingHeader)):
        Mollie(secret=SECRET).verify(headers, body, now=NOW)


def test_no_signature_header_is_missing_header() -> None:
    _, body = signed()
    with pytest.raises(MissingHeader):
        Mollie(secret=SECRET).verify({}, body, now=NOW)


@pytest.mark.parametrize("body", [b"id=event_1", b"[]", b'{"type": "payment-link.paid"}'])
def test_an_authentic_body_without_an_event_id_is_a_payload_error(body: bytes) -> None:
    headers = lower(mollie.sign(body, SECRET))
    with pytest.raises(PayloadError):
        Mollie(secret=SECRET).authenticate(headers, body, now=NOW)


def test_an_empty_secret_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        Mollie(secret=[])


# -- classic: fetch to verify --------------------------------------------------------------------


class Payments:
    """An in-memory fetch function, standing for the user's call to Mollie's API."""

    def __init__(self, *resources: dict[str, Any]) -> None:
        self.resources = {r["id"]: r for r in resources}
        self.calls: list[str] = []

    def __call__(self, resource_id: str) -> dict[str, Any] | None:
        self.calls.append(resource_id)
        return self.resources.get(resource_id)


def classic(fetch: Any, **options: Any) -> MollieClassic:
    return MollieClassic(fetch=fetch, **options)


def call(resource_id: str = "tr_7UhSN1zuXS") -> tuple[dict[str, str], bytes]:
    headers, body = mollie.classic_call(resource_id)
    return lower(headers), body


def test_the_key_is_the_id_and_the_fetched_status_and_the_fetched_resource_is_stored() -> None:
    payments = Payments(mollie.payment())
    identity = classic(payments).authenticate(*call(), now=NOW)
    assert identity.event_id == "tr_7UhSN1zuXS:paid"
    assert identity.event_type == "payment.paid"
    assert identity.occurred_at == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert identity.body is not None
    assert json.loads(identity.body) == mollie.payment() == identity.payload
    assert payments.calls == ["tr_7UhSN1zuXS"]  # one fetch for verify and identify together


def test_an_unchanged_payment_is_the_same_key_and_a_change_is_a_new_one() -> None:
    payments = Payments(mollie.payment(status="open"))
    source = classic(payments)
    first = source.authenticate(*call(), now=NOW).event_id
    again = source.authenticate(*call(), now=NOW).event_id
    payments.resources["tr_7UhSN1zuXS"] = mollie.payment(status="paid")
    paid = source.authenticate(*call(), now=NOW).event_id
    refunded = mollie.payment(amountRefunded={"value": "10.00", "currency": "EUR"})
    payments.resources["tr_7UhSN1zuXS"] = refunded
    partly_refunded = source.authenticate(*call(), now=NOW)
    assert (first, again, paid) == (
        "tr_7UhSN1zuXS:open",
        "tr_7UhSN1zuXS:open",
        "tr_7UhSN1zuXS:paid",
    )
    assert partly_refunded.event_id == "tr_7UhSN1zuXS:paid:refunded=10.00"
    assert partly_refunded.occurred_at is None  # paidAt does not date a refund


def test_a_chargeback_is_a_new_event() -> None:
    charged_back = mollie.payment(amountChargedBack={"value": "42.50", "currency": "EUR"})
    identity = classic(Payments(charged_back)).authenticate(*call(), now=NOW)
    assert identity.event_id == "tr_7UhSN1zuXS:paid:chargedback=42.50"


def test_the_state_fields_are_configurable() -> None:
    resource = mollie.payment(amountCaptured={"value": "42.50", "currency": "EUR"})
    source = classic(Payments(resource), state_fields={"captured": "amountCaptured.value"})
    assert source.authenticate(*call(), now=NOW).event_id == "tr_7UhSN1zuXS:paid:captured=42.50"


def test_an_unknown_id_is_ignored() -> None:
    with pytest.raises(DeliveryIgnored):
        classic(Payments()).authenticate(*call("tr_unknown1"), now=NOW)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"id=",
        b"tr_7UhSN1zuXS",
        b"id=tr_1&id=tr_2",
        b"id=tr_../../x",
        b"id=tr_%00",
        b"id=TR_1",
        b"id=tr_" + b"a" * 65,
        b"\xff",
        b'{"id": "tr_1"}',
        b"id=tr_1;x",
    ],
)
def test_a_body_naming_no_mollie_id_is_refused_without_a_fetch(body: bytes) -> None:
    payments = Payments(mollie.payment())
    with pytest.raises(VerificationError):
        classic(payments).authenticate({}, body, now=NOW)
    assert payments.calls == []


def test_other_form_fields_are_ignored() -> None:
    payments = Payments(mollie.payment())
    body = b"id=tr_7UhSN1zuXS&testmode=1"
    assert classic(payments).authenticate({}, body, now=NOW).event_id == "tr_7UhSN1zuXS:paid"


def test_a_fetch_that_raises_is_unavailable() -> None:
    def broken(resource_id: str) -> dict[str, Any] | None:
        raise TimeoutError("Mollie took too long")

    with pytest.raises(VerificationUnavailable, match="TimeoutError"):
        classic(broken).authenticate(*call(), now=NOW)


@pytest.mark.parametrize(
    "resource",
    [["tr_7UhSN1zuXS"], "tr_7UhSN1zuXS", {"id": "tr_other", "status": "paid"}, {"status": "paid"}],
)
def test_a_fetch_returning_another_resource_is_unavailable(resource: Any) -> None:
    with pytest.raises(VerificationUnavailable):
        classic(lambda _id: resource).authenticate(*call(), now=NOW)


@pytest.mark.parametrize(
    "resource",
    [
        {"id": "tr_7UhSN1zuXS"},
        {"id": "tr_7UhSN1zuXS", "status": ""},
        {"id": "tr_7UhSN1zuXS", "status": 3},
        {"id": "tr_7UhSN1zuXS", "status": "paid", "amount": float("nan")},
        {"id": "tr_7UhSN1zuXS", "status": "paid", "when": datetime(2023, 1, 1)},
        {"id": "tr_7UhSN1zuXS", "status": "x" * 250},
    ],
)
def test_a_fetched_resource_that_cannot_be_an_event_is_a_payload_error(
    resource: dict[str, Any],
) -> None:
    with pytest.raises(PayloadError):
        classic(lambda _id: resource).authenticate(*call(), now=NOW)


def test_the_redelivery_window_is_configurable() -> None:
    assert classic(Payments()).redelivery_window == timedelta(days=3)
    assert Mollie(secret="s", redelivery_window=timedelta(days=1)).redelivery_window == timedelta(
        days=1
    )


# -- MollieAPI: the ready-made fetch, against a loopback imitation of Mollie's API ---------------


@pytest.fixture
def api() -> Iterator[tuple[mollie.MollieImitation, Loopback]]:
    imitation = mollie.MollieImitation({"tr_7UhSN1zuXS": mollie.payment()})
    with serving(imitation.respond) as loopback:
        yield imitation, loopback


def mollie_api(loopback: Loopback, **options: Any) -> MollieAPI:
    return MollieAPI(api_key=mollie.API_KEY, base_url=loopback.url + "/v2", **options)


def test_mollie_api_fetches_a_payment(api: tuple[mollie.MollieImitation, Loopback]) -> None:
    _, loopback = api
    source = classic(mollie_api(loopback))
    identity = source.authenticate(*call(), now=NOW)
    assert identity.event_id == "tr_7UhSN1zuXS:paid"
    (request,) = loopback.requests
    assert (request.method, request.path) == ("GET", "/v2/payments/tr_7UhSN1zuXS")


def test_mollie_api_answers_none_for_an_unknown_payment(
    api: tuple[mollie.MollieImitation, Loopback],
) -> None:
    _, loopback = api
    assert mollie_api(loopback)("tr_unknown1") is None


@pytest.mark.parametrize("status", [500, 503, 429])
def test_mollie_api_failing_is_unavailable(
    api: tuple[mollie.MollieImitation, Loopback], status: int
) -> None:
    imitation, loopback = api
    imitation.failure = status
    with pytest.raises(VerificationUnavailable, match=str(status)):
        classic(mollie_api(loopback)).authenticate(*call(), now=NOW)


def test_a_refused_api_key_is_unavailable(api: tuple[mollie.MollieImitation, Loopback]) -> None:
    _, loopback = api
    fetch = MollieAPI(api_key="test_wrong", base_url=loopback.url + "/v2")
    with pytest.raises(VerificationUnavailable, match="401"):
        classic(fetch).authenticate(*call(), now=NOW)


def test_a_slow_api_is_unavailable(api: tuple[mollie.MollieImitation, Loopback]) -> None:
    imitation, loopback = api
    imitation.delay = 2.0
    with pytest.raises(VerificationUnavailable, match="Timeout"):
        classic(mollie_api(loopback, timeout=0.3)).authenticate(*call(), now=NOW)


def test_an_unreachable_api_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/v2"
    fetch = MollieAPI(api_key=mollie.API_KEY, base_url=closed)
    with pytest.raises(VerificationUnavailable, match="ConnectError"):
        classic(fetch).authenticate(*call(), now=NOW)


def test_an_id_with_no_known_collection_is_unavailable(
    api: tuple[mollie.MollieImitation, Loopback],
) -> None:
    _, loopback = api
    with pytest.raises(VerificationUnavailable, match="sub_"):
        classic(mollie_api(loopback)).authenticate(*call("sub_8JfGzs6v3K"), now=NOW)
    assert loopback.requests == []


@pytest.mark.parametrize(
    "options",
    [
        {"api_key": ""},
        {"api_key": "k", "base_url": "http://api.mollie.com/v2"},
        {"api_key": "k", "timeout": -1},
    ],
)
def test_mollie_api_configuration_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        MollieAPI(**options)


def test_the_api_key_is_not_in_the_repr() -> None:
    assert "live_secret" not in repr(MollieAPI(api_key="live_secret"))


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_follows_mollies_recipe() -> None:
    headers, body = kit_sign(Mollie(secret="mollie-secret"), KIT_EVENT)
    digest = hmac.new(b"mollie-secret", body, hashlib.sha256).hexdigest()
    assert headers["X-Mollie-Signature"] == f"sha256={digest}"


def test_the_kit_sends_mollie_classic_an_unsigned_form() -> None:
    source = MollieClassic(fetch=lambda resource_id: None)
    assert kit_sign(source, {"id": "tr_WDqYK6vllg"}) == (
        {"Content-Type": "application/x-www-form-urlencoded"},
        b"id=tr_WDqYK6vllg",
    )
