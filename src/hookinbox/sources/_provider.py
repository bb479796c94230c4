"""What a provider module declares beside its source: a signer and an example.

A provider's module (`_stripe.py`, ...) holds everything hookinbox knows about
it: the source (verify, identify, the dedup key, a handshake), and, registered here with
`provider(...)`, the signer `hookinbox.testing.sign` and the simulator use, and an example (a
source configured with made-up secrets, an event naming a tag, the header its signature
travels in) from which the tests derive their lists of sources, and, for the providers
`hookinbox simulate` copies, how the provider sends and resends (`Simulation`).
`hookinbox.sources.__all__` names the provider classes, and `hookinbox.testing`'s
`providers()` gives each one's
`Provider`, so no list of providers is kept by hand anywhere else (a test refuses an exported
class without one).

Signers follow each provider's documented recipe with `hmac`, `hashlib` and `base64` only,
never through the verification helpers of `_signatures.py`, and the tests hold every signer to
the provider's official verifier: a mistake in a source and the same mistake in its signer
cannot agree unseen. Ids that name the event (GitHub's delivery, Shopify's event id, a
Standard Webhooks message id, ...) default to a digest of the body (`body_id`), so signing
the same body twice is a redelivery of one event; ids new on each transmission are new on
each call.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hookinbox._payload import FORM

if TYPE_CHECKING:
    from hookinbox.sources._base import Source

Signed = dict[str, str] | tuple[dict[str, str], bytes]
"""A signer's answer: the headers, or the headers and the body, where the provider signs
inside the body (a signature block, a timestamp in the signed body, a batch's items)."""
Signer = Callable[[Any, bytes, int, dict[str, Any]], Signed]
"""`(source, body, unix seconds, fields) -> Signed`; pops the fields it understands."""

__all__ = ["FORM", "JSON", "ExampleKeys", "Provider", "Simulation", "provider", "provider_of"]

JSON = "application/json"
MINUTE = 60.0
HOUR = 3600.0
_NAMESPACE = uuid.UUID("6f1c1e8e-51f3-4a4e-9d0c-2b9a4f7f0b11")


@dataclass(frozen=True, slots=True)
class ExampleKeys:
    """The public halves of the test kit's key pairs, for examples that verify with a public
    key (`hookinbox.testing`'s `ed25519_test_key`, `sendgrid_test_key`,
    `paypal_test_certificate`): the kit holds the private halves its signers use."""

    ed25519: str
    """Hex, as Discord writes a public key."""
    p256: str
    """Base64 DER, as SendGrid shows its verification key."""
    paypal_pem: str
    """A PayPal signing certificate."""


@dataclass(frozen=True, slots=True)
class Simulation:
    """What `hookinbox simulate` copies from a provider: its redelivery schedule, its
    patience, and which of its signer's headers are the signature (the plan makes the rest).

    Retry delays are real-world seconds (the sender divides them by its `retry_compression`);
    the acknowledgement timeout is never compressed, as it measures the receiver."""

    retry_delays: tuple[float, ...]
    """Seconds before each automatic retry (the first retry waits `retry_delays[0]`)."""
    ack_timeout: float
    """Seconds the provider waits for an answer before it counts the attempt as failed."""
    signs_timestamp: bool
    """Whether a timestamp is signed: without one, a delivery cannot be 'expired'."""
    signature_headers: frozenset[str]
    """The signer's headers (lower case) the simulator sends: the signature and its time."""


@dataclass(frozen=True, slots=True)
class Provider:
    """One provider, as its module declares it."""

    source: type[Source]
    sign: Signer | None
    """The test kit's signer; None where it needs a test key pair only the kit holds (PayPal,
    SendGrid: `hookinbox.testing` registers theirs when first asked)."""
    example: Callable[[ExampleKeys], Source]
    """The source configured with made-up secrets, as the tests use it."""
    event: Callable[[str], Any]
    """A body (a JSON value; a form's fields where `form`) naming a new event `tag`."""
    signature_header: str | None
    """The header the signature travels in, in the provider's casing; None when nothing
    signed travels in a header (it is in the body, or nothing is signed)."""
    form: bool = False
    """A JSON value given to `sign` is sent as a form (a provider that posts forms)."""
    batch_key: Callable[[Any], str] | None = None
    """For a batch: the key the only event of `event(tag)` is stored under (the answer to a
    batch counts its events instead of naming one)."""
    forgery: Callable[[], dict[str, Any]] = lambda: {"secret": "not-the-secret"}
    """`sign` fields that sign as a stranger would: another secret, or another key."""
    signed_in_body: bool = False
    """The signature travels in the body (a signature block among the event's fields)."""
    new_each_delivery: bool = False
    """Each delivery is an event of its own, a retry too: a wake-up that names no change and
    has no id (Dropbox), whose handler reads what changed from the provider."""
    simulation: Simulation | None = None
    """How `hookinbox simulate` sends as this provider; None where it does not."""

    @property
    def signed(self) -> bool:
        """Whether a delivery carries a signature at all (one that fetches what it verifies
        does not)."""
        return self.signature_header is not None or self.signed_in_body


_PROVIDERS: dict[type[Source], Provider] = {}


def provider(
    source: type[Source],
    *,
    sign: Signer | None,
    example: Callable[[ExampleKeys], Source],
    event: Callable[[str], Any],
    signature_header: str | None,
    form: bool = False,
    batch_key: Callable[[Any], str] | None = None,
    forgery: Callable[[], dict[str, Any]] | None = None,
    signed_in_body: bool = False,
    new_each_delivery: bool = False,
    simulation: Simulation | None = None,
) -> Provider:
    """Declare `source`'s provider (once, in its module)."""
    if source in _PROVIDERS:
        raise ValueError(f"{source.__name__} is declared twice")
    declared = Provider(
        source,
        sign,
        example,
        event,
        signature_header,
        form,
        batch_key,
        signed_in_body=signed_in_body,
        new_each_delivery=new_each_delivery,
        simulation=simulation,
    )
    if forgery is not None:
        declared = dataclasses.replace(declared, forgery=forgery)
    _PROVIDERS[source] = declared
    return declared


def provider_of(cls: type[Source]) -> Provider | None:
    """The provider `cls` was declared with; None for a class declared by no module."""
    return _PROVIDERS.get(cls)


# -- what signers share -------------------------------------------------------------------------


def body_id(source: Source, body: bytes, prefix: str = "") -> str:
    """A stable id for a body: the same body is the same event (a redelivery)."""
    digest = hashlib.sha256(body).hexdigest()
    return prefix + str(uuid.uuid5(_NAMESPACE, f"{source.name}:{digest}"))


def secret_key(source: Any, fields: dict[str, Any]) -> bytes:
    """The HMAC key: the `secret` field (as the provider's secret is written) or the source's
    first configured secret."""
    secret = fields.pop("secret", None)
    if secret is None:
        return bytes(source._keys[0])
    return bytes(source.decode_key(secret) if hasattr(source, "decode_key") else secret.encode())


def mac(key: bytes, message: bytes, algorithm: str = "sha256") -> bytes:
    return hmac.new(key, message, algorithm).digest()


def hex_mac(key: bytes, message: bytes, algorithm: str = "sha256") -> str:
    return mac(key, message, algorithm).hex()


def b64_mac(key: bytes, message: bytes, algorithm: str = "sha256") -> str:
    return base64.b64encode(mac(key, message, algorithm)).decode()


def iso(timestamp: int) -> str:
    """Unix seconds as ISO 8601 in UTC, to the second, with a `Z`."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def json_headers(fields: dict[str, Any]) -> dict[str, str]:
    return {"Content-Type": fields.pop("content_type", JSON)}


def json_object(body: bytes) -> dict[str, Any] | None:
    """The body as a JSON object, or None."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None
