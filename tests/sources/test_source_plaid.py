"""Plaid: `Plaid-Verification`, judged by Plaid's documented recipe.

Plaid publishes no verifier (its SDKs expose the key endpoint only), so the referee is the
recipe of Plaid's "Webhook verification" page, written here apart from hookinbox on
cryptography alone (no PyJWT, which the source uses): the token's header names ES256 and a
key id, the key comes from `POST /webhook_verification_key/get`, an expired key is refused,
the ES256 signature (r and s) verifies, `iat` is within 5 minutes, and `request_body_sha256`
is the body's SHA-256. Plaid's API is a real HTTPS server on loopback, reached as
`production.plaid.com` through `tests/support/key_hosts.py`'s route.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)
from tests.support.key_hosts import KeyHost, key_host
from tests.support.loopback import Answer, Request

from hookinbox import Inbox
from hookinbox._errors import (
    BadSignature,
    PayloadError,
    TimestampOutOfTolerance,
    VerificationError,
    VerificationUnavailable,
)
from hookinbox.sources import Plaid
from hookinbox.sources._jwt import MAX_TOKEN
from hookinbox.testing import sendgrid_test_key, sign

NOW = 1_700_000_000
KEY = ec.derive_private_key(424242, ec.SECP256R1())
KID = "6c5516e1-92dc-479e-a8ff-5a51992e0001"
API = "https://production.plaid.com/webhook_verification_key/get"
BODY = json.dumps(
    {
        "environment": "production",
        "item_id": "wz666MBjYWTp2PDzzggYhM6oWWmBb",
        "webhook_code": "SYNC_UPDATES_AVAILABLE",
        "webhook_type": "TRANSACTIONS",
        "initial_update_complete": True,
        "historical_update_complete": False,
    }
).encode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def token(
    body: bytes = BODY,
    *,
    iat: int = NOW,
    header: dict[str, Any] | None = None,
    key: ec.EllipticCurvePrivateKey = KEY,
    secret: bytes | None = None,
) -> str:
    """A token as Plaid makes one: ES256 (r||s) over header.payload; or HS256 with `secret`."""
    head = {"alg": "HS256" if secret else "ES256", "kid": KID, "typ": "JWT", **(header or {})}
    claims = {"iat": iat, "request_body_sha256": hashlib.sha256(body).hexdigest()}
    signing_input = f"{b64url(json.dumps(head).encode())}.{b64url(json.dumps(claims).encode())}"
    if secret is not None:
        signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    elif head["alg"] == "none":
        signature = b""
    else:
        r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{signing_input}.{b64url(signature)}"


def jwk(key: ec.EllipticCurvePrivateKey, kid: str = KID, expired_at: int | None = None) -> dict:
    numbers = key.public_key().public_numbers()
    return {
        "alg": "ES256", "created_at": 1560466150, "crv": "P-256", "expired_at": expired_at,
        "kid": kid, "kty": "EC", "use": "sig",
        "x": b64url(numbers.x.to_bytes(32, "big")), "y": b64url(numbers.y.to_bytes(32, "big")),
    }  # fmt: skip


def documented_verify(bearer: str, body: bytes, key: dict[str, Any], now: float) -> bool:
    """Plaid's recipe on cryptography alone."""
    head_text, payload_text, signature_text = bearer.split(".")
    head = json.loads(unb64url(head_text))
    if head.get("alg") != "ES256" or key["expired_at"] is not None:
        return False
    public = ec.EllipticCurvePublicNumbers(
        int.from_bytes(unb64url(key["x"]), "big"),
        int.from_bytes(unb64url(key["y"]), "big"),
        ec.SECP256R1(),
    ).public_key()
    raw = unb64url(signature_text)
    signature = encode_dss_signature(
        int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")
    )
    try:
        public.verify(signature, f"{head_text}.{payload_text}".encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    claims = json.loads(unb64url(payload_text))
    return now - claims["iat"] <= 300 and hmac.compare_digest(
        claims["request_body_sha256"], hashlib.sha256(body).hexdigest()
    )


@dataclass
class PlaidAPI:
    keys: dict[str, dict[str, Any]] = field(default_factory=lambda: {KID: jwk(KEY)})
    status: int | None = None
    asked: list[dict[str, Any]] = field(default_factory=list)

    def respond(self, request: Request) -> Answer:
        asked = json.loads(request.body)
        self.asked.append(asked)
        if self.status is not None:
            return self.status, {}, b"{}"
        if (asked.get("client_id"), asked.get("secret")) != ("client-1", "secret-1"):
            return 400, {}, json.dumps({"error_code": "INVALID_API_KEYS"}).encode()
        found = self.keys.get(asked.get("key_id"))
        if found is None:
            return 400, {}, json.dumps({"error_code": "INVALID_FIELD"}).encode()
        return (
            200,
            {"content-type": "application/json"},
            json.dumps({"key": found, "request_id": "RZ6Omi1bzzwDaLo"}).encode(),
        )


@dataclass
class World:
    plaid: PlaidAPI
    host: KeyHost

    def source(self, **options: Any) -> Plaid:
        defaults = {"client_id": "client-1", "secret": "secret-1", "transport": self.host.route}
        return Plaid(**{**defaults, **options})

    def verify(self, bearer: str, body: bytes = BODY, *, now: float = NOW) -> None:
        self.source().verify({"plaid-verification": bearer}, body, now=now)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    plaid = PlaidAPI()
    with key_host(tmp_path, ["production.plaid.com", "sandbox.plaid.com"], plaid.respond) as host:
        yield World(plaid, host)


@pytest.mark.parametrize(
    ("make", "body", "expired"),
    [
        (lambda: token(), BODY, None),
        (lambda: token(), BODY + b" ", None),
        (lambda: token(iat=NOW - 301), BODY, None),
        (lambda: token(), BODY, NOW - 1),
        (lambda: token(key=ec.generate_private_key(ec.SECP256R1())), BODY, None),
    ],
    ids=["valid", "body", "old", "expired-key", "stranger"],
)
def test_we_agree_with_plaids_recipe(world: World, make: Any, body: bytes, expired: Any) -> None:
    world.plaid.keys[KID] = jwk(KEY, expired_at=expired)
    bearer = make()
    ours = True
    try:
        world.verify(bearer, body)
    except VerificationError:
        ours = False
    assert ours == documented_verify(bearer, body, world.plaid.keys[KID], NOW)
    assert world.plaid.asked[0] == {"client_id": "client-1", "secret": "secret-1", "key_id": KID}


def test_plaids_recipe_accepts_what_the_kit_signs() -> None:
    test_key = sendgrid_test_key()
    source = Plaid(client_id="c", secret="s", keys=test_key.public_key)
    headers, body = sign(source, json.loads(BODY), at=NOW)
    numbers = test_key.private_key.public_key().public_numbers()
    key = {
        "expired_at": None,
        "x": b64url(numbers.x.to_bytes(32, "big")),
        "y": b64url(numbers.y.to_bytes(32, "big")),
    }
    assert documented_verify(headers["Plaid-Verification"], body, key, NOW)
    assert not documented_verify(headers["Plaid-Verification"], body + b" ", key, NOW)
    source.verify({"plaid-verification": headers["Plaid-Verification"]}, body, now=NOW)


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: token(header={"alg": "none"}), BadSignature, "'none'"),
        (lambda: token(header={"alg": "RS256"}), BadSignature, "'RS256'"),
        (lambda: token(iat=NOW + 61), TimestampOutOfTolerance, "future"),
        (lambda: token(iat=NOW - 301), TimestampOutOfTolerance, "old"),
        (lambda: "x" * (MAX_TOKEN + 1), BadSignature, "longer"),
        (lambda: token(header={"kid": "k" * 200}), BadSignature, "key id"),
    ],
    ids=["none", "rs256", "future", "old", "huge", "long-kid"],
)
def test_hostile_tokens_are_refused(world: World, make: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        world.verify(make())


def test_hs256_signed_with_the_public_key_is_refused(world: World) -> None:
    public = KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with pytest.raises(BadSignature, match="'HS256'"):
        world.verify(token(secret=public))
    assert world.host.attempts == []


def test_a_key_is_asked_of_plaid_once(world: World) -> None:
    source = world.source()
    for offset in (0, 100, 86_000):
        source.verify({"plaid-verification": token(iat=NOW + offset)}, BODY, now=NOW + offset)
    assert world.host.attempts == [API]


def test_unknown_key_ids_are_refused_and_paced(world: World) -> None:
    source = world.source()
    with pytest.raises(BadSignature, match="no key"):
        source.verify({"plaid-verification": token(header={"kid": "random-1"})}, BODY, now=NOW)
    with pytest.raises(VerificationUnavailable, match="paced"):
        source.verify({"plaid-verification": token(header={"kid": "random-2"})}, BODY, now=NOW + 1)
    assert len(world.host.attempts) == 1


def test_plaids_outage_is_503(world: World) -> None:
    world.plaid.status = 500
    with pytest.raises(VerificationUnavailable, match="500"):
        world.verify(token())


def test_the_sandbox_is_asked_for_sandbox_keys(world: World) -> None:
    source = world.source(environment="sandbox")
    source.verify({"plaid-verification": token()}, BODY, now=NOW)
    assert world.host.attempts == ["https://sandbox.plaid.com/webhook_verification_key/get"]


def test_the_key_is_derived_and_a_retry_is_a_duplicate(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/plaid.db")
    plaid = inbox.add_source(Plaid(client_id="c", secret="s", keys=sendgrid_test_key().public_key))
    now = time.time()
    first = inbox.receive("plaid", *sign(plaid, BODY, at=now))
    retry = inbox.receive("plaid", *sign(plaid, BODY, at=now))  # ES256: signed anew
    inbox.close()
    assert first.body["status"] == "accepted"
    digest = hashlib.sha256(BODY).hexdigest()
    assert first.body["event_id"] == (
        f"TRANSACTIONS:SYNC_UPDATES_AVAILABLE:wz666MBjYWTp2PDzzggYhM6oWWmBb:{digest}"
    )
    assert retry.body["status"] == "duplicate" and not retry.key_conflict


def test_a_body_without_its_type_is_a_bad_request() -> None:
    with pytest.raises(PayloadError, match="webhook_type"):
        Plaid(client_id="c", secret="s", keys=sendgrid_test_key().public_key).identify({}, b"{}")
