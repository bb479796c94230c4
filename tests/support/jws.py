"""JSON Web Signatures made by RFC 7515's recipe, written here rather than with PyJWT (which
the sources verify with), so a mistake shared by a token's maker and its checker cannot hide."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def compact_jws(
    head: dict[str, Any],
    claims: dict[str, Any],
    *,
    key: rsa.RSAPrivateKey | None = None,
    secret: bytes | None = None,
) -> str:
    """`head.claims.signature`: HS256 with `secret`, no signature when `head` says `none`,
    else RS256 with `key`."""
    signing_input = f"{b64url(json.dumps(head).encode())}.{b64url(json.dumps(claims).encode())}"
    if secret is not None:
        signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    elif head.get("alg") == "none" or key is None:
        signature = b""
    else:
        signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(signature)}"
