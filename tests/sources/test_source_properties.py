"""Property tests over every source: malformed input only ever raises our own errors.

The sources promise that every malformed delivery becomes a `VerificationError` (from `verify`)
or a `PayloadError` (from `identify`); nothing else escapes. Headers here are arbitrary text under
the real header names (garbage, non-ASCII, lone surrogates, huge numbers, separators), bodies are
arbitrary bytes, and deliveries are also built correctly signed and then partly spoiled.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tests.support.pki import paypal_signing

from hookinbox._errors import (
    DeliveryIgnored,
    PayloadError,
    VerificationError,
    VerificationUnavailable,
)
from hookinbox.sources import (
    GitHub,
    HMACSource,
    Identity,
    Mollie,
    MollieClassic,
    PayPal,
    Shopify,
    Source,
    StandardWebhooks,
    Stripe,
    normalize_headers,
)
from hookinbox.sources.mollie import RESOURCE_ID

T = 1_700_000_000
NOW = float(T)
SECRET = "whsec_property_secret"
SW_KEY = b"standard-webhooks-key-bytes"
SW_SECRET = "whsec_" + base64.b64encode(SW_KEY).decode()
PAYPAL = paypal_signing()
PAYPAL_KEY = PAYPAL.key
assert isinstance(PAYPAL_KEY, rsa.RSAPrivateKey)
PAYPAL_HEADERS = (
    "paypal-transmission-id",
    "paypal-transmission-time",
    "paypal-transmission-sig",
    "paypal-cert-url",
    "paypal-auth-algo",
)

PROPERTY_SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _mac(key: bytes, message: bytes, algorithm: str = "sha256") -> bytes:
    return hmac.new(key, message, algorithm).digest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# Each signer builds a correctly signed delivery, following the provider's documentation
# independently of the source's code, with `ident` wherever the provider puts an id in a header.
Signer = Callable[[bytes, str], dict[str, str]]


def sign_stripe(body: bytes, ident: str) -> dict[str, str]:
    return {"stripe-signature": f"t={T},v1={_mac(SECRET.encode(), b'%d.' % T + body).hex()}"}


def sign_standard(body: bytes, ident: str) -> dict[str, str]:
    ident = ident or "msg_1"  # an empty webhook-id is an absent one
    signed = f"{ident}.{T}.".encode() + body
    return {
        "webhook-id": ident,
        "webhook-timestamp": str(T),
        "webhook-signature": "v1," + _b64(_mac(SW_KEY, signed)),
    }


def sign_shopify(body: bytes, ident: str) -> dict[str, str]:
    return {
        "x-shopify-hmac-sha256": _b64(_mac(SECRET.encode(), body)),
        "x-shopify-event-id": ident,
        "x-shopify-topic": "orders/create",
        "x-shopify-triggered-at": "2023-11-14T22:13:20Z",
    }


def sign_github(body: bytes, ident: str) -> dict[str, str]:
    return {
        "x-hub-signature-256": "sha256=" + _mac(SECRET.encode(), body).hex(),
        "x-github-delivery": ident,
        "x-github-event": "push",
        "x-github-hook-id": "42",
    }


def sign_mollie(body: bytes, ident: str) -> dict[str, str]:
    return {"x-mollie-signature": "sha256=" + _mac(SECRET.encode(), body).hex()}


def sign_paypal(body: bytes, ident: str) -> dict[str, str]:
    # The transmission id is the only header id; it is never the key, the body's id is.
    transmission = ident.strip().replace("|", "/")
    transmission = transmission if _paypal_usable(transmission) else "8ea3c1c0-82a5"
    text = f"{transmission}|2023-11-14T22:13:20Z|WH-HOOK|{binascii.crc32(body)}".encode()
    signature = PAYPAL_KEY.sign(text, padding.PKCS1v15(), hashes.SHA256())
    return {
        "paypal-transmission-id": transmission,
        "paypal-transmission-time": "2023-11-14T22:13:20Z",
        "paypal-transmission-sig": _b64(signature),
        "paypal-cert-url": "https://api.paypal.com/v1/notifications/certs/CERT-1",
        "paypal-auth-algo": "SHA256withRSA",
    }


def _paypal_usable(ident: str) -> bool:
    return 0 < len(ident) <= 255 and ident.isascii() and ident.isprintable()


def sign_hmac_hex(body: bytes, ident: str) -> dict[str, str]:
    return {"x-signature": _mac(SECRET.encode(), body).hex()}


def sign_hmac_full(body: bytes, ident: str) -> dict[str, str]:
    signed = b"%d." % T + body
    return {
        "x-signature": "v1=" + _b64(_mac(SECRET.encode(), signed)),
        "x-timestamp": str(T),
        "x-id": ident,
        "x-type": "thing.happened",
    }


def sign_hmac_paths(body: bytes, ident: str) -> dict[str, str]:
    return {"x-signature": _mac(SECRET.encode(), body, "sha512").hex()}


@dataclass(frozen=True)
class Case:
    make: Callable[[], Source]
    sign: Signer
    header_names: tuple[str, ...]


CASES: dict[str, Case] = {
    "stripe": Case(lambda: Stripe(secret=SECRET), sign_stripe, ("stripe-signature",)),
    "standard": Case(
        lambda: StandardWebhooks(secret=SW_SECRET),
        sign_standard,
        (
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
            "svix-id",
            "svix-timestamp",
            "svix-signature",
        ),
    ),
    "shopify": Case(
        lambda: Shopify(secret=SECRET),
        sign_shopify,
        tuple(
            prefix + name
            for prefix in ("x-", "")
            for name in (
                "shopify-hmac-sha256",
                "shopify-event-id",
                "shopify-webhook-id",
                "shopify-topic",
                "shopify-triggered-at",
            )
        ),
    ),
    "github": Case(
        lambda: GitHub(secret=SECRET),
        sign_github,
        ("x-hub-signature-256", "x-github-delivery", "x-github-event", "x-github-hook-id"),
    ),
    "github-scoped": Case(
        lambda: GitHub(secret=SECRET, scope_by_hook=True),
        sign_github,
        ("x-hub-signature-256", "x-github-delivery", "x-github-event", "x-github-hook-id"),
    ),
    "mollie": Case(lambda: Mollie(secret=SECRET), sign_mollie, ("x-mollie-signature",)),
    "paypal": Case(
        lambda: PayPal(webhook_id="WH-HOOK", certificate=PAYPAL.pem), sign_paypal, PAYPAL_HEADERS
    ),
    "paypal-tolerance": Case(
        lambda: PayPal(webhook_id="WH-HOOK", certificate=PAYPAL.pem, tolerance=300),
        sign_paypal,
        PAYPAL_HEADERS,
    ),
    "hmac-hex": Case(
        lambda: HMACSource(name="hex", secret=SECRET, signature_header="X-Signature"),
        sign_hmac_hex,
        ("x-signature",),
    ),
    "hmac-full": Case(
        lambda: HMACSource(
            name="full",
            secret=SECRET,
            signature_header="X-Signature",
            encoding="base64",
            signature_prefix="v1=",
            timestamp_header="X-Timestamp",
            id_header="X-Id",
            type_header="X-Type",
            time_field="meta.time",
        ),
        sign_hmac_full,
        ("x-signature", "x-timestamp", "x-id", "x-type"),
    ),
    "hmac-paths": Case(
        lambda: HMACSource(
            name="paths",
            secret=SECRET,
            signature_header="X-Signature",
            algorithm="sha512",
            id_field="data.id",
            type_field="data.kind",
            time_field="at",
        ),
        sign_hmac_paths,
        ("x-signature",),
    ),
}

every_source = pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))


# -- strategies ----------------------------------------------------------------------------------

FRAGMENTS = [
    "",
    " ",
    "  ",
    ",",
    ", ",
    "=",
    "==",
    ";",
    ".",
    "\t",
    "\n",
    "\x00",
    "\u00e9",
    "\u200b",
    "\ufeff",
    "t",
    "t=",
    "v1",
    "v1=",
    "v1,",
    "v1a,",
    "v0=",
    "v2,",
    "sha256=",
    "sha1=",
    "h1=",
    str(T),
    f"t={T}",
    "t=0",
    "t=-1",
    "t=" + "9" * 30,
    "9" * 400,
    "-" + "9" * 20,
    "1e308",
    "NaN",
    "Infinity",
    "0x10",
    "\u0661\u0662\u0663",
    "\uff11\uff12",
    "0" * 64,
    "ff" * 32,
    "AAAA",
    "====",
    "A",
    _b64(b"\x00" * 32),
    _b64(b"\x00" * 64),
    "orders/create",
    "evt_1",
    "msg_1",
    "whsec_",
    "\ud800",
    "\udfff",
    "|",
    "SHA256withRSA",
    "2023-11-14T22:13:20Z",
    "https://api.paypal.com/v1/notifications/certs/CERT-1",
    "WH-HOOK",
]

nasty_text = st.one_of(
    st.text(max_size=30),
    st.text(st.characters(exclude_categories=()), max_size=12),  # surrogates allowed
    st.text(st.characters(categories=["Cs", "Zs", "Cc", "Nd"]), min_size=1, max_size=6),
    st.integers().map(str),
    st.integers(min_value=-(10**60), max_value=10**60).map(str),
    st.floats().map(repr),
    st.sampled_from(FRAGMENTS),
    st.tuples(
        st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=6),
        st.sampled_from(["", ",", ", ", " ", "=", ";", "."]),
    ).map(lambda parts_sep: parts_sep[1].join(parts_sep[0])),
)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(),
    st.text(max_size=20),
    st.sampled_from(["evt_1", "2023-11-14T22:13:20Z", "", "x" * 300, "a\u0000b"]),
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=6,
)
event_like = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values,
        "type": json_values,
        "event_type": json_values,
        "created": json_values,
        "create_time": json_values,
        "createdAt": json_values,
        "timestamp": json_values,
        "at": json_values,
        "data": st.fixed_dictionaries(
            {}, optional={"id": json_values, "kind": json_values, "created_at": json_values}
        )
        | json_values,
        "meta": st.fixed_dictionaries({}, optional={"time": json_values}) | json_values,
    },
)


def _encode(value: Any, encoding: str) -> bytes:
    return json.dumps(value, ensure_ascii=encoding == "ascii").encode(
        "utf-8" if encoding == "ascii" else encoding
    )


bodies = st.one_of(
    st.binary(max_size=300),
    st.builds(_encode, json_values, st.sampled_from(["ascii", "utf-8", "utf-16", "utf-32"])),
    st.builds(_encode, event_like, st.sampled_from(["ascii", "utf-8", "utf-16"])),
    st.sampled_from(
        [b"", b"{}", b"[]", b"null", b"[" * 50_000, b'{"id": 1e999}', b"\xef\xbb\xbf{}"]
    ),
)
raw_bodies = st.one_of(
    st.binary(max_size=200),
    st.sampled_from([b"", b"{}", b"[]", b'{"id": "evt_1", "type": "t"}', b'{"id": 1e999}']),
)
# Signers must encode the id, so no lone surrogates here (the first property covers those).
encodable = [f for f in FRAGMENTS if not any("\ud800" <= c <= "\udfff" for c in f)]
idents = st.one_of(st.text(max_size=40), st.sampled_from(encodable), st.just("evt_1"))


@st.composite
def deliveries(draw: st.DrawFn, case: Case) -> tuple[dict[str, str], bytes]:
    """Headers from nothing or from a correctly signed delivery, then spoiled at random."""
    body = draw(raw_bodies)
    headers = case.sign(body, "evt_1") if draw(st.booleans()) else {}
    spoilt = st.fixed_dictionaries({}, optional=dict.fromkeys(case.header_names, nasty_text))
    strangers = st.dictionaries(st.text(max_size=12), nasty_text, max_size=2)
    headers = {**headers, **draw(spoilt), **draw(strangers)}
    if draw(st.booleans()):
        body = draw(raw_bodies)
    return headers, body


def _assert_identity(identity: Identity, body: bytes) -> None:
    assert isinstance(identity, Identity)
    assert isinstance(identity.event_id, str)
    assert 0 < len(identity.event_id) <= 255
    assert identity.event_id.isprintable()
    assert identity.event_type is None or isinstance(identity.event_type, str)
    if identity.occurred_at is not None:
        assert identity.occurred_at.utcoffset() == timedelta(0)
    # The payload is the parsed body, nothing else.
    assert json.dumps(identity.payload, sort_keys=True) == json.dumps(
        json.loads(body), sort_keys=True
    )


# -- properties ----------------------------------------------------------------------------------


@every_source
@PROPERTY_SETTINGS
@given(data=st.data())
def test_arbitrary_deliveries_raise_only_our_errors(case: Case, data: st.DataObject) -> None:
    source = case.make()
    headers, body = data.draw(deliveries(case))
    now = data.draw(st.one_of(st.just(NOW), st.floats(allow_nan=False)))
    try:
        source.verify(headers, body, now=now)
    except VerificationError:
        pass
    try:
        identity = source.authenticate(headers, body, now=now)
    except (VerificationError, PayloadError):
        return
    _assert_identity(identity, body)


@every_source
@pytest.mark.parametrize("value", ["\ud800", "x\udfff", "\udc80" * 3])
def test_lone_surrogates_in_any_header_raise_only_our_errors(case: Case, value: str) -> None:
    """Deterministic companion of the property above: each header in turn holds a surrogate."""
    body = b'{"id": "evt_1"}'
    for name in case.header_names:
        headers = {**case.sign(body, "evt_1"), name: value}
        try:
            identity = case.make().authenticate(headers, body, now=NOW)
        except (VerificationError, PayloadError):
            continue
        _assert_identity(identity, body)


@every_source
@PROPERTY_SETTINGS
@given(body=bodies, ident=idents)
def test_signed_deliveries_give_an_identity_or_payload_error(
    case: Case, body: bytes, ident: str
) -> None:
    source = case.make()
    headers = case.sign(body, ident)
    source.verify(headers, body, now=NOW)  # correctly signed: never a VerificationError
    try:
        identity = source.authenticate(headers, body, now=NOW)
    except PayloadError:
        return
    _assert_identity(identity, body)


@every_source
@settings(max_examples=50, deadline=None)
@given(
    body=st.binary(min_size=1, max_size=200),
    position=st.integers(min_value=0),
    bit=st.integers(min_value=0, max_value=7),
)
def test_any_changed_bit_is_rejected(case: Case, body: bytes, position: int, bit: int) -> None:
    headers = case.sign(body, "evt_1")
    tampered = bytearray(body)
    tampered[position % len(body)] ^= 1 << bit
    with pytest.raises(VerificationError):
        case.make().verify(headers, bytes(tampered), now=NOW)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=10), st.text(max_size=10)), max_size=8))
def test_normalize_headers_properties(pairs: list[tuple[str, str]]) -> None:
    result = normalize_headers(pairs)
    assert set(result) == {name.lower() for name, _ in pairs}
    for key, value in result.items():
        values = [v for name, v in pairs if name.lower() == key]
        assert value == ", ".join(values)


# -- Mollie classic: the call is never trusted, the fetched resource decides ----------------------

valid_ids = st.from_regex(r"[a-z]{1,4}_[A-Za-z0-9]{1,12}", fullmatch=True)
form_bodies = st.one_of(
    bodies,
    st.builds(lambda ident: f"id={ident}".encode(), valid_ids),
    st.builds(lambda text: b"id=" + text.encode("utf-8", "surrogatepass"), nasty_text),
    st.builds(lambda ident: f"id={ident}&x={ident}".encode(), valid_ids),
    st.sampled_from([b"id=tr_7UhSN1zuXS", b"id=tr_1&id=tr_2", b"id=tr_1&testmode=1", b"id"]),
)
state = (
    st.fixed_dictionaries(
        {},
        optional={"value": json_values, "currency": st.just("EUR")},
    )
    | json_values
)


@st.composite
def fetched(draw: st.DrawFn, resource_id: str) -> Any:
    """What a fetch may return: mostly the resource, with arbitrary fields; or nothing, or junk."""
    resource = draw(
        st.fixed_dictionaries(
            {"status": st.sampled_from(["paid", "open", "canceled"]) | json_values},
            optional={
                "resource": json_values | st.just("payment"),
                "paidAt": json_values,
                "amountRefunded": state,
                "amountChargedBack": state,
                "nested": json_values,
            },
        )
    )
    kind = draw(st.sampled_from(["resource"] * 6 + ["no id", "none", "junk"]))
    if kind == "resource":
        return {"id": resource_id, **resource}
    return {"no id": resource, "none": None}.get(kind, draw(json_values))


@PROPERTY_SETTINGS
@given(body=form_bodies, data=st.data())
def test_classic_calls_raise_only_our_errors(body: bytes, data: st.DataObject) -> None:
    calls: list[str] = []

    def fetch(resource_id: str) -> Any:
        calls.append(resource_id)
        return data.draw(fetched(resource_id))

    try:
        identity = MollieClassic(fetch=fetch).authenticate({}, body, now=NOW)
    except (VerificationError, PayloadError, DeliveryIgnored, VerificationUnavailable) as error:
        event(type(error).__name__)
        identity = None
    assert all(RESOURCE_ID.fullmatch(resource_id) for resource_id in calls)
    assert len(calls) <= 1
    if identity is not None:
        event("identity")
        (resource_id,) = calls
        assert identity.event_id.startswith(f"{resource_id}:")
        assert identity.body is not None
        _assert_identity(identity, identity.body)
