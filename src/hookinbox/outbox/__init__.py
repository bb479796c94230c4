"""The transactional outbox's destinations: where `ctx.outbox.send(...)` messages go.

A handler writes a message in its own transaction; the relay (in `hookinbox worker`, or
`hookinbox relay`) delivers it at least once, under a stable key, through the destination
named in the message: an `HTTPDestination`, a `JetStreamDestination`, a `RabbitMQDestination`,
or a function registered with `@inbox.destination(name)`. See docs/outbox.md.
"""

from hookinbox.outbox._destinations import (
    CallableDestination,
    DeliveryError,
    Destination,
    HTTPDestination,
    Undeliverable,
)
from hookinbox.outbox._jetstream import JetStreamDestination
from hookinbox.outbox._rabbitmq import RabbitMQDestination

__all__ = [
    "CallableDestination",
    "DeliveryError",
    "Destination",
    "HTTPDestination",
    "JetStreamDestination",
    "RabbitMQDestination",
    "Undeliverable",
]
