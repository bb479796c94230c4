"""The simulator signs with `hookinbox.testing`'s signers: one registry for the simulator, the
tests and users' tests, each signer checked against the provider's official verifier
(tests/testing/test_signers.py). Which of a signer's headers are sent (the signature and its
time; the plan makes the others) is declared with the provider (`Simulation`).

A signer is built once per run (the key is decoded once) and called at send time, so that a
retry carries a fresh timestamp as the provider's retries do.
"""

from __future__ import annotations

import base64
import binascii
import random
from collections.abc import Mapping

from hookinbox._errors import ConfigurationError
from hookinbox.simulate._providers import PROFILES, SOURCES, ProviderName
from hookinbox.testing._signing import sign

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
        if provider == "standard":
            standard_key(secret)  # the simulator's own message for a malformed secret
        self._source = SOURCES[provider](secret=secret)  # type: ignore[call-arg]

    def sign(self, headers: Mapping[str, str], body: bytes, timestamp: int) -> dict[str, str]:
        """The signature headers for `body` sent at `timestamp` (Unix seconds), in lower case.

        The event's own headers (ids, type, content type) come from the plan; of what the
        signer makes, only the signature and its timestamp are taken.
        """
        fields = {"message_id": headers["webhook-id"]} if self.provider == "standard" else {}
        signed, _ = sign(self._source, body, at=timestamp, **fields)
        wanted = PROFILES[self.provider].signature_headers
        return {name.lower(): value for name, value in signed.items() if name.lower() in wanted}


def forger(provider: ProviderName, rng: random.Random) -> Signer:
    """A signer holding a secret the receiver does not know: a forger's signatures."""
    if provider == "standard":
        return Signer(
            provider, STANDARD_SECRET_PREFIX + base64.b64encode(rng.randbytes(24)).decode()
        )
    return Signer(provider, "whsec_forged_" + rng.randbytes(12).hex())
