"""Plaid: an ES256 JWT in `Plaid-Verification`, its key fetched from Plaid's API by `kid`.

Plaid's documented recipe: read the token's header (its `alg` must be ES256), fetch the key
its `kid` names with `POST /webhook_verification_key/get` (your client id and secret; the key
is a JWK, cached: a key id names one key for good), refuse a key Plaid marks expired
(`expired_at`), verify the token, hold its `iat` within 5 minutes of now, and compare its
`request_body_sha256` claim with the SHA-256 of the raw body. The token is checked by
`sources/_jwt.py` (ES256 pinned) and the key fetched and cached by `sources/_keys.py` (Plaid's
hosts only).

Plaid's webhooks carry no id of their own, and a retry repeats the body: the key is derived,
`<webhook_type>:<webhook_code>:<item_id>:<sha256 of the body>`. Two notifications with the
same body are one event while it is kept (docs/sources/plaid.md says what that means).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import ssl
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from hookinbox._errors import BadSignature, ConfigurationError, PayloadError, VerificationError
from hookinbox.sources import _jwt
from hookinbox.sources._base import Source
from hookinbox.sources._identity import Identity, event_key, optional_text, parse_json_object
from hookinbox.sources._keys import MAX_AGE, AllowList, Fetch, Fetcher, KeyCache, Parsed
from hookinbox.sources._provider import provider
from hookinbox.sources._secrets import secrets_tuple
from hookinbox.sources._signatures import Headers, distinct_signatures, signature_items

if TYPE_CHECKING:
    import httpx

HEADER = "plaid-verification"
ENVIRONMENTS = {
    "production": "https://production.plaid.com",
    "sandbox": "https://sandbox.plaid.com",
}
PLAID_API = AllowList(
    "Plaid's /webhook_verification_key/get",
    hosts=frozenset({"production.plaid.com", "sandbox.plaid.com"}),
    path=re.compile("/webhook_verification_key/get"),
)
RULES = _jwt.Rules(
    "Plaid-Verification",
    frozenset({"ES256"}),
    require=("iat", "request_body_sha256"),
    max_age=300.0,
    leeway=60.0,  # a sender's clock a little ahead is not a forgery
)


class Plaid(Source):
    default_name = "plaid"
    verifies_over_network = True  # a key id not seen yet is asked of Plaid's API
    # Plaid retries a webhook not answered 200 within 10 s, with backoff, for up to a day
    # (not confirmed): a day's margin.
    redelivery_window = timedelta(days=2)
    stored_headers = (HEADER,)
    signature_headers = (HEADER,)

    def __init__(
        self,
        *,
        client_id: str,
        secret: str,
        environment: str = "production",
        name: str | None = None,
        keys: str | Mapping[str, Any] | None = None,
        timeout: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(name=name)
        (self.client_id,) = secrets_tuple(client_id)
        (self._secret,) = secrets_tuple(secret)
        if environment not in ENVIRONMENTS:
            raise ConfigurationError(f"Plaid's environment is one of {sorted(ENVIRONMENTS)}")
        self.url = ENVIRONMENTS[environment] + "/webhook_verification_key/get"
        _jwt.jwt_module("hookinbox.sources.Plaid")
        self._pinned = _pinned(keys) if keys is not None else None
        fetcher = Fetcher(
            feature="hookinbox.sources.Plaid",
            timeout=timeout,
            ssl_context=ssl_context,
            transport=transport,
            headers={"content-type": "application/json"},
        )
        self._keys: KeyCache[Any] = KeyCache(
            PLAID_API,
            _read_key,
            fetcher,
            locate=self._request,
            # Plaid answers errors with 4xx and a JSON error: the key id, or our credentials,
            # are refused (the log names Plaid's error code). 429 and 5xx are outages.
            unknown=lambda status, _body: 400 <= status < 500 and status != 429,
            default_max_age=MAX_AGE,
            cache_size=16,
        )

    def _request(self, kid: str) -> Fetch:
        body = {"client_id": self.client_id, "secret": self._secret, "key_id": kid}
        return Fetch(self.url, "POST", body)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        tokens = signature_items(headers, HEADER, what="Plaid-Verification")
        failures: list[VerificationError] = []
        for token in distinct_signatures(tokens, "Plaid-Verification tokens"):
            try:
                self._verify_token(token, body, now)
            except VerificationError as failure:
                failures.append(failure)
                continue
            return
        raise failures[0]

    def _verify_token(self, token: str, body: bytes, now: float) -> None:
        kid = _jwt.header(token, RULES).get("kid")
        if not isinstance(kid, str) or not kid or len(kid) > 128 or not kid.isprintable():
            raise BadSignature("Plaid-Verification names no usable key id (kid)")
        claims = _jwt.verify(token, self._key(kid, now), RULES, now=now)
        claimed = claims.get("request_body_sha256")
        digest = hashlib.sha256(body).hexdigest()
        if not isinstance(claimed, str) or not hmac.compare_digest(claimed.lower(), digest):
            raise BadSignature("the body's SHA-256 is not the one Plaid signed")

    def _key(self, kid: str, now: float) -> Any:
        if self._pinned is not None:
            key = self._pinned.get(kid, self._pinned.get("*"))
            if key is None:
                raise BadSignature("Plaid-Verification's key is not one of the configured keys")
            return key
        return self._keys.get(kid, now=now)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        kind = optional_text(payload.get("webhook_type"))
        code = optional_text(payload.get("webhook_code"))
        if kind is None or code is None:
            raise PayloadError("no webhook_type and webhook_code in the Plaid webhook")
        item = optional_text(payload.get("item_id")) or "-"
        digest = hashlib.sha256(body).hexdigest()
        return Identity(
            event_id=event_key(f"{kind}:{code}:{item}:{digest}"),
            event_type=f"{kind}.{code}",
            occurred_at=None,
            payload=payload,
        )


def _read_key(body: bytes) -> Parsed[Any]:
    """Plaid's answer: `{"key": <JWK>, "request_id": ...}`; an expired key is no key."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadSignature("Plaid's key answer is not JSON") from exc
    jwk = document.get("key") if isinstance(document, dict) else None
    if not isinstance(jwk, dict):
        raise BadSignature("Plaid's answer holds no key")
    if jwk.get("expired_at") is not None:
        raise BadSignature("Plaid says the key is expired")
    keys = _jwt.key_set({"keys": [jwk]}, RULES, usable=_p256)
    if not keys:
        raise BadSignature("Plaid's key is not an ES256 key")
    return Parsed(next(iter(keys.values())))


def _p256(jwk: dict[str, Any]) -> bool:
    return jwk.get("kty") == "EC" and jwk.get("crv") == "P-256"


def _pinned(keys: str | Mapping[str, Any]) -> dict[str, Any]:
    """Keys given instead of fetched: a JWK Set, or one P-256 public key (base64 DER or PEM)
    used whatever `kid` a token names."""
    try:
        if isinstance(keys, str) and not keys.lstrip().startswith("{"):
            return {"*": _public_key(keys)}
        document = json.loads(keys) if isinstance(keys, str) else dict(keys)
        found = _jwt.key_set(document, RULES, usable=_p256)
    except (ValueError, TypeError, BadSignature) as exc:
        raise ConfigurationError("keys= is a JWK Set or a P-256 public key") from exc
    if not found:
        raise ConfigurationError("keys= holds no ES256 key")
    return found


def _public_key(text: str) -> Any:
    import base64

    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import (
        load_der_public_key,
        load_pem_public_key,
    )

    if text.lstrip().startswith("-----BEGIN"):
        key = load_pem_public_key(text.encode())
    else:
        key = load_der_public_key(base64.b64decode("".join(text.split()), validate=True))
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ValueError("not a P-256 key")
    return key


def example_event(tag: str) -> dict[str, Any]:
    return {
        "environment": "sandbox",
        "item_id": f"wz666MBjYWTp2PDzzggYhM6oWWmBb{tag}",
        "webhook_code": "SYNC_UPDATES_AVAILABLE",
        "webhook_type": "TRANSACTIONS",
        "initial_update_complete": True,
        "historical_update_complete": False,
    }


PROVIDER = provider(
    Plaid,
    sign=None,  # hookinbox.testing's, with its test key's private half
    example=lambda keys: Plaid(client_id="example-client", secret="example-secret", keys=keys.p256),
    event=example_event,
    signature_header="Plaid-Verification",
    forgery=lambda: {"private_key": _stranger()},
)


def _stranger() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())
