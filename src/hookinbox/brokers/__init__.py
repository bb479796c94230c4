"""Broker queues as sources of the inbox: events that arrive through RabbitMQ or NATS
JetStream, stored once by a key the user names, acked to the broker after the commit.

    inbox.add_source(BrokerSource("orders", key="header:x-event-id", type="subject"))
    consumer = RabbitMQConsumer(inbox, "orders", url="amqp://...", queue="orders")
    await consumer.run()  # until consumer.stop()

`BrokerSource` needs nothing beyond hookinbox; `RabbitMQConsumer` needs aio-pika
(`pip install 'hookinbox[rabbitmq]'`), `JetStreamConsumer` nats-py (`hookinbox[nats]`),
each imported only when its name is first used. docs/brokers.md states the guarantees.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hookinbox._errors import BrokerUnavailable
from hookinbox.brokers._source import BrokerSource

if TYPE_CHECKING:
    from hookinbox.brokers._jetstream import JetStreamConsumer
    from hookinbox.brokers._rabbitmq import RabbitMQConsumer

_LAZY = {
    "JetStreamConsumer": "hookinbox.brokers._jetstream",
    "RabbitMQConsumer": "hookinbox.brokers._rabbitmq",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BrokerSource", "BrokerUnavailable", "JetStreamConsumer", "RabbitMQConsumer"]
