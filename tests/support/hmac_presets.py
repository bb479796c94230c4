"""The providers declared as HMAC presets, signed here from their declared facts.

Every provider whose source is an `HMACPresetSource` is in the breadth tests (the signature
edges of tests/reliability/_source_kinds.py, the property tests of
tests/sources/test_source_properties.py) without a line of its own: the list comes from the
declarations (`hookinbox.testing`'s `providers()`), and the signature is computed here with
`hmac` and `base64` from the preset's facts (header, message, digest, encoding, prefix), not
by the kit's signer nor the source's verifier. Whether those facts are the provider's is
judged where a wrong fact shows: each provider's own test module, against its SDK or its
documented recipe, with a signer of that test's own.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Sequence
from typing import Any

from hookinbox.sources import Source
from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, TimestampedHMACPresetSource
from hookinbox.sources._provider import Provider
from hookinbox.testing import sign
from hookinbox.testing._signing import providers

PRESETS = (HMACPresetSource, TimestampedHMACPresetSource)


def preset_providers() -> list[Provider]:
    """Every provider declared as an HMAC preset, in `hookinbox.sources.__all__`'s order."""
    return [p for p in providers() if issubclass(p.source, PRESETS)]


def preset_of(cls: type[Source]) -> HMACPreset:
    preset = getattr(cls, "preset", None)
    assert isinstance(preset, HMACPreset), cls
    return preset


def stamp(preset: HMACPreset, t: int) -> str:
    """The timestamp header's value at `t` (Unix seconds)."""
    return str(t * preset.per_second)


def entry(preset: HMACPreset, secret: str, body: bytes, t: int) -> str:
    """One signature as the header carries it: the prefix and the encoded digest."""
    before_body = preset.message[: preset.message.index("{body}")]
    message = before_body.replace("{timestamp}", stamp(preset, t)).encode() + body
    digest = hmac.new(secret.encode(), message, preset.algorithm).digest()
    encoded = digest.hex() if preset.encoding == "hex" else base64.b64encode(digest).decode()
    return preset.prefix + encoded


def beside(source: Source, body: bytes, t: int, **fields: Any) -> dict[str, str]:
    """The headers the provider sends beside its signature (its ids, its topic), lower case,
    as the kit sends them; the signature and its timestamp left out."""
    preset = preset_of(type(source))
    try:
        headers, _ = sign(source, body, at=t, **fields)
    except TypeError:  # a provider that sends no id header takes no event_id
        headers, _ = sign(source, body, at=t)
    return {k.lower(): v for k, v in headers.items() if k.lower() not in preset.headers}


def delivery(
    source: Source, entries: Sequence[str], body: bytes, t: int, **fields: Any
) -> dict[str, str]:
    """A delivery's headers carrying `entries` (joined as a WSGI server joins repeats)."""
    preset = preset_of(type(source))
    headers = beside(source, body, t, **fields)
    headers[preset.signature_header.lower()] = ", ".join(entries)
    if preset.timestamp_header is not None:
        headers[preset.timestamp_header.lower()] = stamp(preset, t)
    return headers


def wrong_schemes(preset: HMACPreset) -> tuple[str, ...]:
    """Labels that are not the preset's prefix: each must be refused."""
    if not preset.prefix:
        return ()
    return (preset.prefix.swapcase(), "x" + preset.prefix, preset.prefix[:-1] + "0=")
