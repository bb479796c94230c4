"""Each provider's signature, written from its documentation with hmac, hashlib and base64.

Deliberately independent of `hookinbox.sources` (which verifies) and of the providers' SDKs
(test-only dependencies): the simulator signs the way the providers do, and the tests check
that our verifiers accept the result, so a mistake on either side shows up as a failed test
instead of two halves agreeing on the same mistake.

A signer is built once per run (the key is decoded once) and called at send time, so that a
retry carries a fresh timestamp as the provider's retries do.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import random
from collections.abc import Mapping

from hookinbox._errors import ConfigurationError
from hookinbox.simulate._providers import ProviderName

STANDARD_SECRET_PREFIX = "whsec_"


def standard_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks `whsec_<base64>` secret."""
    encoded = secret.removeprefix(STANDARD_SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        raise ConfigurationError("a Standard Webhooks secret must be whsec_<base64>")
    return key


class Signer:
    """Signs deliveries for one provider with one secret."""

    def __init__(self, provider: ProviderName, secret: str) -> None:
        self.provider = provider
        # Stripe, Shopify and GitHub use the secret's UTF-8 bytes as the key as it stands;
        # Standard Webhooks base64-decodes the part after `whsec_`.
        self._key = standard_key(secret) if provider == "standard" else secret.encode()

    def sign(self, headers: Mapping[str, str], body: bytes, timestamp: int) -> dict[str, str]:
        """The signature headers for `body` sent at `timestamp` (Unix seconds)."""
        key = self._key
        if self.provider == "stripe":
            signed = str(timestamp).encode() + b"." + body
            digest = hmac.new(key, signed, hashlib.sha256).hexdigest()
            return {"stripe-signature": f"t={timestamp},v1={digest}"}
        if self.provider == "shopify":
            digest_bytes = hmac.new(key, body, hashlib.sha256).digest()
            return {"x-shopify-hmac-sha256": base64.b64encode(digest_bytes).decode()}
        if self.provider == "github":
            return {
                "x-hub-signature-256": "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest(),
                # The legacy SHA-1 header GitHub still sends next to it.
                "x-hub-signature": "sha1=" + hmac.new(key, body, hashlib.sha1).hexdigest(),
            }
        message_id = headers["webhook-id"]
        signed = f"{message_id}.{timestamp}.".encode() + body
        digest_bytes = hmac.new(key, signed, hashlib.sha256).digest()
        return {
            "webhook-timestamp": str(timestamp),
            "webhook-signature": "v1," + base64.b64encode(digest_bytes).decode(),
        }


def forger(provider: ProviderName, rng: random.Random) -> Signer:
    """A signer holding a secret the receiver does not know: a forger's signatures."""
    if provider == "standard":
        return Signer(
            provider, STANDARD_SECRET_PREFIX + base64.b64encode(rng.randbytes(24)).decode()
        )
    return Signer(provider, "whsec_forged_" + rng.randbytes(12).hex())
