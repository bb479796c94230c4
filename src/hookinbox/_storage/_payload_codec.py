"""Bodies and headers as stored: in clear, or encrypted at rest with the operator's keys.

Encryption is on when `HOOKINBOX_ENCRYPTION_KEYS` holds `id:base64key,...` (AES-256-GCM keys
of 32 bytes; the first entry encrypts, every entry decrypts, so a key rotates by putting the
new one first and running `hookinbox encryption rotate`). The variable, not an `Inbox`
keyword, because the same keys must reach every process that reads bodies (serve's servers,
the worker, the CLI, the dashboard) and must never sit in an application's code. It is read
on each use (one dictionary look-up; the parse is cached), so a test may change it.

Every stored value says what it is, so no schema change is needed and rows written before
encryption was turned on still read:

- a body is the delivery's bytes, or `MAGIC` + a kind byte: `\\x01` then the key id's length,
  the key id, a 12-byte random nonce and the ciphertext with its 16-byte tag; `\\x00` then the
  body in clear (a body that itself starts with `MAGIC`, so that it is never read as coded).
  `MAGIC` starts with 0xFF, a byte no UTF-8 text and no UTF-16/32 byte-order mark begins with.
- headers are stored as text (JSON, a column of type TEXT: PostgreSQL's holds no NUL byte
  nor invalid UTF-8, so no raw ciphertext). In clear they are a JSON object, whose text starts
  with `{`; encrypted, `~` + the base64 of the same coded form as a body (a third more bytes
  for the few hundred of a delivery's headers).

The authenticated data binds each ciphertext to its field and its event (source, event id):
a value copied to another row, or a body put in the headers' place, fails to decrypt instead
of being read as another event's. A value that cannot be decrypted (a key id the keyring does
not hold, a tag that does not match) raises `ConfigurationError`: never garbage.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hookinbox._errors import ConfigurationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from hookinbox._model import NewDelivery

KEYS_ENV = "HOOKINBOX_ENCRYPTION_KEYS"
MAGIC = b"\xffhkx"
_PLAIN = b"\x00"
_AES_GCM = b"\x01"
_NONCE = 12
_KEY_BYTES = 32
_HEADERS_MARK = "~"
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,32}")


@dataclass(frozen=True, slots=True)
class Keyring:
    current: str
    """The key id that encrypts."""
    ciphers: Mapping[str, AESGCM]
    """Every key, by id: each decrypts what it encrypted."""
    sealing: AESGCM
    """The current key's."""
    prefix: bytes
    """What every value the current key encrypts starts with: made once, not per value."""


def keyring() -> Keyring | None:
    """The keys `HOOKINBOX_ENCRYPTION_KEYS` holds, None when encryption is off; a malformed
    value raises `ConfigurationError` (naming the entry by position and id, never the key)."""
    raw = os.environ.get(KEYS_ENV, "").strip()
    return _parse(raw) if raw else None


def encrypting() -> bool:
    return keyring() is not None


@functools.lru_cache(maxsize=8)
def _parse(raw: str) -> Keyring:
    from hookinbox._extras import require

    require("encryption at rest", "encryption")
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    ciphers: dict[str, AESGCM] = {}
    for position, entry in enumerate(raw.split(","), start=1):
        key_id, colon, encoded = entry.strip().partition(":")
        where = f"{KEYS_ENV}: entry {position}"
        if not colon or not _KEY_ID.fullmatch(key_id):
            raise ConfigurationError(
                f"{where} is not ID:BASE64KEY (an id of 1-32 letters, digits, '.', '_', '-')"
            )
        if key_id in ciphers:
            raise ConfigurationError(f"{where}: key id {key_id!r} is given twice")
        try:
            key = base64.b64decode(encoded.strip(), altchars=_altchars(encoded), validate=True)
        except (binascii.Error, ValueError):
            raise ConfigurationError(f"{where} ({key_id!r}): the key is not base64") from None
        if len(key) != _KEY_BYTES:
            raise ConfigurationError(
                f"{where} ({key_id!r}): the key is {len(key)} bytes, not 32 (AES-256; "
                "`hookinbox encryption new-key` makes one)"
            )
        ciphers[key_id] = AESGCM(key)
    current = next(iter(ciphers))
    prefix = MAGIC + _AES_GCM + bytes((len(current),)) + current.encode("ascii")
    return Keyring(current, ciphers, ciphers[current], prefix)


def _altchars(encoded: str) -> bytes | None:
    """The URL-safe alphabet when the key is written in it (`-` and `_`), else the standard."""
    return b"-_" if ("-" in encoded or "_" in encoded) else None


def check_key_id(key_id: str) -> None:
    if not _KEY_ID.fullmatch(key_id):
        raise ConfigurationError(f"key id {key_id!r}: 1-32 letters, digits, '.', '_' or '-'")


def new_key() -> str:
    """A fresh random key, base64 (for `hookinbox encryption new-key`)."""
    return base64.b64encode(os.urandom(_KEY_BYTES)).decode()


# -- writing ----------------------------------------------------------------------------------


def stored_body(delivery: NewDelivery) -> bytes:
    """The delivery's body as it is to be stored."""
    return encode_body(delivery.body, delivery.source, delivery.event_id)


def stored_headers(delivery: NewDelivery, headers_json: str) -> str:
    """The delivery's headers (their JSON, `headers_json`) as they are to be stored."""
    return encode_headers(headers_json, delivery.source, delivery.event_id)


def encode_body(body: bytes, source: str, event_id: str) -> bytes:
    ring = keyring()
    if ring is None:
        return MAGIC + _PLAIN + body if body.startswith(MAGIC) else body
    return _seal(ring, body, b"body", source, event_id)


def encode_headers(headers_json: str, source: str, event_id: str) -> str:
    ring = keyring()
    if ring is None:
        return headers_json
    sealed = _seal(ring, headers_json.encode(), b"headers", source, event_id)
    return _HEADERS_MARK + base64.b64encode(sealed).decode("ascii")


def _seal(ring: Keyring, plain: bytes, field: bytes, source: str, event_id: str) -> bytes:
    nonce = os.urandom(_NONCE)
    return ring.prefix + nonce + ring.sealing.encrypt(nonce, plain, _aad(field, source, event_id))


def _aad(field: bytes, source: str, event_id: str) -> bytes:
    # The source's length first: ("a/b", "c") and ("a", "b/c") must not read the same.
    encoded = source.encode()
    return b"hookinbox/1/%s/%d:%s/%s" % (field, len(encoded), encoded, event_id.encode())


# -- reading ----------------------------------------------------------------------------------


def read_body(value: bytes | memoryview, source: str, event_id: str) -> bytes:
    """A stored body as the delivery brought it."""
    body = bytes(value)
    if not body.startswith(MAGIC):
        return body
    return _open(body, b"body", source, event_id)


def read_headers(value: str, source: str, event_id: str) -> str:
    """Stored headers as their JSON text."""
    if not value.startswith(_HEADERS_MARK):
        return value
    try:
        sealed = base64.b64decode(value[1:], validate=True)
    except (binascii.Error, ValueError):
        raise _unreadable(source, event_id, "headers", "is not base64") from None
    return _open(sealed, b"headers", source, event_id).decode()


def row_body(row: Mapping[Any, Any]) -> bytes:
    """`read_body` of an events row (its `body`, `source` and `event_id`)."""
    return read_body(row["body"], row["source"], row["event_id"])


def row_headers(row: Mapping[Any, Any]) -> str:
    return read_headers(row["headers"], row["source"], row["event_id"])


def _open(value: bytes, field: bytes, source: str, event_id: str) -> bytes:
    what = field.decode()
    kind = value[len(MAGIC) : len(MAGIC) + 1]
    if kind == _PLAIN:
        return value[len(MAGIC) + 1 :]
    if kind != _AES_GCM:
        raise _unreadable(source, event_id, what, f"has an unknown format {kind!r}")
    key_id, sealed = _split(value)
    if key_id is None:
        raise _unreadable(source, event_id, what, "is cut short")
    ring = keyring()
    if ring is None:
        raise _unreadable(
            source, event_id, what, f"is encrypted (key {key_id!r}) and {KEYS_ENV} is not set"
        )
    cipher = ring.ciphers.get(key_id)
    if cipher is None:
        raise _unreadable(
            source,
            event_id,
            what,
            f"is encrypted with key {key_id!r}, which {KEYS_ENV} does not hold",
        )
    from cryptography.exceptions import InvalidTag

    nonce, ciphertext = sealed[:_NONCE], sealed[_NONCE:]
    try:
        return cipher.decrypt(nonce, ciphertext, _aad(field, source, event_id))
    except InvalidTag:
        why = f"does not decrypt with key {key_id!r} (another key under that id, or altered)"
        raise _unreadable(source, event_id, what, why) from None


def _split(value: bytes) -> tuple[str | None, bytes]:
    """(key id, nonce + ciphertext) of an encrypted value; (None, b"") when it is cut short."""
    start = len(MAGIC) + 1
    if len(value) <= start:
        return None, b""
    length = value[start]
    key_id = value[start + 1 : start + 1 + length]
    sealed = value[start + 1 + length :]
    if len(key_id) != length or len(sealed) < _NONCE + 16:
        return None, b""
    return key_id.decode("ascii", "replace"), sealed


def key_id_of(value: bytes | memoryview | str | None) -> str | None:
    """The key id a stored body or headers value is encrypted with; None when in clear."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.startswith(_HEADERS_MARK):
            return None
        text = value[1:81]  # 60 bytes: the format, the key id's length and the id
        try:
            coded = base64.b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            return "?"
    else:
        coded = bytes(value[: len(MAGIC) + 2 + 255])
    if not coded.startswith(MAGIC) or coded[len(MAGIC) : len(MAGIC) + 1] != _AES_GCM:
        return None
    start = len(MAGIC) + 1
    if len(coded) <= start:
        return "?"
    return coded[start + 1 : start + 1 + coded[start]].decode("ascii", "replace")


def _unreadable(source: str, event_id: str, field: str, why: str) -> ConfigurationError:
    return ConfigurationError(f"event {source}/{event_id}: its stored {field} {why}")
