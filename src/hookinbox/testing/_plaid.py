"""Plaid webhooks with a `Plaid-Verification` token signed by a test key (the `keys` extra).

Plaid signs with a key only Plaid holds. Pin a P-256 test key in the source
(`Plaid(client_id=..., secret=..., keys=sendgrid_test_key().public_key)`: the kit's P-256
test key) and `sign` finds its private half. The token is made by the JWS recipe (RFC 7515,
ES256: the signature is r and s, 32 bytes each) here, apart from the source's PyJWT: fields
`kid`, `issued_at`, `body_sha256` (what the token claims), `private_key`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from hookinbox.sources._plaid import Plaid
from hookinbox.testing._pubsub import b64url
from hookinbox.testing._sendgrid import _KEYS
from hookinbox.testing._signing import register_signer


def es256_token(key: ec.EllipticCurvePrivateKey, claims: dict[str, Any], kid: str) -> str:
    head = b64url(json.dumps({"alg": "ES256", "kid": kid, "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims).encode())
    der = key.sign(f"{head}.{payload}".encode(), ec.ECDSA(hashes.SHA256()))
    r, s = decode_dss_signature(der)
    return f"{head}.{payload}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


def _private_key(source: Plaid, fields: dict[str, Any]) -> ec.EllipticCurvePrivateKey:
    given = fields.pop("private_key", None)
    if given is not None:
        return given  # type: ignore[no-any-return]
    for key in (source._pinned or {}).values():
        numbers = key.public_numbers()
        if (numbers.x, numbers.y) in _KEYS:
            return _KEYS[(numbers.x, numbers.y)]
    raise TypeError(
        "sign() needs the private key of the Plaid source's pinned key: build the source "
        "with keys=sendgrid_test_key().public_key, or pass private_key="
    )


@register_signer(Plaid)
def _plaid(source: Plaid, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    key = _private_key(source, fields)
    claims = {
        "iat": int(fields.pop("issued_at", t)),
        "request_body_sha256": fields.pop("body_sha256", None) or hashlib.sha256(body).hexdigest(),
    }
    token = es256_token(key, claims, fields.pop("kid", "6c5516e1-92dc-479e-a8ff-5a51992e0001"))
    return {"Content-Type": "application/json", "Plaid-Verification": token}
