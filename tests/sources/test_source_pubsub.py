"""Google Cloud Pub/Sub push: the token judged by Google's own verifier (`google-auth`).

Tokens are made here by the JWS recipe (RFC 7515) with a test key, not with PyJWT (which the
source uses), and `google.oauth2.id_token.verify_oauth2_token` (google-auth, whose own JWT
code checks them) judges both directions, given our test key as Google's certificate through
an injected request. Google's key set is served by a real HTTPS server on loopback, reached as
`www.googleapis.com` through `tests/support/key_hosts.py`'s route.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth import exceptions as google_exceptions
from google.oauth2 import id_token
from jwt.algorithms import RSAAlgorithm
from tests.support.jws import compact_jws
from tests.support.key_hosts import KeyHost, key_host
from tests.support.loopback import Answer, Request
from tests.support.pki import issue, make_root, rsa_key

from hookinbox import Inbox
from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    MissingHeader,
    TimestampOutOfTolerance,
    VerificationError,
    VerificationUnavailable,
)
from hookinbox._headers import normalize_headers
from hookinbox.sources import GooglePubSub
from hookinbox.sources._jwt import MAX_TOKEN
from hookinbox.testing import paypal_test_certificate, sign

NOW = 1_700_000_000
AUDIENCE = "https://shop.example/webhooks/pubsub"
ACCOUNT = "pusher@shop-example.iam.gserviceaccount.com"
KEY = rsa_key("google-signing")
KID = "7c0b6913fe13820a333399ace426e70535a9a0bf"
CERTS_URL = "https://www.googleapis.com/oauth2/v3/certs"
BODY = json.dumps(
    {
        "message": {
            "attributes": {"type": "order.paid"},
            "data": base64.b64encode(b'{"order": "ord_1"}').decode(),
            "messageId": "2070443601311540",
            "publishTime": "2023-11-14T22:13:19.000Z",
        },
        "subscription": "projects/shop/subscriptions/orders-push",
    }
).encode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(claims: dict[str, Any] | None = None, *, header: dict[str, Any] | None = None,
          key: Any = KEY, secret: bytes | None = None) -> str:  # fmt: skip
    """A JWS made by RFC 7515's recipe: RS256 with `key`, or HS256 with `secret`."""
    now = claims.pop("now", NOW) if claims else NOW
    body = {
        "aud": AUDIENCE, "email": ACCOUNT, "email_verified": True, "exp": now + 3600,
        "iat": now, "iss": "https://accounts.google.com", "sub": "1137742644630",
        **(claims or {}),
    }  # fmt: skip
    head = {"alg": "HS256" if secret is not None else "RS256", "kid": KID, "typ": "JWT"}
    return compact_jws({**head, **(header or {})}, body, key=key, secret=secret)


def jwks(*keys: tuple[str, Any]) -> bytes:
    found = []
    for kid, private in keys:
        jwk = json.loads(RSAAlgorithm.to_jwk(private.public_key()))
        found.append({**jwk, "kid": kid, "alg": "RS256", "use": "sig"})
    return json.dumps({"keys": found}).encode()


@dataclass
class GoogleKeys:
    document: bytes = field(default_factory=lambda: jwks((KID, KEY)))
    status: int = 200
    cache_control: str = "public, max-age=19826, must-revalidate, no-transform"

    def respond(self, request: Request) -> Answer:
        if self.status != 200:
            return self.status, {}, b""
        return (
            200,
            {"content-type": "application/json", "cache-control": self.cache_control},
            (self.document),
        )


@dataclass
class World:
    google: GoogleKeys
    host: KeyHost

    def source(self, **options: Any) -> GooglePubSub:
        return GooglePubSub(
            audience=AUDIENCE, service_account=ACCOUNT, transport=self.host.route, **options
        )

    def verify(self, bearer: str, *, now: float = NOW, **options: Any) -> None:
        self.source(**options).verify({"authorization": f"Bearer {bearer}"}, BODY, now=now)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    google = GoogleKeys()
    with key_host(tmp_path, ["www.googleapis.com"], google.respond) as host:
        yield World(google, host)


# -- Google's verifier as the judge -----------------------------------------------------------


class _Response:
    def __init__(self, data: bytes) -> None:
        self.status = 200
        self.data = data


def google_accepts(bearer: str, public_pem: bytes, kid: str = KID) -> bool:
    """google-auth's verify_oauth2_token, given `public_pem` as Google's certificate `kid`."""
    certificates = json.dumps({kid: public_pem.decode()}).encode()
    try:
        claims = id_token.verify_oauth2_token(
            bearer, lambda url, method="GET": _Response(certificates), audience=AUDIENCE
        )
    except (ValueError, google_exceptions.GoogleAuthError):
        return False
    return claims.get("email") == ACCOUNT and claims.get("email_verified") is True


def _certificate_pem(private: Any) -> bytes:
    return issue(make_root("google"), "googleapis.com", key=private).pem


@pytest.mark.parametrize(
    "claims",
    [
        {},
        {"aud": "https://elsewhere.example/push"},
        {"iss": "https://evil.example"},
        {"exp": int(time.time()) - 3600},
        {"email_verified": False},
    ],
    ids=["valid", "audience", "issuer", "expired", "unverified"],
)
def test_we_agree_with_google_auth(world: World, claims: dict[str, Any]) -> None:
    now = int(time.time())  # google-auth holds exp and iat to its own clock
    bearer = token({"now": now, **claims})
    ours = True
    try:
        world.verify(bearer, now=now)
    except VerificationError:
        ours = False
    assert ours == google_accepts(bearer, _certificate_pem(KEY))


def test_google_auth_accepts_what_the_kit_signs() -> None:
    pem = paypal_test_certificate().pem
    source = GooglePubSub(audience=AUDIENCE, service_account=ACCOUNT, keys=pem)
    headers, body = sign(source, {"order": "ord_1"})
    bearer = headers["Authorization"].removeprefix("Bearer ")
    assert google_accepts(bearer, pem.encode(), kid="hookinbox-test-key")
    assert not google_accepts(bearer, _certificate_pem(KEY), kid="hookinbox-test-key")
    source.verify(normalize_headers(headers), body, now=time.time())


# -- hostile tokens ---------------------------------------------------------------------------


def test_alg_none_is_refused(world: World) -> None:
    with pytest.raises(BadSignature, match="'none'"):
        world.verify(token(header={"alg": "none"}))
    assert world.host.attempts == []


def test_hs256_signed_with_googles_public_key_is_refused(world: World) -> None:
    public = KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with pytest.raises(BadSignature, match="'HS256'"):
        world.verify(token(secret=public))


@pytest.mark.parametrize(
    ("claims", "error", "match"),
    [
        ({"exp": NOW - 61}, TimestampOutOfTolerance, "expired"),
        ({"iat": NOW + 61}, TimestampOutOfTolerance, "future"),
        ({"aud": "https://elsewhere.example/push"}, BadSignature, "audience"),
        ({"aud": [AUDIENCE + "/x"]}, BadSignature, "audience"),
        ({"iss": "https://evil.example"}, BadSignature, "issuer"),
        ({"email": "someone@else.iam.gserviceaccount.com"}, BadSignature, "email"),
        ({"email_verified": "true"}, BadSignature, "verified"),
        ({"exp": "soon"}, BadSignature, "number"),
    ],
)
def test_a_claim_out_of_bounds_is_refused(
    world: World, claims: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        world.verify(token(claims))


def test_the_leeway_is_a_minute(world: World) -> None:
    world.verify(token({"exp": NOW - 60, "iat": NOW - 3660}))
    world.verify(token({"iat": NOW + 60}))


def test_a_huge_token_is_refused_before_it_is_decoded(world: World) -> None:
    huge = token({"padding": "x" * MAX_TOKEN})
    with pytest.raises(BadSignature, match="longer"):
        GooglePubSub(audience=AUDIENCE, service_account=ACCOUNT, transport=world.host.route).verify(
            {"authorization": f"Bearer {huge}"}, BODY, now=NOW
        )
    assert world.host.attempts == []


def test_a_token_signed_by_another_key_is_refused(world: World) -> None:
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(BadSignature, match="InvalidSignature"):
        world.verify(token(key=stranger))


def test_no_bearer_token_is_refused() -> None:
    source = GooglePubSub(
        audience=AUDIENCE, service_account=ACCOUNT, keys=jwks((KID, KEY)).decode()
    )
    with pytest.raises(MissingHeader):
        source.verify({}, BODY, now=NOW)
    for value in ("Basic abc", "Bearer", "Bearer a.b", token()):
        with pytest.raises(BadSignature):
            source.verify({"authorization": value}, BODY, now=NOW)


# -- Google's keys: fetched once, by kid, from Google only ------------------------------------


def test_the_key_set_is_fetched_once_and_kept(world: World) -> None:
    source = world.source()
    for offset in (0, 60, 3600, 19_000):
        source.verify({"authorization": f"Bearer {token({'now': NOW + offset})}"}, BODY,
                      now=NOW + offset)  # fmt: skip
    assert world.host.attempts == [CERTS_URL]


def test_a_new_kid_is_fetched_once_a_minute_at_most(world: World) -> None:
    source = world.source()
    source.verify({"authorization": f"Bearer {token()}"}, BODY, now=NOW)
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    world.google.document = jwks((KID, KEY), ("rotated", rotated))
    new = token(header={"kid": "rotated"}, key=rotated)
    with pytest.raises(BadSignature, match="not one of Google's"):
        source.verify({"authorization": f"Bearer {new}"}, BODY, now=NOW + 30)  # too soon
    assert world.host.arrived == 1
    source.verify({"authorization": f"Bearer {new}"}, BODY, now=NOW + 61)
    assert world.host.arrived == 2
    for kid in ("random-1", "random-2", "random-3"):  # unsigned requests naming random kids
        with pytest.raises(BadSignature):
            source.verify({"authorization": f"Bearer {token(header={'kid': kid})}"}, BODY,
                          now=NOW + 90)  # fmt: skip
    assert world.host.arrived == 2


def test_googles_outage_is_503(world: World) -> None:
    world.google.status = 503
    with pytest.raises(VerificationUnavailable, match="503"):
        world.verify(token())


def test_a_key_set_without_an_rs256_key_is_refused(world: World) -> None:
    world.google.document = b'{"keys": [{"kty": "oct", "kid": "x", "k": "c2VjcmV0"}]}'
    with pytest.raises(BadSignature, match="no RS256 key"):
        world.verify(token())


def test_keys_are_checked_when_the_source_is_built() -> None:
    with pytest.raises(ConfigurationError, match="keys="):
        GooglePubSub(audience=AUDIENCE, service_account=ACCOUNT, keys="not json")
    with pytest.raises(ConfigurationError, match="RS256"):
        GooglePubSub(audience=AUDIENCE, service_account=ACCOUNT, keys={"keys": []})


# -- the envelope -----------------------------------------------------------------------------


def test_the_inbox_stores_a_message_once_under_its_message_id(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/pubsub.db")
    pem = paypal_test_certificate().pem
    source = inbox.add_source(GooglePubSub(audience=AUDIENCE, service_account=ACCOUNT, keys=pem))
    now = time.time()
    first = inbox.receive("pubsub", *sign(source, {"order": "ord_1"}, at=now))
    retry = inbox.receive("pubsub", *sign(source, {"order": "ord_1"}, at=now + 60))
    headers, body = sign(source, {"order": "ord_1"}, at=now)
    event = inbox.store.get_event("pubsub", first.body["event_id"])
    inbox.close()
    assert first.body["status"] == "accepted"
    assert retry.body["status"] == "duplicate" and not retry.key_conflict
    assert "authorization" not in event.headers  # a credential for an hour: not kept
    assert json.loads(body)["message"]["messageId"] == first.body["event_id"]
    assert headers["Authorization"].startswith("Bearer ")
