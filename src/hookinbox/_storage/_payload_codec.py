"""Bodies and headers as stored: in clear, or packed (compressed and/or encrypted at rest).

Encryption is on when `HOOKINBOX_ENCRYPTION_KEYS` holds `id:base64key,...` (AES-256-GCM keys
of 32 bytes; the first entry encrypts, every entry decrypts, so a key rotates by putting the
new one first and running `hookinbox encryption rotate`). The variable, not an `Inbox`
keyword, because the same keys must reach every process that reads bodies (serve's servers,
the worker, the CLI, the dashboard) and must never sit in an application's code. It is read
on each use (one dictionary look-up; the parse is cached), so a test may change it.

Every stored value says what it is, so no schema change is needed and rows written by any
release still read. A payload row is one of:

- in clear (neither compression nor encryption on, or compressing did not pay): the body is
  the delivery's bytes, or, for a body that itself starts with `MAGIC`, `MAGIC` + `\\x00` + the
  body (so it is never read as coded); the headers are their JSON object (text from `{`).
- packed (`_payload_packing`: headers and body in one value, compressed when that pays) in
  the body column, `BUNDLED` in the headers': `MAGIC` + `\\x02` + the packed value when only
  compression is on; `MAGIC` + `\\x03`, the key id's length, the key id, a 12-byte random
  nonce and the packed value's AES-GCM ciphertext with its 16-byte tag when encrypted
  (compressed before it is encrypted: ciphertext does not compress). One value per row: one
  nonce, one AES-GCM call and no base64 (the headers' column is text: PostgreSQL's holds no
  NUL byte nor invalid UTF-8), and the headers compress with the body.
- encrypted field by field (written before the payload was packed; read, never written): the
  body `MAGIC` + `\\x01` + key id, nonce and ciphertext as above; the headers `~` + the base64
  of the same form.

`MAGIC` starts with 0xFF, a byte no UTF-8 text and no UTF-16/32 byte-order mark begins with.
The authenticated data binds each ciphertext to its field (`payload`, or `body` and
`headers`) and its event (source, event id): a value copied to another row fails to decrypt
instead of being read as another event's. A value that cannot be read (a key id the keyring
does not hold, a tag that does not match, a packed value altered or cut short) raises
`ConfigurationError`: never garbage.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hookinbox._errors import ConfigurationError
from hookinbox._storage._payload_packing import RAW, compression_level, pack, unpack

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEYS_ENV = "HOOKINBOX_ENCRYPTION_KEYS"
MAGIC = b"\xffhkx"
_PLAIN = b"\x00"
_AES_GCM = b"\x01"
"""A body or headers value encrypted alone (written before the payload was packed)."""
_PACKED = b"\x02"
_SEALED = b"\x03"
_BUNDLES = (_PACKED, _SEALED)
_ENCRYPTED = (_AES_GCM, _SEALED)
BUNDLED = "@body"
"""The headers' column of a row whose headers are packed in its body column."""
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
    prefix = MAGIC + _SEALED + bytes((len(current),)) + current.encode("ascii")
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


def encode_payload(body: bytes, headers_json: str, source: str, event_id: str) -> tuple[bytes, str]:
    """The (body, headers) columns a payload row stores: in clear as they came when neither
    compression nor encryption is on (or when compressing does not make them smaller), else
    both packed in the body column (compressed first, then encrypted) and `BUNDLED` in the
    headers' column: one value, one nonce, one AES-GCM call and no base64."""
    ring = keyring()
    level = compression_level()
    if ring is None and level is None:
        return _in_clear(body), headers_json
    packed = pack(body, headers_json, level)
    if ring is None:
        if packed[:1] == RAW:  # compressing did not pay: kept in clear, searchable in SQL
            return _in_clear(body), headers_json
        return MAGIC + _PACKED + packed, BUNDLED
    nonce = os.urandom(_NONCE)
    aad = _aad(b"payload", source, event_id)
    return ring.prefix + nonce + ring.sealing.encrypt(nonce, packed, aad), BUNDLED


def _in_clear(body: bytes) -> bytes:
    # A clear body that happens to start like a coded value is escaped, so it reads as clear.
    return MAGIC + _PLAIN + body if body.startswith(MAGIC) else body


def _aad(field: bytes, source: str, event_id: str) -> bytes:
    # The source's length first: ("a/b", "c") and ("a", "b/c") must not read the same.
    encoded = source.encode()
    return b"hookinbox/1/%s/%d:%s/%s" % (field, len(encoded), encoded, event_id.encode())


# -- reading ----------------------------------------------------------------------------------


def read_payload(
    body: bytes | memoryview, headers: str, source: str, event_id: str
) -> tuple[bytes, str]:
    """A stored row's (body, headers JSON) as the delivery brought them, whatever format
    wrote it (every format any release wrote still reads)."""
    value = bytes(body)
    if value.startswith(MAGIC) and value[len(MAGIC) : len(MAGIC) + 1] in _BUNDLES:
        return _unbundle(value, source, event_id)
    if headers == BUNDLED:
        read_body(value, source, event_id)  # a body of an unknown format says so first
        raise _unreadable(source, event_id, "headers", "are kept in a body that holds none")
    return read_body(value, source, event_id), read_headers(headers, source, event_id)


def read_body(value: bytes | memoryview, source: str, event_id: str) -> bytes:
    """A stored body as the delivery brought it."""
    body = bytes(value)
    if not body.startswith(MAGIC):
        return body
    kind = body[len(MAGIC) : len(MAGIC) + 1]
    if kind == _PLAIN:
        return body[len(MAGIC) + 1 :]
    if kind in _BUNDLES:
        return _unbundle(body, source, event_id)[0]
    return _open(body, b"body", source, event_id)


def read_headers(value: str, source: str, event_id: str) -> str:
    """Stored headers as their JSON text (of a row whose headers are in their own column)."""
    if not value.startswith(_HEADERS_MARK):
        return value
    try:
        sealed = base64.b64decode(value[1:], validate=True)
    except (binascii.Error, ValueError):
        raise _unreadable(source, event_id, "headers", "is not base64") from None
    return _open(sealed, b"headers", source, event_id).decode()


def _unbundle(value: bytes, source: str, event_id: str) -> tuple[bytes, str]:
    kind = value[len(MAGIC) : len(MAGIC) + 1]
    if kind == _PACKED:
        packed = value[len(MAGIC) + 1 :]
    else:
        packed = _open(value, b"payload", source, event_id)
    try:
        return unpack(packed)
    except ValueError as error:
        raise _unreadable(source, event_id, "payload", str(error)) from None


def _open(value: bytes, field: bytes, source: str, event_id: str) -> bytes:
    """The plaintext of an encrypted value (its format byte `_AES_GCM` or `_SEALED`)."""
    what = field.decode()
    kind = value[len(MAGIC) : len(MAGIC) + 1]
    if not value.startswith(MAGIC) or kind not in _ENCRYPTED:
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
    if not coded.startswith(MAGIC) or coded[len(MAGIC) : len(MAGIC) + 1] not in _ENCRYPTED:
        return None
    start = len(MAGIC) + 1
    if len(coded) <= start:
        return "?"
    return coded[start + 1 : start + 1 + coded[start]].decode("ascii", "replace")


def payload_key_id(body: bytes | memoryview, headers: str) -> str | None:
    """The key id a whole payload row is under: None when any of it is in clear, "?" when its
    body and headers are under different keys (a row that a rotation must rewrite)."""
    if headers == BUNDLED:
        return key_id_of(body)
    body_key, headers_key = key_id_of(body), key_id_of(headers)
    return body_key if body_key == headers_key else "?"


def _unreadable(source: str, event_id: str, field: str, why: str) -> ConfigurationError:
    return ConfigurationError(f"event {source}/{event_id}: its stored {field} {why}")
