"""Netlify (deploy and form notifications): a JWS, HS256, in `X-Webhook-Signature`.

With a "JWS secret token" set on an outgoing webhook, Netlify signs each call with a JSON Web
Signature (HS256, the token as the key) whose claims are `iss: "netlify"` and `sha256`, the
hex SHA-256 of the body. The token is checked by `sources/_jwt.py` (HS256 pinned: `none` and
every other algorithm refused), then the digest against the raw body. Netlify signs no time,
so there is no replay window: a replay is a duplicate while the event is kept. A secret
shorter than 32 bytes is refused when the source is built (RFC 7518 asks an HS256 key as long
as its hash).

Netlify's body carries no event id: a deploy notification is the deploy (`id`, `state`), a
form notification the submission (`id`, `form_id`). The key is `<id>:<state>` for a deploy
(one deploy passes through several states, each notified once) and the submission's `id`.
Needs PyJWT (the `jwt` extra), imported when the source is built.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from hookinbox._errors import BadSignature, ConfigurationError, VerificationError
from hookinbox.sources import _jwt
from hookinbox.sources._base import SecretSource
from hookinbox.sources._identity import (
    Identity,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import json_headers, provider, secret_key
from hookinbox.sources._signatures import Headers, distinct_signatures, signature_items

HEADER = "x-webhook-signature"
MIN_SECRET = 32
RULES = _jwt.Rules(
    "X-Webhook-Signature",
    frozenset({"HS256"}),
    issuers=frozenset({"netlify"}),
    require=("iss", "sha256"),
)


class Netlify(SecretSource):
    default_name = "netlify"
    # Netlify's retries are not documented (not confirmed): a day's margin.
    redelivery_window = timedelta(days=1)
    stored_headers = (HEADER, "x-netlify-event")
    signature_headers = (HEADER,)

    def __init__(self, *, secret: str | Sequence[str], name: str | None = None) -> None:
        super().__init__(secret=secret, name=name)
        _jwt.jwt_module("hookinbox.sources.Netlify")
        if any(len(key) < MIN_SECRET for key in self._keys):
            raise ConfigurationError(
                f"a Netlify JWS secret token must be at least {MIN_SECRET} bytes (RFC 7518, "
                "3.2: an HS256 key as long as its hash); set a longer one in Netlify"
            )

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        tokens = signature_items(headers, HEADER, what="X-Webhook-Signature")
        digest = hashlib.sha256(body).hexdigest()
        failures: list[VerificationError] = []
        # Each token is an HMAC per secret; a delivery carries one, two while one is rotated.
        for token in distinct_signatures(tokens, "X-Webhook-Signature tokens"):
            for key in self._keys:
                try:
                    claims = _jwt.verify(token, key, RULES, now=now)
                except VerificationError as failure:
                    failures.append(failure)
                    continue
                claimed = claims.get("sha256")
                if isinstance(claimed, str) and hmac.compare_digest(claimed.lower(), digest):
                    return
                failures.append(BadSignature("the body's SHA-256 is not the one Netlify signed"))
        raise failures[0]

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        ident = event_key(payload.get("id"), "id")
        state = optional_text(payload.get("state"))
        kind = optional_text(headers.get("x-netlify-event")) or (
            f"deploy_{state}" if state is not None else "submission_created"
        )
        return Identity(
            event_id=f"{ident}:{state}" if state is not None else ident,
            event_type=kind,
            occurred_at=parse_time(payload.get("updated_at") or payload.get("created_at")),
            payload=payload,
        )


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign(source: Netlify, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    """Netlify's recipe: a JWS (RFC 7515), HS256 under the token, claims `iss` and `sha256`."""
    key = secret_key(source, fields)
    head = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {"iss": "netlify", "sha256": hashlib.sha256(body).hexdigest()}
    payload = _b64url(json.dumps(claims).encode())
    signature = hmac.new(key, f"{head}.{payload}".encode(), hashlib.sha256).digest()
    headers = {
        **json_headers(fields),
        "User-Agent": "Netlify",
        "X-Webhook-Signature": f"{head}.{payload}.{_b64url(signature)}",
    }
    event = fields.pop("event", None)
    if event is not None:
        headers["X-Netlify-Event"] = event
    return headers


def example_event(tag: str) -> dict[str, Any]:
    return {
        "id": f"6553d6f5a5b1a3000809{tag}",
        "site_id": "c6a1f2d8-9a3c-4a8d-9f3e-2b5d7c1e0a11",
        "state": "ready",
        "name": "hookinbox-example",
        "created_at": "2023-11-14T22:13:20.000Z",
        "updated_at": "2023-11-14T22:14:02.000Z",
    }


PROVIDER = provider(
    Netlify,
    sign=sign,
    example=lambda keys: Netlify(secret="netlify-example-jws-secret-token-0001"),
    event=example_event,
    signature_header="X-Webhook-Signature",
)
