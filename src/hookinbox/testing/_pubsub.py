"""Pub/Sub pushes with a token signed by a test key (the `keys` extra).

Google signs a push's ID token with a key only Google holds. Pin a test key in the source
(`GooglePubSub(audience=..., service_account=..., keys=paypal_test_certificate().pem)`: any
RSA test certificate of the kit) and `sign` finds its private half. `sign(source, data)` sends
`data` (bytes, text or a JSON value) base64-encoded in the push envelope, with a token made by
the JWS recipe (RFC 7515, RS256) here, apart from the source's PyJWT: fields `audience`,
`email`, `email_verified`, `issuer`, `issued_at`, `expires_in`, `kid`, `attributes`,
`subscription`, `message_id`, `private_key`.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from hookinbox.sources._provider import body_id, iso
from hookinbox.sources._pubsub import GooglePubSub
from hookinbox.testing._paypal import _KEYS
from hookinbox.testing._signing import register_signer


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def rs256_token(key: rsa.RSAPrivateKey, claims: dict[str, Any], kid: str) -> str:
    head = b64url(json.dumps({"alg": "RS256", "kid": kid, "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims).encode())
    signature = key.sign(f"{head}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{head}.{payload}.{b64url(signature)}"


def _private_key(source: GooglePubSub, fields: dict[str, Any]) -> rsa.RSAPrivateKey:
    given = fields.pop("private_key", None)
    if given is not None:
        return given  # type: ignore[no-any-return]
    for key in (source._pinned or {}).values():
        if isinstance(key, rsa.RSAPublicKey) and key.public_numbers().n in _KEYS:
            return _KEYS[key.public_numbers().n]
    raise TypeError(
        "sign() needs the private key of the Pub/Sub source's pinned key: build the source "
        "with keys=paypal_test_certificate().pem, or pass private_key="
    )


@register_signer(GooglePubSub)
def _pubsub(
    source: GooglePubSub, body: bytes, t: int, fields: dict[str, Any]
) -> tuple[dict[str, str], bytes]:
    key = _private_key(source, fields)
    issued = int(fields.pop("issued_at", t))
    claims = {
        "aud": fields.pop("audience", None) or sorted(source.rules.audiences or ())[0],
        "azp": "113774264463038321964",
        "email": fields.pop("email", None) or sorted(source.service_accounts)[0],
        "email_verified": fields.pop("email_verified", True),
        "exp": issued + int(fields.pop("expires_in", 3600)),
        "iat": issued,
        "iss": fields.pop("issuer", "https://accounts.google.com"),
        "sub": "113774264463038321964",
    }
    token = rs256_token(key, claims, fields.pop("kid", "hookinbox-test-key"))
    message_id = fields.pop("message_id", None) or str(int(body_id(source, body)[:8], 16))
    envelope = {
        "message": {
            "attributes": fields.pop("attributes", {}),
            "data": base64.b64encode(body).decode(),
            "messageId": message_id,
            "message_id": message_id,
            "publishTime": iso(t),
            "publish_time": iso(t),
        },
        "subscription": fields.pop("subscription", "projects/hookinbox/subscriptions/push"),
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "User-Agent": "APIs-Google; (+https://developers.google.com/webmasters/APIs-Google.html)",
    }
    return headers, json.dumps(envelope).encode()
