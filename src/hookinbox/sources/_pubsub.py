"""Google Cloud Pub/Sub push: an OIDC token (RS256, Google's keys) in `Authorization: Bearer`.

A push subscription with authentication enabled sends a Google-signed ID token for the
service account it was configured with. The token is checked by `sources/_jwt.py` with RS256
pinned and Google's key named by its `kid`, from Google's key set
(`https://www.googleapis.com/oauth2/v3/certs`, fetched and cached by `sources/_keys.py`); its
`iss` must be Google's, `aud` the audience you configured on the subscription, `email` a
service account you name, `email_verified` true, and `exp`/`iat` hold on the source's clock.

The body is the push envelope: `{"message": {"data", "attributes", "messageId",
"publishTime", ...}, "subscription": "projects/.../subscriptions/..."}`. The key is the
message's `messageId`, the same on every redelivery; `deliveryAttempt` (with a dead-letter
policy) changes, so what the publisher sent (the message's data, attributes, id and ordering
key) is what tells a retry from a key conflict.

The token does not cover the body (Google signs who sent it, not what): a valid token seen
once could carry another body until it expires (an hour). That is Pub/Sub's design; the page
says so.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from hookinbox._errors import BadSignature, ConfigurationError, PayloadError, VerificationError
from hookinbox.sources import _jwt
from hookinbox.sources._base import Source
from hookinbox.sources._identity import (
    Identity,
    compact_json,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._jwks import PublishedKeySet, pinned_keys
from hookinbox.sources._keys import AllowList
from hookinbox.sources._provider import provider
from hookinbox.sources._secrets import secrets_tuple
from hookinbox.sources._signatures import Headers, distinct_signatures, signature_items

if TYPE_CHECKING:
    import httpx

GOOGLE_CERTS = "https://www.googleapis.com/oauth2/v3/certs"
GOOGLE_KEYS = AllowList(
    "Google's key set", hosts=frozenset({"www.googleapis.com"}), path=re.compile("/oauth2/v3/certs")
)
ISSUERS = frozenset({"https://accounts.google.com", "accounts.google.com"})
PUBLISHED = ("data", "attributes", "messageId", "orderingKey")
KEY_SET_AGE = 3600.0  # Google sends max-age (hours); an hour when it does not


class GooglePubSub(Source):
    default_name = "pubsub"
    verifies_over_network = True  # Google's keys, when not cached
    # Pub/Sub keeps an unacknowledged message for the subscription's retention (7 days by
    # default) and pushes it again until then.
    redelivery_window = timedelta(days=7)
    stored_headers = ()  # the token is a credential for an hour: never stored
    signature_headers = ("authorization",)

    def __init__(
        self,
        *,
        audience: str | Sequence[str],
        service_account: str | Sequence[str],
        name: str | None = None,
        keys: str | dict[str, Any] | None = None,
        leeway: float = 60.0,
        timeout: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(name=name)
        self.service_accounts = frozenset(secrets_tuple(service_account))
        self.rules = _jwt.Rules(
            "the Pub/Sub token",
            frozenset({"RS256"}),
            audiences=frozenset(secrets_tuple(audience)),
            issuers=ISSUERS,
            require=("exp", "iat", "aud", "iss", "email"),
            leeway=leeway,
        )
        _jwt.jwt_module("hookinbox.sources.GooglePubSub")
        self._pinned = _pinned(keys, self.rules) if keys is not None else None
        self._keys = PublishedKeySet(
            GOOGLE_KEYS,
            GOOGLE_CERTS,
            self.rules,
            pinned=self._pinned,
            feature="hookinbox.sources.GooglePubSub",
            default_max_age=KEY_SET_AGE,
            timeout=timeout,
            ssl_context=ssl_context,
            transport=transport,
        )

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        # A repeated Authorization header (joined with "," by a WSGI server) gives one
        # candidate per value; each costs a public-key check, so at most two distinct ones.
        values = signature_items(headers, "authorization", what="Authorization")
        failures: list[VerificationError] = []
        for value in distinct_signatures(values, "bearer tokens"):
            try:
                self._verify_token(value, now)
            except BadSignature as failure:
                failures.append(failure)
                continue
            except VerificationError as failure:  # late or early: says more than a forgery
                failures.insert(0, failure)
                continue
            return
        raise failures[0]

    def _verify_token(self, value: str, now: float) -> None:
        scheme, _, token = value.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise BadSignature("Authorization is not a bearer token")
        kid = _jwt.header(token, self.rules).get("kid")
        if not isinstance(kid, str) or not kid:
            raise BadSignature("the Pub/Sub token names no key (kid)")
        claims = _jwt.verify(token, self._key(kid, now), self.rules, now=now)
        if claims.get("email") not in self.service_accounts:
            raise BadSignature("the Pub/Sub token's email is not a service account of this source")
        if claims.get("email_verified") is not True:
            raise BadSignature("the Pub/Sub token's email is not verified")

    def _key(self, kid: str, now: float) -> Any:
        key = self._keys.key(kid, now=now)
        if key is None:
            raise BadSignature("the Pub/Sub token's key is not one of Google's")
        return key

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        message = payload.get("message")
        if not isinstance(message, dict):
            raise PayloadError("no message object in the Pub/Sub push")
        attributes = message.get("attributes")
        kind = attributes.get("type") if isinstance(attributes, dict) else None
        return Identity(
            event_id=event_key(message.get("messageId", message.get("message_id")), "messageId"),
            event_type=optional_text(kind),
            occurred_at=parse_time(message.get("publishTime", message.get("publish_time"))),
            payload=payload,
            # What the publisher sent: a redelivery repeats it (and `deliveryAttempt`, outside
            # the message, counts up).
            fingerprint=compact_json({k: message.get(k) for k in PUBLISHED}),
        )


def _pinned(keys: str | dict[str, Any], rules: _jwt.Rules) -> dict[str, Any]:
    """Keys given instead of fetched: a JWK Set (dict or JSON text), or one PEM public key or
    certificate, used whatever `kid` a token names."""
    if isinstance(keys, str) and keys.lstrip().startswith("-----BEGIN"):
        try:
            return {"*": _pem_key(keys)}
        except ValueError as exc:
            raise ConfigurationError("keys= is a JWK Set or a PEM RSA public key") from exc
    return pinned_keys(keys, rules)


def _pem_key(pem: str) -> Any:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    data = pem.encode()
    key = (
        x509.load_pem_x509_certificate(data).public_key()
        if b"CERTIFICATE" in data
        else load_pem_public_key(data)
    )
    if not isinstance(key, RSAPublicKey):
        raise ValueError("not an RSA key")
    return key


EXAMPLE_AUDIENCE = "https://shop.example/webhooks/pubsub"
EXAMPLE_ACCOUNT = "pusher@hookinbox-example.iam.gserviceaccount.com"

PROVIDER = provider(
    GooglePubSub,
    sign=None,  # hookinbox.testing's, with its test key's private half
    example=lambda keys: GooglePubSub(
        audience=EXAMPLE_AUDIENCE, service_account=EXAMPLE_ACCOUNT, keys=keys.paypal_pem
    ),
    event=lambda tag: {"order": f"ord_{tag}", "status": "paid"},
    signature_header="Authorization",
    forgery=lambda: {"private_key": _stranger()},
)


def _stranger() -> Any:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)
