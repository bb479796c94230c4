"""A payload packed into one value (its headers and body together), compressed when that
pays: what `_payload_codec` stores in the body column when compression or encryption is on.

Compression is on when `HOOKINBOX_COMPRESSION` is `zlib` (zlib's level 1) or `zlib:LEVEL`
(1-9), off when it is unset, empty or `off`. The variable, as `HOOKINBOX_ENCRYPTION_KEYS`, not
an `Inbox` keyword: every process that writes payloads (serve's servers, reconcile, a key
rotation) must write alike, and a reader needs nothing (every value says what it is). zlib
from the standard library: zstd's level 1 took half the CPU on a 843-byte Stripe payload
(4.6 us against 9.2) but made it 504 bytes against 480, for one more dependency
(bench/README.md, "Issue 50: compression and cheaper encryption").

A packed value is a codec byte, then: `RAW` and the bundle as it is, or `ZLIB` and the
bundle compressed (zlib's format, whose Adler-32 makes a corrupted value fail to read, not
read as another payload). The bundle is the headers' JSON length (4 bytes, big-endian), the
headers' JSON (UTF-8) and the body.
"""

from __future__ import annotations

import functools
import os
import zlib

from hookinbox._errors import ConfigurationError

COMPRESSION_ENV = "HOOKINBOX_COMPRESSION"
RAW = b"\x00"
ZLIB = b"\x01"
_LENGTH = 4


def compression_level() -> int | None:
    """zlib's level `HOOKINBOX_COMPRESSION` asks for; None when compression is off. A value
    that is none of `off`, `zlib`, `zlib:1`...`zlib:9` raises `ConfigurationError`."""
    return _level(os.environ.get(COMPRESSION_ENV, "").strip().lower())


def compressing() -> bool:
    return compression_level() is not None


@functools.lru_cache(maxsize=8)
def _level(raw: str) -> int | None:
    if raw in ("", "off"):
        return None
    name, _, level = raw.partition(":")
    if name == "zlib" and (not level or (level.isdigit() and 1 <= int(level) <= 9)):
        return int(level or 1)
    raise ConfigurationError(
        f"{COMPRESSION_ENV}={raw!r}: not 'off', 'zlib' or 'zlib:LEVEL' (a level of 1-9)"
    )


def pack(body: bytes, headers_json: str, level: int | None) -> bytes:
    """The packed value of a payload: compressed at `level` when that makes it smaller."""
    headers = headers_json.encode()
    bundle = len(headers).to_bytes(_LENGTH, "big") + headers + body
    if level is not None:
        compressed = zlib.compress(bundle, level)
        if len(compressed) < len(bundle):
            return ZLIB + compressed
    return RAW + bundle


def unpack(packed: bytes) -> tuple[bytes, str]:
    """(body, headers JSON) of a packed value; `ValueError` saying why when it is not one."""
    codec, data = packed[:1], packed[1:]
    if codec == ZLIB:
        try:
            data = zlib.decompress(data)
        except zlib.error:
            raise ValueError("does not decompress (altered or cut short)") from None
    elif codec != RAW:
        raise ValueError(f"has an unknown packing {codec!r}")
    size = int.from_bytes(data[:_LENGTH], "big")
    if len(data) < _LENGTH + size:
        raise ValueError("is cut short")
    try:
        headers = data[_LENGTH : _LENGTH + size].decode()
    except UnicodeDecodeError:
        raise ValueError("holds headers that are not UTF-8 (altered)") from None
    return data[_LENGTH + size :], headers
