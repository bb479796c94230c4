"""Deliveries signed with an Ed25519 test key pair (the `crypto` extra: cryptography).

Discord and Standard Webhooks `v1a` senders sign with a private key a test cannot have, so
`ed25519_test_key()` gives a test key pair; configure the source with its public half
(`Discord(public_key=key.hex)`, `StandardWebhooks(public_key=key.whpk)`) and `sign` finds the
private half by it. A key made elsewhere signs when passed as `private_key=`.

Only the key pair lives here: the signers (in the providers' modules) find its private half by
the public key a source trusts (`hookinbox.sources._ed25519.remember_test_key`). Importing
`hookinbox.testing` needs no cryptography.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from functools import cache

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hookinbox.sources._ed25519 import remember_test_key


@dataclass(frozen=True)
class Ed25519TestKey:
    """An Ed25519 key pair made for tests; no provider's."""

    private_key: Ed25519PrivateKey
    raw: bytes
    """The public key's 32 bytes."""

    @property
    def hex(self) -> str:
        """The public key as Discord writes it: 64 hex digits."""
        return self.raw.hex()

    @property
    def whpk(self) -> str:
        """The public key as Standard Webhooks writes it: `whpk_<base64>`."""
        return "whpk_" + base64.b64encode(self.raw).decode()


TEST_SEED = hashlib.sha256(b"hookinbox's Ed25519 test key: for tests only").digest()


@cache
def ed25519_test_key() -> Ed25519TestKey:
    """The test key pair: the same in every process (its private half is public knowledge),
    so a server started apart from the test (Flask, Django, `hookinbox serve` under the
    simulator) trusts what the test signs. Never configure a source with it in production."""
    private = Ed25519PrivateKey.from_private_bytes(TEST_SEED)
    return Ed25519TestKey(private, remember_test_key(private))
