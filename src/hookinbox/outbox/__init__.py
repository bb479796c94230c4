"""The transactional outbox: destinations, and the relay that delivers to them."""

from hookinbox.outbox._destinations import (
    CallableDestination,
    DeliveryError,
    Destination,
    HTTPDestination,
    Undeliverable,
    parse_retry_after,
)
from hookinbox.outbox._relay import MessageQueue, Relay

__all__ = [
    "CallableDestination",
    "DeliveryError",
    "Destination",
    "HTTPDestination",
    "MessageQueue",
    "Relay",
    "Undeliverable",
    "parse_retry_after",
]
