"""Deliveries signed with an Ed25519 test key pair (the `crypto` extra: cryptography).

Discord and Standard Webhooks `v1a` senders sign with a private key a test cannot have, so
`ed25519_test_key()` gives a test key pair; configure the source with its public half
(`Discord(public_key=key.hex)`, `StandardWebhooks(public_key=key.whpk)`) and `sign` finds the
private half by it. A key made elsewhere signs when passed as `private_key=`.

Only the keys and the signature live here; what each provider sends around it (headers, the
signed message) is its signer's, in `_signing`, which imports this module on use: importing
`hookinbox.testing` needs no cryptography.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from functools import cache
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from hookinbox.sources import Source

_KEYS: dict[bytes, Ed25519PrivateKey] = {}


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
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    _KEYS[raw] = private
    return Ed25519TestKey(private, raw)


def private_key_for(source: Source, public: Any, fields: dict[str, Any]) -> Ed25519PrivateKey:
    """The `private_key` field, or the test key whose public half `source` trusts."""
    given = fields.pop("private_key", None)
    if given is not None:
        return given  # type: ignore[no-any-return]
    for key in public.keys if public is not None else ():
        raw = key.public_bytes(Encoding.Raw, PublicFormat.Raw)
        if raw in _KEYS:
            return _KEYS[raw]
    raise TypeError(
        f"sign() needs the private key of {type(source).__name__}'s public key: build the "
        "source with ed25519_test_key()'s public key, or pass private_key="
    )


def ed25519_signature(source: Source, public: Any, message: bytes, fields: dict[str, Any]) -> bytes:
    """`message` signed with the `private_key` field, or with the test key `source` trusts."""
    return private_key_for(source, public, fields).sign(message)
