"""`BrokerSource`: events that reach the inbox through a broker's queue, not over HTTP.

A broker authenticated its publisher already, so there is no signature to check; what a
source still says is where the event's key and type are: a header of the message, the
broker's message id, or a dotted path in the JSON body (`Location`). The consumer hands
each message to the inbox's ordinary ingest (`inbox.ahandle`), with the message's headers,
its message id and subject as headers of hookinbox's own (`MESSAGE_ID`, `SUBJECT`).

Nothing but a consumer of this process may deliver to such a source: a POST on its HTTP
path would be an unsigned delivery. Each `BrokerSource` makes a random token when it is
built; its consumers send it in `TOKEN`, and `verify` refuses (401) whatever lacks it. The
token is never stored (it is not among `stored_headers`) and never leaves the process.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from hookinbox._errors import BadSignature, ConfigurationError, MissingHeader
from hookinbox.sources import Identity, Source
from hookinbox.sources._identity import event_key, lookup, optional_text, parse_json
from hookinbox.sources._signatures import Headers

MESSAGE_ID = "x-hookinbox-message-id"
"""The broker's message id, as the consumer hands it over (AMQP's `message_id` property,
JetStream's `Nats-Msg-Id` header); a publisher's header of that name is replaced."""
SUBJECT = "x-hookinbox-subject"
"""The routing key (RabbitMQ) or subject (NATS) the message was published with."""
TOKEN = "x-hookinbox-broker"
"""The in-process token that tells a consumer's delivery from an HTTP request."""

Kind = Literal["message_id", "subject", "header", "payload"]


@dataclass(frozen=True, slots=True)
class Location:
    """Where a value is in a broker message: `message_id`, `subject`, `header:NAME` or
    `payload:DOTTED.PATH`."""

    kind: Kind
    name: str = ""

    @classmethod
    def parse(cls, text: str, what: str, *, allowed: tuple[Kind, ...]) -> Location:
        spelled = ", ".join(f"{k}:NAME" if k in ("header", "payload") else k for k in allowed)
        if not isinstance(text, str):
            raise ConfigurationError(f"{what} must be a string ({spelled}), not {text!r}")
        kind, colon, name = text.partition(":")
        if kind not in allowed or bool(colon) != (kind in ("header", "payload")):
            raise ConfigurationError(f"{what} must be one of {spelled}; got {text!r}")
        if colon and (not name or name != name.strip() or ".." in name):
            raise ConfigurationError(f"{what} names no {kind}: {text!r}")
        if kind == "header":
            name = name.lower()
        return cls(kind, name)

    @property
    def header(self) -> str | None:
        """The header this location reads, if any (kept with the event)."""
        if self.kind == "header":
            return self.name
        return {"message_id": MESSAGE_ID, "subject": SUBJECT}.get(self.kind)

    def read(self, headers: Headers, payload: Any) -> Any:
        if self.kind == "payload":
            return lookup(payload, self.name)
        return headers.get(self.header or "")

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}" if self.name else self.kind


class BrokerSource(Source):
    """A source fed by a broker consumer (`RabbitMQConsumer`, `JetStreamConsumer`).

    `key` names each event's idempotency key: `"message_id"` (the broker message's id),
    `"header:NAME"` (a message header) or `"payload:DOTTED.PATH"` (in the JSON body).
    `type` names its event type the same ways, or `"subject"` (the routing key or subject
    it was published with); None stores events without a type (handlers for any type run).
    A message whose key is missing, or whose body is not JSON where the key or the type is
    read from it, is refused and goes to the broker's dead-letter route.
    """

    default_name = "broker"

    def __init__(
        self,
        name: str,
        *,
        key: str,
        type: str | None = None,  # the event's type, as every source says it
        redelivery_window: timedelta = timedelta(days=7),
    ) -> None:
        super().__init__(name=name)
        self.key = Location.parse(key, "key", allowed=("message_id", "header", "payload"))
        self.type = (
            None
            if type is None
            else Location.parse(type, "type", allowed=("subject", "header", "payload"))
        )
        self.redelivery_window = redelivery_window
        self.token = secrets.token_urlsafe(24)
        read = (self.key.header, self.type.header if self.type else None, MESSAGE_ID, SUBJECT)
        self.stored_headers = tuple(dict.fromkeys(h for h in read if h))
        self.signature_headers = (TOKEN,)
        self._needs_json = "payload" in (self.key.kind, self.type.kind if self.type else None)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        given = headers.get(TOKEN)
        if given is None:
            raise MissingHeader(f"{self.name!r} takes events from a broker consumer only")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            raise BadSignature(f"{self.name!r} takes events from a broker consumer only")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json(body) if self._needs_json else None
        event_type = None
        if self.type is not None:
            event_type = optional_text(self.type.read(headers, payload))
        return Identity(
            event_id=event_key(self.key.read(headers, payload), f"key ({self.key})"),
            event_type=event_type,
            occurred_at=None,
            payload=payload,
        )

    def __repr__(self) -> str:
        kind = None if self.type is None else str(self.type)
        return f"BrokerSource({self.name!r}, key={str(self.key)!r}, type={kind!r})"
