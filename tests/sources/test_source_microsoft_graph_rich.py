"""Microsoft Graph rich notifications: the `validationTokens` judged by Microsoft's documented
recipe ("validating the authenticity of notifications": the signature with Microsoft's
published keys, `aud` the app id, `azp` Graph's change-notification publisher, the issuer of
the token's tenant, the expiry), written again here.

Tokens are made by the JWS recipe (RFC 7515) with a test key, not with PyJWT (which the source
uses). Microsoft's key set is served by a real HTTPS server on loopback, reached as
`login.microsoftonline.com` through `tests/support/key_hosts.py`'s route, which records every
request the fetcher tried: a URL off the allow-list is never among them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jwt.algorithms import RSAAlgorithm
from tests.support.jws import compact_jws
from tests.support.key_hosts import KeyHost, key_host
from tests.support.loopback import Answer, Request
from tests.support.pki import rsa_key

from hookinbox import Inbox
from hookinbox._errors import BadSignature, ConfigurationError, TimestampOutOfTolerance
from hookinbox.sources import MicrosoftGraphRich
from hookinbox.sources._microsoft_graph_rich import MICROSOFT_KEYS

NOW = 1_700_000_000
APP = "9f2c3c5e-1b1e-4f4e-9a57-3c1ba5f0a2d1"
TENANT = "84bd8158-6d4d-4958-8b9f-9d6445542f95"
GRAPH = "0bf30f3b-4a52-48df-9a82-234910c4a086"
STATE = "secretClientValue"
KEY = rsa_key("microsoft-signing")
KID = "nOo3ZDrODXEK1jKWhXslHR_KXEg"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(claims: dict[str, Any] | None = None, *, header: dict[str, Any] | None = None,
          key: Any = KEY, secret: bytes | None = None) -> str:  # fmt: skip
    body = {
        "aud": APP, "azp": GRAPH, "tid": TENANT, "iss": f"https://sts.windows.net/{TENANT}/",
        "iat": NOW - 60, "nbf": NOW - 60, "exp": NOW + 3600, "ver": "1.0",
        **(claims or {}),
    }  # fmt: skip
    head = {"alg": "HS256" if secret is not None else "RS256", "kid": KID, "typ": "JWT"}
    return compact_jws({**head, **(header or {})}, body, key=key, secret=secret)


def notification(ident: str, *, rich: bool = True, tenant: str = TENANT) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": ident, "subscriptionId": "76222963-cc7b-42d2-882d-8aaa69cb2ba3",
        "subscriptionExpirationDateTime": "2026-12-01T12:00:00.000Z", "changeType": "created",
        "resource": f"Teams('t')/Channels('c')/Messages('{ident}')", "clientState": STATE,
        "tenantId": tenant,
    }  # fmt: skip
    if rich:
        item["encryptedContent"] = {
            "data": "YmFzZTY0IG9mIGVuY3J5cHRlZCBkYXRh", "dataKey": "a2V5",
            "dataSignature": "c2ln", "encryptionCertificateId": "cert-1",
            "encryptionCertificateThumbprint": "07293748CC064953A3052FB978C735FB89E61C3D",
        }  # fmt: skip
    return item


def delivery(*tokens: str, items: list[dict[str, Any]] | None = None) -> bytes:
    document: dict[str, Any] = {"value": items if items is not None else [notification("m1")]}
    if tokens:
        document["validationTokens"] = list(tokens)
    return json.dumps(document).encode()


def key_set() -> bytes:
    jwk = json.loads(RSAAlgorithm.to_jwk(KEY.public_key()))
    # As Microsoft publishes them: no "alg", a certificate chain beside the key.
    return json.dumps({"keys": [{**jwk, "kid": KID, "use": "sig", "x5c": ["MIIC..."]}]}).encode()


@dataclass
class World:
    host: KeyHost

    def source(self, **options: Any) -> MicrosoftGraphRich:
        return MicrosoftGraphRich(
            client_state=STATE, app_id=APP, transport=self.host.route, **options
        )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    def respond(request: Request) -> Answer:
        return (
            200,
            {"content-type": "application/json", "cache-control": "max-age=86400"},
            key_set(),
        )

    with key_host(tmp_path, ["login.microsoftonline.com"], respond) as host:
        yield World(host)


def test_a_rich_delivery_with_valid_tokens_verifies_and_the_key_set_is_fetched_once(
    world: World,
) -> None:
    source = world.source()
    source.verify({}, delivery(token()), now=NOW)
    v2 = token({"iss": f"https://login.microsoftonline.com/{TENANT}/v2.0", "ver": "2.0"})
    source.verify({}, delivery(v2), now=NOW + 10)
    assert world.host.attempts == ["https://login.microsoftonline.com/common/discovery/v2.0/keys"]
    [event] = source.authenticate_batch({}, delivery(token()), now=NOW)
    assert event.event_id == "76222963-cc7b-42d2-882d-8aaa69cb2ba3:m1"


@pytest.mark.parametrize(
    ("claims", "header"),
    [
        ({"aud": "another-app"}, None),
        ({"azp": "a-stranger-app"}, None),
        ({"azp": None, "appid": "a-stranger-app"}, None),
        ({"iss": "https://sts.windows.net/another-tenant/"}, None),
        ({"iss": "https://evil.example/" + TENANT + "/"}, None),
        ({"tid": "another-tenant", "iss": "https://sts.windows.net/another-tenant/"}, None),
        ({}, {"alg": "none"}),
        ({}, {"alg": "RS512"}),
        ({}, {"kid": "unknown-kid"}),
    ],
    ids=["aud", "azp", "v1-appid", "iss-tenant", "iss-host", "tid", "alg-none", "alg-other", "kid"],
)
def test_a_token_that_is_not_graphs_for_this_app_and_tenant_is_refused(
    world: World, claims: dict[str, Any], header: dict[str, Any] | None
) -> None:
    with pytest.raises(BadSignature):
        world.source().verify({}, delivery(token(claims, header=header)), now=NOW)


def test_forged_expired_and_hs256_tokens_are_refused(world: World) -> None:
    source = world.source()
    with pytest.raises(BadSignature):
        source.verify({}, delivery(token(key=rsa_key("a-stranger"))), now=NOW)
    with pytest.raises(TimestampOutOfTolerance):
        source.verify({}, delivery(token()), now=NOW + 3600 + 301)
    public_pem = RSAAlgorithm.to_jwk(KEY.public_key()).encode()
    with pytest.raises(BadSignature):
        source.verify({}, delivery(token(secret=public_pem)), now=NOW)
    with pytest.raises(BadSignature):
        source.verify({}, delivery("x" * 5000), now=NOW)


def test_rich_notifications_without_tokens_are_refused_basic_ones_pass_on_client_state(
    world: World,
) -> None:
    source = world.source()
    with pytest.raises(BadSignature):
        source.verify({}, delivery(), now=NOW)  # encrypted content, tokens dropped
    basic = delivery(items=[notification("b1", rich=False)])
    source.verify({}, basic, now=NOW)
    assert world.host.attempts == []  # nothing to check: no fetch
    with pytest.raises(BadSignature):  # a valid token does not excuse a wrong clientState
        source.verify({}, delivery(token(), items=[{**notification("m2"), "clientState": "x"}]),
                      now=NOW)  # fmt: skip


def test_every_rich_tenant_needs_its_own_token_and_the_token_count_is_capped(world: World) -> None:
    other = "11111111-2222-3333-4444-555555555555"
    two_tenants = [notification("m1"), notification("m2", tenant=other)]
    with pytest.raises(BadSignature):
        world.source().verify({}, delivery(token(), items=two_tenants), now=NOW)
    other_token = token({"tid": other, "iss": f"https://sts.windows.net/{other}/"})
    world.source().verify({}, delivery(token(), other_token, items=two_tenants), now=NOW)
    with pytest.raises(BadSignature):
        world.source().verify({}, delivery(*[token({"jti": str(n)}) for n in range(9)]), now=NOW)


@pytest.mark.parametrize(
    "url",
    [
        "http://login.microsoftonline.com/common/discovery/v2.0/keys",
        "https://login.microsoftonline.com.evil.example/common/discovery/v2.0/keys",
        "https://user@login.microsoftonline.com/common/discovery/v2.0/keys",
        "https://20.190.151.1/common/discovery/v2.0/keys",
        "https://login.microsoftonline.com/common/discovery/v2.0/keys/../../../evil",
    ],
)
def test_the_key_host_allow_list_refuses_other_hosts(url: str) -> None:
    with pytest.raises(BadSignature):
        MICROSOFT_KEYS.check(url)


def test_pinned_keys_are_used_without_any_fetch_and_bad_ones_refused_at_start() -> None:
    source = MicrosoftGraphRich(client_state=STATE, app_id=APP, keys=key_set().decode())
    source.verify({}, delivery(token()), now=NOW)
    with pytest.raises(ConfigurationError):
        MicrosoftGraphRich(client_state=STATE, app_id=APP, keys={"keys": []})


def test_end_to_end_over_http(world: World, tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/graph-rich.db", clock=lambda: float(NOW))
    inbox.add_source(world.source())
    try:
        accepted = inbox.receive("microsoft-graph-rich", {}, delivery(token()))
        forged = inbox.receive("microsoft-graph-rich", {}, delivery(token({"aud": "x"})))
        validation = inbox.receive("microsoft-graph-rich", {}, b"", query="validationToken=ok")
    finally:
        inbox.close()
    assert accepted.body["accepted"] == 1
    assert (forged.status_code, forged.body["error"]) == (401, "invalid_signature")
    assert (validation.status_code, validation.content) == (200, b"ok")
