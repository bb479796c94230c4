"""Ed25519 public keys (Discord, Standard Webhooks `v1a`), on the `crypto` extra.

cryptography is imported when a source is built with a public key, never when hookinbox or
`hookinbox.sources` is imported: an application verifying only HMACs neither installs nor
loads it, and one that configures a public key without the extra learns which to install.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from hookinbox._errors import ConfigurationError
from hookinbox._extras import importing

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

KEY_BYTES = 32


class Ed25519Keys:
    """One or more trusted public keys (several while a key is rotated)."""

    def __init__(self, raw_keys: Sequence[bytes], *, feature: str) -> None:
        with importing(feature, "crypto"):
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        if not raw_keys:
            raise ConfigurationError(f"{feature} needs at least one public key")
        for raw in raw_keys:
            if len(raw) != KEY_BYTES:
                raise ConfigurationError(f"an Ed25519 public key is {KEY_BYTES} bytes")
        self.keys: list[Ed25519PublicKey] = [
            Ed25519PublicKey.from_public_bytes(raw) for raw in raw_keys
        ]

    def verifies(self, signatures: Iterable[bytes], message: bytes) -> bool:
        """Whether some key verifies some signature of `message`. Public-key checks reveal no
        secret through their timing, so the first match ends the search."""
        from cryptography.exceptions import InvalidSignature

        for signature in signatures:  # a signature of the wrong length fails to verify
            for key in self.keys:
                try:
                    key.verify(signature, message)
                except InvalidSignature:
                    continue
                return True
        return False
