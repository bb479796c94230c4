"""HMACSource: the configurable HMAC source."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest

from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    MissingHeader,
    PayloadError,
    TimestampOutOfTolerance,
)
from hookinbox.sources import HMACSource
from hookinbox.testing import sign as kit_sign

T = 1_700_000_000
NOW = float(T)
SECRET = "generic-secret"
EVENT = {
    "id": "evt_42",
    "type": "order.created",
    "created_at": "2023-11-14T22:13:20Z",
    "meta": {"event": "order_created", "at": 1_699_999_000},
    "data": {"object": {"id": 987, "name": "Ærø"}},
}
BODY = json.dumps(EVENT, ensure_ascii=False).encode()


def mac(message: bytes, *, secret: str = SECRET, algorithm: str = "sha256") -> bytes:
    return hmac.new(secret.encode(), message, algorithm).digest()


def hex_source(**kwargs: object) -> HMACSource:
    options: dict[str, object] = {
        "name": "acme",
        "secret": SECRET,
        "signature_header": "X-Acme-Signature",
        **kwargs,
    }
    return HMACSource(**options)  # type: ignore[arg-type]


# -- signatures --------------------------------------------------------------------------------


def test_hex_signature() -> None:
    source = hex_source()
    source.verify({"x-acme-signature": mac(BODY).hex()}, BODY, now=NOW)
    # Hex digits in either case (some providers send upper case).
    source.verify({"x-acme-signature": mac(BODY).hex().upper()}, BODY, now=NOW)
    with pytest.raises(BadSignature):
        source.verify({"x-acme-signature": mac(BODY + b"x").hex()}, BODY, now=NOW)


def test_base64_signature() -> None:
    source = hex_source(encoding="base64")
    source.verify({"x-acme-signature": base64.b64encode(mac(BODY)).decode()}, BODY, now=NOW)
    with pytest.raises(BadSignature):
        source.verify({"x-acme-signature": mac(BODY).hex()}, BODY, now=NOW)


@pytest.mark.parametrize("algorithm", ["sha1", "sha512", "sha3_256", "blake2b"])
def test_other_algorithms(algorithm: str) -> None:
    source = hex_source(algorithm=algorithm)
    source.verify({"x-acme-signature": mac(BODY, algorithm=algorithm).hex()}, BODY, now=NOW)
    with pytest.raises(BadSignature):
        source.verify({"x-acme-signature": mac(BODY).hex()}, BODY, now=NOW)


def test_prefix() -> None:
    source = hex_source(signature_prefix="sha256=")
    source.verify({"x-acme-signature": "sha256=" + mac(BODY).hex()}, BODY, now=NOW)
    with pytest.raises(BadSignature):
        source.verify({"x-acme-signature": mac(BODY).hex()}, BODY, now=NOW)
    with pytest.raises(BadSignature):
        source.verify({"x-acme-signature": "sha1=" + mac(BODY).hex()}, BODY, now=NOW)
    # Another prefix of the same length is not the prefix.
    with pytest.raises(BadSignature):
        source.verify({"x-acme-signature": "sha512=" + mac(BODY).hex()}, BODY, now=NOW)


@pytest.mark.parametrize(
    "value",
    [
        "zz",
        "abc",
        "\u0660\u0661",
        "sha256=" + "0" * 64,
        mac(BODY).hex() + "00",
        mac(BODY).hex()[:-2],
    ],
)
def test_malformed_signature_is_bad_signature(value: str) -> None:
    with pytest.raises(BadSignature):
        hex_source().verify({"x-acme-signature": value}, BODY, now=NOW)


def test_missing_signature_header() -> None:
    with pytest.raises(MissingHeader):
        hex_source().verify({"x-other": mac(BODY).hex()}, BODY, now=NOW)


def test_secret_rotation() -> None:
    source = hex_source(secret=["new-secret", SECRET])
    source.verify({"x-acme-signature": mac(BODY).hex()}, BODY, now=NOW)
    with pytest.raises(BadSignature):
        hex_source(secret="new-secret").verify({"x-acme-signature": mac(BODY).hex()}, BODY, now=NOW)


# -- signed timestamp ---------------------------------------------------------------------------


def timestamped(ts: int | str = T, *, body: bytes = BODY, signed_ts: int | None = None):  # type: ignore[no-untyped-def]
    signed = f"{ts if signed_ts is None else signed_ts}".encode() + b"." + body
    return {"x-acme-signature": mac(signed).hex(), "x-acme-timestamp": str(ts)}


def ts_source(**kwargs: object) -> HMACSource:
    return hex_source(timestamp_header="X-Acme-Timestamp", **kwargs)


@pytest.mark.parametrize("offset", [-300, 0, 300])
def test_timestamp_within_tolerance(offset: int) -> None:
    ts_source().verify(timestamped(), BODY, now=NOW + offset)


def test_signature_covers_the_timestamp() -> None:
    # The body alone is not what is signed.
    with pytest.raises(BadSignature):
        ts_source().verify(
            {"x-acme-signature": mac(BODY).hex(), "x-acme-timestamp": str(T)}, BODY, now=NOW
        )
    with pytest.raises(BadSignature):
        ts_source().verify(timestamped(T + 1, signed_ts=T), BODY, now=NOW)


@pytest.mark.parametrize("offset", [301, -301])
def test_timestamp_out_of_tolerance(offset: int) -> None:
    with pytest.raises(TimestampOutOfTolerance):
        ts_source().verify(timestamped(), BODY, now=NOW + offset)


def test_custom_tolerance_and_none() -> None:
    with pytest.raises(TimestampOutOfTolerance):
        ts_source(tolerance=5).verify(timestamped(), BODY, now=NOW + 6)
    ts_source(tolerance=None).verify(timestamped(), BODY, now=NOW + 10**8)


def test_forged_signature_with_expired_timestamp_is_bad_signature() -> None:
    forged = timestamped(T - 3600)
    forged["x-acme-signature"] = mac(b"%d." % (T - 3600) + BODY, secret="attacker").hex()
    with pytest.raises(BadSignature):
        ts_source().verify(forged, BODY, now=NOW)


def test_missing_timestamp_header() -> None:
    with pytest.raises(MissingHeader):
        ts_source().verify({"x-acme-signature": mac(BODY).hex()}, BODY, now=NOW)


@pytest.mark.parametrize("ts", ["soon", "1.5", "-1", "9" * 20])
def test_malformed_timestamp_is_bad_signature(ts: str) -> None:
    headers = {"x-acme-signature": mac(f"{ts}.".encode() + BODY).hex(), "x-acme-timestamp": ts}
    with pytest.raises(BadSignature):
        ts_source().verify(headers, BODY, now=NOW)


# -- identification ------------------------------------------------------------------------------


def test_default_fields() -> None:
    identity = hex_source().authenticate({"x-acme-signature": mac(BODY).hex()}, BODY, now=NOW)
    assert identity.event_id == "evt_42"
    assert identity.event_type == "order.created"
    assert identity.occurred_at is None
    assert identity.payload == EVENT


def test_dotted_json_paths() -> None:
    source = hex_source(id_field="data.object.id", type_field="meta.event", time_field="meta.at")
    identity = source.identify({}, BODY)
    assert identity.event_id == "987"
    assert identity.event_type == "order_created"
    assert identity.occurred_at == datetime.fromtimestamp(1_699_999_000, UTC)


def test_iso_time_field() -> None:
    identity = hex_source(time_field="created_at").identify({}, BODY)
    assert identity.occurred_at == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)


def test_id_and_type_from_headers() -> None:
    source = hex_source(id_header="X-Acme-Delivery", type_header="X-Acme-Event")
    headers = {
        "x-acme-signature": mac(BODY).hex(),
        "x-acme-delivery": "dlv_1",
        "x-acme-event": "order.paid",
    }
    identity = source.authenticate(headers, BODY, now=NOW)
    assert (identity.event_id, identity.event_type) == ("dlv_1", "order.paid")
    assert set(source.headers_to_store({**headers, "authorization": "x"})) == set(headers)


def test_no_type_field() -> None:
    assert hex_source(type_field=None).identify({}, BODY).event_type is None


@pytest.mark.parametrize(
    ("options", "headers", "body"),
    [
        ({}, {}, b'{"type": "x"}'),
        ({"id_field": "data.object.missing"}, {}, BODY),
        ({"id_field": "data.object.id"}, {}, b'{"data": [1, 2]}'),
        ({}, {}, b'[{"id": "evt_1"}]'),
        ({"id_header": "X-Acme-Delivery"}, {}, BODY),
        ({}, {}, b"not json"),
        ({}, {}, b'{"id": {"nested": true}}'),
    ],
    ids=[
        "no-id",
        "missing-path",
        "path-through-list",
        "array",
        "missing-header",
        "not-json",
        "object-id",
    ],
)
def test_missing_id_is_payload_error(
    options: dict[str, object], headers: dict[str, str], body: bytes
) -> None:
    with pytest.raises(PayloadError):
        hex_source(**options).identify(headers, body)


# -- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["md6", "SHA-256", "shake_128", "", "sha256 "])
def test_bad_algorithm_is_configuration_error(algorithm: str) -> None:
    with pytest.raises(ConfigurationError):
        hex_source(algorithm=algorithm)


@pytest.mark.parametrize(
    "options",
    [
        {"encoding": "base32"},
        {"secret": ""},
        {"secret": []},
        {"name": "a/b"},
        {"name": "n" * 65},
    ],
    ids=["encoding", "empty-secret", "no-secret", "slash", "long-name"],
)
def test_bad_options_are_configuration_errors(options: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        hex_source(**options)


# -- the test kit's signer (`hookinbox.testing.sign`, declared in the provider's module) -------

KIT_EVENT = {"id": "evt_1", "type": "invoice.paid", "note": "café ☕"}


def test_the_kits_signer_follows_the_configured_recipe() -> None:
    source = HMACSource(
        name="acme",
        secret="acme-secret",
        signature_header="X-Acme-Signature",
        signature_prefix="sha512=",
        algorithm="sha512",
        encoding="base64",
        timestamp_header="X-Acme-Timestamp",
        id_header="X-Acme-Delivery",
    )
    headers, body = kit_sign(source, KIT_EVENT, at=1_700_000_000, event_id="d-1")
    digest = hmac.new(b"acme-secret", b"1700000000." + body, hashlib.sha512).digest()
    assert headers["x-acme-signature"] == "sha512=" + base64.b64encode(digest).decode()
    assert headers["x-acme-timestamp"] == "1700000000"
    assert headers["x-acme-delivery"] == "d-1"
