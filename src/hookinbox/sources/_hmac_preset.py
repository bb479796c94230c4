"""A provider that signs with one HMAC in one header, declared instead of written.

Most HMAC providers differ only in facts: the header, what is signed (the body, or a
timestamp header's value and the body in a template such as `v0:{timestamp}:{body}`), the
digest, hex or base64, a prefix (`sha256=`). `HMACPreset` holds those facts, and a source
class that names one (`HMACPresetSource`, `TimestampedHMACPresetSource`, and
`BatchHMACPresetSource` for a batch) verifies with the shared helpers of `_signatures.py`,
reads its signature headers from it, and gets the test kit's signer from `declare`. What
stays in the provider's module is what no two providers share: where the event's key, type
and time are (`identify`), its redelivery window, the headers it keeps, and its example
event; see docs/development.md, "Adding a provider".

The signer `declare` builds follows the same facts with `hmac` and `base64` only, never the
helpers that verify (as `_provider.py` asks of every signer); it is held to the provider's
SDK or documented recipe in the provider's own test module, which is what catches a wrong
fact: a signer and a verifier built from one mistaken declaration would agree.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from hookinbox.sources._base import BatchSource, SecretSource, TimestampedSource
from hookinbox.sources._provider import ExampleKeys, Provider, json_headers, mac, provider
from hookinbox.sources._provider import secret_key as signing_key
from hookinbox.sources._signatures import (
    Headers,
    decode_digests,
    require_header,
    require_match,
    verify_timestamped,
)

BODY = "{body}"
TIMESTAMP = "{timestamp}"


@dataclass(frozen=True, slots=True)
class HMACPreset:
    """How one provider signs: the HMAC of `message` in `signature_header`."""

    signature_header: str
    """In the provider's casing, as the signer sends it and errors name it."""
    message: str = BODY
    """What is signed: `{body}`, or text around `{timestamp}` (the value of
    `timestamp_header`) before `{body}`: `v0:{timestamp}:{body}` (Slack, Customer.io)."""
    timestamp_header: str | None = None
    algorithm: str = "sha256"
    encoding: Literal["hex", "base64"] = "hex"
    prefix: str = ""
    """Before the digest, exactly: `sha256=` (Jira, Bitbucket), `v0=` (Slack)."""
    per_second: int = 1
    """1 for a timestamp in Unix seconds, 1000 in milliseconds (Webflow)."""

    def __post_init__(self) -> None:
        head, body, tail = self.message.partition(BODY)
        timed = self.timestamp_header is not None
        if not body or tail or BODY in head or head.count(TIMESTAMP) != int(timed):
            raise ValueError(
                f"message {self.message!r} must end with {BODY}, with {TIMESTAMP} before it "
                "once exactly when there is a timestamp header"
            )
        if self.algorithm not in hashlib.algorithms_guaranteed:
            raise ValueError(f"unknown HMAC algorithm {self.algorithm!r}")

    @property
    def headers(self) -> tuple[str, ...]:
        """The headers verifying reads, in lower case: the signature, then the timestamp."""
        names = (self.signature_header, self.timestamp_header)
        return tuple(name.lower() for name in names if name)

    def verify(
        self,
        keys: list[bytes],
        headers: Headers,
        body: bytes,
        *,
        now: float,
        tolerance: float | None = None,
    ) -> None:
        candidates = decode_digests(
            headers,
            self.signature_header.lower(),
            what=self.signature_header,
            encoding=self.encoding,
            prefix=self.prefix,
        )
        if self.timestamp_header is None:
            require_match(keys, candidates, body, algorithm=self.algorithm)
            return
        before, _, between = self.message.removesuffix(BODY).partition(TIMESTAMP)
        verify_timestamped(
            keys,
            candidates,
            require_header(headers, self.timestamp_header.lower()),
            body,
            now=now,
            tolerance=tolerance,
            prefix=before.encode(),
            separator=between.encode(),
            algorithm=self.algorithm,
            per_second=self.per_second,
        )


def _adopt(cls: type[HMACPresetSource]) -> None:
    """A class naming its preset verifies with its headers (bounded before `verify`), and
    keeps them unless it names more."""
    if "preset" in cls.__dict__:
        cls.signature_headers = cls.preset.headers
        if "stored_headers" not in cls.__dict__:
            cls.stored_headers = cls.preset.headers


class HMACPresetSource(SecretSource):
    """A source whose signature is its class's `preset`, over the body alone."""

    preset: ClassVar[HMACPreset]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _adopt(cls)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        self.preset.verify(self._keys, headers, body, now=now)


class TimestampedHMACPresetSource(HMACPresetSource, TimestampedSource):
    """A source whose `preset` signs a timestamp with the body, held within `tolerance`."""

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        self.preset.verify(self._keys, headers, body, now=now, tolerance=self.tolerance)


class BatchHMACPresetSource(BatchSource, HMACPresetSource):
    """A `BatchSource` (several events in one delivery) signed by its class's `preset`."""


ExtraHeaders = Callable[[Any, bytes, int, dict[str, Any]], dict[str, str]]
"""`(source, body, unix seconds, fields) -> headers` the provider sends beside the signature
(an id, a topic); pops the `sign` fields it reads."""


def preset_signer(preset: HMACPreset, extra: ExtraHeaders | None = None) -> Any:
    """The test kit's signer for `preset`: its recipe with `hmac` and `base64`."""

    def sign(source: Any, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
        stamp = str(t * preset.per_second)
        message = preset.message.removesuffix(BODY).replace(TIMESTAMP, stamp).encode() + body
        digest = mac(signing_key(source, fields), message, preset.algorithm)
        encoded = digest.hex() if preset.encoding == "hex" else base64.b64encode(digest).decode()
        headers = json_headers(fields)
        if extra is not None:
            headers |= extra(source, body, t, fields)
        if preset.timestamp_header is not None:
            headers[preset.timestamp_header] = stamp
        headers[preset.signature_header] = preset.prefix + encoded
        return headers

    return sign


def declare(
    source: type[HMACPresetSource],
    *,
    event: Callable[[str], Any],
    example: Callable[[ExampleKeys], Any] | None = None,
    headers: ExtraHeaders | None = None,
    new_each_delivery: bool = False,
    batch_key: Callable[[Any], str] | None = None,
) -> Provider:
    """`provider(...)` for a preset source: its signer and signature header from the preset,
    its example a source with the secret `<default name>-example` unless `example` is given."""
    secret = f"{source.default_name}-example"
    return provider(
        source,
        sign=preset_signer(source.preset, headers),
        example=example or (lambda keys: source(secret=secret)),
        event=event,
        signature_header=source.preset.signature_header,
        new_each_delivery=new_each_delivery,
        batch_key=batch_key,
    )
