"""Mollie: signed next-generation events, and classic webhooks verified by fetching.

`Mollie` takes the next-generation webhooks: `X-Mollie-Signature: sha256=<hex>`, the
HMAC-SHA256 of the body with the signing secret (several secrets verify during a rotation),
keyed by the event's `id` (`event_...`). Mollie signs no timestamp.

`MollieClassic` takes the classic webhooks, which carry only a form body `id=tr_...` and no
signature: anyone can send one. So the call is never trusted; it only says "look at tr_x".
The source fetches the resource from Mollie's API and stores what it fetched. The key is the
id plus the fetched state (`tr_x:paid`, with `:refunded=5.00` once money is refunded): a
repeated call for an unchanged payment is a duplicate, a real change is a new event. An id
Mollie does not know is answered 200 and not stored (`DeliveryIgnored`), like a known one;
a fetch that fails is answered 503 (`VerificationUnavailable`) so Mollie calls again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import parse_qs

from hookinbox._errors import (
    DeliveryIgnored,
    PayloadError,
    VerificationError,
    VerificationUnavailable,
)
from hookinbox._logging import logger
from hookinbox.sources._base import Source
from hookinbox.sources._handshakes import Query
from hookinbox.sources._identity import (
    Identity,
    event_key,
    lookup,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import FORM, hex_mac, json_headers, provider, secret_key
from hookinbox.sources._secrets import secrets_tuple
from hookinbox.sources._signatures import Headers, check_prefixed_hex_hmac

log = logger("hookinbox.sources._mollie")

PREFIX = "sha256="
# Mollie's retry schedule is not in the provider facts: a conservative default, configurable.
DEFAULT_REDELIVERY_WINDOW = timedelta(days=3)

ResourceFetch = Callable[[str], Mapping[str, Any] | None]
"""Loads a resource by id from Mollie's API: the resource as JSON, or None if Mollie has no
such resource. Anything it raises is answered 503. It runs in the receiver's worker thread, so
it may block; give it a timeout well inside Mollie's answer deadline."""

RESOURCE_ID = re.compile(r"[a-z]{1,10}_[A-Za-z0-9]{1,64}")
DEFAULT_STATE_FIELDS: Mapping[str, str] = {
    "refunded": "amountRefunded.value",
    "chargedback": "amountChargedBack.value",
}
"""Besides `status`, the fetched fields whose change makes a new event (a refund or a chargeback
leaves a payment `paid`). Each shows in the key as `label=value` when present and not zero."""


class Mollie(Source):
    """Next-generation webhooks: signed events with an `event_...` id."""

    default_name = "mollie"
    redelivery_window = DEFAULT_REDELIVERY_WINDOW
    stored_headers = ("x-mollie-signature",)

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        name: str | None = None,
        redelivery_window: timedelta | None = None,
    ) -> None:
        super().__init__(name=name)
        self._keys = [s.encode() for s in secrets_tuple(secret)]
        if redelivery_window is not None:
            self.redelivery_window = redelivery_window

    signature_headers = ("x-mollie-signature",)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        # During a rotation Mollie sends one header per secret: any of them may match.
        check_prefixed_hex_hmac(headers, body, self._keys, prefix=PREFIX, name="X-Mollie-Signature")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        return Identity(
            event_id=event_key(payload.get("id")),
            event_type=optional_text(payload.get("type")),
            occurred_at=parse_time(payload.get("createdAt")),
            payload=payload,
        )


class MollieClassic(Source):
    """Classic webhooks (`id=tr_...`, unsigned): fetch-to-verify, keyed by id and state."""

    default_name = "mollie-classic"
    verifies_over_network = True  # every call fetches the resource from the API
    redelivery_window = DEFAULT_REDELIVERY_WINDOW

    def __init__(
        self,
        *,
        fetch: ResourceFetch,
        name: str | None = None,
        state_fields: Mapping[str, str] = DEFAULT_STATE_FIELDS,
        redelivery_window: timedelta | None = None,
    ) -> None:
        super().__init__(name=name)
        self._fetch = fetch
        self.state_fields = dict(state_fields)
        if redelivery_window is not None:
            self.redelivery_window = redelivery_window

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        self._fetched(body)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        """Fetches again; `authenticate`, which the receiver calls, fetches once."""
        return self._identity(*self._fetched(body))

    def authenticate(
        self, headers: Headers, body: bytes, *, now: float, query: Query | None = None
    ) -> Identity:
        return self._identity(*self._fetched(body))

    def _fetched(self, body: bytes) -> tuple[str, Mapping[str, Any]]:
        resource_id = _resource_id(body)
        try:
            resource = self._fetch(resource_id)
        except (VerificationUnavailable, DeliveryIgnored):
            raise
        except Exception as exc:  # the user's fetch: any failure means "try again later"
            log.warning("fetching Mollie resource %s failed", resource_id, exc_info=True)
            raise VerificationUnavailable(
                f"fetching {resource_id} from Mollie failed: {type(exc).__name__}"
            ) from exc
        if resource is None:
            raise DeliveryIgnored(f"Mollie has no resource {resource_id}")
        if not isinstance(resource, Mapping) or resource.get("id") != resource_id:
            log.error("the Mollie fetch function returned no resource %s", resource_id)
            raise VerificationUnavailable(f"the fetch returned no resource {resource_id}")
        return resource_id, resource

    def _identity(self, resource_id: str, resource: Mapping[str, Any]) -> Identity:
        status = optional_text(resource.get("status"))
        if status is None:
            raise PayloadError(f"the fetched resource {resource_id} has no status")
        changes = [
            f"{label}={value}"
            for label, path in self.state_fields.items()
            if (value := _nonzero(lookup(resource, path))) is not None
        ]
        try:
            stored = json.dumps(
                dict(resource), separators=(",", ":"), ensure_ascii=False, allow_nan=False
            ).encode()
        except (TypeError, ValueError, RecursionError) as exc:
            raise PayloadError(f"the fetched resource {resource_id} is not JSON") from exc
        kind = optional_text(resource.get("resource")) or "resource"
        # `<status>At` (paidAt) dates a status change; a refund or chargeback has no such field.
        occurred_at = None if changes else parse_time(resource.get(f"{status}At"))
        return Identity(
            event_id=event_key(":".join([resource_id, status, *changes])),
            event_type=optional_text(f"{kind}.{status}"),
            occurred_at=occurred_at,
            payload=json.loads(stored),
            body=stored,
        )


def _resource_id(body: bytes) -> str:
    """The `id` of a classic webhook's form body, shaped like a Mollie id, or refused."""
    try:
        fields = parse_qs(body.decode("ascii"), strict_parsing=True, max_num_fields=8)
    except (UnicodeDecodeError, ValueError) as exc:
        raise VerificationError("the body is not a form naming a Mollie id (id=tr_...)") from exc
    ids = fields.get("id", [])
    if len(ids) != 1 or not RESOURCE_ID.fullmatch(ids[0]):
        raise VerificationError("the body is not a form naming a Mollie id (id=tr_...)")
    return ids[0]


def _nonzero(value: object) -> str | None:
    """An amount as text, or None when absent or zero (no refund is no change)."""
    text = optional_text(value, limit=32)
    if text is None:
        return None
    try:
        return None if Decimal(text) == 0 else text
    except InvalidOperation:
        return text


def sign(source: Mollie, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = hex_mac(secret_key(source, fields), body)
    return {**json_headers(fields), "X-Mollie-Signature": f"sha256={digest}"}


def sign_classic(
    source: MollieClassic, body: bytes, t: int, fields: dict[str, Any]
) -> dict[str, str]:
    return {"Content-Type": FORM}  # unsigned: the source fetches the resource to verify


def example_fetch(resource_id: str) -> Mapping[str, Any]:
    """Mollie classic's fetch in the examples: every payment asked about is paid."""
    return {"id": resource_id, "resource": "payment", "status": "paid"}


MOLLIE = provider(
    Mollie,
    sign=sign,
    example=lambda keys: Mollie(secret="mollie-example"),
    event=lambda tag: {"id": f"evt_{tag}", "type": "order.paid", "created": 1_700_000_000},
    signature_header="X-Mollie-Signature",
)
MOLLIE_CLASSIC = provider(
    MollieClassic,
    sign=sign_classic,
    example=lambda keys: MollieClassic(fetch=example_fetch),
    event=lambda tag: {"id": f"tr_{tag}"},
    signature_header=None,
    form=True,
)
