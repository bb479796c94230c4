"""Netlify: `X-Webhook-Signature`, judged by Netlify's documented recipe.

Netlify publishes no verifier. Its documentation: with a JWS secret token set, each call
carries a JSON Web Signature, HS256 under that token, whose claims are `iss: "netlify"` and
`sha256`, the SHA-256 of the body. The tokens here are made by that recipe with `hmac` alone
(RFC 7515's compact form), apart from the source's PyJWT, and the recipe judges what the test
kit signs.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import pytest

from hookinbox import Inbox
from hookinbox._errors import BadSignature, ConfigurationError, MissingHeader, PayloadError
from hookinbox.sources import Netlify
from hookinbox.sources._jwt import MAX_TOKEN
from hookinbox.testing import sign

NOW = 1_700_000_000
SECRET = "netlify-jws-secret-token-of-32-bytes!"
DEPLOY = {
    "id": "6553d6f5a5b1a30008091234",
    "site_id": "c6a1f2d8-9a3c-4a8d-9f3e-2b5d7c1e0a11",
    "state": "ready",
    "created_at": "2023-11-14T22:13:20.000Z",
    "updated_at": "2023-11-14T22:14:02.000Z",
}
BODY = json.dumps(DEPLOY).encode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def documented(body: bytes, secret: str = SECRET, **overrides: Any) -> str:
    head = {"alg": "HS256", "typ": "JWT", **overrides.pop("header", {})}
    claims = {"iss": "netlify", "sha256": hashlib.sha256(body).hexdigest(), **overrides}
    signing_input = f"{b64url(json.dumps(head).encode())}.{b64url(json.dumps(claims).encode())}"
    signature = hmac.new(secret.encode(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(signature if head['alg'] != 'none' else b'')}"


def documented_accepts(token: str, body: bytes, secret: str = SECRET) -> bool:
    head, payload, signature = token.split(".")
    if json.loads(base64.urlsafe_b64decode(head + "==")).get("alg") != "HS256":
        return False
    expected = hmac.new(secret.encode(), f"{head}.{payload}".encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(b64url(expected), signature):
        return False
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return (
        claims.get("iss") == "netlify" and claims.get("sha256") == hashlib.sha256(body).hexdigest()
    )


def ours_accepts(token: str, body: bytes) -> bool:
    try:
        Netlify(secret=SECRET).verify({"x-webhook-signature": token}, body, now=NOW)
    except BadSignature:
        return False
    return True


@pytest.mark.parametrize(
    ("token", "body"),
    [
        (documented(BODY), BODY),
        (documented(BODY), BODY + b" "),
        (documented(BODY, iss="netlify.evil"), BODY),
        (documented(BODY, secret="another-secret-token-of-32-bytes!!"), BODY),
        (documented(BODY, header={"alg": "none"}), BODY),
        (documented(BODY, header={"alg": "HS512"}), BODY),
    ],
    ids=["valid", "body", "issuer", "secret", "none", "hs512"],
)
def test_we_agree_with_netlifys_recipe(token: str, body: bytes) -> None:
    assert ours_accepts(token, body) == documented_accepts(token, body)


def test_the_recipe_accepts_what_the_kit_signs() -> None:
    source = Netlify(secret=SECRET)
    headers, body = sign(source, DEPLOY, event="deploy_succeeded")
    assert documented_accepts(headers["X-Webhook-Signature"], body)
    assert not documented_accepts(headers["X-Webhook-Signature"], body + b" ")
    identity = source.authenticate({k.lower(): v for k, v in headers.items()}, body, now=NOW)
    assert identity.event_type == "deploy_succeeded"


def test_hostile_tokens_are_refused() -> None:
    source = Netlify(secret=SECRET)
    for token, match in [
        (documented(BODY, header={"alg": "none"}), "'none'"),
        (documented(BODY, header={"alg": "RS256"}), "'RS256'"),
        ("x" * (MAX_TOKEN + 1), "longer"),
        ("a.b", "compact"),
        (documented(BODY, iss=None), "issuer"),
        (documented(BODY, sha256=123), "SHA-256"),
    ]:
        with pytest.raises(BadSignature, match=match):
            source.verify({"x-webhook-signature": token}, BODY, now=NOW)
    with pytest.raises(MissingHeader):
        source.verify({}, BODY, now=NOW)


def test_an_old_and_a_new_secret_both_verify() -> None:
    new = "a-new-netlify-jws-secret-of-32-bytes"
    source = Netlify(secret=[SECRET, new])
    for secret in (SECRET, new):
        source.verify({"x-webhook-signature": documented(BODY, secret)}, BODY, now=NOW)


def test_a_short_secret_is_refused_when_the_source_is_built() -> None:
    with pytest.raises(ConfigurationError, match="32 bytes"):
        Netlify(secret="short")


def test_a_deploy_is_keyed_by_id_and_state_and_a_submission_by_id(tmp_path: Path) -> None:
    inbox = Inbox(f"sqlite:///{tmp_path}/netlify.db")
    netlify = inbox.add_source(Netlify(secret=SECRET))
    building = inbox.receive("netlify", *sign(netlify, {**DEPLOY, "state": "building"}))
    ready = inbox.receive("netlify", *sign(netlify, DEPLOY))
    again = inbox.receive("netlify", *sign(netlify, DEPLOY))
    form = inbox.receive("netlify", *sign(netlify, {"id": "sub_1", "form_id": "f1", "data": {}}))
    inbox.close()
    assert building.body["event_id"] == f"{DEPLOY['id']}:building"
    assert ready.body["event_id"] == f"{DEPLOY['id']}:ready"
    assert again.body["status"] == "duplicate"
    assert form.body["event_id"] == "sub_1"


def test_a_body_without_an_id_is_a_bad_request() -> None:
    with pytest.raises(PayloadError, match="id"):
        Netlify(secret=SECRET).identify({}, b'{"state": "ready"}')
