"""The signature check every peer does, written once: Stripe's scheme on the raw bytes."""

from __future__ import annotations

import hashlib
import hmac
import time

from bench._common import SECRET

KEY = SECRET.encode()


def verified(header: str | None, body: bytes, tolerance: int = 300) -> bool:
    if not header:
        return False
    timestamp = None
    candidates = []
    for item in header.split(","):
        name, _, value = item.partition("=")
        if name == "t":
            timestamp = value
        elif name == "v1":
            candidates.append(value)
    if timestamp is None or not timestamp.isdigit():
        return False
    expected = hmac.new(KEY, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    if not any(hmac.compare_digest(expected, candidate) for candidate in candidates):
        return False
    return abs(time.time() - int(timestamp)) <= tolerance
