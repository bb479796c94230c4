"""SendGrid Event Webhook: an ECDSA P-256 signature over the timestamp and the body.

`X-Twilio-Email-Event-Webhook-Signature` is the base64 DER signature (ECDSA with SHA-256) of
the `X-Twilio-Email-Event-Webhook-Timestamp` text followed by the raw body, made with the
private half of the verification key SendGrid shows under the Event Webhook's settings
(base64 DER, a P-256 public key). The body is a JSON array of events: one delivery is a batch,
and each event is stored under its `sg_event_id`, which SendGrid keeps on every retry.

Needs `cryptography` (the `crypto` extra): `hookinbox.sources.SendGrid` loads this module on
first use, so the core install does not import it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from cryptography.hazmat.primitives.serialization import load_der_public_key, load_pem_public_key

from hookinbox._errors import BadSignature, ConfigurationError, PayloadError
from hookinbox.sources._base import BatchSource
from hookinbox.sources._identity import Identity, event_key, optional_text, parse_time
from hookinbox.sources._json_slices import array_items
from hookinbox.sources._provider import provider
from hookinbox.sources._secrets import secrets_tuple
from hookinbox.sources._signatures import (
    DEFAULT_TOLERANCE,
    Headers,
    check_tolerance,
    distinct_signatures,
    parse_timestamp,
    require_header,
    signature_items,
)

PREHASHED = ec.ECDSA(Prehashed(hashes.SHA256()))
SIGNATURE = "x-twilio-email-event-webhook-signature"
TIMESTAMP = "x-twilio-email-event-webhook-timestamp"


def load_public_key(text: str) -> ec.EllipticCurvePublicKey:
    """A P-256 verification key: base64 DER as SendGrid shows it, or a PEM block."""
    try:
        if text.lstrip().startswith("-----BEGIN"):
            key = load_pem_public_key(text.encode())
        else:
            key = load_der_public_key(base64.b64decode("".join(text.split()), validate=True))
    except (ValueError, binascii.Error, UnsupportedAlgorithm) as exc:
        raise ConfigurationError("a SendGrid verification key is base64 DER or PEM") from exc
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        raise ConfigurationError("a SendGrid verification key is an ECDSA P-256 public key")
    return key


class SendGrid(BatchSource):
    default_name = "sendgrid"
    # SendGrid retries a failed POST for up to 24 hours; a day's margin over it.
    redelivery_window = timedelta(days=2)
    stored_headers = (SIGNATURE, TIMESTAMP)
    signature_headers = (SIGNATURE, TIMESTAMP)

    def __init__(
        self,
        *,
        public_key: str | Sequence[str],
        name: str | None = None,
        tolerance: float | None = DEFAULT_TOLERANCE,
    ) -> None:
        super().__init__(name=name)
        self._keys = [load_public_key(text) for text in secrets_tuple(public_key)]
        self.tolerance = tolerance

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        timestamp_text = require_header(headers, TIMESTAMP)
        timestamp = parse_timestamp(timestamp_text)
        signed = timestamp_text.encode() + body
        signatures = []
        for item in signature_items(
            headers, SIGNATURE, what="X-Twilio-Email-Event-Webhook-Signature"
        ):
            try:
                signatures.append(base64.b64decode(item, validate=True))
            except ValueError:  # binascii.Error, or text that is not ASCII
                continue
        if not signatures:
            raise BadSignature("X-Twilio-Email-Event-Webhook-Signature is not base64")
        # The body is hashed once, and every key checked against every signature with that
        # digest: a candidate costs an elliptic-curve check, not another pass over the body,
        # and at most `MAX_EXPENSIVE_CANDIDATES` distinct ones are checked. Without stopping at
        # a match (as for HMACs).
        distinct = distinct_signatures(signatures, "ECDSA signatures")
        digest = hashlib.sha256(signed).digest()
        verified = False
        for key in self._keys:
            for signature in distinct:
                try:
                    key.verify(signature, digest, PREHASHED)
                    verified = True
                except (InvalidSignature, ValueError):
                    continue
        if not verified:
            raise BadSignature()
        check_tolerance(timestamp, now=now, tolerance=self.tolerance)

    def identify_batch(self, headers: Headers, body: bytes) -> list[Identity]:
        return self.identify_items(array_items(body), _event)


def _event(item: Any) -> Identity:
    if not isinstance(item, dict):
        raise PayloadError("an event of the batch is not a JSON object")
    return Identity(
        event_id=event_key(item.get("sg_event_id"), "sg_event_id"),
        event_type=optional_text(item.get("event")),
        occurred_at=parse_time(item.get("timestamp")),
        payload=item,
    )


PROVIDER = provider(
    SendGrid,
    sign=None,  # hookinbox.testing's, with its test key's private half
    example=lambda keys: SendGrid(public_key=keys.p256),
    event=lambda tag: [
        {"sg_event_id": f"sg_{tag}", "event": "delivered", "timestamp": 1_700_000_000}
    ],
    signature_header="X-Twilio-Email-Event-Webhook-Signature",
    forgery=lambda: {"private_key": ec.generate_private_key(ec.SECP256R1())},
    batch_key=lambda events: str(events[0]["sg_event_id"]),
)
